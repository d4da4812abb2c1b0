"""Isotonic calibration against scikit-learn's IsotonicRegression and hand-worked cases."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.isotonic import IsotonicRegression
from sklearn.metrics import roc_auc_score

from calib_cli.core.isotonic import (
    IsotonicParams,
    IsotonicUnits,
    apply_isotonic,
    fit_isotonic,
    fit_isotonic_units,
)
from calib_cli.errors import InputError


def _tied_data(n: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Scores on a 0.01 grid (many ties), labels from a noisy increasing rate, some 0 weights."""
    rng = np.random.default_rng(seed)
    scores = np.round(rng.beta(2.0, 3.0, n), 2)
    y = (rng.uniform(size=n) < 0.1 + 0.8 * scores).astype(float)
    weights = rng.integers(0, 4, n).astype(float) * rng.uniform(0.5, 1.5, n)
    return scores, y, weights


@pytest.mark.parametrize("increasing", [True, False])
@pytest.mark.parametrize("weighted", [False, True])
def test_matches_sklearn_with_ties_and_weights(increasing: bool, weighted: bool) -> None:
    scores, y, w = _tied_data(3000, seed=1)
    if not increasing:
        y = 1.0 - y
    weights = w if weighted else None
    params = fit_isotonic(scores, y, sample_weight=weights, increasing=increasing)
    ref = IsotonicRegression(out_of_bounds="clip", increasing=increasing)
    ref.fit(scores, y, sample_weight=weights)
    np.testing.assert_array_equal(params.x_knots, ref.X_thresholds_)
    np.testing.assert_allclose(params.y_knots, ref.y_thresholds_, rtol=0, atol=1e-12)
    new = np.concatenate([np.linspace(0.0, 1.0, 1001), scores])
    ours = apply_isotonic(params, new, clip_eps=False)
    np.testing.assert_allclose(ours, ref.predict(new), rtol=0, atol=1e-9)


def test_hand_worked_pav() -> None:
    # Distinct scores 0.1 .. 0.5; pooled rates 0, 1, 0.5 (two tied rows), 0, 1.
    # PAV: (1, 0.5, 0) pool to 0.5 (weights 1, 2, 1) -> fitted 0, .5, .5, .5, 1.
    scores = [0.1, 0.2, 0.3, 0.3, 0.4, 0.5]
    y = [0, 1, 1, 0, 0, 1]
    params = fit_isotonic(scores, y, eps=0.0)
    assert params.x_knots.tolist() == [0.1, 0.2, 0.4, 0.5]  # 0.3 is interior to its block
    assert params.y_knots.tolist() == [0.0, 0.5, 0.5, 1.0]
    out = apply_isotonic(params, [0.0, 0.15, 0.3, 0.45, 1.0])
    np.testing.assert_allclose(out, [0.0, 0.25, 0.5, 0.75, 1.0], atol=1e-15)


def test_weights_pool_ties_like_repetition() -> None:
    # A tied score with weights 3 (y=1) and 1 (y=0) has pooled rate 0.75.
    params = fit_isotonic([0.2, 0.5, 0.5, 0.8], [0, 1, 0, 1], sample_weight=[1, 3, 1, 1])
    assert params.y_knots.tolist() == [0.0, 0.75, 1.0]


def test_eps_clip_keeps_outputs_inside() -> None:
    scores, y, w = _tied_data(500, seed=2)
    params = fit_isotonic(scores, y, sample_weight=w, eps=1e-3)
    out = apply_isotonic(params, np.linspace(0.0, 1.0, 101))
    assert out.min() >= 1e-3 and out.max() <= 1.0 - 1e-3
    raw = apply_isotonic(params, np.linspace(0.0, 1.0, 101), clip_eps=False)
    np.testing.assert_array_equal(np.clip(raw, 1e-3, 1 - 1e-3), out)


@pytest.mark.parametrize("increasing", [True, False])
def test_strict_keeps_auc_exactly(increasing: bool) -> None:
    rng = np.random.default_rng(3)
    scores, y, w = _tied_data(2000, seed=3)
    if not increasing:
        y = 1.0 - y
    params = fit_isotonic(scores, y, sample_weight=w, strict=True, increasing=increasing)
    assert params.strict and np.all(np.diff(params.x_knots) > 0.0)
    steps = np.diff(params.y_knots)
    assert np.all(steps > 0.0) if increasing else np.all(steps < 0.0)
    out = apply_isotonic(params, scores)
    assert out.min() >= params.eps and out.max() <= 1.0 - params.eps
    sign = 1.0 if increasing else -1.0
    auc_before = roc_auc_score(y, sign * scores, sample_weight=w)
    assert roc_auc_score(y, out, sample_weight=w) == auc_before
    # Fresh scores anywhere in [0, 1], with ties and new values, keep their ranking too.
    fresh = np.concatenate([rng.uniform(0, 1, 3000), np.round(rng.uniform(0, 1, 1000), 3)])
    labels = (rng.uniform(size=fresh.size) < 0.5).astype(float)
    mapped = apply_isotonic(params, fresh)
    assert roc_auc_score(labels, mapped) == roc_auc_score(labels, sign * fresh)
    order = np.argsort(fresh)
    assert np.all(sign * np.diff(mapped[order])[np.diff(fresh[order]) > 0] > 0.0)


