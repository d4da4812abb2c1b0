"""Reference values for calib_cli.core.metrics.

Every figure scikit-learn also computes is checked against it on the same data (to 1e-10, with
and without weights); the rest against hand-worked examples, brute-force definitions or
closed forms written out in the test.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
from scipy import optimize, stats
from scipy.special import expit, logit
from sklearn import metrics as skm
from sklearn.calibration import calibration_curve
from sklearn.linear_model import LogisticRegression

from calib_cli.core import metrics
from calib_cli.core.metrics import (
    average_precision,
    bin_edges,
    brier_score,
    calibration_in_the_large,
    calibration_intercept_slope,
    delong_interval,
    ece,
    ece_bootstrap,
    ece_debiased,
    hosmer_lemeshow,
    log_loss,
    mce,
    murphy_decomposition,
    reliability_bins,
    reliability_summary,
    roc_auc,
    spiegelhalter,
    wilson_interval,
)
from calib_cli.errors import InputError
from calib_cli.types import BinStrategy

TOL = 1e-10
Z95 = stats.norm.ppf(0.975)


def _data(
    n: int, seed: int, *, decimals: int | None = None, weights: str = "none"
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """Labels drawn from slightly miscalibrated scores; optional rounding (ties) and weights."""
    rng = np.random.default_rng(seed)
    p = rng.beta(2.0, 5.0, n)
    if decimals is not None:
        p = np.round(p, decimals)
    y = (rng.random(n) < np.clip(1.2 * p, 0.0, 1.0)).astype(np.int64)
    w: np.ndarray | None = None
    if weights == "int":
        w = rng.integers(0, 4, n).astype(np.float64)
        w[0] = 1.0
    elif weights == "float":
        w = rng.gamma(2.0, 1.5, n)
        w[rng.random(n) < 0.1] = 0.0
    return y, p, w


def _assert_bins_close(a: tuple[metrics.Bin, ...], b: tuple[metrics.Bin, ...]) -> None:
    """Same bins (edges and row counts exactly), the sums up to summation order."""
    assert len(a) == len(b)
    for x, y in zip(a, b, strict=True):
        assert (x.lower, x.upper, x.n_rows) == (y.lower, y.upper, y.n_rows)
        for name in ("count", "mean_score", "observed_rate", "observed_ci_low", "observed_ci_high"):
            u, v = getattr(x, name), getattr(y, name)
            assert (math.isnan(u) and math.isnan(v)) or u == pytest.approx(v, rel=1e-12, abs=1e-14)


CASES = [
    pytest.param(600, 0, None, "none", id="continuous"),
    pytest.param(600, 1, 2, "none", id="ties"),
    pytest.param(600, 2, None, "float", id="continuous-weighted"),
    pytest.param(600, 3, 1, "float", id="ties-weighted"),
    pytest.param(600, 4, 2, "int", id="ties-int-weights"),
]


# ---------------------------------------------------------------------------------------------
# scikit-learn on the same data
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("n", "seed", "decimals", "weights"), CASES)
def test_scores_agree_with_sklearn(n: int, seed: int, decimals: int | None, weights: str) -> None:
    y, p, w = _data(n, seed, decimals=decimals, weights=weights)
    assert brier_score(y, p, sample_weight=w) == pytest.approx(
        skm.brier_score_loss(y, p, sample_weight=w), abs=TOL, rel=TOL
    )
    assert log_loss(y, p, sample_weight=w) == pytest.approx(
        skm.log_loss(y, y_proba=p, sample_weight=w), abs=TOL, rel=TOL
    )
    assert roc_auc(y, p, sample_weight=w) == pytest.approx(
        skm.roc_auc_score(y, p, sample_weight=w), abs=TOL, rel=TOL
    )
    assert average_precision(y, p, sample_weight=w) == pytest.approx(
        skm.average_precision_score(y, p, sample_weight=w), abs=TOL, rel=TOL
    )
    summary = reliability_summary(y, p, sample_weight=w)
    assert summary.brier == pytest.approx(brier_score(y, p, sample_weight=w), abs=TOL, rel=TOL)
    assert summary.log_loss == pytest.approx(log_loss(y, p, sample_weight=w), abs=TOL, rel=TOL)
    assert summary.auc == pytest.approx(skm.roc_auc_score(y, p, sample_weight=w), abs=TOL, rel=TOL)
    assert summary.average_precision == pytest.approx(
        skm.average_precision_score(y, p, sample_weight=w), abs=TOL, rel=TOL
    )


def test_average_precision_heavy_ties_and_zero_weights() -> None:
    y = np.array([1, 0, 1, 1, 0, 0, 1, 0, 0, 1])
    p = np.array([0.9, 0.9, 0.5, 0.5, 0.5, 0.2, 0.2, 0.2, 0.1, 0.9])
    w = np.array([1.0, 2.0, 0.0, 3.0, 1.0, 0.5, 2.0, 0.0, 1.0, 1.0])
    assert average_precision(y, p) == pytest.approx(skm.average_precision_score(y, p), abs=TOL)
    assert average_precision(y, p, sample_weight=w) == pytest.approx(
        skm.average_precision_score(y, p, sample_weight=w), abs=TOL
    )
    assert roc_auc(y, p, sample_weight=w) == pytest.approx(
        skm.roc_auc_score(y, p, sample_weight=w), abs=TOL
    )


def test_log_loss_clipping() -> None:
    y = np.array([1, 0, 1, 0])
    p = np.array([0.0, 1.0, 1.0, 0.0])
    # Default eps = 1e-15: the scores become 1e-15 and 1 - 1e-15; the two wrong rows cost
    # about -log(1e-15) = 34.5 each, the two right ones about 1e-15.
    eps = 1e-15
    expected = (
        -math.log(eps) - math.log1p(-(1.0 - eps)) - math.log(1.0 - eps) - math.log1p(-eps)
    ) / 4
    assert log_loss(y, p) == pytest.approx(expected, rel=1e-12)
    # scikit-learn >= 1.5 clips at the machine epsilon; the eps argument reproduces it.
    y2, p2, _ = _data(200, 7)
    p2[:3] = [0.0, 1.0, 1e-300]
    machine_eps = float(np.finfo(np.float64).eps)
    assert log_loss(y2, p2, eps=machine_eps) == pytest.approx(
        skm.log_loss(y2, y_proba=p2), abs=TOL, rel=TOL
    )


@pytest.mark.parametrize("strategy", ["uniform", "quantile"])
@pytest.mark.parametrize("n_bins", [1, 3, 5, 10, 17])
@pytest.mark.parametrize("decimals", [None, 1, 2])
def test_bins_agree_with_calibration_curve(
    strategy: BinStrategy, n_bins: int, decimals: int | None
) -> None:
    y, p, _ = _data(500, 11, decimals=decimals)
    prob_true, prob_pred = calibration_curve(y, p, n_bins=n_bins, strategy=strategy)
    table = [b for b in reliability_bins(y, p, n_bins=n_bins, strategy=strategy) if b.n_rows]
    assert len(table) == prob_true.size
    np.testing.assert_allclose([b.observed_rate for b in table], prob_true, atol=TOL, rtol=0)
    np.testing.assert_allclose([b.mean_score for b in table], prob_pred, atol=TOL, rtol=0)
    summary = reliability_summary(y, p, n_bins=n_bins, strategy=strategy)
    _assert_bins_close(summary.bins, reliability_bins(y, p, n_bins=n_bins, strategy=strategy))


@pytest.mark.parametrize("strategy", ["uniform", "quantile"])
def test_scores_exactly_on_edges_go_where_sklearn_puts_them(
    strategy: BinStrategy,
) -> None:
    # Every uniform edge (as linspace computes it and as a decimal literal), 0 and 1.
    edges = np.linspace(0.0, 1.0, 11)
    p = np.concatenate([edges, np.round(edges, 1), [0.3, 0.7, 0.15, 0.25]])
    y = np.arange(p.size) % 2
    prob_true, prob_pred = calibration_curve(y, p, n_bins=10, strategy=strategy)
    table = [b for b in reliability_bins(y, p, n_bins=10, strategy=strategy) if b.n_rows]
    np.testing.assert_allclose([b.observed_rate for b in table], prob_true, atol=TOL, rtol=0)
    np.testing.assert_allclose([b.mean_score for b in table], prob_pred, atol=TOL, rtol=0)


@pytest.mark.parametrize("strategy", ["uniform", "quantile"])
@pytest.mark.parametrize("decimals", [None, 2])
def test_weighted_bins_equal_calibration_curve_on_repeated_rows(
    strategy: BinStrategy, decimals: int | None
) -> None:
    # calibration_curve has no weights: integer weights must equal repeated rows.
    y, p, w = _data(400, 12, decimals=decimals, weights="int")
    assert w is not None
    reps = w.astype(np.int64)
    prob_true, prob_pred = calibration_curve(
        np.repeat(y, reps), np.repeat(p, reps), n_bins=8, strategy=strategy
    )
    table = [b for b in reliability_bins(y, p, sample_weight=w, n_bins=8, strategy=strategy)]
    table = [b for b in table if b.count > 0]
    np.testing.assert_allclose([b.observed_rate for b in table], prob_true, atol=TOL, rtol=0)
    np.testing.assert_allclose([b.mean_score for b in table], prob_pred, atol=TOL, rtol=0)


def test_quantile_edges_are_numpy_percentiles() -> None:
    _, p, w = _data(301, 13, decimals=2, weights="int")
    assert w is not None
    levels = np.linspace(0, 1, 7) * 100
    expected = np.unique(np.percentile(p, levels))
    np.testing.assert_array_equal(bin_edges(p, n_bins=6, strategy="quantile"), expected)
    repeated = np.unique(np.percentile(np.repeat(p, w.astype(np.int64)), levels))
    np.testing.assert_array_equal(
        bin_edges(p, n_bins=6, strategy="quantile", sample_weight=w), repeated
    )
    np.testing.assert_array_equal(bin_edges(p, n_bins=4), [0.0, 0.25, 0.5, 0.75, 1.0])
    # Weights below 1 count in units of the smallest one: normalised weights give the same
    # edges as unnormalised ones (and not one degenerate bin).
    np.testing.assert_array_equal(
        bin_edges(p, n_bins=6, strategy="quantile", sample_weight=np.full(p.size, 1e-4)), expected
    )
    np.testing.assert_array_equal(
        bin_edges(p, n_bins=6, strategy="quantile", sample_weight=w / 2), repeated
    )
    # All scores equal: one bin of zero width.
    np.testing.assert_array_equal(bin_edges([0.4] * 5, n_bins=3, strategy="quantile"), [0.4, 0.4])


def test_ece_and_mce_against_calibration_curve() -> None:
    y, p, _ = _data(800, 14)
    for strategy in ("uniform", "quantile"):
        prob_true, prob_pred = calibration_curve(y, p, n_bins=10, strategy=strategy)
        if strategy == "uniform":
            edges = np.linspace(0, 1, 11)
        else:
            edges = np.percentile(p, np.linspace(0, 1, 11) * 100)
        counts = np.bincount(np.searchsorted(edges[1:-1], p), minlength=10)
        counts = counts[counts > 0]
        expected = float(np.sum(counts * np.abs(prob_true - prob_pred)) / p.size)
        assert ece(y, p, strategy=strategy) == pytest.approx(expected, abs=TOL)
        assert mce(y, p, strategy=strategy) == pytest.approx(
            float(np.max(np.abs(prob_true - prob_pred))), abs=TOL
        )


def test_ece_mce_hand_worked() -> None:
    y = [0, 1, 1, 0, 1, 1]
    p = [0.1, 0.2, 0.3, 0.6, 0.7, 0.9]
    w = [1.0, 2.0, 1.0, 1.0, 1.0, 2.0]
    # Two bins: [0.1 (w1), 0.2 (w2), 0.3 (w1)]: o = 3/4, f = 0.8/4 = 0.2, gap 0.55
    #           [0.6 (w1), 0.7 (w1), 0.9 (w2)]: o = 3/4, f = 3.1/4 = 0.775, gap 0.025
    assert ece(y, p, sample_weight=w, n_bins=2) == pytest.approx((4 * 0.55 + 4 * 0.025) / 8)
    assert mce(y, p, sample_weight=w, n_bins=2) == pytest.approx(0.55)


# ---------------------------------------------------------------------------------------------
# Brier decomposition
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("strategy", ["uniform", "quantile"])
@pytest.mark.parametrize("weights", ["none", "float"])
def test_murphy_identity_is_the_brier_of_the_binned_forecast(
    strategy: BinStrategy, weights: str
) -> None:
    y, p, w = _data(1000, 15, weights=weights)
    d = murphy_decomposition(y, p, sample_weight=w, n_bins=7, strategy=strategy)
    edges = bin_edges(p, n_bins=7, strategy=strategy, sample_weight=w)
    bin_id = np.searchsorted(edges[1:-1], p)
    ww = np.ones_like(p) if w is None else w
    means = np.bincount(bin_id, weights=ww * p) / np.maximum(
        np.bincount(bin_id, weights=ww), 1e-300
    )
    binned = means[bin_id]
    brier_binned = skm.brier_score_loss(y, binned, sample_weight=w)
    pieces = d.brier_reliability - d.brier_resolution + d.brier_uncertainty
    assert pieces == pytest.approx(brier_binned, abs=1e-12)
    assert d.brier_binned == pytest.approx(brier_binned, abs=1e-12)
    base = np.average(y, weights=ww)
    assert d.brier_uncertainty == pytest.approx(base * (1 - base), abs=1e-15)


def test_murphy_hand_worked() -> None:
    # Bins of width 0.5: {0.1, 0.2, 0.4} with labels 0, 1, 0 and {0.6, 0.8} with labels 1, 1.
    d = murphy_decomposition([0, 1, 0, 1, 1], [0.1, 0.2, 0.4, 0.6, 0.8], n_bins=2)
    f1, o1, f2, o2, base = 0.7 / 3, 1 / 3, 0.7, 1.0, 0.6
    assert d.brier_reliability == pytest.approx((3 * (f1 - o1) ** 2 + 2 * (f2 - o2) ** 2) / 5)
    assert d.brier_resolution == pytest.approx((3 * (o1 - base) ** 2 + 2 * (o2 - base) ** 2) / 5)
    assert d.brier_uncertainty == pytest.approx(0.24)


# ---------------------------------------------------------------------------------------------
# DeLong
# ---------------------------------------------------------------------------------------------


def _brute_delong(y: np.ndarray, p: np.ndarray, w: np.ndarray) -> tuple[float, float]:
    """DeLong et al. (1988) with all pairs, weighted: psi matrix, placements, S10, S01."""
    pos, neg = p[y == 1], p[y == 0]
    wp, wn = w[y == 1], w[y == 0]
    psi = (pos[:, None] > neg[None, :]) + 0.5 * (pos[:, None] == neg[None, :])
    m, n = wp.sum(), wn.sum()
    v10 = psi @ wn / n
    v01 = wp @ psi / m
    auc = float(wp @ v10 / m)
    s10 = float(wp @ (v10 - auc) ** 2 / (m - 1))
    s01 = float(wn @ (v01 - auc) ** 2 / (n - 1))
    return auc, math.sqrt(s10 / m + s01 / n)


def test_delong_hand_worked_with_ties() -> None:
    # Positives 0.9, 0.6, 0.6; negatives 0.6, 0.3.  V10 = 1, 3/4, 3/4; V01 = 2/3, 1.
    # AUC = 5/6; S10 = (1/36 + 2/144) / 2 = 1/48; S01 = (1/36 + 1/36) / 1 = 1/18;
    # Var = (1/48)/3 + (1/18)/2 = 5/144.
    r = delong_interval([1, 1, 1, 0, 0], [0.9, 0.6, 0.6, 0.6, 0.3])
    assert r.auc == pytest.approx(5 / 6, abs=1e-15)
    assert r.auc_se == pytest.approx(math.sqrt(5) / 12, abs=1e-15)
    assert r.auc_ci[0] == pytest.approx(5 / 6 - Z95 * math.sqrt(5) / 12, abs=1e-12)
    assert r.auc_ci[1] == 1.0  # clipped


@pytest.mark.parametrize(("n", "seed", "decimals", "weights"), CASES)
def test_delong_against_brute_force(n: int, seed: int, decimals: int | None, weights: str) -> None:
    y, p, w = _data(n, seed, decimals=decimals, weights=weights)
    ww = np.ones(n) if w is None else w
    auc, se = _brute_delong(y, p, ww)
    r = delong_interval(y, p, sample_weight=w)
    assert r.auc == pytest.approx(auc, abs=TOL)
    assert r.auc_se == pytest.approx(se, rel=1e-9)
    assert r.auc_ci == pytest.approx((auc - Z95 * se, auc + Z95 * se), abs=1e-9)


def test_delong_integer_weights_are_classic_delong_on_repeated_rows() -> None:
    y, p, w = _data(300, 16, decimals=2, weights="int")
    assert w is not None
    reps = w.astype(np.int64)
    yr, pr = np.repeat(y, reps), np.repeat(p, reps)
    auc, se = _brute_delong(yr, pr, np.ones(yr.size))
    r = delong_interval(y, p, sample_weight=w)
    assert (r.auc, r.auc_se) == pytest.approx((auc, se), rel=1e-10)
    assert delong_interval(yr, pr).auc_se == pytest.approx(se, rel=1e-10)


def test_auc_one_class_and_tiny_classes_are_nan() -> None:
    r = delong_interval([1, 1, 1], [0.2, 0.5, 0.9])
    assert math.isnan(r.auc) and math.isnan(r.auc_se) and all(map(math.isnan, r.auc_ci))
    assert math.isnan(roc_auc([0, 0], [0.2, 0.5]))
    one_positive = delong_interval([1, 0, 0], [0.9, 0.2, 0.5])
    assert one_positive.auc == 1.0 and math.isnan(one_positive.auc_se)
    assert average_precision([1, 1], [0.2, 0.4]) == skm.average_precision_score([1, 1], [0.2, 0.4])
    assert math.isnan(average_precision([0, 0], [0.2, 0.4]))


# ---------------------------------------------------------------------------------------------
# Debiased ECE and the bootstrap
# ---------------------------------------------------------------------------------------------


def test_debiased_ece_hand_worked() -> None:
    # Bin 1 (< 0.5): scores 0.2 x4, labels 0,1,0,1 -> o = 0.5, f = 0.2, variance 0.25/3.
    # Bin 2: scores 0.9 x3, labels 1,1,1 -> o = 1, f = 0.9, variance 0.
    y = [0, 1, 0, 1, 1, 1, 1]
    p = [0.2, 0.2, 0.2, 0.2, 0.9, 0.9, 0.9]
    sq = (4 * (0.09 - 0.25 / 3) + 3 * 0.01) / 7
    assert ece_debiased(y, p, n_bins=2, squared=True) == pytest.approx(sq, abs=1e-15)
    assert ece_debiased(y, p, n_bins=2) == pytest.approx(math.sqrt(sq), abs=1e-15)
    # Plug-in L2 for comparison is larger.
    assert math.sqrt((4 * 0.09 + 3 * 0.01) / 7) > math.sqrt(sq)
    # A negative estimate of the square is clipped at 0 for the root.
    assert ece_debiased([0, 1, 0, 1], [0.5] * 4, n_bins=1, squared=True) < 0
    assert ece_debiased([0, 1, 0, 1], [0.5] * 4, n_bins=1) == 0.0
    # A bin with fewer than 2 (weighted) rows contributes nothing.
    assert ece_debiased([1, 0, 1], [0.1, 0.8, 0.9], n_bins=2, squared=True) == pytest.approx(
        2 / 3 * ((0.5 - 0.85) ** 2 - 0.25 / 1)
    )


def test_debiased_ece_is_unbiased_on_perfectly_calibrated_data() -> None:
    rng = np.random.default_rng(17)
    plugin, debiased = [], []
    for _ in range(200):
        p = rng.random(400)
        y = (rng.random(400) < p).astype(int)
        debiased.append(ece_debiased(y, p, n_bins=10, squared=True))
        stats_ = reliability_bins(y, p, n_bins=10)
        plugin.append(
            sum(b.count * (b.observed_rate - b.mean_score) ** 2 for b in stats_ if b.count) / 400
        )
    mean_debiased, se_debiased = np.mean(debiased), np.std(debiased) / math.sqrt(200)
    # Plug-in bias is about sum_b o_b(1 - o_b) / n = 10 * ~0.17 / 400 ~ 4e-3.
    assert np.mean(plugin) > 3e-3
    assert abs(mean_debiased) < 3 * se_debiased + 2e-4
    assert abs(mean_debiased) < np.mean(plugin) / 10


def _row_bootstrap(
    y: np.ndarray, p: np.ndarray, w: np.ndarray, n_bins: int, reps: int, seed: int
) -> tuple[np.ndarray, np.ndarray]:
    """Poisson bootstrap of the rows (k_i ~ Poisson(w_i)), edges fixed, by brute force."""
    rng = np.random.default_rng(seed)
    bin_id = np.searchsorted(np.linspace(0, 1, n_bins + 1)[1:-1], p)
    eces, debs = [], []
    for _ in range(reps):
        k = rng.poisson(w).astype(float)
        wb = np.bincount(bin_id, weights=k, minlength=n_bins)
        yb = np.bincount(bin_id, weights=k * y, minlength=n_bins)
        sb = np.bincount(bin_id, weights=k * p, minlength=n_bins)
        eces.append(np.sum(np.abs(yb - sb)) / wb.sum())
        ok = wb >= 2
        o, f = yb[ok] / wb[ok], sb[ok] / wb[ok]
        sq = np.sum(wb[ok] * ((o - f) ** 2 - o * (1 - o) / (wb[ok] - 1))) / wb.sum()
        debs.append(math.sqrt(max(sq, 0.0)))
    return np.array(eces), np.array(debs)


@pytest.mark.parametrize("exact_limit", [0.0, math.inf])
def test_bootstrap_matches_brute_force_row_resampling(exact_limit: float) -> None:
    rng = np.random.default_rng(18)
    n = 1500
    p = rng.beta(2, 3, n)
    y = (rng.random(n) < np.clip(p * 1.15, 0, 1)).astype(float)
    w = rng.integers(1, 3, n).astype(float)
    reps = 1500
    brute_ece, brute_deb = _row_bootstrap(y, p, w, 10, reps, seed=19)
    boot = ece_bootstrap(
        y,
        p,
        sample_weight=w,
        n_bootstrap=reps,
        rng=np.random.default_rng(20),
        exact_limit=exact_limit,
    )
    for ours, brute in (
        (boot.ece_replicates, brute_ece),
        (boot.ece_debiased_replicates, brute_deb),
    ):
        assert np.mean(ours) == pytest.approx(np.mean(brute), abs=0.15 * np.std(brute))
        assert np.std(ours) == pytest.approx(np.std(brute), rel=0.12)
        for q in (0.025, 0.975):
            assert np.quantile(ours, q) == pytest.approx(
                np.quantile(brute, q), abs=0.3 * np.std(brute)
            )


def test_bootstrap_is_reproducible_and_summarised() -> None:
    y, p, w = _data(500, 21, weights="float")
    a = ece_bootstrap(y, p, sample_weight=w, n_bootstrap=100, rng=np.random.default_rng(5))
    b = ece_bootstrap(y, p, sample_weight=w, n_bootstrap=100, rng=np.random.default_rng(5))
    c = ece_bootstrap(y, p, sample_weight=w, n_bootstrap=100, rng=np.random.default_rng(6))
    np.testing.assert_array_equal(a.ece_replicates, b.ece_replicates)
    assert not np.array_equal(a.ece_replicates, c.ece_replicates)
    assert a.ece_ci == b.ece_ci and a.ece_debiased_ci == b.ece_debiased_ci
    assert a.ece_ci[0] <= ece(y, p, sample_weight=w) <= a.ece_ci[1]
    deb = ece_debiased(y, p, sample_weight=w)
    assert a.ece_debiased_ci[0] <= deb <= a.ece_debiased_ci[1]
    s = reliability_summary(y, p, sample_weight=w, n_bootstrap=100, rng=np.random.default_rng(5))
    assert s.ece_ci == pytest.approx(a.ece_ci, abs=1e-12)
    assert s.ece_debiased_ci == pytest.approx(a.ece_debiased_ci, abs=1e-12)
    assert reliability_summary(y, p).ece_ci is None


def _two_bins() -> tuple[metrics._BinStats, metrics._Replicates]:
    """Two bins of weight 10 (gaps -0.1 and +0.2: signed ECE shares d = (-0.05, 0.1), ECE
    0.15) and six replicates of them, the rows of each a replicate's (weight, positives'
    weight, score sum) per bin."""
    bins = metrics._BinStats(
        edges=np.array([0.0, 0.5, 1.0]),
        bin_id=np.zeros(0, dtype=np.int64),
        weight=np.array([10.0, 10.0]),
        score_sum=np.array([3.0, 5.0]),
        positive_sum=np.array([2.0, 7.0]),
        n_rows=np.array([10, 10]),
    )
    rows = np.array(
        [
            [[9, 2, 2.8], [11, 8, 5.4]],
            [[12, 3, 3.5], [8, 5, 4.1]],
            [[10, 1, 3.1], [10, 8, 5.0]],
            [[8, 2, 2.2], [12, 8, 6.1]],
            [[11, 3, 3.4], [9, 6, 4.4]],
            [[10, 2, 3.0], [10, 7, 5.2]],
        ]
    )
    reps = metrics._Replicates(
        weight=rows[:, :, 0],
        positive_sum=rows[:, :, 1],
        score_sum=rows[:, :, 2],
        debiased_sq=np.array([0.012, 0.02, 0.03, 0.015, 0.018, 0.01]),
    )
    return bins, reps


def test_ece_intervals_follow_the_least_favourable_and_score_rules() -> None:
    """``ece_bootstrap``'s Notes, worked through by hand on two bins and six replicates."""
    bins, reps = _two_bins()
    d = np.array([-0.05, 0.1])
    noise = (reps.positive_sum - reps.score_sum) / reps.weight.sum(axis=1, keepdims=True) - d
    var = noise.var(axis=0, ddof=1)
    sign = np.array([-1.0, 1.0])
    # ECE: beta = 0.05 / 20, screen reach c = z(1 - beta / (2 * 2 bins))
    beta = 0.0025
    reach = stats.norm.ppf(1.0 - beta / 4.0)
    margin = np.maximum(np.abs(d) - reach * np.sqrt(var), 0.0)
    folded = (np.abs(margin + sign * noise) - margin).sum(axis=1)
    linear = (sign * noise).sum(axis=1)
    low = 0.15 - np.quantile(folded, 0.975 + beta)
    high = 0.15 - np.quantile(linear, 0.025)
    # Debiased: tau_b = Var(d*_b) / share_b, tbar weighted by share_b gap_b**2 = d_b**2 / share_b
    share = np.array([0.5, 0.5])
    tau = var / share
    mass = d * d / share
    tbar = float(np.sum(mass * tau) / np.sum(mass))
    rest = max(np.var(reps.debiased_sq, ddof=1) - 4.0 * mass.sum() * tbar, 2.0 * np.sum(tau**2))
    debiased_sq, z = 0.004, 1.959963984540054
    # (D - u)**2 = z**2 (4 u tbar + rest): u**2 - 2 (D + 2 z**2 tbar) u + D**2 - z**2 rest = 0
    roots = np.sort(
        np.roots([1.0, -2.0 * (debiased_sq + 2 * z * z * tbar), debiased_sq**2 - z * z * rest])
    )
    got = metrics._ece_intervals(bins, debiased_sq, reps, 0.95)
    assert 0.0 < low < 0.15 < high
    assert got.ece_ci == pytest.approx((low, high), rel=1e-12)
    assert roots[0] < 0.0 < roots[1]
    assert got.ece_debiased_ci == pytest.approx((0.0, math.sqrt(roots[1])), rel=1e-9)
    np.testing.assert_allclose(got.ece_replicates, np.abs(noise + d).sum(axis=1), rtol=1e-12)


