"""``calib reliability --engine streaming`` end to end, and the progress display."""

from __future__ import annotations

import io
import json
import subprocess
import time
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest
from rich.console import Console

from calib_cli.cli.session import Session
from tests.conftest import RunCalib

EXACT = ("n", "weight_total", "positives", "base_rate", "mean_score", "log_loss", "brier", "ece")


def _frame(n: int = 2000, seed: int = 0) -> pl.DataFrame:
    rng = np.random.default_rng(seed)
    score = rng.beta(1.0, 5.0, n)
    return pl.DataFrame(
        {
            "score": score,
            "label": np.where(rng.random(n) < score, "yes", "no"),
            "day": rng.integers(1, 4, n),
        }
    )


def _json(done: subprocess.CompletedProcess[bytes]) -> Any:
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.mark.parametrize("suffix", [".csv", ".parquet", ".ndjson", "stdin"])
def test_streaming_gives_the_in_memory_figures(
    run_calib: RunCalib, tmp_path: Path, suffix: str
) -> None:
    frame = _frame()
    path = tmp_path / ("rows.csv" if suffix == "stdin" else f"rows{suffix}")
    if path.suffix == ".parquet":
        frame.write_parquet(path)
    elif path.suffix == ".ndjson":
        frame.write_ndjson(path)
    else:
        frame.write_csv(path)
    args = ["--positive-label", "yes", "--by", "day", "--json"]
    source = "-" if suffix == "stdin" else str(path)
    stdin = path.read_bytes() if suffix == "stdin" else None
    memory = _json(run_calib(["reliability", source, *args, "--engine", "memory"], stdin=stdin))
    streaming = _json(
        run_calib(["reliability", source, *args, "--engine", "streaming"], stdin=stdin)
    )
    assert [e["group"] for e in streaming] == [e["group"] for e in memory] == [None, 1, 2, 3]
    for m, s in zip(memory, streaming, strict=True):
        assert (m["engine"], s["engine"]) == ("memory", "streaming")
        assert list(m) == list(s) and set(m["exactness"]) == set(s["exactness"])
        for key in EXACT:
            assert s[key] == pytest.approx(m[key], rel=1e-9, abs=1e-12), key
        assert abs(s["auc"] - m["auc"]) <= s["exactness"]["auc_bound"] + 1e-12
        assert m["exactness"]["auc_bound"] == 0.0


def test_streaming_refuses_bad_rows_like_memory(run_calib: RunCalib, tmp_path: Path) -> None:
    path = tmp_path / "bad.csv"
    path.write_text("score,label\n0.1,0\n0.2,2\n0.3,1\n0.4,3\n")
    lines = set()
    for engine in ("memory", "streaming"):
        done = run_calib(["reliability", str(path), "--engine", engine])
        assert done.returncode == 65 and done.stdout == b""
        lines.add(done.stderr.decode().strip())
    assert lines == {
        f"error: {path}: column 'label' has 2 values that are not 0/1 or true/false "
        "(first at row 2: '2'); name the positive value with --positive-label"
    }


def test_streaming_bootstrap_and_quiet_pipes_stay_clean(
    run_calib: RunCalib, tmp_path: Path
) -> None:
    path = tmp_path / "rows.parquet"
    _frame().write_parquet(path)
    done = run_calib(
        [
            "reliability",
            str(path),
            "--engine",
            "streaming",
            "--positive-label",
            "yes",
            "--bootstrap",
            "50",
            "--json",
        ]
    )
    report = _json(done)
    assert done.stderr == b""  # no progress off a terminal
    low, high = report["ece_ci"]
    assert low <= report["ece"] <= high or low <= high


def test_progress_shows_on_a_terminal_after_the_delay_only() -> None:
    buffer = io.StringIO()
    err = Console(file=buffer, force_terminal=True, width=80)
    session = Session(out=Console(file=io.StringIO()), err=err, quiet=False, debug=False)
    with session.progress("summarising rows.parquet", delay=0.0) as step:
        step("pass 1/2: summarising rows.parquet")
        time.sleep(0.3)
    assert "pass 1/2: summarising rows.parquet" in buffer.getvalue()
    quick = io.StringIO()
    session.err = Console(file=quick, force_terminal=True, width=80)
    with session.progress("short", delay=5.0) as step:
        step("pass 1/2")
    assert quick.getvalue() == ""
    piped = io.StringIO()
    session.err = Console(file=piped, force_terminal=False)
    with session.progress("off a terminal", delay=0.0) as step:
        step("pass 1/2")
        time.sleep(0.1)
    assert piped.getvalue() == ""
    session.quiet = True
    session.err = Console(file=quick, force_terminal=True)
    with session.progress("quiet", delay=0.0) as step:
        time.sleep(0.1)
    assert quick.getvalue() == ""
