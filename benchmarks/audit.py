"""Privacy audits with more runs: how tight is each mechanism's claim?

Runs the black-box audits of ``tests/privacy/test_audit.py`` (same neighbors,
same statistics, same Clopper-Pearson bounds at alpha = 1e-3; see
``tests/privacy/_audit.py``) at epsilon in {1, 4, 8} with more runs per side,
and prints, for each mechanism, the lower confidence bound on its privacy
parameter and its ratio to the claim:

- Gaussian mechanisms (Noisy GD, its multinomial variant, JL, output
  perturbation): ``mu_lb / mu`` with mu the GDP parameter of (epsilon,
  delta = 1e-5);
- selection mechanisms (pure epsilon-DP): ``epsilon_lb / epsilon``, the
  epsilon their privacy events state, on the event "the audited candidate is
  chosen" (fixed in advance, so every run is counted). The exponential
  mechanism on two candidates (log-odds ``a`` of the event on S); GEM on a
  data-independent anchor, a crowd of ``n`` candidates and the audited one
  (``_audit.gem_case``). Both parameters are chosen for the number of runs;
  the ``event`` column is the exact privacy loss of the event (from the
  library's selection probabilities), the most any audit of it could show.

A ratio close to 1 means the audit nearly proves the claim is attained (the
claim is tight); a ratio above 1 would be a privacy bug (with probability
1e-3 a false alarm). The second table repeats the test suite's settings
(epsilon = 8 for the Gaussian mechanisms, 3 for the selections) with 25% less
noise: every ratio must be above 1 there. The third gives GEM's exact
privacy parameter on K candidates (``_audit.gem_worst_case_epsilon``): the
stated epsilon is its limit as K grows. The last gives the false-failure
probabilities of the test suite's settings.

Usage::

    python benchmarks/audit.py [--runs 20000] [--selection-runs 50000] [--quick]

Prints the tables and saves them to ``benchmarks/results/audit.txt``
(``audit_quick.txt`` with ``--quick``). With the defaults it takes about
eleven minutes on one core (``--quick``, the test suite's run counts: about
two).
"""

import argparse
import sys
import time
from pathlib import Path

import numpy as np
from scipy.special import expit
from scipy.stats import norm

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests" / "privacy")]

from _audit import (  # noqa: E402
    audit,
    binary_audit_probability,
    clopper_pearson_lower,
    clopper_pearson_upper,
    collect,
    exponential_mechanism_case,
    exponential_mechanism_gdp_case,
    gaussian_audit_probability,
    gdp_lower_bound,
    gem_case,
    gem_worst_case_epsilon,
    jl_case,
    noisy_gd_case,
    output_perturbation_case,
)
from test_audit import (  # noqa: E402  (the test suite's settings)
    CASES,
    GEM_CROWD,
    SELECTION_EPSILON,
    SELECTION_LOG_ODDS,
)

from dp_glm_sklearn.losses import MultinomialLoss  # noqa: E402
from dp_glm_sklearn.privacy.calibration import gdp_mu  # noqa: E402

DELTA = 1e-5
EPSILONS = (1.0, 4.0, 8.0)
ALPHA = 1e-3

GAUSSIAN = {
    "noisy_gd": lambda eps: noisy_gd_case(eps, DELTA),
    "noisy_gd_multinomial": lambda eps: noisy_gd_case(eps, DELTA, MultinomialLoss(3),
                                                      n_features=2, n_samples=3),
    "jl": lambda eps: jl_case(eps, DELTA),
    "output_perturbation": lambda eps: output_perturbation_case(eps, DELTA),
}


def typical_bound(fpr, tpr, n_runs):
    """``epsilon_lb`` at the expected counts of ``n_runs`` counted runs per side."""
    with np.errstate(divide="ignore"):
        return float(np.log(clopper_pearson_lower(np.round(tpr * n_runs), n_runs, ALPHA / 2))
                     - np.log(clopper_pearson_upper(np.round(fpr * n_runs), n_runs,
                                                    ALPHA / 2)))


def best_log_odds(eps, n_runs):
    """Log-odds on S of the exponential mechanism's event maximizing the typical bound."""
    grid = np.arange(-12.0, 0.01, 0.125)
    values = [typical_bound(expit(a), expit(a + eps), n_runs) for a in grid]
    return float(grid[int(np.nanargmax(values))])