def test_default_map_can_tie_but_strict_does_not() -> None:
    scores = np.array([0.1, 0.2, 0.3, 0.4, 0.5, 0.6])
    y = np.array([0, 1, 0, 0, 1, 1])
    plain = apply_isotonic(fit_isotonic(scores, y), scores)
    strict = apply_isotonic(fit_isotonic(scores, y, strict=True), scores)
    assert np.unique(plain).size < scores.size
    assert np.all(np.diff(strict) > 0.0)


def test_strict_knots_are_block_centres() -> None:
    # Blocks: {0.1: y=0} and {0.3, 0.5: rate 0.5, 0.5} -> centres 0.1 and 0.4 (equal weights).
    params = fit_isotonic([0.1, 0.3, 0.3, 0.5, 0.5], [0, 1, 0, 1, 0], strict=True, eps=1e-3)
    assert params.x_knots.tolist() == pytest.approx([0.0, 0.1, 0.4, 1.0], abs=1e-15)
    eps = 1e-3
    raw = np.array([0.0 - eps, 0.0, 0.5, 0.5 + eps])

    def squeeze(v: np.ndarray) -> np.ndarray:
        return eps + (1 - 2 * eps) * (v + eps) / (1 + 2 * eps)

    np.testing.assert_allclose(params.y_knots, squeeze(raw), atol=1e-15)
    assert params.y_knots[0] == pytest.approx(eps)


def test_zero_weight_rows_add_no_knots() -> None:
    with_zero = fit_isotonic([0.1, 0.2, 0.3, 0.9], [0, 1, 1, 0], sample_weight=[1, 1, 1, 0])
    without = fit_isotonic([0.1, 0.2, 0.3], [0, 1, 1])
    np.testing.assert_array_equal(with_zero.x_knots, without.x_knots)
    np.testing.assert_array_equal(with_zero.y_knots, without.y_knots)


def test_single_distinct_score_is_constant() -> None:
    params = fit_isotonic([0.4, 0.4, 0.4], [0, 1, 1])
    assert apply_isotonic(params, [0.0, 0.4, 1.0]).tolist() == pytest.approx([2 / 3] * 3)


def test_inputs_not_mutated() -> None:
    scores, y, w = _tied_data(200, seed=4)
    copies = scores.copy(), y.copy(), w.copy()
    params = fit_isotonic(scores, y, sample_weight=w, strict=True)
    apply_isotonic(params, scores)
    for before, after in zip(copies, (scores, y, w), strict=True):
        np.testing.assert_array_equal(before, after)
    assert IsotonicParams.kind == "isotonic"


def test_bad_options_are_refused() -> None:
    with pytest.raises(InputError, match="eps must be in"):
        fit_isotonic([0.2, 0.8], [0, 1], eps=0.5)
    with pytest.raises(InputError, match="eps must be positive when strict"):
        fit_isotonic([0.2, 0.8], [0, 1], eps=0.0, strict=True)
    with pytest.raises(InputError, match="outside \\[0, 1\\]"):
        fit_isotonic([0.2, 2.0], [0, 1])
    params = fit_isotonic([0.2, 0.8], [0, 1])
    with pytest.raises(InputError, match="outside \\[0, 1\\]"):
        apply_isotonic(params, [-0.1])


def test_strict_map_does_not_tie_blocks_whose_values_differ_by_rounding() -> None:
    """Found by Hypothesis: two PAV blocks of rate 0.5 (one computed as 0.4999999999999999)
    became two knots at the same height, tying the scores between them and moving the AUC."""
    from sklearn.metrics import roc_auc_score

    s = np.array(
        [
            0.0,
            0.015,
            0.0,
            0.005,
            0.0,
            0.005,
            0.005,
            0.0,
            0.005,
            0.005,
            0.0,
            0.0,
            0.01,
            0.0,
            0.0,
            0.015,
            0.0,
            0.0,
            0.005,
            0.075,
        ]
        + [0.0] * 5
        + [0.005]
        + [0.0] * 10
        + [0.005, 0.0, 0.0, 0.005]
    )
    y = np.zeros(40)
    y[[1, 6, 8, 9, 15, 25, 36]] = 1.0
    w = np.ones(40)
    w[[3, 5, 8, 9, 12, 18, 19, 36]] = 3.0
    w[[1, 6, 25]] = 2.0
    params = fit_isotonic(s, y, sample_weight=w, strict=True)
    out = apply_isotonic(params, s)
    assert roc_auc_score(y, out, sample_weight=w) == roc_auc_score(y, s, sample_weight=w)
    assert np.all(np.diff(apply_isotonic(params, np.array([0.0, 0.005, 0.01, 0.015, 0.075]))) > 0)


