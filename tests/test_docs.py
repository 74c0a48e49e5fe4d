"""The code in the README and the user guide runs as written, and gives the
numbers the text quotes.

Each document's ```python blocks are executed in order in one namespace, as a
reader would paste them.  The numbers the documents quote next to the code are
read from the document text (not copied here), so that editing a quoted number,
or a change of the library that moves it, fails a test.  A quoted number is
checked to the precision it is written with: ``1.14`` means the value rounds to
1.14 (``|value - 1.14| <= 0.005``); a number in exponent notation (``1e-06``)
must be equal.
"""

import contextlib
import io
import pathlib
import pickle
import re
import statistics
import warnings

import numpy as np
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
DOCUMENTS = ["README.md", "docs/user_guide.md"]
NUMBER = r"(-?\d+(?:\.\d+)?(?:e-?\d+)?)"
WORDS = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6}


def read(path):
    return (ROOT / path).read_text()


def python_blocks(path):
    return re.findall(r"```python\n(.*?)```", read(path), flags=re.S)


def run_blocks(document):
    """Execute the blocks in order; after each, a snapshot (names, printed text)."""
    blocks = python_blocks(document)
    assert blocks, f"{document} has no python code block"
    namespace = {"__name__": "__docs__"}
    snapshots = []
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the documented code must not warn
        for block in blocks:
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                exec(compile(block, document, "exec"), namespace)
            snapshots.append((block, dict(namespace), out.getvalue()))
    return snapshots


@pytest.fixture(scope="module")
def executed():
    """Each document run once for the whole module."""
    return {document: run_blocks(document) for document in DOCUMENTS}


def quoted(text, pattern, where):
    """The numbers (as written) captured by ``pattern`` in ``text``; fails if absent."""
    match = re.search(pattern, " ".join(text.split()))  # line breaks are spaces
    assert match, f"{where}: no text matching {pattern!r}; update the document or this test"
    return match.groups()


def assert_quoted(value, written, what):
    """``value`` agrees with the number ``written`` to the precision it is written with."""
    expected = float(written)
    if "e" in written.lower():
        assert value == pytest.approx(expected, rel=1e-12), f"{what}: {value!r} vs {written}"
        return
    decimals = len(written.split(".")[1]) if "." in written else 0
    assert abs(value - expected) <= 0.5 * 10.0**-decimals * (1 + 1e-9), (
        f"{what}: the code gives {value!r}, the document quotes {written}")


def block_with(snapshots, marker):
    (found,) = [s for s in snapshots if marker in s[0]]
    return found


@pytest.mark.parametrize("document", DOCUMENTS)
def test_document_code_runs(document, executed):
    assert len(executed[document]) == len(python_blocks(document))


# -- README quickstart ------------------------------------------------------------------
def test_readme_quickstart_privacy_numbers(executed):
    block, ns, _ = block_with(executed["README.md"], "reg.privacy_spent_, acc.spent()")
    fit_eps, fit_delta, acc_eps, acc_delta = quoted(
        block,
        rf"reg\.privacy_spent_, acc\.spent\(\)\s*#\s*about \({NUMBER}, {NUMBER}\) for this fit;"
        rf"\s*\({NUMBER}, {NUMBER}\)",
        "README quickstart")
    reg, acc = ns["reg"], ns["acc"]
    assert_quoted(reg.privacy_spent_[0], fit_eps, "privacy_spent_ epsilon")
    assert_quoted(reg.privacy_spent_[1], fit_delta, "privacy_spent_ delta")
    # The ledger after this block's one fit (a later block charges acc again).
    after_fit = acc.history[0]
    assert len(after_fit.events) == 1
    assert_quoted(after_fit.total_epsilon, acc_eps, "acc.spent() epsilon")
    assert_quoted(acc.spent()[1], acc_delta, "acc.spent() delta")


