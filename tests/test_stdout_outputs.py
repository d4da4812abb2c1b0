"""Standard output holds one document. ``--report -`` is ``--json`` said another way: with
or without ``--json``, standard output is one JSON report and nothing else (it held the
JSON, then the human tables, or two JSON documents back to back). Two outputs on standard
output, such as rows and a report, are refused before any work (the report was appended to
the CSV rows). The command line runs in-process (``invoke_calib``: the same arguments,
environment and file descriptors as the installed ``calib``); ``/dev/stdout`` is a name of
standard output, recognised as one without opening it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from calib_cli.errors import ExitCode
from tests.conftest import RunCalib

TWO = "error: two outputs would be written to standard output ('-'): give a file for one of them"


@pytest.fixture
def data(scored_dir: Path) -> Path:
    return scored_dir


_COMMANDS = {
    "reliability": ["reliability", "a.csv"],
    "estimate-shift": [
        "estimate-shift",
        "--reference",
        "a.csv",
        "--target",
        "a.csv",
        "--bootstrap",
        "0",
    ],
    "backtest": [
        "estimate-shift",
        "--reference",
        "a.csv",
        "--target",
        "a.csv",
        "--batch-col",
        "stratum",
        "--backtest",
        "--label-delay",
        "1",
        "--bootstrap",
        "0",
    ],
}


@pytest.mark.parametrize("as_json", [False, True])
@pytest.mark.parametrize(
    ("args", "report"),
    [
        pytest.param(args, report, id=f"{name}-{report}",
                     # one command names /dev/stdout in `make test`, every one in test-slow
                     marks=[pytest.mark.slow] if report != "-" and name != "reliability" else [])
        for name, args in _COMMANDS.items()
        for report in ("-", "/dev/stdout")
    ],
)  # fmt: skip
def test_a_report_on_stdout_is_the_one_json_document_there(
    data: Path, invoke_calib: RunCalib, args: list[str], as_json: bool, report: str
) -> None:
    done = invoke_calib([*args, "--report", report, *(["--json"] if as_json else [])], cwd=data)
    assert done.returncode == 0, done.stderr
    alone = invoke_calib([*args, "--json"], cwd=data)
    assert json.loads(done.stdout) == json.loads(alone.stdout)  # one document, the same


@pytest.mark.parametrize(
    "args",
    [
        ["recalibrate", "a.csv", "--fit", "a.csv", "--method", "platt", "-o", "-"],
        ["recalibrate", "a.csv", "--fit", "a.csv", "--method", "platt"],  # rows on stdout
        ["resample", "a.csv", "--negative-rate", "0.5", "-o", "-", "--record", "r.json"],
        ["rerank-strata", "--reference", "a.csv", "--target", "a.csv", "--strata-col",
         "stratum", "-o", "/dev/stdout"],
    ],
    ids=["recalibrate", "recalibrate-default", "resample", "rerank-strata"],
)  # fmt: skip
def test_rows_and_a_report_on_stdout_are_refused_before_any_work(
    data: Path, invoke_calib: RunCalib, args: list[str]
) -> None:
    done = invoke_calib([*args, "--report", "-"], cwd=data)
    assert done.returncode == ExitCode.USAGE, done.stderr
    assert done.stderr.decode().strip() == TWO
    assert done.stdout == b""
    assert sorted(p.name for p in data.iterdir()) == ["a.csv"]


@pytest.mark.parametrize("rows", ["-", "/dev/stdout"])
def test_rows_and_json_on_stdout_are_refused(data: Path, invoke_calib: RunCalib, rows: str) -> None:
    done = invoke_calib(
        ["estimate-shift", "--reference", "a.csv", "--target", "a.csv", "-o", rows, "--json"],
        cwd=data,
    )
    assert done.returncode == ExitCode.USAGE, done.stderr
    assert done.stdout == b""
