"""``calib reliability --engine streaming`` end to end, and the progress display.

That the streaming figures are the in-memory ones for every file format (and that both engines
refuse bad rows with the same message) is checked in-process in test_workflows_reliability.py;
here the installed command streams a pipe and is compared with the in-memory workflow.
"""

from __future__ import annotations

import io
import json
import time
from dataclasses import replace
from pathlib import Path

from rich.console import Console

from calib_cli.cli.session import Session
from calib_cli.report.payloads import reliability_payload
from calib_cli.workflows.reliability import ReliabilityRequest, run_reliability
from tests.conftest import RunCalib
from tests.test_workflows_reliability import labelled_frame, payloads_agree


def test_streaming_stdin_with_bootstrap_gives_the_in_memory_figures_and_a_clean_stderr(
    run_calib: RunCalib, tmp_path: Path
) -> None:
    path = tmp_path / "rows.csv"
    labelled_frame().write_csv(path)
    args = ["--positive-label", "yes", "--by", "day", "--bootstrap", "50", "--json"]
    done = run_calib(["reliability", "-", *args, "--engine", "streaming"], stdin=path.read_bytes())
    assert done.returncode == 0, done.stderr
    assert done.stderr.decode() == (  # no progress off a terminal; the one warning
        "warning: standard input is read into memory first (it cannot be read twice): "
        "--engine streaming keeps memory bounded for files only\n"
    )
    streaming = json.loads(done.stdout)
    request = ReliabilityRequest(
        file=str(path), score_cols=(), positive_label="yes", by="day", n_bootstrap=50
    )
    memory = reliability_payload(run_reliability(replace(request, engine="memory")))
    payloads_agree(memory, streaming)
    for report in streaming:
        low, high = report["ece_ci"]
        assert low <= report["ece"] <= high or low <= high


def test_streaming_refuses_bad_rows_with_the_exact_line(
    run_calib: RunCalib, tmp_path: Path
) -> None:
    path = tmp_path / "bad.csv"
    path.write_text("score,label\n0.1,0\n0.2,2\n0.3,1\n0.4,3\n")
    done = run_calib(["reliability", str(path), "--engine", "streaming"])
    assert done.returncode == 65 and done.stdout == b""
    assert done.stderr.decode() == (
        f"error: {path}: column 'label' has 2 values that are not 0/1 or true/false "
        "(first at row 2: '2'); name the positive value with --positive-label\n"
    )


def test_progress_shows_on_a_terminal_after_the_delay_only() -> None:
    buffer = io.StringIO()
    err = Console(file=buffer, force_terminal=True, width=80)
    session = Session(out=Console(file=io.StringIO()), err=err, quiet=False, debug=False)
    with session.progress("summarising rows.parquet", delay=0.0) as step:
        step("reading rows.parquet: 262,144 rows")
        time.sleep(0.3)
    assert "reading rows.parquet: 262,144 rows" in buffer.getvalue()
    quick = io.StringIO()
    session.err = Console(file=quick, force_terminal=True, width=80)
    with session.progress("short", delay=5.0) as step:
        step("reading rows.parquet")
    assert quick.getvalue() == ""
    piped = io.StringIO()
    session.err = Console(file=piped, force_terminal=False)
    with session.progress("off a terminal", delay=0.0) as step:
        step("reading rows.parquet")
        time.sleep(0.1)
    assert piped.getvalue() == ""
    session.quiet = True
    session.err = Console(file=quick, force_terminal=True)
    with session.progress("quiet", delay=0.0) as step:
        time.sleep(0.1)
    assert quick.getvalue() == ""
