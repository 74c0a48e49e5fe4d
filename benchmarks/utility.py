"""Privacy-utility benchmark (issue 2): dp_glm_sklearn vs diffprivlib vs non-private.

Protocol (the one of ``python -m dp_glm_sklearn demo``, shared through
``dp_glm_sklearn._demo.evaluate``): scikit-learn's bundled diabetes (test R^2;
fitted twice, by ``DPLinearRegression`` and by ``DPHuberRegressor``) and
breast_cancer (test accuracy); 20 random 75/25 splits x 5 noise seeds;
StandardScaler fit on the training split; training rows clipped to the public
``feature_norm``; delta = 1e-5; epsilon in {0.1, 0.3, 1, 3, 10}; non-private
scikit-learn (LinearRegression, HuberRegressor, LogisticRegression) on the
same splits. The public bounds are those of ``dp_glm_sklearn._demo.DATASETS``;
every other parameter of the DP estimators is left at its default.

IBM diffprivlib runs side by side on the very same splits and epsilons, in its
own virtual environment (``--diffprivlib-python``; see
``benchmarks/_diffprivlib_runner.py``), with its natural parameters derived
from the same public bounds. It has no DP Huber regression: that row shows
"n/a" (its LinearRegression is run once, on the "diabetes" row). The column is
skipped, with a note, when that Python is missing.

Why 20 splits when issue 2 states its protocol with 5: on these small data
sets the median over 5 splits moves with the splits drawn more than with
anything the library does. On diabetes the non-private R^2 ranges from 0.43
to 0.53 over ten disjoint sets of 5 splits, and the first set (random_state
0..4, the one an earlier version of this benchmark used) is the second
hardest (0.443, against 0.47 typically). So the table reports 20 splits, and
for each target of issue 2 the check also lists the median of every disjoint
set of 5 splits x 5 seeds (the issue's protocol), first set first.

Prints a markdown table (median and interquartile range) and saves it, a CSV
of every score and a plot under ``benchmarks/results/``.

Run: ``python benchmarks/utility.py [--quick] [--diffprivlib-python PATH]``
"""

import argparse
import json
import pathlib
import subprocess
import sys
import time
import warnings

import numpy as np
from sklearn.model_selection import train_test_split

HERE = pathlib.Path(__file__).parent
sys.path.insert(0, str(HERE.parent))  # benchmark the checkout, installed or not

from dp_glm_sklearn._demo import DATASETS, evaluate  # noqa: E402

RESULTS = HERE / "results"
RUNNER = HERE / "_diffprivlib_runner.py"
DEFAULT_DPL_PYTHON = "/work/venv-dpl/bin/python"
EPSILONS = (0.1, 0.3, 1.0, 3.0, 10.0)
DELTA = 1e-5
#: Targets of issue 2 ("What it must show"): median at epsilon = 1 and 10. The
#: diabetes targets are checked for both DP models of it.
TARGETS = {"diabetes": {1.0: 0.15, 10.0: 0.40}, "diabetes/huber": {1.0: 0.15, 10.0: 0.40},
           "breast_cancer": {1.0: 0.92, 10.0: 0.95}}
#: diffprivlib's model for each DP estimator of ``DATASETS`` (None: it has none).
DIFFPRIVLIB_MODELS = {"DPLinearRegression": "LinearRegression",
                      "DPLogisticRegression": "LogisticRegression",
                      "DPHuberRegressor": None}


def diffprivlib_model(name):
    """diffprivlib's counterpart of the DP estimator of ``DATASETS[name]``, or None."""
    return DIFFPRIVLIB_MODELS[DATASETS[name]["estimator"].__name__]


def split_indices(n_samples, n_splits):
    """The train/test indices ``evaluate`` uses (train_test_split, random_state=split)."""
    return [train_test_split(np.arange(n_samples), test_size=0.25, random_state=split)
            for split in range(n_splits)]


def diffprivlib_parameters(name):
    """diffprivlib's natural parameters from our public bounds (a readable string)."""
    bounds = DATASETS[name]["bounds"]
    norm = bounds["feature_norm"]
    if diffprivlib_model(name) is None:
        return f"n/a (diffprivlib has no counterpart of {DATASETS[name]['estimator'].__name__})"
    if "y_bound" in bounds:
        return (f"LinearRegression(bounds_X=({-norm:g}, {norm:g}), "
                f"bounds_y={tuple(bounds['y_bound'])})")
    return f"LogisticRegression(data_norm={norm:g})"


