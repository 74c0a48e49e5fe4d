"""Run IBM diffprivlib on the utility benchmark's splits (helper of ``utility.py``).

diffprivlib is not a dependency of dp_glm_sklearn and does not import with
recent scikit-learn, so ``utility.py`` runs this script with the Python of a
separate virtual environment (e.g. one with ``diffprivlib==0.6.6`` and
``scikit-learn==1.7.*``). It imports neither dp_glm_sklearn nor anything of
this repository.

Protocol: JSON on standard input::

    {"X": [[...]], "y": [...], "task": "regression" | "classification",
     "splits": [{"train": [...], "test": [...]}, ...],
     "epsilons": [...], "seeds": [...], "feature_norm": float,
     "y_bounds": [lo, hi] (regression only)}

For each split: a StandardScaler fit on the training rows, training rows
clipped to ``feature_norm`` (the protocol shared with dp_glm_sklearn), then for
each epsilon and seed a diffprivlib model with its natural public parameters:
``LinearRegression(bounds_X=(-feature_norm, feature_norm), bounds_y=y_bounds)``
(every coordinate of a row of norm <= feature_norm lies in that interval) and
``LogisticRegression(data_norm=feature_norm)``; its ``score`` on the
(unclipped) test rows. JSON on standard output:
``{"scores": {epsilon: [...]}, "versions": {...}, "warnings": [...]}``.
"""

import json
import sys
import warnings


def main():
    import diffprivlib
    import numpy as np
    import sklearn
    from diffprivlib.models import LinearRegression, LogisticRegression
    from sklearn.preprocessing import StandardScaler

    job = json.load(sys.stdin)
    X = np.asarray(job["X"], dtype=float)
    y = np.asarray(job["y"])
    norm = float(job["feature_norm"])
    scores = {str(eps): [] for eps in job["epsilons"]}
    seen = set()
    for split in job["splits"]:
        tr, te = np.asarray(split["train"]), np.asarray(split["test"])
        scaler = StandardScaler().fit(X[tr])
        X_tr, X_te = scaler.transform(X[tr]), scaler.transform(X[te])
        row_norms = np.linalg.norm(X_tr, axis=1)
        X_tr = X_tr * np.minimum(1.0, norm / np.maximum(row_norms, 1e-300))[:, None]
        for eps in job["epsilons"]:
            for seed in job["seeds"]:
                if job["task"] == "regression":
                    model = LinearRegression(epsilon=eps, bounds_X=(-norm, norm),
                                             bounds_y=tuple(job["y_bounds"]),
                                             random_state=seed)
                else:
                    model = LogisticRegression(epsilon=eps, data_norm=norm, random_state=seed)
                with warnings.catch_warnings(record=True) as caught:
                    warnings.simplefilter("always")
                    model.fit(X_tr, y[tr])
                    score = float(model.score(X_te, y[te]))
                seen.update(f"{w.category.__name__}: {w.message}" for w in caught)
                scores[str(eps)].append(score)
    json.dump({"scores": scores,
               "versions": {"diffprivlib": diffprivlib.__version__,
                            "scikit-learn": sklearn.__version__, "numpy": np.__version__},
               "warnings": sorted(seen)}, sys.stdout)


if __name__ == "__main__":
    main()
