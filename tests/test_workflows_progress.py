"""Every command's workflow names its stages for the progress display (the CLI shows them on
a terminal after 2 s; nothing in a pipe or with --quiet: tests/test_cli_reliability_streaming)."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

import calib_cli.summaries.scan as summary_scan
from calib_cli.workflows.estimate_shift import EstimateShiftRequest, run_estimate_shift
from calib_cli.workflows.recalibrate import RecalibrateRequest, run_recalibrate
from calib_cli.workflows.rerank_strata import RerankStrataRequest, run_rerank_strata
from calib_cli.workflows.resample import ResampleRequest, run_resample
from calib_cli.workflows.summarize import SummarizeRequest, run_summarize
from tests.conftest import SAMPLE_DATA


def test_recalibrate_names_the_fit_the_read_and_the_write(tmp_path: Path) -> None:
    steps: list[str] = []
    data = SAMPLE_DATA / "overconfident.csv"
    out = tmp_path / "out.csv"
    request = RecalibrateRequest(file=str(data), fit=str(data), method="platt", output=str(out))
    run_recalibrate(request, progress=steps.append)
    assert steps == [f"fitting on {data}", f"reading {data}", f"writing {out}"]


def test_standard_output_is_named_stdout(
    tmp_path: Path, capsys: pytest.CaptureFixture[bytes]
) -> None:
    """'-' as the output was named "stdin" ("writing stdin")."""
    steps: list[str] = []
    data = SAMPLE_DATA / "overconfident.csv"
    run_recalibrate(RecalibrateRequest(file=str(data), negative_rate=0.1, output="-"),
                    progress=steps.append)  # fmt: skip
    assert steps[-1] == "writing stdout"
    reference, target = SAMPLE_DATA / "strata_reference.csv", SAMPLE_DATA / "strata_target.csv"
    steps.clear()
    run_rerank_strata(RerankStrataRequest(reference=str(reference), target=str(target),
                                          strata_col="stratum", output="-"),
                      progress=steps.append)  # fmt: skip
    assert steps == [f"re-ranking {target} against {reference} into stdout"]


def test_estimate_shift_names_its_files(tmp_path: Path) -> None:
    steps: list[str] = []
    reference, target = SAMPLE_DATA / "transactions.csv", SAMPLE_DATA / "shifted_batch.csv"
    request = EstimateShiftRequest(reference=str(reference), target=str(target), n_bootstrap=20)
    run_estimate_shift(request, progress=steps.append)
    assert steps == [f"estimating {target} against {reference}"]


def test_rerank_strata_and_resample_name_their_stage(tmp_path: Path) -> None:
    steps: list[str] = []
    reference = SAMPLE_DATA / "strata_reference.csv"
    target, out = SAMPLE_DATA / "strata_target.csv", tmp_path / "out.csv"
    request = RerankStrataRequest(
        reference=str(reference), target=str(target), strata_col="stratum", output=str(out)
    )
    run_rerank_strata(request, progress=steps.append)
    assert steps == [f"re-ranking {target} against {reference} into {out}"]
    steps.clear()
    train, sample = SAMPLE_DATA / "train.csv", tmp_path / "sample.csv"
    run_resample(
        ResampleRequest(file=str(train), output=str(sample), negative_rate=0.1, key_col="id"),
        progress=steps.append,
    )
    assert steps == [f"counting the classes of {train}", f"sampling {train} into {sample}"]


def test_summarize_counts_the_rows_of_each_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(summary_scan, "BLOCK_ROWS", 1000)
    steps: list[str] = []
    data = SAMPLE_DATA / "overconfident.csv"
    rows = pl.read_csv(data).height
    request = SummarizeRequest(files=(str(data),), output=str(tmp_path / "s.parquet"))
    run_summarize(request, progress=steps.append)
    step = f"file 1/1: summarising {data}"
    assert steps[0] == step
    assert steps[1:3] == [f"{step}: 1,000 rows", f"{step}: 2,000 rows"]
    assert steps[-1] == f"{step}: {rows:,} rows"
