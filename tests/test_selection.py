"""Dispatch, cross-fitting and the auto choice, against scikit-learn's metrics and refits."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.special import expit, logit
from sklearn.metrics import brier_score_loss, log_loss

from calib_cli.core.beta import BetaParams, fit_beta
from calib_cli.core.histogram import HistogramParams, apply_histogram, fit_histogram
from calib_cli.core.isotonic import IsotonicParams, apply_isotonic, fit_isotonic
from calib_cli.core.platt import PlattParams, fit_platt
from calib_cli.core.selection import (
    _stratified_folds,
    apply_calibrator,
    choose_method,
    cross_fit,
    cross_val_log_loss,
    fit_calibrator,
)
from calib_cli.errors import InputError

METHODS = ("platt", "isotonic", "beta", "histogram")


def _data(n: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    true_p = expit(rng.normal(-1.0, 1.5, n))
    y = (rng.uniform(size=n) < true_p).astype(float)
    scores = expit(2.0 * logit(true_p))  # over-confident
    return scores, y, rng.uniform(0.2, 2.0, n)


def test_dispatch_matches_the_direct_fits() -> None:
    scores, y, w = _data(800, seed=1)
    grid = np.linspace(0.0, 1.0, 51)
    platt = fit_calibrator("platt", scores, y, sample_weight=w, target_smoothing=True)
    assert platt == fit_platt(scores, y, sample_weight=w, target_smoothing=True)
    beta = fit_calibrator("beta", scores, y, sample_weight=w)
    assert beta == fit_beta(scores, y, sample_weight=w)
    iso = fit_calibrator("isotonic", scores, y, sample_weight=w, strict=True)
    assert isinstance(iso, IsotonicParams)
    np.testing.assert_array_equal(
        apply_calibrator(iso, grid),
        apply_isotonic(fit_isotonic(scores, y, sample_weight=w, strict=True), grid),
    )
    hist = fit_calibrator("histogram", scores, y, sample_weight=w, n_bins=7)
    assert isinstance(hist, HistogramParams)
    np.testing.assert_array_equal(
        apply_calibrator(hist, grid),
        apply_histogram(fit_histogram(scores, y, sample_weight=w, n_bins=7), grid),
    )
    kinds = [type(p).kind for p in (platt, iso, beta, hist)]
    assert kinds == ["platt", "isotonic", "beta", "histogram"]
    assert isinstance(platt, PlattParams) and isinstance(beta, BetaParams)


def test_raw_scores_only_for_platt() -> None:
    scores, y, _ = _data(300, seed=2)
    margins = 3.0 * logit(scores)
    params = fit_calibrator("platt", margins, y, score_kind="raw")
    assert isinstance(params, PlattParams) and params.score_kind == "raw"
    for method in ("isotonic", "beta", "histogram"):
        with pytest.raises(InputError, match=f"method '{method}' needs probability scores"):
            fit_calibrator(method, margins, y, score_kind="raw")
    with pytest.raises(InputError, match="candidates isotonic, beta, histogram need"):
        choose_method(margins, y, score_kind="raw", rng=np.random.default_rng(0))
    choice = choose_method(
        margins, y, score_kind="raw", candidates=("platt",), rng=np.random.default_rng(0)
    )
    assert choice.chosen == "platt"


def test_bad_method_and_options_are_refused() -> None:
    with pytest.raises(InputError, match="method must be one of"):
        fit_calibrator("auto", [0.1, 0.9], [0, 1])  # type: ignore[arg-type]
    with pytest.raises(InputError, match="does not take option\\(s\\) n_bins"):
        fit_calibrator("platt", [0.1, 0.9], [0, 1], n_bins=3)
    with pytest.raises(InputError, match="n_folds must be an integer of at least 2"):
        cross_fit(
            "platt", [0.1, 0.2, 0.8, 0.9], [0, 0, 1, 1], n_folds=1, rng=np.random.default_rng(0)
        )
    with pytest.raises(InputError, match="at least 2 positive and 2 negative rows"):
        cross_fit(
            "platt", [0.1, 0.2, 0.8, 0.9], [0, 0, 0, 1], n_folds=2, rng=np.random.default_rng(0)
        )


def test_folds_are_stratified_and_seeded() -> None:
    y = np.array([1.0] * 13 + [0.0] * 40)
    folds = _stratified_folds(y, 5, np.random.default_rng(3))
    for fold in range(5):
        in_fold = folds == fold
        assert 2 <= np.sum(y[in_fold] == 1.0) <= 3
        assert np.sum(y[in_fold] == 0.0) == 8
    again = _stratified_folds(y, 5, np.random.default_rng(3))
    np.testing.assert_array_equal(folds, again)
    assert not np.array_equal(folds, _stratified_folds(y, 5, np.random.default_rng(4)))


@pytest.mark.parametrize("method", METHODS)
def test_cross_fit_is_out_of_fold(method: str) -> None:
    scores, y, w = _data(600, seed=5)
    out = cross_fit(method, scores, y, sample_weight=w, n_folds=4, rng=np.random.default_rng(7))  # type: ignore[arg-type]
    folds = _stratified_folds(y, 4, np.random.default_rng(7))
    expected = np.empty_like(scores)
    for fold in range(4):
        test = folds == fold
        params = fit_calibrator(method, scores[~test], y[~test], sample_weight=w[~test])  # type: ignore[arg-type]
        expected[test] = apply_calibrator(params, scores[test])
    np.testing.assert_array_equal(out, expected)
    in_sample = apply_calibrator(fit_calibrator(method, scores, y, sample_weight=w), scores)  # type: ignore[arg-type]
    assert not np.allclose(out, in_sample)


def test_cross_val_log_loss_is_sklearns_log_loss_of_cross_fit() -> None:
    scores, y, w = _data(700, seed=8)
    loss = cross_val_log_loss("beta", scores, y, sample_weight=w, rng=np.random.default_rng(1))
    out = cross_fit("beta", scores, y, sample_weight=w, rng=np.random.default_rng(1))
    assert loss == pytest.approx(log_loss(y, out, sample_weight=w), rel=1e-12)


def test_choose_method_table_and_choice() -> None:
    scores, y, w = _data(1500, seed=9)
    choice = choose_method(scores, y, sample_weight=w, n_folds=5, rng=np.random.default_rng(2))
    assert [row.method for row in choice.candidates] == list(METHODS)
    assert choice.n_folds == 5
    for row in choice.candidates:
        out = cross_fit(
            row.method,  # type: ignore[arg-type]
            scores,
            y,
            sample_weight=w,
            n_folds=5,
            rng=np.random.default_rng(2),
        )
        assert row.cv_log_loss == pytest.approx(log_loss(y, out, sample_weight=w), rel=1e-12)
        assert row.cv_brier == pytest.approx(brier_score_loss(y, out, sample_weight=w), rel=1e-12)
    best = min(choice.candidates, key=lambda row: row.cv_log_loss)
    assert choice.chosen == best.method
    # Every method beats the over-confident raw scores on held-out rows.
    raw_loss = log_loss(y, scores, sample_weight=w)
    assert all(row.cv_log_loss < raw_loss for row in choice.candidates)


def test_choose_method_options_and_candidates() -> None:
    scores, y, _ = _data(400, seed=10)
    choice = choose_method(
        scores,
        y,
        rng=np.random.default_rng(0),
        candidates=("histogram", "isotonic"),
        method_options={"histogram": {"n_bins": 4}},
    )
    assert [row.method for row in choice.candidates] == ["histogram", "isotonic"]
    ignored = choose_method(
        scores, y, rng=np.random.default_rng(0), candidates=("platt",),
        method_options={"isotonic": {"strict": True}},
    )  # fmt: skip
    assert ignored.chosen == "platt"
    with pytest.raises(InputError, match="unknown methods: auto"):
        choose_method(scores, y, rng=np.random.default_rng(0), method_options={"auto": {}})
    with pytest.raises(InputError, match="must not repeat"):
        choose_method(scores, y, rng=np.random.default_rng(0), candidates=("platt", "platt"))
    with pytest.raises(InputError, match="at least one method"):
        choose_method(scores, y, rng=np.random.default_rng(0), candidates=())
