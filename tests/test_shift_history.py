"""calib_cli.core.shift_history: late labels, rolling rates, blends and conformal widths."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from calib_cli.core.shift_history import (
    CANDIDATE_NAMES,
    blend_weights,
    conformal_halfwidth,
    conformal_min_errors,
    history_blend,
    history_candidates,
    history_schedule,
    last_labelled,
    residual_corrected,
    rolling_rate,
)
from calib_cli.errors import InputError


def test_last_labelled_and_delay_checks() -> None:
    assert last_labelled(4, label_delay=1).tolist() == [-1, 0, 1, 2]
    assert last_labelled(3, label_delay=5).tolist() == [-1, -1, -1]
    with pytest.raises(InputError, match="label_delay must be at least 1"):
        last_labelled(3, label_delay=0)


def test_rolling_rate_matches_a_direct_loop() -> None:
    rates = np.random.default_rng(0).random(12)
    got = rolling_rate(rates, label_delay=2, window=4, fallback=0.3)
    for t in range(12):
        seen = [rates[s] for s in range(12) if s <= t - 2][-4:]
        assert got[t] == pytest.approx(np.mean(seen) if seen else 0.3, abs=1e-15)


def test_residual_corrected_by_hand() -> None:
    # batch 2 (K=1, W=2): 0.30 + mean(0.25 - 0.20, 0.10 - 0.20) = 0.30 - 0.025
    got = residual_corrected([0.2, 0.2, 0.3], [0.25, 0.1, 0.9], label_delay=1, window=2)
    assert got.tolist() == pytest.approx([0.2, 0.25, 0.275], abs=1e-15)
    # clipped to [0, 1]
    assert residual_corrected([0.9, 0.9], [1.0, 0.0], label_delay=1, window=1)[1] == 1.0


def test_history_candidates_columns_by_hand() -> None:
    c = history_candidates(
        [0.3, 0.4, 0.5], [0.2, 0.25, 0.3], [0.4, 0.1, 0.6], reference_rate=0.2, label_delay=2
    )
    assert c.shape == (3, len(CANDIDATE_NAMES))
    # batches 0 and 1 have no label yet: rolling = reference rate, corrected = pcc
    assert c[1].tolist() == pytest.approx([0.4, 0.25, 0.2, 0.2, 0.2, 0.25, 0.25])
    # batch 2 sees batch 0: rolling 0.4, pcc corrected by 0.4 - 0.2
    assert c[2].tolist() == pytest.approx([0.5, 0.3, 0.2, 0.4, 0.4, 0.5, 0.5])


def test_rates_must_be_rates() -> None:
    with pytest.raises(InputError, match=r"rates has 1 value that .* \(first at batch 2: 1.5\)"):
        rolling_rate([0.1, 1.5], label_delay=1, window=1, fallback=0.0)
    with pytest.raises(InputError, match="one value per batch"):
        history_candidates([0.1], [0.1, 0.2], [0.1], reference_rate=0.1, label_delay=1)


def test_blend_weights_inverse_mean_squared_error() -> None:
    # mean e^2: 0.01, 0.04, 0.16 -> 1/e^2: 100, 25, 6.25 -> 16/21, 4/21, 1/21
    w = blend_weights([[0.1, -0.2, 0.4], [-0.1, 0.2, -0.4]])
    assert w.tolist() == pytest.approx([16 / 21, 4 / 21, 1 / 21], rel=1e-14)
    # mean e^2 of (0.1, 0.3) is 0.05, of (0.2, 0.2) 0.04: squares, not absolute values
    assert blend_weights([[0.1, 0.2], [0.3, 0.2]]).tolist() == pytest.approx([4 / 9, 5 / 9])
    assert blend_weights([[0.0, 0.1, 0.0]]).tolist() == [0.5, 0.0, 0.5]


@pytest.mark.parametrize("n", [19, 20, 39, 100])
def test_conformal_halfwidth_is_the_order_statistic(n: int) -> None:
    r = np.random.default_rng(n).random(n)
    rank = math.ceil((n + 1) * 0.95 - 1e-9)  # 19 -> 19, 20 -> 20, 39 -> 38, 100 -> 96
    assert rank == {19: 19, 20: 20, 39: 38, 100: 96}[n]
    assert conformal_halfwidth(-r, level=0.95) == np.sort(r)[rank - 1]
    assert conformal_halfwidth(r[:18], level=0.95) == math.inf


@pytest.mark.parametrize("level", [0.5, 0.8, 0.9, 0.95, 0.99])
def test_conformal_min_errors_is_where_the_width_turns_finite(level: float) -> None:
    n = conformal_min_errors(level)
    assert math.isfinite(conformal_halfwidth(np.ones(n), level=level))
    assert conformal_halfwidth(np.ones(n - 1), level=level) == math.inf


def test_conformal_halfwidth_covers_exchangeable_errors() -> None:
    # n = 19 continuous errors at 95%: a new error is below the largest with probability
    # exactly 19/20; 4000 draws give a standard error of 0.0034
    rng = np.random.default_rng(1)
    hits = [
        abs(rng.normal()) <= conformal_halfwidth(rng.normal(size=19), level=0.95)
        for _ in range(4000)
    ]
    assert abs(np.mean(hits) - 0.95) < 4 * math.sqrt(0.95 * 0.05 / 4000)


def test_history_blend_learns_the_right_candidate() -> None:
    truth = np.linspace(0.1, 0.5, 30)
    candidates = np.column_stack([truth + 0.05, truth - 0.2 * (truth - 0.3), np.full(30, 0.3)])
    blend = history_blend(candidates, truth, label_delay=2, min_history=3, fallback=2)
    assert blend.weights[:4].tolist() == [[0.0, 0.0, 1.0]] * 4  # fewer than 3 labelled
    assert blend.n_history.tolist() == [0, 0, *range(1, 29)]
    # the last batch learns from batches 0..27; their mean squared error: 0.05^2, 0.04 d, d
    d = np.mean(np.square(truth[:28] - 0.3))
    inverse = np.array([1 / 0.05**2, 1 / (0.04 * d), 1 / d])
    assert blend.weights[-1].tolist() == pytest.approx((inverse / inverse.sum()).tolist())
    assert blend.prevalence[-1] == pytest.approx(candidates[-1] @ blend.weights[-1])
    # the interval: [0, 1] until 19 past errors (batch 20 with K = 2), then conformal
    assert (blend.ci_low[:20] == 0.0).all() and (blend.ci_high[:20] == 1.0).all()
    assert blend.halfwidth[19] == math.inf and math.isfinite(blend.halfwidth[20])


@settings(max_examples=40, deadline=None)
@given(
    data=st.data(),
    n=st.integers(min_value=3, max_value=30),
    delay=st.integers(min_value=1, max_value=4),
)
def test_labels_of_a_batch_never_reach_its_own_estimate(
    data: st.DataObject, n: int, delay: int
) -> None:
    rates = np.array(data.draw(st.lists(st.floats(0, 1), min_size=n, max_size=n)))
    shift = np.array(data.draw(st.lists(st.floats(0, 1), min_size=n, max_size=n)))
    pcc = np.array(data.draw(st.lists(st.floats(0, 1), min_size=n, max_size=n)))
    t = data.draw(st.integers(min_value=0, max_value=n - 1))
    poison = rates.copy()
    poison[max(t - delay + 1, 0) :] = data.draw(
        st.lists(st.floats(0, 1), min_size=n - max(t - delay + 1, 0), max_size=n)
    )[: n - max(t - delay + 1, 0)]

    def run(y: np.ndarray) -> tuple[float, float, float, list[float]]:
        c = history_candidates(shift, pcc, y, reference_rate=0.25, label_delay=delay)
        b = history_blend(c, y, label_delay=delay, min_history=1, level=0.8)
        return b.prevalence[t], b.ci_low[t], b.ci_high[t], b.weights[t].tolist()

    assert run(rates) == run(poison)


def test_history_blend_refuses_bad_shapes() -> None:
    with pytest.raises(InputError, match="candidates has 2 batches and rates 3"):
        history_blend(np.zeros((2, 1)), [0.1, 0.2, 0.3], label_delay=1)
    with pytest.raises(InputError, match="level must be in"):
        conformal_halfwidth([0.1], level=1.0)


def test_history_schedule_and_unlabelled_batches_are_never_read() -> None:
    """--history: 6 labelled past batches then 2 new ones; the new ones' rates (unknown)
    may hold anything without moving any figure, and both see the whole history."""
    schedule = history_schedule(6, 2, label_delay=2)
    assert schedule.tolist() == [-1, -1, 0, 1, 2, 3, 5, 5]
    rng = np.random.default_rng(4)
    shift, pcc, rates = rng.random(8), rng.random(8), rng.random(8)
    runs = []
    for unknown in (0.0, 1.0):
        y = np.concatenate([rates[:6], [unknown, unknown]])
        c = history_candidates(shift, pcc, y, reference_rate=0.3, last=schedule)
        runs.append(history_blend(c, y, last=schedule, min_history=1))
    assert runs[0].prevalence.tolist() == runs[1].prevalence.tolist()
    assert runs[0].n_history.tolist() == [0, 0, 1, 2, 3, 4, 6, 6]
    # the new batches' rolling mean of the last 4 labelled batches: batches 2..5
    c = history_candidates(shift, pcc, np.r_[rates[:6], 0, 0], reference_rate=0.3, last=schedule)
    assert c[7, CANDIDATE_NAMES.index("rolling_4")] == pytest.approx(np.mean(rates[2:6]))


def test_schedule_must_not_reach_a_batch_s_own_label() -> None:
    with pytest.raises(InputError, match=r"last\[2\] = 2: batch 2 may only use"):
        rolling_rate([0.1, 0.2, 0.3], window=1, fallback=0.0, last=np.array([-1, 0, 2]))
    with pytest.raises(InputError, match="give label_delay or last"):
        rolling_rate([0.1], window=1, fallback=0.0)
