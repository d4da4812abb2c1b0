"""Pass-through columns keep their values exactly when CSV becomes a typed format (Parquet,
Arrow, NDJSON): a value that would not come back as the same text through the inferred type
keeps its column as text, in the in-memory and the streaming readers alike.

The installed command runs once (CSV on stdin to Parquet); every source, format and command
is checked by calling its workflow in-process."""

from __future__ import annotations

import gzip
import io
import sys
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from calib_cli.io.read import exact_types, typed_columns
from calib_cli.workflows.estimate_shift import EstimateShiftRequest, run_estimate_shift
from calib_cli.workflows.recalibrate import RecalibrateRequest, run_recalibrate
from calib_cli.workflows.resample import ResampleRequest, run_resample
from tests.conftest import RunCalib

N = 400


def _csv(n: int = N) -> bytes:
    rng = np.random.default_rng(2)
    score = np.round(rng.beta(2, 5, n), 6)
    lines = ["id,score,label,price,signed,sci,padded,count"]
    for i in range(n):
        lines.append(
            f"{i:05d},{score[i]},{int(rng.random() < score[i])},"
            f"{i % 7}.50,+{i % 3},1e{i % 4},{' ' if i % 2 else ''}{i % 9},{i}"
        )
    return ("\n".join(lines) + "\n").encode()


def _expected() -> pl.DataFrame:
    return pl.read_csv(_csv(), infer_schema=False)


PASS_THROUGH = ["id", "price", "signed", "sci", "padded"]


def _check(frame: pl.DataFrame) -> None:
    expected = _expected()
    for column in PASS_THROUGH:
        assert frame[column].dtype == pl.String, column
        kept = frame[column].to_list()
        assert set(kept) <= set(expected[column].to_list()), column
    assert frame["count"].dtype == pl.Int64  # numbers that come back exactly stay numbers
    assert frame["score"].dtype == pl.Float64


READERS = {".parquet": pl.read_parquet, ".arrow": pl.read_ipc, ".ndjson": pl.read_ndjson}


def test_recalibrate_from_stdin_keeps_pass_through_text(
    run_calib: RunCalib, tmp_path: Path
) -> None:
    # the other sources and formats, resample and estimate-shift: in-process below
    out = tmp_path / "out.parquet"
    done = run_calib(
        ["recalibrate", "-", "--negative-rate", "0.5", "-o", str(out), "-q"], stdin=_csv()
    )
    assert done.returncode == 0, done.stderr
    frame = pl.read_parquet(out)
    _check(frame)
    assert frame["id"].to_list() == _expected()["id"].to_list()


# ------------------------------------------------------------- the workflows, in-process


@pytest.mark.parametrize("source", ["file", "stdin", "gzip"])
@pytest.mark.parametrize("suffix", [".parquet", ".arrow", ".ndjson"])
def test_recalibrate_keeps_pass_through_text(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, source: str, suffix: str
) -> None:
    data = _csv()
    argument = str(tmp_path / "in.csv")
    Path(argument).write_bytes(data)
    if source == "stdin":
        argument = "-"
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data)))
    elif source == "gzip":
        argument = str(tmp_path / "in.csv.gz")
        Path(argument).write_bytes(gzip.compress(data))
    out = tmp_path / f"out{suffix}"
    run_recalibrate(RecalibrateRequest(file=argument, negative_rate=0.5, output=str(out)))
    frame = READERS[suffix](out)
    _check(frame)
    assert frame["id"].to_list() == _expected()["id"].to_list()


@pytest.mark.parametrize("key", [False, True])
def test_resample_keeps_pass_through_text(tmp_path: Path, key: bool) -> None:
    path = tmp_path / "in.csv"
    path.write_bytes(_csv())
    out = tmp_path / "out.parquet"
    run_resample(
        ResampleRequest(
            file=str(path), output=str(out), negative_rate=0.5, key_col="id" if key else None
        )
    )
    _check(pl.read_parquet(out))


def test_estimate_shift_keeps_pass_through_text(tmp_path: Path) -> None:
    path = tmp_path / "in.csv"
    path.write_bytes(_csv())
    out = tmp_path / "out.parquet"
    run_estimate_shift(EstimateShiftRequest(reference=str(path), target=str(path), output=str(out)))
    _check(pl.read_parquet(out))


def test_exact_types_rules() -> None:
    text = pl.LazyFrame(
        {
            "zeros": ["00123", "7"],
            "trailing": ["1.50", "2"],
            "plus": ["+3", "4"],
            "sci": ["1e3", "5"],
            "space": [" 7", "8"],
            "ints": ["1", None],
            "floats": ["0.25", "1"],
            "big": ["18446744073709551615", "1"],
            "flags": ["true", "false"],
            "words": ["a", "b"],
        }
    )
    types = exact_types(text, text_columns=["ints"])
    assert {k: str(v) for k, v in types.items() if v != pl.String} == {
        "floats": "Float64",
        "flags": "Boolean",
    }
    typed = text.with_columns(typed_columns(types)).collect()
    assert typed["floats"].to_list() == [0.25, 1.0]
    assert typed["flags"].to_list() == [True, False]
