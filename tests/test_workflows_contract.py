"""Checks of the command-line contract that need no process: the workflows in-process.

The figures and the error messages are made below the command line, by the workflows, so
they are checked here without starting ``calib`` (about a second a process).
tests/test_cli_contract.py runs the installed command for what only a process shows (exit
codes, stdout vs stderr, pipes, files) and compares its JSON with these workflows' byte for
byte.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest

from calib_cli.errors import CalibError, ExitCode, InputError, OutputError
from calib_cli.report.payloads import dumps, reliability_payload
from calib_cli.workflows.recalibrate import RecalibrateRequest, run_recalibrate
from calib_cli.workflows.reliability import ReliabilityRequest, run_reliability
from calib_cli.workflows.resample import ResampleRequest, run_resample


def _scores_frame(n: int = 2000, seed: int = 1) -> pl.DataFrame:
    rng = np.random.default_rng(seed)
    score = rng.beta(1, 12, n)
    return pl.DataFrame(
        {
            "id": np.arange(n),
            "score": score,
            "other": np.clip(score * 1.5, 0, 1),
            "label": (rng.random(n) < score).astype(np.int64),
            "segment": rng.choice(["a", "b", "c"], n),
            "w": rng.choice([1.0, 2.0], n),
        }
    )


def _report(path: Path, **options: Any) -> Any:
    """The JSON report of ``calib reliability PATH --json`` (as parsed JSON)."""
    result = run_reliability(ReliabilityRequest(file=str(path), **options))
    return json.loads(dumps(reliability_payload(result)))


# ----------------------------------------------------------------------- reliability figures


def test_a_column_interval_does_not_depend_on_the_other_columns(tmp_path: Path) -> None:
    path = tmp_path / "s.csv"
    _scores_frame().write_csv(path)
    alone = _report(path, score_cols=("other",), n_bootstrap=30)
    together = _report(path, score_cols=("score", "other"), n_bootstrap=30)
    assert together[1] == alone


def test_groups_keep_their_type_and_missing_values_form_a_group(tmp_path: Path) -> None:
    source = tmp_path / "g.csv"
    source.write_text("g,score,label\n10,0.1,0\n9,0.2,1\n,0.3,0\n100,0.4,1\n9,0.5,0\n")
    report = _report(source, by="g", seed=4)
    assert [(r["group"], r["n"]) for r in report] == [
        (None, 5),
        (9, 2),
        (10, 1),
        (100, 1),
        ("(missing)", 1),
    ]
    assert {r["seed"] for r in report} == {4}


def test_nan_group_is_missing_not_all_rows(tmp_path: Path) -> None:
    source = tmp_path / "g.parquet"
    pl.DataFrame(
        {"f": [1.0, float("nan"), 1.0, 2.0], "score": [0.1, 0.2, 0.3, 0.4], "label": [0, 1, 0, 1]}
    ).write_parquet(source)
    assert [r["group"] for r in _report(source, by="f")] == [None, 1.0, 2.0, "(missing)"]


def test_numeric_positive_label_matches_integer_labels(tmp_path: Path) -> None:
    source = tmp_path / "p.csv"
    source.write_text("score,label\n0.2,0\n0.7,1\n0.3,0\n")
    assert _report(source, positive_label="1.0")["positives"] == 1.0


def test_one_tiny_weight_does_not_narrow_the_intervals(tmp_path: Path) -> None:
    frame = _scores_frame(2000, seed=4).with_columns(pl.lit(1.0).alias("w"))
    plain, tiny = tmp_path / "a.csv", tmp_path / "b.csv"
    frame.write_csv(plain)
    frame.with_columns(pl.when(pl.col("id") == 0).then(0.001).otherwise(1.0).alias("w")).write_csv(
        tiny
    )
    a = _report(plain, weight_col="w", n_bootstrap=100)
    b = _report(tiny, weight_col="w", n_bootstrap=100)
    width = lambda r: r["ece_ci"][1] - r["ece_ci"][0]  # noqa: E731
    assert width(b) > 0.5 * width(a)


# ----------------------------------------------------------------------- data errors (65)


def test_a_group_without_weight_is_named_and_left_out(tmp_path: Path) -> None:
    source = tmp_path / "z.csv"
    source.write_text("g,score,label,w\na,0.1,0,1\na,0.8,1,1\nb,0.3,0,0\nb,0.4,1,0\n")
    said: list[str] = []
    result = run_reliability(
        ReliabilityRequest(file=str(source), by="g", weight_col="w"), warn=said.append
    )
    assert [e.group for e in result.entries] == [None, "a"]
    assert said == [
        f"{source} (g=b): every weight is 0, so the group has no figures: it is left out"
    ]
    every = tmp_path / "none.csv"
    every.write_text("score,label,w\n0.3,0,0\n0.4,1,0\n")
    with pytest.raises(InputError) as caught:  # the whole file: nothing to report at all
        run_reliability(ReliabilityRequest(file=str(every), weight_col="w"))
    assert caught.value.exit_code == ExitCode.DATA_ERROR
    assert str(caught.value) == f"{every}: every weight is 0: no row carries weight"


def test_a_label_that_is_not_0_or_1_is_a_data_error(tmp_path: Path) -> None:
    path = tmp_path / "x.csv"
    path.write_text("score,label\n0.1,maybe\n")
    with pytest.raises(InputError) as caught:
        run_reliability(ReliabilityRequest(file=str(path)))
    assert caught.value.exit_code == ExitCode.DATA_ERROR
    assert str(caught.value).startswith(f"{path}: column 'label' ")


# ------------------------------------------------------------ usage and output errors (2, 73)


def _run(command: str, options: dict[str, Any]) -> object:
    if command == "reliability":
        return run_reliability(ReliabilityRequest(**options))
    if command == "recalibrate":
        return run_recalibrate(RecalibrateRequest(**options))
    return run_resample(ResampleRequest(**options))


NAN = float("nan")


@pytest.mark.parametrize(
    ("command", "options", "message"),
    [
        pytest.param(
            "recalibrate",
            {"file": "{src}", "negative_rate": 1.5, "output": "-"},
            "--negative-rate must be a rate in (0, 1], got 1.5",
            id="rate-above-1",
        ),
        pytest.param(
            "recalibrate",
            {"file": "{src}", "negative_rate": NAN, "output": "-"},
            "--negative-rate must be a rate in (0, 1], got nan",
            id="rate-nan",
        ),
        pytest.param(
            "recalibrate",
            {
                "fit": "{src}",
                "method": "isotonic",
                "eps": 0.6,
                "save_model": "{tmp}/m.json",
            },
            "--eps must be in [0, 0.5), got 0.6",
            id="isotonic-eps",
        ),
        pytest.param(
            "reliability",
            {"file": "{src}", "fail_above_ece": NAN},
            "--fail-above-ece must be a finite number, got nan",
            id="gate-nan",
        ),
        pytest.param(
            "resample",
            {"file": "{src}", "output": "{tmp}/x.csv", "target_ratio": "abc"},
            "--target-ratio must look like POS:NEG (e.g. 1:4), got 'abc'",
            id="target-ratio",
        ),
        pytest.param(
            "resample",
            {
                "file": "{src}",
                "output": "{tmp}/x.csv",
                "negative_rate": 0.5,
                "weight_col_out": "score",
            },
            "{src} already has a column 'score'; choose another name for --weight-col-out",
            id="weight-col-out-clash",
        ),
    ],
)
def test_bad_option_values_are_usage_errors_before_any_output(
    tmp_path: Path, command: str, options: dict[str, Any], message: str
) -> None:
    source = tmp_path / "s.csv"
    _scores_frame(100).write_csv(source)

    def fill(value: object) -> object:
        return value.format(src=source, tmp=tmp_path) if isinstance(value, str) else value

    with pytest.raises(CalibError) as caught:
        _run(command, {key: fill(value) for key, value in options.items()})
    assert caught.value.exit_code == ExitCode.USAGE
    assert str(caught.value) == fill(message)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.csv"]


@pytest.mark.parametrize("form", ["dir", "dir/", "new/"])
def test_a_directory_output_is_refused_before_any_work(tmp_path: Path, form: str) -> None:
    data = tmp_path / "s.csv"
    data.write_text("score,label\n0.2,1\n0.1,0\n")
    (tmp_path / "dir").mkdir()
    output = f"{tmp_path}/{form}"
    with pytest.raises(OutputError) as caught:
        run_recalibrate(RecalibrateRequest(file=str(data), negative_rate=0.5, output=output))
    assert caught.value.exit_code == ExitCode.CANNOT_WRITE
    assert str(caught.value) == f"{output}: cannot write (is a directory)"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dir", "s.csv"]


def test_a_report_in_a_missing_directory_is_refused(tmp_path: Path) -> None:
    bad = tmp_path / "scores.csv"
    bad.write_text("score,label\n" + "0.5,0\n" * 16 + "1.2,1\n0.3,0\n-1,0\n2,1\n")
    report = tmp_path / "missing" / "r.json"
    request = ReliabilityRequest(file=str(bad), on_invalid="drop", report=str(report))
    with pytest.raises(OutputError) as caught:
        run_reliability(request)
    assert caught.value.exit_code == ExitCode.CANNOT_WRITE
    assert str(caught.value) == f"{report}: cannot write (no directory {str(report.parent)!r})"
