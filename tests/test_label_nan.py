"""A NaN label is a missing label in every reader. With ``--positive-label 1`` a float label
column of 1.0 and NaN (NaN is how a float column writes "no label yet") was read as positives
and negatives: no reader refused it, and every figure counted the unlabelled rows as
negatives. It is now refused as missing (exit 65), as an empty field and a null are, in
memory and streaming, Parquet and CSV (where a float NaN is written ``NaN``)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pytest

from calib_cli.errors import ExitCode
from tests.conftest import RunCalib


@pytest.fixture
def files(tmp_path: Path) -> Path:
    rng = np.random.default_rng(3)
    n = 400
    score = rng.uniform(0.05, 0.95, n)
    label = np.where(rng.random(n) < 0.3, np.nan, 1.0)  # ones and "no label yet"
    label[:50] = 0.0  # a second class, so a NaN is a third value only if counted as one
    frame = pl.DataFrame({"score": score, "label": label, "g": rng.integers(0, 3, n)})
    frame.write_parquet(tmp_path / "t.parquet")
    frame.write_csv(tmp_path / "t.csv")  # NaN is written "NaN"
    only = frame.with_columns(  # 1.0 and NaN only: two "values", as a NaN was counted
        pl.when(pl.col("label").is_nan()).then(np.nan).otherwise(1.0).alias("label")
    )
    only.write_parquet(tmp_path / "ones.parquet")
    return tmp_path


COMMANDS = {
    "reliability memory": ["reliability", "{f}", "--engine", "memory"],
    "reliability streaming": ["reliability", "{f}", "--engine", "streaming"],
    "summarize": ["summarize", "{f}", "-o", "s.parquet"],
    "resample": ["resample", "{f}", "-o", "r.parquet", "--negative-rate", "0.5"],
    "recalibrate --fit": ["recalibrate", "{f}", "--fit", "{f}", "--method", "platt", "-o",
                          "c.parquet"],
    "estimate-shift reference": ["estimate-shift", "--reference", "{f}", "--target", "{f}"],
    "rerank-strata memory": ["rerank-strata", "--reference", "{f}", "--target", "{f}",
                             "--strata-col", "g", "-o", "o.parquet", "--engine", "memory"],
    "rerank-strata streaming": ["rerank-strata", "--reference", "{f}", "--target", "{f}",
                                "--strata-col", "g", "-o", "o.parquet", "--engine", "streaming"],
}  # fmt: skip


@pytest.mark.parametrize(
    ("command", "name"),
    # the silent case in every command; CSV's "NaN" text in each engine's reader (in `make
    # test`) and in every command (`make test-slow`)
    [(command, "ones.parquet") for command in COMMANDS]
    + [
        (command, "t.csv")
        if command.startswith("reliability")
        else pytest.param(command, "t.csv", marks=pytest.mark.slow)
        for command in COMMANDS
    ],
)
def test_a_nan_label_is_missing(
    files: Path, invoke_calib: RunCalib, command: str, name: str
) -> None:
    arguments = [a.replace("{f}", name) for a in COMMANDS[command]] + ["--positive-label", "1"]
    done = invoke_calib(arguments, cwd=files)
    assert done.returncode == ExitCode.DATA_ERROR, done.stderr
    message = done.stderr.decode()
    assert "column 'label' has" in message and "values missing (first at row" in message, message


@pytest.mark.parametrize("engine", ["memory", "streaming"])
def test_a_nan_label_is_missing_without_positive_label(
    files: Path, invoke_calib: RunCalib, engine: str
) -> None:
    done = invoke_calib(["reliability", "t.parquet", "--engine", engine], cwd=files)
    assert done.returncode == ExitCode.DATA_ERROR, done.stderr
    assert "column 'label' has" in done.stderr.decode() and "values missing" in done.stderr.decode()