def test_ece_intervals_without_noise_are_the_estimates() -> None:
    """Replicates all equal to the sample: no noise, no width."""
    bins, reps = _two_bins()
    same = metrics._Replicates(
        weight=np.tile(bins.weight, (5, 1)),
        positive_sum=np.tile(bins.positive_sum, (5, 1)),
        score_sum=np.tile(bins.score_sum, (5, 1)),
        debiased_sq=np.full(5, 0.004),
    )
    got = metrics._ece_intervals(bins, 0.004, same, 0.95)
    assert got.ece_ci == pytest.approx((0.15, 0.15), rel=1e-12)
    assert got.ece_debiased_ci == pytest.approx((math.sqrt(0.004), math.sqrt(0.004)), rel=1e-12)
    one = metrics._Replicates(
        reps.weight[:1], reps.positive_sum[:1], reps.score_sum[:1], reps.debiased_sq[:1]
    )
    assert all(math.isnan(v) for v in metrics._ece_intervals(bins, 0.004, one, 0.95).ece_ci)


# ---------------------------------------------------------------------------------------------
# Calibration in the large, intercept and slope
# ---------------------------------------------------------------------------------------------


def test_calibration_in_the_large_hand_worked() -> None:
    r = calibration_in_the_large([1, 0, 0, 0], [0.5, 0.2, 0.3, 0.2], sample_weight=[1, 1, 1, 2])
    mean_score, base_rate = (0.5 + 0.2 + 0.3 + 0.4) / 5, 1 / 5
    assert r.calibration_in_the_large == pytest.approx(mean_score - base_rate)
    assert r.observed_expected_ratio == pytest.approx(base_rate / mean_score)
    assert math.isnan(calibration_in_the_large([1, 0], [0.0, 0.0]).observed_expected_ratio)


