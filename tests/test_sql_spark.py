"""The emitted SQL run in Spark local mode, with Spark's default settings (ANSI mode on).

Only with ``pytest -m spark`` (``make test-engines``): Spark takes about half a minute to
start. One session serves every test (the ``spark`` fixture in conftest.py); if Spark cannot
start, these tests fail with the reason. References as in the DuckDB tests: apply_chain,
the NumPy sampling rule and its test vectors, summarize_arrays.
"""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np
import pytest

from calib_cli.core.chain import PriorParams, apply_chain
from calib_cli.core.isotonic import IsotonicParams
from calib_cli.core.platt import PlattParams
from calib_cli.core.sampling import (
    ClassRates,
    hash_keys,
    hash_uint64_keys,
    keep_mask,
    row_thresholds,
)
from calib_cli.core.selection import fit_calibrator
from calib_cli.sql.calibrators import calibrated_sql
from calib_cli.sql.sampling import SamplingQuery, sampling_sql
from calib_cli.sql.summary import METADATA_COLUMN, SummaryQuery, summary_sql
from calib_cli.summaries import ScoreSummary, summarize_arrays
from calib_cli.summaries.summary import COUNT_COLUMNS, KEY_COLUMNS, SUM_COLUMNS

pytestmark = pytest.mark.spark

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
EDGE_SCORES = [0.0, 5e-324, 1e-300, 1e-12, 0.1, 0.25, 0.3, 0.5, 0.65, 0.7, 1 - 2**-53, 1.0]


def _view(spark: Any, name: str, columns: dict[str, list[Any]], types: dict[str, str]) -> None:
    from pyspark.sql.types import (
        BooleanType,
        DoubleType,
        LongType,
        StringType,
        StructField,
        StructType,
    )

    kinds = {"double": DoubleType(), "bigint": LongType(), "string": StringType(),
             "boolean": BooleanType()}  # fmt: skip
    schema = StructType([StructField(c, kinds[types[c]], True) for c in columns])
    rows = list(zip(*columns.values(), strict=True))
    spark.createDataFrame(rows, schema).createOrReplaceTempView(name)


def _collect(spark: Any, sql: str) -> list[Any]:
    """The query's rows, once its optimized plan is shown to stay near the SQL's size.

    Spark's optimizer substitutes a projection's expressions into a predicate it pushes down;
    through the sampling query's hash stages that once grew the plan to 1.2 million characters
    (for 9,000 of SQL) and ran a 1 GB driver out of memory on a slower machine.
    """
    plan = spark.sql(sql)._jdf.queryExecution().optimizedPlan().toString()
    assert len(plan) < 4 * len(sql) + 4000, f"optimized plan of {len(plan):,} characters"
    return list(spark.sql(sql).collect())


def _fitted(method: str, **options: Any) -> Any:
    rng = np.random.default_rng(1)
    scores = rng.beta(0.8, 3.0, 400)
    labels = (rng.random(400) < scores**0.7).astype(np.float64)
    return fit_calibrator(method, scores, labels, **options)


def test_spark_runs_with_ansi_mode_on(spark: Any) -> None:
    assert spark.conf.get("spark.sql.ansi.enabled") == "true"


def test_calibrators_in_spark_equal_calib(spark: Any) -> None:
    rng = np.random.default_rng(0)
    scores = np.concatenate([rng.beta(0.6, 2.0, 200), EDGE_SCORES])
    regions = [("eu", "us")[i % 2] for i in range(scores.size)]
    _view(spark, "scores", {"score": scores.tolist(), "region": regions},
          {"score": "double", "region": "string"})  # fmt: skip
    prior = PriorParams(log_odds_shift=0.0, strata_col="region",
                        stratum_shifts={"eu": -2.0, "us": 0.7})  # fmt: skip
    codes = np.array([0 if r == "eu" else 1 for r in regions])
    chains: list[tuple[Any, ...]] = [
        (_fitted("platt"),),
        (_fitted("beta"),),
        (_fitted("histogram", n_bins=12),),
        (_fitted("isotonic"),),
        (_fitted("isotonic", strict=True, eps=1e-4), PriorParams(log_odds_shift=math.log(0.05))),
        (prior, _fitted("isotonic")),
        (IsotonicParams(x_knots=np.array([0.2]), y_knots=np.array([0.4]), eps=0.0, strict=False),),
    ]
    for steps in chains:
        sql = calibrated_sql(steps, dialect_name="spark")
        got = [r[0] for r in _collect(spark, f"SELECT {sql} AS p FROM scores")]
        expected = apply_chain(steps, scores, strata=(("eu", "us"), codes))
        np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-300)
    margins = [-2000.0, -709.9, -30.0, 0.0, 40.0, 800.0]
    _view(spark, "margins", {"score": margins}, {"score": "double"})
    platt = PlattParams(slope=1.3, intercept=-0.2, score_kind="raw", converged=True, n_iter=1,
                        separable=False)  # fmt: skip
    platt_sql = calibrated_sql((platt,), dialect_name="spark", score_kind="raw")
    got = [r[0] for r in _collect(spark, f"SELECT {platt_sql} FROM margins")]
    np.testing.assert_allclose(got, apply_chain((platt,), np.array(margins), score_kind="raw"),
                               rtol=1e-12, atol=1e-300)  # fmt: skip


