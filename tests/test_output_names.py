"""An output's name says what it holds: ``.gz`` is gzip of a text format, refused for a
typed one (a Parquet file named ``o.parquet.gz`` was written uncompressed, and ``zcat``
failed on it)."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from calib_cli.errors import UsageError
from calib_cli.io.formats import output_format
from tests.conftest import RunCalib


@pytest.mark.parametrize(
    ("name", "override"),
    [("o.parquet.gz", None), ("o.arrow.gz", None), ("o.gz", "parquet"), ("o.csv.gz", "arrow")],
)
def test_gz_on_a_typed_format_is_refused(name: str, override: str | None) -> None:
    with pytest.raises(UsageError, match=r"\.gz compresses text outputs .*: drop \.gz"):
        output_format(name, override)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("name", "override", "expected"),
    [
        ("o.csv.gz", None, "csv"),
        ("o.ndjson.GZ", None, "ndjson"),
        ("o.gz", "tsv", "tsv"),
        ("o.parquet", None, "parquet"),
        ("-", None, "csv"),
    ],
)
def test_text_formats_keep_gz(name: str, override: str | None, expected: str) -> None:
    assert output_format(name, override) == expected  # type: ignore[arg-type]


def test_the_installed_command_refuses_before_any_work(
    scored_dir: Path, run_calib: RunCalib
) -> None:
    for command in (
        ["recalibrate", "--negative-rate", "0.1"],
        ["resample", "--negative-rate", "0.1"],
    ):
        args = [command[0], str(scored_dir / "a.csv"), *command[1:], "-o", "o.parquet.gz"]
        done = run_calib(args, cwd=scored_dir)
        assert done.returncode == 2, done.stderr
        assert done.stderr.decode() == (
            "error: o.parquet.gz: .gz compresses text outputs (csv, tsv, ndjson), not parquet: "
            "drop .gz or write a text format\n"
        )
        assert not (scored_dir / "o.parquet.gz").exists()
    done = run_calib(["recalibrate", str(scored_dir / "a.csv"), "--negative-rate", "0.1", "-o",
                      "o.csv.gz", "-q"], cwd=scored_dir)  # fmt: skip
    assert done.returncode == 0
    assert gzip.decompress((scored_dir / "o.csv.gz").read_bytes()).startswith(b"score,")
