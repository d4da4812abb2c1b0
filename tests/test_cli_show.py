"""``calib show``: a saved calibrator or sampling record as a table, JSON, or a picture.

Every kind's table and every kind's map on both scales are checked in-process in
test_workflows_show.py; here the command line prints them. One test runs the installed
command, whose picture, drawn in a fresh process, is byte for byte the one drawn in this
process (the same bytes on every run, in any process); the others run the same command line
in-process (``invoke_calib``: the same arguments, environment and file descriptors).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import RunCalib
from tests.test_workflows_show import draw_map, has_a_map, make_artifacts

pytest.importorskip("matplotlib")


@pytest.fixture(scope="module")
def artifacts(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return make_artifacts(tmp_path_factory.mktemp("artifacts"))


def test_show_prints_kind_steps_and_provenance_and_draws_the_map(
    run_calib: RunCalib, artifacts: dict[str, Path], tmp_path: Path
) -> None:
    picture = tmp_path / "map.svg"
    args = ["show", str(artifacts["isotonic"]), "--plot", str(picture), "--plot-scale", "logit"]
    done = run_calib(args)
    assert done.returncode == 0, done.stderr
    text = done.stdout.decode()
    assert "isotonic" in text and "rows" in text and "file" in text
    assert "knots" in text and "overconfident.csv" in text
    assert done.stderr == b""
    assert has_a_map(picture.read_bytes())
    drawn = draw_map(artifacts["isotonic"], tmp_path / "drawn.svg", scale="logit")
    assert picture.read_bytes() == drawn


def test_show_json_has_steps_and_provenance_and_draws_the_map(
    invoke_calib: RunCalib, artifacts: dict[str, Path], tmp_path: Path
) -> None:
    picture = tmp_path / "map.svg"
    args = ["show", str(artifacts["chain"]), "--json", "--plot", str(picture)]
    done = invoke_calib(args)  # the default scale: linear
    assert done.returncode == 0, done.stderr
    assert done.stderr == b""
    report = json.loads(done.stdout)
    assert report["kind"] == "chain"
    assert [s["kind"] for s in report["steps"]] == ["prior", "isotonic"]
    assert report["steps"][0]["details"]["odds_factor"] == pytest.approx(0.1)
    assert report["fitted_on"]["rows"] == 10000
    assert list(report["fitted_on"])[:4] == ["file", "rows", "positives", "base_rate"]
    assert has_a_map(picture.read_bytes())
    drawn = draw_map(artifacts["chain"], tmp_path / "drawn.svg", scale="linear")
    assert picture.read_bytes() == drawn


def test_show_refuses_a_bad_artifact_and_a_bad_picture_path(
    invoke_calib: RunCalib, artifacts: dict[str, Path], tmp_path: Path
) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"schema_version": 1, "kind": "platt", "params": {}}')
    done = invoke_calib(["show", str(bad)])
    assert done.returncode == 65
    assert b"params" in done.stderr
    done = invoke_calib(["show", str(artifacts["platt"]), "--plot", str(tmp_path / "no" / "x.png")])
    assert done.returncode == 73
    done = invoke_calib(["show", str(tmp_path / "missing.json")])
    assert done.returncode == 66


def test_show_writes_counts_in_full_with_separators(invoke_calib: RunCalib, tmp_path: Path) -> None:
    """``rows 20000`` had no separator, and a weighted count of 26,300 printed as 2.63e+04."""
    from calib_cli.artifacts import Artifact, save_artifact

    record = tmp_path / "m.json"
    fitted_on = {"file": "x.csv", "rows": 20000, "positives": 26300.0, "seed": 20251127,
                 "before": {"rows": 1234567, "positives": 12.5}}  # fmt: skip
    params = {"log_odds_shift": -1.0}
    save_artifact(str(record), Artifact(kind="prior", params=params, fitted_on=fitted_on))
    done = invoke_calib(["show", str(record)])
    assert done.returncode == 0, done.stderr
    text = done.stdout.decode()
    assert "20,000" in text and "26,300" in text and "rows: 1,234,567, positives: 12.50" in text
    assert "20251127" in text  # a seed is not a count


def test_an_artifact_on_standard_input_and_a_report_given_as_one(
    invoke_calib: RunCalib, artifacts: dict[str, Path], tmp_path: Path
) -> None:
    """'-' was a file named '-' ("-: no such file") for show, export-sql and --model; and a
    JSON report was refused field by field ("auc is not a field of this artifact")."""
    model = artifacts["isotonic"].read_bytes()
    shown = invoke_calib(["show", "-"], stdin=model)
    assert shown.returncode == 0 and b"isotonic" in shown.stdout, shown.stderr
    sql = invoke_calib(["export-sql", "-", "--dialect", "duckdb"], stdin=model)
    assert sql.returncode == 0 and sql.stdout.startswith(b"CASE WHEN"), sql.stderr
    twice = invoke_calib(["recalibrate", "-", "--model", "-"], stdin=model)
    assert twice.returncode == 2 and b"can be read only once" in twice.stderr
    bad = invoke_calib(["show", "-"], stdin=b"garbage")
    assert bad.returncode == 65 and bad.stderr.startswith(b"error: stdin: not valid JSON")
    report = tmp_path / "report.json"
    report.write_text(json.dumps({"auc": 0.8, "entries": []}))
    done = invoke_calib(["show", str(report)])
    assert done.returncode == 65
    assert done.stderr.decode() == (
        f"error: {report}: the document is not a saved calibrator or sampling record (no "
        "'kind': a JSON report or a summary?); give a file that --save-model or resample wrote\n"
    )
