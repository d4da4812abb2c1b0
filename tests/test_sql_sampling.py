"""resample --emit-sql: calib-hash64-v2 in SQL keeps exactly the rows calib resample keeps.

References: the module docstring's test vectors of :mod:`calib_cli.core.sampling`, the NumPy
rule (hash_uint64_keys, row_thresholds, keep_mask) and ``calib resample`` itself (in-process),
on the same rows, run in DuckDB.
"""

from __future__ import annotations

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

from calib_cli.core.sampling import (
    ClassRates,
    hash_keys,
    hash_uint64_keys,
    keep_mask,
    row_thresholds,
)
from calib_cli.errors import InputError
from calib_cli.sql.dialects import SQL_DIALECTS
from calib_cli.sql.sampling import SamplingQuery, sampling_sql
from calib_cli.workflows.resample import ResampleRequest, run_resample

_CON = duckdb.connect()
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


def _hashes_in_duckdb(keys: list[Any], seed: int, key_type: pa.DataType | None = None) -> list[int]:
    """hash64 of each key as the emitted CTEs compute it (hi * 2**32 + lo, in Python)."""
    sql = sampling_sql(
        SamplingQuery(table="t", key_col="id", seed=seed, rates=ClassRates(negative_rate=0.5)),
        dialect_name="duckdb",
    )
    ctes = sql[: sql.index("\nSELECT t.*")]
    ids = pa.array(keys, key_type or pa.int64())
    _CON.register("t", pa.table({"id": ids, "label": [0] * len(keys)}))
    result = _CON.execute(f"{ctes}\nSELECT k, hi, lo FROM _calib_hash").fetchall()
    by_key = {k: (hi << 32) | lo for k, hi, lo in result}
    return [by_key[k] for k in keys]


def test_the_published_test_vectors() -> None:
    assert _hashes_in_duckdb([0, 1, -1], 0) == [
        12035550249420947055,
        627405149472732430,
        3303439293501059696,
    ]
    assert _hashes_in_duckdb([0, 1234567890123], 42) == [
        6332618229526065668,
        17925585971602962171,
    ]


@settings(max_examples=10, deadline=None)
@given(
    keys=st.lists(st.integers(INT64_MIN, INT64_MAX), min_size=1, max_size=60, unique=True),
    seed=st.sampled_from([0, 1, 42, 2**63, 2**64 - 1]),
)
def test_hash_of_any_int64_key_and_seed_equals_numpy(keys: list[int], seed: int) -> None:
    keys = [*keys, 0, -1, INT64_MIN, INT64_MAX]
    keys = list(dict.fromkeys(keys))
    expected = hash_uint64_keys(np.array(keys, dtype=np.int64), seed=seed).tolist()
    assert _hashes_in_duckdb(keys, seed) == expected


