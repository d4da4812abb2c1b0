"""Blank lines in a CSV or TSV are not rows.

An editor or ``cat a.csv b.csv`` leaves a blank line at the end or in the middle of a file,
and a CRLF file's blank line is ``\\r\\n``; the CSV parser reads each as a row of nulls, so
every command failed ("column 'score' has 1 value missing or NaN (first at row 5: nan)"),
naming a value the file does not show. Each command, in each engine and from standard input
or a gzip file, now gives exactly what it gives for the same file without those lines.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from tests.conftest import RunCalib

N = 400


def _lines(seed: int = 0, *, separator: str = ",") -> list[str]:
    rng = np.random.default_rng(seed)
    score = rng.beta(2, 5, N)
    label = (rng.random(N) < score).astype(int)
    day = rng.choice(["mon", "tue"], N)
    rows = zip(range(N), score.tolist(), label.tolist(), day.tolist(), strict=True)
    return [separator.join(["id", "score", "label", "day"])] + [
        separator.join([str(i), repr(s), str(y), d]) for i, s, y, d in rows
    ]


def _with_blank_lines(lines: list[str], *, newline: str = "\n", separator: str = ",") -> str:
    """``lines`` with a blank line after the header's next row, one of separators alone in
    the middle, and two at the end (one with white space the CSV reader keeps as a row too:
    the file's newline)."""
    blank_middle = separator * 3
    body = [*lines[:2], "", *lines[2:200], blank_middle, *lines[200:], "", ""]
    return newline.join(body)


@pytest.fixture
def files(tmp_path: Path) -> tuple[Path, Path]:
    lines = _lines()
    clean, blank = tmp_path / "clean.csv", tmp_path / "blank.csv"
    clean.write_text("\n".join(lines) + "\n")
    blank.write_text(_with_blank_lines(lines))
    return clean, blank


@pytest.mark.parametrize("engine", ["memory", "streaming"])
def test_reliability_reads_the_rows_and_only_them(
    invoke_calib: RunCalib, files: tuple[Path, Path], engine: str
) -> None:
    clean, blank = files
    args = ["--engine", engine, "--by", "day", "--json"]
    expected = invoke_calib(["reliability", str(clean), *args])
    done = invoke_calib(["reliability", str(blank), *args])
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == json.loads(expected.stdout)
    assert json.loads(done.stdout)[0]["n"] == N


@pytest.mark.parametrize("newline", ["\n", "\r\n"])
def test_standard_input_gzip_and_crlf(
    invoke_calib: RunCalib, files: tuple[Path, Path], tmp_path: Path, newline: str
) -> None:
    clean, _ = files
    text = _with_blank_lines(_lines(), newline=newline).encode()
    packed = tmp_path / "blank.csv.gz"
    packed.write_bytes(gzip.compress(text))
    for engine in ("memory", "streaming"):
        args = ["--engine", engine, "--json"]
        expected = json.loads(invoke_calib(["reliability", str(clean), *args]).stdout)
        piped = invoke_calib(["reliability", "-", *args], stdin=text)
        assert piped.returncode == 0, piped.stderr
        assert json.loads(piped.stdout) == expected
        done = invoke_calib(["reliability", str(packed), *args])
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout) == expected


def test_tsv(invoke_calib: RunCalib, tmp_path: Path) -> None:
    lines = _lines(separator="\t")
    clean, blank = tmp_path / "clean.tsv", tmp_path / "blank.tsv"
    clean.write_text("\n".join(lines) + "\n")
    blank.write_text(_with_blank_lines(lines, separator="\t"))
    for engine in ("memory", "streaming"):
        args = ["--engine", engine, "--json"]
        expected = invoke_calib(["reliability", str(clean), *args])
        done = invoke_calib(["reliability", str(blank), *args])
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout) == json.loads(expected.stdout)


@pytest.mark.parametrize("engine", ["memory", "streaming"])
def test_rows_written_are_the_rows_read(
    invoke_calib: RunCalib, files: tuple[Path, Path], tmp_path: Path, engine: str
) -> None:
    """recalibrate writes one row per row read, none for a blank line; resample keeps the
    rows it keeps from the clean file (its default key is the row number: blank lines are not
    counted); estimate-shift's batches are the clean file's."""
    clean, blank = files
    outputs = []
    for source in (clean, blank):
        out = tmp_path / f"{source.stem}.recalibrated.csv"
        args = ["recalibrate", str(source), "--negative-rate", "0.5", "--engine", engine]
        done = invoke_calib([*args, "-o", str(out)])
        assert done.returncode == 0, done.stderr
        outputs.append(pl.read_csv(out))
    assert outputs[1].height == N
    assert outputs[1].equals(outputs[0])
    samples = []
    for source in (clean, blank):
        out = tmp_path / f"{source.stem}.sample.csv"
        done = invoke_calib(["resample", str(source), "--negative-rate", "0.3", "-o", str(out)])
        assert done.returncode == 0, done.stderr
        samples.append(out.read_text())
    assert samples[1] == samples[0]
    reports = []
    for source in (clean, blank):
        args = ["estimate-shift", "--reference", str(clean), "--target", str(source)]
        done = invoke_calib([*args, "--batch-col", "day", "--engine", engine, "--json"])
        assert done.returncode == 0, done.stderr
        reports.append(json.loads(done.stdout)["batches"])
    assert reports[1] == reports[0]


@pytest.mark.parametrize("engine", ["memory", "streaming"])
def test_a_file_of_blank_lines_has_no_rows_and_a_bad_row_is_still_named(
    invoke_calib: RunCalib, tmp_path: Path, engine: str
) -> None:
    empty = tmp_path / "empty.csv"
    empty.write_text("score,label\n\n\r\n,\n")
    done = invoke_calib(["reliability", str(empty), "--engine", engine])
    assert done.returncode == 65
    assert b"no data rows" in done.stderr
    bad = tmp_path / "bad.csv"
    bad.write_text("score,label\n0.2,1\n\n0.5,x\n0.4,0\n")
    done = invoke_calib(["reliability", str(bad), "--engine", engine])
    assert done.returncode == 65
    assert b"(first at row 2: 'x')" in done.stderr  # the second row read


def test_a_row_with_some_values_missing_is_still_refused(
    invoke_calib: RunCalib, tmp_path: Path
) -> None:
    """Only a line with no value in any column is skipped: a row without its score is one."""
    path = tmp_path / "gap.csv"
    path.write_text("score,label\n0.2,1\n,0\n0.4,0\n")
    done = invoke_calib(["reliability", str(path)])
    assert done.returncode == 65
    assert b"column 'score' has 1 value missing" in done.stderr


def test_gzip_under_a_plain_name_keeps_the_same_rows_in_both_engines(
    invoke_calib: RunCalib, files: tuple[Path, Path], tmp_path: Path
) -> None:
    """A gzip CSV named .csv: its compressed bytes cannot be searched for blank lines, so the
    streaming scan filters always (it kept a row of nulls the memory engine skipped)."""
    clean, blank = files
    packed = tmp_path / "packed.csv"
    packed.write_bytes(gzip.compress(blank.read_bytes()))
    for engine in ("memory", "streaming"):
        args = ["--engine", engine, "--json"]
        expected = json.loads(invoke_calib(["reliability", str(clean), *args]).stdout)
        done = invoke_calib(["reliability", str(packed), *args])
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout) == expected
