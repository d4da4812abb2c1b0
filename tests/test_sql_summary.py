"""summarize --emit-sql: the engine's GROUP BY is the summary calib computes from the same rows.

Reference: :func:`calib_cli.summaries.summarize_arrays` on the same rows (keys, counts, minima
and maxima equal exactly; sums to 1e-9 relative, as the issue states for exact figures), and
the reliability figures of both summaries; run in DuckDB.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import polars as pl
import pyarrow as pa
import pytest
import sqlglot
from hypothesis import given, settings
from hypothesis import strategies as st

from calib_cli.errors import InputError
from calib_cli.io.summary_file import read_summary
from calib_cli.sql.dialects import SQL_DIALECTS
from calib_cli.sql.summary import METADATA_COLUMN, SummaryQuery, summary_metadata, summary_sql
from calib_cli.summaries import ScoreSummary, reliability_from_summary, summarize_arrays
from calib_cli.summaries.summary import COUNT_COLUMNS, KEY_COLUMNS, SUM_COLUMNS

_CON = duckdb.connect()

EDGE_SCORES = [0.0, 5e-324, 1e-310, 2.0**-1022, 1e-300, 1e-9, 0.1, 0.2, 0.25,
               np.nextafter(0.25, 0.0), 0.3, 0.5, np.nextafter(0.5, 1.0), 0.65, 0.7, 0.75,
               1 - 1e-9, 1 - 2**-53, 1.0]  # fmt: skip


def _rows(n: int = 4000, seed: int = 0) -> dict[str, Any]:
    rng = np.random.default_rng(seed)
    score = np.concatenate([rng.beta(0.4, 3.0, n), EDGE_SCORES * 3])
    m = score.size
    label = (rng.random(m) < score).astype(np.int64)
    weight = rng.choice([0.0, 0.5, 1.0, 2.0, 3.25], m)
    day = np.array(["mon", "tue", None], dtype=object)[rng.integers(0, 3, m)]
    return {"score": score, "label": label, "weight": weight, "day": day}


def _engine_summary(sql: str, rows: dict[str, Any]) -> ScoreSummary:
    _CON.register(
        "t", pa.table({k: pa.array(list(v) if k == "day" else v) for k, v in rows.items()})
    )
    return summary_of_relation(_CON.sql(sql))


def summary_of_relation(relation: duckdb.DuckDBPyRelation) -> ScoreSummary:
    """The summary an engine's query returned (one metadata value on every row)."""
    names, rows_out = relation.columns, relation.fetchall()
    frame = {name: [row[i] for row in rows_out] for i, name in enumerate(names)}
    metas = set(frame.pop(METADATA_COLUMN))
    assert len(metas) == 1
    columns: dict[str, Any] = {}
    for name, values in frame.items():
        if name == "group":
            columns[name] = np.array([*values, None], dtype=object)[:-1]
        else:
            columns[name] = np.array([np.nan if v is None else v for v in values])
    return ScoreSummary.from_columns(columns, json.loads(metas.pop()))


def _assert_same(engine: ScoreSummary, calib: ScoreSummary) -> None:
    assert engine.metadata() == calib.metadata()
    assert engine.groups == calib.groups
    for name in (*KEY_COLUMNS, *COUNT_COLUMNS):
        np.testing.assert_array_equal(engine.column(name), calib.column(name), err_msg=name)
    for name in SUM_COLUMNS:
        scale = float(np.sum(np.abs(calib.column(name)))) or 1.0
        np.testing.assert_allclose(
            engine.column(name), calib.column(name), rtol=1e-9, atol=1e-15 * scale, err_msg=name
        )
    for name in ("weight_min", "score_min", "score_max"):
        np.testing.assert_array_equal(engine.column(name), calib.column(name), err_msg=name)


@pytest.mark.parametrize("weighted", [False, True])
def test_engine_summary_equals_calibs_by_group(weighted: bool) -> None:
    rows = _rows()
    query = SummaryQuery(table="t", weight_col="weight" if weighted else None, by="day")
    engine = _engine_summary(summary_sql(query, dialect_name="duckdb"), rows)
    calib = summarize_arrays(
        rows["label"], rows["score"], sample_weight=rows["weight"] if weighted else None,
        groups=rows["day"], weight_column=query.weight_col, group_column="day",
    )  # fmt: skip
    _assert_same(engine, calib)
    ours, theirs = (reliability_from_summary(s.pooled()).reliability for s in (engine, calib))
    for figure in ("n", "log_loss", "brier", "ece", "mce", "spiegelhalter_z", "auc"):
        assert getattr(ours, figure) == pytest.approx(getattr(theirs, figure), rel=1e-9, abs=1e-12)