def test_sampling_in_spark_keeps_calibs_rows(spark: Any) -> None:
    rng = np.random.default_rng(4)
    n = 3000
    keys = rng.integers(INT64_MIN, INT64_MAX, n // 2, endpoint=True)[rng.integers(0, n // 2, n)]
    keys[:4] = [0, -1, INT64_MIN, INT64_MAX]
    labels = (rng.random(n) < 0.3).astype(np.int64)
    _view(spark, "events", {"row": list(range(n)), "user_id": keys.tolist(),
                            "label": labels.tolist(), "flag": (labels == 1).tolist()},
          {"row": "bigint", "user_id": "bigint", "label": "bigint", "flag": "boolean"})  # fmt: skip
    for seed, rates in ((0, ClassRates(0.1)), (2**64 - 1, ClassRates(0.5, 0.25))):
        mask = keep_mask(hash_uint64_keys(keys, seed=seed), row_thresholds(labels, rates))
        for label_col in ("label", "flag"):
            query = SamplingQuery(table="events", key_col="user_id", label_col=label_col,
                                  seed=seed, rates=rates)  # fmt: skip
            rows = _collect(spark, sampling_sql(query, dialect_name="spark"))
            assert sorted(r["row"] for r in rows) == np.flatnonzero(mask).tolist()


def test_stratified_sampling_in_spark_keeps_calibs_rows_and_weights(spark: Any) -> None:
    """Each stratum's rates, the weight column, and no row of a stratum without rates."""
    rng = np.random.default_rng(10)
    n = 2000
    keys = rng.integers(INT64_MIN, INT64_MAX, n // 2, endpoint=True)[rng.integers(0, n // 2, n)]
    labels = (rng.random(n) < 0.3).astype(np.int64)
    strata = np.array(["a", "b", "c"])[rng.integers(0, 3, n)]
    _view(spark, "strata", {"row": list(range(n)), "user_id": keys.tolist(),
                            "label": labels.tolist(), "region": strata.tolist()},
          {"row": "bigint", "user_id": "bigint", "label": "bigint",
           "region": "string"})  # fmt: skip
    rates = {"a": ClassRates(0.2, 1.0), "b": ClassRates(0.05, 0.5), "c": ClassRates(1.0)}
    thresholds = row_thresholds(labels, list(rates.values()),
                                stratum_index=np.searchsorted(list(rates), strata))  # fmt: skip
    mask = keep_mask(hash_uint64_keys(keys, seed=11), thresholds) & (strata != "c")
    with_rates = {"a": rates["a"], "b": rates["b"]}  # "c" left out
    query = SamplingQuery(table="strata", key_col="user_id", seed=11, strata_col="region",
                          weight_col_out="w", stratum_rates=with_rates)  # fmt: skip
    rows = _collect(spark, sampling_sql(query, dialect_name="spark"))
    rows.sort(key=lambda r: r["row"])
    assert [r["row"] for r in rows] == np.flatnonzero(mask).tolist()
    rate = {(name, 0): r.negative_rate for name, r in with_rates.items()}
    rate |= {(name, 1): r.positive_rate for name, r in with_rates.items()}
    assert [r["w"] for r in rows] == [1 / rate[(r["region"], r["label"])] for r in rows]


#: Keys at every edge of calib's key rule: integers' texts (int64's ends, above it up to
#: 2**64 - 1), texts that only look like integers, beyond 2**64, empty, multi-byte, NUL.
TEXT_KEYS = ["7", "-1", "0", "9223372036854775807", "-9223372036854775808",
             "9223372036854775808", "18446744073709551615", "18446744073709551616",
             "-9223372036854775809", "99999999999999999999", "1" * 30, "007", "-0", "+7", " 7",
             "7 ", "7.0", "1e3", "", "user-17", "é", "日本", "😀", "a\x00b"]  # fmt: skip


def test_text_keys_hash_by_the_key_rule_in_spark(spark: Any) -> None:
    """Each key on its own, as calib hashes it: an integer's text as the integer (through
    BIGINT, or DECIMAL(20, 0) above int64), any other text by FNV-1a of its UTF-8 bytes."""
    rng = np.random.default_rng(7)
    alphabet = [*"0123456789-+ .eE", "é", "ß", "中", "\t"]
    drawn = ["".join(rng.choice(alphabet, rng.integers(0, 12))) for _ in range(200)]
    keys = list(dict.fromkeys(TEXT_KEYS + drawn))
    _view(spark, "text_keys", {"id": keys, "label": [0] * len(keys)},
          {"id": "string", "label": "bigint"})  # fmt: skip
    for seed in (0, 42, 2**64 - 1):
        query = SamplingQuery(table="text_keys", key_col="id", seed=seed, rates=ClassRates(0.5))
        sql = sampling_sql(query, dialect_name="spark")
        ctes = sql[: sql.index("\nSELECT t.*")]
        rows = _collect(spark, f"{ctes}\nSELECT k, hi, lo FROM _calib_hash")
        got = {r["k"]: (r["hi"] << 32) | r["lo"] for r in rows}
        assert [got[k] for k in keys] == hash_keys(keys, seed=seed).tolist()


def test_text_key_sampling_in_spark_keeps_calibs_rows(spark: Any) -> None:
    """Rows sharing a text key are kept or dropped together, as calib's rule keeps them."""
    rng = np.random.default_rng(8)
    n = 1500
    ids = [TEXT_KEYS[i] for i in rng.integers(0, len(TEXT_KEYS), n)]
    labels = (rng.random(n) < 0.3).astype(np.int64)
    _view(spark, "text_events", {"row": list(range(n)), "id": ids, "label": labels.tolist()},
          {"row": "bigint", "id": "string", "label": "bigint"})  # fmt: skip
    rates = ClassRates(0.5, 0.25)
    mask = keep_mask(hash_keys(ids, seed=9), row_thresholds(labels, rates))
    query = SamplingQuery(table="text_events", key_col="id", seed=9, rates=rates)
    rows = _collect(spark, sampling_sql(query, dialect_name="spark"))
    assert sorted(r["row"] for r in rows) == np.flatnonzero(mask).tolist()


def test_summary_in_spark_equals_calibs(spark: Any) -> None:
    rng = np.random.default_rng(5)
    scores = np.concatenate([rng.beta(0.4, 3.0, 2000), EDGE_SCORES * 2])
    labels = (rng.random(scores.size) < scores).astype(np.int64)
    weights = rng.choice([0.0, 0.5, 1.0, 2.0], scores.size)
    days = [("mon", "tue", None)[i % 3] for i in range(scores.size)]
    _view(spark, "rows", {"score": scores.tolist(), "label": labels.tolist(),
                          "w": weights.tolist(), "day": days},
          {"score": "double", "label": "bigint", "w": "double", "day": "string"})  # fmt: skip
    query = SummaryQuery(table="rows", weight_col="w", by="day")
    result = _collect(spark, summary_sql(query, dialect_name="spark"))
    frame = {name: [row[name] for row in result] for name in result[0].asDict()}
    (meta,) = set(frame.pop(METADATA_COLUMN))
    columns: dict[str, Any] = {
        name: np.array([*values, None], dtype=object)[:-1]
        if name == "group"
        else np.array([np.nan if v is None else v for v in values], dtype=np.float64)
        for name, values in frame.items()
    }
    engine = ScoreSummary.from_columns(columns, json.loads(meta))
    calib = summarize_arrays(labels, scores, sample_weight=weights, groups=days,
                             weight_column="w", group_column="day")  # fmt: skip
    assert engine.metadata() == calib.metadata() and engine.groups == calib.groups
    for name in (*KEY_COLUMNS, *COUNT_COLUMNS, "weight_min", "score_min", "score_max"):
        np.testing.assert_array_equal(engine.column(name), calib.column(name), err_msg=name)
    for name in SUM_COLUMNS:
        scale = float(np.sum(np.abs(calib.column(name)))) or 1.0
        np.testing.assert_allclose(engine.column(name), calib.column(name), rtol=1e-9,
                                   atol=1e-15 * scale, err_msg=name)  # fmt: skip


# ------------------------------------------------------------------ label rule and group text
# Reference: calib summarize on the Parquet file Spark writes of the same rows (Spark's
# defaults: TIMESTAMP as INT96, read by calib as nanoseconds in UTC).


def _spark_vs_calib(spark: Any, tmp_path: Any, frame: Any, **options: Any) -> tuple[Any, Any]:
    """(engine summary, calib's summary) of the rows of the Spark DataFrame ``frame``."""
    import glob

    import polars as pl

    from calib_cli.io.summary_file import read_summary
    from calib_cli.workflows.summarize import SummarizeRequest, run_summarize

    frame.write.mode("overwrite").parquet(str(tmp_path / "spark_rows"))
    rows = tmp_path / "rows.parquet"
    pl.read_parquet(sorted(glob.glob(str(tmp_path / "spark_rows" / "*.parquet")))).write_parquet(
        rows
    )
    out = tmp_path / "calib.parquet"
    run_summarize(SummarizeRequest(files=(str(rows),), output=str(out), **options))
    frame.createOrReplaceTempView("label_group_rows")
    query = SummaryQuery(
        table="label_group_rows", by=options.get("by"), positive_label=options.get("positive_label")
    )
    result = _collect(spark, summary_sql(query, dialect_name="spark"))
    columns_out = {name: [row[name] for row in result] for name in result[0].asDict()}
    (meta,) = set(columns_out.pop(METADATA_COLUMN))
    columns: dict[str, Any] = {
        name: np.array([*values, None], dtype=object)[:-1]
        if name == "group"
        else np.array([np.nan if v is None else v for v in values], dtype=np.float64)
        for name, values in columns_out.items()
    }
    return ScoreSummary.from_columns(columns, json.loads(meta)), read_summary(str(out))


def _same_counts(engine: Any, calib: Any) -> None:
    assert engine.groups == calib.groups
    assert engine.positive_label == calib.positive_label
    for name in (*KEY_COLUMNS, *COUNT_COLUMNS):
        np.testing.assert_array_equal(engine.column(name), calib.column(name), err_msg=name)


def test_labels_calib_refuses_are_counted_apart_in_spark(spark: Any) -> None:
    """Without --positive-label a label calib refuses (2, maybe, 0.5, inf) is neither class:
    label 2 in the summary (calib then refuses it); 0 in any form (-0, 0.00, No) a negative;
    exponents beyond a double's (1e99999, 1e-99999: inf and 0 by a cast) are refused too."""
    texts = ["1", "yes", "-0", "0.00", "No", "2", "maybe", " 0.5", "inf", "-1e0"]
    texts += ["1e99999", "1e-99999"]
    listed = ", ".join(f"'{t}'" for t in texts)
    spark.sql(
        f"SELECT (id % 97 + 0.5) / 97.0D AS score, element_at(array({listed}), "
        f"CAST(id % {len(texts)} + 1 AS INT)) AS label FROM range(600)"
    ).createOrReplaceTempView("refused")
    sql = summary_sql(SummaryQuery(table="refused"), dialect_name="spark")
    rows = _collect(spark, f"SELECT label, SUM(n_rows) AS n FROM ({sql}) AS s GROUP BY label")
    assert {r["label"]: r["n"] for r in rows} == {1: 100, 0: 150, 2: 350}


def test_rows_without_a_label_are_counted_apart_in_spark(spark: Any) -> None:
    """A NULL, NaN or empty label is label 3 in the summary (it was left out unsaid), with and
    without --positive-label; the score's NULL rows are still left out."""
    spark.sql(
        "SELECT (id % 97 + 0.5) / 97.0D AS score, CASE id % 5 WHEN 0 THEN '1' WHEN 1 THEN '0' "
        "WHEN 2 THEN NULL WHEN 3 THEN 'NaN' ELSE ' ' END AS label FROM range(500)"
    ).createOrReplaceTempView("late")
    for positive in (None, "1"):
        sql = summary_sql(SummaryQuery(table="late", positive_label=positive), dialect_name="spark")
        rows = _collect(spark, f"SELECT label, SUM(n_rows) AS n FROM ({sql}) AS s GROUP BY label")
        assert {r["label"]: r["n"] for r in rows} == {1: 100, 0: 100, 3: 300}


def test_positive_label_in_spark_equals_calibs(spark: Any, tmp_path: Any) -> None:
    """--positive-label on double, integer, boolean and text labels (0 on a double column
    matches 0.0; numeric text compares as numbers; 1d stays text), and calib's rule without
    one (true, 1, yes, Y: the SQL cast the label to a double, which fails on text in ANSI
    mode), as calib reads them."""
    cases: list[tuple[str, str | None]] = [
        ("CAST(id % 3 = 0 AS DOUBLE)", None),
        ("CAST(id % 3 = 0 AS DECIMAL(4, 2))", None),
        ("id % 3 = 0", None),
        ("CASE WHEN id % 3 = 0 THEN 'yes' ELSE 'no' END", None),
        ("CASE WHEN id % 3 = 0 THEN ' Y ' ELSE 'False' END", None),
        # a CRLF file loaded as LF, tabs: white space besides spaces is trimmed too
        ("CASE WHEN id % 3 = 0 THEN concat('yes', chr(13)) ELSE concat(chr(9), 'no') END", None),
        ("CASE WHEN id % 3 = 0 THEN concat('fraud', chr(13)) ELSE 'ok' END", "fraud"),
        # Unicode white space (a no-break and an ideographic space), which calib strips
        (
            "CASE WHEN id % 3 = 0 THEN concat(decode(unhex('C2A0'), 'UTF-8'), 'yes') "
            "ELSE concat('no', decode(unhex('E38080'), 'UTF-8')) END",
            None,
        ),
        ("CAST(id % 3 = 0 AS DOUBLE)", "0"),
        ("CAST(id % 3 = 0 AS DOUBLE)", "1"),
        ("CAST(id % 3 = 0 AS BIGINT)", "1.0"),
        ("id % 3 = 0", "true"),
        ("CASE WHEN id % 3 = 0 THEN 'yes' ELSE 'no' END", "yes"),
        ("CASE WHEN id % 3 = 0 THEN '1.0' ELSE '0' END", "1"),
        ("CASE WHEN id % 3 = 0 THEN '1d' ELSE '1' END", "1d"),
    ]
    for number, (label, positive) in enumerate(cases):
        frame = spark.sql(
            f"SELECT (id % 97 + 0.5) / 97.0D AS score, {label} AS label FROM range(300)"
        )
        engine, calib = _spark_vs_calib(
            spark, tmp_path / str(number), frame, positive_label=positive
        )
        _same_counts(engine, calib)
        assert int(np.sum(calib.column("n_rows")[calib.column("label") == 1])) in (100, 200)


def test_group_text_in_spark_equals_calibs(spark: Any, tmp_path: Any) -> None:
    """--by columns of each type name the same groups as calib's summary of Spark's Parquet
    (timestamps with and without a time zone, in a session zone that is not UTC; doubles
    such as 1e10, 1e-7 and 3.0; dates, integers, booleans, text)."""
    by_types = {
        "ts": "TIMESTAMP '2024-01-01 00:00:00' + make_interval(0, 0, 0, 0, 0, 0, (id % 3) * 0.5)",
        "ntz": "CAST(TIMESTAMP_NTZ '2024-01-01 00:00:00' + make_interval(0, 0, 0, 0, id % 2) "
        "AS TIMESTAMP_NTZ)",
        "dbl": "element_at(array(1e10D, 1e-7D, 0.1D, 1e16D, 3.0D, -0.00001D, 5e-5D), "
        "CAST(id % 7 + 1 AS INT))",
        "day": "DATE '2024-01-01' + CAST(id % 2 AS INT)",
        "n": "id % 3 - 1",
        "flag": "id % 2 = 0",
        "txt": "element_at(array('007', '7', '1.0'), CAST(id % 3 + 1 AS INT))",
    }
    zone = spark.conf.get("spark.sql.session.timeZone")
    spark.conf.set("spark.sql.session.timeZone", "America/New_York")
    try:
        for name, sql in by_types.items():
            frame = spark.sql(
                f"SELECT (id % 97 + 0.5) / 97.0D AS score, id % 2 AS label, "
                f"CASE WHEN id % 11 = 0 THEN NULL ELSE {sql} END AS g FROM range(300)"
            )
            engine, calib = _spark_vs_calib(spark, tmp_path / name, frame, by="g")
            _same_counts(engine, calib)
    finally:
        spark.conf.set("spark.sql.session.timeZone", zone)


def test_float_and_non_shortest_double_groups_fail_in_spark(spark: Any) -> None:
    """A 32-bit float --by column, and a double whose Java text is not the shortest
    (5e-324 is 4.9E-324 on Java 17), make the query fail naming the column."""
    for value, match in (("CAST(1.5 AS FLOAT)", "is a 32-bit float"),
                         ("CAST('5e-324' AS DOUBLE)", "not the shortest")):  # fmt: skip
        spark.sql(f"SELECT 0.5D AS score, 1 AS label, {value} AS g").createOrReplaceTempView("f")
        sql = summary_sql(SummaryQuery(table="f", by="g"), dialect_name="spark")
        with pytest.raises(Exception, match=match):
            spark.sql(sql).collect()
