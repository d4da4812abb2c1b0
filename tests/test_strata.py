"""Tests of calib_cli.core.strata: stratified re-ranking (Zuo 2021, Algorithm 1)."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.special import expit
from scipy.stats import norm, rankdata
from sklearn.isotonic import IsotonicRegression
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import roc_auc_score, roc_curve

from calib_cli.core.strata import (
    CONTINUITY,
    StratumSlope,
    compare_rankings,
    factorize_strata,
    fit_strata,
    fit_stratum_slope,
    fpr_at,
    odds_from_prevalence,
    rank_order,
    rerank,
    rerank_rank,
    roc_hull,
    roc_slope_at,
    stratum_label_rates,
    stratum_odds,
    summarise_strata,
    tpr_at_fpr,
)
from calib_cli.errors import InputError

FloatArray = npt.NDArray[np.float64]


def _random_data(
    seed: int, n: int = 400, *, ties: bool = True
) -> tuple[FloatArray, FloatArray, FloatArray]:
    rng = np.random.default_rng(seed)
    y = (rng.random(n) < 0.3).astype(np.float64)
    scores = rng.normal(size=n) + 1.2 * y
    if ties:
        scores = np.round(scores, 1)
    weights = rng.integers(1, 4, size=n).astype(np.float64)
    return scores, y, weights


def _upper_hull(points: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """Andrew's monotone chain: the upper (concave) hull of points sorted by x then y."""
    hull: list[tuple[float, float]] = []
    for p in sorted(points):
        while len(hull) >= 2:
            (x1, y1), (x2, y2) = hull[-2], hull[-1]
            # pop unless a strict right turn (collinear points are dropped, up to rounding)
            if (x2 - x1) * (p[1] - y1) - (y2 - y1) * (p[0] - x1) >= -1e-12:
                hull.pop()
            else:
                break
        hull.append(p)
    return hull


# ------------------------------------------------------------------------------------------
# The ROC, its hull, AUC and TPR at FPR against independent references
# ------------------------------------------------------------------------------------------


def test_hull_hand_worked() -> None:
    # descending: 0.6+, 0.5+, 0.4-, 0.3-, 0.2+, 0.1-. ROC vertices (0,0) (0,1/3) (0,2/3)
    # (1/3,2/3) (2/3,2/3) (2/3,1) (1,1); hull: vertical to (0,2/3), slope (1/3)/(2/3) to
    # (2/3,1), flat to (1,1). PAV of the labels on the scores: rates 0, 1/3, 1.
    hull = roc_hull([0.1, 0.2, 0.3, 0.4, 0.5, 0.6], [0, 1, 0, 0, 1, 1])
    assert hull.score_low.tolist() == [0.1, 0.2, 0.5]
    assert hull.score_high.tolist() == [0.1, 0.4, 0.6]
    assert hull.positives.tolist() == [0.0, 1.0, 2.0]
    assert hull.negatives.tolist() == [1.0, 2.0, 0.0]
    assert hull.roc_slope.tolist() == [0.0, 0.5, np.inf]
    np.testing.assert_allclose(hull.fpr_low, [2 / 3, 0.0, 0.0])
    np.testing.assert_allclose(hull.fpr_high, [1.0, 2 / 3, 0.0])
    np.testing.assert_allclose(hull.tpr_low, [1.0, 2 / 3, 0.0])
    np.testing.assert_allclose(hull.tpr_high, [1.0, 1.0, 2 / 3])


@pytest.mark.parametrize("seed", range(4))
def test_hull_matches_monotone_chain(seed: int) -> None:
    scores, y, w = _random_data(seed)
    auc_points = roc_curve(y, scores, sample_weight=w, drop_intermediate=False)
    points = list(zip(auc_points[0].tolist(), auc_points[1].tolist(), strict=True))
    vertices = np.array(_upper_hull(points))
    with np.errstate(divide="ignore"):  # inf for a vertical start
        expected = np.diff(vertices[:, 1]) / np.diff(vertices[:, 0])
    hull = roc_hull(scores, y, sample_weight=w)
    # hull segments run from low scores (top right) to high scores: reverse to compare
    np.testing.assert_allclose(hull.roc_slope[::-1], expected, rtol=1e-10)
    np.testing.assert_allclose(hull.fpr_high[::-1], vertices[1:, 0], atol=1e-12)
    np.testing.assert_allclose(hull.tpr_high[::-1], vertices[1:, 1], atol=1e-12)


