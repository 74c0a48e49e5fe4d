"""Private model selection: DPGridSearchCV against defaults and hindsight.

At a total epsilon of 1, 3 and 10 (delta = 1e-5) on diabetes, breast_cancer
(the utility protocol of ``dp_glm_sklearn._demo``: random 75/25 splits, a
StandardScaler fit on the training split, and the demo's public bounds, from
the data sets' documentation) and a synthetic regression -- the issue's three data
sets -- and on diabetes with ``DPHuberRegressor`` (outside the criterion), compare the
test metric of

- ``defaults``: the estimator with the library's default ``norm_bound`` and
  ``max_iter`` (public bounds as in the demo), trained at epsilon;
- ``hindsight``: the best fixed grid point, chosen on the *test* metric
  (median over the runs), each trained at epsilon -- not a private
  procedure, the target the search should approach;
- ``auto``: the estimator with ``norm_bound="auto"`` (the private grid over
  the norm bound alone, ``max_iter`` default), total budget epsilon;
- ``search``: DPGridSearchCV over the same grid with total budget epsilon
  and the library's defaults otherwise (scoring, selection,
  ``validation_fraction``). The benchmark passes ``refit=True`` explicitly
  (candidates, selection and refit share the budget; the class's default is
  ``refit=False``); ``--no-refit`` measures ``refit=False`` (the chosen
  candidate, as trained on the training part, predicts).
- ``ceiling`` (refit only): the best fixed grid point, chosen in hindsight
  like ``hindsight`` but trained at the refit's own budget (its event in
  the search's ``privacy_events_``): what the search would reach if its private selection
  always picked the best parameters. Not a private procedure either; it
  separates the cost of sharing the budget with the search (hindsight -
  ceiling) from the cost of the selection itself (ceiling - search).

The grid is ``norm_bound`` x ``max_iter`` and contains the defaults
(``norm_bound=10``, ``max_iter=None``: the rule of ``default_max_iter`` at
each fit's own budget). The issue's criterion is checked at epsilon = 3 on
its three data sets: the search within 10% of hindsight on each, and better
than the defaults on at least two.

A second table compares confidence boosting
(``DPConfidenceBoosting(estimator, n_models=3)``, default parameters, total
budget epsilon) with the single fit ``defaults``: median and 10th percentile
(the bad runs boosting is meant to remove) of the test metric.

Every fit of run ``(split, seed)`` uses ``random_state = split * n_seeds +
seed``: all runs have independent noise. (Reusing ``range(n_seeds)`` on every
split, as an earlier version did, gives the search the same permutation and
candidate noise on every split of a data set of fixed size, so its medians
rest on ``n_seeds`` noise draws only.) 32 runs were too few on small data (on
diabetes at epsilon 3 the search's median ranged from 0.19 to 0.31 over five
seed sets of 32), so the benchmark uses 16 splits x 8 seeds = 128 runs per
cell; read differences below about 0.02 on diabetes as noise.

Prints the tables (medians over splits x noise seeds) and saves them under
``benchmarks/results/``.

``--transfer`` prints, for each grid point at a total epsilon of 3, its
median test metric when trained as a candidate (training part, candidate
budget) and as the refit (all training data, refit budget): the search can
only find what is best for the refit if the candidates rank the grid points
the same way (``benchmarks/results/model_selection_transfer.txt``).

Run: ``python benchmarks/model_selection.py [--quick] [--no-refit] [--transfer]``
"""

import argparse
import pathlib
import sys
import time
import warnings

import numpy as np
from sklearn.model_selection import ParameterGrid, train_test_split
from sklearn.preprocessing import StandardScaler

HERE = pathlib.Path(__file__).parent
sys.path.insert(0, str(HERE.parent))  # benchmark the checkout, installed or not

from dp_glm_sklearn import DPConfidenceBoosting, DPGridSearchCV, DPLinearRegression  # noqa: E402
from dp_glm_sklearn._demo import DATASETS  # noqa: E402
from dp_glm_sklearn.privacy import compose  # noqa: E402

