"""The command-line contract end to end: the installed ``calib`` in a subprocess where the
process matters (version, help, a real pipe, signals, closed pipes, FIFOs, a full disk), the
same command line in-process elsewhere (``invoke_calib``: the same arguments, environment and
file descriptors, without a second of start-up per run).

One invocation checks every part of the contract it shows (exit code, stdout, stderr, the
files written). Checks of numbers, data
content and messages that need no process run in-process (tests/test_workflows_contract.py,
and every command's help below); the JSON the workflow computes in-process is compared byte
for byte with what the command prints, to show the wiring.
"""

from __future__ import annotations

import functools
import json
import os
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest
import typer.main

from calib_cli import __version__
from calib_cli.cli.app import app, hide_flag_metavars
from calib_cli.report.payloads import dumps, reliability_payload
from calib_cli.workflows.reliability import ReliabilityRequest, run_reliability
from tests.conftest import CALIB, RunCalib


def _scores_frame(n: int = 2000, seed: int = 1) -> pl.DataFrame:
    rng = np.random.default_rng(seed)
    score = rng.beta(1, 12, n)
    label = (rng.random(n) < score).astype(np.int64)
    return pl.DataFrame(
        {
            "id": np.arange(n),
            "score": score,
            "other": np.clip(score * 1.5, 0, 1),
            "label": label,
            "segment": rng.choice(["a", "b", "c"], n),
            "w": rng.choice([1.0, 2.0], n),
        }
    )


@pytest.fixture
def scores_files(tmp_path: Path) -> dict[str, Path]:
    frame = _scores_frame()
    paths = {"csv": tmp_path / "s.csv", "parquet": tmp_path / "s.parquet"}
    frame.write_csv(paths["csv"])
    frame.write_parquet(paths["parquet"])
    return paths


def _reliability_json(path: Path, **options: Any) -> bytes:
    """The JSON report of ``calib reliability PATH --json``, computed in-process."""
    request = ReliabilityRequest(file=str(path), **options)
    return dumps(reliability_payload(run_reliability(request))).encode()


# ------------------------------------------------------------------ version, help, completion


