"""Peak memory of a large sparse fit: 20,000 x 200,000 logistic, ~20 non-zeros a row.

Each method runs in its own subprocess, so that its peak resident set size
(``resource.getrusage(...).ru_maxrss``) is its own; the data is generated in
that subprocess too (it is part of the peak, about 5 MB).  A dense copy of X
would take 32 GB: any densification would show (or crash).

Run: ``python benchmarks/sparse_memory.py [--methods noisy_gd,jl,auto,...]``.
Prints a table and writes ``benchmarks/results/sparse_memory.txt``.
"""

import argparse
import json
import pathlib
import resource
import subprocess
import sys
import time

RESULTS = pathlib.Path(__file__).parent / "results"
N, D, NNZ_PER_ROW = 20_000, 200_000, 20
LIMIT_GB = 4.0


def _child(method):
    import numpy as np
    import scipy.sparse as sp

    from dp_glm_sklearn import DPLogisticRegression

    rng = np.random.default_rng(0)
    # Built directly in CSR (scipy.sparse.random would allocate O(N * D) here).
    indices = np.sort(rng.integers(0, D, size=(N, NNZ_PER_ROW)), axis=1)
    X = sp.csr_matrix((np.full(N * NNZ_PER_ROW, 1.0 / np.sqrt(NNZ_PER_ROW)), indices.ravel(),
                       np.arange(0, N * NNZ_PER_ROW + 1, NNZ_PER_ROW)), shape=(N, D))
    X.sum_duplicates()  # rows of norm <= 1 (== 1 without repeated indices)
    w = np.zeros(D)
    support = rng.choice(D, 2000, replace=False)
    w[support] = rng.normal(scale=3.0, size=2000)
    y = (rng.random(N) < 1.0 / (1.0 + np.exp(-(X @ w)))).astype(int)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t0 = time.perf_counter()
    clf = DPLogisticRegression(epsilon=1.0, feature_norm=1.0, norm_bound=10.0,
                               classes=[0, 1], method=method, random_state=0).fit(X, y)
    seconds = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    print(json.dumps(dict(method=method, chosen=clf.method_, seconds=seconds,
                          peak_gb=peak / 2**20, before_fit_gb=before / 2**20,
                          train_accuracy=float(clf.score(X, y)),
                          x_mb=(X.data.nbytes + X.indices.nbytes + X.indptr.nbytes) / 2**20)))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--methods", default="noisy_gd,jl,auto,output_perturbation")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        _child(args.child)
        return
    lines = [f"{N} x {D} sparse logistic regression, {NNZ_PER_ROW} non-zeros a row, "
             f"epsilon = 1 (limit {LIMIT_GB:g} GB)",
             f"{'method':<20} {'trained with':<20} {'peak RSS GB':>11} {'seconds':>8} "
             f"{'train acc':>9}"]
    for method in args.methods.split(","):
        out = subprocess.run([sys.executable, __file__, "--child", method], check=True,
                             capture_output=True, text=True).stdout
        r = json.loads(out.strip().splitlines()[-1])
        verdict = "ok" if r["peak_gb"] <= LIMIT_GB else "OVER LIMIT"
        lines.append(f"{method:<20} {r['chosen']:<20} {r['peak_gb']:>11.2f} "
                     f"{r['seconds']:>8.1f} {r['train_accuracy']:>9.3f}  {verdict}")
        print(lines[-1], flush=True)
    lines.append(f"(X itself: {r['x_mb']:.1f} MB in CSR; a dense copy would be "
                 f"{N * D * 8 / 2**30:.0f} GB)")
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "sparse_memory.txt").write_text("\n".join(lines) + "\n")
    print(lines[-1])


if __name__ == "__main__":
    main()