def _check_quickstart_fit(ns, name, here, median):
    """The fit ``ns[name]`` scores ``here``, and ``median`` over noise seeds 0..99
    with everything else as in the quickstart (deterministic)."""
    est = ns[name]
    X_train, X_test, y_train, y_test = (ns[k] for k in ("X_train", "X_test", "y_train",
                                                          "y_test"))
    assert_quoted(est.score(X_test, y_test), here, f"R^2 of the quickstart's {name}")
    params = {k: v for k, v in est.get_params().items() if k not in ("accountant",
                                                                      "random_state")}
    scores = [type(est)(**params, random_state=seed).fit(X_train, y_train).score(X_test, y_test)
              for seed in range(100)]
    assert_quoted(statistics.median(scores), median, f"median R^2 of {name} over seeds 0..99")


def test_readme_quickstart_scores(executed):
    from sklearn.linear_model import LinearRegression

    block, ns, _ = block_with(executed["README.md"], "reg.score(X_test, y_test)")
    here, median, non_private = quoted(
        block,
        rf"reg\.score\(X_test, y_test\)\s*#\s*R\^2 {NUMBER} here; median {NUMBER} over noise "
        rf"seeds 0-99 \({NUMBER} non-private\)",
        "README quickstart")
    # (Over 1000 seeds the median is 0.10.)
    _check_quickstart_fit(ns, "reg", here, median)
    baseline = LinearRegression().fit(ns["X_train"], ns["y_train"]).score(ns["X_test"],
                                                                         ns["y_test"])
    assert_quoted(baseline, non_private, "non-private R^2 (LinearRegression)")


def test_readme_quickstart_huber_scores(executed):
    block, ns, _ = block_with(executed["README.md"], "hub.score(X_test, y_test)")
    here, median = quoted(
        block,
        rf"hub\.score\(X_test, y_test\)\s*#\s*R\^2 {NUMBER} here; median {NUMBER} over noise "
        rf"seeds 0-99",
        "README quickstart (Huber)")
    hub, reg = ns["hub"], ns["reg"]
    # The same public bounds and budget as the least-squares fit above it.
    for name in ("epsilon", "feature_norm", "y_bound", "norm_bound"):
        assert hub.get_params()[name] == reg.get_params()[name], name
    _check_quickstart_fit(ns, "hub", here, median)
    total, delta = quoted(block, rf"acc\.spent\(\)\s*#\s*\({NUMBER}, {NUMBER}\)",
                          "README quickstart (Huber)")
    acc = ns["acc"]
    assert len(acc.history) == 2  # the least-squares fit and this one
    assert_quoted(acc.spent()[0], total, "acc.spent() epsilon after both fits")
    assert_quoted(acc.spent()[1], delta, "acc.spent() delta after both fits")
    (affordable,) = quoted(block, rf"acc\.affordable_epsilon\(\)\s*#\s*{NUMBER}:",
                           "README quickstart (affordable_epsilon)")
    assert_quoted(acc.affordable_epsilon(), affordable, "acc.affordable_epsilon()")


# -- user guide, section 4: the accountant ------------------------------------------------
def test_user_guide_accountant_numbers(executed):
    from dp_glm_sklearn.privacy import compose

    block, ns, printed = block_with(executed["docs/user_guide.md"], "cross_val_score(")
    text = read("docs/user_guide.md")
    count, fit_eps, total, acc_delta, fifth, budget = quoted(
        text,
        rf"(\w+) fits of epsilon {NUMBER} \(each at\s+its default delta, the accountant's\) "
        rf"compose, "
        rf"exactly in Gaussian DP, to {NUMBER} at the\s+accountant's delta = {NUMBER}; a fifth "
        rf"would bring the total to {NUMBER} > {NUMBER}",
        "docs/user_guide.md section 4")
    acc, clf = ns["acc"], ns["clf"]
    assert_quoted(acc.epsilon, budget, "the accountant's budget")
    assert_quoted(acc.delta, acc_delta, "the accountant's delta")
    assert_quoted(clf.epsilon, fit_eps, "epsilon of each fit")
    history = acc.history
    assert len(history) == WORDS[count.lower()], "number of fits charged"
    assert_quoted(acc.spent()[0], total, f"total after {count.lower()} fits")
    # The refused fifth fit: what the error printed, and the same fit recomputed.
    assert "refused:" in printed
    (would_be,) = quoted(printed, rf"the total would be epsilon={NUMBER}", "printed refusal")
    assert_quoted(float(would_be), fifth, "total with a fifth fit (error message)")
    events = [event for record in history for event in record.events]
    recomputed = compose(events + list(history[-1].events), acc.delta)
    assert_quoted(recomputed, fifth, "total with a fifth fit (recomputed)")
    assert recomputed > acc.epsilon
    # What is left, as remaining() and affordable_epsilon() say it.
    left, next_fit = quoted(
        text, rf"`remaining\(\)` is the budget minus the total\s+\({NUMBER} here\).*?"
        rf"can still be charged \({NUMBER}\)", "docs/user_guide.md section 4")
    assert_quoted(acc.remaining()[0], left, "remaining()")
    assert_quoted(acc.affordable_epsilon(), next_fit, "affordable_epsilon()")