@pytest.mark.parametrize("seed", range(4))
def test_hull_slopes_are_pav_likelihood_ratios(seed: int) -> None:
    scores, y, w = _random_data(seed)
    iso = IsotonicRegression().fit(scores, y, sample_weight=w)
    rate = iso.predict(scores)
    prior_odds = (w @ y) / (w @ (1 - y))
    with np.errstate(divide="ignore"):
        expected = rate / (1 - rate) / prior_odds
    hull = roc_hull(scores, y, sample_weight=w)
    segment = np.searchsorted(hull.score_low, scores, side="right") - 1
    np.testing.assert_allclose(hull.roc_slope[segment], expected, rtol=1e-9)


@pytest.mark.parametrize("seed", range(3))
def test_auc_matches_sklearn(seed: int) -> None:
    scores, y, w = _random_data(seed)
    comparison = compare_rankings(y, scores, scores, sample_weight=w)
    reference = roc_auc_score(y, scores, sample_weight=w)
    assert comparison.auc_raw == pytest.approx(reference, abs=1e-12)
    assert comparison.auc_reranked == pytest.approx(reference, abs=1e-12)
    fit = fit_stratum_slope(scores, y, sample_weight=w)
    assert fit.auc == pytest.approx(roc_auc_score(y, scores, sample_weight=w), abs=1e-12)


def test_tpr_at_fpr_hand_worked() -> None:
    # descending: 0.8+ 0.4- 0.35+ 0.1-: vertices (0,0) (0,.5) (.5,.5) (.5,1) (1,1)
    y = [0, 0, 1, 1]
    s = [0.1, 0.4, 0.35, 0.8]
    assert tpr_at_fpr(y, s, fprs=(0.0, 0.25, 0.5, 0.75)).tolist() == [0.5, 0.5, 1.0, 1.0]
    # a tie holding one positive and one negative is a diagonal segment: interpolate on it
    y2 = [0, 1, 0, 1]
    s2 = [0.1, 0.5, 0.5, 0.9]  # vertices (0,0) (0,.5) (.5,1) (1,1)
    assert tpr_at_fpr(y2, s2, fprs=(0.0, 0.2, 0.5)).tolist() == [0.5, 0.7, 1.0]


@pytest.mark.parametrize("seed", range(3))
def test_tpr_at_fpr_matches_sklearn_roc_curve(seed: int) -> None:
    scores, y, w = _random_data(seed, n=3000, ties=False)
    fprs = (0.0123, 0.0517, 0.1013, 0.3037)  # not on a vertex
    fpr, tpr, _ = roc_curve(y, scores, sample_weight=w, drop_intermediate=False)
    expected = np.interp(fprs, fpr, tpr)
    np.testing.assert_allclose(tpr_at_fpr(y, scores, fprs=fprs, sample_weight=w), expected)


def test_tpr_at_fpr_refuses_bad_fpr() -> None:
    with pytest.raises(InputError, match=r"fprs must lie in \[0, 1\], got 1.5"):
        tpr_at_fpr([0, 1], [0.1, 0.2], fprs=(0.1, 1.5))


# ------------------------------------------------------------------------------------------
# The fitted slope function
# ------------------------------------------------------------------------------------------


def _assert_knots_valid(fit: StratumSlope) -> None:
    assert np.all(np.diff(fit.thresholds) > 0)
    assert np.all(np.diff(fit.fpr) < 0)
    assert np.all((fit.fpr > 0) & (fit.fpr < 1))
    assert np.all(np.isfinite(fit.roc_slope)) and np.all(fit.roc_slope > 0)
    assert np.all(np.diff(fit.roc_slope) > 0)
    assert fit.slope_min == fit.roc_slope[0] and fit.slope_max == fit.roc_slope[-1]