def best_crowd(eps, n_runs):
    """GEM's crowd size maximizing the typical bound (exact rates of ``gem_case``)."""
    grid = np.unique(np.round(np.geomspace(1, 400, 60)).astype(int))
    values = [typical_bound(*gem_case(eps, n).exact_rates(), n_runs) for n in grid]
    return int(grid[int(np.nanargmax(values))])


def _p(value):
    """A probability for the table; below 1e-12 the sums are only rounding noise."""
    return "<1e-12" if value < 1e-12 else f"{value:.1e}"


HEADER = (f"{'mechanism':<22} {'eps':>5} {'setting':>9} {'claimed':>8} {'lower':>8} "
          f"{'ratio':>6} {'event':>6} {'runs':>7} {'sec':>6}")


def _row(name, eps, case, n_runs, seed, setting="-", less_noise=False):
    run = case.run_less_noise if less_noise else case.run
    start = time.perf_counter()
    result = audit(*collect(run, n_runs, seed), case.claimed, alpha=ALPHA, bound=case.bound,
                   test=case.test)
    seconds = time.perf_counter() - start
    event = "-"
    if case.exact_rates is not None:
        fpr, tpr = case.exact_rates(less_noise)
        exact = (norm.ppf(tpr) - norm.ppf(fpr) if case.bound is gdp_lower_bound
                 else np.log(tpr / fpr))
        event = f"{exact / case.claimed:.3f}"
    return (f"{name:<22} {eps:>5.1f} {setting:>9} {case.claimed:>8.4f} "
            f"{result.lower_bound:>8.4f} {result.ratio:>6.3f} {event:>6} {n_runs:>7d} "
            f"{seconds:>6.1f}")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20000,
                        help="runs per side for the Gaussian mechanisms")
    parser.add_argument("--selection-runs", type=int, default=50000,
                        help="runs per side for the selection mechanisms")
    parser.add_argument("--quick", action="store_true",
                        help="the test suite's run counts (4000 / 15000 / 30000 per side)")
    parser.add_argument("--output", default=None,
                        help="default: benchmarks/results/audit.txt (audit_quick.txt with --quick)")
    args = parser.parse_args(argv)
    if args.output is None:
        name = "audit_quick.txt" if args.quick else "audit.txt"
        args.output = str(ROOT / "benchmarks" / "results" / name)
    test_runs = {name: n for name, (_, n) in CASES.items()}
    if args.quick:
        gaussian_runs = test_runs["noisy_gd"]
        selection_runs = {"exponential_mechanism": test_runs["exponential_mechanism"],
                          "gem": test_runs["gem"]}
    else:
        gaussian_runs = args.runs
        selection_runs = {"exponential_mechanism": args.selection_runs,
                          "gem": args.selection_runs}

    lines = []

    def emit(line=""):
        print(line, flush=True)
        lines.append(line)

    emit("Privacy audits (alpha = 1e-3; claimed = mu for Gaussian mechanisms, the stated")
    emit("epsilon for selections; ratio = lower / claimed; event = exact privacy loss of the")
    emit("audited event / claimed; setting = log-odds a (exponential mechanism), crowd n (GEM);")
    emit("exponential_mech_gdp: the exponential mechanism at epsilon audited in GDP against the")
    emit("bounded-range mu the model-selection wrappers record, pure_dp_gdp_mu(epsilon / 2))")
    emit()
    emit(HEADER)
    for eps in EPSILONS:
        for name, factory in GAUSSIAN.items():
            emit(_row(name, eps, factory(eps), gaussian_runs, seed=10))
        n = selection_runs["exponential_mechanism"]
        a = best_log_odds(eps, n)
        emit(_row("exponential_mechanism", eps, exponential_mechanism_case(eps, a), n, seed=10,
                  setting=f"a={a:g}"))
        n = selection_runs["gem"]
        crowd = best_crowd(eps, n)
        emit(_row("gem", eps, gem_case(eps, crowd), n, seed=10, setting=f"n={crowd}"))
        emit(_row("exponential_mech_gdp", eps, exponential_mechanism_gdp_case(eps),
                  selection_runs["exponential_mechanism"], seed=10, setting="centred"))
    emit()
    emit("Power: the test suite's settings with 25% less noise (every ratio must exceed 1)")
    emit()
    emit(HEADER)
    for name, factory in GAUSSIAN.items():
        emit(_row(name, 8.0, factory(8.0), gaussian_runs, seed=11, less_noise=True))
    eps = SELECTION_EPSILON
    emit(_row("exponential_mechanism", eps, exponential_mechanism_case(eps, SELECTION_LOG_ODDS),
              selection_runs["exponential_mechanism"], seed=11,
              setting=f"a={SELECTION_LOG_ODDS:g}", less_noise=True))
    emit(_row("gem", eps, gem_case(eps, GEM_CROWD), selection_runs["gem"], seed=11,
              setting=f"n={GEM_CROWD}", less_noise=True))
    emit(_row("exponential_mech_gdp", eps, exponential_mechanism_gdp_case(eps),
              selection_runs["exponential_mechanism"], seed=11, setting="centred",
              less_noise=True))

    emit()
    emit("GEM's exact privacy parameter on K candidates, eps_K / epsilon (stated: epsilon)")
    ks = (2, 3, 5, 10, 35, 100, 1000)
    emit(f"{'epsilon':>8} " + " ".join(f"{f'K={k}':>7}" for k in ks))
    for e in (0.1, 1.0, 3.0, 4.0, 8.0):
        emit(f"{e:>8.1f} " + " ".join(f"{gem_worst_case_epsilon(e, k) / e:>7.3f}" for k in ks))

    emit()
    emit("False-failure probabilities of the test suite's settings (tests/privacy/test_audit.py)")
    mu = gdp_mu(8.0, DELTA)
    n = test_runs["noisy_gd"]
    pass_high = gaussian_audit_probability(mu, mu, n, alpha=ALPHA)
    pass_low = 1 - gaussian_audit_probability(mu, 0.6 * mu, n, alpha=ALPHA)
    power = 1 - gaussian_audit_probability(mu / 0.75, mu, n, alpha=ALPHA)
    emit(f"  Gaussian, {n} runs/side, mu = {mu:.4f}: P(mu_lb > mu) = {_p(pass_high)}, "
         f"P(mu_lb <= 0.6 mu) = {_p(pass_low)}, "
         f"P(mu_lb <= mu | 25% less noise) = {_p(power)}")
    eps = SELECTION_EPSILON
    for name in ("exponential_mechanism", "gem"):
        case, n = CASES[name][0](), test_runs[name]
        fpr, tpr = case.exact_rates()
        fpr_less, tpr_less = case.exact_rates(less_noise=True)
        high = binary_audit_probability(tpr, fpr, eps, n, alpha=ALPHA)
        low = 1 - binary_audit_probability(tpr, fpr, 0.6 * eps, n, alpha=ALPHA)
        less = 1 - binary_audit_probability(tpr_less, fpr_less, eps, n, alpha=ALPHA)
        emit(f"  {name}, {n} runs/side, epsilon = {eps}: P(eps_lb > eps) = {_p(high)}, "
             f"P(eps_lb <= 0.6 eps) = {_p(low)}, "
             f"P(eps_lb <= eps | 25% less noise) = {_p(less)}")
    case, n = CASES["exponential_mechanism_gdp"][0](), test_runs["exponential_mechanism_gdp"]
    fpr, tpr = case.exact_rates()
    fpr_less, tpr_less = case.exact_rates(less_noise=True)
    high = binary_audit_probability(tpr, fpr, case.claimed, n, alpha=ALPHA, bound="gdp")
    low = 1 - binary_audit_probability(tpr, fpr, 0.6 * case.claimed, n, alpha=ALPHA, bound="gdp")
    less = 1 - binary_audit_probability(tpr_less, fpr_less, case.claimed, n, alpha=ALPHA,
                                        bound="gdp")
    emit(f"  exponential_mechanism_gdp, {n} runs/side, mu = {case.claimed:.4f} (epsilon = {eps}): "
         f"P(mu_lb > mu) = {_p(high)}, P(mu_lb <= 0.6 mu) = {_p(low)}, "
         f"P(mu_lb <= mu | 25% less noise) = {_p(less)}")

    out = Path(args.output)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(lines) + "\n")
    print(f"\nsaved to {out}")


if __name__ == "__main__":
    main()