def test_calibration_slope_saturated_two_groups_closed_form() -> None:
    # Two distinct scores: the two-parameter logistic model is saturated, so the fitted rates
    # are the observed rates and the Wald variances are 1 / (n o (1 - o)) per group.
    p1, n1, k1 = 0.2, 10, 3
    p2, n2, k2 = 0.7, 20, 12
    y = np.r_[np.ones(k1), np.zeros(n1 - k1), np.ones(k2), np.zeros(n2 - k2)]
    p = np.r_[np.full(n1, p1), np.full(n2, p2)]
    x1, x2 = logit(p1), logit(p2)
    o1, o2 = k1 / n1, k2 / n2
    slope = (logit(o2) - logit(o1)) / (x2 - x1)
    se = math.sqrt(1 / (n1 * o1 * (1 - o1)) + 1 / (n2 * o2 * (1 - o2))) / (x2 - x1)
    fit = calibration_intercept_slope(y, p)
    assert fit.converged
    assert fit.calibration_slope == pytest.approx(slope, abs=1e-10)
    assert fit.recalibration_intercept == pytest.approx(logit(o1) - slope * x1, abs=1e-10)
    assert fit.calibration_slope_ci == pytest.approx((slope - Z95 * se, slope + Z95 * se), 1e-9)
    # The same data as four weighted rows.
    w_fit = calibration_intercept_slope(
        [1, 0, 1, 0], [p1, p1, p2, p2], sample_weight=[k1, n1 - k1, k2, n2 - k2]
    )
    assert w_fit.calibration_slope == pytest.approx(slope, abs=1e-10)
    assert w_fit.calibration_slope_ci == pytest.approx(fit.calibration_slope_ci, abs=1e-10)
    assert w_fit.calibration_intercept == pytest.approx(fit.calibration_intercept, abs=1e-10)


