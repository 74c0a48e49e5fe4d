"""The accountant as estimators use it: every fit charged, no charge lost."""

import copy
import math
import pickle

import joblib
import numpy as np
import pytest
from dp_accounting import dp_event
from dp_accounting.rdp import rdp_privacy_accountant
from sklearn.base import clone
from sklearn.datasets import load_breast_cancer, make_classification
from sklearn.model_selection import GridSearchCV, cross_val_score

from dp_glm_sklearn import (
    BudgetExceededError,
    DPLinearRegression,
    DPLogisticRegression,
    DPRandomizedSearchCV,
    PrivacyAccountant,
    default_accountant,
    get_default_accountant,
)
from dp_glm_sklearn.privacy.calibration import gdp_mu
from dp_glm_sklearn.privacy.events import (
    ApproxDPEvent,
    GaussianEvent,
    RandomStoppingEvent,
    compose,
)
from dp_glm_sklearn.privacy.selection import random_stopping_epsilon, random_stopping_mu


@pytest.fixture(scope="module")
def data():
    X, y = make_classification(n_samples=300, n_features=4, random_state=0)
    return X, y


def _clf(acc, **kw):
    return DPLogisticRegression(classes=[0, 1], accountant=acc, random_state=0, **kw)


def test_cross_val_score_charges_four_fits_and_refuses_the_fifth():
    X, y = load_breast_cancer(return_X_y=True)
    # Five fits at epsilon=1 (delta=1e-5 each) compose exactly in GDP to
    # epsilon 4.56 at delta=1e-14, and four fits to 4.05: a budget of 4.5 at
    # that delta affords four fits, as basic composition (4 * 1 <= 4.5) would.
    acc = PrivacyAccountant(epsilon=4.5, delta=1e-14)
    est = _clf(acc, epsilon=1.0, delta=1e-5)  # (by default, the accountant's 1e-14)
    with pytest.raises(BudgetExceededError):
        cross_val_score(est, X, y, cv=5, error_score="raise")
    assert len(acc.history) == 4
    mu = gdp_mu(1.0, 1e-5)
    assert acc.spent()[0] == pytest.approx(compose([GaussianEvent(mu)] * 4, 1e-14), rel=1e-9)
    fifth = clone(est)
    with pytest.raises(BudgetExceededError):
        fifth.fit(X, y)
    assert not hasattr(fifth, "coef_")
    assert len(acc.history) == 4


def test_refused_fit_reads_no_data():
    """The budget is checked before the data is validated or read."""
    acc = PrivacyAccountant(epsilon=0.5, delta=1e-6)
    X = np.full((20, 2), np.nan)  # would fail validation if it were read
    with pytest.raises(BudgetExceededError):
        _clf(acc, epsilon=1.0).fit(X, np.arange(20) % 2)


def test_grid_search_clones_charge_the_users_accountant(data):
    X, y = data
    acc = PrivacyAccountant()
    grid = GridSearchCV(_clf(acc), {"norm_bound": [1.0, 4.0]}, cv=3).fit(X, y)
    assert len(acc.history) == 2 * 3 + 1  # every candidate x fold, and the refit
    assert grid.best_estimator_.accountant is acc


@pytest.mark.parametrize("copier", [
    clone,
    copy.copy,
    copy.deepcopy,
    lambda est: pickle.loads(pickle.dumps(est)),
], ids=["clone", "copy", "deepcopy", "pickle"])
def test_copies_charge_the_original(data, copier):
    X, y = data
    acc = PrivacyAccountant()
    est = copier(_clf(acc))
    assert est.accountant is acc
    est.fit(X, y)
    assert len(acc.history) == 1


def test_fitted_estimator_pickle_round_trip_keeps_charging(data):
    X, y = data
    acc = PrivacyAccountant()
    est = pickle.loads(pickle.dumps(_clf(acc).fit(X, y)))
    est.fit(X, y)
    assert len(acc.history) == 2


