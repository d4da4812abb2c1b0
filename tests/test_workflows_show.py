"""The show workflow in-process: every kind of artifact as its table, and its map as a picture.

``calib show`` end to end (the table on stdout, ``--json``, ``--plot``, exit codes) is in
test_cli_show.py, which makes its artifacts with :func:`make_artifacts` here.
"""

from __future__ import annotations

import io
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from rich.console import Console

from calib_cli.artifacts import Artifact, load_artifact
from calib_cli.errors import ArtifactError, MissingInputError, OutputError
from calib_cli.report.tables import show_table
from calib_cli.workflows.recalibrate import RecalibrateRequest, run_recalibrate
from calib_cli.workflows.resample import ResampleRequest, run_resample
from calib_cli.workflows.show import ShowRequest, ShowResult, run_show, summarise_steps
from tests.conftest import SAMPLE_DATA

OVERCONFIDENT = SAMPLE_DATA / "overconfident.csv"
HOLDOUT = str(SAMPLE_DATA / "holdout_scored_sampled_model.csv")
#: Every kind of artifact :func:`make_artifacts` saves.
KINDS = ("platt", "isotonic", "beta", "histogram", "sampling", "chain")


def make_artifacts(folder: Path) -> dict[str, Path]:
    """Four calibrators (fitted on 2000 over-confident rows), a sampling record and a chain
    (its prior from the record), saved by the workflows behind ``calib recalibrate
    --save-model`` and ``calib resample --record``."""
    made: dict[str, Path] = {}
    out = str(folder / "out.csv")
    overconfident = folder / "overconfident.csv"
    overconfident.write_text("".join(OVERCONFIDENT.read_text().splitlines(keepends=True)[:2001]))
    for method in ("platt", "isotonic", "beta", "histogram"):
        made[method] = folder / f"{method}.json"
        run_recalibrate(
            RecalibrateRequest(
                file=str(overconfident),
                output=out,
                fit=str(overconfident),
                method=method,
                save_model=str(made[method]),
            )
        )
    made["sampling"] = folder / "sample.json"
    run_resample(
        ResampleRequest(
            file=str(SAMPLE_DATA / "train.csv"),
            output=str(folder / "sample.csv"),
            negative_rate=0.1,
            key_col="id",
            record=str(made["sampling"]),
        )
    )
    made["chain"] = folder / "chain.json"
    run_recalibrate(
        RecalibrateRequest(
            file=HOLDOUT,
            output=out,
            fit=HOLDOUT,
            sampling_record=str(made["sampling"]),
            method="isotonic",
            save_model=str(made["chain"]),
        )
    )
    return made


def draw_map(artifact: Path, picture: Path, *, scale: str) -> bytes:
    """What ``calib show ARTIFACT --plot PICTURE --plot-scale SCALE`` draws."""
    from calib_cli.report.plots import calibrator_figure, save_figure

    save_figure(calibrator_figure(load_artifact(str(artifact)), scale=scale), str(picture))  # type: ignore[arg-type]
    return picture.read_bytes()


def has_a_map(svg: bytes) -> bool:
    """The picture is SVG with the calibrator's map drawn (an element with id ``map-...``)."""
    return any(e.get("id", "").startswith("map-") for e in ET.fromstring(svg).iter())