def test_version_and_help_do_not_import_scipy() -> None:
    code = (
        "import sys\n"
        "from typer.testing import CliRunner\n"
        "from calib_cli.cli import app\n"
        "runner = CliRunner()\n"
        "for args in (['--help'], ['reliability', '--help'], ['--version']):\n"
        "    result = runner.invoke(app, args)\n"
        "    assert result.exit_code == 0, result.output\n"
        "print('scipy' in sys.modules, 'sklearn' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False False"


def test_version_from_the_installed_command_and_python_dash_m(run_calib: RunCalib) -> None:
    done = run_calib(["--version"])
    assert done.returncode == 0 and done.stderr == b""
    assert done.stdout.decode() == f"calib {__version__}\n"
    module = subprocess.run([sys.executable, "-m", "calib_cli", "-V"], capture_output=True)
    assert (module.returncode, module.stdout.decode()) == (0, f"calib {__version__}\n")


def test_help_lists_version_and_completion_and_shows_no_bool_metavars(run_calib: RunCalib) -> None:
    top = run_calib(["--help"]).stdout.decode()
    assert "--install-completion" in top and "--show-completion" in top and "-V" in top
    # every command's help is checked for <bool> in-process (below)
    text = run_calib(["recalibrate", "--help"]).stdout.decode()
    assert "<bool>" not in text
    assert "[eps, 1 - eps]" in text  # help text is not read as Rich markup


def test_no_command_help_shows_a_bool_metavar(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    monkeypatch.setenv("NO_COLOR", "1")
    # in-process: every command's help, rendered by the command tree the entry point builds
    command = typer.main.get_command(app)
    hide_flag_metavars(command)  # as the entry point does
    names = list(command.commands)  # type: ignore[attr-defined]
    assert {"reliability", "recalibrate", "resample", "estimate-shift", "rerank-strata"} <= set(
        names
    )
    for name in names:
        command.main([name, "--help"], prog_name="calib", standalone_mode=False)
        text = capsys.readouterr().out
        assert "--quiet" in text, name
        assert "<bool>" not in text, name


def _helps_at_80_columns(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[str, str]]:
    """(command, its --help) at 80 columns, rendered in-process by the entry point's tree."""
    monkeypatch.setenv("COLUMNS", "80")
    monkeypatch.setenv("NO_COLOR", "1")
    command = typer.main.get_command(app)
    hide_flag_metavars(command)
    for name in command.commands:  # type: ignore[attr-defined]
        command.main([name, "--help"], prog_name="calib", standalone_mode=False)
        yield name, capsys.readouterr().out


def test_no_choice_list_is_folded_at_80_columns(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # long choice lists (formats, engines, score kinds) are named in the help instead: folded
    # into the metavar column ("<csv|tsv|parquet|arr" / "ow|ndjson>") they read as garbage
    for name, text in _helps_at_80_columns(capsys, monkeypatch):
        assert not re.search(r"<\w*\|[\w|]*(\s|$)", text, re.MULTILINE), (name, text)


def test_no_option_name_is_cut_at_80_columns(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Typer wrote a range option's bounds in the metavar column ("<int range> [1<=x<=10000]"),
    # and rerank-strata's required marks took a column more: --estimate-target-prevalence
    # was shown as "--estimate-target-pr…" at 80 columns; the bounds are now in the help
    helps = dict(_helps_at_80_columns(capsys, monkeypatch))
    for name, text in helps.items():
        assert "…" not in text, (name, text)
        assert "range>" not in text and "<=x" not in text and "x>=" not in text, (name, text)
    assert "Number of bins (1 to 10,000)." in " ".join(helps["reliability"].split())


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["reliability", "x.csv", "--bins", "0"], "'--bins': must be 1 to 10,000 (got 0)"),
        (["reliability", "x.csv", "--bootstrap", "-1"], "'--bootstrap': must be at least 0"),
        (["summarize", "x.csv", "-o", "s.parquet", "--grid-bits", "31"], "must be 12 to 30"),
        (["recalibrate", "x.csv", "--cross-fit", "1"], "'--cross-fit': must be at least 2"),
        (["rerank-strata", "--n-strata", "0"], "'--n-strata': must be at least 1 (got 0)"),
        (["estimate-shift", "--map-beta", "-1"], "'--map-beta': must be at least 0 (got -1.0)"),
        (["estimate-shift", "--map-nodes", "101"], "'--map-nodes': must be 2 to 100 (got 101)"),
        (["estimate-shift", "--label-delay", "0"], "'--label-delay': must be at least 1"),
        (["rerank-strata", "--target", "t.csv"], "missing option '--reference'"),
        (["rerank-strata", "--reference", "r.csv"], "missing option '--target'"),
    ],
)
def test_out_of_range_numbers_and_missing_options_are_usage_errors(
    run_calib: RunCalib, arguments: list[str], message: str
) -> None:
    done = run_calib(arguments)
    assert done.returncode == 2, done.stderr
    assert message in done.stderr.decode(), done.stderr


@pytest.mark.parametrize("columns", ["0", "abc", "-5"])
def test_an_unusable_columns_value_does_not_blank_the_output(
    scored_dir: Path, columns: str
) -> None:
    """COLUMNS=0, as some containers and CI runners set it, made Rich print nothing: the
    report, the help, and the error line a cron log needs."""
    env = {**os.environ, "COLUMNS": columns, "NO_COLOR": "1"}
    run = functools.partial(subprocess.run, capture_output=True, env=env, check=False)
    report = run([CALIB, "reliability", str(scored_dir / "a.csv")])
    assert report.returncode == 0 and b"Reliability of" in report.stdout
    assert b"--bins" in run([CALIB, "reliability", "--help"]).stdout
    missing = run([CALIB, "reliability", str(scored_dir / "no.csv")])
    assert missing.returncode == 66 and b"no.csv: no such file" in missing.stderr


def test_command_list_wraps_each_summary_as_one_paragraph(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # a docstring wrapped in the source must not break the list's lines mid-sentence
    monkeypatch.setenv("COLUMNS", "300")
    monkeypatch.setenv("NO_COLOR", "1")
    command = typer.main.get_command(app)
    command.main(["--help"], prog_name="calib", standalone_mode=False)
    lines = capsys.readouterr().out.splitlines()
    listed = {line.split()[1]: line for line in lines if line.startswith("│ ") and "  " in line}
    for name in ("resample", "recalibrate", "rerank-strata", "estimate-shift", "export-sql"):
        assert listed[name].rstrip(" │").endswith("."), listed[name]


def test_completion_script_and_option_completion() -> None:
    # Typer guesses the shell from the parent process (sh under make); naming it must not
    # depend on which shell runs the tests, so detection is off and the shell is given
    shown = subprocess.run(
        [CALIB, "--show-completion", "bash"],
        env={**os.environ, "_TYPER_COMPLETE_TEST_DISABLE_SHELL_DETECTION": "1"},
        capture_output=True,
        check=False,
    )
    assert shown.returncode == 0 and b"_calib_completion" in shown.stdout, shown.stderr
    env = {
        **os.environ,
        "COMP_WORDS": "calib reliability --scor",
        "COMP_CWORD": "2",
        "_CALIB_COMPLETE": "complete_bash",
    }
    done = subprocess.run([CALIB], env=env, capture_output=True, check=False)
    assert done.returncode == 0 and done.stdout.split() == [b"--score-col"]


# ------------------------------------------------------------------- reports and stdin


REPORT_KEYS = (
    "n",
    "positives",
    "base_rate",
    "mean_score",
    "log_loss",
    "brier",
    "ece",
    "mce",
    "auc",
    "auc_ci",
    "gini",
    "average_precision",
    "calibration_intercept",
    "calibration_slope",
    "bins",
)


def test_csv_on_stdin_prints_the_json_of_the_parquet_file_and_writes_it_to_report(
    run_calib: RunCalib, scores_files: dict[str, Path], tmp_path: Path
) -> None:
    report_path = tmp_path / "r.json"
    options = ["--weight-col", "w", "--bins", "8", "--bootstrap", "20", "--seed", "3"]
    gate = ["--fail-below-auc", "0.5"]
    piped = run_calib(
        ["reliability", "-", "--json", *options, *gate, "--report", str(report_path)],
        stdin=scores_files["csv"].read_bytes(),
    )
    assert piped.returncode == 0, piped.stderr  # the gate passes: exit 0
    assert piped.stderr == b""
    # same JSON as the Parquet file read by the workflow: CSV and Parquet inputs agree
    assert piped.stdout == _reliability_json(
        scores_files["parquet"],
        weight_col="w",
        n_bins=8,
        n_bootstrap=20,
        seed=3,
        fail_below_auc=0.5,
    )
    assert report_path.read_bytes() == piped.stdout
    report = json.loads(piped.stdout)
    for key in REPORT_KEYS:
        assert key in report
    assert report["n"] == 2000
    assert isinstance(report["bins"], list)


def test_parquet_on_stdin_is_sniffed_and_columns_and_groups_give_a_list(
    invoke_calib: RunCalib, scores_files: dict[str, Path]
) -> None:
    columns = ["--score-col", "score", "--score-col", "other"]
    piped = invoke_calib(
        ["reliability", "-", *columns, "--by", "segment", "--json"],
        stdin=scores_files["parquet"].read_bytes(),
    )
    assert piped.returncode == 0, piped.stderr
    assert piped.stdout == _reliability_json(
        scores_files["csv"], score_cols=("score", "other"), by="segment"
    )
    report = json.loads(piped.stdout)
    assert [(r["score_column"], r["group"]) for r in report] == [
        (column, group) for column in ("score", "other") for group in (None, "a", "b", "c")
    ]
    assert sum(r["n"] for r in report if r["group"] is not None) == 2 * 2000


def test_tables_go_to_stdout_and_dropped_rows_are_a_warning_on_stderr(
    invoke_calib: RunCalib, tmp_path: Path
) -> None:
    # a name long enough that the warning passes the terminal's width (COLUMNS=160)
    folder = tmp_path / ("a-long-directory-name-" * 8)
    folder.mkdir()
    bad = folder / "scores.csv"
    bad.write_text("score,label\n" + "0.5,0\n" * 16 + "1.2,1\n0.3,0\n-1,0\n2,1\n")
    report_path = tmp_path / "r.json"
    done = invoke_calib(
        [
            *("reliability", str(bad), "--on-invalid", "drop", "--max-invalid", "3"),
            *("--report", str(report_path)),
        ]
    )
    assert done.returncode == 0, done.stderr
    text = done.stdout.decode()
    assert "Brier score" in text and "AUC" in text and "● observed" in text
    warning = done.stderr.decode()
    assert warning.startswith("warning: ") and warning.count("\n") == 1  # one line, never wrapped
    assert (
        len(warning) > 160 and "dropped 3 invalid rows of 20 (score outside [0, 1]: 3)" in warning
    )
    assert json.loads(report_path.read_text())["n"] == 17


def test_quiet_failing_gates_print_only_one_line_naming_each_failure(
    invoke_calib: RunCalib, tmp_path: Path
) -> None:
    source = tmp_path / "s.csv"
    frame = _scores_frame()
    # segment c holds negatives only: its AUC is undefined
    frame.with_columns(
        label=pl.when(pl.col("segment") == "c").then(0).otherwise(pl.col("label"))
    ).write_csv(source)
    gates = ["--fail-above-ece", "0.00001", "--fail-below-auc", "0.999"]
    done = invoke_calib(["reliability", str(source), "--by", "segment", "-q", *gates])
    assert done.returncode == 1
    assert done.stdout == b""
    message = done.stderr.decode()
    assert message.count("\n") == 1 and message.endswith("\n")
    assert message.startswith("check failed: ECE ")
    assert "for score (segment=a)" in message
    assert " < 0.999 for score (segment=a)" in message  # the AUC gate
    assert "AUC is undefined for score (segment=c)" in message


def test_exit_codes_and_exact_error_lines(invoke_calib: RunCalib, tmp_path: Path) -> None:
    # exact lines: no traceback, no colour codes (a bad label is exit 65 in-process too)
    missing = invoke_calib(["reliability", str(tmp_path / "none.csv")])
    assert missing.returncode == 66
    assert missing.stderr.decode() == f"error: {tmp_path / 'none.csv'}: no such file\n"

    # a name long enough that the warning passes the terminal's width (COLUMNS=160)
    folder = tmp_path / ("a-long-directory-name-" * 8)
    folder.mkdir()
    bad = folder / "scores.csv"
    bad.write_text("score,label\n" + "0.5,0\n" * 16 + "1.2,1\n0.3,0\n-1,0\n2,1\n")
    invalid = invoke_calib(["reliability", str(bad)])
    assert invalid.returncode == 65
    assert invalid.stderr.decode() == (
        f"error: {bad}: column 'score' has 3 values outside [0, 1] (first at row 17: 1.2)\n"
    )
    assert invalid.stdout == b""


def test_usage_errors_are_one_line_with_a_suggestion(invoke_calib: RunCalib) -> None:
    done = invoke_calib(["reliability", "x.csv", "--scor-col", "s"])
    assert done.returncode == 2
    assert done.stdout == b""
    assert done.stderr.decode() == (
        "error: calib reliability: no such option: --scor-col (did you mean --score-col?)\n"
    )
    bad_value = invoke_calib(["reliability", "x.csv", "--bins", "many"])
    assert bad_value.returncode == 2
    assert len(bad_value.stderr.decode().splitlines()) == 1
    assert bad_value.stderr.decode().startswith("error: calib reliability: invalid value for")
    unknown = invoke_calib(["nosuch"])
    assert (unknown.returncode, unknown.stderr.decode()) == (
        2,
        "error: no such command 'nosuch'.\n",
    )


# ------------------------------------------------------------------------------ pipes


def test_closed_pipe_ends_quietly(scores_files: dict[str, Path]) -> None:
    # 5000 bins make about 1 MB of JSON, far more than a pipe holds
    command = f"'{CALIB}' reliability '{scores_files['csv']}' --bins 5000 --json"
    shell = f"{command} | head -c 10 >/dev/null"
    done = subprocess.run(
        ["bash", "-c", f"set -o pipefail; {shell}; echo $?"], capture_output=True, check=False
    )
    assert done.stderr == b""
    assert done.stdout.strip() in (b"141", b"0")


def test_tables_into_a_closed_pipe_exit_141(scores_files: dict[str, Path]) -> None:
    shell = f"'{CALIB}' reliability '{scores_files['csv']}' --by segment | head -1 >/dev/null"
    done = subprocess.run(
        ["bash", "-c", f"{shell}; echo ${{PIPESTATUS[0]}}"],
        capture_output=True,
        check=False,
        env={"COLUMNS": "120"},
    )
    assert done.stdout.strip() in (b"141", b"0")  # never 1, the failed-check code
    assert done.stderr == b""


def test_a_long_human_report_into_a_reader_that_leaves_exits_141(
    scores_files: dict[str, Path],
) -> None:
    """About 180 kB of tables, nearly three pipes' worth, into a reader that takes 10 bytes
    and goes.
    With PYTHONUNBUFFERED=1 (common in containers) the console wrote to the raw stream, which
    takes part of a write to a pipe whose reader left and reports no error: the command ended
    0, as if the report had been read (the JSON report, written as every byte or an error,
    ended 141)."""
    reader = f"'{sys.executable}' -c 'import os; os.read(0, 10)'"
    shell = f"'{CALIB}' reliability '{scores_files['csv']}' --bins 1500 | {reader}"
    done = subprocess.run(
        ["bash", "-c", f"{shell}; echo ${{PIPESTATUS[0]}}"],
        capture_output=True,
        check=False,
        env={"COLUMNS": "120", "PYTHONUNBUFFERED": "1"},
    )
    assert done.stdout.strip() == b"141"
    assert done.stderr == b""


def test_a_full_disk_is_exit_73_not_an_internal_error(scores_files: dict[str, Path]) -> None:
    if not Path("/dev/full").exists():
        pytest.skip("no /dev/full here")
    shell = f"'{CALIB}' reliability '{scores_files['csv']}' --json > /dev/full"
    done = subprocess.run(["bash", "-c", shell], capture_output=True, check=False)
    assert done.returncode == 73
    assert done.stderr.startswith(b"error: ") and b"cannot write" in done.stderr


# ------------------------------------------------------- behaviours a cron user relies on


def test_new_outputs_get_ordinary_permissions_and_a_fifo_gets_the_rows(
    invoke_calib: RunCalib, tmp_path: Path
) -> None:
    source = tmp_path / "s.csv"
    _scores_frame(200).write_csv(source)
    fifo, report = tmp_path / "pipe", tmp_path / "r.json"  # a fifo without extension: CSV
    os.mkfifo(fifo)
    received: list[bytes] = []
    reader = threading.Thread(target=lambda: received.append(fifo.read_bytes()), daemon=True)
    reader.start()
    previous = os.umask(0o022)
    try:
        outputs = ["-o", str(fifo), "--report", str(report)]
        done = invoke_calib(["recalibrate", str(source), "--negative-rate", "0.5", *outputs, "-q"])
    finally:
        os.umask(previous)
    reader.join(timeout=60)
    assert (done.returncode, done.stdout, done.stderr) == (0, b"", b""), done.stderr  # -q
    assert received and received[0].startswith(b"id,score,other,label,segment,w,calibrated\n")
    assert fifo.is_fifo()
    assert report.stat().st_mode & 0o777 == 0o644


def test_replaced_outputs_keep_their_mode_and_symlinks_are_followed(
    invoke_calib: RunCalib, tmp_path: Path
) -> None:
    source = tmp_path / "s.csv"
    _scores_frame(100).write_csv(source)
    real, link, report = tmp_path / "real.csv", tmp_path / "link.csv", tmp_path / "r.json"
    real.write_text("old\n")
    real.chmod(0o640)
    link.symlink_to(real)
    report.write_text("{}\n")
    report.chmod(0o600)
    outputs = ["-o", str(link), "--report", str(report)]
    done = invoke_calib(["recalibrate", str(source), "--negative-rate", "0.4", *outputs, "-q"])
    assert done.returncode == 0, done.stderr
    assert link.is_symlink() and link.resolve() == real.resolve()
    assert real.read_text().startswith("id,score")
    assert real.stat().st_mode & 0o777 == 0o640  # the target of the link keeps its mode
    assert json.loads(report.read_text()) != {}
    assert report.stat().st_mode & 0o777 == 0o600  # a replaced file keeps its mode


def test_dev_null_twice_and_dev_stdout_appends(tmp_path: Path) -> None:
    source = tmp_path / "s.csv"
    _scores_frame(50).write_csv(source)
    log = tmp_path / "log.csv"
    log.write_text("precious line\n")
    shell = (
        f"'{CALIB}' recalibrate '{source}' --negative-rate 0.5 -o /dev/stdout "
        f"--report /dev/null --save-model /dev/null -q >> '{log}'"
    )
    done = subprocess.run(["bash", "-c", shell], capture_output=True, check=False)
    assert done.returncode == 0, done.stderr
    lines = log.read_text().splitlines()
    assert lines[0] == "precious line" and lines[1].startswith("id,score")
    assert len(lines) == 1 + 1 + 50


def test_bad_destinations_fail_before_any_work(invoke_calib: RunCalib, tmp_path: Path) -> None:
    source = tmp_path / "s.csv"
    _scores_frame(100).write_csv(source)
    (tmp_path / "dir").mkdir()
    nodir, directory = str(tmp_path / "nodir" / "o.csv"), str(tmp_path / "dir")
    for output, code, message in (
        (str(tmp_path / "out.xyz"), 2, "unknown output extension; use .csv, .tsv, .parquet, "),
        (nodir, 73, f"cannot write (no directory {str(tmp_path / 'nodir')!r})"),
        (str(source), 2, "the output would overwrite an input; choose another path"),
        (directory, 73, "cannot write (is a directory)"),  # all its forms: in-process
    ):
        done = invoke_calib(["recalibrate", str(source), "--negative-rate", "0.5", "-o", output])
        assert done.returncode == code, done.stderr
        # the error line only: no report was computed
        assert done.stderr.count(b"\n") == 1
        assert done.stderr.decode().startswith(f"error: {output}: {message}")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dir", "s.csv"]


def test_stdin_can_be_read_once(invoke_calib: RunCalib, scores_files: dict[str, Path]) -> None:
    done = invoke_calib(
        ["recalibrate", "-", "--fit", "-", "--method", "platt", "-o", "-"],
        stdin=scores_files["csv"].read_bytes(),
    )
    assert done.returncode == 2
    assert b"standard input" in done.stderr


def test_a_bad_option_value_is_a_usage_error_before_any_output(
    invoke_calib: RunCalib, scores_files: dict[str, Path], tmp_path: Path
) -> None:
    # the other bad values (rates, --eps, gates, names) are checked in-process
    out = tmp_path / "x.csv"
    done = invoke_calib(
        ["resample", str(scores_files["csv"]), "-o", str(out), "--target-ratio", "abc"]
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.decode() == (
        "error: --target-ratio must look like POS:NEG (e.g. 1:4), got 'abc'\n"
    )
    assert not out.exists()


def test_two_outputs_may_not_share_a_file(invoke_calib: RunCalib, tmp_path: Path) -> None:
    source = tmp_path / "t.csv"
    _scores_frame(100).write_csv(source)
    out = tmp_path / "s.csv"
    done = invoke_calib(
        ["resample", str(source), "-o", str(out), "--record", str(out), "--negative-rate", "0.5"]
    )
    assert done.returncode == 2
    assert b"two outputs would be written to the same file" in done.stderr
    assert not out.exists()


PARQUET = ["--output-format", "parquet"]


@pytest.mark.parametrize(
    "command",
    [
        ["recalibrate", "{data}", "--negative-rate", "0.5", "-o", "-", *PARQUET],
        ["summarize", "{data}", "-o", "-"],
    ],
)
def test_binary_output_to_a_terminal_is_refused(tmp_path: Path, command: list[str]) -> None:
    """Parquet rows, and a Parquet summary, are refused on a terminal (``summarize -o -``
    printed PAR1... before)."""
    import pty

    data = tmp_path / "s.csv"
    data.write_text("score,label\n0.2,1\n0.1,0\n")
    controller, terminal = pty.openpty()
    try:
        done = subprocess.run(
            [CALIB, *(part.format(data=data) for part in command)],
            stdout=terminal,
            stderr=subprocess.PIPE,
            env={**os.environ, "NO_COLOR": "1"},
            check=False,
            timeout=300,
        )
    finally:
        os.close(terminal)
        os.close(controller)
    assert done.returncode == 2
    assert done.stderr.decode() == (
        "error: refusing to write Parquet to a terminal; redirect standard output or give -o FILE\n"
    )


def test_an_added_column_may_not_overwrite_an_input_column(
    invoke_calib: RunCalib, tmp_path: Path
) -> None:
    # resample's --weight-col-out is refused alike: in-process
    data = tmp_path / "s.csv"
    data.write_text("score,label,calibrated\n0.2,1,x\n0.1,0,y\n")
    out = tmp_path / "out.csv"
    done = invoke_calib(["recalibrate", str(data), "--negative-rate", "0.5", "-o", str(out)])
    assert done.returncode == 2
    assert done.stderr.decode() == (
        f"error: {data} already has a column 'calibrated'; choose another output name\n"
    )
    assert not out.exists()


def test_a_missing_sampling_record_says_why(invoke_calib: RunCalib, tmp_path: Path) -> None:
    record = tmp_path / "r.json"
    done = invoke_calib(
        ["recalibrate", "-", "--sampling-record", str(record), "-o", str(tmp_path / "o.csv")],
        stdin=b"score,label\n0.2,1\n0.1,0\n",
    )
    assert done.returncode == 66
    message = done.stderr.decode()
    assert message.startswith(f"error: {record}: no such file (calib resample writes its record")
    assert "write the sample to a file first" in message
    assert len(message.splitlines()) == 1


@pytest.mark.parametrize("engine", ["memory", "streaming"])
def test_a_nested_column_is_refused_for_csv_output_naming_it(tmp_path: Path, engine: str) -> None:
    """A Parquet input with a list column written as CSV ended in 'internal error:
    ComputeError' (exit 70); it is an input the format cannot hold: exit 65, naming the
    column and the formats that can. Parquet output keeps the column."""
    source = tmp_path / "list.parquet"
    pl.DataFrame({"score": [0.2, 0.7, 0.4], "label": [0, 1, 0]}).with_columns(
        pl.concat_list(["score"]).alias("lst")
    ).write_parquet(source)
    base = [CALIB, "recalibrate", str(source), "--negative-rate", "0.5", "--engine", engine]
    done = subprocess.run(
        [*base, "-o", str(tmp_path / "out.csv")], capture_output=True, check=False
    )
    assert done.returncode == 65
    assert done.stderr.decode() == (
        f"error: {source}: column(s) 'lst' hold nested values, which CSV cannot write; write "
        "Parquet, Arrow or NDJSON (-o out.parquet, or --output-format parquet), "
        "or drop the column(s) first\n"
    )
    assert not (tmp_path / "out.csv").exists()
    kept = subprocess.run(
        [*base, "-o", str(tmp_path / "out.parquet")], capture_output=True, check=False
    )
    assert kept.returncode == 0
    assert pl.read_parquet(tmp_path / "out.parquet")["lst"].to_list() == [[0.2], [0.7], [0.4]]