def test_hull_slope_hand_worked() -> None:
    fit = fit_stratum_slope([0.1, 0.2, 0.3, 0.4, 0.5, 0.6], [0, 1, 0, 0, 1, 1])
    _assert_knots_valid(fit)
    # bottom segment {0.1}: no positives, corrected (0 + .5) / (1 + .5) * N / P = 1/3;
    # top segment {0.5, 0.6}: no negatives, corrected (2 + .5) / (0 + .5) * 3 / 3 = 5.
    assert fit.roc_slope[0] == pytest.approx(1 / 3, rel=1e-5)
    assert fit.roc_slope[-1] == pytest.approx(5.0, rel=1e-5)
    # knot 0.3 sits at FPR 1/2, between the centres of segment {0.1} (FPR 5/6, slope 1/3) and
    # segment {0.2..0.4} (FPR 1/3, slope 1/2): log-linear interpolation, 2/3 of the way
    assert fit.fpr[2] == pytest.approx(0.5, abs=1e-6)
    assert fit.roc_slope[2] == pytest.approx((1 / 3) ** (1 / 3) * 0.5 ** (2 / 3), rel=1e-5)
    assert fit.positives == 3.0 and fit.negatives == 3.0 and fit.rows == 6


def test_continuity_correction_only_at_the_ends() -> None:
    scores = np.array([1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0])
    y = np.array([0, 0, 1, 0, 1, 0, 1, 1])
    hull = roc_hull(scores, y)
    assert hull.roc_slope[-1] == np.inf and hull.roc_slope[0] == 0.0
    fit = fit_stratum_slope(scores, y)
    p, n = 4.0, 4.0
    top = (hull.positives[-1] + CONTINUITY) / CONTINUITY * n / p
    bottom = CONTINUITY / (hull.negatives[0] + CONTINUITY) * n / p
    assert fit.slope_max == pytest.approx(top, rel=1e-5)
    assert fit.slope_min == pytest.approx(bottom, rel=1e-5)


def test_light_top_segment_keeps_order() -> None:
    # the top segment holds a single positive of small weight: corrected, its slope would fall
    # below the next segment's; the isotonic pass restores the order, and the ramp keeps it strict
    scores = np.array([1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0])
    y = np.array([0, 0, 0, 1, 1, 0, 1])
    w = np.array([5.0, 5.0, 5.0, 5.0, 5.0, 0.05, 0.01])
    fit = fit_stratum_slope(scores, y, sample_weight=w)
    _assert_knots_valid(fit)


@pytest.mark.parametrize("smoothing", ["hull", "loess"])
@pytest.mark.parametrize(
    ("scores", "y"),
    [
        ([0.5, 0.5, 0.5, 0.5], [0, 1, 0, 1]),  # one knot
        ([0.1, 0.2, 0.3, 0.4], [1, 0, 1, 0]),  # no signal: one hull segment
        ([0.1, 0.2, 0.3, 0.4, 0.9, 0.95], [0, 0, 0, 1, 1, 1]),  # separable
        ([0.1, 0.2, 0.3, 0.4, 0.9, 0.95], [1, 1, 1, 0, 0, 0]),  # reversed
    ],
)
def test_knots_valid_on_degenerate_cases(smoothing: str, scores: list[float], y: list[int]) -> None:
    fit = fit_stratum_slope(scores, y, smoothing=smoothing)  # type: ignore[arg-type]
    _assert_knots_valid(fit)


@pytest.mark.parametrize("smoothing", ["hull", "loess"])
@pytest.mark.parametrize("seed", range(3))
def test_knots_valid_on_random_data(smoothing: str, seed: int) -> None:
    scores, y, w = _random_data(seed)
    _assert_knots_valid(fit_stratum_slope(scores, y, sample_weight=w, smoothing=smoothing))  # type: ignore[arg-type]


@pytest.mark.parametrize("smoothing", ["hull", "loess"])
def test_slopes_recover_binormal_likelihood_ratio(smoothing: str) -> None:
    # negatives N(0, 1), positives N(1, 1): the true ROC slope at score s is exp(s - 1/2)
    rng = np.random.default_rng(7)
    n = 100_000
    y = (rng.random(n) < 0.3).astype(float)
    scores = rng.normal(size=n) + y
    fit = fit_stratum_slope(scores, y, smoothing=smoothing)  # type: ignore[arg-type]
    probe = np.array([-0.5, 0.0, 0.5, 1.0])  # FPR 0.69 .. 0.16
    np.testing.assert_allclose(roc_slope_at(fit, probe), np.exp(probe - 0.5), rtol=0.12)
    np.testing.assert_allclose(fpr_at(fit, probe), norm.sf(probe), atol=0.01)


