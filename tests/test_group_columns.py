"""Grouping columns (``--by``, ``--batch-col``, ``--strata-col``) in every engine: a nested
column (lists, structs) is refused with exit 65 and one line, where it crashed (exit 70); a
boolean column's groups are the same text in every engine, where the in-memory report kept
JSON booleans and the streaming one text, so ``--engine auto`` changed them at 2M rows."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from calib_cli.errors import ExitCode
from tests.conftest import RunCalib

NESTED = "holds {kind} values, and {option} groups by one value per row: name a column of "


@pytest.fixture
def nested(tmp_path: Path) -> Path:
    rng = np.random.default_rng(5)
    n = 200
    score = rng.uniform(0.05, 0.95, n)
    pl.DataFrame(
        {
            "score": score,
            "label": (rng.random(n) < score).astype(np.int64),
            "g_list": [[int(i % 3)] for i in range(n)],
            "g_struct": [{"a": int(i % 3)} for i in range(n)],
            "flag": rng.random(n) < 0.5,
        }
    ).write_parquet(tmp_path / "t.parquet")
    return tmp_path


@pytest.mark.parametrize("kind", ["list", "struct"])
@pytest.mark.parametrize(
    "args",
    [
        ["reliability", "t.parquet", "--engine", "memory", "--by"],
        ["reliability", "t.parquet", "--engine", "streaming", "--by"],
        ["estimate-shift", "--reference", "t.parquet", "--target", "t.parquet", "--batch-col"],
        ["resample", "t.parquet", "-o", "o.parquet", "--negative-rate", "0.5", "--strata-col"],
        ["rerank-strata", "--reference", "t.parquet", "--target", "t.parquet", "-o",
         "o.parquet", "--strata-col"],
        ["rerank-strata", "--reference", "t.parquet", "--target", "t.parquet", "-o",
         "o.parquet", "--engine", "streaming", "--strata-col"],
    ],
    ids=lambda args: "-".join(a for a in args if a.startswith(("r", "e", "m", "s")))[:40],
)  # fmt: skip
def test_a_nested_grouping_column_is_bad_input_in_every_command_and_engine(
    nested: Path, invoke_calib: RunCalib, args: list[str], kind: str
) -> None:
    done = invoke_calib([*args, f"g_{kind}"], cwd=nested)
    option = args[-1]
    assert done.returncode == ExitCode.DATA_ERROR, done.stderr
    lines = done.stderr.decode().strip().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith(f"error: t.parquet: column 'g_{kind}' ")
    assert NESTED.format(kind=kind, option=option) in lines[0]
    assert not (nested / "o.parquet").exists()


def test_boolean_groups_are_the_same_text_in_every_engine(
    nested: Path, invoke_calib: RunCalib
) -> None:
    groups = {}
    for engine in ("memory", "streaming"):
        done = invoke_calib(
            ["reliability", "t.parquet", "--by", "flag", "--engine", engine, "--json"], cwd=nested
        )
        assert done.returncode == 0, done.stderr
        groups[engine] = [entry["group"] for entry in json.loads(done.stdout)]
    assert groups["memory"] == groups["streaming"] == [None, "false", "true"]


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        ([1.5, 2.0, 1e10, float("nan")], [1.5, 2.0, 10000000000.0, "(missing)"]),
        ([dt.date(2024, 1, 1), dt.date(2024, 2, 1)], ["2024-01-01", "2024-02-01"]),
        (
            [dt.datetime(2024, 1, 1, 5), dt.datetime(2024, 2, 1, 0, 0, 0, 123)],
            ["2024-01-01 05:00:00", "2024-02-01 00:00:00.000123"],
        ),
        ([30, 1, -4], [-4, 1, 30]),
    ],
    ids=["float", "date", "datetime", "int"],
)
def test_typed_groups_are_the_same_values_in_every_engine(
    tmp_path: Path, invoke_calib: RunCalib, values: list[object], expected: list[object]
) -> None:
    """The streaming pass groups by the column's text (Polars' cast to String), and reported
    that text: a float column's groups were JSON strings ("1.5") where the in-memory engine
    gave numbers (1.5), and a datetime's "2024-01-01 05:00:00.000000" where memory gave
    "2024-01-01 05:00:00", so --engine auto changed them at 2M rows."""
    rng = np.random.default_rng(11)
    n = 600
    score = rng.uniform(0.05, 0.95, n)
    pl.DataFrame(
        {
            "score": score,
            "label": (rng.random(n) < score).astype(np.int64),
            "g": [values[i % len(values)] for i in range(n)],
        }
    ).write_parquet(tmp_path / "t.parquet")
    reports = {}
    for engine in ("memory", "streaming"):
        done = invoke_calib(
            ["reliability", "t.parquet", "--by", "g", "--engine", engine, "--json"], cwd=tmp_path
        )
        assert done.returncode == 0, done.stderr
        reports[engine] = json.loads(done.stdout)
    for engine, entries in reports.items():
        assert [entry["group"] for entry in entries] == [None, *expected], engine
    for ours, theirs in zip(reports["memory"], reports["streaming"], strict=True):
        assert ours["n"] == theirs["n"] and ours["auc"] == pytest.approx(theirs["auc"], abs=1e-12)
