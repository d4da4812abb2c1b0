"""Titles and notes are never broken inside a word: off a terminal (a pipe, a file, a log)
each is one line, however long its file name; on a terminal it wraps at spaces only.

A Rich table's own title wrapped at the table's width, so ``calib show MODEL.json | cat``
printed ``a_really_long_directory_name_for_models/mod`` / ``el_2024_weekly_v3.json: beta ...``;
the other titles folded at the console's width in the middle of the path.
"""

from __future__ import annotations

import io
import re
import shutil
from pathlib import Path

import pytest
from rich.console import Console

from tests.conftest import SAMPLE_DATA, RunCalib

#: with the test's temporary directory, wider than the pinned 160 columns
LONG_DIR = "a_really_long_directory_name_for_models_and_scored_batches_" * 2


@pytest.fixture
def long_dir(tmp_path: Path) -> Path:
    folder = tmp_path / LONG_DIR
    folder.mkdir()
    for name in ("transactions.csv", "shifted_batch.csv"):
        shutil.copy(SAMPLE_DATA / name, folder / f"weekly_{name}")
    return folder


def _lines(data: bytes) -> list[str]:
    return data.decode().splitlines()


def test_show_header_is_one_line_in_a_pipe(invoke_calib: RunCalib, long_dir: Path) -> None:
    model = long_dir / "model_2024_weekly_v3.json"
    done = invoke_calib(
        [
            "recalibrate",
            "--fit",
            str(long_dir / "weekly_transactions.csv"),
            "--method",
            "isotonic",
            "--save-model",
            str(model),
            "-q",
        ]
    )
    assert done.returncode == 0, done.stderr.decode()
    done = invoke_calib(["show", str(model)])
    assert done.returncode == 0, done.stderr.decode()
    first, second = _lines(done.stdout)[:2]
    assert first.startswith(f"{model}: isotonic (schema 1, calib ") and first.endswith(")")
    assert first == first.rstrip() and second.startswith("┌")


def test_report_titles_and_notes_are_one_line_in_a_pipe(
    invoke_calib: RunCalib, long_dir: Path
) -> None:
    reference = long_dir / "weekly_transactions.csv"
    target = long_dir / "weekly_shifted_batch.csv"
    done = invoke_calib(["reliability", str(reference)])
    assert done.returncode == 0, done.stderr.decode()
    assert _lines(done.stdout)[0] == f"Reliability of {reference} (10 uniform bins)"
    done = invoke_calib(["reliability", str(reference), "--by", "segment"])
    assert _lines(done.stdout)[0] == f"Reliability of {reference} (10 uniform bins)"
    done = invoke_calib(
        [
            "estimate-shift",
            "--reference",
            str(reference),
            "--target",
            str(target),
            "--bootstrap",
            "10",
        ]
    )
    assert done.returncode == 0, done.stderr.decode()
    assert _lines(done.stdout)[0] == f"Positive rate of {target}"
    summary = long_dir / "weekly_summary_of_the_transactions.parquet"
    done = invoke_calib(["summarize", str(reference), "-o", str(summary)])
    assert done.returncode == 0, done.stderr.decode()
    (note,) = _lines(done.stderr)
    assert re.fullmatch(rf"{re.escape(str(summary))}: summary of 'score' over 20000 rows, "
                        r"\d+ keys, 1 group\(s\)", note)  # fmt: skip
    output = long_dir / "weekly_recalibrated.csv"
    done = invoke_calib(
        [
            "recalibrate",
            str(target),
            "--fit",
            str(reference),
            "--method",
            "platt",
            "-o",
            str(output),
        ]
    )
    assert done.returncode == 0, done.stderr.decode()
    assert f"On the fit data ({reference})" in _lines(done.stderr)
    assert f"On {target} (20,000 rows)" in _lines(done.stderr)


@pytest.mark.parametrize("terminal", [True, False])
def test_a_title_wraps_only_at_spaces_on_a_terminal(terminal: bool) -> None:
    from calib_cli.report.tables import Line, row_table

    path = f"{LONG_DIR}/target.parquet"
    title = f"Positive rate of {path} (3 rows)"
    buffer = io.StringIO()
    console = Console(file=buffer, width=40, force_terminal=terminal, color_system=None)
    console.print(row_table(title, ["a", "b"], [["1", "2"]]), crop=False)
    console.print(Line(f"saved calibrator (platt): {path}"), crop=False)
    lines = buffer.getvalue().splitlines()
    if terminal:
        assert lines[:3] == ["Positive rate of", path, "(3 rows)"]
        assert lines[-2:] == ["saved calibrator (platt):", path]
    else:
        assert lines[0] == title and lines[-1] == f"saved calibrator (platt): {path}"


def test_a_note_is_plain_text(invoke_calib: RunCalib, tmp_path: Path) -> None:
    """A ``[...]`` in a path is printed, not read as Rich markup (it vanished)."""
    folder = tmp_path / "[run]"
    folder.mkdir()
    summary = folder / "s.parquet"
    done = invoke_calib(["summarize", str(SAMPLE_DATA / "transactions.csv"), "-o", str(summary)])
    assert done.returncode == 0, done.stderr.decode()
    assert _lines(done.stderr)[0].startswith(f"{summary}: summary of 'score'")