def test_threading_workers_charge_the_original(data):
    X, y = data
    acc = PrivacyAccountant()
    with joblib.parallel_backend("threading", n_jobs=2):
        cross_val_score(_clf(acc), X, y, cv=4, n_jobs=2)
    assert len(acc.history) == 4


def test_process_workers_refuse_instead_of_losing_charges(data):
    X, y = data
    acc = PrivacyAccountant()
    with pytest.raises(RuntimeError, match="another process"):
        cross_val_score(_clf(acc), X, y, cv=2, n_jobs=2, error_score="raise")
    assert len(acc.history) == 0
    # With scikit-learn's default error_score the failure is loud, not silent.
    with pytest.raises(ValueError, match="fits failed"):
        cross_val_score(_clf(acc), X, y, cv=2, n_jobs=2)
    assert len(acc.history) == 0


def test_process_workers_refuse_a_user_installed_default(data):
    X, y = data
    acc = PrivacyAccountant()
    with default_accountant(acc):
        with pytest.raises(RuntimeError, match="another process"):
            cross_val_score(_clf(None), X, y, cv=2, n_jobs=2, error_score="raise")
        cross_val_score(_clf(None), X, y, cv=2)  # in-process: charged
    assert len(acc.history) == 2


def test_default_accountant_records_fits_without_accountant(data):
    X, y = data
    before = len(get_default_accountant().history)
    _clf(None).fit(X, y)
    assert len(get_default_accountant().history) == before + 1


def test_estimator_records_events_an_independent_accountant_can_rederive(data):
    X, y = data
    est = _clf(PrivacyAccountant(), epsilon=0.7, delta=1e-6).fit(X, y)
    (event,) = est.privacy_events_
    independent = PrivacyAccountant(epsilon=0.7, delta=1e-6)
    independent.spend(est.privacy_events_)
    assert independent.spent()[0] == pytest.approx(0.7, rel=1e-6)
    assert est.privacy_spent_ == pytest.approx((0.7, 1e-6), rel=1e-6)
    assert event.mu == pytest.approx(gdp_mu(0.7, 1e-6), rel=1e-9)


def test_params_stay_clone_and_repr_friendly(data):
    acc = PrivacyAccountant(epsilon=2.0)
    est = DPLinearRegression(accountant=acc)
    assert "PrivacyAccountant(epsilon=2.0" in repr(est)
    assert clone(est).get_params()["accountant"] is acc


def test_infinite_epsilon_is_refused_by_a_finite_budget(data):
    X, y = data
    acc = PrivacyAccountant(epsilon=10.0)
    est = _clf(acc, epsilon=np.inf)
    with pytest.raises(BudgetExceededError):
        est.fit(X, y)
    assert not hasattr(est, "coef_")


def test_fit_refused_at_the_charge_leaves_the_estimator_unfitted(data, monkeypatch):
    """``check`` passed but the charge refused (another fit got there first)."""
    X, y = data
    acc = PrivacyAccountant(epsilon=5.0, delta=1e-6)

    def refuse(*args, **kwargs):
        raise BudgetExceededError("spent by a concurrent fit")

    monkeypatch.setattr(acc, "_record", refuse)
    est = _clf(acc, epsilon=1.0)
    with pytest.raises(BudgetExceededError):
        est.fit(X, y)
    assert not [name for name in vars(est) if name.endswith("_") and not name.startswith("_")]


# -- a random-stopping search charged to an accountant at another delta ----------------
SEARCH_DELTA = 1e-5
SEARCH_MEAN = 4.0


def _random_search(acc, refit):
    return DPRandomizedSearchCV(
        DPLinearRegression(feature_norm=1.5, y_bound=2.0, max_iter=20),
        {"norm_bound": [0.3, 3.0, 30.0]}, epsilon=2.0, delta=SEARCH_DELTA,
        mean_candidates=SEARCH_MEAN, refit=refit, accountant=acc, random_state=0)