def _table(n: int = 3000, seed: int = 0) -> pa.Table:
    rng = np.random.default_rng(seed)
    user = rng.integers(-(10**12), 10**12, n // 3)[rng.integers(0, n // 3, n)]  # shared keys
    label = (rng.random(n) < 0.2).astype(np.int64)
    region = np.array(["eu", "us", "o'x"])[rng.integers(0, 3, n)]
    return pa.table({"row": np.arange(n), "user_id": user, "label": label, "region": region})


def _kept_rows(sql: str, table: pa.Table) -> list[int]:
    _CON.register("t", table)
    return sorted(r[0] for r in _CON.execute(f"SELECT row FROM ({sql}) AS s").fetchall())


@pytest.mark.parametrize(
    "rates",
    [ClassRates(0.1), ClassRates(0.5, 0.25), ClassRates(1.0, 0.3), ClassRates(2**-40, 1.0)],
)
def test_kept_rows_equal_the_numpy_rule(rates: ClassRates) -> None:
    table = _table()
    query = SamplingQuery(table="t", key_col="user_id", seed=7, rates=rates)
    keys = table["user_id"].to_numpy()
    labels = table["label"].to_numpy()
    mask = keep_mask(hash_uint64_keys(keys, seed=7), row_thresholds(labels, rates))
    assert (
        _kept_rows(sampling_sql(query, dialect_name="duckdb"), table)
        == np.flatnonzero(mask).tolist()
    )


def test_stratified_rates_and_weights_equal_calib_resample(tmp_path: Path) -> None:
    """The emitted SELECT against calib resample itself (in-process) on the same file."""
    table = _table(2000, seed=1)
    source = tmp_path / "rows.parquet"
    pl.from_arrow(table).write_parquet(source)  # type: ignore[union-attr]
    rates_file = tmp_path / "rates.csv"
    rates_file.write_text("stratum,negative_rate,positive_rate\neu,0.2,1\nus,0.05,0.5\no'x,1,0.7\n")
    out = tmp_path / "sample.parquet"
    run_resample(
        ResampleRequest(
            file=str(source),
            output=str(out),
            strata_col="region",
            rates_file=str(rates_file),
            key_col="user_id",
            seed=99,
            weight_col_out="w",
        )
    )
    expected = pl.read_parquet(out).sort("row")
    query = SamplingQuery(
        table="t", key_col="user_id", seed=99, strata_col="region", weight_col_out="w",
        stratum_rates={"eu": ClassRates(0.2, 1.0), "us": ClassRates(0.05, 0.5),
                       "o'x": ClassRates(1.0, 0.7)},
    )  # fmt: skip
    _CON.register("t", table)
    sql = sampling_sql(query, dialect_name="duckdb")
    frame = _CON.sql(f"SELECT * FROM ({sql}) s ORDER BY row").pl()
    assert frame.columns == [*table.column_names, "w"]
    assert frame["row"].to_list() == expected["row"].to_list()
    assert frame["w"].to_list() == expected["w"].to_list()


def test_rows_of_a_stratum_without_rates_are_not_returned() -> None:
    """Leaving a stratum's rates out drops its rows and changes no other row."""
    table = _table(1500, seed=2)
    rates = {"eu": ClassRates(0.2, 1.0), "us": ClassRates(0.05, 0.5), "o'x": ClassRates(1.0)}
    every = SamplingQuery(table="t", key_col="user_id", seed=4, strata_col="region",
                          stratum_rates=rates)  # fmt: skip
    two = SamplingQuery(table="t", key_col="user_id", seed=4, strata_col="region",
                        stratum_rates={k: v for k, v in rates.items() if k != "o'x"})  # fmt: skip
    kept_every = _kept_rows(sampling_sql(every, dialect_name="duckdb"), table)
    region = table["region"].to_pylist()
    assert any(region[r] == "o'x" for r in kept_every)
    expected = [r for r in kept_every if region[r] != "o'x"]
    assert _kept_rows(sampling_sql(two, dialect_name="duckdb"), table) == expected


def test_positive_label_text_and_boolean_labels() -> None:
    table = _table(600)
    text = table.set_column(
        2, "label", pa.array(np.where(table["label"].to_numpy() == 1, " yes", "no"))
    )
    rates = ClassRates(0.3, 0.6)
    plain = _kept_rows(
        sampling_sql(SamplingQuery("t", "user_id", seed=3, rates=rates), dialect_name="duckdb"),
        table,
    )
    query = SamplingQuery("t", "user_id", positive_label="yes", seed=3, rates=rates)
    assert _kept_rows(sampling_sql(query, dialect_name="duckdb"), text) == plain
    boolean = table.set_column(2, "label", pa.array(table["label"].to_numpy() == 1))
    query = SamplingQuery("t", "user_id", seed=3, rates=rates)
    assert _kept_rows(sampling_sql(query, dialect_name="duckdb"), boolean) == plain


@pytest.mark.parametrize("name", SQL_DIALECTS)
def test_every_dialect_parses_and_keeps_integers_small(name: str) -> None:
    query = SamplingQuery(
        table="db.events", key_col="user id", seed=2**64 - 1, strata_col="region",
        weight_col_out="w", stratum_rates={"a": ClassRates(0.1), "b": ClassRates(0.5, 0.5)},
    )  # fmt: skip
    sql = sampling_sql(query, dialect_name=name)
    tree = sqlglot.parse_one(sql, read=name)
    assert isinstance(tree, sqlglot.exp.Select)
    literals = [int(v.this) for v in tree.find_all(sqlglot.exp.Literal) if v.is_int]
    assert literals and max(literals) < 2**32  # no constant near the int64 range
    assert "18446744073709551615" not in sql and "9223372036854775807" not in sql


def test_impossible_queries_are_refused() -> None:
    with pytest.raises(InputError, match="table must name one table"):
        sampling_sql(
            SamplingQuery("t; DROP TABLE x", "id", rates=ClassRates(0.1)), dialect_name="duckdb"
        )
    with pytest.raises(InputError, match="negative_rate must be a rate"):
        sampling_sql(SamplingQuery("t", "id", rates=ClassRates(0.0)), dialect_name="duckdb")


def test_resample_emit_sql_workflow(tmp_path: Path) -> None:
    """run_resample_sql: the rates of --rates-file; the options SQL cannot honour refused."""
    from calib_cli.errors import OptionError
    from calib_cli.workflows.export_sql import ResampleSqlRequest, run_resample_sql

    table = _table(1500, seed=4)
    source = tmp_path / "rows.parquet"
    pl.from_arrow(table).write_parquet(source)  # type: ignore[union-attr]
    rates_file = tmp_path / "rates.csv"
    rates_file.write_text("stratum,negative_rate\neu,0.3\nus,0.1\no'x,0.5\n")
    out = tmp_path / "sample.parquet"
    request = ResampleRequest(file=str(source), output=str(out), strata_col="region",
                              rates_file=str(rates_file), key_col="user_id", seed=5)  # fmt: skip
    run_resample(request)
    sql = run_resample_sql(
        ResampleSqlRequest(
            dialect="duckdb",
            table="t",
            key_col="user_id",
            seed=5,
            strata_col="region",
            rates_file=str(rates_file),
            output=str(tmp_path / "q.sql"),
        )
    )
    assert _kept_rows(sql, table) == sorted(pl.read_parquet(out)["row"].to_list())
    for bad, message in (
        ({"key_col": None}, "needs --key-col"),
        ({"target_ratio": "1:4"}, "need the class counts"),
        ({"negative_rate": None}, "needs --negative-rate or --rates-file"),
        ({"negative_rate": 1.5}, "negative-rate"),
    ):
        options = {"dialect": "spark", "table": "t", "key_col": "id", "negative_rate": 0.1} | bad
        with pytest.raises(OptionError, match=message):
            run_resample_sql(ResampleSqlRequest(**options))  # type: ignore[arg-type]


@settings(max_examples=8, deadline=None)
@given(
    keys=st.lists(st.text(max_size=12), min_size=1, max_size=40, unique=True),
    seed=st.sampled_from([0, 42, 2**64 - 1]),
)
def test_text_keys_hash_by_the_key_rule_in_duckdb(keys: list[str], seed: int) -> None:
    """Text keys, each on its own: an integer's text as the integer, other text by FNV-1a over
    its UTF-8 bytes, folded in SQL."""
    keys = [*keys, "", "user-17", "é", "x", "7", "007", "-0", "+7", " 7", "7.0"]
    keys = list(dict.fromkeys(keys))
    assert _hashes_in_duckdb(keys, seed, pa.string()) == hash_keys(keys, seed=seed).tolist()


def test_a_key_hashes_by_its_own_text_whatever_the_column_holds() -> None:
    """ "7" is integer 7 in a column of integers' texts and beside "u9" alike; "007", " 12"
    and "+7" are text (FNV-1a), never 7 or 12; integers beyond int64 from UBIGINT or text."""
    seed = 5
    alone = _hashes_in_duckdb(["7", "-1", "0"], seed, pa.string())
    assert alone == hash_uint64_keys([7, -1, 0], seed=seed).tolist()
    mixed = _hashes_in_duckdb(["7", "-1", "0", "u9"], seed, pa.string())
    assert mixed[:3] == alone
    text = ["007", " 12", "+7", "18446744073709551616"]
    assert _hashes_in_duckdb(text, seed, pa.string()) == hash_keys(text, seed=seed).tolist()
    assert _hashes_in_duckdb(["007"], seed, pa.string()) != alone[:1]
    unsigned = [2**64 - 1, 2**63, 5]
    expected = hash_uint64_keys(np.array(unsigned, dtype=np.uint64), seed=seed).tolist()
    assert _hashes_in_duckdb(unsigned, seed, pa.uint64()) == expected
    assert _hashes_in_duckdb([str(k) for k in unsigned], seed, pa.string()) == expected


def test_text_keys_keep_the_rows_calib_resample_keeps(tmp_path: Path) -> None:
    """The emitted query against calib resample on the same file, for text columns of
    integers' texts, of integers' texts and other ids, and of ids like "007" and " 7"."""
    for ids in (["7", "-3", "123456789012"], ["7", "-3", "u9"], ["007", " 7", "7"]):
        rng = np.random.default_rng(6)
        n = 900
        table = pa.table(
            {
                "row": np.arange(n),
                # many distinct keys when one is not an integer ("u9..."), 3 otherwise
                "user_id": pa.array(
                    [ids[i % 3] + (str(i % 50) if ids[2] == "u9" else "") for i in range(n)]
                ),
                "label": (rng.random(n) < 0.3).astype(np.int64),
            }
        )
        source = tmp_path / "rows.parquet"
        pl.from_arrow(table).write_parquet(source)  # type: ignore[union-attr]
        out = tmp_path / "sample.parquet"
        run_resample(ResampleRequest(file=str(source), output=str(out), key_col="user_id",
                                     negative_rate=0.4, seed=8))  # fmt: skip
        query = SamplingQuery("t", "user_id", seed=8, rates=ClassRates(0.4))
        kept = _kept_rows(sampling_sql(query, dialect_name="duckdb"), table)
        assert kept == sorted(pl.read_parquet(out)["row"].to_list())
