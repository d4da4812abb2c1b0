"""Outputs that cannot be written are refused before any work, so none is left replaced.

The check before any work asked ``os.access``, which says yes to root (a container's user)
for a directory in ``/sys`` and for an immutable file, so ``resample`` wrote its new sample and
then failed on the record, leaving the new sample beside the old record (whose rate a later
``recalibrate --sampling-record`` would apply), and ``recalibrate -o ok.csv --report
/sys/r.json`` wrote ``ok.csv`` and exited 73. The check now creates (and removes) a file
where the writer will, and reads an existing file's attributes.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import SAMPLE_DATA, RunCalib

TRAIN = str(SAMPLE_DATA / "train.csv")
SCORED = str(SAMPLE_DATA / "overconfident.csv")


def _leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.startswith("."))


@pytest.mark.skipif(not Path("/sys/kernel").is_dir(), reason="needs Linux's /sys")
def test_a_directory_no_one_can_create_files_in_is_refused_first(
    invoke_calib: RunCalib, tmp_path: Path
) -> None:
    out = tmp_path / "ok.csv"
    args = ["recalibrate", SCORED, "--negative-rate", "0.5", "-o", str(out)]
    done = invoke_calib([*args, "--report", "/sys/kernel/calib-report.json"])
    assert done.returncode == 73, done.stderr
    assert done.stderr.startswith(b"error: /sys/kernel/calib-report.json: cannot write (")
    assert not out.exists()


def _immutable(path: Path) -> bool:
    """Mark ``path`` immutable (root, and a file system with attributes), or say it cannot."""
    chattr = shutil.which("chattr")
    if chattr is None:
        return False
    return subprocess.run([chattr, "+i", str(path)], capture_output=True).returncode == 0


def test_an_immutable_record_stops_resample_before_the_sample_is_replaced(
    invoke_calib: RunCalib, tmp_path: Path
) -> None:
    out, record = tmp_path / "x.csv", tmp_path / "x.csv.sampling.json"
    first = invoke_calib(["resample", TRAIN, "--negative-rate", "0.1", "-o", str(out), "-q"])
    assert first.returncode == 0, first.stderr
    sample, kept = out.read_bytes(), record.read_bytes()
    if not _immutable(record):
        pytest.skip("chattr +i needs root and a file system with attributes")
    try:
        again = invoke_calib(["resample", TRAIN, "--negative-rate", "0.3", "-o", str(out), "-q"])
    finally:
        subprocess.run(["chattr", "-i", str(record)], check=True)
    assert again.returncode == 73
    assert b"x.csv.sampling.json: cannot write (the file is immutable or append-only" in (
        again.stderr
    )
    assert out.read_bytes() == sample and record.read_bytes() == kept
    assert _leftovers(tmp_path) == []


def test_a_read_only_file_in_a_writable_directory_is_still_replaced(
    invoke_calib: RunCalib, tmp_path: Path
) -> None:
    """As ``mv`` does: the rename needs the directory, not the file, to be writable."""
    out = tmp_path / "ok.csv"
    out.write_text("old\n")
    out.chmod(0o444)
    done = invoke_calib(["recalibrate", SCORED, "--negative-rate", "0.5", "-o", str(out)])
    assert done.returncode == 0, done.stderr
    assert out.read_text().splitlines()[0] == "id,score,label,calibrated"
    assert _leftovers(tmp_path) == []


def test_the_installed_command_leaves_no_probe_behind(run_calib: RunCalib, tmp_path: Path) -> None:
    out, report = tmp_path / "ok.parquet", tmp_path / "report.json"
    args = ["recalibrate", SCORED, "--negative-rate", "0.5", "-o", str(out)]
    done = run_calib([*args, "--report", str(report)])
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ok.parquet", "report.json"]