def _rdp_epsilon_of_search(mu_run, mu_refit, delta):
    """dp-accounting's RDP accountant on the search (and its refit), at delta."""
    accountant = rdp_privacy_accountant.RdpAccountant()
    accountant.compose(dp_event.RepeatAndSelectDpEvent(
        dp_event.GaussianDpEvent(1.0 / mu_run), SEARCH_MEAN, 0.0))
    if mu_refit is not None:
        accountant.compose(dp_event.GaussianDpEvent(1.0 / mu_refit))
    return accountant.get_epsilon(delta)


@pytest.mark.parametrize("refit", [False, True])
def test_random_search_is_priced_at_the_accountants_smaller_delta(reg_data, refit):
    """The regression: a search at delta=1e-5 charged to an accountant at
    delta 1e-6 used to be recorded as ApproxDPEvent(epsilon, 1e-5), which
    a ledger at 1e-6 prices at inf."""
    with default_accountant(PrivacyAccountant(delta=1e-6)) as acc:  # no budget
        search = _random_search(None, refit).fit(*reg_data)
    assert acc.delta == 1e-6
    stop = search.privacy_events_[0]
    mu_refit = search.privacy_events_[1].mu if refit else None
    delta_search = SEARCH_DELTA / 2 if refit else SEARCH_DELTA
    assert stop.mu == pytest.approx(
        random_stopping_mu(1.0 if refit else 2.0, delta_search, SEARCH_MEAN), rel=1e-9)
    # Before: the same search as an (epsilon, delta_search) pair cannot be priced.
    before = [ApproxDPEvent(random_stopping_epsilon(stop.mu, SEARCH_MEAN, delta_search),
                            delta_search)] + search.privacy_events_[1:]
    assert compose(before, 1e-6) == math.inf
    # After: finite, and what dp-accounting's RDP accountant says at 1e-6.
    spent = acc.spent()[0]
    expected = _rdp_epsilon_of_search(stop.mu, mu_refit, 1e-6)
    assert math.isfinite(spent)
    assert spent == pytest.approx(expected, rel=1e-6)
    # More than the search claims at its own delta, which stays within budget.
    assert spent > search.privacy_spent_[0]
    assert search.privacy_spent_[0] <= 2.0 * (1 + 1e-9)
    assert search.privacy_spent_[1] == SEARCH_DELTA
    # The records are readable and travel like any other.
    assert isinstance(acc.history[-1].events[0], RandomStoppingEvent)
    report = acc.report()
    assert "RandomStoppingEvent(mu=" in report["events"].iloc[-1]
    assert report["total epsilon"].iloc[-1] == spent
    assert report["epsilon"].iloc[-1] == pytest.approx(compose(search.privacy_events_, 1e-6))
    assert f"spent={spent:.4g}" in repr(acc)
    assert pickle.loads(pickle.dumps(acc)) is acc
    copy_of_search = pickle.loads(pickle.dumps(search))
    assert copy_of_search.privacy_events_ == search.privacy_events_


def test_random_search_fits_a_budget_at_another_delta_exactly(reg_data):
    with default_accountant(PrivacyAccountant()):
        search = _random_search(None, refit=True).fit(*reg_data)
    stop, refit = search.privacy_events_
    cost = _rdp_epsilon_of_search(stop.mu, refit.mu, 1e-6)

    enough = PrivacyAccountant(epsilon=cost * (1 + 1e-7), delta=1e-6)
    _random_search(enough, refit=True).fit(*reg_data)
    assert enough.spent()[0] == pytest.approx(cost, rel=1e-6)

    short = PrivacyAccountant(epsilon=cost * (1 - 1e-5), delta=1e-6)
    refused = _random_search(short, refit=True)
    X = np.full_like(reg_data[0], np.nan)  # would fail validation if it were read
    with pytest.raises(BudgetExceededError):
        refused.fit(X, reg_data[1])
    assert short.history == [] and short.spent()[0] == 0.0
    assert not hasattr(refused, "best_estimator_")


