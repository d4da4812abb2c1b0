"""Importance weights (``weight_kind="importance"``): the same point estimates, intervals and
tests with the variance of the rows observed (issue 12).

References used here: DeLong's estimator on unit weights (both kinds must agree), a Poisson
bootstrap of rows (the variance the linearisation and the sandwich estimate), an independent
sandwich from scikit-learn's unpenalised fit and SciPy's root finder, and simulations of
samples drawn as ``calib resample`` draws them (every positive, negatives at a rate, weights
``1 / rate``) from a known population.
"""

from __future__ import annotations

import dataclasses
import json
import math
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.optimize import brentq
from scipy.special import expit, logit
from scipy.stats import binom
from sklearn.linear_model import LogisticRegression

from calib_cli.core.logistic import fit_logistic, sandwich_covariance
from calib_cli.core.metrics import (
    calibration_intercept_slope,
    delong_interval,
    ece_bootstrap,
    ece_debiased,
    hosmer_lemeshow,
    reliability_bins,
    reliability_summary,
    roc_auc,
    spiegelhalter,
)
from calib_cli.errors import InputError
from calib_cli.summaries import ScoreSummary, merge_summaries
from calib_cli.summaries.figures import reliability_from_summary
from calib_cli.summaries.summary import summarize_arrays

Z95 = 1.959963984540054