@pytest.mark.parametrize("smoothing", ["hull", "loess"])
@pytest.mark.parametrize("seed", range(3))
def test_weights_equal_repetition(smoothing: str, seed: int) -> None:
    scores, y, w = _random_data(seed, n=150)
    w[:5] = 0.0  # a weight of 0 is the same as leaving the row out
    keep = w > 0
    weighted = fit_stratum_slope(scores, y, sample_weight=w, smoothing=smoothing)  # type: ignore[arg-type]
    reps = w[keep].astype(int)
    repeated = fit_stratum_slope(
        np.repeat(scores[keep], reps),
        np.repeat(y[keep], reps),
        smoothing=smoothing,  # type: ignore[arg-type]
    )
    for field in ("thresholds", "fpr", "roc_slope"):
        np.testing.assert_allclose(getattr(weighted, field), getattr(repeated, field), rtol=1e-10)
    assert weighted.positives == repeated.positives and weighted.auc == pytest.approx(repeated.auc)


@pytest.mark.parametrize("seed", range(3))
def test_permutation_invariance_and_inputs_not_mutated(seed: int) -> None:
    scores, y, w = _random_data(seed)
    copies = (scores.copy(), y.copy(), w.copy())
    fit = fit_stratum_slope(scores, y, sample_weight=w)
    for original, copy in zip((scores, y, w), copies, strict=True):
        np.testing.assert_array_equal(original, copy)
    perm = np.random.default_rng(seed).permutation(scores.size)
    permuted = fit_stratum_slope(scores[perm], y[perm], sample_weight=w[perm])
    np.testing.assert_allclose(fit.roc_slope, permuted.roc_slope, rtol=1e-12)
    np.testing.assert_allclose(fit.fpr, permuted.fpr, rtol=1e-12)


def test_roc_slope_at_is_exact_at_knots_and_monotone_everywhere() -> None:
    scores, y, w = _random_data(1)
    fit = fit_stratum_slope(scores, y, sample_weight=w)
    np.testing.assert_allclose(roc_slope_at(fit, fit.thresholds), fit.roc_slope, rtol=1e-12)
    np.testing.assert_allclose(fpr_at(fit, fit.thresholds), fit.fpr, rtol=1e-12)
    lo, hi = fit.thresholds[0], fit.thresholds[-1]
    grid = np.linspace(lo - 50 * (hi - lo), hi + 50 * (hi - lo), 20_001)
    values = roc_slope_at(fit, grid)
    assert np.all(np.diff(values) > 0)
    assert np.all(np.diff(fpr_at(fit, grid)) < 0)
    eps = fit.tie_eps
    assert values.min() >= fit.slope_min * np.exp(-eps) * (1 - 1e-12)
    assert values.max() <= fit.slope_max * np.exp(eps) * (1 + 1e-12)


def test_option_checks() -> None:
    with pytest.raises(InputError, match="smoothing must be one of 'hull', 'loess', got 'spline'"):
        fit_stratum_slope([0.1, 0.9], [0, 1], smoothing="spline")  # type: ignore[arg-type]
    with pytest.raises(InputError, match="span must be in"):
        fit_stratum_slope([0.1, 0.9], [0, 1], span=0.0)
    with pytest.raises(InputError, match="the labels have no positive rows"):
        fit_stratum_slope([0.1, 0.9], [0, 0])
    with pytest.raises(InputError, match="column 'score' has 1 value missing or NaN"):
        fit_stratum_slope([0.1, np.nan], [0, 1])


# ------------------------------------------------------------------------------------------
# Strata, odds, re-ranking
# ------------------------------------------------------------------------------------------


def test_factorize_strata() -> None:
    codes, names = factorize_strata(np.array([10, 2, 10, 2, 7]))
    assert codes.tolist() == [2, 0, 2, 0, 1] and names == ("2", "7", "10")
    with pytest.raises(
        InputError, match=r"column 'stratum' has 1 missing value \(first at row 2\)"
    ):
        factorize_strata(np.array(["a", None, "b"], dtype=object))
    with pytest.raises(InputError, match="2 missing values"):
        factorize_strata([1.0, np.nan, np.nan])