_LOAD_AND_FIT = """
import pickle, sys
import numpy as np
from sklearn.base import clone
import dp_glm_sklearn as d

est = pickle.loads(open(sys.argv[1], "rb").read())
rng = np.random.default_rng(0)
X = rng.normal(size=(100, 2)) / 2
y = X[:, 0]
if sys.argv[2] == "block":
    budget = d.PrivacyAccountant(epsilon=5.0)
    with d.default_accountant(budget):
        est.fit(X, y)
        clone(est).fit(X, y)
    print("charged", len(budget.history), len(d.get_default_accountant().history))
else:
    for e in (est, clone(est)):
        try:
            e.fit(X, y)
        except RuntimeError as exc:
            print("refused", exc)
    print("charged", len(d.get_default_accountant().history))
"""


def _fit_in_fresh_process(path, mode):
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", _LOAD_AND_FIT, str(path), mode],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_estimator_saved_inside_a_default_block_fits_in_a_block_of_another_process(tmp_path):
    # Pickled with accountant=None inside a block, it carries that block's
    # accountant; loaded elsewhere, the block active there comes first.
    saved = tmp_path / "est.pkl"
    budget = PrivacyAccountant(epsilon=5.0)
    with default_accountant(budget):
        saved.write_bytes(pickle.dumps(DPLinearRegression(random_state=0)))
    out = _fit_in_fresh_process(saved, "block")
    assert out.strip().splitlines()[-1] == "charged 2 0"  # the new block, not the default
    assert budget.history == []


def test_estimator_saved_inside_a_default_block_refuses_without_one(tmp_path):
    saved = tmp_path / "est.pkl"
    with default_accountant(PrivacyAccountant(epsilon=5.0)):
        saved.write_bytes(pickle.dumps(DPLinearRegression(random_state=0)))
    lines = _fit_in_fresh_process(saved, "none").strip().splitlines()
    assert lines[-1] == "charged 0"  # nothing reached the unlimited default
    refusals = [line for line in lines if line.startswith("refused")]
    assert len(refusals) == 2  # the estimator and its clone
    for message in refusals:
        assert "pickled while a default_accountant(...) block was active in another process" \
            in message
        assert "set_params(accountant=...)" in message
        assert "default_accountant(...) block in this process" in message


def test_estimator_saved_outside_any_block_fits_in_another_process(tmp_path):
    # Outside a block the built-in default must not travel with the pickle:
    # a fresh process would find it detached and refuse, where the documented
    # behaviour is a charge to that process's own default.
    saved = tmp_path / "est.pkl"
    est = DPLinearRegression(random_state=0)
    saved.write_bytes(pickle.dumps(est))
    assert "_pickled_default_accountant" not in pickle.loads(saved.read_bytes()).__dict__
    lines = _fit_in_fresh_process(saved, "none").strip().splitlines()
    assert lines == ["charged 2"]  # the estimator and its clone, no refusal


def test_estimator_pickled_inside_then_outside_a_block_fits_in_another_process(tmp_path):
    # Pickling inside a block wrote the block's accountant into the live
    # estimator (Python 3.11's object.__getstate__ returns __dict__ itself):
    # pickled again outside any block, it still carried it and refused there.
    saved = tmp_path / "est.pkl"
    est = DPLinearRegression(random_state=0)
    with default_accountant(PrivacyAccountant(epsilon=5.0)):
        pickle.dumps(est)
    assert "_pickled_default_accountant" not in est.__dict__
    saved.write_bytes(pickle.dumps(est))
    lines = _fit_in_fresh_process(saved, "none").strip().splitlines()
    assert lines == ["charged 2"]


def test_a_default_saved_in_this_process_and_gone_is_refused_as_such(data):
    X, y = data
    gone = PrivacyAccountant(epsilon=5.0)
    gone._copy = True  # as loaded from a pickle after its original was collected
    est = _clf(None)
    est._pickled_default_accountant = gone
    with pytest.raises(RuntimeError, match="saved while a default_accountant") as info:
        est.fit(X, y)
    assert "another process" not in str(info.value)


