"""Private model selection: DPGridSearchCV against defaults and hindsight.

At a total epsilon of 1, 3 and 10 (delta = 1e-5) on diabetes, breast_cancer
(the utility protocol of ``dp_glm_sklearn._demo``: random 75/25 splits, a
StandardScaler fit on the training split, public bounds from the data sets'
documentation) and a synthetic regression, compare the test metric of

- ``defaults``: the estimator with the library's default ``norm_bound`` and
  ``max_iter`` (public bounds as in the demo), trained at epsilon;
- ``hindsight``: the best fixed grid point, chosen on the *test* metric
  (median over the runs), each trained at epsilon -- not a private
  procedure, the target the search should approach;
- ``auto``: the estimator with ``norm_bound="auto"`` (the private grid over
  the norm bound alone, ``max_iter`` default), total budget epsilon;
- ``search``: DPGridSearchCV over the same grid with total budget epsilon
  (candidates, selection and refit included; ``--no-refit`` keeps the
  chosen candidate as trained on the training part).

The grid is ``norm_bound`` x ``max_iter`` and contains the defaults
(``norm_bound=10``, ``max_iter=None``: the rule of ``default_max_iter`` at
each fit's own budget). Prints a table (medians over
splits x noise seeds) and saves it under ``benchmarks/results/``.

Run: ``python benchmarks/model_selection.py [--quick] [--no-refit]``
"""

import argparse
import pathlib
import time
import warnings

import numpy as np
from sklearn.model_selection import ParameterGrid, train_test_split
from sklearn.preprocessing import StandardScaler

from dp_glm_sklearn import DPGridSearchCV, DPLinearRegression
from dp_glm_sklearn._demo import DATASETS

RESULTS = pathlib.Path(__file__).parent / "results"
DELTA = 1e-5
EPSILONS = (1.0, 3.0, 10.0)


def _synthetic(return_X_y=True):
    """Linear regression: n = 20000, d = 10, signal-to-noise ratio 2, labels in [-4, 4]."""
    rng = np.random.default_rng(12345)
    n, d = 20000, 10
    w = rng.normal(size=d)
    w *= np.sqrt(2.0) / np.linalg.norm(w)  # Var(x @ w) = 2, noise variance 1
    X = rng.normal(size=(n, d))
    y = np.clip(X @ w + rng.normal(size=n), -4.0, 4.0)
    return X, y


SETUPS = {
    "diabetes": {
        **DATASETS["diabetes"],
        "public": dict(feature_norm=3.0, y_bound=(0.0, 400.0)),
        "grid": {"norm_bound": [10.0, 20.0, 40.0, 80.0], "max_iter": [None, 10]},
    },
    "breast_cancer": {
        **DATASETS["breast_cancer"],
        "public": dict(feature_norm=4.0, classes=[0, 1]),
        "grid": {"norm_bound": [1.0, 2.5, 5.0, 10.0], "max_iter": [None, 100]},
    },
    "synthetic": {
        "load": _synthetic,
        "metric": "R^2",
        "estimator": DPLinearRegression,
        # Standardized features: rows of norm about sqrt(10) = 3.2.
        "public": dict(feature_norm=4.5, y_bound=4.0),
        "grid": {"norm_bound": [0.5, 1.0, 2.5, 10.0], "max_iter": [None, 20]},
    },
}


def run(name, epsilons, *, n_splits, n_seeds, search_kwargs):
    """Test metrics ``{(kind, eps): array}`` for one data set."""
    spec = SETUPS[name]
    X, y = spec["load"](return_X_y=True)
    Est, public = spec["estimator"], spec["public"]
    grid = list(ParameterGrid(spec["grid"]))
    out = {}
    for split in range(n_splits):
        X_tr, X_te, y_tr, y_te = train_test_split(X, y, test_size=0.25, random_state=split)
        scaler = StandardScaler().fit(X_tr)
        X_tr, X_te = scaler.transform(X_tr), scaler.transform(X_te)
        for eps in epsilons:
            for seed in range(n_seeds):
                common = dict(**public, epsilon=eps, delta=DELTA, random_state=seed)
                score = Est(**common).fit(X_tr, y_tr).score(X_te, y_te)
                out.setdefault(("defaults", eps), []).append(score)
                score = Est(**common, norm_bound="auto").fit(X_tr, y_tr).score(X_te, y_te)
                out.setdefault(("auto", eps), []).append(score)
                for g, params in enumerate(grid):
                    score = Est(**common, **params).fit(X_tr, y_tr).score(X_te, y_te)
                    out.setdefault((g, eps), []).append(score)
                search = DPGridSearchCV(Est(**public), spec["grid"], epsilon=eps, delta=DELTA,
                                        random_state=seed, **search_kwargs).fit(X_tr, y_tr)
                out.setdefault(("search", eps), []).append(search.score(X_te, y_te))
                out.setdefault(("chosen", eps), []).append(search.best_index_)
    return grid, {k: np.asarray(v) for k, v in out.items()}


def table(results, epsilons):
    head = (f"{'dataset':<14} {'metric':<8} {'eps':>4} {'defaults':>9} {'hindsight':>9} "
            f"{'auto':>7} {'search':>8} {'gap':>7}  hindsight params / most chosen")
    lines = [head]
    for name, (grid, res) in results.items():
        for eps in epsilons:
            medians = [np.median(res[(g, eps)]) for g in range(len(grid))]
            best = int(np.argmax(medians))
            hind, search = medians[best], np.median(res[("search", eps)])
            default = np.median(res[("defaults", eps)])
            auto = np.median(res[("auto", eps)])
            gap = (hind - search) / abs(hind)
            chosen = np.bincount(res[("chosen", eps)], minlength=len(grid)).argmax()
            lines.append(
                f"{name:<14} {SETUPS[name]['metric']:<8} {eps:>4g} {default:>9.3f} "
                f"{hind:>9.3f} {auto:>7.3f} {search:>8.3f} {gap:>7.1%}  "
                f"{grid[best]} / {grid[chosen]}")
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="2 splits x 2 seeds")
    parser.add_argument("--no-refit", action="store_true", help="DPGridSearchCV(refit=False)")
    parser.add_argument("--scoring", default=None)
    parser.add_argument("--validation-fraction", type=float, default=0.5)
    parser.add_argument("--datasets", nargs="*", default=list(SETUPS))
    args = parser.parse_args()
    splits, seeds = (2, 2) if args.quick else (8, 4)
    search_kwargs = dict(refit=not args.no_refit, scoring=args.scoring,
                         validation_fraction=args.validation_fraction)
    start = time.perf_counter()
    results = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        for name in args.datasets:
            results[name] = run(name, EPSILONS, n_splits=splits, n_seeds=seeds,
                                search_kwargs=search_kwargs)
    text = table(results, EPSILONS)
    tail = (f"\nmedian test metric over {splits} splits x {seeds} noise seeds; delta={DELTA:g}; "
            f"search: {search_kwargs}; gap = (hindsight - search) / |hindsight|; "
            f"{time.perf_counter() - start:.0f} s")
    print(text + tail)
    if not args.quick and args.datasets == list(SETUPS):
        suffix = "_no_refit" if args.no_refit else ""
        RESULTS.mkdir(exist_ok=True)
        (RESULTS / f"model_selection{suffix}.txt").write_text(text + tail + "\n")


if __name__ == "__main__":
    main()
