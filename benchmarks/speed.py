"""Speed benchmark (issue 2): fit time and peak memory vs non-private scikit-learn.

Pairs, on synthetic data with n in {1e4, 1e5, 1e6} and d = 100 (float64):

- ``DPLogisticRegression`` vs ``LogisticRegression()`` (lbfgs),
- ``DPLinearRegression``  vs ``Ridge()``,
- ``DPHuberRegressor``    vs ``HuberRegressor()``,

all with their default parameters except the DP estimators' public bounds
(``epsilon=1``; ``max_iter`` default: 100 noisy GD steps, except that
``default_max_iter`` caps the logistic fit's steps at ``clip(5e6 / n, 50,
100)``, i.e. 100 steps at n = 1e4 and 50 at n = 1e5 and 1e6).

Data: rows with an AR(1) correlation between neighbouring features
(rho = 0.5, unit variances), ``||w*|| = 1``; logistic labels from the logistic
model, regression targets ``X w* + 0.5 t_3`` noise. X is made in small chunks
so that making it costs no memory beyond X.

Each fit runs in a fresh Python process, so that measurements do not mix:

- time: wall clock of ``fit``, the minimum over a few repeats, after a
  warm-up fit on 2,000 rows (imports, thread pools);
- peak memory: ``resource.getrusage(RUSAGE_SELF).ru_maxrss`` after the fits
  minus its value just before them (X, y and the warm-up already in memory),
  i.e. the memory ``fit`` needed beyond the data; for n <= 1e5 also
  tracemalloc's peak during one more fit (numpy and Python allocations, not
  BLAS's own buffers).

Both sides run in the same environment and thread settings; threadpoolctl's
view (BLAS and OpenMP libraries, threads) and OPENBLAS_* variables are
printed. Prints a markdown table with the ratios DP / scikit-learn and saves
it, a CSV and a plot under ``benchmarks/results/``.

``--cap-accuracy`` measures what the cap on the number of steps costs instead:
test accuracy and log-loss of ``DPLogisticRegression`` (epsilon = 1) with the
default number of steps, with ``max_iter=100`` and ``max_iter=1000``, next to
``LogisticRegression()``, on the same synthetic logistic data (training rows:
the first n of ``make_data("logistic", n + 100_000)``, test rows: the last
100,000), a few noise seeds (``results/speed_cap_accuracy.txt``).

Run: ``python benchmarks/speed.py [--quick] [--sizes 10000 100000 ...]``
or ``python benchmarks/speed.py --cap-accuracy [--sizes 100000 1000000]``
"""

import argparse
import gc
import json
import os
import pathlib
import platform
import resource
import subprocess
import sys
import time
import tracemalloc
import warnings

import numpy as np

HERE = pathlib.Path(__file__).parent
sys.path.insert(0, str(HERE.parent))  # benchmark the checkout, installed or not
RESULTS = HERE / "results"
TASKS = ("logistic", "linear", "huber")
NAMES = {
    "logistic": ("DPLogisticRegression", "LogisticRegression(lbfgs)"),
    "linear": ("DPLinearRegression", "Ridge"),
    "huber": ("DPHuberRegressor", "HuberRegressor"),
}
CHUNK_ROWS = 4096
WARMUP_ROWS = 2000


def make_data(task, n, d, seed=0, rho=0.5):
    """Synthetic GLM data, made chunk by chunk (no temporary the size of X)."""
    rng = np.random.default_rng(seed)
    w = rng.standard_normal(d)
    w /= np.linalg.norm(w)
    X = np.empty((n, d))
    y = np.empty(n)
    scale = np.sqrt(1.0 - rho**2)
    for start in range(0, n, CHUNK_ROWS):
        stop = min(start + CHUNK_ROWS, n)
        E = rng.standard_normal((stop - start, d))
        for j in range(1, d):  # AR(1) along the features: unit variance, corr rho^|i-j|
            E[:, j] = rho * E[:, j - 1] + scale * E[:, j]
        X[start:stop] = E
        z = E @ w
        if task == "logistic":
            y[start:stop] = (z + rng.logistic(size=z.shape) > 0).astype(float)
        else:
            y[start:stop] = z + 0.5 * rng.standard_t(3, size=z.shape)
    return X, y