def test_a_block_in_this_process_beats_a_detached_pickled_default(data):
    # What a fresh process sees, simulated: the carried default is detached.
    X, y = data
    detached = PrivacyAccountant(epsilon=5.0)
    detached._home = (-1, "another process")
    est = _clf(None)
    est._pickled_default_accountant = detached
    with pytest.raises(RuntimeError, match="pickled while a default_accountant"):
        est.fit(X, y)
    budget = PrivacyAccountant(epsilon=5.0)
    with default_accountant(budget):
        est.fit(X, y)
        clone(est).fit(X, y)
    assert len(budget.history) == 2 and detached.history == []


@pytest.mark.parametrize("wrapper", ["grid", "random", "boosting"])
@pytest.mark.parametrize("in_pipeline", [False, True])
def test_a_wrapper_refuses_as_its_estimator_would_for_a_default_that_is_gone(
        data, wrapper, in_pipeline):
    # The estimator refuses (its default_accountant block is gone); a search
    # or boosting wrapped around it looked at its own default only, found
    # none, and charged this process's unlimited default: the releases ran,
    # recorded nowhere the user looks (adversarial check).
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import FunctionTransformer

    from dp_glm_sklearn import DPConfidenceBoosting, DPGridSearchCV

    X, y = data
    gone = PrivacyAccountant(epsilon=5.0)
    gone._copy = True  # as loaded from a pickle after its original was collected
    est = DPLogisticRegression(classes=[0, 1])  # (the wrappers seed it)
    est._pickled_default_accountant = gone
    prefix = ""
    if in_pipeline:
        est, prefix = make_pipeline(FunctionTransformer(), est), "dplogisticregression__"
    grid = {prefix + "norm_bound": [1.0, 2.0]}
    search = {"grid": lambda: DPGridSearchCV(est, grid, epsilon=1.0),
              "random": lambda: DPRandomizedSearchCV(est, grid, epsilon=1.0, random_state=0),
              "boosting": lambda: DPConfidenceBoosting(est, epsilon=1.0, random_state=0)}[wrapper]
    default = get_default_accountant()
    spent = len(default.history)
    with pytest.raises(RuntimeError, match="saved while a default_accountant"):
        search().fit(X, y)
    assert len(default.history) == spent and gone.history == []
    budget = PrivacyAccountant(epsilon=5.0)
    with default_accountant(budget):  # a block in this process comes first, as for the estimator
        search().fit(X, y)
    assert len(budget.history) == 1 and len(default.history) == spent


def test_grid_estimators_are_judged_by_the_default_they_would_charge(data):
    # A template carrying a default that is gone, searched inside a block with
    # a grid of fresh estimators, was refused as "another accountant"; a grid
    # estimator carrying a gone default is refused as its own fit would be.
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import FunctionTransformer

    from dp_glm_sklearn import DPGridSearchCV

    X, y = data
    gone = PrivacyAccountant(epsilon=5.0)
    gone._copy = True  # as loaded from a pickle after its original was collected
    template = DPLogisticRegression(classes=[0, 1])
    template._pickled_default_accountant = gone
    grid = {"dplogisticregression": [DPLogisticRegression(classes=[0, 1], norm_bound=b)
                                     for b in (1.0, 5.0)]}
    budget = PrivacyAccountant(epsilon=5.0)
    with default_accountant(budget):
        DPGridSearchCV(make_pipeline(FunctionTransformer(), template), grid,
                       epsilon=1.0).fit(X, y)
    assert len(budget.history) == 1
    carrying = DPLogisticRegression(classes=[0, 1])
    carrying._pickled_default_accountant = gone
    default = get_default_accountant()
    spent = len(default.history)
    with pytest.raises(RuntimeError, match="saved while a default_accountant"):
        DPGridSearchCV(make_pipeline(FunctionTransformer(), DPLogisticRegression(classes=[0, 1])),
                       {"dplogisticregression": [carrying]}, epsilon=1.0).fit(X, y)
    assert len(default.history) == spent
    # Given an accountant, an estimator carrying a gone default is charged to it,
    # in a search, in boosting and with norm_bound="auto" inside a search (whose
    # inner search refused after the outer charge: adversarial check).
    from dp_glm_sklearn import DPConfidenceBoosting

    budget = PrivacyAccountant(epsilon=10.0)
    for make in (lambda est: DPGridSearchCV(est, {"feature_norm": [0.5, 1.0]}, epsilon=1.0),
                 lambda est: DPConfidenceBoosting(est.set_params(norm_bound=1.0), n_models=2,
                                                  epsilon=1.0, random_state=0)):
        for searched_with in ("estimator", "search"):
            loaded = DPLogisticRegression(classes=[0, 1], norm_bound="auto")
            loaded._pickled_default_accountant = gone
            if searched_with == "estimator":
                wrapper = make(loaded.set_params(accountant=budget))
            else:
                wrapper = make(loaded).set_params(accountant=budget)
            spent = len(budget.history)
            wrapper.fit(X, y)
            assert len(budget.history) == spent + 1
    # The default the search charges, given in the grid, is no other accountant.
    with default_accountant(budget):
        spent = len(budget.history)
        DPGridSearchCV(make_pipeline(FunctionTransformer(), DPLogisticRegression(classes=[0, 1])),
                       {"dplogisticregression": [DPLogisticRegression(classes=[0, 1],
                                                                      accountant=budget)]},
                       epsilon=1.0).fit(X, y)
        assert len(budget.history) == spent + 1


