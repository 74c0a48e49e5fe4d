"""Peak memory of a large sparse fit: 20,000 x 200,000 logistic, ~20 non-zeros a row.

Each method runs in its own subprocess, so that its peak resident set size
(``resource.getrusage(...).ru_maxrss``) is its own; the data is generated in
that subprocess too (it is part of the peak, about 5 MB).  A dense copy of X
would take 30 GiB: any densification would show (or crash).

Next to them, in the same run, scikit-learn's non-private
``LogisticRegression()`` (lbfgs, sparse-aware) on the same data, and the
accuracy of the true model (labels are drawn from it, so no classifier can
expect more on average): the signal is weak, so train accuracies near it
are as good as they get.

Run: ``python benchmarks/sparse_memory.py [--methods noisy_gd,jl,auto,...,sklearn]
[--n 200000] [--d 10000]`` (about a minute).  Prints a table and writes it to
``benchmarks/results/sparse_memory.txt`` (default methods, n and d) or
``sparse_memory_n<n>.txt`` (another n), ``sparse_memory_n<n>_d<d>.txt`` (another d).
"""

import argparse
import json
import pathlib
import resource
import subprocess
import sys
import time

HERE = pathlib.Path(__file__).parent
sys.path.insert(0, str(HERE.parent))  # benchmark the checkout, installed or not

RESULTS = HERE / "results"
METHODS = "noisy_gd,jl,auto,output_perturbation,sklearn"
N, D, NNZ_PER_ROW = 20_000, 200_000, 20
LIMIT_GB = 4.0


def _child(method, N=N, D=D):
    import numpy as np
    import scipy.sparse as sp
    from sklearn.linear_model import LogisticRegression

    from dp_glm_sklearn import DPLogisticRegression

    rng = np.random.default_rng(0)
    # Built directly in CSR (scipy.sparse.random would allocate O(N * D) here).
    indices = np.sort(rng.integers(0, D, size=(N, NNZ_PER_ROW)), axis=1)
    X = sp.csr_matrix((np.full(N * NNZ_PER_ROW, 1.0 / np.sqrt(NNZ_PER_ROW)), indices.ravel(),
                       np.arange(0, N * NNZ_PER_ROW + 1, NNZ_PER_ROW)), shape=(N, D))
    X.sum_duplicates()  # rows of norm <= 1 (== 1 without repeated indices)
    w = np.zeros(D)
    support = rng.choice(D, min(2000, D), replace=False)
    w[support] = rng.normal(scale=3.0, size=support.size)
    p = 1.0 / (1.0 + np.exp(-(X @ w)))
    y = (rng.random(N) < p).astype(int)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t0 = time.perf_counter()
    if method == "sklearn":
        clf = LogisticRegression().fit(X, y)
        chosen = "lbfgs (non-private)"
    else:
        clf = DPLogisticRegression(epsilon=1.0, feature_norm=1.0, norm_bound=10.0,
                                   classes=[0, 1], method=method, random_state=0).fit(X, y)
        chosen = clf.method_
    seconds = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    print(json.dumps(dict(method=method, chosen=chosen, seconds=seconds,
                          peak_gb=peak / 2**20, before_fit_gb=before / 2**20,
                          train_accuracy=float(clf.score(X, y)),
                          true_model_accuracy=float(np.mean(np.maximum(p, 1.0 - p))),
                          x_mb=(X.data.nbytes + X.indices.nbytes + X.indptr.nbytes) / 2**20)))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--methods", default=METHODS)
    parser.add_argument("--n", type=int, default=N, help="rows (default %(default)s)")
    parser.add_argument("--d", type=int, default=D, help="features (default %(default)s)")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        _child(args.child, args.n, args.d)
        return
    lines = [f"{args.n} x {args.d} sparse logistic regression, {NNZ_PER_ROW} non-zeros a row, "
             f"epsilon = 1 (limit {LIMIT_GB:g} GB)",
             f"{'method':<20} {'trained with':<20} {'peak RSS GB':>11} {'seconds':>8} "
             f"{'train acc':>9}"]
    for method in args.methods.split(","):
        out = subprocess.run([sys.executable, __file__, "--child", method, "--n", str(args.n),
                              "--d", str(args.d)],
                             check=True,
                             capture_output=True, text=True).stdout
        r = json.loads(out.strip().splitlines()[-1])
        verdict = "ok" if r["peak_gb"] <= LIMIT_GB else "OVER LIMIT"
        lines.append(f"{method:<20} {r['chosen']:<20} {r['peak_gb']:>11.2f} "
                     f"{r['seconds']:>8.1f} {r['train_accuracy']:>9.3f}  {verdict}")
        print(lines[-1], flush=True)
    lines.append(f"(X itself: {r['x_mb']:.1f} MB in CSR; a dense copy would be "
                 f"{args.n * args.d * 8 / 2**30:.0f} GiB; the true model's expected accuracy "
                 f"on these labels: {r['true_model_accuracy']:.3f})")
    print(lines[-1])
    if args.methods == METHODS or args.n != N or args.d != D:
        RESULTS.mkdir(exist_ok=True)
        name = ("sparse_memory.txt" if (args.n, args.d) == (N, D) else
                f"sparse_memory_n{args.n}.txt" if args.d == D else
                f"sparse_memory_n{args.n}_d{args.d}.txt")
        (RESULTS / name).write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
