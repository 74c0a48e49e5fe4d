"""Privacy audits with more runs: how tight is each mechanism's claim?

Runs the black-box audits of ``tests/privacy/test_audit.py`` (same neighbors,
same statistics, same Clopper-Pearson bounds at alpha = 1e-3; see
``tests/privacy/_audit.py``) at epsilon in {1, 4, 8} with more runs per side,
and prints, for each mechanism, the lower confidence bound on its privacy
parameter and its ratio to the claim:

- Gaussian mechanisms (Noisy GD, its multinomial variant, JL, output
  perturbation): ``mu_lb / mu`` with mu the GDP parameter of (epsilon,
  delta = 1e-5);
- selection mechanisms (pure epsilon-DP): ``epsilon_lb / epsilon`` for the
  exponential mechanism; GEM against its two-candidate bound epsilon / 2
  (and, in the last column, against its stated epsilon).

A ratio close to 1 means the audit nearly proves the claim is attained (the
claim is tight); a ratio above 1 would be a privacy bug (with probability
1e-3 a false alarm). The second table repeats the test suite's settings
(epsilon = 8 for the Gaussian mechanisms, 3 for the selections) with 25% less
noise: every ratio must be above 1 there. The last table gives the
false-failure probabilities of the settings used by the test suite.

Usage::

    python benchmarks/audit.py [--runs 20000] [--selection-runs 50000] [--quick]

Prints the tables and saves them to ``benchmarks/results/audit.txt``. With the
defaults it takes about five minutes on one core (``--quick``: two).
"""

import argparse
import sys
import time
from pathlib import Path

import numpy as np
from scipy.special import expit

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests" / "privacy")]

from _audit import (  # noqa: E402
    audit,
    binary_audit_probability,
    clopper_pearson_lower,
    clopper_pearson_upper,
    collect,
    exponential_mechanism_case,
    gaussian_audit_probability,
    gem_case,
    jl_case,
    noisy_gd_case,
    output_perturbation_case,
)

from dp_glm_sklearn.losses import MultinomialLoss  # noqa: E402
from dp_glm_sklearn.privacy.calibration import gdp_mu  # noqa: E402

DELTA = 1e-5
EPSILONS = (1.0, 4.0, 8.0)
ALPHA = 1e-3
# The test suite's selection setting: epsilon = 3 (GEM: two-candidate bound 3),
# log-odds of the audited event on S.
SELECTION_EPSILON, SELECTION_LOG_ODDS = 3.0, -3.625

GAUSSIAN = {
    "noisy_gd": lambda eps: noisy_gd_case(eps, DELTA),
    "noisy_gd_multinomial": lambda eps: noisy_gd_case(eps, DELTA, MultinomialLoss(3),
                                                      n_features=2, n_samples=3),
    "jl": lambda eps: jl_case(eps, DELTA),
    "output_perturbation": lambda eps: output_perturbation_case(eps, DELTA),
}


def best_log_odds(shift, n_runs):
    """Log-odds on S of the audited event maximizing the typical ``epsilon_lb``.

    The event has log-odds ``a`` on S and ``a + shift`` on S'; the typical
    bound plugs the expected counts of the ``n_runs / 2`` counted runs into
    the Clopper-Pearson bounds.
    """
    m = n_runs - n_runs // 2
    grid = np.arange(-12.0, 0.01, 0.125)
    tpr, fpr = expit(grid + shift), expit(grid)
    with np.errstate(divide="ignore"):
        typical = (np.log(clopper_pearson_lower(np.round(tpr * m), m, ALPHA / 2))
                   - np.log(clopper_pearson_upper(np.round(fpr * m), m, ALPHA / 2)))
    return float(grid[np.nanargmax(typical)])


SELECTION = {
    # shift of the log-odds between the neighbors: epsilon for the exponential
    # mechanism, epsilon / 2 for GEM on two candidates.
    "exponential_mechanism": (lambda eps, a: exponential_mechanism_case(eps, a), 1.0),
    "gem": (lambda eps, a: gem_case(eps, a), 0.5),
}


def _p(value):
    """A probability for the table; below 1e-12 the sums are only rounding noise."""
    return "<1e-12" if value < 1e-12 else f"{value:.1e}"