@pytest.mark.parametrize("kind", ["estimator", "search", "boosting"])
def test_a_refusal_explains_a_release_asked_for_at_a_larger_delta(data, kind):
    # A budget of epsilon 1 refuses a fit at epsilon 1 asked for at a delta
    # (1e-5) larger than the accountant's (1e-6), where the fit costs 1.14.
    # (It was the most likely first stumble, with the default delta 1e-5: the
    # default is now at most the accountant's delta.)
    from dp_glm_sklearn import DPConfidenceBoosting, DPGridSearchCV

    X, y = data

    def make(acc, delta):
        est = DPLogisticRegression(feature_norm=3.0, classes=[0, 1], epsilon=1.0, delta=delta,
                                   accountant=acc)
        if kind == "search":
            return DPGridSearchCV(est, {"norm_bound": [1.0, 2.0]}, epsilon=1.0, delta=delta,
                                  accountant=acc)
        if kind == "boosting":
            return DPConfidenceBoosting(est, epsilon=1.0, delta=delta, accountant=acc)
        return est

    acc = PrivacyAccountant(epsilon=1.0, delta=1e-6)
    with pytest.raises(BudgetExceededError, match="costs epsilon=1.14") as info:
        make(acc, 1e-5).fit(X, y)
    assert "asked for at (epsilon=1, delta=1e-05)" in str(info.value)
    assert "Asked for at delta=1e-06, it would cost exactly epsilon=1 on its own." in str(
        info.value)
    fitted = make(acc, None).fit(X, y)  # the default delta: the accountant's
    assert fitted.privacy_spent_[1] == 1e-6
    assert acc.spent()[0] == pytest.approx(1.0, rel=1e-9)
    with pytest.raises(BudgetExceededError) as info:  # over budget at the same delta
        make(acc, 1e-6).fit(X, y)
    assert "Note" not in str(info.value)
    # epsilon=inf costs inf at any delta: no note that it would cost "exactly inf".
    with pytest.raises(BudgetExceededError) as info:
        make(PrivacyAccountant(epsilon=10.0, delta=1e-6), None).set_params(
            epsilon=np.inf).fit(X, y)
    assert "Note" not in str(info.value)
    # An accountant at delta=0 admits no Gaussian release at all: its own
    # hint says so, and none suggests passing delta=0.
    with pytest.raises(BudgetExceededError) as info:
        make(PrivacyAccountant(epsilon=1.0, delta=0.0), None).fit(X, y)
    assert "admits no Gaussian release" in str(info.value) and "Note" not in str(info.value)


