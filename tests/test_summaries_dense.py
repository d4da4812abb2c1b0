"""Dense refinement (one pass, per-cell depths) against the in-memory and Polars refinements."""

from __future__ import annotations

from dataclasses import fields
from typing import Any

import numpy as np
import polars as pl
import pytest
from sklearn.metrics import roc_auc_score

from calib_cli.errors import InputError
from calib_cli.summaries import (
    RefinementLevel,
    ScoreSummary,
    reliability_from_summary,
    summarize_arrays,
    summarize_refinement,
)
from calib_cli.summaries.dense import DenseBatch, refine_batches
from calib_cli.summaries.figures import plan_dense_refinement
from calib_cli.summaries.scan import (
    dense_batches,
    refine_dense_lazy,
    refinement_level_lazy,
    summarize_lazy,
)

EXACT = ("cell", "bin", "label", "group", "n_rows", "n_rows_weighted")
MIN_MAX = ("weight_min", "score_min", "score_max")
SUMS = (
    "weight",
    "weight_sq",
    "score_sum",
    "score_sq_sum",
    "complement_sum",
    "complement_sq_sum",
    "log_loss_sum",
    "logit_sum",
    "spiegelhalter_num",
    "spiegelhalter_var",
)


def _ties_and_ends(seed: int, n: int = 20_000) -> dict[str, Any]:
    """Near-ties, exact ties, scores 0, 1/2 and 1, zero and integer weights."""
    rng = np.random.default_rng(seed)
    base = rng.choice([1e-5, 3e-4, 0.02, 0.3, 0.5, 0.9, 1 - 1e-6], n)
    p = np.clip(base * (1.0 + rng.normal(0.0, 1e-5, n)), 0.0, 1.0)
    p[rng.random(n) < 0.05] = 0.0
    p[rng.random(n) < 0.05] = 1.0
    p[rng.random(n) < 0.02] = 0.5
    tied = rng.random(n) < 0.2
    p[tied] = rng.choice([0.123, 0.1230000000000001, 0.77], int(tied.sum()))
    y = (rng.random(n) < np.clip(p, 1e-4, 1 - 1e-4)).astype(np.int8)
    return {"y": y, "p": p, "w": rng.integers(0, 3, n).astype(float)}


def _rare(seed: int, n: int = 40_000) -> dict[str, Any]:
    """Continuous scores, 20 positives."""
    rng = np.random.default_rng(seed)
    p = rng.beta(0.5, 50.0, n)
    y = np.zeros(n, dtype=np.int8)
    y[rng.choice(n, 20, replace=False)] = 1
    return {"y": y, "p": p, "w": None}


def _smooth(seed: int, n: int = 40_000) -> dict[str, Any]:
    """A calibrated logit-normal model, real weights."""
    rng = np.random.default_rng(seed)
    p = 1.0 / (1.0 + np.exp(-rng.normal(-2.0, 1.5, n)))
    y = (rng.random(n) < p).astype(np.int8)
    return {"y": y, "p": p, "w": rng.gamma(2.0, 0.5, n)}


DATA = {"ties_and_ends": _ties_and_ends, "rare": _rare, "smooth": _smooth}


def _summary(data: dict[str, Any], **options: Any) -> ScoreSummary:
    return summarize_arrays(
        data["y"],
        data["p"],
        sample_weight=data["w"],
        weight_column=None if data["w"] is None else "w",
        **options,
    )


def _batches(data: dict[str, Any], size: int) -> list[DenseBatch]:
    n = data["p"].size
    return [
        DenseBatch(
            data["p"][i : i + size],
            data["y"][i : i + size],
            None if data["w"] is None else data["w"][i : i + size],
        )
        for i in range(0, n, size)
    ]


def _assert_same_summary(got: ScoreSummary, want: ScoreSummary) -> None:
    assert got.n_keys == want.n_keys
    assert got.mantissa_bits == want.mantissa_bits
    assert got.metadata() == want.metadata()
    for name in EXACT:
        assert np.array_equal(got.column(name), want.column(name)), name
    for name in MIN_MAX:
        assert np.array_equal(got.column(name), want.column(name), equal_nan=True), name
    scale = np.abs(want.weight) + 1e-300
    for name in SUMS:
        gap = np.abs(got.column(name) - want.column(name))
        assert np.all(gap <= 1e-11 * scale), name


