"""Platt scaling against scikit-learn's unpenalised logistic regression and hand-worked cases."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.optimize import minimize
from scipy.special import expit, logit
from sklearn.linear_model import LogisticRegression

from calib_cli.core.platt import PlattParams, apply_platt, fit_platt
from calib_cli.errors import InputError


def _data(n: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    true_p = expit(rng.normal(-0.5, 1.5, n))
    y = (rng.uniform(size=n) < true_p).astype(float)
    scores = expit(1.7 * logit(true_p) + 0.4)  # miscalibrated
    weights = rng.uniform(0.0, 3.0, n)
    return scores, y, weights


def _sklearn(x: np.ndarray, y: np.ndarray, w: np.ndarray | None) -> tuple[float, float]:
    model = LogisticRegression(C=np.inf, tol=1e-12, solver="newton-cholesky", max_iter=1000)
    model.fit(x[:, None], y, sample_weight=w)
    return float(model.coef_[0, 0]), float(model.intercept_[0])


@pytest.mark.parametrize("weighted", [False, True])
def test_matches_sklearn_on_logits(weighted: bool) -> None:
    scores, y, w = _data(4000, seed=1)
    weights = w if weighted else None
    params = fit_platt(scores, y, sample_weight=weights)
    slope, intercept = _sklearn(logit(scores), y, weights)
    assert params.converged and not params.separable
    assert params.slope == pytest.approx(slope, abs=1e-6)
    assert params.intercept == pytest.approx(intercept, abs=1e-6)
    assert params.score_kind == "probability"
    assert 1 <= params.n_iter <= 20


@pytest.mark.parametrize("kind", ["logit", "raw"])
def test_raw_scores_match_sklearn(kind: str) -> None:
    scores, y, w = _data(3000, seed=2)
    margins = 40.0 * logit(scores) + 1000.0  # badly scaled raw margins
    params = fit_platt(margins, y, sample_weight=w, score_kind=kind)  # type: ignore[arg-type]
    slope, intercept = _sklearn((margins - 1000.0) / 40.0, y, w)  # well-scaled equivalent
    assert params.slope * 40.0 == pytest.approx(slope, abs=1e-6)
    assert params.intercept + params.slope * 1000.0 == pytest.approx(intercept, abs=1e-6)
    assert params.score_kind == kind
    direct = expit(params.intercept + params.slope * margins)
    np.testing.assert_allclose(apply_platt(params, margins), direct, rtol=0, atol=1e-15)


def test_probability_and_logit_scores_give_the_same_map() -> None:
    scores, y, w = _data(2000, seed=3)
    by_prob = fit_platt(scores, y, sample_weight=w)
    by_logit = fit_platt(logit(scores), y, sample_weight=w, score_kind="logit")
    assert by_prob.slope == pytest.approx(by_logit.slope, abs=1e-9)
    assert by_prob.intercept == pytest.approx(by_logit.intercept, abs=1e-9)


def test_target_smoothing_is_platts_formula() -> None:
    # Hand-worked targets: weighted N+ = 3.0, N- = 4.5 -> t+ = 4/5, t- = 1/6.5.
    scores = np.array([0.2, 0.3, 0.45, 0.5, 0.6, 0.7, 0.8])
    y = np.array([0, 1, 0, 0, 1, 0, 1])
    w = np.array([1.0, 0.5, 2.0, 1.0, 1.5, 0.5, 1.0])
    params = fit_platt(scores, y, sample_weight=w, target_smoothing=True)
    t = np.where(y == 1, 4.0 / 5.0, 1.0 / 6.5)
    x = logit(scores)

    def loss(theta: np.ndarray) -> float:
        z = theta[1] + theta[0] * x
        return float(np.sum(w * (np.logaddexp(0.0, z) - t * z)))

    ref = minimize(loss, np.zeros(2), method="BFGS", options={"gtol": 1e-12})
    assert params.converged
    assert params.slope == pytest.approx(ref.x[0], abs=1e-6)
    assert params.intercept == pytest.approx(ref.x[1], abs=1e-6)
    # At the optimum the weighted mean prediction equals the weighted mean target.
    fitted = apply_platt(params, scores)
    assert np.dot(w, fitted) == pytest.approx(np.dot(w, t), abs=1e-9)


def test_target_smoothing_counts_weights_below_one_in_rows_of_their_mean() -> None:
    # Seven rows of weight 0.1 (or normalised to sum to 1): N+ = 3 and N- = 4 rows, so the
    # targets are 4/5 and 1/6 as for the rows unweighted (with raw sums, 1.3/2.3 and 1/2.4).
    scores = np.array([0.2, 0.3, 0.45, 0.5, 0.6, 0.7, 0.8])
    y = np.array([0, 1, 0, 0, 1, 0, 1])
    rows = fit_platt(scores, y, target_smoothing=True)
    for weight in (0.1, 1 / 7):
        params = fit_platt(scores, y, sample_weight=np.full(7, weight), target_smoothing=True)
        assert (params.slope, params.intercept) == pytest.approx(
            (rows.slope, rows.intercept), rel=1e-10
        )
    fitted = apply_platt(rows, scores)
    assert np.mean(fitted) == pytest.approx((3 * 4 / 5 + 4 / 6) / 7, abs=1e-9)


def test_separable_data_stop_at_the_smoothed_fit() -> None:
    scores = np.array([0.05, 0.1, 0.2, 0.3, 0.6, 0.7, 0.8, 0.95])
    y = np.array([0, 0, 0, 0, 1, 1, 1, 1])
    params = fit_platt(scores, y)
    smoothed = fit_platt(scores, y, target_smoothing=True)
    assert params.separable and params.converged
    assert np.isfinite(params.slope) and params.slope > 0.0
    assert (params.slope, params.intercept) == pytest.approx(
        (smoothed.slope, smoothed.intercept), abs=1e-12
    )
    out = apply_platt(params, scores)
    assert np.all((out > 0.0) & (out < 1.0))
    assert np.all(out[y == 1] > 0.5) and np.all(out[y == 0] < 0.5)


def test_quasi_separation_and_reversed_separation_are_detected() -> None:
    tie = fit_platt([0.1, 0.2, 0.5, 0.5, 0.8, 0.9], [0, 0, 0, 1, 1, 1])
    assert tie.separable and np.isfinite(tie.slope)
    reversed_ = fit_platt([0.1, 0.2, 0.8, 0.9], [1, 1, 0, 0])
    assert reversed_.separable and reversed_.slope < 0.0
    # A zero-weight row does not break separation; a weighted overlapping row does.
    scores = [0.1, 0.2, 0.8, 0.9, 0.85]
    assert fit_platt(scores, [0, 0, 1, 1, 0], sample_weight=[1, 1, 1, 1, 0]).separable
    assert not fit_platt(scores, [0, 0, 1, 1, 0], sample_weight=[1, 1, 1, 1, 1]).separable


def test_constant_scores_give_the_base_rate() -> None:
    params = fit_platt([0.3, 0.3, 0.3, 0.3], [1, 0, 0, 0], sample_weight=[2, 1, 1, 1])
    assert params.slope == 0.0 and not params.separable and params.converged
    assert expit(params.intercept) == pytest.approx(0.4, abs=1e-12)


def test_identity_map_on_calibrated_scores() -> None:
    rng = np.random.default_rng(4)
    p = rng.uniform(0.02, 0.98, 200_000)
    y = (rng.uniform(size=p.size) < p).astype(float)
    params = fit_platt(p, y)
    assert params.slope == pytest.approx(1.0, abs=0.03)
    assert params.intercept == pytest.approx(0.0, abs=0.03)


def test_max_iter_is_reported() -> None:
    scores, y, _ = _data(500, seed=5)
    params = fit_platt(scores, y, max_iter=1)
    assert not params.converged and params.n_iter == 1


def test_apply_formula_and_eps_clip() -> None:
    params = PlattParams(
        slope=2.0, intercept=-1.0, score_kind="probability", converged=True, n_iter=3,
        separable=False,
    )  # fmt: skip
    scores = np.array([0.0, 0.25, 0.5, 1.0])
    expected = expit(-1.0 + 2.0 * logit(np.clip(scores, 1e-12, 1 - 1e-12)))
    np.testing.assert_allclose(apply_platt(params, scores), expected, rtol=1e-15)
    assert np.all(np.isfinite(apply_platt(params, scores)))
    assert PlattParams.kind == "platt"


def test_inputs_not_mutated() -> None:
    scores, y, w = _data(300, seed=6)
    copies = scores.copy(), y.copy(), w.copy()
    fit_platt(scores, y, sample_weight=w, target_smoothing=True)
    for before, after in zip(copies, (scores, y, w), strict=True):
        np.testing.assert_array_equal(before, after)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"score_kind": "margin"}, "score_kind must be one of"),
        ({"eps": 0.0}, "eps must be in"),
        ({"tol": -1.0}, "tol must be a positive number"),
        ({"max_iter": 0}, "max_iter must be a positive integer"),
    ],
)
def test_bad_options_are_refused(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(InputError, match=message):
        fit_platt([0.2, 0.8], [0, 1], **kwargs)  # type: ignore[arg-type]


def test_bad_data_is_refused() -> None:
    with pytest.raises(InputError, match="no positive rows"):
        fit_platt([0.2, 0.8], [0, 0])
    with pytest.raises(InputError, match="outside \\[0, 1\\]"):
        fit_platt([0.2, 1.5], [0, 1])
    with pytest.raises(InputError, match="different numbers of rows"):
        fit_platt([0.2, 0.5, 0.8], [0, 1])
    with pytest.raises(InputError, match="negative"):
        fit_platt([0.2, 0.8], [0, 1], sample_weight=[1.0, -1.0])
