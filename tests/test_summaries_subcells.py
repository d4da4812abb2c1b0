"""Sub-cells: the summary's pass also adds each key's weights on a finer grid, and the ranking
figures (AUC, its interval, average precision) use them where the summary's atoms are
ambiguous. References: the cells of the finer grid computed on the rows
(:func:`cell_index`), scikit-learn's AUC and average precision on the rows, and the figures
without sub-cells."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.metrics import average_precision_score, roc_auc_score

import calib_cli.summaries.accumulate as accumulate
import calib_cli.summaries.scan as scan
from calib_cli.errors import InputError
from calib_cli.summaries import bin_index, cell_index, reliability_from_summary
from calib_cli.summaries.accumulate import sub_cell_index
from calib_cli.summaries.figures import plan_dense_refinement
from calib_cli.summaries.scan import (
    refine_dense_lazy,
    summarize_lazy_many,
    summarize_lazy_sub_cells,
)
from calib_cli.summaries.subcells import SubCells
from calib_cli.workflows.reliability import ReliabilityRequest, run_reliability

EDGES = np.linspace(0.0, 1.0, 11)


def _rows(seed: int, n: int) -> pl.DataFrame:
    rng = np.random.default_rng(seed)
    p = 1.0 / (1.0 + np.exp(-rng.normal(-2.5, 1.5, n)))
    p[:8] = [0.0, 1.0, 0.5, 1e-300, 5e-324, 1.0 - 2.0**-52, 0.1, 0.9]  # ends, tails, edges
    return pl.DataFrame(
        {
            "score": p,
            "label": (rng.random(n) < p).astype(np.int8),
            "w": rng.exponential(size=n),
            "g": np.array(["a", "b", None], dtype=object)[rng.integers(0, 3, n)],
        }
    )


def _expected(frame: pl.DataFrame, bits: int, weighted: bool) -> dict[str, np.ndarray]:
    """The finer grid's keys and weights, from the rows."""
    p, y = frame["score"].to_numpy(), frame["label"].to_numpy()
    w = frame["w"].to_numpy() if weighted else np.ones(p.size)
    keys = np.stack((cell_index(p, mantissa_bits=bits), bin_index(p, EDGES), y))
    unique, inverse = np.unique(keys, axis=1, return_inverse=True)
    inverse = inverse.reshape(-1)
    return {
        "cell": unique[0],
        "bin": unique[1],
        "label": unique[2],
        "weight": np.bincount(inverse, weights=w),
        "weight_sq": np.bincount(inverse, weights=w * w),
        "n_rows": np.bincount(inverse),
    }


def _both_classes(frame: pl.DataFrame, base_bits: int) -> pl.DataFrame:
    """The rows of the (cell, bin) places that hold both classes over all groups (the
    sub-cells kept)."""
    keyed = frame.with_columns(
        c=pl.Series(cell_index(frame["score"].to_numpy(), mantissa_bits=base_bits)),
        b=pl.Series(bin_index(frame["score"].to_numpy(), EDGES)),
    )
    both = keyed.group_by(["c", "b"]).agg(pl.col("label").n_unique().alias("k"))
    return keyed.join(both, on=["c", "b"]).filter(pl.col("k") == 2)


def test_sub_cell_index_is_the_finer_grids_cell() -> None:
    p = _rows(1, 5000)["score"].to_numpy()
    for base, depth in ((12, 4), (12, 1), (14, 6)):
        x = np.minimum(p, 1.0 - p)
        raw = (x.view(np.int64) >> (52 - base - depth)) & ((1 << depth) - 1)
        raw[x == 0.0] = 0
        sub = np.where(p <= 0.5, raw, ((1 << depth) - 1) - raw)
        got = sub_cell_index(cell_index(p, mantissa_bits=base), sub, base_bits=base, depth=depth)
        assert np.array_equal(got, cell_index(p, mantissa_bits=base + depth))