def _population(n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Over-confident scores of a rare event (4.4% positive; bench_importance's model)."""
    eta = -4.0 + 1.5 * rng.standard_normal(n)
    y = (rng.random(n) < expit(eta)).astype(np.float64)
    return expit((eta + 0.2) / 0.8), y


def _sample(
    n: int, rate: float, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every positive and each negative with probability ``rate``, weighted ``1 / rate``."""
    p, y = _population(n, rng)
    keep = (y == 1.0) | (rng.random(n) < rate)
    return p[keep], y[keep], np.where(y[keep] == 1.0, 1.0, 1.0 / rate)


# ------------------------------------------------------------------ unit weights: no change

POINT_FIELDS = (
    "n", "weight_total", "positives", "base_rate", "mean_score", "calibration_in_the_large",
    "observed_expected_ratio", "log_loss", "brier", "brier_reliability", "brier_resolution",
    "brier_uncertainty", "ece", "mce", "auc", "gini", "average_precision",
    "calibration_intercept", "calibration_slope",
)  # fmt: skip


@settings(max_examples=30, deadline=None)
@given(
    seed=st.integers(0, 2**31 - 1),
    n=st.integers(8, 300),
    decimals=st.sampled_from([1, 2, 6]),
)
def test_unit_weights_give_the_same_figures_under_both_kinds(
    seed: int, n: int, decimals: int
) -> None:
    """With unit weights every variance of the importance kind is the frequency one: DeLong,
    the bin intervals (Kish's rows = rows), the debiased ECE, Spiegelhalter, Hosmer-Lemeshow.
    (The calibration intervals differ: the sandwich is not the inverse information.)"""
    rng = np.random.default_rng(seed)
    p = np.round(rng.random(n), decimals)
    y = (rng.random(n) < p).astype(float)
    y[:2] = [0.0, 1.0]
    freq = reliability_summary(y, p, n_bins=5)
    imp = reliability_summary(y, p, n_bins=5, weight_kind="importance")
    assert imp.weight_kind == "importance" and freq.weight_kind == "frequency"
    for name in (*POINT_FIELDS, "hosmer_lemeshow", "spiegelhalter_z"):
        assert getattr(imp, name) == pytest.approx(
            getattr(freq, name), rel=1e-9, abs=1e-12, nan_ok=True
        )
    assert imp.ece_debiased == pytest.approx(freq.ece_debiased, rel=1e-9, abs=1e-12)
    assert imp.auc_ci == pytest.approx(freq.auc_ci, rel=1e-9, nan_ok=True)
    for a, b in zip(imp.bins, freq.bins, strict=True):
        assert (a.observed_ci_low, a.observed_ci_high) == pytest.approx(
            (b.observed_ci_low, b.observed_ci_high), rel=1e-9, abs=1e-12, nan_ok=True
        )


def test_importance_weights_keep_every_point_estimate() -> None:
    p, y, w = _sample(40_000, 0.05, np.random.default_rng(3))
    freq = reliability_summary(y, p, sample_weight=w)
    imp = reliability_summary(y, p, sample_weight=w, weight_kind="importance")
    for name in POINT_FIELDS:
        assert getattr(imp, name) == getattr(freq, name), name
    # ... and the intervals widen (the negatives are 1/20 of the rows their weights say)
    assert np.diff(imp.auc_ci)[0] > 1.2 * np.diff(freq.auc_ci)[0]
    assert np.diff(imp.calibration_slope_ci)[0] > 1.5 * np.diff(freq.calibration_slope_ci)[0]


def test_unknown_weight_kind_is_refused() -> None:
    with pytest.raises(InputError, match="weight_kind must be one of frequency, importance"):
        delong_interval([0, 1], [0.2, 0.7], weight_kind="survey")  # type: ignore[arg-type]


# ------------------------------------------------------------------ AUC: DeLong by linearisation


def test_delong_importance_hand_worked() -> None:
    """Two positives (weights 1, 3) and two negatives (2, 2): V10 = (1, 0.5), AUC = 5/8,
    V01 = (1 - 0, (1 + 3)/4 ...) worked out below."""
    y = np.array([1.0, 1.0, 0.0, 0.0])
    p = np.array([0.9, 0.5, 0.4, 0.6])
    w = np.array([1.0, 3.0, 2.0, 2.0])
    # positives: 0.9 beats both negatives (V10 = 1); 0.5 beats 0.4 only (V10 = 0.5)
    auc = (1 * 1.0 + 3 * 0.5) / 4
    # negatives: 0.4 is below both positives (V01 = 1); 0.6 is below 0.9 only (V01 = 1/4)
    var_pos = (1 * (1.0 - auc) ** 2 + 9 * (0.5 - auc) ** 2) / 16 * 2
    var_neg = (4 * (1.0 - auc) ** 2 + 4 * (0.25 - auc) ** 2) / 16 * 2
    r = delong_interval(y, p, sample_weight=w, weight_kind="importance")
    assert r.auc == auc
    assert r.auc_se == pytest.approx(math.sqrt(var_pos + var_neg), rel=1e-12)


def test_delong_importance_matches_a_bootstrap_of_rows() -> None:
    """The standard error of the AUC over 400 Poisson bootstraps of the rows (each row drawn
    Poisson(1) times with its weight) is within 12% of the linearisation: the Monte Carlo
    error of a standard deviation from 400 draws is about 1/sqrt(800) = 3.5%, the rest is
    the first-order approximation on 1,200 positives. The frequency kind's is too small
    (measured 0.77 of it)."""
    p, y, w = _sample(40_000, 0.05, np.random.default_rng(11))
    imp = delong_interval(y, p, sample_weight=w, weight_kind="importance")
    freq = delong_interval(y, p, sample_weight=w)
    rng = np.random.default_rng(12)
    reps = [roc_auc(y, p, sample_weight=w * rng.poisson(1.0, w.size)) for _ in range(400)]
    boot = float(np.std(reps, ddof=1))
    assert imp.auc_se == pytest.approx(boot, rel=0.12)
    assert freq.auc_se < 0.85 * boot


# ------------------------------------------------------------------ calibration: the sandwich


def test_sandwich_of_the_slope_fit_matches_an_independent_computation() -> None:
    p, y, w = _sample(20_000, 0.1, np.random.default_rng(5))
    x = logit(p)
    model = LogisticRegression(C=np.inf, tol=1e-12, max_iter=1000)
    model.fit(x[:, None], y, sample_weight=w)
    design = np.column_stack((np.ones(x.size), x))
    mu = expit(design @ np.array([model.intercept_[0], model.coef_[0, 0]]))
    bread = np.linalg.inv(design.T @ ((w * mu * (1 - mu))[:, None] * design))
    meat = design.T @ (((w * (y - mu)) ** 2)[:, None] * design)
    cov = bread @ meat @ bread
    fit = calibration_intercept_slope(y, p, sample_weight=w, weight_kind="importance")
    assert fit.calibration_slope == pytest.approx(model.coef_[0, 0], rel=1e-5)
    half = (fit.calibration_slope_ci[1] - fit.calibration_slope_ci[0]) / 2
    assert half == pytest.approx(Z95 * math.sqrt(cov[1, 1]), rel=1e-4)


def test_sandwich_of_the_intercept_fit_matches_an_independent_computation() -> None:
    p, y, w = _sample(20_000, 0.1, np.random.default_rng(6))
    x = logit(p)
    a = brentq(lambda a: float(w @ (y - expit(a + x))), -5.0, 5.0, xtol=1e-14)
    mu = expit(a + x)
    var = float(((w * (y - mu)) ** 2).sum()) / float((w * mu * (1 - mu)).sum()) ** 2
    fit = calibration_intercept_slope(y, p, sample_weight=w, weight_kind="importance")
    assert fit.calibration_intercept == pytest.approx(a, abs=1e-8)
    half = (fit.calibration_intercept_ci[1] - fit.calibration_intercept_ci[0]) / 2
    assert half == pytest.approx(Z95 * math.sqrt(var), rel=1e-6)


def test_sandwich_of_grouped_rows_equals_that_of_the_rows() -> None:
    """Rows sharing a covariate may be grouped (their weights and squared weights summed per
    class): the sandwich is the same."""
    rng = np.random.default_rng(8)
    x = rng.integers(0, 6, 500).astype(float)
    y = (rng.random(500) < expit(x - 2.5)).astype(float)
    w = rng.choice([1.0, 4.0, 10.0], 500)
    rows = fit_logistic(x[:, None], y, w, covariance=True)
    by_row = sandwich_covariance(x[:, None], rows, square_pos=w * w * y, square_neg=w * w * (1 - y))
    values = np.unique(x)
    idx = np.searchsorted(values, x)
    total = np.bincount(idx, weights=w)
    pos = np.bincount(idx, weights=w * y)
    grouped = fit_logistic(values[:, None], pos / total, total, covariance=True)
    by_group = sandwich_covariance(
        values[:, None],
        grouped,
        square_pos=np.bincount(idx, weights=w * w * y),
        square_neg=np.bincount(idx, weights=w * w * (1 - y)),
    )
    assert by_row is not None and by_group is not None
    np.testing.assert_allclose(by_group, by_row, rtol=1e-7)


# ------------------------------------------------------------------ ECE, bins and tests


def test_ece_bootstrap_of_rows_draws_like_the_exact_row_bootstrap() -> None:
    """The cell-level draw (Kish's rows of equal weight, ``exact_limit=0``) and the row-by-row
    Poisson bootstrap (``exact_limit=inf``) give the same spread (weights equal within each
    class here, where the cell-level draw is exact in distribution; the standard deviation
    of 300 replicates has a relative Monte Carlo error of about 1/sqrt(600) = 4%, so 15% of
    the two is more than 2.5 of its standard errors). Frequency weights give a spread
    (measured 0.63 of it) too small."""
    p, y, w = _sample(30_000, 0.05, np.random.default_rng(21))
    kwargs = {"sample_weight": w, "n_bootstrap": 300, "weight_kind": "importance"}
    exact = ece_bootstrap(y, p, rng=np.random.default_rng(1), exact_limit=math.inf, **kwargs)  # type: ignore[arg-type]
    cells = ece_bootstrap(y, p, rng=np.random.default_rng(2), exact_limit=0.0, **kwargs)  # type: ignore[arg-type]
    assert np.std(cells.ece_replicates) == pytest.approx(np.std(exact.ece_replicates), rel=0.15)
    assert np.mean(cells.ece_replicates) == pytest.approx(
        np.mean(exact.ece_replicates), abs=0.5 * np.std(exact.ece_replicates)
    )
    freq = ece_bootstrap(y, p, rng=np.random.default_rng(3), sample_weight=w, n_bootstrap=300)
    assert np.std(freq.ece_replicates) < 0.8 * np.std(exact.ece_replicates)


def test_ece_intervals_follow_the_shared_rule_under_importance_weights() -> None:
    """With importance weights (as with frequency weights) the intervals are made from the
    replicates by one rule (``metrics._ece_intervals``; ``ece_bootstrap``, Notes, worked by
    hand in ``test_metrics.py``): they hold the estimates, and the same seed gives them in
    ``reliability_summary`` too."""
    p, y, w = _sample(30_000, 0.05, np.random.default_rng(22))
    kwargs: dict[str, Any] = {"sample_weight": w, "n_bootstrap": 200, "weight_kind": "importance"}
    boot = ece_bootstrap(y, p, rng=np.random.default_rng(1), **kwargs)
    summary = reliability_summary(y, p, rng=np.random.default_rng(1), **kwargs)
    assert boot.ece_replicates.mean() > summary.ece  # |gap| is biased up, more in replicates
    assert boot.ece_ci[0] <= summary.ece <= boot.ece_ci[1]
    debiased = ece_debiased(y, p, sample_weight=w, weight_kind="importance")
    assert boot.ece_debiased_ci[0] <= debiased <= boot.ece_debiased_ci[1]
    assert summary.ece_ci == pytest.approx(boot.ece_ci, rel=1e-9)
    assert summary.ece_debiased_ci == pytest.approx(boot.ece_debiased_ci, rel=1e-9)


def test_bin_intervals_use_kish_rows() -> None:
    """A bin of 10 rows of weight 20 (2 positive): Wilson with 10 trials, not 200."""
    y = np.array([1.0, 1.0] + [0.0] * 8)
    p = np.full(10, 0.15)
    w = np.full(10, 20.0)
    (b,) = [b for b in reliability_bins(y, p, sample_weight=w, weight_kind="importance") if b.count]
    (u,) = [b for b in reliability_bins(y, p) if b.count]
    assert (b.observed_ci_low, b.observed_ci_high) == pytest.approx(
        (u.observed_ci_low, u.observed_ci_high), rel=1e-12
    )


def test_tests_use_the_variance_of_weighted_sums() -> None:
    """Weights all equal to c: the importance z is the unweighted one (scale-free), the
    frequency z is sqrt(c) times larger; Hosmer-Lemeshow likewise divides by c."""
    rng = np.random.default_rng(4)
    p = rng.random(400)
    y = (rng.random(400) < np.clip(p + 0.05, 0, 1)).astype(float)
    w = np.full(400, 9.0)
    plain = spiegelhalter(y, p)
    assert spiegelhalter(y, p, sample_weight=w, weight_kind="importance").spiegelhalter_z == (
        pytest.approx(plain.spiegelhalter_z, rel=1e-12)
    )
    assert spiegelhalter(y, p, sample_weight=w).spiegelhalter_z == pytest.approx(
        3.0 * plain.spiegelhalter_z, rel=1e-12
    )
    hl = hosmer_lemeshow(y, p, sample_weight=w, weight_kind="importance").hosmer_lemeshow
    assert hl == pytest.approx(hosmer_lemeshow(y, p).hosmer_lemeshow, rel=1e-10)


def test_debiased_ece_subtracts_the_variance_of_the_weighted_rate() -> None:
    """One bin: positives of weight 1 (3 rows) and negatives of weight 5 (4 rows), scores 0.2.
    o = 3/23, gap = o - 0.2; variance = (3 (1 - o)^2 + 100 o^2) / 23^2 * 7/6."""
    y = np.array([1.0] * 3 + [0.0] * 4)
    w = np.array([1.0] * 3 + [5.0] * 4)
    p = np.full(7, 0.2)
    o = 3 / 23
    variance = (3 * (1 - o) ** 2 + 100 * o * o) / 23**2 * 7 / 6
    got = ece_debiased(y, p, sample_weight=w, n_bins=1, squared=True, weight_kind="importance")
    assert got == pytest.approx((o - 0.2) ** 2 - variance, rel=1e-12)


# ------------------------------------------------------------------ summaries


def test_summary_figures_match_the_rows_under_importance_weights() -> None:
    """Scores on a grid of 1/1000 (every cell one tied score: the summary is exact) and
    weights equal within each class (the cell-level variances are then exact too)."""
    rng = np.random.default_rng(9)
    p, y, w = _sample(60_000, 0.05, rng)
    p = np.round(p, 3)
    rows = reliability_summary(y, p, sample_weight=w, weight_kind="importance")
    summary = summarize_arrays(y, p, sample_weight=w, weight_column="w", weight_kind="importance")
    got = reliability_from_summary(summary).reliability
    assert got.weight_kind == "importance"
    for name in ("auc_ci", "calibration_slope_ci", "calibration_intercept_ci"):
        assert getattr(got, name) == pytest.approx(getattr(rows, name), rel=1e-6), name
    for name in ("spiegelhalter_z", "hosmer_lemeshow", "ece_debiased"):
        assert getattr(got, name) == pytest.approx(getattr(rows, name), rel=1e-9), name
    for a, b in zip(got.bins, rows.bins, strict=True):
        assert (a.observed_ci_low, a.observed_ci_high) == pytest.approx(
            (b.observed_ci_low, b.observed_ci_high), rel=1e-9, nan_ok=True
        )
    # the summary's own kind is the default; an explicit kind wins
    freq = reliability_from_summary(summary, weight_kind="frequency").reliability
    assert freq.auc_ci == pytest.approx(reliability_summary(y, p, sample_weight=w).auc_ci)


def test_summary_bootstrap_under_importance_weights_has_the_spread_of_the_rows() -> None:
    rng = np.random.default_rng(10)
    p, y, w = _sample(60_000, 0.05, rng)
    summary = summarize_arrays(y, p, sample_weight=w, weight_column="w", weight_kind="importance")
    got = reliability_from_summary(summary, n_bootstrap=300, rng=np.random.default_rng(1))
    rows = ece_bootstrap(
        y,
        p,
        sample_weight=w,
        n_bootstrap=300,
        rng=np.random.default_rng(2),
        weight_kind="importance",
    )
    width = lambda ci: ci[1] - ci[0]  # noqa: E731
    assert got.reliability.ece_ci is not None
    assert width(got.reliability.ece_ci) == pytest.approx(width(rows.ece_ci), rel=0.25)


def test_summary_records_its_weight_kind_and_refuses_to_merge_kinds() -> None:
    a = summarize_arrays([0, 1], [0.2, 0.7], sample_weight=[20.0, 1.0], weight_column="w")
    b = summarize_arrays(
        [0, 1], [0.3, 0.8], sample_weight=[20.0, 1.0], weight_column="w", weight_kind="importance"
    )
    assert a.metadata()["weight_kind"] == "frequency"
    assert b.metadata()["weight_kind"] == "importance"
    assert ScoreSummary.from_json(b.to_json()).weight_kind == "importance"
    assert (
        b.pooled().weight_kind == "importance" and b.select_group(None).weight_kind == "importance"
    )
    # files written before the field existed read as frequency weights
    old = json.loads(a.to_json())
    del old["weight_kind"]
    assert ScoreSummary.from_json(json.dumps(old)).weight_kind == "frequency"
    with pytest.raises(
        InputError, match="cannot merge a summary of frequency weights with one of importance"
    ):
        merge_summaries([a, b])
    bad = json.loads(b.to_json()) | {"weight_kind": "survey"}
    with pytest.raises(InputError, match="weight_kind must be one of frequency, importance"):
        ScoreSummary.from_json(json.dumps(bad))


# ------------------------------------------------------------------ coverage by simulation


def _truth() -> dict[str, float]:
    """The population's figures by quadrature over the latent log-odds
    :math:`\\eta \\sim N(-4, 1.5^2)` (trapezoids on 40,001 points over 12 standard deviations:
    errors below 1e-7). The score's logit is :math:`x = (\\eta + 0.2) / 0.8`, so the
    recalibration model is right with slope exactly 0.8; the calibration intercept solves
    :math:`E[\\mathrm{expit}\\,\\eta - \\mathrm{expit}(a + x)] = 0`; the AUC is
    :math:`\\int f_1 F_0`."""
    eta = np.linspace(-22.0, 14.0, 40_001)
    density = np.exp(-0.5 * ((eta + 4.0) / 1.5) ** 2)

    def integral(values: np.ndarray) -> float:
        return float(np.sum((values[1:] + values[:-1]) / 2.0 * np.diff(eta)))

    pos, neg = density * expit(eta), density * expit(-eta)
    below = np.concatenate(([0.0], np.cumsum((neg[1:] + neg[:-1]) / 2.0 * np.diff(eta))))
    x = (eta + 0.2) / 0.8
    intercept = brentq(
        lambda a: integral(density * (expit(eta) - expit(a + x))), -5.0, 5.0, xtol=1e-14
    )
    return {
        "auc": integral(pos * below) / (integral(pos) * below[-1]),
        "slope": 0.8,
        "intercept": intercept,
    }


def _coverage(reps: int, population: int, seed: int) -> dict[str, dict[str, float]]:
    values = _truth()
    rng = np.random.default_rng(seed)
    hits = {kind: dict.fromkeys(values, 0) for kind in ("frequency", "importance")}
    for _ in range(reps):
        p, y, w = _sample(population, 0.05, rng)
        for kind in hits:
            s = reliability_summary(y, p, sample_weight=w, weight_kind=kind)  # type: ignore[arg-type]
            for name, (low, high) in (
                ("auc", s.auc_ci),
                ("slope", s.calibration_slope_ci),
                ("intercept", s.calibration_intercept_ci),
            ):
                hits[kind][name] += int(low <= values[name] <= high)
    return {kind: {k: v / reps for k, v in h.items()} for kind, h in hits.items()}


def test_importance_intervals_cover_in_a_small_simulation() -> None:
    """40 samples (a 40,000-row population, negatives kept at 5%). If the true coverage is
    at least 93%, 40 replicates cover at least ``binom.ppf(0.001, 40, 0.93) = 31`` times
    except with probability 0.1% (the seed is fixed, so the test is deterministic; the bound
    says it is not tuned to the seed). Frequency weights cover the slope far less often."""
    reps = 40
    cov = _coverage(reps, 40_000, seed=2024)
    bound = binom.ppf(0.001, reps, 0.93) / reps
    for name, value in cov["importance"].items():
        assert value >= bound, (name, cov)
    assert cov["frequency"]["slope"] < cov["importance"]["slope"]


@pytest.mark.slow
def test_importance_intervals_cover_at_least_93_percent() -> None:
    """The issue's target on 200 samples of a 100,000-row population (bench_importance has
    the full table with ECE and estimate-shift)."""
    cov = _coverage(200, 100_000, seed=7)
    for name, value in cov["importance"].items():
        assert value >= 0.93, (name, cov)


@pytest.mark.slow
def test_ece_intervals_cover_under_importance_weights() -> None:
    """The ECE (bias-corrected normal interval) and the debiased ECE (bias-moved percentile
    interval) on 100 samples of a 100,000-row population, 200 replicates each, against the
    population's values measured on 2,000,000 rows. The bound is the 0.1% binomial quantile
    at 93% (84 of 100); bench_importance measures both on 1,000 samples."""
    truth_p, truth_y = _population(2_000_000, np.random.default_rng(12345))
    truth = reliability_summary(truth_y, truth_p)
    rng = np.random.default_rng(41)
    reps, ece_hits, deb_hits = 100, 0, 0
    for rep in range(reps):
        p, y, w = _sample(100_000, 0.05, rng)
        s = reliability_summary(
            y, p, sample_weight=w, n_bootstrap=200, rng=np.random.default_rng(rep),
            weight_kind="importance",
        )  # fmt: skip
        assert s.ece_ci is not None and s.ece_debiased_ci is not None
        ece_hits += int(s.ece_ci[0] <= truth.ece <= s.ece_ci[1])
        deb_hits += int(s.ece_debiased_ci[0] <= truth.ece_debiased <= s.ece_debiased_ci[1])
    assert ece_hits >= binom.ppf(0.001, reps, 0.93)
    assert deb_hits >= binom.ppf(0.001, reps, 0.93)


@pytest.mark.slow
def test_estimate_shift_with_an_importance_weighted_reference_covers() -> None:
    """estimate-shift's bootstrap already resamples reference rows (each with its weight), so
    it needs no importance variant: with a reference sampled at 5% of negatives (weights 20),
    the 95% interval of a batch's rate (exact label shift at 10%) covers it in 92% of 100
    batches (bench_importance: 92.5% of 200, the same as an unweighted reference, since
    weights equal within a class leave the class densities unchanged). The bound is the
    one-sided 0.1% binomial quantile of 100 batches at 93%: 84."""
    from calib_cli.core.shift import estimate_prevalence, fit_reference

    rng = np.random.default_rng(31)
    pool_p, pool_y = _population(2_000_000, rng)
    pos, neg = pool_p[pool_y == 1.0], pool_p[pool_y == 0.0]
    hits = 0
    reps = 100
    for _ in range(reps):
        p, y, w = _sample(60_000, 0.05, rng)
        reference = fit_reference(p, y, sample_weight=w)
        n_pos = int(rng.binomial(3000, 0.1))
        target = np.concatenate((rng.choice(pos, n_pos), rng.choice(neg, 3000 - n_pos)))
        est = estimate_prevalence(
            reference,
            target,
            n_bootstrap=100,
            rng=np.random.default_rng(int(rng.integers(1 << 30))),
        )
        hits += int(est.ci_low <= 0.1 <= est.ci_high)
    assert hits >= binom.ppf(0.001, reps, 0.93)


def test_reliability_summary_dataclass_reports_the_kind() -> None:
    names = [f.name for f in dataclasses.fields(reliability_summary([0, 1], [0.2, 0.7]))]
    assert names.index("weight_kind") == names.index("weight_total") + 1


@settings(max_examples=25, deadline=None)
@given(
    seed=st.integers(0, 2**31 - 1),
    n=st.integers(12, 200),
    scale=st.sampled_from([0.01, 3.0, 250.0]),
)
def test_importance_intervals_do_not_depend_on_the_scale_of_the_weights(
    seed: int, n: int, scale: float
) -> None:
    """Importance weights say how rows stand for the population, not how many rows there are:
    multiplying them all by a constant moves no figure, interval or test (frequency intervals
    shrink with it)."""
    rng = np.random.default_rng(seed)
    p = np.round(rng.random(n), 2)
    y = (rng.random(n) < p).astype(float)
    y[:2] = [0.0, 1.0]
    w = rng.choice([1.0, 5.0, 20.0], n)
    a = reliability_summary(y, p, sample_weight=w, n_bins=4, weight_kind="importance")
    b = reliability_summary(y, p, sample_weight=w * scale, n_bins=4, weight_kind="importance")
    # (not Hosmer-Lemeshow: its 10 equal-mass groups are cut at weighted percentiles, whose
    # interpolation counts weights as rows, so the groups themselves move with the scale)
    for name in ("auc_ci", "calibration_slope_ci", "calibration_intercept_ci", "ece_debiased",
                 "spiegelhalter_z"):  # fmt: skip
        assert getattr(b, name) == pytest.approx(
            getattr(a, name), rel=1e-6, abs=1e-9, nan_ok=True
        ), name
    for x, z in zip(a.bins, b.bins, strict=True):
        assert (z.observed_ci_low, z.observed_ci_high) == pytest.approx(
            (x.observed_ci_low, x.observed_ci_high), rel=1e-9, abs=1e-12, nan_ok=True
        )