def test_bins_mantissa_bits_and_positive_label() -> None:
    rows = _rows(1500, seed=2)
    rows["label"] = np.where(rows["label"] == 1, "fraud ", "ok")
    edges = [0.0, 0.01, 0.1, 0.5, 0.9, 1.0]
    query = SummaryQuery(table="t", positive_label="fraud", bin_edges=edges, mantissa_bits=20)
    engine = _engine_summary(summary_sql(query, dialect_name="duckdb"), rows)
    calib = summarize_arrays(
        (rows["label"] == "fraud ").astype(int), rows["score"], bin_edges=edges, mantissa_bits=20,
        positive_label="fraud",
    )  # fmt: skip
    _assert_same(engine, calib)
    assert engine.positive_label == "fraud"  # the rule, recorded by the engine's metadata


@settings(max_examples=8, deadline=None)
@given(
    scores=st.lists(st.floats(0.0, 1.0, allow_subnormal=True), min_size=1, max_size=80),
    bits=st.sampled_from([1, 7, 12, 30, 52]),
)
def test_grid_cells_of_any_double_equal_calibs(scores: list[float], bits: int) -> None:
    rows = {"score": np.array(scores), "label": np.arange(len(scores)) % 2}
    query = SummaryQuery(table="t", mantissa_bits=bits)
    engine = _engine_summary(summary_sql(query, dialect_name="duckdb"), rows)
    _assert_same(engine, summarize_arrays(rows["label"], rows["score"], mantissa_bits=bits))


def test_parquet_written_by_duckdb_is_read_by_calib(tmp_path: Path) -> None:
    """The warehouse file form: DuckDB's COPY with the metadata as Parquet key-value
    metadata, read by calib's own reader (what reliability --from-summary uses)."""
    rows = _rows(800, seed=5)
    query = SummaryQuery(table="t", by="day")
    _CON.register(
        "t", pa.table({k: pa.array(list(v) if k == "day" else v) for k, v in rows.items()})
    )
    meta = json.dumps(summary_metadata(query)).replace("'", "''")
    path = tmp_path / "day.parquet"
    _CON.execute(
        f"COPY ({summary_sql(query, dialect_name='duckdb')}) TO '{path}' "
        f"(FORMAT parquet, KV_METADATA {{'calib.summary': '{meta}'}})"
    )
    calib = summarize_arrays(rows["label"], rows["score"], groups=rows["day"], group_column="day")
    _assert_same(read_summary(str(path)), calib)
    # as Spark writes it: no key-value metadata, the metadata in the calib_summary column
    plain = tmp_path / "plain.parquet"
    sql = summary_sql(query, dialect_name="duckdb")
    _CON.execute(f"COPY ({sql}) TO '{plain}' (FORMAT parquet)")
    _assert_same(read_summary(str(plain)), calib)
    mixed = tmp_path / "mixed.parquet"
    pl.read_parquet(plain).with_columns(
        calib_summary=pl.when(pl.int_range(pl.len()) == 0)
        .then(pl.col("calib_summary"))
        .otherwise(pl.lit("{}"))
    ).write_parquet(mixed)
    with pytest.raises(InputError, match="must hold one metadata value, found 2"):
        read_summary(str(mixed))
    empty = tmp_path / "empty.parquet"  # the query on an empty table: no rows, no metadata
    _CON.execute(f"COPY ({sql} LIMIT 0) TO '{empty}' (FORMAT parquet)")
    with pytest.raises(InputError, match="holds no rows, so no summary metadata: the query"):
        read_summary(str(empty))


@pytest.mark.parametrize("name", SQL_DIALECTS)
def test_every_dialect_parses(name: str) -> None:
    query = SummaryQuery(table="db.scores", score_col="p", weight_col="w", by="group",
                         positive_label="yes")  # fmt: skip
    tree = sqlglot.parse_one(summary_sql(query, dialect_name=name), read=name)
    assert isinstance(tree, sqlglot.exp.Select)
    assert [e.alias_or_name for e in tree.expressions][:5] == [
        "group",
        "cell",
        "bin",
        "label",
        "n_rows",
    ]
    assert len(tree.args["group"].expressions) == 4


def test_summarize_emit_sql_workflow_equals_calib_summarize(tmp_path: Path) -> None:
    """run_summarize_sql's query in DuckDB against calib summarize (in-process) on one file."""
    import polars as pl

    from calib_cli.workflows.export_sql import SummarizeSqlRequest, run_summarize_sql
    from calib_cli.workflows.summarize import SummarizeRequest, run_summarize

    rows = _rows(1200, seed=8)
    source = tmp_path / "rows.parquet"
    pl.DataFrame({k: list(v) for k, v in rows.items()}).write_parquet(source)
    out = tmp_path / "calib.parquet"
    run_summarize(SummarizeRequest(files=(str(source),), output=str(out), weight_col="weight",
                                   by="day", n_bins=7))  # fmt: skip
    sql_path = tmp_path / "summary.sql"
    sql = run_summarize_sql(
        SummarizeSqlRequest(
            dialect="duckdb", table="t", weight_col="weight", by="day", bins=7, output=str(sql_path)
        )
    )
    assert sql_path.read_text() == sql + "\n"
    _assert_same(_engine_summary(sql, rows), read_summary(str(out)))