def test_stratum_odds_weighted_and_from_prevalence() -> None:
    y = [1, 0, 0, 1, 0, 1]
    g = ["a", "a", "a", "b", "b", "b"]
    w = [2.0, 1.0, 3.0, 1.0, 1.0, 0.5]
    assert stratum_odds(y, g, sample_weight=w) == {"a": 0.5, "b": 1.5}
    assert stratum_label_rates(y, g, sample_weight=w) == {"a": 1 / 3, "b": 0.6}
    assert odds_from_prevalence({"a": 0.2, "b": 0.75}) == {"a": 0.25, "b": 3.0}
    with pytest.raises(InputError, match=r"prevalence of stratum 'b' must be in \(0, 1\), got 1.0"):
        odds_from_prevalence({"a": 0.2, "b": 1.0})
    with pytest.raises(InputError, match="stratum 'b' has no positive rows"):
        stratum_odds([1, 0, 0, 0], ["a", "a", "b", "b"])


def _two_strata_fits() -> dict[str, StratumSlope]:
    scores, y, w = _random_data(3)
    strata = np.where(np.arange(scores.size) % 3 == 0, "x", "y")
    return fit_strata(scores, y, strata, sample_weight=w)


def test_missing_target_stratum_is_an_error_naming_it() -> None:
    fits = _two_strata_fits()
    odds = {"x": 0.2, "y": 0.1}
    with pytest.raises(InputError) as info:
        rerank([0.1, 0.2, 0.3, 0.4], ["x", "z", "z", "y"], fits, odds)
    assert (
        str(info.value) == "stratum 'z' of the target has no rows in the reference (2 target rows)"
    )
    with pytest.raises(InputError) as info:
        rerank([0.1, 0.2, 0.3], ["w", "z", "z"], fits, odds)
    assert str(info.value) == (
        "stratum 'w' of the target has no rows in the reference (1 target row); so do 1 more: 'z'"
    )
    with pytest.raises(InputError) as info:
        rerank([0.1, 0.2], ["x", "y"], fits, {"x": 0.2})
    assert str(info.value) == "stratum 'y' of the target has no odds or prevalence (1 target row)"
    with pytest.raises(InputError) as info:  # the reference's file, when the caller knows it
        rerank([0.1, 0.2], ["x", "z"], fits, odds, reference_name="ref.csv")
    assert str(info.value) == (
        "stratum 'z' of the target has no rows in the reference ref.csv (1 target row)"
    )
    with pytest.raises(InputError, match="odds of stratum 'x' must be finite and positive"):
        rerank([0.1, 0.2], ["x", "y"], fits, {"x": 0.0, "y": 1.0})


def test_reference_stratum_without_a_class_is_named() -> None:
    with pytest.raises(InputError, match="the reference rows of stratum 'b' have no positive"):
        fit_strata([0.1, 0.9, 0.3, 0.4], [0, 1, 0, 0], ["a", "a", "b", "b"])


def test_integer_strata_match_string_keys() -> None:
    fits = fit_strata([0.2, 0.6, 0.3, 0.9], [0, 1, 0, 1], [1, 1, 2, 2])
    assert sorted(fits) == ["1", "2"]
    result = rerank([0.5, 0.5], np.array([2, 1]), fits, {"1": 1.0, "2": 1.0})
    assert result.rerank_score.shape == (2,)


def test_rerank_formula() -> None:
    fits = _two_strata_fits()
    odds = {"x": 0.3, "y": 0.05}
    target = np.array([-1.0, 0.0, 0.7, 2.0, 0.7, 5.0])
    strata = np.array(["x", "y", "x", "y", "y", "x"])
    copies = (target.copy(), strata.copy())
    result = rerank(target, strata, fits, odds)
    np.testing.assert_array_equal(target, copies[0])
    np.testing.assert_array_equal(strata, copies[1])
    for stratum in ("x", "y"):
        m = strata == stratum
        expected = odds[stratum] * roc_slope_at(fits[stratum], target[m])
        np.testing.assert_allclose(result.rerank_score[m], expected, rtol=1e-12)
        np.testing.assert_allclose(result.roc_slope[m], roc_slope_at(fits[stratum], target[m]))
    r = result.rerank_score
    np.testing.assert_allclose(result.calibrated, r / (1 + r), rtol=1e-12)


