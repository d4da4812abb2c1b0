"""The command-line contract end to end, through the installed ``calib`` in a subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import polars as pl
import pytest

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


def test_version(run_calib: RunCalib) -> None:
    from calib_cli import __version__

    done = run_calib(["--version"])
    assert done.returncode == 0
    assert done.stdout.decode().strip() == f"calib {__version__}"


def test_python_dash_m_works() -> None:
    done = subprocess.run([sys.executable, "-m", "calib_cli", "--version"], capture_output=True)
    assert done.returncode == 0 and done.stdout.startswith(b"calib ")


def test_stdin_csv_and_parquet_give_identical_json(
    run_calib: RunCalib, scores_files: dict[str, Path]
) -> None:
    args = ["--json", "--weight-col", "w", "--bins", "8", "--bootstrap", "20", "--seed", "3"]
    piped = run_calib(["reliability", "-", *args], stdin=scores_files["csv"].read_bytes())
    from_parquet = run_calib(["reliability", str(scores_files["parquet"]), *args])
    assert piped.returncode == 0, piped.stderr
    assert from_parquet.returncode == 0, from_parquet.stderr
    assert piped.stdout == from_parquet.stdout
    report = json.loads(piped.stdout)
    for key in (
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
    ):
        assert key in report
    assert report["n"] == 2000
    assert isinstance(report["bins"], list)
    assert piped.stderr == b""


def test_parquet_on_stdin_is_sniffed(run_calib: RunCalib, scores_files: dict[str, Path]) -> None:
    piped = run_calib(["reliability", "-", "--json"], stdin=scores_files["parquet"].read_bytes())
    direct = run_calib(["reliability", str(scores_files["csv"]), "--json"])
    assert piped.returncode == 0, piped.stderr
    assert piped.stdout == direct.stdout


def test_several_columns_and_groups_give_a_list(
    run_calib: RunCalib, scores_files: dict[str, Path]
) -> None:
    done = run_calib(
        [
            "reliability",
            str(scores_files["csv"]),
            "--score-col",
            "score",
            "--score-col",
            "other",
            "--by",
            "segment",
            "--json",
        ]
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert [(r["score_column"], r["group"]) for r in report] == [
        (column, group) for column in ("score", "other") for group in (None, "a", "b", "c")
    ]
    assert sum(r["n"] for r in report if r["group"] is not None) == 2 * 2000


def test_tables_go_to_stdout_and_report_file_matches_json(
    run_calib: RunCalib, scores_files: dict[str, Path], tmp_path: Path
) -> None:
    report_path = tmp_path / "r.json"
    done = run_calib(["reliability", str(scores_files["csv"]), "--report", str(report_path)])
    assert done.returncode == 0, done.stderr
    text = done.stdout.decode()
    assert "Brier score" in text and "AUC" in text and "● observed" in text
    as_json = run_calib(["reliability", str(scores_files["csv"]), "--json"])
    assert report_path.read_bytes() == as_json.stdout


def test_quiet_prints_nothing(run_calib: RunCalib, scores_files: dict[str, Path]) -> None:
    done = run_calib(["reliability", str(scores_files["csv"]), "-q"])
    assert (done.returncode, done.stdout, done.stderr) == (0, b"", b"")


def test_quality_gates_exit_1(run_calib: RunCalib, scores_files: dict[str, Path]) -> None:
    done = run_calib(["reliability", str(scores_files["csv"]), "--fail-above-ece", "0", "-q"])
    assert done.returncode == 1
    assert done.stderr.decode().startswith("check failed: ECE ")
    passed = run_calib(["reliability", str(scores_files["csv"]), "--fail-below-auc", "0.5", "-q"])
    assert passed.returncode == 0
    failed = run_calib(["reliability", str(scores_files["csv"]), "--fail-below-auc", "0.999"])
    assert failed.returncode == 1
    assert "AUC" in failed.stderr.decode()


def test_exit_codes_and_exact_error_lines(run_calib: RunCalib, tmp_path: Path) -> None:
    missing = run_calib(["reliability", str(tmp_path / "none.csv")])
    assert missing.returncode == 66
    assert missing.stderr.decode() == f"error: {tmp_path / 'none.csv'}: no such file\n"

    bad = tmp_path / "scores.csv"
    bad.write_text("score,label\n" + "0.5,0\n" * 16 + "1.2,1\n0.3,0\n-1,0\n2,1\n")
    invalid = run_calib(["reliability", str(bad)])
    assert invalid.returncode == 65
    assert invalid.stderr.decode() == (
        f"error: {bad}: column 'score' has 3 values outside [0, 1] (first at row 17: 1.2)\n"
    )
    assert invalid.stdout == b""

    dropped = run_calib(["reliability", str(bad), "--on-invalid", "drop", "--json"])
    assert dropped.returncode == 0
    assert json.loads(dropped.stdout)["n"] == 17
    assert "dropped 3 invalid rows of 20" in dropped.stderr.decode()

    usage = run_calib(["reliability", str(bad), "--bins", "zero"])
    assert usage.returncode == 2

    no_dir = run_calib(
        [
            "reliability",
            str(bad),
            "--on-invalid",
            "drop",
            "--report",
            str(tmp_path / "missing" / "r.json"),
        ]
    )
    assert no_dir.returncode == 73
    assert "cannot write" in no_dir.stderr.decode()


def test_closed_pipe_ends_quietly(scores_files: dict[str, Path]) -> None:
    big = pl.concat([_scores_frame(20000, seed) for seed in range(5)])
    path = scores_files["csv"].with_name("big.csv")
    big.write_csv(path)
    shell = f"'{CALIB}' reliability '{path}' --bins 5000 --json | head -c 10 >/dev/null"
    done = subprocess.run(
        ["bash", "-c", f"set -o pipefail; {shell}; echo $?"], capture_output=True, check=False
    )
    assert done.stderr == b""
    assert done.stdout.strip() in (b"141", b"0")


def test_no_color_and_no_traceback_on_errors(run_calib: RunCalib, tmp_path: Path) -> None:
    path = tmp_path / "x.csv"
    path.write_text("score,label\n0.1,maybe\n")
    done = run_calib(["reliability", str(path)])
    assert done.returncode == 65
    assert b"Traceback" not in done.stderr
    assert b"\x1b[" not in done.stderr


# ------------------------------------------------------- behaviours a cron user relies on


def test_outputs_get_ordinary_permissions(run_calib: RunCalib, tmp_path: Path) -> None:
    import os

    source = tmp_path / "s.csv"
    _scores_frame(200).write_csv(source)
    out, report = tmp_path / "o.csv", tmp_path / "r.json"
    previous = os.umask(0o022)
    try:
        done = run_calib(
            [
                "recalibrate",
                str(source),
                "--negative-rate",
                "0.5",
                "-o",
                str(out),
                "--report",
                str(report),
                "-q",
            ]
        )
    finally:
        os.umask(previous)
    assert done.returncode == 0, done.stderr
    assert out.stat().st_mode & 0o777 == 0o644
    assert report.stat().st_mode & 0o777 == 0o644
    out.chmod(0o640)
    assert (
        run_calib(
            ["recalibrate", str(source), "--negative-rate", "0.4", "-o", str(out), "-q"]
        ).returncode
        == 0
    )
    assert out.stat().st_mode & 0o777 == 0o640  # a replaced file keeps its mode


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


def test_a_full_disk_is_exit_73_not_an_internal_error(
    run_calib: RunCalib, scores_files: dict[str, Path]
) -> None:
    if not Path("/dev/full").exists():
        pytest.skip("no /dev/full here")
    shell = f"'{CALIB}' reliability '{scores_files['csv']}' --json > /dev/full"
    done = subprocess.run(["bash", "-c", shell], capture_output=True, check=False)
    assert done.returncode == 73
    assert done.stderr.startswith(b"error: ") and b"cannot write" in done.stderr


def test_fifo_and_symlink_outputs(run_calib: RunCalib, tmp_path: Path) -> None:
    import os
    import threading

    source = tmp_path / "s.csv"
    _scores_frame(100).write_csv(source)
    fifo = tmp_path / "pipe.csv"
    os.mkfifo(fifo)
    received: list[bytes] = []
    reader = threading.Thread(target=lambda: received.append(fifo.read_bytes()))
    reader.start()
    done = run_calib(["recalibrate", str(source), "--negative-rate", "0.5", "-o", str(fifo), "-q"])
    reader.join(timeout=60)
    assert done.returncode == 0, done.stderr
    assert received and received[0].startswith(b"id,score,other,label,segment,w,calibrated\n")
    assert fifo.is_fifo()
    real = tmp_path / "real.csv"
    real.write_text("old\n")
    link = tmp_path / "link.csv"
    link.symlink_to(real)
    assert (
        run_calib(
            ["recalibrate", str(source), "--negative-rate", "0.5", "-o", str(link), "-q"]
        ).returncode
        == 0
    )
    assert link.is_symlink()
    assert real.read_text().startswith("id,score")


def test_bad_destinations_fail_before_any_work(run_calib: RunCalib, tmp_path: Path) -> None:
    source = tmp_path / "s.csv"
    _scores_frame(100).write_csv(source)
    for args, code in (
        (["-o", str(tmp_path / "out.xyz")], 2),
        (["-o", str(tmp_path / "nodir" / "o.csv")], 73),
        (["-o", str(source)], 2),
    ):
        done = run_calib(["recalibrate", str(source), "--negative-rate", "0.5", *args])
        assert done.returncode == code, done.stderr
        assert done.stderr.count(b"\n") == 1  # the error line only: no report was computed


def test_stdin_can_be_read_once(run_calib: RunCalib, scores_files: dict[str, Path]) -> None:
    done = run_calib(
        ["recalibrate", "-", "--fit", "-", "--method", "platt", "-o", "-"],
        stdin=scores_files["csv"].read_bytes(),
    )
    assert done.returncode == 2
    assert b"standard input" in done.stderr


@pytest.mark.parametrize(
    "args",
    [
        ["recalibrate", "{src}", "--negative-rate", "1.5", "-o", "-"],
        ["recalibrate", "{src}", "--negative-rate", "nan", "-o", "-"],
        [
            "recalibrate",
            "--fit",
            "{src}",
            "--method",
            "isotonic",
            "--eps",
            "0.6",
            "--save-model",
            "{tmp}/m.json",
        ],
        ["reliability", "{src}", "--fail-above-ece", "nan"],
        ["resample", "{src}", "-o", "{tmp}/x.csv", "--target-ratio", "abc"],
        [
            "resample",
            "{src}",
            "-o",
            "{tmp}/x.csv",
            "--negative-rate",
            "0.5",
            "--weight-col-out",
            "score",
        ],
    ],
)
def test_bad_option_values_are_usage_errors(
    run_calib: RunCalib, scores_files: dict[str, Path], tmp_path: Path, args: list[str]
) -> None:
    filled = [a.format(src=scores_files["csv"], tmp=tmp_path) for a in args]
    done = run_calib(filled)
    assert done.returncode == 2, done.stderr
    assert done.stderr.decode().startswith("error: ")
    assert not (tmp_path / "x.csv").exists()


def test_groups_keep_their_type_and_missing_values_form_a_group(
    run_calib: RunCalib, tmp_path: Path
) -> None:
    source = tmp_path / "g.csv"
    source.write_text("g,score,label\n10,0.1,0\n9,0.2,1\n,0.3,0\n100,0.4,1\n9,0.5,0\n")
    done = run_calib(["reliability", str(source), "--by", "g", "--json", "--seed", "4"])
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert [(r["group"], r["n"]) for r in report] == [
        (None, 5),
        (9, 2),
        (10, 1),
        (100, 1),
        ("(missing)", 1),
    ]
    assert {r["seed"] for r in report} == {4}


def test_help_shows_bracketed_text() -> None:
    done = subprocess.run(
        [CALIB, "recalibrate", "--help"],
        capture_output=True,
        text=True,
        env={"COLUMNS": "200", "NO_COLOR": "1"},
        check=True,
    )
    assert "[eps, 1 - eps]" in done.stdout


def test_one_class_auc_gate_says_why(run_calib: RunCalib, tmp_path: Path) -> None:
    source = tmp_path / "one.csv"
    source.write_text("score,label\n0.1,0\n0.2,0\n")
    done = run_calib(["reliability", str(source), "--fail-below-auc", "0.7", "-q"])
    assert done.returncode == 1
    assert "AUC is undefined" in done.stderr.decode()


def test_numeric_positive_label_matches_integer_labels(run_calib: RunCalib, tmp_path: Path) -> None:
    source = tmp_path / "p.csv"
    source.write_text("score,label\n0.2,0\n0.7,1\n0.3,0\n")
    done = run_calib(["reliability", str(source), "--positive-label", "1.0", "--json"])
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["positives"] == 1.0


def test_two_outputs_may_not_share_a_file(run_calib: RunCalib, tmp_path: Path) -> None:
    source = tmp_path / "t.csv"
    _scores_frame(100).write_csv(source)
    out = tmp_path / "s.csv"
    done = run_calib(
        ["resample", str(source), "-o", str(out), "--record", str(out), "--negative-rate", "0.5"]
    )
    assert done.returncode == 2
    assert b"two outputs would be written to the same file" in done.stderr
    assert not out.exists()


def test_intervals_do_not_depend_on_the_other_columns(
    run_calib: RunCalib, scores_files: dict[str, Path]
) -> None:
    args = ["reliability", str(scores_files["csv"]), "--bootstrap", "30", "--json"]
    alone = json.loads(run_calib([*args, "--score-col", "other"]).stdout)
    together = json.loads(run_calib([*args, "--score-col", "score", "--score-col", "other"]).stdout)
    assert together[1] == alone


def test_zero_weight_group_is_named(run_calib: RunCalib, tmp_path: Path) -> None:
    source = tmp_path / "z.csv"
    source.write_text("g,score,label,w\na,0.1,0,1\na,0.8,1,1\nb,0.3,0,0\nb,0.4,1,0\n")
    done = run_calib(["reliability", str(source), "--by", "g", "--weight-col", "w"])
    assert done.returncode == 65
    assert f"{source} (g=b)".encode() in done.stderr


def test_dev_null_twice_and_dev_stdout_appends(run_calib: RunCalib, tmp_path: Path) -> None:
    source = tmp_path / "s.csv"
    _scores_frame(50).write_csv(source)
    done = run_calib(
        [
            "recalibrate",
            str(source),
            "--negative-rate",
            "0.5",
            "-o",
            "/dev/null",
            "--report",
            "/dev/null",
        ]
    )
    assert done.returncode == 0, done.stderr
    log = tmp_path / "log.csv"
    log.write_text("precious line\n")
    shell = f"'{CALIB}' recalibrate '{source}' --negative-rate 0.5 -o /dev/stdout -q >> '{log}'"
    assert subprocess.run(["bash", "-c", shell], check=False).returncode == 0
    lines = log.read_text().splitlines()
    assert lines[0] == "precious line" and lines[1].startswith("id,score")


def test_gate_message_is_one_line_per_run(
    run_calib: RunCalib, scores_files: dict[str, Path]
) -> None:
    done = run_calib(
        [
            "reliability",
            str(scores_files["csv"]),
            "--by",
            "segment",
            "--fail-above-ece",
            "0.00001",
            "-q",
        ]
    )
    assert done.returncode == 1
    message = done.stderr.decode()
    assert message.count("\n") == 1
    assert "for score (segment=a)" in message


def test_nan_group_is_missing_not_all_rows(run_calib: RunCalib, tmp_path: Path) -> None:
    source = tmp_path / "g.parquet"
    pl.DataFrame(
        {"f": [1.0, float("nan"), 1.0, 2.0], "score": [0.1, 0.2, 0.3, 0.4], "label": [0, 1, 0, 1]}
    ).write_parquet(source)
    report = json.loads(run_calib(["reliability", str(source), "--by", "f", "--json"]).stdout)
    assert [r["group"] for r in report] == [None, 1.0, 2.0, "(missing)"]


def test_one_tiny_weight_does_not_narrow_the_intervals(run_calib: RunCalib, tmp_path: Path) -> None:
    frame = _scores_frame(2000, seed=4).with_columns(pl.lit(1.0).alias("w"))
    plain, tiny = tmp_path / "a.csv", tmp_path / "b.csv"
    frame.write_csv(plain)
    frame.with_columns(pl.when(pl.col("id") == 0).then(0.001).otherwise(1.0).alias("w")).write_csv(
        tiny
    )
    args = ["--weight-col", "w", "--bootstrap", "100", "--json"]
    a = json.loads(run_calib(["reliability", str(plain), *args]).stdout)
    b = json.loads(run_calib(["reliability", str(tiny), *args]).stdout)
    width = lambda r: r["ece_ci"][1] - r["ece_ci"][0]  # noqa: E731
    assert width(b) > 0.5 * width(a)


# ------------------------------------------------------------- issue 11: usage and outputs


def test_usage_errors_are_one_line_with_a_suggestion(run_calib: RunCalib, tmp_path: Path) -> None:
    done = run_calib(["reliability", "x.csv", "--scor-col", "s"])
    assert done.returncode == 2
    assert done.stdout == b""
    assert done.stderr.decode() == (
        "error: calib reliability: no such option: --scor-col (did you mean --score-col?)\n"
    )
    bad_value = run_calib(["reliability", "x.csv", "--bins", "many"])
    assert bad_value.returncode == 2
    assert len(bad_value.stderr.decode().splitlines()) == 1
    assert bad_value.stderr.decode().startswith("error: calib reliability: invalid value for")
    unknown = run_calib(["nosuch"])
    assert (unknown.returncode, unknown.stderr.decode()) == (
        2,
        "error: no such command 'nosuch'.\n",
    )


def test_short_version_help_without_bool_metavars_and_completion(run_calib: RunCalib) -> None:
    from calib_cli import __version__

    assert run_calib(["-V"]).stdout.decode().strip() == f"calib {__version__}"
    top = run_calib(["--help"]).stdout.decode()
    assert "--install-completion" in top and "--show-completion" in top and "-V" in top
    for command in ("reliability", "recalibrate", "resample", "estimate-shift", "rerank-strata"):
        text = run_calib([command, "--help"]).stdout.decode()
        assert "<bool>" not in text, command
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


def test_directory_outputs_say_is_a_directory(run_calib: RunCalib, tmp_path: Path) -> None:
    data = tmp_path / "s.csv"
    data.write_text("score,label\n0.2,1\n0.1,0\n")
    (tmp_path / "dir").mkdir()
    for output in (str(tmp_path / "dir"), str(tmp_path / "dir") + "/", str(tmp_path / "new") + "/"):
        done = run_calib(["recalibrate", str(data), "--negative-rate", "0.5", "-o", output])
        assert done.returncode == 73, output
        assert done.stderr.decode() == f"error: {output}: cannot write (is a directory)\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dir", "s.csv"]


PARQUET = ["--output-format", "parquet"]


def test_binary_output_to_a_terminal_is_refused(tmp_path: Path) -> None:
    import pty

    data = tmp_path / "s.csv"
    data.write_text("score,label\n0.2,1\n0.1,0\n")
    controller, terminal = pty.openpty()
    try:
        done = subprocess.run(
            [CALIB, "recalibrate", str(data), "--negative-rate", "0.5", "-o", "-", *PARQUET],
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
    run_calib: RunCalib, tmp_path: Path
) -> None:
    data = tmp_path / "s.csv"
    data.write_text("score,label,calibrated\n0.2,1,x\n0.1,0,y\n")
    out = tmp_path / "out.csv"
    done = run_calib(["recalibrate", str(data), "--negative-rate", "0.5", "-o", str(out)])
    assert done.returncode == 2
    assert done.stderr.decode() == (
        f"error: {data} already has a column 'calibrated'; choose another output name\n"
    )
    weights = run_calib(
        [
            "resample",
            str(data),
            "--negative-rate",
            "0.5",
            "--weight-col-out",
            "score",
            "-o",
            str(out),
        ]
    )
    assert weights.returncode == 2
    assert not out.exists()


def test_a_missing_sampling_record_says_why(run_calib: RunCalib, tmp_path: Path) -> None:
    record = tmp_path / "r.json"
    done = run_calib(
        ["recalibrate", "-", "--sampling-record", str(record), "-o", str(tmp_path / "o.csv")],
        stdin=b"score,label\n0.2,1\n0.1,0\n",
    )
    assert done.returncode == 66
    message = done.stderr.decode()
    assert message.startswith(f"error: {record}: no such file (calib resample writes its record")
    assert "write the sample to a file first" in message
    assert len(message.splitlines()) == 1