def test_calibration_intercept_constant_scores_is_logit_base_rate() -> None:
    y = np.r_[np.ones(7), np.zeros(33)]
    fit = calibration_intercept_slope(y, np.full(40, 0.5))
    o = 7 / 40
    se = 1 / math.sqrt(40 * o * (1 - o))
    assert fit.calibration_intercept == pytest.approx(logit(o), abs=1e-12)
    assert fit.calibration_intercept_ci == pytest.approx((logit(o) - Z95 * se, logit(o) + Z95 * se))
    assert math.isnan(fit.calibration_slope)  # a constant score has no slope
    assert not fit.converged


@pytest.mark.parametrize("weights", ["none", "float"])
def test_calibration_fit_against_independent_solvers(weights: str) -> None:
    y, p, w = _data(2000, 22, weights=weights)
    ww = np.ones_like(p) if w is None else w
    x = logit(p)
    fit = calibration_intercept_slope(y, p, sample_weight=w)
    assert fit.converged
    # Intercept: root of the score equation sum w (y - expit(a + x)) = 0.
    a = optimize.brentq(lambda a: float(ww @ (y - expit(a + x))), -5, 5, xtol=1e-14)
    assert fit.calibration_intercept == pytest.approx(a, abs=1e-10)
    info_a = float(ww @ (expit(a + x) * (1 - expit(a + x))))
    half = Z95 / math.sqrt(info_a)
    assert fit.calibration_intercept_ci == pytest.approx((a - half, a + half), abs=1e-9)
    # Slope: scikit-learn's unpenalised logistic regression (Newton-Cholesky).
    model = LogisticRegression(C=np.inf, solver="newton-cholesky", tol=1e-12, max_iter=1000)
    model.fit(x[:, None], y, sample_weight=ww)
    b, a2 = float(model.coef_[0, 0]), float(model.intercept_[0])
    assert fit.calibration_slope == pytest.approx(b, abs=1e-7)
    assert fit.recalibration_intercept == pytest.approx(a2, abs=1e-7)
    # Wald interval from the Fisher information written out here.
    mu = expit(a2 + b * x)
    design = np.column_stack([np.ones_like(x), x])
    cov = np.linalg.inv(design.T @ (design * (ww * mu * (1 - mu))[:, None]))
    half = Z95 * math.sqrt(cov[1, 1])
    assert fit.calibration_slope_ci == pytest.approx((b - half, b + half), abs=1e-7)