def test_rank_order_breaks_ties_by_raw_score() -> None:
    r = np.array([2.0, 1.0, 2.0, 2.0, 0.5])
    s = np.array([0.1, 0.9, 0.3, 0.1, 0.2])
    assert rank_order(r, s).tolist() == [2, 0, 3, 1, 4]
    assert rerank_rank(r, s).tolist() == [2, 4, 1, 2, 5]
    # rerank_rank is the competition ("min") rank of the lexicographic pair
    rng = np.random.default_rng(0)
    r2 = rng.integers(0, 5, 500).astype(float)
    s2 = rng.integers(0, 5, 500).astype(float)
    expected = rankdata(-(r2 * 10 + s2), method="min")
    np.testing.assert_array_equal(rerank_rank(r2, s2), expected)


def test_one_stratum_ranking_equals_raw_ranking() -> None:
    scores, y, w = _random_data(5)
    fits = fit_strata(scores, y, np.zeros(scores.size, dtype=int), sample_weight=w)
    rng = np.random.default_rng(1)
    target = np.round(rng.normal(size=2000) * 2, 2)  # beyond the reference range, with ties
    result = rerank(target, np.zeros(target.size, dtype=int), fits, {"0": 0.4})
    np.testing.assert_array_equal(
        rerank_rank(result.rerank_score, target), rankdata(-target, method="min")
    )
    np.testing.assert_array_equal(
        rank_order(result.rerank_score, target), np.lexsort((np.arange(target.size), -target))
    )


@settings(max_examples=60, deadline=None)
@given(
    reference=st.lists(
        st.tuples(st.integers(0, 2), st.integers(-30, 30), st.booleans(), st.integers(1, 3)),
        min_size=6,
        max_size=60,
    ),
    target=st.lists(st.tuples(st.integers(0, 2), st.integers(-60, 60)), min_size=2, max_size=80),
    smoothing=st.sampled_from(["hull", "loess"]),
)
def test_within_stratum_order_is_the_raw_order(
    reference: list[tuple[int, int, bool, int]],
    target: list[tuple[int, int]],
    smoothing: str,
) -> None:
    g = np.array([r[0] for r in reference])
    s = np.array([r[1] for r in reference], dtype=float) / 10
    y = np.array([r[2] for r in reference], dtype=float)
    w = np.array([r[3] for r in reference], dtype=float)
    # every stratum needs both classes in the reference: force them
    for j in range(3):
        g = np.concatenate((g, [j, j]))
        s = np.concatenate((s, [0.0, 0.5]))
        y = np.concatenate((y, [0.0, 1.0]))
        w = np.concatenate((w, [1.0, 1.0]))
    fits = fit_strata(s, y, g, sample_weight=w, smoothing=smoothing)  # type: ignore[arg-type]
    odds = {"0": 0.1, "1": 2.0, "2": 0.5}
    tg = np.array([t[0] for t in target])
    ts = np.array([t[1] for t in target], dtype=float) / 10  # reaches beyond the reference
    result = rerank(ts, tg, fits, odds)
    for j in range(3):
        m = tg == j
        rs, rr = ts[m], result.rerank_score[m]
        ds = np.sign(rs[:, None] - rs[None, :])
        dr = np.sign(rr[:, None] - rr[None, :])
        np.testing.assert_array_equal(ds, dr)


# ------------------------------------------------------------------------------------------
# The paper's setting: per-stratum models on differently undersampled strata
# ------------------------------------------------------------------------------------------

INTERCEPT = np.array([-3.5, -2.0, -5.0])
COEF = np.array([[1.2, 0.6, 0.0], [0.5, -0.9, 0.4], [1.6, 0.0, 0.8]])
SHARE = [0.5, 0.3, 0.2]
NEGATIVE_RATE = [0.05, 0.5, 0.01]  # probability a negative is kept in each stratum's training


def _population(
    rng: np.random.Generator, n: int
) -> tuple[npt.NDArray[np.int64], FloatArray, FloatArray, FloatArray]:
    g = rng.choice(3, size=n, p=SHARE)
    x = rng.normal(size=(n, 3))
    posterior = expit(INTERCEPT[g] + np.einsum("ij,ij->i", COEF[g], x))
    y = (rng.random(n) < posterior).astype(np.float64)
    return g, x, posterior, y


