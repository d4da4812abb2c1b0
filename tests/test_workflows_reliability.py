"""The reliability workflow in-process: a table in, a typed result out (no subprocess)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pytest

from calib_cli.errors import UsageError
from calib_cli.io import Table
from calib_cli.report.payloads import reliability_payload
from calib_cli.workflows.reliability import ReliabilityRequest, assess_table, run_reliability


def _frame(n: int = 400, seed: int = 0) -> pl.DataFrame:
    rng = np.random.default_rng(seed)
    score = rng.uniform(0.01, 0.99, n)
    return pl.DataFrame(
        {
            "score": score,
            "other": np.clip(score + rng.normal(0, 0.1, n), 0, 1),
            "label": (rng.random(n) < score).astype(np.int64),
            "segment": rng.choice([3, 1, 2], n),
        }
    )


def _table(frame: pl.DataFrame) -> Table:
    return Table(frame=frame, name="t.csv", format="parquet")


def test_one_column_gives_one_entry_on_all_rows() -> None:
    frame = _frame()
    result = assess_table(_table(frame), ReliabilityRequest(file="unused"))
    (entry,) = result.entries
    assert (entry.score_column, entry.group, entry.heading) == ("score", None, "score")
    assert entry.summary.n == frame.height
    assert entry.summary.base_rate == pytest.approx(frame["label"].mean())
    assert result.gate_failures == () and result.source == "t.csv"


def test_by_adds_each_group_in_order_with_its_value_as_read() -> None:
    request = ReliabilityRequest(file="unused", score_cols=("score", "other"), by="segment")
    result = assess_table(_table(_frame()), request)
    assert [(e.score_column, e.group) for e in result.entries] == [
        (column, group) for column in ("score", "other") for group in (None, 1, 2, 3)
    ]
    assert result.entries[1].heading == "score\nsegment=1"
    assert result.entries[1].label == "score (segment=1)"
    payload = reliability_payload(result)
    assert isinstance(payload, list) and len(payload) == 8
    first = payload[1]
    assert isinstance(first, dict)
    assert (first["score_column"], first["by"], first["group"], first["seed"]) == (
        "score",
        "segment",
        1,
        0,
    )


def test_a_weight_of_two_counts_as_two_rows() -> None:
    frame = _frame(100)
    doubled = pl.concat([frame, frame.head(10)])
    weighted = frame.with_columns(
        pl.Series("w", np.r_[np.full(10, 2.0), np.ones(frame.height - 10)])
    )
    plain = assess_table(_table(doubled), ReliabilityRequest(file="unused"))
    heavy = assess_table(_table(weighted), ReliabilityRequest(file="unused", weight_col="w"))
    assert heavy.entries[0].summary.ece == pytest.approx(plain.entries[0].summary.ece)
    assert heavy.entries[0].summary.auc == pytest.approx(plain.entries[0].summary.auc)


def test_gates_that_fail_are_named_in_the_result() -> None:
    request = ReliabilityRequest(file="unused", fail_above_ece=1e-9, fail_below_auc=0.5)
    result = assess_table(_table(_frame()), request)
    assert len(result.gate_failures) == 1
    assert result.gate_failures[0].startswith("ECE ") and "for score" in result.gate_failures[0]


def test_run_reads_the_file_drops_invalid_rows_and_warns(tmp_path: Path) -> None:
    path = tmp_path / "s.csv"
    lines = _frame(50).write_csv().splitlines()
    lines[4] = "1.5," + lines[4].split(",", 1)[1]  # row 4 of the file: a score above 1
    path.write_text("\n".join(lines) + "\n")
    warnings: list[str] = []
    request = ReliabilityRequest(file=str(path), on_invalid="drop")
    result = run_reliability(request, warn=warnings.append)
    assert result.entries[0].summary.n == 49
    assert warnings == [f"{path}: dropped 1 invalid row of 50"]


def test_a_non_finite_gate_is_a_usage_error(tmp_path: Path) -> None:
    path = tmp_path / "s.csv"
    _frame(20).write_csv(path)
    with pytest.raises(UsageError, match="--fail-above-ece must be a finite number"):
        run_reliability(ReliabilityRequest(file=str(path), fail_above_ece=float("nan")))
