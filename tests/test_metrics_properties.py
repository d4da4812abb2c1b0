"""Invariants of calib_cli.core.metrics, checked with Hypothesis.

* permutation invariance of every figure of the summary;
* frequency weights: a row of integer weight k equals the row repeated k times, for every
  field of the summary (except the row counts ``n`` and the bins' ``n_rows``), bootstrap
  intervals included (same seed);
* the bin table adds up to the totals;
* inputs are not mutated;
* a few order relations (ECE <= MCE, AUC inside its interval, ...).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from calib_cli.core.metrics import Bin, ReliabilitySummary, reliability_summary
from calib_cli.types import BinStrategy

GRID = [0.0, 0.05, 0.1, 0.2, 0.25, 0.3, 0.5, 0.7, 0.9, 1.0]


@dataclass(frozen=True)
class Case:
    y: np.ndarray
    p: np.ndarray
    w: np.ndarray
    n_bins: int
    strategy: BinStrategy


@st.composite
def cases(draw: st.DrawFn) -> Case:
    n = draw(st.integers(1, 25))
    # Half the time scores on a grid: many ties, scores on bin edges, 0 and 1.
    grid = draw(st.booleans())
    scores = st.sampled_from(GRID) if grid else st.floats(0.0, 1.0, allow_nan=False)
    p = np.array(draw(st.lists(scores, min_size=n, max_size=n)), dtype=np.float64)
    y = np.array(draw(st.lists(st.integers(0, 1), min_size=n, max_size=n)), dtype=np.int64)
    w = np.array(draw(st.lists(st.integers(0, 3), min_size=n, max_size=n)), dtype=np.float64)
    w[draw(st.integers(0, n - 1))] = draw(st.integers(1, 3))  # some weight somewhere
    strategy: BinStrategy = draw(st.sampled_from(["uniform", "quantile"]))
    return Case(y=y, p=p, w=w, n_bins=draw(st.integers(1, 8)), strategy=strategy)


def _summary(y: np.ndarray, p: np.ndarray, w: np.ndarray | None, case: Case) -> ReliabilitySummary:
    return reliability_summary(
        y,
        p,
        sample_weight=w,
        n_bins=case.n_bins,
        strategy=case.strategy,
        n_bootstrap=20,
        rng=np.random.default_rng(7),
    )


def _close(a: object, b: object, name: str) -> None:
    if isinstance(a, float) and isinstance(b, float):
        both_nan = math.isnan(a) and math.isnan(b)
        assert both_nan or math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9), (name, a, b)
    elif isinstance(a, tuple) and isinstance(b, tuple):
        assert len(a) == len(b), name
        for u, v in zip(a, b, strict=True):
            _close(u, v, name)
    elif isinstance(a, Bin) and isinstance(b, Bin):
        for field in dataclasses.fields(Bin):
            if field.name != "n_rows":
                _close(getattr(a, field.name), getattr(b, field.name), f"{name}.{field.name}")
    else:
        assert a == b, (name, a, b)


def _assert_same(a: ReliabilitySummary, b: ReliabilitySummary, *, skip: tuple[str, ...]) -> None:
    for field in dataclasses.fields(ReliabilitySummary):
        if field.name not in skip:
            _close(getattr(a, field.name), getattr(b, field.name), field.name)


@settings(max_examples=80, deadline=None)
@given(case=cases(), seed=st.integers(0, 2**32 - 1))
def test_permutation_invariance(case: Case, seed: int) -> None:
    order = np.random.default_rng(seed).permutation(case.y.size)
    a = _summary(case.y, case.p, case.w, case)
    b = _summary(case.y[order], case.p[order], case.w[order], case)
    _assert_same(a, b, skip=())
    assert [x.n_rows for x in a.bins] == [x.n_rows for x in b.bins]


@settings(max_examples=80, deadline=None)
@given(case=cases())
def test_integer_weight_equals_repeated_rows(case: Case) -> None:
    reps = case.w.astype(np.int64)
    weighted = _summary(case.y, case.p, case.w, case)
    repeated = _summary(np.repeat(case.y, reps), np.repeat(case.p, reps), None, case)
    _assert_same(weighted, repeated, skip=("n",))
    assert weighted.n == case.y.size and repeated.n == int(reps.sum())
    assert weighted.weight_total == repeated.weight_total == float(reps.sum())


@settings(max_examples=80, deadline=None)
@given(case=cases())
def test_bins_add_up_to_the_totals(case: Case) -> None:
    s = _summary(case.y, case.p, case.w, case)
    assert sum(b.n_rows for b in s.bins) == s.n == case.y.size
    assert math.isclose(sum(b.count for b in s.bins), s.weight_total, rel_tol=1e-12)
    positives = sum(b.count * b.observed_rate for b in s.bins if b.count > 0)
    assert math.isclose(positives, s.positives, rel_tol=1e-9, abs_tol=1e-12)
    assert s.n_bins == len(s.bins) <= case.n_bins
    for lower, upper in zip(s.bins[:-1], s.bins[1:], strict=True):
        assert lower.upper == upper.lower and lower.lower <= lower.upper


@settings(max_examples=60, deadline=None)
@given(case=cases())
def test_inputs_are_not_mutated(case: Case) -> None:
    y, p, w = case.y.copy(), case.p.copy(), case.w.copy()
    y_list, p_list = case.y.tolist(), case.p.tolist()
    _summary(case.y, case.p, case.w, case)
    reliability_summary(y_list, p_list, n_bins=case.n_bins, strategy=case.strategy)
    np.testing.assert_array_equal(case.y, y)
    np.testing.assert_array_equal(case.p, p)
    np.testing.assert_array_equal(case.w, w)
    assert y_list == case.y.tolist() and p_list == case.p.tolist()


@settings(max_examples=80, deadline=None)
@given(case=cases())
def test_order_relations(case: Case) -> None:
    s = _summary(case.y, case.p, case.w, case)
    assert 0.0 <= s.ece <= s.mce + 1e-12 <= 1.0 + 1e-12
    assert 0.0 <= s.ece_debiased <= 1.0
    assert 0.0 <= s.brier <= 1.0 and s.log_loss >= 0.0
    assert s.ece_ci is not None and s.ece_ci[0] <= s.ece_ci[1]
    assert abs(s.brier_reliability - s.brier_resolution + s.brier_uncertainty - s.brier) <= 1.0
    if math.isnan(s.auc):
        assert s.positives == 0.0 or s.positives == s.weight_total
    else:
        assert 0.0 <= s.auc <= 1.0 and math.isclose(s.gini, 2 * s.auc - 1)
        if not math.isnan(s.auc_ci[0]):
            assert s.auc_ci[0] <= s.auc + 1e-12 and s.auc - 1e-12 <= s.auc_ci[1]
    for b in s.bins:
        if b.count > 0:
            assert b.observed_ci_low <= b.observed_rate + 1e-12
            assert b.observed_rate - 1e-12 <= b.observed_ci_high
            assert b.lower - 1e-12 <= b.mean_score <= b.upper + 1e-12
