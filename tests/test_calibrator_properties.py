"""Invariants every fitted calibrator must keep (Hypothesis), and the over/under-confidence fix.

For each method: a row of weight k equals k copies of the row; row order does not matter;
outputs are monotone in the score; inputs are not mutated; fitting runs no Python loop over
rows. Isotonic with ``strict=True`` keeps AUC exactly. On over- and under-confident scores every
method lowers held-out log loss.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from functools import partial
from types import FrameType
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.special import expit, logit
from sklearn.metrics import log_loss, roc_auc_score

from calib_cli.core.isotonic import apply_isotonic, fit_isotonic
from calib_cli.core.platt import PlattParams
from calib_cli.core.selection import apply_calibrator, fit_calibrator

METHODS = ("platt", "isotonic", "beta", "histogram")
GRID = np.linspace(0.0, 1.0, 201)
PROPERTY_SETTINGS = settings(max_examples=40, deadline=None)

Data = tuple[np.ndarray, np.ndarray, np.ndarray]


@st.composite
def datasets(draw: st.DrawFn) -> Data:
    """Scores on a 1/200 grid (ties likely), labels with both classes, integer weights 1..3."""
    n = draw(st.integers(min_value=4, max_value=40))
    scores = draw(st.lists(st.integers(0, 200), min_size=n, max_size=n))
    labels = draw(st.lists(st.integers(0, 1), min_size=n - 2, max_size=n - 2))
    weights = draw(st.lists(st.integers(1, 3), min_size=n, max_size=n))
    return (
        np.array(scores, dtype=float) / 200.0,
        np.array([0, 1, *labels], dtype=float),
        np.array(weights, dtype=float),
    )


def _fit(method: str, scores: np.ndarray, y: np.ndarray, w: np.ndarray | None) -> Any:
    return fit_calibrator(method, scores, y, sample_weight=w)  # type: ignore[arg-type]


def _compare_points(method: str, scores: np.ndarray) -> np.ndarray:
    # Beta has three parameters: with fewer than three distinct scores the coefficients are
    # not unique, but the fitted probabilities at the data are. Elsewhere compare on a grid.
    return np.unique(scores) if method == "beta" else np.concatenate([GRID, scores])


def _tolerance(method: str) -> float:
    return 1e-12 if method in ("isotonic", "histogram") else 1e-7


@pytest.mark.parametrize("method", METHODS)
@PROPERTY_SETTINGS
@given(data=datasets())
def test_weights_equal_repetition(method: str, data: Data) -> None:
    scores, y, w = data
    counts = w.astype(int)
    weighted = _fit(method, scores, y, w)
    repeated = _fit(method, np.repeat(scores, counts), np.repeat(y, counts), None)
    points = _compare_points(method, scores)
    np.testing.assert_allclose(
        apply_calibrator(weighted, points),
        apply_calibrator(repeated, points),
        rtol=0,
        atol=_tolerance(method),
    )


@pytest.mark.parametrize("method", METHODS)
@PROPERTY_SETTINGS
@given(data=datasets(), seed=st.integers(0, 2**32 - 1))
def test_permutation_invariance(method: str, data: Data, seed: int) -> None:
    scores, y, w = data
    perm = np.random.default_rng(seed).permutation(scores.size)
    original = _fit(method, scores, y, w)
    permuted = _fit(method, scores[perm], y[perm], w[perm])
    points = _compare_points(method, scores)
    np.testing.assert_allclose(
        apply_calibrator(original, points),
        apply_calibrator(permuted, points),
        rtol=0,
        atol=_tolerance(method),
    )


@pytest.mark.parametrize("method", METHODS)
@PROPERTY_SETTINGS
@given(data=datasets())
def test_outputs_are_monotone(method: str, data: Data) -> None:
    scores, y, w = data
    params = _fit(method, scores, y, w)
    points = np.sort(np.concatenate([GRID, scores]))
    out = apply_calibrator(params, points)
    assert np.all((out >= 0.0) & (out <= 1.0))
    steps = np.diff(out)
    if isinstance(params, PlattParams) and params.slope < 0.0:
        # Platt's slope is unconstrained: negative only when the scores rank negatives higher
        # on (weighted) average; the map is then monotone decreasing.
        x = logit(np.clip(scores, 1e-12, 1 - 1e-12))
        mean_pos = np.average(x[y == 1], weights=w[y == 1])
        mean_neg = np.average(x[y == 0], weights=w[y == 0])
        assert mean_pos < mean_neg
        assert np.all(steps <= 0.0)
    else:
        assert np.all(steps >= 0.0)


@pytest.mark.parametrize("method", METHODS)
@settings(max_examples=15, deadline=None)
@given(data=datasets())
def test_inputs_not_mutated(method: str, data: Data) -> None:
    scores, y, w = data
    copies = [a.copy() for a in data]
    params = _fit(method, scores, y, w)
    apply_calibrator(params, scores)
    for before, after in zip(copies, (scores, y, w), strict=True):
        np.testing.assert_array_equal(before, after)


@PROPERTY_SETTINGS
@given(data=datasets(), new=st.lists(st.integers(0, 1000), min_size=2, max_size=30))
def test_strict_isotonic_keeps_auc_exactly(data: Data, new: list[int]) -> None:
    scores, y, w = data
    params = fit_isotonic(scores, y, sample_weight=w, strict=True)
    out = apply_isotonic(params, scores)
    assert roc_auc_score(y, out, sample_weight=w) == roc_auc_score(y, scores, sample_weight=w)
    fresh = np.array(new, dtype=float) / 1000.0
    mapped = apply_isotonic(params, fresh)
    order = np.argsort(fresh)
    distinct = np.diff(fresh[order]) > 0.0
    assert np.all(np.diff(mapped[order])[distinct] > 0.0)
    assert np.all(np.diff(mapped[order])[~distinct] == 0.0)


def _confidence_data(power: float, seed: int) -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(seed)
    true_p = expit(rng.normal(-0.5, 1.5, 40_000))
    y = (rng.uniform(size=true_p.size) < true_p).astype(float)
    reported = expit(power * logit(true_p))
    return reported[:20_000], y[:20_000], reported[20_000:], y[20_000:]


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("power", [2.0, 0.5], ids=["over-confident", "under-confident"])
def test_held_out_log_loss_improves(method: str, power: float) -> None:
    fit_scores, fit_y, test_scores, test_y = _confidence_data(power, seed=11)
    params = _fit(method, fit_scores, fit_y, None)
    before = log_loss(test_y, test_scores)
    after = log_loss(test_y, apply_calibrator(params, test_scores))
    assert after < before - 0.005


def _python_lines_executed(call: Callable[[], object]) -> int:
    """Number of Python source lines executed by ``call`` (any module), via ``sys.settrace``."""
    count = 0

    def local(frame: FrameType, event: str, arg: object) -> Any:
        nonlocal count
        if event == "line":
            count += 1
        return local

    def tracer(frame: FrameType, event: str, arg: object) -> Any:
        return local if event == "call" else None

    previous = sys.gettrace()
    sys.settrace(tracer)
    try:
        call()
    finally:
        sys.settrace(previous)
    return count


@pytest.mark.parametrize("method", METHODS)
def test_no_python_loop_over_rows(method: str) -> None:
    # A 100-fold larger fit executes few more Python lines: all per-row work is in NumPy and
    # SciPy (so 10 million rows cost seconds; a row loop would add at least a line a row).
    # The elementary functions' loops over blocks of 32,768 values add about 30 lines a block
    # and call: here about one line per 30 rows (1,200 lines per block a fit), far below
    # the line a row of a loop over rows.
    lines = []
    for n in (1_000, 100_000):
        rng = np.random.default_rng(12)
        p = rng.uniform(0.0, 1.0, n)
        y = (rng.uniform(size=n) < p).astype(float)
        lines.append(_python_lines_executed(partial(_fit, method, p, y, None)))
    assert lines[1] - lines[0] <= 0.1 * (100_000 - 1_000)
