"""A group column with rows without a value and rows whose value is the text "(missing)".

Every report names the rows without a value "(missing)" (``calib_cli.types.MISSING_GROUP``).
A column holding that text as well would give two groups one name (two entries with the same
``group`` in the JSON, two "(missing)" columns in the table): every reader refuses it (exit
65), in every engine and from summaries, and ``summarize`` refuses to write such a summary.
The text alone is the group of that name, as written.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import RunCalib

_MESSAGE = "has rows without a value and rows whose value is the text '(missing)'"


def _write(path: Path, groups: list[str], seed: int = 0) -> None:
    """A CSV of scores and labels with ``groups`` in column ``g`` (an empty text is a row
    without a value)."""
    rng = np.random.default_rng(seed)
    n = len(groups)
    score = rng.beta(2, 5, n)
    label = (rng.random(n) < score).astype(int)
    lines = [
        f"{g},{s!r},{y}" for g, s, y in zip(groups, score.tolist(), label.tolist(), strict=True)
    ]
    path.write_text("g,score,label\n" + "\n".join(lines) + "\n")


@pytest.fixture
def both(tmp_path: Path) -> Path:
    path = tmp_path / "both.csv"
    _write(path, ["a", "(missing)", ""] * 200)
    return path


@pytest.mark.parametrize("engine", ["memory", "streaming"])
def test_reliability_refuses_both_naming_the_file_and_column(
    invoke_calib: RunCalib, both: Path, engine: str
) -> None:
    done = invoke_calib(["reliability", str(both), "--by", "g", "--engine", engine, "--json"])
    assert done.returncode == 65, done.stderr
    assert f"{both.name}: column 'g' {_MESSAGE}".encode() in done.stderr
    assert b"--by would report two groups by one name" in done.stderr
    assert done.stdout == b""


@pytest.mark.parametrize("engine", ["memory", "streaming"])
def test_estimate_shift_refuses_both(
    invoke_calib: RunCalib, both: Path, tmp_path: Path, engine: str
) -> None:
    reference = tmp_path / "ref.csv"
    _write(reference, ["a"] * 600, seed=1)
    args = ["estimate-shift", "--reference", str(reference), "--target", str(both)]
    done = invoke_calib([*args, "--batch-col", "g", "--engine", engine])
    assert done.returncode == 65, done.stderr
    assert _MESSAGE.encode() in done.stderr and b"--batch-col would report" in done.stderr


def test_summarize_refuses_to_write_a_summary_no_reader_takes(
    invoke_calib: RunCalib, both: Path, tmp_path: Path
) -> None:
    out = tmp_path / "s.parquet"
    done = invoke_calib(["summarize", str(both), "--by", "g", "-o", str(out)])
    assert done.returncode == 65, done.stderr
    assert _MESSAGE.encode() in done.stderr
    assert not out.exists()


def test_summaries_of_two_partitions_are_refused_once_merged(
    invoke_calib: RunCalib, tmp_path: Path
) -> None:
    """One partition has rows without a value, another the text: each summary is fine alone,
    their merge is refused by reliability and estimate-shift, naming the summaries."""
    parts = []
    for i, groups in enumerate((["a", ""] * 150, ["a", "(missing)"] * 150)):
        rows, summary = tmp_path / f"p{i}.csv", tmp_path / f"p{i}.parquet"
        _write(rows, groups, seed=i)
        done = invoke_calib(["summarize", str(rows), "--by", "g", "-o", str(summary)])
        assert done.returncode == 0, done.stderr
        parts.append(str(summary))
    alone = invoke_calib(["reliability", "--from-summary", parts[0], "--by", "g", "--json"])
    assert alone.returncode == 0, alone.stderr
    assert [e["group"] for e in json.loads(alone.stdout)] == [None, "a", "(missing)"]
    merged = invoke_calib(["reliability", "--from-summary", *parts, "--by", "g", "--json"])
    assert merged.returncode == 65 and _MESSAGE.encode() in merged.stderr
    assert b"2 summaries of 'score': column 'g'" in merged.stderr
    reference = tmp_path / "ref.csv"
    _write(reference, ["a"] * 600, seed=3)
    args = ["estimate-shift", "--reference", str(reference)]
    for part in parts:
        args += ["--target-summary", part]
    shift = invoke_calib([*args, "--batch-col", "g"])
    assert shift.returncode == 65 and _MESSAGE.encode() in shift.stderr


@pytest.mark.parametrize("engine", ["memory", "streaming"])
def test_the_text_alone_is_the_group_of_that_name(
    invoke_calib: RunCalib, tmp_path: Path, engine: str
) -> None:
    """A value filled in for the missing ones, "(missing)", with no row without a value: one
    group of that name with its rows, in text order among the others (as written)."""
    path = tmp_path / "filled.csv"
    _write(path, ["a", "(missing)", "(missing)"] * 100)
    done = invoke_calib(["reliability", str(path), "--by", "g", "--engine", engine, "--json"])
    assert done.returncode == 0, done.stderr
    results = json.loads(done.stdout)
    assert [(e["group"], e["n"]) for e in results] == [(None, 300), ("(missing)", 200), ("a", 100)]