def run_diffprivlib(python, name, epsilons, n_splits, n_seeds):
    """Scores of diffprivlib ``{epsilon: array}`` on the same splits, or None."""
    model = diffprivlib_model(name)
    if model is None:
        return None, {}
    spec = DATASETS[name]
    X, y = spec["load"](return_X_y=True)
    bounds = spec["bounds"]
    splits = split_indices(len(y), n_splits)
    job = {
        "X": X.tolist(), "y": y.tolist(),
        "task": "regression" if model == "LinearRegression" else "classification",
        "splits": [{"train": tr.tolist(), "test": te.tolist()} for tr, te in splits],
        "epsilons": list(epsilons), "seeds": list(range(n_seeds)),
        "feature_norm": bounds["feature_norm"],
        "y_bounds": list(bounds.get("y_bound", (0.0, 0.0))),
    }
    proc = subprocess.run([python, str(RUNNER)], input=json.dumps(job), capture_output=True,
                          text=True, check=False)
    if proc.returncode != 0:
        print(f"note: diffprivlib runner failed on {name}; column skipped.\n{proc.stderr[-2000:]}")
        return None, {}
    out = json.loads(proc.stdout)
    scores = {float(eps): np.asarray(v) for eps, v in out["scores"].items()}
    return scores, out


def summarize(values):
    q25, med, q75 = np.percentile(values, [25, 50, 75])
    return med, q25, q75


def fmt(values):
    if values is None:
        return "n/a"
    med, q25, q75 = summarize(values)
    return f"{_num(med)} [{_num(q25)}, {_num(q75)}]"


def _num(x):
    return f"{x:.3f}" if abs(x) < 1e4 else f"{x:.1e}"


def _kwargs(params):
    return ", ".join(f"{k}={v!r}" for k, v in params.items())


def markdown_table(results, epsilons):
    lines = ["| data set | metric | epsilon | dp_glm_sklearn | diffprivlib | non-private |",
             "|---|---|---|---|---|---|"]
    for name, res in results.items():
        public = np.median(res["public"])
        for eps in epsilons:
            dpl = res["diffprivlib"][eps] if res["diffprivlib"] is not None else None
            lines.append(f"| {name} | {DATASETS[name]['metric']} | {eps:g} | "
                         f"{fmt(res['ours'][eps])} | {fmt(dpl)} | {public:.3f} |")
    return "\n".join(lines)


def save_csv(results, path):
    rows = ["dataset,metric,method,epsilon,split,seed,score"]
    for name, res in results.items():
        metric = DATASETS[name]["metric"]
        n_seeds = res["n_seeds"]
        for method in ("ours", "diffprivlib"):
            if res[method] is None:
                continue
            label = "dp_glm_sklearn" if method == "ours" else "diffprivlib"
            for eps, values in res[method].items():
                for i, v in enumerate(values):
                    rows.append(f"{name},{metric},{label},{eps:g},{i // n_seeds},"
                                f"{i % n_seeds},{v:.6g}")
        for split, v in enumerate(res["public"]):
            rows.append(f"{name},{metric},non-private,inf,{split},,{v:.6g}")
    path.write_text("\n".join(rows) + "\n")


