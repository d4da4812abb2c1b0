"""Choosing the in-memory or the streaming engine from the size of the inputs."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from calib_cli import io
from calib_cli.workflows import common


def _rows(n: int) -> pl.DataFrame:
    return pl.DataFrame({"score": [i / n for i in range(n)], "label": [i % 2 for i in range(n)]})


def test_row_count_hint_is_exact_for_parquet_and_arrow(tmp_path: Path) -> None:
    frame = _rows(1234)
    frame.write_parquet(tmp_path / "a.parquet")
    frame.write_ipc(tmp_path / "a.arrow")
    assert io.row_count_hint(str(tmp_path / "a.parquet")) == 1234
    assert io.row_count_hint(str(tmp_path / "a.arrow")) == 1234


def test_row_count_hint_estimates_text_files_and_knows_nothing_of_stdin(tmp_path: Path) -> None:
    _rows(5000).write_csv(tmp_path / "a.csv")
    _rows(5000).write_ndjson(tmp_path / "a.ndjson")
    for name in ("a.csv", "a.ndjson"):
        hint = io.row_count_hint(str(tmp_path / name))
        assert hint is not None and 4000 <= hint <= 6500, (name, hint)
    assert io.row_count_hint("-") is None


def test_auto_streams_only_above_the_threshold(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = str(tmp_path / "a.parquet")
    _rows(100).write_parquet(path)
    assert common.choose_engine("auto", [path]) == "memory"
    assert common.choose_engine("streaming", [path]) == "streaming"
    assert common.choose_engine("memory", [path, path]) == "memory"
    monkeypatch.setattr(common, "STREAMING_ROWS", 150)
    assert common.choose_engine("auto", [path]) == "memory"
    assert common.choose_engine("auto", [path, path]) == "streaming"
    assert common.choose_engine("auto", [path, "-"]) == "memory"