def _row(name, eps, case, n_runs, seed, less_noise=False):
    run = case.run_less_noise if less_noise else case.run
    start = time.perf_counter()
    result = audit(*collect(run, n_runs, seed), case.claimed, alpha=ALPHA, bound=case.bound)
    seconds = time.perf_counter() - start
    return (f"{name:<22} {eps:>5.1f} {case.claimed:>8.4f} {result.lower_bound:>8.4f} "
            f"{result.ratio:>6.3f} {result.lower_bound / case.stated:>7.3f} {n_runs:>8d} "
            f"{seconds:>6.1f}")


HEADER = (f"{'mechanism':<22} {'eps':>5} {'claimed':>8} {'lower':>8} {'ratio':>6} "
          f"{'/stated':>7} {'runs':>8} {'sec':>6}")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20000,
                        help="runs per side for the Gaussian mechanisms")
    parser.add_argument("--selection-runs", type=int, default=50000,
                        help="runs per side for the selection mechanisms")
    parser.add_argument("--quick", action="store_true",
                        help="4000 / 25000 runs per side (the test suite's sizes)")
    parser.add_argument("--output", default=str(ROOT / "benchmarks" / "results" / "audit.txt"))
    args = parser.parse_args(argv)
    if args.quick:
        args.runs, args.selection_runs = 4000, 25000

    lines = []

    def emit(line=""):
        print(line, flush=True)
        lines.append(line)

    emit("Privacy audits (alpha = 1e-3; claimed = mu for Gaussian mechanisms, epsilon for")
    emit("selection; ratio = lower / claimed; GEM is audited at its two-candidate bound")
    emit("epsilon / 2, '/stated' compares with the epsilon its event states)")
    emit()
    emit(HEADER)
    for eps in EPSILONS:
        for name, factory in GAUSSIAN.items():
            emit(_row(name, eps, factory(eps), args.runs, seed=10))
        for name, (factory, shift) in SELECTION.items():
            a = best_log_odds(shift * eps, args.selection_runs)
            emit(_row(name, eps, factory(eps, a), args.selection_runs, seed=10))
    emit()
    emit("Power: the test suite's settings with 25% less noise (every ratio must exceed 1)")
    emit()
    emit(HEADER)
    for name, factory in GAUSSIAN.items():
        emit(_row(name, 8.0, factory(8.0), args.runs, seed=11, less_noise=True))
    for name, (factory, shift) in SELECTION.items():
        eps = SELECTION_EPSILON / shift
        emit(_row(name, eps, factory(eps, SELECTION_LOG_ODDS), args.selection_runs, seed=11,
                  less_noise=True))

    emit()
    emit("False-failure probabilities of the test suite's settings (tests/privacy/test_audit.py)")
    mu = gdp_mu(8.0, DELTA)
    pass_high = gaussian_audit_probability(mu, mu, 4000, alpha=ALPHA)
    pass_low = 1 - gaussian_audit_probability(mu, 0.6 * mu, 4000, alpha=ALPHA)
    power = 1 - gaussian_audit_probability(mu / 0.75, mu, 4000, alpha=ALPHA)
    emit(f"  Gaussian, 4000 runs/side, mu = {mu:.4f}: P(mu_lb > mu) = {_p(pass_high)}, "
         f"P(mu_lb <= 0.6 mu) = {_p(pass_low)}, "
         f"P(mu_lb <= mu | 25% less noise) = {_p(power)}")
    eps, a, n = SELECTION_EPSILON, SELECTION_LOG_ODDS, 25000
    sel_high = binary_audit_probability(expit(a + eps), expit(a), eps, n, alpha=ALPHA)
    sel_low = 1 - binary_audit_probability(expit(a + eps), expit(a), 0.6 * eps, n, alpha=ALPHA)
    sel_power = 1 - binary_audit_probability(expit((a + eps) / 0.75), expit(a / 0.75), eps, n,
                                             alpha=ALPHA)
    emit(f"  selection, {n} runs/side, epsilon = {eps}: P(eps_lb > eps) = {_p(sel_high)}, "
         f"P(eps_lb <= 0.6 eps) = {_p(sel_low)}, "
         f"P(eps_lb <= eps | 25% less noise) = {_p(sel_power)}")

    out = Path(args.output)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(lines) + "\n")
    print(f"\nsaved to {out}")


if __name__ == "__main__":
    main()