def test_a_saved_session_resumes_by_attaching_the_new_ledger(data):
    # A model saved with its ledger holds the read-only copy after loading; the
    # refusal says how to go on (a new ledger, attached with set_params), and
    # that way the next fit is charged once, to the new ledger, with the old.
    import gc

    X, y = data
    acc = PrivacyAccountant(epsilon=3.0, delta=1e-6)
    model = _clf(acc).fit(X, y)
    blob = pickle.dumps((acc, model))
    del acc, model
    gc.collect()
    saved, model = pickle.loads(blob)
    assert model.accountant is saved and saved.detached
    with pytest.raises(RuntimeError, match=r"set_params\(accountant=new\)"):
        model.fit(X, y)
    resumed = PrivacyAccountant(epsilon=saved.epsilon, delta=saved.delta)
    resumed.spend(saved.events, source="saved ledger")
    model.set_params(accountant=resumed, random_state=None).fit(X, y)
    assert len(resumed.history) == 2 and len(saved.history) == 1
    assert resumed.spent()[0] > saved.spent()[0]


@pytest.mark.parametrize("kind", ["estimator", "auto", "grid", "random", "boosting", "dp_score"])
def test_a_refused_release_leaves_the_seeds_streams_as_they_were(data, kind, monkeypatch):
    # A release refused before its charge (NaN in X) took its integer seed's
    # stream all the same, so the corrected fit that followed drew another
    # stream than the same fit on a fresh accountant (red-team, session 32).
    from dp_glm_sklearn import DPConfidenceBoosting, DPGridSearchCV, dp_score
    from dp_glm_sklearn.model_selection import _dp_score

    if kind == "dp_score":  # which scores a NaN row as the bound: fail in its place
        losses = _dp_score._total_losses

        def refused(estimator, slot, scoring, X_, *args):
            if np.isnan(X_).any():
                raise ValueError("NaN (a failure between the stream and the charge)")
            return losses(estimator, slot, scoring, X_, *args)

        monkeypatch.setattr(_dp_score, "_total_losses", refused)

    X, y = data
    bad = X.copy()
    bad[205, 1] = np.nan
    fitted = _clf(PrivacyAccountant()).fit(X[:200], y[:200])

    def release(acc, X_):
        est = DPLogisticRegression(classes=[0, 1], random_state=3, accountant=acc)
        grid = {"norm_bound": [1.0, 2.0]}
        if kind == "estimator":
            return est.fit(X_, y).coef_
        if kind == "auto":
            return est.set_params(norm_bound="auto").fit(X_, y).coef_
        if kind == "dp_score":
            return dp_score(fitted, X_[200:], y[200:], accountant=acc, random_state=3)
        est.set_params(random_state=None)  # (the wrapper's seed only)
        search = {"grid": lambda: DPGridSearchCV(est, grid, random_state=3, accountant=acc),
                  "random": lambda: DPRandomizedSearchCV(est, grid, random_state=3,
                                                         accountant=acc),
                  "boosting": lambda: DPConfidenceBoosting(est, random_state=3,
                                                           accountant=acc)}[kind]()
        return search.fit(X_, y).best_estimator_.coef_

    if kind == "estimator":  # (its data are refused before it takes a stream)
        from dp_glm_sklearn import _base

        draw = _base.draw_public

        def refused(method, problem, calibration, rng, sparse):
            if np.isnan(bad).any() and refused.armed:
                refused.armed = False
                raise MemoryError("a failure between the stream and the charge")
            return draw(method, problem, calibration, rng, sparse=sparse)

        refused.armed = False
        monkeypatch.setattr(_base, "draw_public", refused)

    expected = release(PrivacyAccountant(), X)
    acc = PrivacyAccountant()
    with pytest.raises((ValueError, MemoryError), match="NaN|between the stream"):
        if kind == "estimator":
            refused.armed = True
            release(acc, X)
        else:
            release(acc, bad)
    assert acc.history == []
    again = release(acc, X)
    if kind == "random":
        # The random search draws its secret K before its checks: a refused one
        # keeps its stream, so that the next never draws that K again.
        assert not np.array_equal(again, expected)
    else:
        np.testing.assert_array_equal(again, expected)
        # The next release with the seed draws another stream, as before.
        assert not np.array_equal(release(acc, X), expected)