def test_calibration_fit_coarse_start_changes_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(23)
    n = 120_000
    p = rng.beta(1, 15, n)
    y = (rng.random(n) < np.clip(1.3 * p - 0.005, 0, 1)).astype(float)
    with_coarse = calibration_intercept_slope(y, p)
    monkeypatch.setattr(metrics, "_COARSE_ROWS", 10**9)
    without = calibration_intercept_slope(y, p)
    assert with_coarse.converged and without.converged
    assert with_coarse.n_iter < without.n_iter
    for field in ("calibration_intercept", "calibration_slope", "recalibration_intercept"):
        assert getattr(with_coarse, field) == pytest.approx(getattr(without, field), abs=1e-9)


def test_calibration_fit_undefined_cases_are_nan() -> None:
    one_class = calibration_intercept_slope([1, 1, 1], [0.2, 0.5, 0.7])
    assert math.isnan(one_class.calibration_intercept) and math.isnan(one_class.calibration_slope)
    assert not one_class.converged
    # Complete and quasi-complete separation: no finite slope; the intercept still exists.
    for p in ([0.1, 0.2, 0.8, 0.9], [0.1, 0.5, 0.5, 0.9]):
        fit = calibration_intercept_slope([0, 0, 1, 1], p)
        assert math.isnan(fit.calibration_slope) and not fit.converged
        assert math.isfinite(fit.calibration_intercept)


