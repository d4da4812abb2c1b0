"""Emitted SQL reads labels and names rows as calib does, whatever the column's type.

Reference: ``calib summarize`` (in-process) on a Parquet file of the same rows that the engine
(DuckDB) queries: exact keys and counts, and group names equal. The label rule
(``--positive-label`` on double, integer, boolean and text columns) and the text of a
``--by`` (or stratum) column of each type (timestamps of every unit, with a time zone, dates,
times, doubles, integers, booleans, text) are the cases where an engine's own text or cast
differs from Polars'.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import polars as pl
import pytest
import sqlglot

from calib_cli.core.chain import PriorParams
from calib_cli.core.prior import apply_prior_shift
from calib_cli.core.sampling import ClassRates
from calib_cli.errors import InputError
from calib_cli.io.summary_file import read_summary
from calib_cli.sql.calibrators import calibrated_sql
from calib_cli.sql.dialects import SQL_DIALECTS, dialect
from calib_cli.sql.names import group_text
from calib_cli.sql.sampling import SamplingQuery, sampling_sql
from calib_cli.sql.summary import SummaryQuery, summary_sql
from calib_cli.summaries import ScoreSummary
from calib_cli.summaries.summary import COUNT_COLUMNS, KEY_COLUMNS
from calib_cli.workflows.export_sql import SummarizeSqlRequest, run_summarize_sql
from calib_cli.workflows.summarize import SummarizeRequest, run_summarize
from tests.test_sql_summary import summary_of_relation

N = 300


def _engine_summary(con: duckdb.DuckDBPyConnection, sql: str) -> ScoreSummary:
    return summary_of_relation(con.sql(sql))


def _calib_summary(tmp_path: Path, source: Path, **options: Any) -> ScoreSummary:
    out = tmp_path / "calib.parquet"
    run_summarize(SummarizeRequest(files=(str(source),), output=str(out), **options))
    return read_summary(str(out))


def _assert_same_counts(engine: ScoreSummary, calib: ScoreSummary) -> None:
    assert engine.groups == calib.groups
    assert engine.positive_label == calib.positive_label
    for name in (*KEY_COLUMNS, *COUNT_COLUMNS):
        np.testing.assert_array_equal(engine.column(name), calib.column(name), err_msg=name)


def _scores(n: int = N) -> list[float]:
    return [float(x) for x in np.random.default_rng(3).beta(0.6, 2.0, n)]


# ------------------------------------------------------------------ --positive-label


LABEL_CASES = [
    # (SQL type, positive values, negative value, --positive-label)
    ("DOUBLE", 1.0, 0.0, "0"),
    ("DOUBLE", 1.0, 0.0, "1"),
    ("DOUBLE", 1.0, 0.0, "1.0"),
    ("DOUBLE", 2.5, -1.0, "2.5"),
    ("INTEGER", 1, 0, "0"),
    ("INTEGER", 1, 0, "1"),
    ("BIGINT", 7, 3, "7.0"),
    ("BOOLEAN", True, False, "true"),
    ("BOOLEAN", True, False, "false"),
    ("VARCHAR", "yes", "no", "yes"),
    ("VARCHAR", "yes", "no", "no"),
    ("VARCHAR", " fraud ", "ok", "fraud"),
    ("VARCHAR", "1.0", "0", "1"),  # numeric text: compared as numbers, as calib does
    ("VARCHAR", "1", "0", "0.0"),
    ("VARCHAR", "1_0", "x", "1_0"),  # not a number's text to Polars: compared as text
    ("VARCHAR", "fraud\r", "\tok", "fraud"),  # white space other than spaces: trimmed
    ("VARCHAR", "1\r", "0\n", "1"),
    ("VARCHAR", "\u00a0fraud\u2028", "ok", "fraud"),  # Unicode white space: calib strips it
]


@pytest.mark.parametrize(("sql_type", "yes", "no", "positive"), LABEL_CASES)
def test_positive_label_of_every_type_equals_calibs(
    tmp_path: Path, sql_type: str, yes: Any, no: Any, positive: str
) -> None:
    scores = _scores()
    labels = [yes if i % 3 == 0 else no for i in range(N)]
    con = duckdb.connect()
    con.execute(f"CREATE TABLE t (score DOUBLE, label {sql_type})")
    con.executemany("INSERT INTO t VALUES (?, ?)", list(zip(scores, labels, strict=True)))
    source = tmp_path / "rows.parquet"
    con.execute(f"COPY t TO '{source}' (FORMAT parquet)")
    calib = _calib_summary(tmp_path, source, positive_label=positive)
    query = SummaryQuery(table="t", positive_label=positive)
    engine = _engine_summary(con, summary_sql(query, dialect_name="duckdb"))
    _assert_same_counts(engine, calib)
    n_positive = int(np.sum(calib.column("n_rows")[calib.column("label") == 1]))
    assert n_positive in (N // 3, N - N // 3)  # the rule picked one class, not none


#: (SQL type, positive value, negative value) calib reads without --positive-label
DEFAULT_LABEL_CASES = [
    ("DOUBLE", 1.0, 0.0),
    ("INTEGER", 1, 0),
    ("DECIMAL(4,2)", "1.00", "0.00"),  # text 1.00 in DuckDB: a number's text
    ("BOOLEAN", True, False),
    ("VARCHAR", "yes", "no"),  # failed: could not convert string 'yes' to DOUBLE
    ("VARCHAR", " Y ", "n"),
    ("VARCHAR", "TRUE", "False"),
    ("VARCHAR", "t", "f"),
    ("VARCHAR", "1.0", "0"),
    ("VARCHAR", "yes\r", "no\r"),  # a CRLF file loaded as LF: TRIM took spaces only
    ("VARCHAR", "\tY ", "\x0bn\x0c"),
    # Unicode white space, which calib strips: no-break, ideographic, next line, em space
    ("VARCHAR", "\u00a0yes\u3000", "\x85no\u2003"),
    ("VARCHAR", "\u202f1\u2029", "\u16800\u205f"),
]


@pytest.mark.parametrize(("sql_type", "yes", "no"), DEFAULT_LABEL_CASES)
def test_labels_without_positive_label_are_read_by_calibs_rule(
    tmp_path: Path, sql_type: str, yes: Any, no: Any
) -> None:
    """Without --positive-label the SQL reads a label as calib does (true, 1, yes, y, t in any
    case): the summary and the rows sampling keeps are calib's. Before, it cast the label to a
    double, which failed on text labels."""
    scores = _scores()
    labels = [yes if i % 3 == 0 else no for i in range(N)]
    con = duckdb.connect()
    con.execute(f"CREATE TABLE t (id BIGINT, score DOUBLE, label {sql_type})")
    con.executemany(
        "INSERT INTO t VALUES (?, ?, ?)",
        [(i, s, y) for i, (s, y) in enumerate(zip(scores, labels, strict=True))],
    )
    source = tmp_path / "rows.parquet"
    con.execute(f"COPY t TO '{source}' (FORMAT parquet)")
    calib = _calib_summary(tmp_path, source)
    engine = _engine_summary(con, summary_sql(SummaryQuery(table="t"), dialect_name="duckdb"))
    _assert_same_counts(engine, calib)
    assert int(np.sum(calib.column("n_rows")[calib.column("label") == 1])) == N // 3
    rates = ClassRates(2.0**-60, 1.0)  # every positive, in effect no negative
    query = SamplingQuery(table="t", key_col="id", rates=rates)
    kept = con.sql(sampling_sql(query, dialect_name="duckdb"))
    assert sorted(row[0] for row in kept.fetchall()) == list(range(0, N, 3))


def test_sampling_reads_positive_label_as_calib_does() -> None:
    """A double label column with --positive-label 0: every label-0 row is a positive, so at
    rates (positive 1, negative 2**-60: in effect none) exactly those rows are kept."""
    con = duckdb.connect()
    con.execute(
        "CREATE TABLE t AS SELECT i AS id, CAST(i % 2 AS DOUBLE) AS label FROM range(50) r(i)"
    )
    query = SamplingQuery(
        table="t", key_col="id", positive_label="0", rates=ClassRates(2.0**-60, 1.0)
    )
    kept = con.sql(sampling_sql(query, dialect_name="duckdb")).fetchall()
    assert sorted(row[0] for row in kept) == list(range(0, 50, 2))


@pytest.mark.parametrize("positive", [None, "1"])
@pytest.mark.parametrize(("sql_type", "nan"), [("DOUBLE", "'NaN'::DOUBLE"), ("VARCHAR", "'NaN'")])
def test_a_nan_or_empty_label_is_left_out_as_a_null_one(
    tmp_path: Path, sql_type: str, nan: str, positive: str | None
) -> None:
    """A missing label is not a negative: calib refuses NaN, an empty text and the text
    ``NaN`` as missing (io.columns.label_missing); they were counted as negatives (a float
    column whose unlabelled rows are NaN, as Polars writes them). The engine's summary counts
    them apart, with NULL ones, as label 3 (they were left out unsaid, so a target summary
    of batches whose labels had not all arrived was estimated on its labelled rows), and
    calib refuses that summary, naming how many; of the labelled rows it equals calib's. The
    sampling query leaves them out."""
    scores = _scores()
    con = duckdb.connect()
    con.execute(f"CREATE TABLE t (score DOUBLE, label {sql_type})")
    labels = ["1" if i % 3 == 0 else "0" for i in range(N)]
    con.executemany("INSERT INTO t VALUES (?, ?)", list(zip(scores, labels, strict=True)))
    source = tmp_path / "labelled.parquet"
    con.execute(f"COPY t TO '{source}' (FORMAT parquet)")  # the labelled rows only
    missing = [nan, "NULL"] + (["''", "' '"] if sql_type == "VARCHAR" else [])
    for value in missing:
        con.execute(f"INSERT INTO t VALUES (0.5, {value})")
    calib = _calib_summary(tmp_path, source, positive_label=positive)
    sql = summary_sql(SummaryQuery(table="t", positive_label=positive), dialect_name="duckdb")
    counts = dict(con.sql(f"SELECT label, SUM(n_rows) FROM ({sql}) GROUP BY label").fetchall())
    assert counts == {0: N - N // 3, 1: N // 3, 3: len(missing)}
    with pytest.raises(InputError, match=f"counts {len(missing)} rows without a label"):
        _engine_summary(con, sql)
    con.execute(f"CREATE VIEW labelled AS SELECT * FROM t LIMIT {N}")
    query = SummaryQuery(table="labelled", positive_label=positive)
    _assert_same_counts(_engine_summary(con, summary_sql(query, dialect_name="duckdb")), calib)
    con.execute("ALTER TABLE t ADD COLUMN id BIGINT")
    con.execute("UPDATE t SET id = rowid")
    query = SamplingQuery(
        table="t", key_col="id", positive_label=positive, rates=ClassRates(1.0, 1.0)
    )
    kept = con.sql(sampling_sql(query, dialect_name="duckdb")).fetchall()
    assert len(kept) == N  # every labelled row, no missing one


#: Labels calib refuses without --positive-label, as text and as doubles.
REFUSED_LABELS = [
    # exponents beyond a double's: Postgres' NUMERIC cast raised, DuckDB read 1e-99999 as 0
    ("VARCHAR", ["2", "maybe", " 0.5", "-1e0", "inf", "1e99999", "1e-99999", "0e1000"]),
    ("DOUBLE", [2.0, 0.5, -1.0, float("inf")]),
]


@pytest.mark.parametrize(("sql_type", "refused"), REFUSED_LABELS)
def test_a_label_calib_refuses_is_counted_apart_and_the_summary_refused(
    tmp_path: Path, sql_type: str, refused: list[Any]
) -> None:
    """Without --positive-label a label calib refuses (2, maybe, 0.5) is neither class: the
    engine's summary counts its rows under label 2 (they were negatives), and calib refuses
    that summary, naming how many rows; with --positive-label it is a negative, as in calib.
    Labels that read as 0 in any form (``0.00``, ``-0``, ``No``) are negatives (calib reads
    ``0.00`` so in a decimal column; the query cannot tell a text column from it)."""
    scores = _scores()
    negatives = ["0.00", "-0", "No"] if sql_type == "VARCHAR" else [0.0, -0.0]
    labels = [1 if i % 3 == 0 else negatives[i % len(negatives)] for i in range(N)]
    con = duckdb.connect()
    con.execute(f"CREATE TABLE t (score DOUBLE, label {sql_type})")
    con.executemany("INSERT INTO t VALUES (?, ?)", list(zip(scores, labels, strict=True)))
    clean = _engine_summary(con, summary_sql(SummaryQuery(table="t"), dialect_name="duckdb"))
    assert set(clean.column("label").tolist()) == {0, 1}
    assert int(np.sum(clean.column("n_rows")[clean.column("label") == 0])) == N - N // 3
    for value in refused * 3:
        con.execute("INSERT INTO t VALUES (0.5, ?)", [value])
    sql = summary_sql(SummaryQuery(table="t"), dialect_name="duckdb")
    counts = dict(con.sql(f"SELECT label, SUM(n_rows) FROM ({sql}) GROUP BY label").fetchall())
    assert counts == {0: N - N // 3, 1: N // 3, 2: 3 * len(refused)}
    path = tmp_path / "engine.parquet"
    con.execute(f"COPY ({sql}) TO '{path}' (FORMAT parquet)")
    with pytest.raises(InputError, match=f"counts {3 * len(refused)} rows whose label calib"):
        read_summary(str(path))
    query = SummaryQuery(table="t", positive_label="1")
    with_label = _engine_summary(con, summary_sql(query, dialect_name="duckdb"))
    negative = with_label.column("label") == 0
    assert int(np.sum(with_label.column("n_rows")[negative])) == N - N // 3 + 3 * len(refused)


def test_non_finite_positive_label_is_refused() -> None:
    from calib_cli.errors import InputError

    with pytest.raises(InputError, match="--positive-label 'inf' is not a finite number"):
        summary_sql(SummaryQuery(table="t", positive_label="inf"), dialect_name="duckdb")


# ------------------------------------------------------------------ --by text


GROUP_VALUES = {
    "TIMESTAMP": ["2024-01-01 00:00:00", "2024-01-01 00:00:00.5", "1999-12-31 23:59:59.999999"],
    "TIMESTAMP_NS": ["2024-01-01 00:00:00.123456789", "2024-01-01 00:00:00"],
    "TIMESTAMP_MS": ["2024-01-01 00:00:00.5", "2024-01-01 00:00:00"],
    "TIMESTAMP_S": ["2024-01-01 00:00:01", "2024-01-01 00:00:00"],
    "TIMESTAMPTZ": ["2024-01-01 00:00:00.5+00", "2024-06-01 12:00:00+02"],
    "DATE": ["2024-01-01", "1970-01-01"],
    "TIME": ["12:00:00.5", "00:00:00"],
    "DOUBLE": ["1e10", "1e-7", "0.1", "1e16", "1.5", "3.0", "-0.00001", "123456789.125"],
    "BIGINT": ["7", "-7", "10000000000"],
    "BOOLEAN": ["true", "false"],
    "VARCHAR": ["007", "7", "1.0", "a b"],
    "DECIMAL(10,2)": ["1.50", "-3.00"],
}


@pytest.mark.parametrize("sql_type", list(GROUP_VALUES))
def test_group_text_of_every_type_equals_calibs(tmp_path: Path, sql_type: str) -> None:
    """The engine's summary of a DuckDB table and calib's of the Parquet file DuckDB writes of
    it have the same groups, with the same counts (NULL: the missing group)."""
    values = [*GROUP_VALUES[sql_type], None]
    scores = _scores()
    con = duckdb.connect()
    con.execute("SET TimeZone = 'America/New_York'")  # not UTC: the text must not depend on it
    con.execute(f"CREATE TABLE t (score DOUBLE, label INTEGER, g {sql_type})")
    con.executemany(
        f"INSERT INTO t VALUES (?, ?, CAST(CAST(? AS VARCHAR) AS {sql_type}))",
        [(s, i % 2, values[i % len(values)]) for i, s in enumerate(scores)],
    )
    source = tmp_path / "rows.parquet"
    con.execute(f"COPY t TO '{source}' (FORMAT parquet)")
    calib = _calib_summary(tmp_path, source, by="g")
    engine = _engine_summary(
        con, summary_sql(SummaryQuery(table="t", by="g"), dialect_name="duckdb")
    )
    expected = pl.read_parquet(source)["g"].cast(pl.String).unique().to_list()
    assert sorted(engine.groups, key=str) == sorted(expected, key=str)
    _assert_same_counts(engine, calib)


def test_float32_group_column_fails_naming_it() -> None:
    con = duckdb.connect()
    con.execute("CREATE TABLE t AS SELECT 0.5 AS score, 1 AS label, CAST(1.5 AS FLOAT) AS g")
    sql = summary_sql(SummaryQuery(table="t", by="g"), dialect_name="duckdb")
    with pytest.raises(duckdb.Error, match="column 'g' is a 32-bit float"):
        con.sql(sql).fetchall()


def test_double_text_equals_polars_for_any_double() -> None:
    """DuckDB's text of a double, re-laid out, is Polars' for random bit patterns and for
    powers of ten and two (fixed from 1e-5 to below 1e16, else 1e+16, 1.5e-7; NaN, inf)."""
    rng = np.random.default_rng(0)
    bits = rng.integers(0, 2**64, 20_000, dtype=np.uint64)
    special = [10.0**k * m for k in range(-30, 30) for m in (1, 1.5, -2.5, 9.999)]
    special += [2.0**k for k in range(-1074, 1024, 11)] + [0.0, -0.0, np.inf, -np.inf, np.nan]
    special += [sign * 2.0**k for k in (81, 91, 806) for sign in (1, -1)]  # DuckDB writes wrong
    xs = np.concatenate([bits.view(np.float64), special, rng.random(2000).round(3)])
    con = duckdb.connect()
    frame = pl.DataFrame({"i": np.arange(xs.size), "x": xs})
    con.register("v", frame.to_arrow())
    text = group_text(dialect("duckdb"), '"x"', column="x")
    got = [row[0] for row in con.sql(f"SELECT {text} FROM v ORDER BY i").fetchall()]
    assert got == frame["x"].cast(pl.String).to_list()


def test_timestamp_stratum_prior_and_sampling_find_their_rows() -> None:
    """export-sql's stratified prior and resample's stratified rates key strata by calib's
    text (here of a timestamp column): every row finds its stratum, none gets NULL."""
    con = duckdb.connect()
    con.execute(
        "CREATE TABLE t AS SELECT i AS id, (i + 0.5) / 40.0 AS score, i % 2 AS label, "
        "TIMESTAMP '2024-01-01' + INTERVAL (i % 2) DAY AS day FROM range(40) r(i)"
    )
    names = ["2024-01-01 00:00:00.000000", "2024-01-02 00:00:00.000000"]
    prior = PriorParams(0.0, strata_col="day", stratum_shifts={names[0]: -1.0, names[1]: 2.0})
    expr = calibrated_sql([prior], dialect_name="duckdb")
    rows = con.sql(
        f"SELECT score, i_day, {expr} FROM (SELECT *, id % 2 AS i_day FROM t)"
    ).fetchall()
    for score, i_day, calibrated in rows:
        shift = [-1.0, 2.0][i_day]
        assert calibrated == pytest.approx(
            apply_prior_shift(np.array([score]), shift)[0], rel=1e-12
        )
    rates = {names[0]: ClassRates(1.0, 1.0), names[1]: ClassRates(1.0, 1.0)}
    query = SamplingQuery(table="t", key_col="id", strata_col="day", stratum_rates=rates)
    assert len(con.sql(sampling_sql(query, dialect_name="duckdb")).fetchall()) == 40


@pytest.mark.parametrize("name", ["bigquery", "snowflake"])
def test_unchecked_dialects_warn_about_the_by_column(name: str, tmp_path: Path) -> None:
    warnings: list[str] = []
    run_summarize_sql(
        SummarizeSqlRequest(dialect=name, table="t", by="day", output=str(tmp_path / "s.sql")),
        warn=warnings.append,
    )
    assert len(warnings) == 1
    assert warnings[0].startswith(f"--by 'day': {name} SQL names rows by the column's text")
    quiet: list[str] = []
    run_summarize_sql(
        SummarizeSqlRequest(dialect="duckdb", table="t", by="day", output=str(tmp_path / "d.sql")),
        warn=quiet.append,
    )
    assert quiet == []


@pytest.mark.parametrize("name", SQL_DIALECTS)
def test_label_and_group_sql_parses_in_every_dialect(name: str) -> None:
    query = SummaryQuery(table="db.scores", by="day", positive_label="1")
    tree = sqlglot.parse_one(summary_sql(query, dialect_name=name), read=name)
    assert isinstance(tree, sqlglot.exp.Select)
    assert len(tree.args["group"].expressions) == 4