# -- docs/privacy.md and DPRandomizedSearchCV's docstring: random stopping figures --------
@pytest.mark.parametrize("where", ["docs/privacy.md", "docstring"])
def test_random_stopping_figures(where):
    from dp_glm_sklearn import DPRandomizedSearchCV
    from dp_glm_sklearn.privacy import RandomStoppingEvent, compose, gdp_mu
    from dp_glm_sklearn.privacy.selection import random_stopping_mu, random_stopping_refit_mu

    text = read(where) if where.endswith(".md") else DPRandomizedSearchCV.__doc__
    eps, delta, cost, acc_delta = quoted(
        text, rf"a search at \({NUMBER}, {NUMBER}\) costs about {NUMBER} at (?:the default "
        rf"accountant's |an accountant's delta of )?{NUMBER}", where)
    eps, delta = float(eps), float(delta)
    mu = random_stopping_mu(eps, delta, 10.0)
    charged = compose([RandomStoppingEvent(mu, 10.0, "logarithmic")], float(acc_delta))
    assert_quoted(charged, cost, f"{where}: cost at the accountant's delta")
    if where.endswith(".md"):
        pattern = (rf"about {NUMBER}% more at the default `mean_candidates=10`, {NUMBER}% at "
                   rf"`mean_candidates=4`, less the more candidates are expected "
                   rf"\({NUMBER}% at 30\)")
    else:
        pattern = (rf"about {NUMBER}% more mu with ``mean_candidates=10``, {NUMBER}% with 4, "
                   rf"{NUMBER}% with 30")
    for mean, percent in zip((10, 4, 30), quoted(text, pattern, where), strict=True):
        gain = random_stopping_refit_mu(random_stopping_mu(eps / 2, delta / 2, mean), mean, eps,
                                        delta) / gdp_mu(eps / 2, delta / 2) - 1
        assert_quoted(100 * gain, percent, f"{where}: refit gain at mean_candidates={mean}")


def test_the_demo_prints_its_table_and_refuses_counts_below_one(capsys):
    from dp_glm_sklearn._demo import DATASETS, main

    assert main(["demo", "--splits", "1", "--seeds", "1"]) == 0
    out = capsys.readouterr().out
    assert "(median over 1 splits x 1 noise seeds, delta=1e-5)" in out
    for name in DATASETS:  # five epsilons and the non-private row each
        assert len(re.findall(rf"^{name} ", out, flags=re.M)) == 6, name
    for option in ("--splits", "--seeds"):
        for value in ("0", "-2", "x"):
            with pytest.raises(SystemExit) as info:  # argparse's usage error, no traceback
                main(["demo", option, value])
            assert info.value.code == 2
            assert "must be an integer >= 1" in capsys.readouterr().err


def test_user_guide_pipeline_pickles(executed):
    # Section 6's pipeline is pickled like any estimator (the guide said so, and
    # its FunctionTransformer held a lambda, which pickle refuses; it now uses
    # PublicRangeScaler, which its scikit-learn tag says needs no fit).
    from sklearn.utils import get_tags

    from dp_glm_sklearn import leaky_steps

    _, ns, _ = block_with(executed["docs/user_guide.md"], "PublicRangeScaler(low=")
    pipe = ns["pipe"]
    assert leaky_steps(pipe) == [] and not get_tags(ns["scale"]).requires_fit
    restored = pickle.loads(pickle.dumps(pipe))
    np.testing.assert_array_equal(restored.predict(ns["X_test"]), pipe.predict(ns["X_test"]))


