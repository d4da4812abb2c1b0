"""The estimate-shift workflow in-process: per-batch estimates, decisions, the output."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pytest
from scipy.special import expit

from calib_cli.errors import InputError, UsageError
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


# ------------------------------------------------------------------ engines (issue 10)


@pytest.fixture
def small_chunks(monkeypatch: pytest.MonkeyPatch) -> int:
    """Count in chunks of 700 rows, so that small files span many chunks in both engines."""
    import calib_cli.core.shift as shift_module
    import calib_cli.workflows.estimate_shift as workflow_module

    monkeypatch.setattr(shift_module, "COUNT_CHUNK", 700)
    monkeypatch.setattr(workflow_module, "COUNT_CHUNK", 700)
    return 700


def _engine_files(tmp_path: Path, suffix: str, *, weighted: bool) -> tuple[Path, Path]:
    rng = np.random.default_rng(3)
    reference = _rows(5000, 0.2, rng).with_columns(note=pl.lit("r"))
    if weighted:
        reference = reference.with_columns(w=pl.Series(rng.uniform(0.2, 3.0, 5000)))
    parts = [
        _rows(1200, rate, rng).with_columns(day=pl.lit(day), id=pl.lit("x"))
        for day, rate in (("d2", 0.1), ("d1", 0.4), ("d3", 0.25))
    ]
    target = pl.concat(parts).sample(fraction=1.0, shuffle=True, seed=4)
    target = target.with_columns(
        id=pl.format("00{}", pl.int_range(pl.len())),
        day=pl.when(pl.int_range(pl.len()) % 97 == 0).then(None).otherwise(pl.col("day")),
    )
    ref_path, tgt_path = tmp_path / f"ref{suffix}", tmp_path / f"target{suffix}"
    for frame, path in ((reference, ref_path), (target, tgt_path)):
        if suffix == ".csv":
            frame.write_csv(path)
        else:
            frame.write_parquet(path)
    return ref_path, tgt_path


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
@pytest.mark.parametrize("method", ["mle", "em", "pacc"])
def test_streaming_equals_memory_bit_for_bit(
    tmp_path: Path, small_chunks: int, suffix: str, method: str
) -> None:
    """The same counts in the same chunks: identical estimates, intervals, decisions and
    output bytes (CSV; Parquet decodes to the same table), row order and columns kept."""
    reference, target = _engine_files(tmp_path, suffix, weighted=method == "em")
    results = {}
    for engine in ("memory", "streaming"):
        request = EstimateShiftRequest(
            reference=str(reference),
            target=str(target),
            output=str(tmp_path / f"out_{engine}{suffix}"),
            method=method,  # type: ignore[arg-type]
            batch_col="day",
            n_bootstrap=15,
            costs="1:5",
            weight_col="w" if method == "em" else None,
            engine=engine,  # type: ignore[arg-type]
        )
        results[engine] = run_estimate_shift(request)
    assert results["streaming"].engine == "streaming"
    assert estimate_shift_payload(results["memory"]) == estimate_shift_payload(results["streaming"])
    assert [b.batch for b in results["streaming"].batches] == ["d1", "d2", "d3", "(missing)"]
    memory_out, streaming_out = (tmp_path / f"out_{e}{suffix}" for e in ("memory", "streaming"))
    if suffix == ".csv":
        assert memory_out.read_bytes() == streaming_out.read_bytes()
        written = pl.read_csv(streaming_out, infer_schema=False)
        original = pl.read_csv(target, infer_schema=False)
    else:
        written = pl.read_parquet(streaming_out)
        original = pl.read_parquet(target)
        assert pl.read_parquet(memory_out).equals(written)
    assert written.columns == [*original.columns, "calibrated", "decision"]
    assert written.select(original.columns).equals(original)


def test_auto_streams_above_the_row_limit(
    tmp_path: Path, small_chunks: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    import calib_cli.workflows.common as common

    reference, target = _engine_files(tmp_path, ".parquet", weighted=False)
    request = EstimateShiftRequest(
        reference=str(reference), target=str(target), n_bootstrap=5, method="mle"
    )
    assert run_estimate_shift(request).engine == "memory"
    monkeypatch.setattr(common, "STREAMING_ROWS", 1000)
    streamed = run_estimate_shift(request)
    assert streamed.engine == "streaming"
    assert streamed.batches[0].estimate.n == 3600


@pytest.mark.parametrize(
    ("which", "column", "value", "expected"),
    [
        ("target", "score", "1.5", "column 'score' has 2 values outside [0, 1] (first at row 1500"),
        (
            "reference",
            "label",
            "2",
            "column 'label' has 2 values that are not 0/1 or true/false (first at row 1500",
        ),
        ("reference", "score", "", "column 'score' has 2 values missing or NaN (first at row"),
    ],
)
def test_bad_input_is_refused_alike_before_any_output(
    tmp_path: Path, small_chunks: int, which: str, column: str, value: str, expected: str
) -> None:
    """A bad value in a late chunk: both engines refuse with the same line, counting every
    bad row of the file, and write nothing."""
    reference, target = _engine_files(tmp_path, ".csv", weighted=False)
    path = target if which == "target" else reference
    frame = pl.read_csv(path, infer_schema=False)
    frame = frame.with_columns(
        pl.when(pl.int_range(pl.len()).is_in([1499, 3000]))
        .then(pl.lit(value))
        .otherwise(pl.col(column))
        .alias(column)
    )
    frame.write_csv(path)
    messages = []
    for engine in ("memory", "streaming"):
        out = tmp_path / f"out_{engine}.csv"
        request = EstimateShiftRequest(
            reference=str(reference),
            target=str(target),
            output=str(out),
            batch_col="day",
            n_bootstrap=5,
            engine=engine,  # type: ignore[arg-type]
        )
        with pytest.raises(InputError) as caught:
            run_estimate_shift(request)
        messages.append(str(caught.value))
        assert not out.exists()
    assert messages[0] == messages[1]
    assert expected in messages[1]


@pytest.mark.parametrize(("which", "option"), [("target", "score_col"), ("reference", "label_col")])
def test_a_missing_column_is_named_alike_by_both_engines(
    tmp_path: Path, which: str, option: str
) -> None:
    reference, target = _engine_files(tmp_path, ".parquet", weighted=False)
    messages = []
    for engine in ("memory", "streaming"):
        request = EstimateShiftRequest(
            reference=str(reference),
            target=str(target),
            n_bootstrap=5,
            engine=engine,  # type: ignore[arg-type]
            **{option: "nope"},  # type: ignore[arg-type]
        )
        with pytest.raises(InputError) as caught:
            run_estimate_shift(request)
        messages.append(str(caught.value))
    assert messages[0] == messages[1]
    assert "no column 'nope'" in messages[1] and "columns are: " in messages[1]