def make_estimator(task, impl, d, max_iter=None):
    """The estimator of one side; DP ones get public bounds fixed before seeing data."""
    from sklearn.linear_model import HuberRegressor, LogisticRegression, Ridge

    from dp_glm_sklearn.linear_model import (
        DPHuberRegressor,
        DPLinearRegression,
        DPLogisticRegression,
    )

    feature_norm = 1.5 * np.sqrt(d)  # rows have norm about sqrt(d)
    if impl == "sklearn":
        return {"logistic": LogisticRegression, "linear": Ridge,
                "huber": HuberRegressor}[task]()
    common = dict(epsilon=1.0, feature_norm=feature_norm, max_iter=max_iter, random_state=0)
    if task == "logistic":
        return DPLogisticRegression(classes=[0.0, 1.0], **common)
    cls = DPLinearRegression if task == "linear" else DPHuberRegressor
    return cls(y_bound=5.0, norm_bound=2.0, **common)


def _maxrss_bytes():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # KiB on Linux


def child(job):
    """Run the fits of one (task, impl, n) in this fresh process; return a dict."""
    task, impl, n, d = job["task"], job["impl"], job["n"], job["d"]
    X, y = make_data(task, n, d)
    warnings.simplefilter("ignore")  # ConvergenceWarning of sklearn's defaults
    make_estimator(task, impl, d, job["max_iter"]).fit(X[:WARMUP_ROWS], y[:WARMUP_ROWS])
    gc.collect()
    before = _maxrss_bytes()
    times, cpu = [], []
    for _ in range(job["repeats"]):
        est = make_estimator(task, impl, d, job["max_iter"])
        start, start_cpu = time.perf_counter(), time.process_time()
        est.fit(X, y)
        times.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
        n_iter = getattr(est, "n_iter_", None)  # Ridge's cholesky solver has none
        del est
        gc.collect()
    peak_rss = _maxrss_bytes() - before
    traced = None
    if job["tracemalloc"]:
        est = make_estimator(task, impl, d, job["max_iter"])
        tracemalloc.start()
        est.fit(X, y)
        traced = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    n_iter = -1 if n_iter is None else int(np.max(n_iter))
    from threadpoolctl import threadpool_info

    threads = sorted({f"{lib['internal_api']}={lib['num_threads']}" for lib in threadpool_info()})
    return {"task": task, "impl": impl, "n": n, "d": d, "times": times, "threads": threads,
            "time": min(times), "cpu": min(cpu), "peak_rss_extra": peak_rss,
            "tracemalloc_peak": traced, "X_bytes": X.nbytes, "n_iter": n_iter,
            "load": os.getloadavg()[0]}


