"""Report keys are stable (DESIGN.md): a key that depends on the data is there every time,
``null`` where its figure is undefined, never left out.

What the data decides (a target with or without labels, a summary without a positive row, the
engine ``--engine auto`` picks by size) must not change which keys a job reading the report
finds; what the options ask for (``--costs``, ``--by``, ``--history``) may.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest

from tests.conftest import RunCalib

FAST = ["--bootstrap", "20", "--seed", "3"]


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``ref``: labelled; ``tgt``: labelled, three days; ``nolab``: ``tgt`` without its label
    column; ``zero``: ``tgt`` with every label 0 (how an unlabelled batch is summarised)."""
    folder = tmp_path_factory.mktemp("stable_keys")
    rng = np.random.default_rng(5)

    def frame(n: int, rate: float) -> pl.DataFrame:
        label = (rng.random(n) < rate).astype(np.int64)
        logit = rng.normal(np.where(label == 1, 1.0, -1.0), 1.0) - 1.0
        return pl.DataFrame(
            {"score": 1.0 / (1.0 + np.exp(-logit)), "label": label, "day": rng.integers(0, 3, n)}
        )

    frame(1500, 0.3).write_parquet(folder / "ref.parquet")
    tgt = frame(900, 0.45)
    tgt.write_parquet(folder / "tgt.parquet")
    tgt.drop("label").write_parquet(folder / "nolab.parquet")
    tgt.with_columns(label=pl.lit(0)).write_parquet(folder / "zero.parquet")
    return folder


def _json(done: Any) -> Any:
    assert done.returncode == 0, done.stderr.decode()
    return json.loads(done.stdout)


def _batches(payload: Any) -> list[Any]:
    batches: list[Any] = payload.get("batches", [payload])
    return batches


@pytest.mark.parametrize("engine", ["memory", "streaming"])
@pytest.mark.parametrize("by_batch", [False, True])
def test_shift_truth_keys_are_null_without_labels(
    invoke_calib: RunCalib, data: Path, engine: str, by_batch: bool
) -> None:
    """A target without a label column: ``true_prevalence`` and ``error`` are there, null,
    with the same keys, in the same order, as a labelled target's."""
    batch = ["--batch-col", "day"] if by_batch else []

    def shift(target: str) -> Any:
        return _json(
            invoke_calib(
                [
                    "estimate-shift",
                    "--reference",
                    str(data / "ref.parquet"),
                    "--target",
                    str(data / target),
                    "--engine",
                    engine,
                    "--costs",
                    "1:5",
                    "--json",
                    *batch,
                    *FAST,
                ]
            )
        )

    labelled, unlabelled = _batches(shift("tgt.parquet")), _batches(shift("nolab.parquet"))
    assert [list(b) for b in unlabelled] == [list(b) for b in labelled]
    for entry in unlabelled:
        assert entry["true_prevalence"] is None and entry["error"] is None
        assert entry["decision"]["realised_cost_static"] is None
    assert all(entry["true_prevalence"] is not None for entry in labelled)


def test_shift_truth_keys_are_null_from_a_summary_without_positives(
    invoke_calib: RunCalib, data: Path, tmp_path: Path
) -> None:
    """A target summary without a positive row is read as unlabelled: the keys stay, null."""
    ref, tgt = tmp_path / "ref_s.parquet", tmp_path / "tgt_s.parquet"
    inputs = ((data / "ref.parquet", ref, []), (data / "zero.parquet", tgt, ["--by", "day"]))
    for source, out, by in inputs:
        done = invoke_calib(["summarize", str(source), "-o", str(out), "-q", *by])
        assert done.returncode == 0, done.stderr.decode()
    payload = _json(
        invoke_calib(
            [
                "estimate-shift",
                "--reference-summary",
                str(ref),
                "--target-summary",
                str(tgt),
                "--batch-col",
                "day",
                "--json",
                *FAST,
            ]
        )
    )
    assert len(payload["batches"]) == 3
    for entry in payload["batches"]:
        assert entry["true_prevalence"] is None and entry["error"] is None


@pytest.mark.parametrize("engine", ["memory", "streaming"])
def test_recalibrate_label_figures_are_null_for_an_unlabelled_input(
    invoke_calib: RunCalib, data: Path, tmp_path: Path, engine: str
) -> None:
    """``input`` holds ``positives``, ``base_rate``, ``before`` and ``after`` whether or not
    INPUT has labels (null without)."""

    def report(name: str) -> Any:
        path = tmp_path / f"{name}.json"
        done = invoke_calib(
            [
                "recalibrate",
                str(data / name),
                "--fit",
                str(data / "ref.parquet"),
                "--method",
                "platt",
                "--engine",
                engine,
                "-o",
                str(tmp_path / f"out_{name}"),
                "--report",
                str(path),
                "-q",
            ]
        )
        assert done.returncode == 0, done.stderr.decode()
        return json.loads(path.read_text())["input"]

    labelled, unlabelled = report("tgt.parquet"), report("nolab.parquet")
    assert list(unlabelled) == list(labelled)
    for key in ("positives", "base_rate", "before", "after"):
        assert labelled[key] is not None and unlabelled[key] is None


def test_rerank_comparison_and_streaming_are_null_when_they_do_not_apply(
    invoke_calib: RunCalib, data: Path, tmp_path: Path
) -> None:
    """In memory and without target labels: ``comparison`` and ``streaming`` are null."""
    path = tmp_path / "r.json"
    done = invoke_calib(
        [
            "rerank-strata",
            "--reference",
            str(data / "ref.parquet"),
            "--target",
            str(data / "nolab.parquet"),
            "--strata-col",
            "day",
            "--engine",
            "memory",
            "-o",
            str(tmp_path / "out.parquet"),
            "--report",
            str(path),
            "-q",
        ]
    )
    assert done.returncode == 0, done.stderr.decode()
    payload = json.loads(path.read_text())
    assert payload["comparison"] is None and payload["streaming"] is None