def plot(results, epsilons, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(results), figsize=(5.5 * len(results), 4.4))
    for ax, (name, res) in zip(np.atleast_1d(axes), results.items(), strict=True):
        lo_limit = -1.0 if DATASETS[name]["metric"] == "R^2" else 0.4
        notes = []
        for method, label, color in (("ours", "dp_glm_sklearn", "C0"),
                                     ("diffprivlib", "diffprivlib", "C3")):
            if res[method] is None:
                continue
            stats = np.array([summarize(res[method][eps]) for eps in epsilons])
            shown = np.clip(stats, lo_limit, None)
            ax.plot(epsilons, shown[:, 0], "o-", color=color, label=label)
            ax.fill_between(epsilons, shown[:, 1], shown[:, 2], color=color, alpha=0.2)
            off = stats[:, 0] < lo_limit
            if off.any():  # drawn on the bottom edge, values written out
                notes.append(f"{label} medians below the axis: " + ", ".join(
                    f"{_num(m)}" for m, o in zip(stats[:, 0], off, strict=True) if o))
        ax.axhline(np.median(res["public"]), color="k", ls="--", label="non-private scikit-learn")
        ax.set_xscale("log")
        ax.set_ylim(lo_limit, 1.0)
        ax.set_xlabel("epsilon (delta = 1e-5; diffprivlib: pure epsilon)")
        ax.set_ylabel(f"test {DATASETS[name]['metric']} (median, IQR band)")
        ax.set_title(name)
        ax.legend(fontsize=8, loc="upper left" if lo_limit < 0 else "lower right")
        if res["diffprivlib"] is None and diffprivlib_model(name) is None:
            notes.append("diffprivlib: n/a (no counterpart of "
                         f"{DATASETS[name]['estimator'].__name__})")
        if notes:
            ax.text(0.02, 0.04, "\n".join(notes), transform=ax.transAxes, fontsize=7,
                    color="C3", wrap=True)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="2 splits x 2 seeds")
    parser.add_argument("--splits", type=int, default=20,
                        help="random train/test splits (default: %(default)s)")
    parser.add_argument("--diffprivlib-python", default=DEFAULT_DPL_PYTHON,
                        help="Python of a venv with diffprivlib (default: %(default)s)")
    parser.add_argument("--out", default=str(RESULTS), help="folder for the results")
    args = parser.parse_args(argv)
    n_splits, n_seeds = (2, 2) if args.quick else (args.splits, 5)
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    dpl_python = args.diffprivlib_python
    if not pathlib.Path(dpl_python).exists():
        print(f"note: {dpl_python} not found: the diffprivlib column is skipped. Create it with\n"
              "  python3 -m venv /work/venv-dpl && /work/venv-dpl/bin/pip install "
              "diffprivlib==0.6.6 'scikit-learn==1.7.*'")
        dpl_python = None

    start = time.perf_counter()
    results, versions = {}, {}
    for name in DATASETS:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)
            res = evaluate(name, (*EPSILONS, np.inf), n_splits=n_splits, n_seeds=n_seeds,
                           delta=DELTA)
        dpl = None
        if dpl_python is not None:
            dpl, info = run_diffprivlib(dpl_python, name, EPSILONS, n_splits, n_seeds)
            versions = info.get("versions", versions)
            for w in info.get("warnings", []):
                print(f"note: diffprivlib on {name} warned: {w[:200]}")
        results[name] = {"ours": {eps: res[eps] for eps in EPSILONS}, "public": res[np.inf],
                         "diffprivlib": dpl, "n_seeds": n_seeds}

    header = [
        f"Test metric, median [25th, 75th percentile] over {n_splits} splits x {n_seeds} "
        f"noise seeds (non-private: median over the {n_splits} splits).",
        f"dp_glm_sklearn: (epsilon, delta={DELTA:g})-DP, method='auto' (noisy GD on these "
        "data), bounds (y_bound and classes from the data sets' documentation, feature_norm "
        "and norm_bound chosen knowing the data: benchmarks/README.md) "
        + "; ".join(f"{k}: {v['estimator'].__name__}({_kwargs(v['bounds'])})"
                    for k, v in DATASETS.items()) + ".",
        "non-private scikit-learn: "
        + "; ".join(f"{k}: {v['public']()!r}" for k, v in DATASETS.items()) + ".",
    ]
    if dpl_python is not None:
        header.append(
            f"diffprivlib {versions.get('diffprivlib', '?')} (scikit-learn "
            f"{versions.get('scikit-learn', '?')}, separate venv): pure epsilon-DP, "
            "same splits and clipped rows, "
            + "; ".join(f"{k}: {diffprivlib_parameters(k)}" for k in DATASETS) + ".")
    else:
        header.append("diffprivlib: skipped (no venv).")
    table = markdown_table(results, EPSILONS)
    checks = []
    for name, targets in TARGETS.items():
        for eps, target in targets.items():
            scores = results[name]["ours"][eps]
            med = float(np.median(scores))
            verdict = "ok" if med >= target else "BELOW TARGET"
            line = (f"- {name} at epsilon={eps:g}: median {med:.3f} "
                    f"(issue 2 target >= {target}): {verdict}")
            n_sets = n_splits // 5
            if n_sets >= 2:  # scores are split-major: split i holds n_seeds values
                sets = np.median(scores[:n_sets * 5 * n_seeds].reshape(n_sets, -1), axis=1)
                line += (f"; by disjoint sets of 5 splits x {n_seeds} seeds: "
                         + " ".join(f"{m:.3f}" for m in sets)
                         + f" ({int(np.sum(sets >= target))} of {n_sets} sets >= {target})")
            checks.append(line)
    text = "\n".join(header) + "\n\n" + table + "\n\nIssue 2 targets:\n" + "\n".join(checks)
    print(text)
    print(f"\n{time.perf_counter() - start:.1f} s")
    stem = "utility_quick" if args.quick else "utility"  # a quick run keeps the full one
    (out / f"{stem}.txt").write_text(text + "\n")
    save_csv(results, out / f"{stem}.csv")
    plot(results, EPSILONS, out / f"{stem}.png")
    print(f"saved {out / stem}.txt, .csv, .png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