RESULTS = HERE / "results"
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


def _public(dataset):
    """The demo's public bounds for a data set, without its norm bound (searched here)."""
    return {k: v for k, v in DATASETS[dataset]["bounds"].items() if k != "norm_bound"}


SETUPS = {
    "diabetes": {
        **DATASETS["diabetes"],
        "public": _public("diabetes"),
        "grid": {"norm_bound": [10.0, 20.0, 40.0, 80.0], "max_iter": [None, 10]},
    },
    # Not one of the three data sets: the same data, grid and bounds with
    # the Huber loss (threshold (346 - 25) / 4), whose gradient bound min(M, B X + Y)
    # does not grow with the norm bound; it shows what the search reaches on diabetes
    # when the loss, not the selection, is what limits utility.
    "diabetes/huber": {
        **DATASETS["diabetes/huber"],
        "public": _public("diabetes/huber"),
        "grid": {"norm_bound": [10.0, 20.0, 40.0, 80.0], "max_iter": [None, 10]},
    },
    "breast_cancer": {
        **DATASETS["breast_cancer"],
        "public": _public("breast_cancer"),
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


#: The issue's three data sets, on which its criterion is checked.
CRITERION_DATASETS = ("diabetes", "breast_cancer", "synthetic")


def _splits(name, n_splits):
    """The benchmark's random 75/25 splits, standardized on the training part."""
    X, y = SETUPS[name]["load"](return_X_y=True)
    for split in range(n_splits):
        X_tr, X_te, y_tr, y_te = train_test_split(X, y, test_size=0.25, random_state=split)
        scaler = StandardScaler().fit(X_tr)
        yield scaler.transform(X_tr), scaler.transform(X_te), y_tr, y_te


def run(name, epsilons, *, n_splits, n_seeds, search_kwargs):
    """Test metrics ``{(kind, eps): array}`` for one data set."""
    spec = SETUPS[name]
    Est, public = spec["estimator"], spec["public"]
    grid = list(ParameterGrid(spec["grid"]))
    out = {}
    for split, (X_tr, X_te, y_tr, y_te) in enumerate(_splits(name, n_splits)):
        for eps in epsilons:
            for seed in range(n_seeds):
                state = split * n_seeds + seed
                common = dict(**public, epsilon=eps, delta=DELTA, random_state=state)
                score = Est(**common).fit(X_tr, y_tr).score(X_te, y_te)
                out.setdefault(("defaults", eps), []).append(score)
                score = Est(**common, norm_bound="auto").fit(X_tr, y_tr).score(X_te, y_te)
                out.setdefault(("auto", eps), []).append(score)
                for g, params in enumerate(grid):
                    score = Est(**common, **params).fit(X_tr, y_tr).score(X_te, y_te)
                    out.setdefault((g, eps), []).append(score)
                search = DPGridSearchCV(Est(**public), spec["grid"], epsilon=eps, delta=DELTA,
                                        random_state=state, **search_kwargs).fit(X_tr, y_tr)
                # The chosen estimator's own score (R^2 / accuracy, as every other
                # column): search.score follows --scoring.
                out.setdefault(("search", eps), []).append(
                    search.best_estimator_.score(X_te, y_te))
                out.setdefault(("chosen", eps), []).append(search.best_index_)
                if search_kwargs.get("refit"):
                    # The refit's own release (the search's second event; the model's
                    # privacy_spent_ is the whole search's).
                    refit_eps, refit_delta = compose(search.privacy_events_[1:], DELTA), DELTA
                    for g, params in enumerate(grid):
                        est = Est(**{**common, "epsilon": refit_eps, "delta": refit_delta},
                                  **params)
                        score = est.fit(X_tr, y_tr).score(X_te, y_te)
                        out.setdefault(("ceiling", g, eps), []).append(score)
                boost = DPConfidenceBoosting(Est(**public), n_models=3, epsilon=eps, delta=DELTA,
                                             random_state=state).fit(X_tr, y_tr)
                out.setdefault(("boost", eps), []).append(
                    boost.best_estimator_.score(X_te, y_te))
    return grid, {k: np.asarray(v) for k, v in out.items()}


def table(results, epsilons):
    head = (f"{'dataset':<14} {'metric':<8} {'eps':>4} {'defaults':>9} {'hindsight':>9} "
            f"{'ceiling':>8} {'auto':>7} {'search':>8} {'gap':>7}  hindsight params / most chosen")
    lines = [head]
    criterion = []
    for name, (grid, res) in results.items():
        for eps in epsilons:
            medians = [np.median(res[(g, eps)]) for g in range(len(grid))]
            best = int(np.argmax(medians))
            hind, search = medians[best], np.median(res[("search", eps)])
            default = np.median(res[("defaults", eps)])
            auto = np.median(res[("auto", eps)])
            gap = (hind - search) / abs(hind)
            chosen = np.bincount(res[("chosen", eps)], minlength=len(grid)).argmax()
            if ("ceiling", 0, eps) in res:
                top = max(np.median(res[("ceiling", g, eps)]) for g in range(len(grid)))
                ceiling = f"{top:>8.3f}"
            else:
                ceiling = f"{'-':>8}"
            lines.append(
                f"{name:<14} {SETUPS[name]['metric']:<8} {eps:>4g} {default:>9.3f} "
                f"{hind:>9.3f} {ceiling} {auto:>7.3f} {search:>8.3f} {gap:>7.1%}  "
                f"{grid[best]} / {grid[chosen]}")
            if eps == 3.0 and name in CRITERION_DATASETS:
                criterion.append((name, gap <= 0.10, search > default))
    if len(criterion) == len(CRITERION_DATASETS):
        within = [name for name, ok, _ in criterion if ok]
        better = [name for name, _, ok in criterion if ok]
        passed = len(within) == len(CRITERION_DATASETS) and len(better) >= 2
        lines.append(
            f"criterion at eps=3 (search within 10% of hindsight everywhere, better than "
            f"defaults on >= 2): {'PASS' if passed else 'FAIL'}; within 10%: {within}; "
            f"better than defaults: {better}")
    return "\n".join(lines)


def boosting_table(results, epsilons):
    lines = [f"{'dataset':<14} {'metric':<8} {'eps':>4} {'single':>8} {'boosted':>8}"
             f" {'single q10':>11} {'boosted q10':>12}"]
    for name, (_, res) in results.items():
        for eps in epsilons:
            single, boost = res[("defaults", eps)], res[("boost", eps)]
            lines.append(
                f"{name:<14} {SETUPS[name]['metric']:<8} {eps:>4g} {np.median(single):>8.3f} "
                f"{np.median(boost):>8.3f} {np.percentile(single, 10):>11.3f} "
                f"{np.percentile(boost, 10):>12.3f}")
    return "\n".join(lines)


def transfer(name, eps, *, n_splits, n_seeds):
    """Each grid point's median test metric at the candidates' budget and at the refit's.

    Candidates are trained as DPGridSearchCV trains them (the library's
    default ``validation_fraction`` and ``refit_share``): on a training part
    of the split's training set, at ``candidate_privacy_``; the refit on the
    whole training set at the refit's budget.  A private selection can only
    find the point that is best at the refit's budget if it is also better at
    the candidates' budget, by more than the spread of one candidate's metric.
    """
    spec = SETUPS[name]
    Est, public = spec["estimator"], spec["public"]
    grid = list(ParameterGrid(spec["grid"]))
    out = {}
    for split, (X_tr, X_te, y_tr, y_te) in enumerate(_splits(name, n_splits)):
        # The budgets (public functions of n, K, epsilon), read off one search.
        search = DPGridSearchCV(Est(**public), spec["grid"], epsilon=eps, delta=DELTA,
                                refit=True, random_state=split).fit(X_tr, y_tr)
        cand_eps = search.candidate_privacy_[0]
        refit_eps = compose(search.privacy_events_[1:], DELTA)  # the refit's own release
        n_part = len(y_tr) - int(round(search.validation_fraction * len(y_tr)))
        for seed in range(n_seeds):
            state = split * n_seeds + seed
            part = np.random.default_rng(state).permutation(len(y_tr))[:n_part]
            for g, params in enumerate(grid):
                cand = Est(**public, **params, epsilon=cand_eps, delta=DELTA,
                           random_state=state).fit(X_tr[part], y_tr[part])
                out.setdefault(("candidate", g), []).append(cand.score(X_te, y_te))
                refit = Est(**public, **params, epsilon=refit_eps, delta=DELTA,
                            random_state=state).fit(X_tr, y_tr)
                out.setdefault(("refit", g), []).append(refit.score(X_te, y_te))
    lines = [f"{name}, total epsilon {eps:g}: candidates trained on {n_part} records at epsilon "
             f"{cand_eps:.3f}, refit on {len(y_tr)} at epsilon {refit_eps:.3f}",
             f"{'grid point':<40} {'candidate median':>16} {'(sd)':>6} {'refit median':>13}"]
    for g, params in enumerate(grid):
        cand = np.asarray(out[("candidate", g)])
        lines.append(f"{str(params):<40} {np.median(cand):>16.3f} {np.std(cand):>6.2f} "
                     f"{np.median(out[('refit', g)]):>13.3f}")
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="2 splits x 2 seeds")
    parser.add_argument("--splits", type=int, default=16)
    parser.add_argument("--seeds", type=int, default=8)
    parser.add_argument("--no-refit", action="store_true", help="DPGridSearchCV(refit=False)")
    parser.add_argument("--scoring", default=None)
    parser.add_argument("--validation-fraction", type=float, default=None,
                        help="default: the library's")
    parser.add_argument("--datasets", nargs="*", default=list(SETUPS))
    parser.add_argument("--transfer", action="store_true",
                        help="only the candidate-vs-refit table of each grid point at epsilon 3")
    args = parser.parse_args()
    if args.transfer:
        splits, seeds = (2, 2) if args.quick else (args.splits, args.seeds)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)
            text = "\n\n".join(transfer(name, 3.0, n_splits=splits, n_seeds=seeds)
                               for name in args.datasets)
        print(text)
        if not args.quick and args.datasets == list(SETUPS):
            RESULTS.mkdir(exist_ok=True)
            (RESULTS / "model_selection_transfer.txt").write_text(text + "\n")
        return
    splits, seeds = (2, 2) if args.quick else (args.splits, args.seeds)
    search_kwargs = dict(refit=not args.no_refit, scoring=args.scoring)
    if args.validation_fraction is not None:
        search_kwargs["validation_fraction"] = args.validation_fraction
    start = time.perf_counter()
    results = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        for name in args.datasets:
            results[name] = run(name, EPSILONS, n_splits=splits, n_seeds=seeds,
                                search_kwargs=search_kwargs)
    text = table(results, EPSILONS)
    tail = (f"\nmedian test metric over {splits} splits x {seeds} noise seeds (independent "
            f"random_state per run); delta={DELTA:g}; search: {search_kwargs}; "
            f"gap = (hindsight - search) / |hindsight|; ceiling = best grid point (hindsight) "
            f"trained at the refit's budget")
    boost = ("\n\nconfidence boosting: DPConfidenceBoosting(estimator with default "
             "parameters, n_models=3) vs the single fit 'defaults', same total epsilon; "
             "median and 10th percentile of the test metric\n" + boosting_table(results, EPSILONS))
    elapsed = f"\n{time.perf_counter() - start:.0f} s"
    print(text + tail + boost + elapsed)
    if not args.quick and args.datasets == list(SETUPS) and (splits, seeds) == (16, 8):
        suffix = "_no_refit" if args.no_refit else ""
        RESULTS.mkdir(exist_ok=True)
        (RESULTS / f"model_selection{suffix}.txt").write_text(text + tail + boost + elapsed + "\n")


if __name__ == "__main__":
    main()
