"""``--weight-kind`` on reliability, recalibrate and estimate-shift (issue 12): the option
reaches the figures, the reports say which variance was used.

The variances themselves are tested against their references in test_importance_weights.py;
here the commands are checked to pass the kind through: in memory, streaming and from
summaries, each equal to the core function on the same rows.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from scipy.special import expit

from calib_cli.core.metrics import reliability_summary
from calib_cli.report.payloads import (
    estimate_shift_payload,
    recalibrate_payload,
    reliability_payload,
)
from calib_cli.workflows.estimate_shift import EstimateShiftRequest, run_estimate_shift
from calib_cli.workflows.recalibrate import RecalibrateRequest, run_recalibrate
from calib_cli.workflows.reliability import ReliabilityRequest, run_reliability
from calib_cli.workflows.summarize import SummarizeRequest, run_summarize
from tests.conftest import RunCalib


def _sampled(path: Path, seed: int = 0) -> pl.DataFrame:
    """Scores of a rare event, negatives kept at 5% and weighted 20 (as resample writes)."""
    rng = np.random.default_rng(seed)
    eta = -4.0 + 1.5 * rng.standard_normal(60_000)
    y = rng.random(eta.size) < expit(eta)
    keep = y | (rng.random(eta.size) < 0.05)
    frame = pl.DataFrame(
        {
            "score": np.round(expit((eta[keep] + 0.2) / 0.8), 4),
            "label": y[keep].astype(np.int64),
            "iw": np.where(y[keep], 1.0, 20.0),
        }
    )
    frame.write_csv(path)
    return frame


def test_reliability_in_memory_streaming_and_from_summaries(tmp_path: Path) -> None:
    frame = _sampled(tmp_path / "rows.csv")
    want = reliability_summary(
        frame["label"].to_numpy(),
        frame["score"].to_numpy(),
        sample_weight=frame["iw"].to_numpy(),
        weight_kind="importance",
    )
    options = {"weight_col": "iw", "weight_kind": "importance"}
    memory = reliability_payload(
        run_reliability(
            ReliabilityRequest(file=str(tmp_path / "rows.csv"), engine="memory", **options)
        )  # type: ignore[arg-type]
    )
    streaming = reliability_payload(
        run_reliability(
            ReliabilityRequest(file=str(tmp_path / "rows.csv"), engine="streaming", **options)
        )  # type: ignore[arg-type]
    )
    run_summarize(
        SummarizeRequest(
            files=(str(tmp_path / "rows.csv"),),
            output=str(tmp_path / "s.json"),
            weight_col="iw",
            weight_kind="importance",
        )
    )
    summary = reliability_payload(
        run_reliability(
            ReliabilityRequest(file=None, score_cols=(), from_summaries=(str(tmp_path / "s.json"),))
        )
    )
    for payload in (memory, streaming, summary):
        assert isinstance(payload, dict)
        assert payload["weight_kind"] == "importance"
        # scores on a grid of 1e-4: every summary cell holds one score, the figures are exact
        for key in ("auc_ci", "calibration_slope_ci", "calibration_intercept_ci"):
            assert payload[key] == pytest.approx(list(getattr(want, key)), rel=1e-6), key
    # an explicit kind overrides the summary's own
    freq = reliability_payload(
        run_reliability(
            ReliabilityRequest(
                file=None,
                score_cols=(),
                from_summaries=(str(tmp_path / "s.json"),),
                weight_kind="frequency",
            )
        )
    )
    assert isinstance(freq, dict) and freq["weight_kind"] == "frequency"
    assert freq["auc_ci"] != summary["auc_ci"]  # type: ignore[index,call-overload]


def test_recalibrate_and_estimate_shift_report_the_kind(tmp_path: Path) -> None:
    _sampled(tmp_path / "rows.csv")
    _sampled(tmp_path / "batch.csv", seed=1).drop("iw").write_csv(tmp_path / "batch.csv")
    recal = recalibrate_payload(
        run_recalibrate(
            RecalibrateRequest(
                file=str(tmp_path / "rows.csv"),
                output=str(tmp_path / "out.csv"),
                method="platt",
                fit=str(tmp_path / "rows.csv"),
                weight_col="iw",
                weight_kind="importance",
            )
        )
    )
    assert recal["weight_kind"] == "importance"
    shift = estimate_shift_payload(
        run_estimate_shift(
            EstimateShiftRequest(
                reference=str(tmp_path / "rows.csv"),
                target=str(tmp_path / "batch.csv"),
                weight_col="iw",
                weight_kind="importance",
                n_bootstrap=20,
            )
        )
    )
    assert shift["weight_kind"] == "importance"


def test_reliability_cli_weight_kind(run_calib: RunCalib, tmp_path: Path) -> None:
    _sampled(tmp_path / "rows.csv")
    path = str(tmp_path / "rows.csv")
    done = run_calib(
        ["reliability", path, "--weight-col", "iw", "--weight-kind", "importance", "--json"]
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["weight_kind"] == "importance"
    done = run_calib(["reliability", path, "--weight-col", "iw", "--weight-kind", "importance"])
    assert done.returncode == 0 and b"importance weights" in done.stdout