def _units(x: np.ndarray, y: np.ndarray, w: np.ndarray, group: np.ndarray) -> IsotonicUnits:
    """One unit per value of ``group`` (groups are contiguous in score order)."""
    keys, index = np.unique(group, return_inverse=True)
    low = np.full(keys.size, np.inf)
    high = np.full(keys.size, -np.inf)
    np.minimum.at(low, index, x)
    np.maximum.at(high, index, x)
    return IsotonicUnits(
        low=low,
        high=high,
        weight=np.bincount(index, weights=w).astype(np.float64),
        positive_weight=np.bincount(index, weights=w * y).astype(np.float64),
        score_sum=np.bincount(index, weights=w * x).astype(np.float64),
    )


def _fit_by_refinement(
    x: np.ndarray, y: np.ndarray, w: np.ndarray, cell: np.ndarray, **options: object
) -> tuple[IsotonicParams, int]:
    """What the streaming fit does: units are cells; open cells are resolved into their
    distinct scores; fit again until no unit is open. Returns the fit and the rounds."""
    resolved = np.zeros(cell.size, dtype=bool)
    for rounds in range(1, 50):
        # a resolved row's unit is its distinct score (after every cell: keys stay ordered)
        key = np.where(resolved, x, -1.0)
        units_key = np.column_stack((cell, key))
        _, group = np.unique(units_key, axis=0, return_inverse=True)
        group = group.reshape(-1)
        units = _units(x, y, w, group)
        params, open_units = fit_isotonic_units(units, **options)  # type: ignore[arg-type]
        if not open_units.any():
            return params, rounds
        keys = np.unique(units_key, axis=0)
        resolved |= np.isin(cell, keys[open_units, 0])
    raise AssertionError("the refinement did not close")


@settings(max_examples=60, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    n=st.integers(2, 400),
    n_distinct=st.integers(1, 60),
    cell_width=st.integers(1, 40),
    weighted=st.booleans(),
    strict=st.booleans(),
)
def test_fit_on_certified_units_equals_the_fit_on_rows(
    seed: int, n: int, n_distinct: int, cell_width: int, weighted: bool, strict: bool
) -> None:
    """Cells held at one value, refined where the certificate fails, give the knots of the
    fit on the rows (ties, flat runs, weights, strict and sklearn knots)."""
    rng = np.random.default_rng(seed)
    levels = np.sort(rng.random(n_distinct))
    x = levels[rng.integers(0, n_distinct, n)]
    y = (rng.random(n) < x).astype(np.float64)
    if y.min() == y.max():
        y[0] = 1.0 - y[0]
    w = rng.integers(1, 4, n).astype(np.float64) if weighted else np.ones(n)
    # contiguous cells of about cell_width distinct scores each
    cell = np.searchsorted(levels, x) // cell_width
    exact = fit_isotonic(x, y, sample_weight=w, strict=strict)
    fitted, _ = _fit_by_refinement(x, y, w, cell, strict=strict)
    np.testing.assert_allclose(fitted.x_knots, exact.x_knots, rtol=0, atol=1e-12)
    np.testing.assert_allclose(fitted.y_knots, exact.y_knots, rtol=0, atol=1e-12)


def test_units_that_pass_the_certificate_are_not_split_by_the_exact_fit() -> None:
    """A sample whose cells are finer than the fit's blocks (as a streaming fit's grid is on
    millions of rows): most cells are certified in the first round (only cells near block
    ends are resolved), and two rounds give the exact fit."""
    rng = np.random.default_rng(3)
    n = 20_000
    x = np.round(rng.beta(1.2, 6.0, n), 5)
    y = (rng.random(n) < x).astype(np.float64)
    cell = np.floor(x * 4000).astype(np.int64)
    units = _units(x, y, np.ones(n), np.unique(cell, return_inverse=True)[1].reshape(-1))
    _, open_units = fit_isotonic_units(units)
    assert 0 < open_units.sum() < 0.1 * open_units.size
    fitted, rounds = _fit_by_refinement(x, y, np.ones(n), cell)
    exact = fit_isotonic(x, y)
    np.testing.assert_allclose(fitted.x_knots, exact.x_knots, rtol=0, atol=1e-12)
    np.testing.assert_allclose(fitted.y_knots, exact.y_knots, rtol=0, atol=1e-12)
    assert rounds == 2


def test_fit_isotonic_units_refuses_overlapping_or_empty_units() -> None:
    one = np.array([1.0])
    with pytest.raises(InputError, match="positive weights"):
        fit_isotonic_units(IsotonicUnits(one, one, np.zeros(1), np.zeros(1), np.zeros(1)))
    with pytest.raises(InputError, match="must not overlap"):
        fit_isotonic_units(
            IsotonicUnits(
                np.array([0.1, 0.2]), np.array([0.3, 0.4]), np.ones(2), np.ones(2), np.ones(2)
            )
        )