@pytest.mark.parametrize("seed", [0, 1])
def test_paper_setting_rerank_recovers_the_posterior_ranking(seed: int) -> None:
    rng = np.random.default_rng(seed)
    g, x, _, y = _population(rng, 300_000)
    models = []
    for j in range(3):
        keep = (g == j) & ((y == 1) | (rng.random(y.size) < NEGATIVE_RATE[j]))
        models.append(LogisticRegression().fit(x[keep], y[keep]))

    def score(g: npt.NDArray[np.int64], x: FloatArray) -> FloatArray:
        out = np.empty(g.size)
        for j in range(3):
            out[g == j] = models[j].predict_proba(x[g == j])[:, 1]
        return out

    g_tune, x_tune, _, y_tune = _population(rng, 60_000)  # labelled tuning sample
    s_tune = score(g_tune, x_tune)
    g_test, x_test, posterior, y_test = _population(rng, 200_000)
    s_test = score(g_test, x_test)

    fits = fit_strata(s_tune, y_tune, g_tune)
    result = rerank(s_test, g_test, fits, stratum_odds(y_tune, g_tune))
    auc_raw = roc_auc_score(y_test, s_test)
    auc_rerank = roc_auc_score(y_test, result.rerank_score)
    auc_posterior = roc_auc_score(y_test, posterior)
    # baseline: per-stratum isotonic calibration on the same tuning sample, pooled
    isotonic = np.empty(s_test.size)
    for j in range(3):
        fit = IsotonicRegression(out_of_bounds="clip").fit(s_tune[g_tune == j], y_tune[g_tune == j])
        isotonic[g_test == j] = fit.predict(s_test[g_test == j])
    auc_isotonic = roc_auc_score(y_test, isotonic)

    assert auc_rerank > auc_raw + 0.05  # raw pooled scores are badly mis-ranked (~0.70)
    assert auc_rerank > auc_posterior - 0.005  # close to the best possible ranking (~0.838)
    # matches or beats the isotonic baseline; 0.002 is several times the seed-to-seed spread
    # of the difference seen in trials (rerank was ahead by 0.0003-0.0005)
    assert auc_rerank > auc_isotonic - 0.002
    # calibrated is the population posterior: its mean matches the base rate
    assert abs(result.calibrated.mean() - y_test.mean()) < 0.003
    comparison = compare_rankings(y_test, s_test, result.rerank_score)
    assert comparison.auc_raw == pytest.approx(auc_raw, abs=1e-9)
    assert comparison.auc_reranked == pytest.approx(auc_rerank, abs=1e-6)
    assert all(r > q for r, q in zip(comparison.tpr_reranked, comparison.tpr_raw, strict=True))


def test_compare_rankings_uses_raw_score_to_break_ties() -> None:
    y = np.array([0, 1, 0, 1, 1, 0])
    raw = np.array([0.9, 0.8, 0.1, 0.2, 0.7, 0.3])
    r = np.array([1.0, 1.0, 0.5, 0.5, 0.5, 0.5])
    cmp = compare_rankings(y, raw, r, fprs=(0.0, 0.5))
    combined = r * 10 + raw  # the same lexicographic order here
    assert cmp.auc_reranked == pytest.approx(roc_auc_score(y, combined))
    assert cmp.auc_raw == pytest.approx(roc_auc_score(y, raw))
    assert cmp.tpr_reranked == tuple(tpr_at_fpr(y, combined, fprs=(0.0, 0.5)).tolist())


def test_summarise_strata() -> None:
    fits = _two_strata_fits()
    rows = summarise_strata(fits, {"x": 0.25}, ["x", "x", "q"])
    assert [r.stratum for r in rows] == ["x", "y"]
    x, y = rows
    assert x.target_rows == 2 and y.target_rows == 0
    assert x.stratum_odds == 0.25 and np.isnan(y.stratum_odds)
    assert x.rows == fits["x"].rows and x.auc == fits["x"].auc
    assert x.slope_min == fits["x"].slope_min and x.slope_max == fits["x"].slope_max


@given(
    st.lists(st.sampled_from(["a", "b", "ab", "ba", "é", "", "zz", "b "]), min_size=1, max_size=60)
)
def test_text_factorisation_equals_numpy_unique(values: list[str]) -> None:
    arr = np.array(values)
    codes, names = factorize_strata(arr)
    expected_names, expected_codes = np.unique(arr, return_inverse=True)
    assert names == tuple(str(v) for v in expected_names)
    np.testing.assert_array_equal(codes, expected_codes.reshape(-1))