@pytest.mark.filterwarnings("ignore::dp_glm_sklearn.PrivacyLeakWarning")
def test_a_nested_refusal_gives_back_its_own_stream_only(data):
    # A user step that tries a DP fit on the same ledger, is refused and falls
    # back, gave back the enclosing search's stream too: the next search drew
    # it again and released the same noise (review, session 32).
    from sklearn.base import BaseEstimator, TransformerMixin
    from sklearn.pipeline import Pipeline

    from dp_glm_sklearn import DPGridSearchCV
    from dp_glm_sklearn._randomness import _streams_given_back_if_refused

    X, y = data
    acc = PrivacyAccountant(epsilon=50.0)

    class TryDP(TransformerMixin, BaseEstimator):
        def fit(self, X_, y_=None):
            bad = np.array(X_, dtype=float)
            bad[0, 0] = np.nan
            with pytest.raises(ValueError, match="NaN"):  # refused before its stream
                DPLogisticRegression(classes=[0, 1], accountant=acc, random_state=0).fit(bad, y_)
            with pytest.raises(RuntimeError):  # refused after taking one of the same seed
                with _streams_given_back_if_refused(acc):
                    acc._seed_stream(0)
                    raise RuntimeError("an inner release refused after its stream")
            self.n_features_in_ = np.shape(X_)[1]
            return self

        def transform(self, X_):
            return X_

    def search():
        pipe = Pipeline([("try", TryDP()), ("dp", DPLogisticRegression(classes=[0, 1]))])
        return DPGridSearchCV(pipe, {"dp__norm_bound": [1.0, 2.0]}, accountant=acc,
                              random_state=0).fit(X, y)

    first, second = search(), search()
    assert len(acc.history) == 2
    assert not np.array_equal(first.best_estimator_[-1].coef_, second.best_estimator_[-1].coef_)


def test_a_stream_is_given_back_only_if_no_later_one_was_taken():
    # Two releases never share a stream: a stream taken after the refused one
    # keeps the count (a stream is then left unused), and a charge keeps its own.
    import threading

    acc = PrivacyAccountant()
    assert acc._seed_stream(7) == 0
    other = []
    thread = threading.Thread(target=lambda: other.append(acc._seed_stream(7)))
    thread.start()
    thread.join()
    acc._give_back_streams(frozenset())  # this thread's stream 0; 1 was taken since
    assert other == [1] and acc._seed_stream(7) == 2
    acc._record([GaussianEvent(0.1)])
    acc._give_back_streams(frozenset())  # charged: kept
    assert acc._seed_stream(7) == 3
    before = acc._uncharged()
    assert acc._seed_stream(8) == 0
    acc._give_back_streams(before)  # the release's own stream (8, 0) only
    assert acc._seed_stream(8) == 0 and acc._seed_stream(7) == 4


def test_event_labels_name_the_release():
    # A norm_bound="auto" fit's events were labelled "DPGridSearchCV: ..."
    # and dp_score's had no label (user trial, reading acc.report()).
    import warnings

    import numpy as np

    from dp_glm_sklearn import DPHuberRegressor, PrivacyAccountant
    from dp_glm_sklearn.model_selection import dp_score

    rng = np.random.default_rng(0)
    X = rng.normal(size=(600, 3))
    y = X[:, 0]
    acc = PrivacyAccountant(epsilon=10.0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = DPHuberRegressor(feature_norm=3.0, y_bound=3.0, norm_bound="auto",
                                 accountant=acc).fit(X, y)
        dp_score(model, X, y, scoring="neg_mean_squared_error", accountant=acc)
    auto, score = acc.history
    assert [event.label.split(":")[0] for event in auto.events] == [
        "DPHuberRegressor(norm_bound='auto')"] * 2
    assert [event.label for event in score.events] == ["dp_score(neg_mean_squared_error)"]
