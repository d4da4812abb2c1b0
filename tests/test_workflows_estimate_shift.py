"""The estimate-shift workflow in-process: per-batch estimates, decisions, the output."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pytest
from scipy.special import expit

from calib_cli.errors import UsageError
from calib_cli.report.payloads import estimate_shift_payload
from calib_cli.workflows.estimate_shift import (
    EstimateShiftRequest,
    parse_costs,
    run_estimate_shift,
)


def _rows(n: int, prevalence: float, rng: np.random.Generator) -> pl.DataFrame:
    """Calibrated scores at a base rate of 0.2, drawn for a population at ``prevalence``."""
    label = (rng.random(n) < prevalence).astype(np.int64)
    margin = rng.normal(np.where(label == 1, 1.5, -1.5), 1.0)
    # log-likelihood ratio of the two normals is 3 * margin; posterior at a prior of 0.2
    score = expit(3.0 * margin + np.log(0.2 / 0.8))
    return pl.DataFrame({"score": score, "label": label})


def _files(tmp_path: Path) -> tuple[Path, Path]:
    rng = np.random.default_rng(0)
    reference = tmp_path / "ref.csv"
    _rows(4000, 0.2, rng).write_csv(reference)
    target = tmp_path / "target.csv"
    pl.concat(
        [
            _rows(1500, 0.1, rng).with_columns(day=pl.lit("d1")),
            _rows(1500, 0.4, rng).with_columns(day=pl.lit("d2")),
        ]
    ).write_csv(target)
    return reference, target


def test_each_batch_is_estimated_near_its_rate(tmp_path: Path) -> None:
    reference, target = _files(tmp_path)
    request = EstimateShiftRequest(
        reference=str(reference),
        target=str(target),
        batch_col="day",
        n_bootstrap=20,
        method="mle",
    )
    result = run_estimate_shift(request)
    assert [b.batch for b in result.batches] == ["d1", "d2"]
    for batch, rate in zip(result.batches, (0.1, 0.4), strict=True):
        assert batch.estimate.prevalence == pytest.approx(rate, abs=0.04)
        assert batch.true_prevalence == pytest.approx(rate, abs=0.04)
        assert batch.error == pytest.approx(batch.estimate.prevalence - batch.true_prevalence)
        assert batch.decision is None
    payload = estimate_shift_payload(result)
    assert payload["batch_col"] == "day"
    assert [b["batch"] for b in payload["batches"]] == ["d1", "d2"]  # type: ignore[index,union-attr]


def test_costs_add_decisions_and_a_decision_column(tmp_path: Path) -> None:
    reference, target = _files(tmp_path)
    out = tmp_path / "out.csv"
    request = EstimateShiftRequest(
        reference=str(reference), target=str(target), costs="1:4", n_bootstrap=10, output=str(out)
    )
    result = run_estimate_shift(request)
    assert result.batch_col is None and len(result.batches) == 1
    assert result.decision_threshold == pytest.approx(0.2)
    decision = result.batches[0].decision
    assert decision is not None and decision.realised_cost_shifted is not None
    frame = pl.read_csv(out)
    flagged = (frame["calibrated"] >= 0.2).cast(pl.Int64)
    assert frame["decision"].to_list() == flagged.to_list()
    assert "batch" not in estimate_shift_payload(result)


@pytest.mark.parametrize("text", ["1", "1:x", "0:2", "1:inf"])
def test_costs_must_be_two_positive_numbers(text: str) -> None:
    with pytest.raises(UsageError, match="--costs"):
        parse_costs(text)


def test_profile_intervals_belong_to_mle(tmp_path: Path) -> None:
    reference, target = _files(tmp_path)
    request = EstimateShiftRequest(
        reference=str(reference), target=str(target), method="em", ci_method="profile"
    )
    with pytest.raises(UsageError, match="--ci-method profile"):
        run_estimate_shift(request)