def test_random_search_cost_ratio_figures():
    # "1.77-2.07 times one candidate ... for a total epsilon from 5 down to 0.5"
    # (the old "1.8-2.1" was off at epsilon 5: 1.772; docs audit, session 32).
    from dp_glm_sklearn.privacy import gdp_epsilon
    from dp_glm_sklearn.privacy.selection import random_stopping_mu

    low, high = quoted(read("docs/user_guide.md"), rf"\({NUMBER}–{NUMBER} times at the default "
                       r"`mean_candidates=10` and delta 1e-5, for a total epsilon from 5 down "
                       "to 0.5", "docs/user_guide.md")
    ratios = {eps: eps / gdp_epsilon(random_stopping_mu(eps, 1e-5, 10.0), 1e-5)
              for eps in (5.0, 0.5)}
    assert_quoted(ratios[5.0], low, "ratio at epsilon 5")
    assert_quoted(ratios[0.5], high, "ratio at epsilon 0.5")


def _results_rows(path, first_columns):
    """Rows of a saved benchmark table whose first cells are ``first_columns``."""
    rows = {}
    for line in read(path).splitlines():
        if line.startswith("|"):
            cells = [c.strip() for c in line.strip("|").split("|")]
        else:
            cells = line.split()
        if len(cells) > first_columns:  # the first table's row, if two have the key
            rows.setdefault(tuple(cells[:first_columns]), cells[first_columns:])
    return rows


def _markdown_rows(path, header_start):
    """The body rows of the markdown table of ``path`` whose header starts so."""
    lines = read(path).splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(header_start))
    rows = []
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        rows.append([c.strip() for c in line.strip("|").split("|")])
    return rows


@pytest.mark.parametrize("document", ["README.md", "benchmarks/README.md"])
def test_model_selection_table_matches_the_saved_results(document):
    """The epsilon-3 table of the documents is benchmarks/results/model_selection.txt's
    (a rerun of the benchmark must update both)."""
    saved = _results_rows("benchmarks/results/model_selection.txt", 3)
    rows = _markdown_rows(document, "| data set | defaults | search | hindsight | ceiling | gap")
    names = {"diabetes R^2": "diabetes", "breast_cancer accuracy": "breast_cancer",
             "synthetic R^2": "synthetic", "diabetes R^2, `DPHuberRegressor`": "diabetes/huber"}
    seen = set()
    for label, defaults, search, hindsight, ceiling, gap in rows:
        name = next(n for prefix, n in names.items()
                    if label.startswith(prefix) and ("Huber" in label) == ("huber" in n))
        metric = "accuracy" if name == "breast_cancer" else "R^2"
        cells = saved[(name, metric, "3")]
        # saved: defaults hindsight ceiling auto search gap ...
        assert [defaults, hindsight, ceiling, search, gap] == [
            cells[0], cells[1], cells[2], cells[4], cells[5]], (document, label)
        seen.add(name)
    assert seen == set(names.values())


def test_readme_utility_table_matches_the_saved_results():
    """README's privacy-utility medians are benchmarks/results/utility.txt's."""
    saved = _results_rows("benchmarks/results/utility.txt", 3)
    rows = _markdown_rows("README.md", "| epsilon | diabetes R^2 (DPLinearRegression)")
    checked = 0
    for epsilon, linear, huber, cancer, _ in rows:
        if not epsilon[0].isdigit():
            continue  # the non-private row
        for name, metric, value in [("diabetes", "R^2", linear),
                                    ("diabetes/huber", "R^2", huber),
                                    ("breast_cancer", "accuracy", cancer)]:
            assert saved[(name, metric, epsilon)][0].split()[0] == value, (name, epsilon)
            checked += 1
    assert checked == 15