def _close(a: Any, b: Any, name: str) -> None:
    # bootstrap intervals are quantiles of resampled figures (the debiased ECE's take a
    # square root near 0): they move more with the order in which the sums were added than
    # the figures themselves, far less than their own Monte Carlo error (about 1e-2)
    rel = 1e-6 if name.endswith("_ci") else 1e-9
    if isinstance(a, float) or (isinstance(a, tuple) and a and isinstance(a[0], float)):
        assert a == pytest.approx(b, rel=rel, abs=1e-12, nan_ok=True), name
    elif name != "bins":
        assert a == b, name


def _assert_same_figures(got: Any, want: Any) -> None:
    # Hosmer-Lemeshow with a group edge inside an atom (hosmer_lemeshow_exact False) is an
    # estimate that places the atom by its sums: it may jump with their last bits
    skip = (
        set()
        if want.exactness.hosmer_lemeshow_exact
        else {"hosmer_lemeshow", "hosmer_lemeshow_pvalue"}
    )
    for part in ("reliability", "exactness"):
        for field in fields(getattr(got, part)):
            name = field.name
            if name in skip:
                continue
            _close(getattr(getattr(got, part), name), getattr(getattr(want, part), name), name)
    for a, b in zip(got.reliability.bins, want.reliability.bins, strict=True):
        for field in fields(a):
            _close(getattr(a, field.name), getattr(b, field.name), f"bins.{field.name}")


@pytest.mark.parametrize("name", sorted(DATA))
def test_dense_levels_equal_the_in_memory_refinement(name: str) -> None:
    data = DATA[name](3)
    summary = _summary(data)
    plans = plan_dense_refinement(summary, auc_tolerance=1e-7)
    assert plans
    dense = refine_batches(summary, plans, _batches(data, 7_919))
    memory = [
        summarize_refinement(summary, plan, data["y"], data["p"], sample_weight=data["w"])
        for plan in plans
    ]
    for got, want in zip(dense, memory, strict=True):
        assert got.plan is want.plan
        _assert_same_summary(got.summary, want.summary)
    _assert_same_figures(
        reliability_from_summary(summary, refinement=dense, n_bootstrap=20, rng=_rng()),
        reliability_from_summary(summary, refinement=memory, n_bootstrap=20, rng=_rng()),
    )


def _rng() -> np.random.Generator:
    return np.random.default_rng(0)


def test_quantile_bins_and_other_edges_refine_alike() -> None:
    data = _smooth(5, 60_000)
    summary = _summary(data, bin_edges=[0.0, 0.05, 0.1, 0.3333, 1.0])
    plans = plan_dense_refinement(summary, auc_tolerance=1e-7, n_bins=7, strategy="quantile")
    dense = refine_batches(summary, plans, _batches(data, 10_000))
    memory = [
        summarize_refinement(summary, p, data["y"], data["p"], sample_weight=data["w"])
        for p in plans
    ]
    for got, want in zip(dense, memory, strict=True):
        _assert_same_summary(got.summary, want.summary)
    options: dict[str, Any] = {"n_bins": 7, "strategy": "quantile"}
    _assert_same_figures(
        reliability_from_summary(summary, refinement=dense, **options),
        reliability_from_summary(summary, refinement=memory, **options),
    )


def test_one_group_of_many_and_the_pooled_summary() -> None:
    data = _ties_and_ends(11, 30_000)
    rng = np.random.default_rng(11)
    groups = rng.choice(["a", "b", None], data["p"].size)
    summary = _summary(data, groups=groups, group_column="g")
    pooled = summary.pooled()
    plans = plan_dense_refinement(pooled, auc_tolerance=1e-7)
    dense = refine_batches(pooled, plans, _batches(data, 4_096))
    for got, plan in zip(dense, plans, strict=True):
        want = summarize_refinement(pooled, plan, data["y"], data["p"], sample_weight=data["w"])
        _assert_same_summary(got.summary, want.summary)
    # one group: its rows only (the streaming side filters them)
    part = summary.select_group("a")
    rows = groups == "a"
    mine = {k: (None if v is None else v[rows]) for k, v in data.items()}
    plans = plan_dense_refinement(part, auc_tolerance=1e-7)
    dense = refine_batches(part, plans, _batches(mine, 5_000))
    for got, plan in zip(dense, plans, strict=True):
        want = summarize_refinement(part, plan, mine["y"], mine["p"], sample_weight=mine["w"])
        _assert_same_summary(got.summary, want.summary)