@pytest.mark.parametrize("weighted", [False, True])
def test_pooled_sub_cells_are_the_finer_grids_keys(weighted: bool) -> None:
    frame = _rows(2, 20_000)
    summary, sub = summarize_lazy_sub_cells(
        frame.lazy(), ["score"], weight_column="w" if weighted else None, sub_bits=4
    )["score"]
    assert sub is not None and (sub.mantissa_bits, sub.depth) == (16, 4)
    want = _expected(_both_classes(frame.with_columns(g=pl.lit("x")), 12), 16, weighted)
    for name, values in want.items():
        np.testing.assert_allclose(getattr(sub, name), values, rtol=1e-12, err_msg=name)
    # every kept key's sub-cells add up to the summary's key
    assert int(np.sum(sub.n_rows)) <= int(np.sum(summary.n_rows))


def test_grouped_sub_cells_select_and_pool() -> None:
    frame = _rows(3, 20_000)
    summary, sub = summarize_lazy_sub_cells(
        frame.lazy(), ["score"], weight_column="w", group_column="g", sub_bits=3
    )["score"]
    assert sub is not None and set(sub.groups) == set(summary.groups)
    kept = _both_classes(frame, 12)
    for name in summary.groups:
        rows = kept.filter(pl.col("g").is_null() if name is None else pl.col("g") == name)
        want = _expected(rows, 15, True)
        got = sub.select_group(name)
        assert np.array_equal(got.cell, want["cell"]) and np.array_equal(got.label, want["label"])
        np.testing.assert_allclose(got.weight, want["weight"], rtol=1e-12)
    pooled = sub.pooled()
    want = _expected(kept, 15, True)
    assert np.array_equal(pooled.cell, want["cell"]) and np.array_equal(pooled.bin, want["bin"])
    np.testing.assert_allclose(pooled.weight, want["weight"], rtol=1e-12)
    assert np.array_equal(pooled.n_rows, want["n_rows"])
    with pytest.raises(InputError, match="no group 'zzz'"):
        sub.select_group("zzz")


