"""How many noisy GD steps? The benchmark behind ``default_max_iter``.

For each data set and epsilon, the median test metric (utility protocol of
``benchmarks/utility.py``: 5 splits x 5 noise seeds, delta = 1e-5) for a range
of fixed step counts T, next to the T that the default rule
``clip(round(n * mu / 10), 5, 100)`` picks (``n * mu / 5`` for the Huber
loss; for the logistic loss the cap is ``clip(5e6 / n, 50, 100)``, 100 at
these n). Prints a table and saves it, with a
plot, under ``benchmarks/results/``.

Run: ``python benchmarks/tune_max_iter.py [--quick]``
"""

import argparse
import math
import pathlib
import sys
import warnings

import numpy as np

HERE = pathlib.Path(__file__).parent
sys.path.insert(0, str(HERE.parent))  # benchmark the checkout, installed or not

from dp_glm_sklearn import DPHuberRegressor, DPLinearRegression, DPLogisticRegression  # noqa: E402
from dp_glm_sklearn._demo import DATASETS, evaluate  # noqa: E402
from dp_glm_sklearn.losses import HuberLoss, LogisticLoss, SquaredLoss  # noqa: E402
from dp_glm_sklearn.mechanisms.noisy_gd import default_max_iter, step_rule  # noqa: E402
from dp_glm_sklearn.privacy.calibration import gdp_mu  # noqa: E402

RESULTS = HERE / "results"
#: The loss of each estimator, for its step rule (a Huber threshold's value
#: does not enter the rule).
LOSSES = {DPLinearRegression: SquaredLoss(), DPHuberRegressor: HuberLoss(1.0),
          DPLogisticRegression: LogisticLoss()}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="2 splits x 2 seeds")
    args = parser.parse_args()
    splits, seeds = (2, 2) if args.quick else (5, 5)
    steps = (5, 10, 20, 50, 100, 200)
    epsilons = (0.3, 1.0, 3.0, 10.0)
    delta = 1e-5
    lines = [f"{'dataset':<14} {'eps':>5} {'rule T':>6} " + " ".join(f"T={t:<5}" for t in steps)]
    spreads = [f"{'dataset':<14} {'eps':>5} {'':>6} "
               + " ".join(f"T={t:<13}" for t in steps)]
    curves = {}
    for name, spec in DATASETS.items():
        n = len(spec["load"](return_X_y=True)[1])
        n_train = n - math.ceil(0.25 * n)  # train_test_split(test_size=0.25)
        for eps in epsilons:
            # The estimators' rule (default_steps): twice the steps for the
            # Huber loss, compute-capped for the logistic loss (the same T
            # at these n, below 5e4).
            rule = default_max_iter(n_train, gdp_mu(eps, delta),
                                    **step_rule(LOSSES[spec["estimator"]]))
            meds, iqrs = [], []
            for T in steps:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    res = evaluate(name, (eps,), n_splits=splits, n_seeds=seeds, delta=delta,
                                   max_iter=T)
                meds.append(float(np.median(res[eps])))
                iqrs.append(np.percentile(res[eps], [25, 75]))
            curves[(name, eps)] = meds
            best = steps[int(np.argmax(meds))]
            row = " ".join(f"{m:<7.3f}" for m in meds)
            lines.append(f"{name:<14} {eps:>5g} {rule:>6d} {row}  highest median: T={best}")
            spreads.append(f"{name:<14} {eps:>5g} {'':>6} "
                           + " ".join(f"[{lo:6.3f},{hi:6.3f}]" for lo, hi in iqrs))
    table = "\n".join(
        [f"median test metric over {splits} splits x {seeds} noise seeds (delta = {delta:g})",
         *lines, "", "interquartile range of the same fits (medians that differ by less than "
         "these ranges are within the noise)", *spreads])
    print(table)
    RESULTS.mkdir(exist_ok=True)
    stem = "tune_max_iter_quick" if args.quick else "tune_max_iter"
    (RESULTS / f"{stem}.txt").write_text(table + "\n")
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    fig, axes = plt.subplots(1, len(DATASETS), figsize=(5 * len(DATASETS), 4))
    for ax, name in zip(axes, DATASETS, strict=True):
        for eps in epsilons:
            ax.plot(steps, curves[(name, eps)], marker="o", label=f"eps={eps:g}")
        ax.set_xscale("log")
        ax.set_xlabel("noisy GD steps T")
        ax.set_ylabel(DATASETS[name]["metric"])
        ax.set_title(name)
        ax.legend()
    fig.tight_layout()
    fig.savefig(RESULTS / f"{stem}.png", dpi=100)


if __name__ == "__main__":
    main()