def test_levels_do_not_depend_on_the_batches_and_repeat_bit_for_bit() -> None:
    data = _smooth(7, 50_000)
    summary = _summary(data)
    plans = plan_dense_refinement(summary)
    one = refine_batches(summary, plans, _batches(data, 50_000))
    many = refine_batches(summary, plans, _batches(data, 1_000))
    again = refine_batches(summary, plans, _batches(data, 1_000))
    for a, b, c in zip(one, many, again, strict=True):
        _assert_same_summary(a.summary, b.summary)
        assert b.summary.to_json() == c.summary.to_json()


def test_one_dense_pass_meets_the_tolerance_and_the_bound_holds() -> None:
    data = _smooth(13, 100_000)
    data["w"] = None
    summary = _summary(data)
    plans = plan_dense_refinement(summary, auc_tolerance=1e-6)
    levels = refine_batches(summary, plans, _batches(data, 65_536))
    figures = reliability_from_summary(summary, refinement=levels)
    exact = roc_auc_score(data["y"], data["p"])
    assert figures.exactness.auc_bound <= 1e-6
    assert abs(figures.reliability.auc - exact) <= figures.exactness.auc_bound + 1e-12
    assert figures.exactness.refinement_levels == len(plans)
    assert plan_dense_refinement(summary, levels, auc_tolerance=1e-6) == ()


def test_the_plan_keeps_within_its_slots() -> None:
    summary = _summary(_smooth(17, 20_000))
    plans = plan_dense_refinement(summary, auc_tolerance=0.0, max_slots=4_096)
    assert plans
    assert sum(plan.max_keys for plan in plans) <= 4_096
    every = {int(c) for plan in plans for _, cells in plan.parents for c in cells}
    assert len(every) == sum(cells.size for plan in plans for _, cells in plan.parents)
    with pytest.raises(InputError, match="max_slots"):
        plan_dense_refinement(summary, max_slots=3)


def test_nothing_to_refine() -> None:
    summary = summarize_arrays([0, 1, 0, 1], [0.1, 0.1, 0.7, 0.9])  # every cell exact
    assert plan_dense_refinement(summary, auc_tolerance=0.0) == ()
    assert refine_batches(summary, (), []) == ()


def test_streaming_dense_equals_the_polars_refinement() -> None:
    data = _ties_and_ends(19, 20_000)
    rng = np.random.default_rng(19)
    frame = pl.DataFrame(
        {
            "s": data["p"],
            "y": data["y"],
            "w": data["w"],
            "g": rng.choice(["a", "b"], data["p"].size),
        }
    )
    scan = frame.lazy()
    summary = summarize_lazy(
        scan, score_column="s", label_column="y", weight_column="w", group_column="g"
    ).select_group("b")
    batches = list(dense_batches(scan, summary, batch_rows=3_000))
    assert [b.score.size for b in batches[:-1]] == [3_000] * (len(batches) - 1)
    assert sum(b.score.size for b in batches) == frame.filter(pl.col("g") == "b").height
    plans = plan_dense_refinement(summary, auc_tolerance=1e-7)
    dense = refine_batches(summary, plans, batches)
    for got, plan in zip(dense, plans, strict=True):
        want = refinement_level_lazy(scan, plan, summary=summary)
        _assert_same_summary(got.summary, want.summary)
    levels = refine_dense_lazy(scan, summary, auc_tolerance=1e-7, batch_rows=3_000)
    assert all(isinstance(level, RefinementLevel) for level in levels)
    rows = frame.filter(pl.col("g") == "b")
    exact = roc_auc_score(rows["y"], rows["s"], sample_weight=rows["w"])
    figures = reliability_from_summary(summary, refinement=levels)
    assert abs(figures.reliability.auc - exact) <= max(figures.exactness.auc_bound, 1e-12)
    assert figures.exactness.auc_bound <= 1e-7


def test_sorting_the_batches_by_slot_keeps_every_bit(monkeypatch: pytest.MonkeyPatch) -> None:
    """Large passes sort each batch by slot (stable): each slot's rows keep their order, so
    the sums are the bytes of the unsorted additions."""
    import calib_cli.summaries.dense as dense

    data = _smooth(23, 30_000)
    summary = _summary(data)
    plans = plan_dense_refinement(summary, auc_tolerance=1e-8)
    monkeypatch.setattr(dense, "_SORTED_SLOTS", 1 << 62)
    plain = refine_batches(summary, plans, _batches(data, 4_000))
    monkeypatch.setattr(dense, "_SORTED_SLOTS", 0)
    ordered = refine_batches(summary, plans, _batches(data, 4_000))
    assert [a.summary.to_json() for a in plain] == [b.summary.to_json() for b in ordered]