def test_calibrated_scores_have_intercept_zero_slope_one() -> None:
    rng = np.random.default_rng(24)
    p = expit(rng.normal(-1.0, 1.5, 40_000))
    y = (rng.random(p.size) < p).astype(int)
    fit = calibration_intercept_slope(y, p)
    lo, hi = fit.calibration_slope_ci
    assert lo < 1.0 < hi
    lo, hi = fit.calibration_intercept_ci
    assert lo < 0.0 < hi
    over = calibration_intercept_slope(y, expit(2 * logit(p)))  # over-confident scores
    assert over.calibration_slope == pytest.approx(0.5, abs=0.03)


# ---------------------------------------------------------------------------------------------
# Hosmer-Lemeshow, Spiegelhalter, Wilson
# ---------------------------------------------------------------------------------------------


def test_hosmer_lemeshow_hand_worked() -> None:
    p = [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9]
    y = [0, 0, 1, 0, 1, 1, 1, 1, 1]
    # Three equal-mass groups of three (edges 0.3667 and 0.6333):
    #   O = 1, E = 0.6, n = 3;  O = 2, E = 1.5, n = 3;  O = 3, E = 2.4, n = 3.
    expected = (
        (1 - 0.6) ** 2 / (0.6 * (1 - 0.6 / 3))
        + (2 - 1.5) ** 2 / (1.5 * (1 - 1.5 / 3))
        + (3 - 2.4) ** 2 / (2.4 * (1 - 2.4 / 3))
    )
    assert expected == pytest.approx(17 / 12)
    r = hosmer_lemeshow(y, p, n_groups=3)
    assert r.hosmer_lemeshow == pytest.approx(expected, abs=1e-12)
    assert r.df == 3 and r.n_groups == 3  # scores not fitted on these rows: G degrees of freedom
    assert r.hosmer_lemeshow_pvalue == pytest.approx(stats.chi2.sf(expected, 3), abs=1e-12)
    # Weight 2 on every row: each group doubles, so the statistic doubles.
    r2 = hosmer_lemeshow(y, p, n_groups=3, sample_weight=[2.0] * 9)
    assert r2.hosmer_lemeshow == pytest.approx(2 * expected, abs=1e-12)


