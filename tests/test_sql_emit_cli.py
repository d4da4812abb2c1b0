"""resample --emit-sql and summarize --emit-sql, end to end: the installed command's SQL, run
in DuckDB, keeps the rows resample keeps and gives the summary summarize writes (the runs on
the file in-process, through the same workflows)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import polars as pl
import pytest

from calib_cli.cli.export_sql import DialectChoice, sql_target
from calib_cli.errors import UsageError
from calib_cli.io.summary_file import read_summary
from calib_cli.sql.summary import METADATA_COLUMN
from calib_cli.summaries import ScoreSummary
from calib_cli.summaries.summary import COUNT_COLUMNS, KEY_COLUMNS, SUM_COLUMNS
from calib_cli.workflows.resample import ResampleRequest, run_resample
from calib_cli.workflows.summarize import SummarizeRequest, run_summarize
from tests.conftest import RunCalib


def test_emit_sql_commands_match_the_commands_on_files(tmp_path: Path, run_calib: RunCalib) -> None:
    rng = np.random.default_rng(11)
    n = 2000
    frame = pl.DataFrame(
        {
            "row": np.arange(n),
            "user_id": rng.integers(0, 500, n),
            "score": rng.beta(0.5, 3.0, n),
            "label": (rng.random(n) < 0.15).astype(np.int64),
            "day": rng.choice(["mon", "tue"], n),
        }
    )
    source = tmp_path / "rows.parquet"
    frame.write_parquet(source)
    con = duckdb.connect()
    con.execute(f"CREATE VIEW t AS SELECT * FROM read_parquet('{source}')")

    options = ["--key-col", "user_id", "--negative-rate", "0.2", "--seed", "3"]
    emitted = run_calib(["resample", "--emit-sql", "--dialect", "duckdb", "--table", "t", *options])
    assert emitted.returncode == 0 and emitted.stderr == b""
    sample = tmp_path / "sample.parquet"
    run_resample(ResampleRequest(file=str(source), output=str(sample), key_col="user_id",
                                 negative_rate=0.2, seed=3))  # fmt: skip
    kept = sorted(
        r[0] for r in con.execute(f"SELECT row FROM ({emitted.stdout.decode()})").fetchall()
    )
    assert kept == sorted(pl.read_parquet(sample)["row"].to_list())

    sql_file = tmp_path / "summary.sql"
    emitted = run_calib(["summarize", "--emit-sql", "--dialect", "duckdb", "--table", "t",
                         "--by", "day", "--bins", "5", "-o", str(sql_file)])  # fmt: skip
    assert emitted.returncode == 0 and emitted.stdout == b""
    relation = con.sql(sql_file.read_text())
    rows = relation.fetchall()
    columns: dict[str, Any] = {
        name: [row[i] for row in rows] for i, name in enumerate(relation.columns)
    }
    (meta,) = set(columns.pop(METADATA_COLUMN))
    arrays = {
        k: np.array([*v, None], dtype=object)[:-1] if k == "group" else np.array(v, dtype=float)
        for k, v in columns.items()
    }
    engine = ScoreSummary.from_columns(arrays, json.loads(meta))
    summary = tmp_path / "calib.parquet"
    run_summarize(SummarizeRequest(files=(str(source),), output=str(summary), by="day", n_bins=5))
    calib = read_summary(str(summary))
    assert engine.metadata() == calib.metadata() and engine.groups == calib.groups
    for name in (*KEY_COLUMNS, *COUNT_COLUMNS, "score_min", "score_max", "weight_min"):
        np.testing.assert_array_equal(engine.column(name), calib.column(name), err_msg=name)
    for name in SUM_COLUMNS:
        np.testing.assert_allclose(engine.column(name), calib.column(name), rtol=1e-9,
                                   atol=1e-12, err_msg=name)  # fmt: skip


def test_emit_sql_options_go_together() -> None:
    duck = DialectChoice("duckdb")
    assert sql_target(False, None, None, inputs=True) is None
    assert sql_target(True, duck, "t", inputs=False) == ("duckdb", "t")
    with pytest.raises(UsageError, match="go with --emit-sql"):
        sql_target(False, duck, None, inputs=True)
    with pytest.raises(UsageError, match="reads no FILE"):
        sql_target(True, duck, "t", inputs=True)
    with pytest.raises(UsageError, match="needs --dialect and --table"):
        sql_target(True, None, None, inputs=False)
    # the one missing is named ("needs --dialect and --table" when --dialect was given)
    with pytest.raises(UsageError, match=r"^--emit-sql needs --dialect$"):
        sql_target(True, None, "t", inputs=False)
    with pytest.raises(UsageError, match=r"^--emit-sql needs --table$"):
        sql_target(True, duck, None, inputs=False)
