"""Histogram binning: equal-mass edges against NumPy's weighted quantiles, hand-worked rates."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.optimize import isotonic_regression

from calib_cli.core.histogram import (
    HistogramParams,
    apply_histogram,
    fit_histogram,
    fit_histogram_points,
)
from calib_cli.errors import InputError


@pytest.mark.parametrize("weighted", [False, True])
def test_edges_are_weighted_quantiles(weighted: bool) -> None:
    # With no tied scores and no cumulative weight landing exactly on k/n_bins, the edges are
    # NumPy's inverted-CDF quantiles: the smallest score whose weighted CDF reaches k/n_bins.
    rng = np.random.default_rng(1)
    scores = rng.uniform(0.0, 1.0, 1001)
    y = (rng.uniform(size=scores.size) < scores).astype(float)
    w = rng.uniform(0.1, 2.0, scores.size) if weighted else None
    params = fit_histogram(scores, y, sample_weight=w, n_bins=10)
    levels = np.arange(1, 10) / 10
    expected = np.quantile(scores, levels, method="inverted_cdf", weights=w)
    np.testing.assert_array_equal(params.edges, np.concatenate([[0.0], expected, [1.0]]))
    counts = np.bincount(np.searchsorted(params.edges[1:-1], scores, side="right"), weights=w)
    np.testing.assert_allclose(counts / counts.sum(), 0.1, atol=0.01)


def test_hand_worked_rates_with_prior() -> None:
    # Two bins of four rows: positives 1 and 3; base rate 4/8; m = 2.
    # rates = (1 + 2 * 0.5) / (4 + 2) = 1/3 and (3 + 1) / 6 = 2/3 (already increasing).
    scores = [0.1, 0.2, 0.3, 0.4, 0.6, 0.7, 0.8, 0.9]
    y = [0, 0, 0, 1, 0, 1, 1, 1]
    params = fit_histogram(scores, y, n_bins=2, prior_strength=2.0)
    assert params.edges.tolist() == [0.0, 0.6, 1.0]
    np.testing.assert_allclose(params.rates, [1 / 3, 2 / 3], atol=1e-15)
    np.testing.assert_allclose(
        apply_histogram(params, [0.0, 0.5999, 0.6, 1.0]), [1 / 3, 1 / 3, 2 / 3, 2 / 3]
    )


def test_the_prior_is_worth_rows_of_the_mean_weight_below_one() -> None:
    # The hand-worked case above with every weight 0.25 (or 1/8: normalised to sum to 1): the
    # prior is worth 2 rows of that weight, so the rates are the unweighted 1/3 and 2/3 (with
    # 2 units of weight the rates were (0.25 + 1) / 3 = 0.417 and (0.75 + 1) / 3 = 0.583).
    scores = [0.1, 0.2, 0.3, 0.4, 0.6, 0.7, 0.8, 0.9]
    y = [0, 0, 0, 1, 0, 1, 1, 1]
    for weight in (0.25, 1 / 8):
        params = fit_histogram(
            scores, y, sample_weight=np.full(8, weight), n_bins=2, prior_strength=2.0
        )
        np.testing.assert_allclose(params.rates, [1 / 3, 2 / 3], rtol=1e-14)
    # weights averaging 1 or more count as they are: weight 2 is two rows (m = 2 of 16)
    params = fit_histogram(scores, y, sample_weight=np.full(8, 2.0), n_bins=2, prior_strength=2.0)
    np.testing.assert_allclose(params.rates, [(2 + 1) / 10, (6 + 1) / 10], rtol=1e-14)


@settings(max_examples=60, deadline=None)
@given(
    weights=st.lists(st.integers(1, 3), min_size=6, max_size=30),
    n_bins=st.integers(2, 5),
    scale=st.sampled_from(["sum", "half mean", "tenth"]),
)
def test_rescaled_integer_weights_keep_the_edges(
    weights: list[int], n_bins: int, scale: str
) -> None:
    # Integer weights hit the levels k/n of their total exactly; rescaled, their running sums
    # land a rounding to either side, which moved an edge by a row.
    w = np.asarray(weights, dtype=np.float64)
    scores = np.linspace(0.05, 0.95, w.size)
    y = (np.arange(w.size) % 2).astype(np.float64)
    factor = {"sum": 1.0 / w.sum(), "half mean": 0.5 / w.mean(), "tenth": 0.1}[scale]
    plain = fit_histogram(scores, y, sample_weight=w / w.mean(), n_bins=n_bins)
    scaled = fit_histogram(scores, y, sample_weight=w * factor, n_bins=n_bins)
    np.testing.assert_array_equal(scaled.edges, plain.edges)
    np.testing.assert_allclose(scaled.rates, plain.rates, rtol=1e-12)


def test_non_monotone_bins_are_pooled() -> None:
    # Three bins with positives 2/3, 0/3, 3/3; base 5/9; m = 1.
    # Smoothed: (2 + 5/9)/4, (0 + 5/9)/4, (3 + 5/9)/4; the first two violate and pool with
    # weights 4 and 4 into (2 + 10/9) / 8.
    scores = [0.1, 0.15, 0.2, 0.4, 0.45, 0.5, 0.7, 0.75, 0.8]
    y = [1, 1, 0, 0, 0, 0, 1, 1, 1]
    params = fit_histogram(scores, y, n_bins=3, prior_strength=1.0)
    assert params.edges.tolist() == [0.0, 0.4, 0.7, 1.0]
    pooled = (2 + 10 / 9) / 8
    np.testing.assert_allclose(params.rates, [pooled, pooled, (3 + 5 / 9) / 4], atol=1e-15)
    smoothed = (np.array([2, 0, 3]) + 5 / 9) / 4
    np.testing.assert_allclose(
        params.rates, isotonic_regression(smoothed, weights=[4, 4, 4]).x, atol=1e-15
    )


def test_tied_scores_collapse_edges_and_leave_no_empty_bin() -> None:
    scores = np.array([0.0] * 50 + [0.3] * 30 + [0.9] * 20)
    y = np.tile([0, 1], 50)
    params = fit_histogram(scores, y, n_bins=10, prior_strength=0.0)
    assert params.edges.tolist() == [0.0, 0.3, 0.9, 1.0]
    assert params.rates.shape == (3,)
    np.testing.assert_allclose(params.rates, [0.5, 0.5, 0.5])


def test_prior_keeps_rates_off_zero_and_one() -> None:
    scores = [0.1, 0.2, 0.3, 0.7, 0.8, 0.9]
    y = [0, 0, 0, 1, 1, 1]
    params = fit_histogram(scores, y, n_bins=2)
    assert 0.0 < params.rates[0] < params.rates[1] < 1.0
    np.testing.assert_allclose(params.rates, [0.5 / 4, 3.5 / 4])


def test_outputs_are_non_decreasing_and_cover_zero_and_one() -> None:
    rng = np.random.default_rng(2)
    scores = rng.uniform(0.0, 1.0, 500)
    y = (rng.uniform(size=scores.size) < 0.5).astype(float)  # pure noise: rates would wiggle
    params = fit_histogram(scores, y, n_bins=20)
    assert np.all(np.diff(params.rates) >= 0.0)
    assert np.all(np.diff(params.edges) > 0.0) and params.edges[0] == 0.0
    out = apply_histogram(params, np.linspace(0.0, 1.0, 1001))
    assert np.all(np.diff(out) >= 0.0)
    assert HistogramParams.kind == "histogram"


def test_inputs_not_mutated_and_bad_options_refused() -> None:
    scores = np.array([0.3, 0.1, 0.2, 0.9])
    y = np.array([1, 0, 0, 1])
    copies = scores.copy(), y.copy()
    fit_histogram(scores, y, n_bins=2)
    np.testing.assert_array_equal(copies[0], scores)
    np.testing.assert_array_equal(copies[1], y)
    with pytest.raises(InputError, match="n_bins must be a positive integer"):
        fit_histogram(scores, y, n_bins=0)
    with pytest.raises(InputError, match="prior_strength must be a non-negative"):
        fit_histogram(scores, y, prior_strength=-1.0)
    with pytest.raises(InputError, match="outside \\[0, 1\\]"):
        fit_histogram([0.1, 1.1], [0, 1])


@settings(max_examples=150, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    n=st.integers(5, 400),
    n_bins=st.integers(1, 25),
    n_cells=st.integers(1, 60),
    distinct=st.integers(2, 400),
    weighted=st.booleans(),
)
def test_points_of_cells_refined_where_edges_fall_give_the_fit_on_the_rows(
    seed: int, n: int, n_bins: int, n_cells: int, distinct: int, weighted: bool
) -> None:
    """fit_histogram_points' contract, as the streaming fit uses it: rows grouped in cells
    (contiguous score ranges), each (cell, class) one point at its smallest score, exact when
    the cell holds one score; the cells of the points it returns are replaced by their rows'
    distinct scores until it returns a fit, which is fit_histogram's on the rows."""
    rng = np.random.default_rng(seed)
    x = np.round(rng.random(n) * distinct) / distinct  # ties on purpose
    y = (rng.random(n) < x).astype(float)
    y[:2] = (0.0, 1.0)  # both classes
    w = rng.integers(1, 4, n).astype(float) if weighted else np.ones(n)
    cuts = np.sort(rng.random(n_cells - 1))
    cell = np.searchsorted(cuts, x, side="right").astype(np.int64)

    def points(keys: np.ndarray) -> tuple[np.ndarray, ...]:
        # one point per (key, class): its weight, smallest score; exact if the key's cell
        # holds one distinct score over both classes
        out = []
        for k in np.unique(keys):
            rows = keys == k
            one = x[rows].min() == x[rows].max()
            for label in (0.0, 1.0):
                sel = rows & (y == label)
                if sel.any():
                    out.append((x[sel].min(), label, w[sel].sum(), one, k))
        out.sort(key=lambda p: (p[0], p[1]))
        return tuple(np.array(c) for c in zip(*out, strict=True))

    keys = cell.copy()
    expected = fit_histogram(x, y, sample_weight=w, n_bins=n_bins)
    for _ in range(3):
        px, py, pw, exact, pkey = points(keys)
        found = fit_histogram_points(px, py, pw, exact.astype(bool), n_bins=n_bins)
        if isinstance(found, HistogramParams):
            np.testing.assert_array_equal(found.edges, expected.edges)
            np.testing.assert_array_equal(found.rates, expected.rates)
            return
        # the cells the edges fell in, read again: each distinct score its own key
        for k in np.unique(pkey[found]):
            rows = keys == k
            keys[rows] = 10_000 + np.searchsorted(np.unique(x), x[rows]) + 1000 * 10_000 * k
    raise AssertionError("one refinement to single scores must be enough")