def test_sub_cells_are_the_same_bytes_however_the_rows_are_cut(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(scan, "BLOCK_ROWS", 2000)  # many blocks, their bounds fixed
    frame = _rows(4, 30_000)
    outs = [
        summarize_lazy_sub_cells(frame.lazy(), ["score"], weight_column="w", batch_rows=rows)[
            "score"
        ][1]
        for rows in (1 << 18, 997, 4096)
    ]
    for other in outs[1:]:
        assert other is not None and outs[0] is not None
        for name in ("cell", "bin", "label", "weight", "weight_sq", "n_rows"):
            assert getattr(other, name).tobytes() == getattr(outs[0], name).tobytes(), name


def test_counts_spilled_before_they_could_overflow_are_kept(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The sub-cells count rows in int32 and spill to int64 before a count could overflow;
    with a spill every few batches the summary and sub-cells are the same bytes."""
    monkeypatch.setattr(scan, "BLOCK_ROWS", 1000)
    frame = _rows(12, 20_000)
    plain = summarize_lazy_sub_cells(frame.lazy(), ["score"], batch_rows=1000)["score"]
    monkeypatch.setattr(accumulate, "SUB_SPILL_ROWS", 2500)
    spilled = summarize_lazy_sub_cells(frame.lazy(), ["score"], batch_rows=1000)["score"]
    assert plain[1] is not None and spilled[1] is not None
    for name in ("n_rows", "weight", "score_sum"):
        assert spilled[0].column(name).tobytes() == plain[0].column(name).tobytes(), name
    for name in ("cell", "label", "n_rows", "weight"):
        assert getattr(spilled[1], name).tobytes() == getattr(plain[1], name).tobytes(), name


@pytest.mark.parametrize("weighted", [False, True])
def test_sub_cells_read_off_in_chunks_are_the_same_bytes(
    weighted: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    frame = _rows(13, 20_000)
    options = {"weight_column": "w" if weighted else None, "group_column": "g"}
    whole = summarize_lazy_sub_cells(frame.lazy(), ["score"], **options)["score"][1]
    monkeypatch.setattr(accumulate, "SUB_READ_PAIRS", 7)
    chunked = summarize_lazy_sub_cells(frame.lazy(), ["score"], **options)["score"][1]
    assert whole is not None and chunked is not None and whole.n_keys > 7
    for name in ("group", "cell", "bin", "label", "weight", "weight_sq", "n_rows"):
        assert getattr(chunked, name).tobytes() == getattr(whole, name).tobytes(), name


def test_sub_cells_past_the_memory_cap_are_given_up(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(accumulate, "SUB_MAX_BYTES", 1024)
    summary, sub = summarize_lazy_sub_cells(_rows(5, 2000).lazy(), ["score"])["score"]
    assert sub is None and summary.n_keys > 0


def test_rows_counted_before_the_sub_cells_are_given_up_stay_counted(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Unweighted rows are counted in their sub-cells only; sub-cells given up as the pages
    grow (past the first batches) hand their counts to the summary first."""
    rng = np.random.default_rng(11)
    narrow = 0.3 + 1e-3 * rng.random(5000)  # the first batches: a page or two
    first = pl.DataFrame({"score": narrow, "label": (rng.random(5000) < 0.3).astype(np.int8)})
    frame = pl.concat([first, _rows(11, 20_000).select("score", "label")])
    monkeypatch.setattr(scan, "BLOCK_ROWS", 1000)
    plain = summarize_lazy_many(frame.lazy(), ["score"], batch_rows=1000)["score"]
    monkeypatch.setattr(accumulate, "SUB_MAX_BYTES", 300_000)  # the first pages, not more
    summary, sub = summarize_lazy_sub_cells(frame.lazy(), ["score"], batch_rows=1000)["score"]
    assert sub is None
    for name in ("cell", "bin", "label", "n_rows", "weight", "score_sum", "score_min"):
        assert summary.column(name).tobytes() == plain.column(name).tobytes(), name


@pytest.mark.parametrize("weighted", [False, True])
def test_ranking_figures_from_sub_cells_hold_their_bounds(weighted: bool) -> None:
    frame = _rows(6, 60_000)
    p, y = frame["score"].to_numpy(), frame["label"].to_numpy()
    w = frame["w"].to_numpy() if weighted else None
    summary, sub = summarize_lazy_sub_cells(
        frame.lazy(), ["score"], weight_column="w" if weighted else None, sub_bits=4
    )["score"]
    coarse = reliability_from_summary(summary)
    fine = reliability_from_summary(summary, sub_cells=sub)
    auc, ap = roc_auc_score(y, p, sample_weight=w), average_precision_score(y, p, sample_weight=w)
    assert abs(fine.reliability.auc - auc) <= fine.exactness.auc_bound + 1e-12
    assert abs(fine.reliability.average_precision - ap) <= (
        fine.exactness.average_precision_bound + 1e-12
    )
    # four more bits: the bound falls about 16-fold (at least 8-fold here)
    assert fine.exactness.auc_bound < coarse.exactness.auc_bound / 8.0
    assert fine.exactness.finest_mantissa_bits == 16 and fine.exactness.resolved_cells > 0
    # every other figure is the summary's own
    for key in ("brier", "log_loss", "ece", "ece_debiased", "calibration_slope", "mean_score"):
        assert getattr(fine.reliability, key) == getattr(coarse.reliability, key), key
    low, high = fine.reliability.auc_ci
    assert low < fine.reliability.auc < high


@settings(max_examples=40, deadline=None)
@given(
    n=st.integers(2, 300),
    seed=st.integers(0, 10_000),
    spread=st.sampled_from([1e-6, 1e-3, 0.3]),
    ties=st.booleans(),
)
def test_auc_from_sub_cells_is_within_its_bound(
    n: int, seed: int, spread: float, ties: bool
) -> None:
    rng = np.random.default_rng(seed)
    p = np.clip(0.2 + spread * rng.random(n), 0.0, 1.0)
    if ties:
        p = np.round(p, 5)
    y = (rng.random(n) < 0.4).astype(np.int8)
    y[:2] = [0, 1]
    frame = pl.DataFrame({"score": p, "label": y})
    summary, sub = summarize_lazy_sub_cells(frame.lazy(), ["score"], sub_bits=3)["score"]
    figures = reliability_from_summary(summary, sub_cells=sub)
    exact = roc_auc_score(y, p)
    assert abs(figures.reliability.auc - exact) <= figures.exactness.auc_bound + 1e-12
    assert figures.exactness.auc_bound <= reliability_from_summary(summary).exactness.auc_bound


def test_a_pooled_atom_whose_classes_sit_in_different_groups_is_split() -> None:
    """Group a holds only negatives and group b only positives in one cell: no group's key
    has pairs of its own, but the pooled atom does, so the sub-cells of both are kept and
    the pooled figures split it (no second read needed for the "all rows" entry)."""
    p = np.array([0.30001, 0.30004, 0.30002, 0.30003, 0.7, 0.1])
    y = np.array([0, 0, 1, 1, 1, 0], dtype=np.int8)
    frame = pl.DataFrame({"score": p, "label": y, "g": ["a", "a", "b", "b", "a", "b"]})
    summary, sub = summarize_lazy_sub_cells(frame.lazy(), ["score"], group_column="g")["score"]
    assert sub is not None and sub.n_keys == 4  # the four rows of the shared cell
    coarse = reliability_from_summary(summary.pooled())
    fine = reliability_from_summary(summary.pooled(), sub_cells=sub.pooled())
    assert coarse.exactness.auc_bound > 0.0
    assert fine.exactness.auc_bound < coarse.exactness.auc_bound
    exact = roc_auc_score(y, p)
    assert abs(fine.reliability.auc - exact) <= fine.exactness.auc_bound + 1e-12


def test_sub_cells_refuse_a_refinement_and_another_grid() -> None:
    rng = np.random.default_rng(7)
    p = 0.3 + 1e-4 * rng.random(3000)
    frame = pl.DataFrame({"score": p, "label": (rng.random(3000) < p).astype(np.int8)})
    summary, sub = summarize_lazy_sub_cells(frame.lazy(), ["score"])["score"]
    assert sub is not None
    levels = refine_dense_lazy(frame.lazy(), summary, auc_tolerance=0.0)
    assert levels and plan_dense_refinement(summary, levels) == ()
    with pytest.raises(InputError, match="without resolved rows or a refinement"):
        reliability_from_summary(summary, sub_cells=sub, refinement=levels)
    other = SubCells(**{**sub.__dict__, "base_bits": 10, "mantissa_bits": 14})
    with pytest.raises(InputError, match="refine a 10-bit grid"):
        reliability_from_summary(summary, sub_cells=other)


def _file(tmp_path: Path, score: np.ndarray, seed: int = 8) -> Path:
    rng = np.random.default_rng(seed)
    path = tmp_path / "rows.parquet"
    label = (rng.random(score.size) < score).astype(np.int8)
    pl.DataFrame({"score": score, "label": label}).write_parquet(path)
    return path


def test_streaming_needs_no_second_pass_when_the_sub_cells_meet_the_tolerance(
    tmp_path: Path,
) -> None:
    rng = np.random.default_rng(9)
    score = 1.0 / (1.0 + np.exp(-rng.normal(-2.0, 1.5, 200_000)))
    path = _file(tmp_path, score)
    steps: list[str] = []
    result = run_reliability(
        ReliabilityRequest(file=str(path), engine="streaming"), progress=steps.append
    )
    entry = result.entries[0]
    assert entry.exactness is not None
    assert entry.exactness.refinement_levels == 0 and entry.exactness.finest_mantissa_bits == 16
    assert entry.exactness.auc_bound <= 1e-6
    assert not any(step.startswith("reading again") for step in steps)
    label = pl.read_parquet(path)["label"].to_numpy()
    exact = roc_auc_score(label, score)
    assert abs(entry.summary.auc - exact) <= entry.exactness.auc_bound + 1e-12


def test_streaming_reads_again_when_the_sub_cells_do_not(tmp_path: Path) -> None:
    rng = np.random.default_rng(10)
    score = 0.3 + 1e-4 * rng.random(3000)  # two 12-bit cells: 16 bits leave a bound of ~1e-2
    path = _file(tmp_path, score)
    steps: list[str] = []
    result = run_reliability(
        ReliabilityRequest(file=str(path), engine="streaming"), progress=steps.append
    )
    entry = result.entries[0]
    assert entry.exactness is not None and entry.exactness.refinement_levels > 0
    assert any(step.startswith("reading again") for step in steps)
    label = pl.read_parquet(path)["label"].to_numpy()
    exact = roc_auc_score(label, score)
    assert abs(entry.summary.auc - exact) <= entry.exactness.auc_bound + 1e-12
    assert entry.exactness.auc_bound <= 1e-6
