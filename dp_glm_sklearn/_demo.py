"""``python -m dp_glm_sklearn demo``: a privacy-utility table on bundled data.

Protocol (shared with ``benchmarks/utility.py``): random train/test splits
(75/25); a StandardScaler fit on the training split (as in scikit-learn's
examples; in a real deployment the scaling must be public or paid for, see the
user guide); rows clipped by the estimator to the public ``feature_norm``;
several noise seeds per split; the median test metric over all fits, next to
non-private scikit-learn on the same splits.
"""

import argparse
import time
import warnings

import numpy as np
from sklearn.datasets import load_breast_cancer, load_diabetes
from sklearn.linear_model import HuberRegressor, LinearRegression, LogisticRegression
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import StandardScaler

from .linear_model import DPHuberRegressor, DPLinearRegression, DPLogisticRegression

#: Bounds for the bundled data sets.  From their documentation: diabetes'
#: target is an integer between 25 and 346, breast_cancer's classes are 0
#: and 1.  Chosen by us, knowing the data (so the table shows what
#: well-chosen bounds give): after standardization a row has norm about
#: sqrt(d), and ``feature_norm`` is 3.5 for diabetes' 10 features and 4 for
#: breast_cancer's 30 (below sqrt(30) = 5.5: most of its rows are clipped,
#: which did better than 6 or 8); the norm bounds 40 and 5 (for diabetes the
#: best of ``benchmarks/model_selection.py``'s grid in hindsight;
#: ``norm_bound="auto"`` or ``DPGridSearchCV`` choose B privately, at a cost
#: in utility: the README's model-selection table). Diabetes is fitted twice: least
#: squares, whose noise grows with ``B * X + Y``, and Huber regression with
#: its default threshold (a quarter of the label range), whose noise does not.
DATASETS = {
    "diabetes": {
        "load": load_diabetes,
        "metric": "R^2",
        "estimator": DPLinearRegression,
        "bounds": dict(feature_norm=3.5, y_bound=(25.0, 346.0), norm_bound=40.0),
        "public": lambda: LinearRegression(),
    },
    "diabetes/huber": {
        "load": load_diabetes,
        "metric": "R^2",
        "estimator": DPHuberRegressor,
        "bounds": dict(feature_norm=3.5, y_bound=(25.0, 346.0), norm_bound=40.0),
        "public": lambda: HuberRegressor(max_iter=1000),
    },
    "breast_cancer": {
        "load": load_breast_cancer,
        "metric": "accuracy",
        "estimator": DPLogisticRegression,
        "bounds": dict(feature_norm=4.0, norm_bound=5.0, classes=[0, 1]),
        "public": lambda: LogisticRegression(max_iter=5000),
    },
}


def evaluate(dataset, epsilons, *, n_splits=5, n_seeds=5, delta=1e-5, **params):
    """Test metric of each fit: ``{epsilon: array of n_splits * n_seeds}``.

    ``epsilon=np.inf`` in ``epsilons`` means non-private scikit-learn.
    Extra ``params`` go to the DP estimator.
    """
    spec = DATASETS[dataset]
    X, y = spec["load"](return_X_y=True)
    scores = {eps: [] for eps in epsilons}
    for split in range(n_splits):
        X_tr, X_te, y_tr, y_te = train_test_split(X, y, test_size=0.25, random_state=split)
        scaler = StandardScaler().fit(X_tr)
        X_tr, X_te = scaler.transform(X_tr), scaler.transform(X_te)
        for eps in epsilons:
            if not np.isfinite(eps):
                scores[eps].append(spec["public"]().fit(X_tr, y_tr).score(X_te, y_te))
                continue
            for seed in range(n_seeds):
                est = spec["estimator"](**{**spec["bounds"], **params}, epsilon=eps,
                                        delta=delta, random_state=seed)
                scores[eps].append(est.fit(X_tr, y_tr).score(X_te, y_te))
    return {eps: np.asarray(v) for eps, v in scores.items()}


def utility_table(epsilons=(0.1, 0.3, 1.0, 3.0, 10.0), *, n_splits=5, n_seeds=5, delta=1e-5):
    """Rows ``(dataset, metric, epsilon, median, q25, q75)``; inf = non-private."""
    rows = []
    for name, spec in DATASETS.items():
        result = evaluate(name, (*epsilons, np.inf), n_splits=n_splits, n_seeds=n_seeds,
                          delta=delta)
        for eps, values in result.items():
            q25, med, q75 = np.percentile(values, [25, 50, 75])
            rows.append((name, spec["metric"], eps, med, q25, q75))
    return rows


def format_table(rows):
    lines = [f"{'dataset':<14} {'metric':<9} {'epsilon':>8} {'median':>8} {'IQR':>19}"]
    for name, metric, eps, med, q25, q75 in rows:
        label = "non-priv" if not np.isfinite(eps) else f"{eps:g}"
        lines.append(
            f"{name:<14} {metric:<9} {label:>8} {med:>8.3f}   [{q25:7.3f}, {q75:7.3f}]"
        )
    return "\n".join(lines)


def _positive_int(text):
    """argparse type: an integer >= 1."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be an integer >= 1, got {text!r}")
    return value


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m dp_glm_sklearn")
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="privacy-utility table on bundled data")
    demo.add_argument("--splits", type=_positive_int, default=3,
                      help="random 75/25 train/test splits (default 3; the README table: 20)")
    demo.add_argument("--seeds", type=_positive_int, default=3,
                      help="noise seeds per split (default 3; the README table: 5)")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    print("dp_glm_sklearn demo: test metric of DP models vs non-private scikit-learn")
    print(f"(median over {args.splits} splits x {args.seeds} noise seeds, delta=1e-5)\n")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        rows = utility_table(n_splits=args.splits, n_seeds=args.seeds)
    print(format_table(rows))
    print(f"\n{time.perf_counter() - start:.1f} s")
    return 0