@pytest.fixture(scope="module")
def artifacts(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return make_artifacts(tmp_path_factory.mktemp("artifacts"))


@pytest.mark.parametrize("kind", KINDS)
def test_show_table_has_kind_steps_and_provenance(artifacts: dict[str, Path], kind: str) -> None:
    result = run_show(ShowRequest(artifact=str(artifacts[kind])))
    assert result.artifact.kind == kind
    steps = [s.kind for s in result.steps]
    assert steps == {"chain": ["prior", "isotonic"]}.get(kind, [kind])
    assert list(result.provenance)[:2] == ["file", "rows"]
    table = show_table(result)
    assert str(table.title).startswith(f"{artifacts[kind]}: {kind} (schema 1, calib ")
    buffer = io.StringIO()
    Console(file=buffer, width=160, no_color=True).print(table)
    text = buffer.getvalue()
    assert kind in text and "rows" in text and "file" in text


@pytest.mark.parametrize("scale", ["linear", "logit"])
@pytest.mark.parametrize("kind", KINDS)
def test_the_map_is_drawn_the_same_on_every_run(
    artifacts: dict[str, Path], tmp_path: Path, kind: str, scale: str
) -> None:
    picture = draw_map(artifacts[kind], tmp_path / "map.svg", scale=scale)
    assert has_a_map(picture)
    assert draw_map(artifacts[kind], tmp_path / "again.svg", scale=scale) == picture


@pytest.mark.parametrize("kind", ["isotonic", "histogram"])
def test_probability_range_is_what_the_model_outputs(
    artifacts: dict[str, Path], tmp_path: Path, kind: str
) -> None:
    """``probability_range`` is the lowest and highest ``calibrated`` that ``recalibrate
    --model`` writes over a fine grid of scores in [0, 1]. An isotonic model's outputs are
    clipped to [eps, 1 - eps]: show reported its first and last knots ([0.0, 0.444]) while no
    row got below 1e-06."""
    params = load_artifact(str(artifacts[kind])).params
    if kind == "isotonic":  # the knots reach 0, below the outputs' floor: the case reported
        assert params["y_knots"][0] < params["eps"]
    grid = tmp_path / "grid.parquet"
    knots = params.get("x_knots") or params["edges"]
    scores = np.unique(np.r_[np.linspace(0.0, 1.0, 100_001), knots])
    pl.DataFrame({"score": scores}).write_parquet(grid)
    applied = tmp_path / "applied.parquet"
    run_recalibrate(
        RecalibrateRequest(file=str(grid), output=str(applied), model=str(artifacts[kind]))
    )
    calibrated = pl.read_parquet(applied)["calibrated"].to_numpy()
    (step,) = run_show(ShowRequest(artifact=str(artifacts[kind]))).steps
    assert step.details["probability_range"] == [calibrated.min(), calibrated.max()]


def test_show_refuses_a_bad_artifact_and_a_bad_picture_path(
    artifacts: dict[str, Path], tmp_path: Path
) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"schema_version": 1, "kind": "platt", "params": {}}')
    with pytest.raises(ArtifactError, match="params") as refused:
        run_show(ShowRequest(artifact=str(bad)))
    assert refused.value.exit_code == 65
    picture = tmp_path / "no" / "x.png"
    with pytest.raises(OutputError) as unwritable:
        run_show(ShowRequest(artifact=str(artifacts["platt"]), plot=str(picture)))
    assert unwritable.value.exit_code == 73
    with pytest.raises(MissingInputError) as missing:
        run_show(ShowRequest(artifact=str(tmp_path / "missing.json")))
    assert missing.value.exit_code == 66


def test_paths_in_lists_and_brackets_print_as_they_are(artifacts: dict[str, Path]) -> None:
    from dataclasses import replace

    result = run_show(ShowRequest(artifact=str(artifacts["platt"])))
    summaries = ["/data/day=1/part-0.parquet", "/data/[b]/s.parquet"]
    fitted_on = {**result.artifact.fitted_on, "engine": {"kind": "summary", "summaries": summaries}}
    artifact = replace(result.artifact, fitted_on=fitted_on)
    buffer = io.StringIO()
    Console(file=buffer, width=200, no_color=True).print(
        show_table(replace(result, artifact=artifact))
    )
    text = buffer.getvalue()
    assert "summaries: [/data/day=1/part-0.parquet, /data/[b]/s.parquet]" in text


#: a chain whose isotonic step outputs [eps, 1 - eps] (its knots run from 0 to 1)
CLIPPED_CHAIN = Artifact(
    kind="chain",
    params={
        "steps": [
            {"kind": "prior", "params": {"log_odds_shift": -2.0, "strata_col": None,
                                         "stratum_shifts": {}}},
            {"kind": "isotonic", "params": {"x_knots": [0.2, 0.8], "y_knots": [0.0, 1.0],
                                            "eps": 1e-6, "strict": False}},
        ]
    },
)  # fmt: skip


@pytest.mark.parametrize("kind", ["isotonic", "chain"])
def test_show_never_rounds_a_probability_inside_the_unit_interval_to_0_or_1(
    artifacts: dict[str, Path], kind: str
) -> None:
    """A map's outputs are clipped to [eps, 1 - eps]: its range ends at 1 - 1e-6, which four
    significant digits printed as 1 (``probability_range [1e-06, 1]``), in chains too."""
    if kind == "chain":
        result = ShowResult("chain.json", CLIPPED_CHAIN, summarise_steps(CLIPPED_CHAIN))
    else:
        result = run_show(ShowRequest(artifact=str(artifacts[kind])))
    low, high = result.steps[-1].details["probability_range"]
    assert low > 0.0 and high == 1.0 - 1e-6  # the value was right: its text was not
    buffer = io.StringIO()
    Console(file=buffer, width=160, no_color=True).print(show_table(result))
    line = next(line for line in buffer.getvalue().splitlines() if "probability_range" in line)
    shown = line.split("[")[1].split("]")[0].split(", ")
    assert shown[1] == "0.999999", line
    assert [float(text) for text in shown] == pytest.approx([low, high], rel=1e-4)
