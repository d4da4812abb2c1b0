"""The streaming summary (Polars) against the NumPy summary, key for key."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest

from calib_cli.errors import InputError
from calib_cli.summaries import (
    ScoreSummary,
    bin_index,
    cell_index,
    cells_to_resolve,
    merge_summaries,
    reliability_from_summary,
    resolved_cells,
    summarize_arrays,
)
from calib_cli.summaries.scan import (
    bin_expr,
    cell_expr,
    rows_in_cells,
    summarize_lazy,
    summarize_lazy_many,
)

EDGE_SCORES = [
    0.0,
    -0.0,
    5e-324,
    1e-310,
    2.2250738585072014e-308,
    1e-300,
    1e-16,
    0.1,
    0.30000000000000004,
    float(np.nextafter(0.5, 0.0)),
    0.5,
    float(np.nextafter(0.5, 1.0)),
    0.75,
    1.0 - 1e-16,
    float(np.nextafter(1.0, 0.0)),
    1.0,
]


@pytest.mark.parametrize("bits", [1, 7, 12, 30, 40, 52])
def test_cell_and_bin_expressions_equal_numpy_bit_for_bit(bits: int) -> None:
    rng = np.random.default_rng(bits)
    p = np.concatenate(
        [
            EDGE_SCORES,
            rng.random(5000),
            rng.random(500) ** 40,
            1.0 - rng.random(500) ** 40,
            0.5 + rng.normal(0.0, 1e-15, 200).clip(-0.5, 0.5),
        ]
    )
    edges = np.linspace(0.0, 1.0, 11)
    frame = pl.DataFrame({"p": p}).select(
        cell_expr(pl.col("p"), mantissa_bits=bits).alias("cell"),
        bin_expr(pl.col("p"), edges.tolist()).alias("bin"),
    )
    assert frame["cell"].to_numpy().tolist() == cell_index(p, mantissa_bits=bits).tolist()
    assert frame["bin"].to_numpy().tolist() == bin_index(p, edges).tolist()


def _frame(seed: int, n: int) -> pl.DataFrame:
    rng = np.random.default_rng(seed)
    p = np.concatenate([rng.beta(0.4, 6.0, n - len(EDGE_SCORES)), np.abs(EDGE_SCORES)])
    return pl.DataFrame(
        {
            "id": np.arange(n),
            "score": p,
            "label": (rng.random(n) < p).astype(np.int64),
            "w": rng.integers(0, 3, n).astype(np.float64),
            "day": rng.choice(np.array(["mon", "tue", None], dtype=object), n),
        }
    )


def _numpy_summary(frame: pl.DataFrame, **kw: Any) -> ScoreSummary:
    return summarize_arrays(
        frame["label"].to_numpy(),
        frame["score"].to_numpy(),
        sample_weight=frame["w"].to_numpy(),
        groups=frame["day"].to_list(),
        weight_column="w",
        group_column="day",
        **kw,
    )


def test_streaming_summary_equals_numpy_summary(tmp_path: Path) -> None:
    frame = _frame(0, 20_000)
    path = tmp_path / "rows.parquet"
    frame.write_parquet(path, row_group_size=3000)
    got = summarize_lazy(
        pl.scan_parquet(path), weight_column="w", group_column="day", mantissa_bits=10
    )
    want = _numpy_summary(frame, mantissa_bits=10)
    assert got.metadata() == want.metadata()
    assert got.groups == want.groups
    a, b = got.to_columns(), want.to_columns()
    for name in a:
        if name == "spiegelhalter_num":  # from the key's sums: within 4 eps W (format_columns)
            gap = np.abs(a[name] - b[name])
            assert np.all(gap <= 1e-12 * np.abs(b[name]) + 8.0 * np.finfo(float).eps * a["weight"])
        elif a[name].dtype.kind == "f":
            np.testing.assert_allclose(a[name], b[name], rtol=1e-12, atol=1e-300, equal_nan=True)
        else:
            assert a[name].tolist() == b[name].tolist(), name


@pytest.mark.parametrize("fmt", ["csv", "ndjson", "ipc"])
def test_every_scan_format_gives_the_same_summary(tmp_path: Path, fmt: str) -> None:
    frame = _frame(1, 3000).drop("day")
    path = tmp_path / f"rows.{fmt}"
    getattr(frame, f"write_{fmt}")(path)
    scan: Any = {"csv": pl.scan_csv, "ndjson": pl.scan_ndjson, "ipc": pl.scan_ipc}[fmt]
    got = summarize_lazy(scan(path), weight_column="w")
    want = summarize_arrays(
        frame["label"].to_numpy(),
        frame["score"].to_numpy(),
        sample_weight=frame["w"].to_numpy(),
        weight_column="w",
    )
    np.testing.assert_allclose(got.weight, want.weight, rtol=1e-12)
    assert got.cell.tolist() == want.cell.tolist()


def test_partitions_merge_to_the_whole() -> None:
    frame = _frame(2, 6000)
    parts = [
        summarize_lazy(part.lazy(), weight_column="w", group_column="day")
        for part in (frame[:2000], frame[2000:4500], frame[4500:])
    ]
    whole = summarize_lazy(frame.lazy(), weight_column="w", group_column="day")
    merged = merge_summaries(parts)
    assert merged.cell.tolist() == whole.cell.tolist()
    np.testing.assert_allclose(merged.log_loss_sum, whole.log_loss_sum, rtol=1e-12)


def test_second_pass_resolves_to_the_in_memory_rows() -> None:
    rng = np.random.default_rng(3)
    n = 20_000
    p = rng.choice([1e-4, 0.02, 0.3, 0.97], n) * (1 + rng.normal(0, 1e-5, n))
    frame = pl.DataFrame({"score": p, "label": (rng.random(n) < p).astype(np.int8)})
    summary = summarize_lazy(frame.lazy())
    keys = cells_to_resolve(summary, auc_tolerance=0.0)
    got = rows_in_cells(frame.lazy(), keys, summary=summary)
    cells = cell_index(p, mantissa_bits=12)
    bins = bin_index(p, summary.bin_edges)
    chosen = set(zip(keys[0].tolist(), keys[1].tolist(), strict=True))
    sel = np.array([k in chosen for k in zip(bins.tolist(), cells.tolist(), strict=True)])
    want = resolved_cells(bins[sel], cells[sel], p[sel], frame["label"].to_numpy()[sel])
    assert got.score.tolist() == want.score.tolist()
    assert got.weight.tolist() == want.weight.tolist()
    refined = reliability_from_summary(summary, resolved=got)
    assert refined.exactness.auc_bound == 0.0


def test_bad_rows_are_refused_naming_the_column() -> None:
    with pytest.raises(InputError, match="column 'label' has values that are not 0 or 1"):
        summarize_lazy(pl.LazyFrame({"score": [0.1, 0.2], "label": [0, 2]}))
    with pytest.raises(InputError, match="column 'score' has values"):
        summarize_lazy(pl.LazyFrame({"score": [0.1, 1.5], "label": [0, 1]}))
    with pytest.raises(InputError, match="column 'score' has missing values"):
        summarize_lazy(pl.LazyFrame({"score": [0.1, None], "label": [0, 1]}))


def test_streaming_refinement_is_within_its_bound_of_scikit_learn() -> None:
    from sklearn.metrics import roc_auc_score

    from calib_cli.summaries.scan import refine_dense_lazy

    rng = np.random.default_rng(8)
    n = 100_000
    p = 1.0 / (1.0 + np.exp(-rng.normal(-3.0, 1.5, n)))
    p[:5000] = 0.25  # heavy exact ties
    y = (rng.random(n) < p).astype(np.int8)
    frame = pl.DataFrame({"score": p, "label": y})
    summary = summarize_lazy(frame.lazy())
    levels = refine_dense_lazy(frame.lazy(), summary)
    r = reliability_from_summary(summary, refinement=levels)
    assert 0.0 < r.exactness.auc_bound <= 1e-6
    assert abs(r.reliability.auc - roc_auc_score(y, p)) <= r.exactness.auc_bound + 1e-12


def test_grouped_refinement_keeps_the_group_rows() -> None:
    from calib_cli.summaries.scan import refine_dense_lazy

    frame = _frame(9, 20_000)
    summary = summarize_lazy(frame.lazy(), weight_column="w", group_column="day")
    with pytest.raises(InputError, match="groups"):
        refine_dense_lazy(frame.lazy(), summary)
    one = summary.select_group("mon")
    levels = refine_dense_lazy(frame.lazy(), one, auc_tolerance=0.0)
    assert reliability_from_summary(one, refinement=levels).exactness.auc_bound == 0.0


def test_several_score_columns_in_one_scan() -> None:
    from calib_cli.summaries.scan import summarize_lazy_many

    frame = _frame(10, 5000).with_columns((1.0 - pl.col("score")).alias("other"))
    got = summarize_lazy_many(frame.lazy(), ["score", "other"], weight_column="w")
    for name in ("score", "other"):
        want = summarize_lazy(frame.lazy(), score_column=name, weight_column="w")
        assert got[name].metadata() == want.metadata()
        assert got[name].cell.tolist() == want.cell.tolist()
        np.testing.assert_allclose(got[name].log_loss_sum, want.log_loss_sum, rtol=1e-12)


def test_parquet_round_trip_merge_and_refusals(tmp_path: Path) -> None:
    # the one file form of summaries lives in io (io.write_summary / io.read_summary);
    # merging files per score column, refusing those that disagree, is load_summaries'
    import json

    from calib_cli import io
    from calib_cli.workflows.summarize import load_summaries

    frame = _frame(11, 9000)
    parts = [frame[:3000], frame[3000:]]
    summaries = [summarize_lazy(f.lazy(), weight_column="w", group_column="day") for f in parts]
    paths = [tmp_path / f"part{i}.parquet" for i in range(2)]
    for s, path in zip(summaries, paths, strict=True):
        io.write_summary(s, str(path))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["part0.parquet", "part1.parquet"]
    back = io.read_summary(str(paths[0]))
    assert back.metadata() == summaries[0].metadata() and back.groups == summaries[0].groups
    for name, values in summaries[0].to_columns().items():
        got = back.to_columns()[name]
        if values.dtype.kind == "f":
            np.testing.assert_array_equal(got, values)  # NaN <-> null, bit for bit
        else:
            assert got.tolist() == values.tolist(), name
    meta = pl.read_parquet_metadata(paths[0])["calib.summary"]
    assert '"kind": "calib.score_summary"' in meta
    merged, files = load_summaries([str(p) for p in paths])["score"]
    whole = merge_summaries(summaries)
    assert len(files) == 2 and merged.cell.tolist() == whole.cell.tolist()
    np.testing.assert_allclose(merged.weight, whole.weight, rtol=1e-12)

    plain = tmp_path / "plain.parquet"
    frame.write_parquet(plain)
    with pytest.raises(InputError, match=r"plain\.parquet: not a calib summary"):
        io.read_summary(str(plain))
    text = tmp_path / "text.parquet"
    text.write_text("hello")
    with pytest.raises(InputError, match=r"text\.parquet: not a calib summary"):
        io.read_summary(str(text))
    for field, value, message in [
        ("schema_version", 2, "schema_version 2 is not supported"),
        ("grid", {"kind": "uniform", "mantissa_bits": 12}, "grid must be"),
        ("kind", "other", "kind must be"),
    ]:
        bad_meta = summaries[0].metadata() | {field: value}
        bad = tmp_path / f"bad_{field}.parquet"
        pl.read_parquet(paths[0]).write_parquet(
            bad, metadata={"calib.summary": json.dumps(bad_meta)}
        )
        with pytest.raises(InputError, match=rf"bad_{field}\.parquet: {message}"):
            io.read_summary(str(bad))
    finer = tmp_path / "finer.parquet"
    io.write_summary(
        summarize_lazy(parts[1].lazy(), weight_column="w", group_column="day", mantissa_bits=14),
        str(finer),
    )
    with pytest.raises(InputError, match=r"finer\.parquet: summary field 'grid'"):
        load_summaries([str(paths[0]), str(finer)])


@pytest.mark.parametrize("by", [None, "g"])
def test_a_fine_grid_keeps_memory_to_its_keys(by: str | None) -> None:
    """On a 20-bit grid a page of 256 cells holds one or two occupied keys: the pass keeps a
    page per key (searched) instead, and with groups it allocates no table over every page
    (that table, built and then dropped, took 17 GB). 20,000 distinct scores: the pass stays
    within tens of MB (before: 17 GB with groups, 670 MB without); the summary is the same
    as on the rows in memory."""
    import tracemalloc

    rng = np.random.default_rng(4)
    n = 20_000
    frame = pl.DataFrame(
        {"score": rng.beta(0.5, 5.0, n), "label": rng.integers(0, 2, n), "g": rng.integers(0, 5, n)}
    )
    tracemalloc.start()
    try:
        summary = summarize_lazy_many(
            frame.lazy(), ["score"], label_column="label", group_column=by, mantissa_bits=20
        )["score"]
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 100e6, peak
    expected = summarize_arrays(
        frame["label"].to_numpy(),
        frame["score"].to_numpy(),
        groups=None if by is None else frame["g"].to_numpy(),
        mantissa_bits=20,
    )
    assert summary.n_keys == expected.n_keys
    np.testing.assert_array_equal(summary.cell, expected.cell)
    np.testing.assert_allclose(summary.score_sum, expected.score_sum, rtol=1e-13)