def test_hosmer_lemeshow_overflowing_sum_is_infinite_without_warning() -> None:
    # Positives at subnormal scores: each group's term is near or past the largest double, and
    # their sum overflows. The statistic is inf and the p-value 0, with no RuntimeWarning (the
    # suite turns warnings into errors). Found by Hypothesis in CI.
    p = [0.0] + [1.0] * 20 + [1.11253693e-308, 1.11253693e-308, 5e-324, 2.22507386e-308]
    y = [0] * 22 + [1] * 3
    r = hosmer_lemeshow(y, p)  # deciles of equal mass fall into three groups of distinct scores
    assert r.hosmer_lemeshow == math.inf and r.n_groups == 3
    assert r.hosmer_lemeshow_pvalue == 0.0


def test_hosmer_lemeshow_deciles_and_chi_square() -> None:
    y, p, _ = _data(1000, 25)
    r = hosmer_lemeshow(y, p)
    order = np.argsort(p)
    groups = np.array_split(order, 10)  # 1000 distinct scores: deciles of 100 rows each
    expected = sum(
        (y[g].sum() - p[g].sum()) ** 2 / (p[g].sum() * (1 - p[g].sum() / g.size)) for g in groups
    )
    assert r.hosmer_lemeshow == pytest.approx(expected, rel=1e-10)
    assert r.df == 10
    assert r.hosmer_lemeshow_pvalue == pytest.approx(stats.chi2.sf(expected, 10), rel=1e-9)


def test_hosmer_lemeshow_holds_its_level_on_calibrated_scores_of_other_rows() -> None:
    """Scores drawn first and labels drawn from them are calibrated and not fitted on the rows
    (what reliability assesses): the test rejects at its nominal 5%. With the G - 2 degrees of
    freedom of a model fitted on the rows, it rejected 10.5% of 2,000 such samples. Over 600
    samples the rejection rate's standard error is 0.9%: 2.2% to 8.5% is about 3.5 of them."""
    rng = np.random.default_rng(2026)
    pvalues = []
    for _ in range(600):
        p = rng.uniform(0.02, 0.98, 500)
        y = (rng.random(500) < p).astype(np.float64)
        pvalues.append(hosmer_lemeshow(y, p).hosmer_lemeshow_pvalue)
    rejected = float(np.mean(np.asarray(pvalues) < 0.05))
    assert 0.022 <= rejected <= 0.085


def test_spiegelhalter_hand_worked() -> None:
    y = [1, 0, 1, 0]
    p = [0.9, 0.3, 0.6, 0.1]
    # (y - p)(1 - 2p): -0.08, -0.12, -0.08, -0.08 -> -0.36
    # (1 - 2p)^2 p (1 - p): 0.0576, 0.0336, 0.0096, 0.0576 -> 0.1584
    z = -0.36 / math.sqrt(0.1584)
    r = spiegelhalter(y, p)
    assert r.spiegelhalter_z == pytest.approx(z, abs=1e-12)
    assert r.spiegelhalter_pvalue == pytest.approx(2 * stats.norm.sf(abs(z)), abs=1e-12)
    # Spiegelhalter's form: (Brier - E[Brier]) / sd under the null.
    pa, ya = np.array(p), np.array(y)
    brier = np.mean((ya - pa) ** 2)
    mean0 = np.mean(pa * (1 - pa))
    sd0 = math.sqrt(np.sum((1 - 2 * pa) ** 2 * pa * (1 - pa))) / 4
    assert r.spiegelhalter_z == pytest.approx((brier - mean0) / sd0, abs=1e-12)
    assert math.isnan(spiegelhalter([0, 1], [0.5, 0.5]).spiegelhalter_z)


def test_wilson_interval_published_and_defining_equation() -> None:
    low, high = wilson_interval([81, 15, 0, 1], [263, 148, 20, 29])
    # Newcombe (1998), Table II, method 3 (score interval without continuity correction).
    published = [(0.2553, 0.3662), (0.0624, 0.1605), (0.0, 0.1611), (0.0061, 0.1718)]
    for i, (lo, hi) in enumerate(published):
        assert low[i] == pytest.approx(lo, abs=5e-5)
        assert high[i] == pytest.approx(hi, abs=5e-5)
    # The bounds solve |x/n - q| = z sqrt(q (1 - q) / n).
    x, n = 7.5, 31.0
    lo_w, hi_w = wilson_interval([x], [n])

    def gap(q: float) -> float:
        return float((x / n - q) ** 2 - Z95**2 * q * (1 - q) / n)

    assert lo_w[0] == pytest.approx(optimize.brentq(gap, 1e-9, x / n), abs=1e-12)
    assert hi_w[0] == pytest.approx(optimize.brentq(gap, x / n, 1 - 1e-9), abs=1e-12)
    nan_low, nan_high = wilson_interval([0], [0])
    assert math.isnan(nan_low[0]) and math.isnan(nan_high[0])


def test_bin_table_fields() -> None:
    table = reliability_bins(
        [0, 1, 1, 0, 1], [0.05, 0.15, 0.95, 0.55, 0.6], sample_weight=[1, 2, 1, 0, 1], n_bins=4
    )
    assert [(b.lower, b.upper) for b in table] == [
        (0.0, 0.25),
        (0.25, 0.5),
        (0.5, 0.75),
        (0.75, 1.0),
    ]
    assert [b.n_rows for b in table] == [2, 0, 2, 1]
    assert [b.count for b in table] == [3.0, 0.0, 1.0, 1.0]
    assert table[0].observed_rate == pytest.approx(2 / 3)
    assert table[0].mean_score == pytest.approx((0.05 + 0.3) / 3)
    assert math.isnan(table[1].observed_rate) and math.isnan(table[1].observed_ci_low)
    low, high = wilson_interval([2.0], [3.0])
    assert (table[0].observed_ci_low, table[0].observed_ci_high) == (low[0], high[0])
    assert table[2].mean_score == 0.6  # the zero-weight row counts as a row, not as weight


# ---------------------------------------------------------------------------------------------
# The summary
# ---------------------------------------------------------------------------------------------

JSON_KEYS = [
    "n", "weight_total", "weight_kind", "positives", "base_rate", "mean_score",
    "calibration_in_the_large", "observed_expected_ratio", "log_loss", "brier",
    "brier_reliability", "brier_resolution",
    "brier_uncertainty", "ece", "ece_ci", "mce", "ece_debiased", "ece_debiased_ci", "auc",
    "auc_ci", "gini", "average_precision", "calibration_intercept", "calibration_intercept_ci",
    "calibration_slope", "calibration_slope_ci", "calibration_converged", "hosmer_lemeshow",
    "hosmer_lemeshow_pvalue", "hosmer_lemeshow_df", "spiegelhalter_z", "spiegelhalter_pvalue",
    "n_bins", "strategy", "bins",
]  # fmt: skip


