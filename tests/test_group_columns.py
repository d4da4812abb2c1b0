"""Grouping columns (``--by``, ``--batch-col``, ``--strata-col``) in every engine: a nested
column (lists, structs) is refused with exit 65 and one line, where it crashed (exit 70); a
boolean column's groups are the same text in every engine, where the in-memory report kept
JSON booleans and the streaming one text, so ``--engine auto`` changed them at 2M rows."""

from __future__ import annotations

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
    nested: Path, run_calib: RunCalib, args: list[str], kind: str
) -> None:
    done = run_calib([*args, f"g_{kind}"], cwd=nested)
    option = args[-1]
    assert done.returncode == ExitCode.DATA_ERROR, done.stderr
    lines = done.stderr.decode().strip().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith(f"error: t.parquet: column 'g_{kind}' ")
    assert NESTED.format(kind=kind, option=option) in lines[0]
    assert not (nested / "o.parquet").exists()


def test_boolean_groups_are_the_same_text_in_every_engine(
    nested: Path, run_calib: RunCalib
) -> None:
    groups = {}
    for engine in ("memory", "streaming"):
        done = run_calib(
            ["reliability", "t.parquet", "--by", "flag", "--engine", engine, "--json"], cwd=nested
        )
        assert done.returncode == 0, done.stderr
        groups[engine] = [entry["group"] for entry in json.loads(done.stdout)]
    assert groups["memory"] == groups["streaming"] == [None, "false", "true"]