def run_child(job, threads=None):
    cmd = [sys.executable, __file__, "--child", json.dumps(job)]
    env = dict(os.environ)
    if threads:  # the same limit for both sides: BLAS, OpenMP (sklearn's Cython), MKL
        for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
            env[var] = str(threads)
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False, env=env)
    if proc.returncode != 0:
        raise RuntimeError(f"child {job} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def environment():
    """threadpoolctl's view and the settings that change BLAS speed."""
    import sklearn
    from threadpoolctl import threadpool_info

    lines = [f"python {platform.python_version()}, numpy {np.__version__}, "
             f"scikit-learn {sklearn.__version__}; {os.cpu_count()} CPUs; "
             f"load average {', '.join(f'{x:.2f}' for x in os.getloadavg())}"]
    for var in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE", "OPENBLAS_NUM_THREADS",
                "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        lines.append(f"{var}={os.environ.get(var, '(unset)')}")
    for lib in threadpool_info():
        lines.append(f"threadpoolctl: {lib['internal_api']} {lib.get('version')} "
                     f"({lib.get('architecture', '-')}), {lib['num_threads']} threads, "
                     f"{pathlib.Path(lib['filepath']).name}")
    return lines


def mb(x):
    return f"{x / 2**20:.0f}" if x >= 10 * 2**20 else f"{x / 2**20:.1f}"


def table(rows):
    lines = ["| pair | n | size of X (MB) | DP fit (s) | sklearn fit (s) | time ratio | "
             "CPU time ratio | "
             "DP steps / sklearn iters | DP extra memory (MB) | sklearn extra memory (MB) | "
             "DP extra / X | sklearn extra / X | load (DP / sklearn) |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for dp, sk in rows:
        xb = dp["X_bytes"]
        lines.append(
            f"| {NAMES[dp['task']][0]} vs {NAMES[dp['task']][1]} | {dp['n']:.0e} | {mb(xb)} | "
            f"{dp['time']:.3f} | {sk['time']:.3f} | {dp['time'] / sk['time']:.1f}x | "
            f"{dp['cpu'] / sk['cpu']:.1f}x | "
            f"{dp['n_iter']} / {sk['n_iter'] if sk['n_iter'] >= 0 else '-'} | "
            f"{_mem(dp)} | {_mem(sk)} | {dp['peak_rss_extra'] / xb:.2f} | "
            f"{sk['peak_rss_extra'] / xb:.2f} | {dp['load']:.1f} / {sk['load']:.1f} |")
    return "\n".join(lines)


def _mem(r):
    text = mb(r["peak_rss_extra"])
    if r["tracemalloc_peak"] is not None:
        text += f" ({mb(r['tracemalloc_peak'])})"
    return text


def plot(rows, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    for i, task in enumerate(TASKS):
        pairs = [(dp, sk) for dp, sk in rows if dp["task"] == task]
        if not pairs:
            continue
        ns = [dp["n"] for dp, _ in pairs]
        axes[0].plot(ns, [dp["time"] for dp, _ in pairs], "o-", color=f"C{i}",
                     label=NAMES[task][0])
        axes[0].plot(ns, [sk["time"] for _, sk in pairs], "s--", color=f"C{i}",
                     label=NAMES[task][1])
        axes[1].plot(ns, [dp["peak_rss_extra"] / dp["X_bytes"] for dp, _ in pairs], "o-",
                     color=f"C{i}", label=NAMES[task][0])
        axes[1].plot(ns, [sk["peak_rss_extra"] / sk["X_bytes"] for _, sk in pairs], "s--",
                     color=f"C{i}", label=NAMES[task][1])
    axes[0].set(xscale="log", yscale="log", xlabel="n (d = 100)", ylabel="fit time (s)",
                title="fit time (min over repeats)")
    axes[1].set(xscale="log", xlabel="n (d = 100)", ylabel="extra peak RSS / size of X",
                title="memory used by fit beyond the data")
    axes[1].axhline(0.5, color="k", lw=0.8, ls=":", label="X + extra = 1.5 X")
    for ax in axes:
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _mean_sd(values):
    if len(values) == 1:
        return f"{values[0]:.4f}"
    return f"{np.mean(values):.4f} +- {np.std(values, ddof=1):.4f}"


N_TEST = 100_000
#: (max_iter, noise seeds) of ``--cap-accuracy``: the default, the former cap,
#: and 1,000 steps to show how far from converged the fixed-step GD still is.
CAP_RUNS = ((None, 5), (100, 5), (1000, 1))


def cap_accuracy(sizes, d, out):
    """Test accuracy and log-loss: default steps vs ``max_iter=100`` vs scikit-learn."""
    from sklearn.metrics import accuracy_score, log_loss

    lines = [
        "DPLogisticRegression at epsilon = 1 (default delta = min(1e-5, n^-1.5)), default "
        "max_iter vs " + " and ".join(f"max_iter={m}" for m, _ in CAP_RUNS if m) + ", "
        f"and LogisticRegression() (lbfgs); synthetic logistic data of the speed benchmark "
        f"(d = {d}); training rows: the first n of make_data('logistic', n + {N_TEST}), test "
        f"rows: the last {N_TEST}. DP: mean +- standard deviation over "
        f"{' / '.join(str(k) for _, k in CAP_RUNS)} noise seeds. Bayes: the true model's "
        "own test metric.",
        "",
        "| n | model | steps | test accuracy | test log-loss |",
        "|---|---|---|---|---|",
    ]
    warnings.simplefilter("ignore")
    rows = []
    for n in sizes:
        X, y = make_data("logistic", n + N_TEST, d)
        X_tr, y_tr, X_te, y_te = X[:n], y[:n], X[n:], y[n:]
        w = np.random.default_rng(0).standard_normal(d)  # the generator's w* (same seed)
        w /= np.linalg.norm(w)
        p_true = 1.0 / (1.0 + np.exp(-(X_te @ w)))
        results = [("Bayes (true w*)", "-", [accuracy_score(y_te, p_true > 0.5)],
                    [log_loss(y_te, p_true)])]
        sk = make_estimator("logistic", "sklearn", d).fit(X_tr, y_tr)
        proba = sk.predict_proba(X_te)
        results.append(("LogisticRegression (lbfgs)", str(int(np.max(sk.n_iter_))),
                        [accuracy_score(y_te, sk.predict(X_te))], [log_loss(y_te, proba)]))
        for max_iter, n_seeds in CAP_RUNS:
            acc, ll, steps = [], [], set()
            for seed in range(n_seeds):
                est = make_estimator("logistic", "dp", d, max_iter)
                est.set_params(random_state=seed).fit(X_tr, y_tr)
                acc.append(accuracy_score(y_te, est.predict(X_te)))
                ll.append(log_loss(y_te, est.predict_proba(X_te)))
                steps.add(est.n_iter_)
            label = "DPLogisticRegression, " + ("default" if max_iter is None
                                                 else f"max_iter={max_iter}")
            results.append((label, "/".join(map(str, sorted(steps))), acc, ll))
        del X, X_tr, X_te
        for label, steps, acc, ll in results:
            lines.append(f"| {n:.0e} | {label} | {steps} | {_mean_sd(acc)} | {_mean_sd(ll)} |")
            rows.append((n, label, steps, acc, ll))
        print("\n".join(lines[-len(results):]), flush=True)
    text = "\n".join(lines)
    print("\n" + text)
    (out / "speed_cap_accuracy.txt").write_text(text + "\n")
    print(f"saved {out / 'speed_cap_accuracy.txt'}")
    return rows


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    parser.add_argument("--d", type=int, default=100)
    parser.add_argument("--tasks", nargs="+", default=list(TASKS), choices=TASKS)
    parser.add_argument("--quick", action="store_true", help="n in {1e4, 1e5} only")
    parser.add_argument("--threads", type=int, default=None,
                        help="limit BLAS/OpenMP threads of both sides (default: as set up)")
    parser.add_argument("--out", default=str(RESULTS), help="folder for the results")
    parser.add_argument("--max-iter", type=int, default=None,
                        help="noisy GD steps of the DP estimators (default: their default)")
    parser.add_argument("--cap-accuracy", action="store_true",
                        help="test accuracy and log-loss of the default number of steps vs "
                        "max_iter=100 (logistic; default sizes 1e5 and 1e6)")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(child(json.loads(args.child))))
        return 0
    sizes = [n for n in args.sizes if n <= 100_000] if args.quick else args.sizes
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if args.cap_accuracy:
        given = "--sizes" in (argv if argv is not None else sys.argv)
        cap_accuracy(sizes if given else [100_000, 1_000_000], args.d, out)
        return 0
    env = environment()
    print("\n".join(env), flush=True)
    start = time.perf_counter()
    rows = []
    for n in sizes:
        repeats = 5 if n <= 10_000 else 3 if n <= 100_000 else 2
        for task in args.tasks:
            pair = []
            for impl in ("dp", "sklearn"):
                job = {"task": task, "impl": impl, "n": n, "d": args.d, "repeats": repeats,
                       "tracemalloc": n <= 100_000, "max_iter": args.max_iter}
                pair.append(run_child(job, args.threads))
            rows.append(tuple(pair))
            dp, sk = pair
            print(f"n={n:.0e} {task:<8} DP {dp['time']:.3f}s  sklearn {sk['time']:.3f}s  "
                  f"ratio {dp['time'] / sk['time']:.1f}x (CPU {dp['cpu'] / sk['cpu']:.1f}x), "
                  f"load {os.getloadavg()[0]:.1f}", flush=True)
    text = "\n".join([
        f"Synthetic data, d = {args.d}, float64, AR(1) feature correlation 0.5. Fit time: min "
        "over repeats (5 at n=1e4, 3 at 1e5, 2 at 1e6) in a fresh process per estimator and n; "
        "wall clock, and process CPU time (all threads; robust to other load with 1 thread). "
        "Extra memory: peak RSS (ru_maxrss) during the fits minus before them, in MB; in "
        "parentheses tracemalloc's peak (n <= 1e5). 'DP steps': noisy GD steps ("
        "max_iter); 'sklearn iters': n_iter_ of the scikit-learn solver (- if it has none). "
        "Load: the machine's 1-minute load average at the end of each side's fits.",
        "", *env, "threads in the fits (threadpoolctl, in the child processes): "
        + ", ".join(sorted({t for pair in rows for r in pair for t in r["threads"]})),
        "", table(rows),
        "", f"total {time.perf_counter() - start:.0f} s"])
    print("\n" + text)
    # Runs other than the defaults save under their own names (a --quick run
    # does not overwrite the full one).
    stem = "speed" + (f"_d{args.d}" if args.d != 100 else "") + (
        f"_{args.threads}thread" if args.threads else "") + (
        f"_maxiter{args.max_iter}" if args.max_iter else "") + ("_quick" if args.quick else "")
    (out / f"{stem}.txt").write_text(text + "\n")
    csv = ["task,impl,n,d,X_bytes,time_min,cpu_min,times,n_iter,peak_rss_extra,tracemalloc_peak,"
           "load"]
    for pair in rows:
        for r in pair:
            csv.append(f"{r['task']},{r['impl']},{r['n']},{r['d']},{r['X_bytes']},"
                       f"{r['time']:.4f},{r['cpu']:.4f},{' '.join(f'{t:.4f}' for t in r['times'])},"
                       f"{r['n_iter']},{r['peak_rss_extra']},{r['tracemalloc_peak'] or ''},"
                       f"{r['load']:.2f}")
    (out / f"{stem}.csv").write_text("\n".join(csv) + "\n")
    plot(rows, out / f"{stem}.png")
    print(f"saved {out / stem}.txt, .csv, .png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