def test_summary_fields_and_consistency_with_the_single_functions() -> None:
    y, p, w = _data(700, 26, decimals=3, weights="float")
    s = reliability_summary(y, p, sample_weight=w, n_bins=8, strategy="quantile")
    assert [f.name for f in dataclasses.fields(s)] == JSON_KEYS
    assert [f.name for f in dataclasses.fields(s.bins[0])] == [
        "lower", "upper", "count", "n_rows", "mean_score", "observed_rate", "observed_ci_low",
        "observed_ci_high",
    ]  # fmt: skip
    assert w is not None
    assert s.n == 700 and s.weight_total == pytest.approx(float(np.sum(w)))
    assert s.positives == pytest.approx(float(w @ y))
    assert s.base_rate == pytest.approx(float(w @ y) / float(np.sum(w)))
    assert s.mean_score == pytest.approx(float(w @ p) / float(np.sum(w)))
    assert s.ece == pytest.approx(
        ece(y, p, n_bins=8, strategy="quantile", sample_weight=w), abs=1e-14
    )
    assert s.mce == pytest.approx(
        mce(y, p, n_bins=8, strategy="quantile", sample_weight=w), abs=1e-14
    )
    assert s.ece_debiased == pytest.approx(
        ece_debiased(y, p, n_bins=8, strategy="quantile", sample_weight=w), abs=1e-14
    )
    d = murphy_decomposition(y, p, n_bins=8, strategy="quantile", sample_weight=w)
    assert (s.brier_reliability, s.brier_resolution, s.brier_uncertainty) == pytest.approx(
        (d.brier_reliability, d.brier_resolution, d.brier_uncertainty), abs=1e-14
    )
    auc = delong_interval(y, p, sample_weight=w)
    assert s.auc_ci == pytest.approx(auc.auc_ci, abs=1e-14)
    assert s.gini == pytest.approx(2 * auc.auc - 1, abs=1e-14)
    fit = calibration_intercept_slope(y, p, sample_weight=w)
    assert s.calibration_slope == pytest.approx(fit.calibration_slope, abs=1e-9)
    assert s.calibration_intercept_ci == pytest.approx(fit.calibration_intercept_ci, abs=1e-9)
    assert s.calibration_converged == fit.converged
    hl = hosmer_lemeshow(y, p, sample_weight=w)
    assert s.hosmer_lemeshow == pytest.approx(hl.hosmer_lemeshow, abs=1e-10)
    sp = spiegelhalter(y, p, sample_weight=w)
    assert s.spiegelhalter_z == pytest.approx(sp.spiegelhalter_z, abs=1e-12)
    assert s.n_bins == len(s.bins) == 8 and s.strategy == "quantile"
    _assert_bins_close(
        s.bins, reliability_bins(y, p, n_bins=8, strategy="quantile", sample_weight=w)
    )


def test_summary_one_class_gives_nan_not_an_error() -> None:
    s = reliability_summary([0, 0, 0, 0], [0.1, 0.2, 0.2, 0.4], n_bins=4)
    assert s.positives == 0.0 and s.base_rate == 0.0
    for name in ("auc", "gini", "average_precision", "calibration_intercept", "calibration_slope"):
        assert math.isnan(getattr(s, name)), name
    assert all(math.isnan(v) for v in s.auc_ci)
    assert not s.calibration_converged
    assert math.isfinite(s.log_loss) and math.isfinite(s.brier) and math.isfinite(s.ece)
    assert s.observed_expected_ratio == 0.0
    positives_only = reliability_summary([1, 1], [0.3, 0.6])
    assert math.isnan(positives_only.auc) and positives_only.average_precision == 1.0


# ---------------------------------------------------------------------------------------------
# Bad input
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"y_prob": [0.1, float("nan")]}, "column 'y_prob' has 1 value missing or NaN"),
        ({"y_prob": [0.1, 1.5]}, "column 'y_prob' has 1 value outside [0, 1]"),
        ({"y_true": [0, 2]}, "column 'y_true' has 1 value that is not 0 or 1"),
        ({"sample_weight": [1.0, -1.0]}, "column 'sample_weight' has 1 value that is negative"),
        ({"sample_weight": [1.0]}, "column 'sample_weight' has 1 values for 2 rows"),
        ({"sample_weight": [0.0, 0.0]}, "every weight is 0: no row carries weight"),
        ({"y_true": [0, 1, 1]}, "different numbers of rows (y_true=3, y_prob=2)"),
        ({"y_true": [], "y_prob": []}, "y_prob is empty"),
        ({"n_bins": 0}, "n_bins must be a positive integer, got 0"),
        ({"strategy": "kmeans"}, "strategy must be one of uniform, quantile, got 'kmeans'"),
        ({"eps": 0.7}, "eps must be strictly between 0 and 0.5, got 0.7"),
        ({"n_bootstrap": 10}, "rng must be a numpy.random.Generator when n_bootstrap > 0"),
        ({"n_bootstrap": -1}, "n_bootstrap must be a non-negative integer, got -1"),
    ],
)
def test_bad_input_names_the_parameter(kwargs: dict[str, object], message: str) -> None:
    args: dict[str, object] = {"y_true": [0, 1], "y_prob": [0.2, 0.7]}
    args.update(kwargs)
    y_true, y_prob = args.pop("y_true"), args.pop("y_prob")
    with pytest.raises(InputError) as info:
        reliability_summary(y_true, y_prob, **args)  # type: ignore[arg-type]
    assert message in str(info.value)


def test_other_functions_check_their_options() -> None:
    with pytest.raises(InputError, match="confidence must be strictly between 0 and 1"):
        delong_interval([0, 1], [0.2, 0.7], confidence=1.0)
    with pytest.raises(InputError, match="n_groups must be a positive integer"):
        hosmer_lemeshow([0, 1], [0.2, 0.7], n_groups=0)
    with pytest.raises(InputError, match="max_iter must be a positive integer"):
        calibration_intercept_slope([0, 1], [0.2, 0.7], max_iter=0)
    with pytest.raises(InputError, match="exact_limit must be non-negative"):
        ece_bootstrap([0, 1], [0.2, 0.7], rng=np.random.default_rng(0), exact_limit=-1.0)
