"""``calib show``: a saved calibrator or sampling record as a table, JSON, or a picture."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tests.conftest import SAMPLE_DATA, RunCalib

pytest.importorskip("matplotlib")

OVERCONFIDENT = str(SAMPLE_DATA / "overconfident.csv")
HOLDOUT = str(SAMPLE_DATA / "holdout_scored_sampled_model.csv")


@pytest.fixture(scope="module")
def artifacts(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Artifacts made by the installed calib: four calibrators, a record, a chain."""
    import subprocess

    from tests.conftest import CALIB

    folder = tmp_path_factory.mktemp("artifacts")
    made: dict[str, Path] = {}

    def calib(*args: str) -> None:
        subprocess.run([CALIB, *args, "-q"], check=True, capture_output=True, cwd=folder)

    for method in ("platt", "isotonic", "beta", "histogram"):
        made[method] = folder / f"{method}.json"
        calib(
            "recalibrate",
            OVERCONFIDENT,
            "--fit",
            OVERCONFIDENT,
            "--method",
            method,
            "--save-model",
            str(made[method]),
            "-o",
            str(folder / "out.csv"),
        )
    made["sampling"] = folder / "sample.json"
    calib(
        "resample",
        str(SAMPLE_DATA / "train.csv"),
        "-o",
        str(folder / "sample.csv"),
        "--negative-rate",
        "0.1",
        "--key-col",
        "id",
        "--record",
        str(made["sampling"]),
    )
    made["chain"] = folder / "chain.json"
    calib(
        "recalibrate",
        HOLDOUT,
        "--fit",
        HOLDOUT,
        "--sampling-record",
        str(made["sampling"]),
        "--method",
        "isotonic",
        "--save-model",
        str(made["chain"]),
        "-o",
        str(folder / "out.csv"),
    )
    return made


@pytest.mark.parametrize("kind", ["platt", "isotonic", "beta", "histogram", "sampling", "chain"])
def test_show_prints_kind_steps_and_provenance(
    run_calib: RunCalib, artifacts: dict[str, Path], kind: str
) -> None:
    done = run_calib(["show", str(artifacts[kind])])
    assert done.returncode == 0, done.stderr
    text = done.stdout.decode()
    assert kind in text and "rows" in text and "file" in text
    assert done.stderr == b""


def test_show_json_has_steps_and_provenance(
    run_calib: RunCalib, artifacts: dict[str, Path]
) -> None:
    done = run_calib(["show", str(artifacts["chain"]), "--json"])
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["kind"] == "chain"
    assert [s["kind"] for s in report["steps"]] == ["prior", "isotonic"]
    assert report["steps"][0]["details"]["odds_factor"] == pytest.approx(0.1)
    assert report["fitted_on"]["rows"] == 10000
    assert list(report["fitted_on"])[:4] == ["file", "rows", "positives", "base_rate"]


# two pictures in the fast suite; the other kind-scale pairs (a subprocess and matplotlib each)
# run with the slow checks (make test-slow, in CI)
_MAPS = [
    pytest.param(scale, kind, marks=() if (scale, kind) in _FAST_MAPS else pytest.mark.slow)
    for _FAST_MAPS in [{("logit", "isotonic"), ("linear", "chain")}]
    for scale in ("linear", "logit")
    for kind in ("platt", "isotonic", "sampling", "chain")
]


@pytest.mark.parametrize(("scale", "kind"), _MAPS)
def test_show_draws_the_map(
    run_calib: RunCalib, artifacts: dict[str, Path], tmp_path: Path, kind: str, scale: str
) -> None:
    picture = tmp_path / "map.svg"
    args = ["show", str(artifacts[kind]), "--plot", str(picture), "--plot-scale", scale, "-q"]
    done = run_calib(args)
    assert done.returncode == 0, done.stderr
    root = ET.fromstring(picture.read_bytes())
    assert any(e.get("id", "").startswith("map-") for e in root.iter())
    again = tmp_path / "again.svg"
    run_calib(["show", str(artifacts[kind]), "--plot", str(again), "--plot-scale", scale])
    assert again.read_bytes() == picture.read_bytes()


def test_show_refuses_a_bad_artifact_and_a_bad_picture_path(
    run_calib: RunCalib, artifacts: dict[str, Path], tmp_path: Path
) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"schema_version": 1, "kind": "platt", "params": {}}')
    done = run_calib(["show", str(bad)])
    assert done.returncode == 65
    assert b"params" in done.stderr
    done = run_calib(["show", str(artifacts["platt"]), "--plot", str(tmp_path / "no" / "x.png")])
    assert done.returncode == 73
    done = run_calib(["show", str(tmp_path / "missing.json")])
    assert done.returncode == 66
