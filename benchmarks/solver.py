"""The exact constrained solver: ``epsilon=np.inf`` and output perturbation.

``epsilon=np.inf`` fits minimize the empirical risk over the ball
``||theta|| <= norm_bound`` to a gradient-mapping norm of 1e-10
(``dp_glm_sklearn.mechanisms._solver``); output perturbation runs the same
solver on the L2-regularized risk before adding its noise.  This script times
both against scikit-learn's ``LogisticRegression()`` (lbfgs, its own default
problem: an L2 penalty with C = 1, tolerance 1e-4) on multinomial data with
K classes, n = 5,000 rows and d = 20 features:

- ``DPLogisticRegression(epsilon=np.inf)`` (the non-private constrained fit,
  ``norm_bound`` 10, the default);
- ``DPLogisticRegression(epsilon=1, method="output_perturbation")``;
- ``LogisticRegression()``.

Data: ``x ~ N(0, I_d)``, labels the argmax of ``x W + Gumbel noise`` with
``W ~ N(0, 1)`` (a multinomial logit model); ``feature_norm = 2 sqrt(d)``.
Prints wall-clock seconds of ``fit`` (one run each, after a warm-up fit) and
training accuracy, and saves the table as ``results/solver.txt``.

Run: ``python benchmarks/solver.py [--classes 2 10 50 200]``
"""

import argparse
import pathlib
import sys
import time
import warnings

import numpy as np
from sklearn.linear_model import LogisticRegression

HERE = pathlib.Path(__file__).parent
sys.path.insert(0, str(HERE.parent))  # benchmark the checkout, installed or not

from dp_glm_sklearn import DPLogisticRegression  # noqa: E402

RESULTS = HERE / "results"


def make_data(n_classes, n=5_000, d=20, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    W = rng.normal(size=(d, n_classes))
    y = np.argmax(X @ W + rng.gumbel(size=(n, n_classes)), axis=1)
    return X, y


def models(n_classes, d):
    bounds = dict(feature_norm=2.0 * np.sqrt(d), classes=np.arange(n_classes), random_state=0)
    return {
        "epsilon=inf": DPLogisticRegression(epsilon=np.inf, **bounds),
        "output_perturbation": DPLogisticRegression(epsilon=1.0, method="output_perturbation",
                                                    **bounds),
        "sklearn LogisticRegression": LogisticRegression(),
    }


def timed_fit(model, X, y):
    start = time.perf_counter()
    model.fit(X, y)
    return time.perf_counter() - start, model.score(X, y)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--classes", type=int, nargs="+", default=[2, 10, 50, 200])
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    X, y = make_data(3, n=2_000)
    for model in models(3, X.shape[1]).values():  # warm-up: imports, thread pools
        model.fit(X, y)
    lines = ["| K | fit | seconds | training accuracy |", "|---|---|---|---|"]
    print(lines[0])
    print(lines[1])
    for n_classes in args.classes:
        X, y = make_data(n_classes)
        for name, model in models(n_classes, X.shape[1]).items():
            seconds, accuracy = timed_fit(model, X, y)
            lines.append(f"| {n_classes} | {name} | {seconds:.2f} | {accuracy:.3f} |")
            print(lines[-1], flush=True)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "solver.txt").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
