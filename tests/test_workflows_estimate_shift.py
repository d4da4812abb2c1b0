"""The estimate-shift workflow in-process: per-batch estimates, decisions, the output."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from scipy.special import expit

from calib_cli.errors import InputError, UsageError
from calib_cli.report.payloads import dumps, estimate_shift_payload
from calib_cli.workflows.estimate_shift import (
    EstimateShiftRequest,
    EstimateShiftResult,
    parse_costs,
    run_estimate_shift,
)
from tests.conftest import SAMPLE_DATA


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


# ------------------------------------------------- on the sample data (moved from the CLI tests)

SAMPLE_REFERENCE = SAMPLE_DATA / "transactions.csv"
SAMPLE_BATCHES = SAMPLE_DATA / "shifted_batch.csv"


def _json(result: EstimateShiftResult) -> object:
    """The report as the command prints it (``--json``)."""
    return json.loads(dumps(estimate_shift_payload(result)))


def test_one_run_with_batch_col_equals_one_run_per_batch(tmp_path: Path) -> None:
    together = _json(
        run_estimate_shift(
            EstimateShiftRequest(
                reference=str(SAMPLE_REFERENCE),
                target=str(SAMPLE_BATCHES),
                batch_col="day",
                n_bootstrap=40,
                seed=5,
            )
        )
    )
    assert isinstance(together, dict)
    days = sorted(pl.read_csv(SAMPLE_BATCHES)["day"].unique().to_list())
    assert [b["batch"] for b in together["batches"]] == days
    for batch in together["batches"]:
        alone = tmp_path / f"{batch['batch']}.parquet"
        pl.read_csv(SAMPLE_BATCHES).filter(pl.col("day") == batch["batch"]).write_parquet(alone)
        single = run_estimate_shift(
            EstimateShiftRequest(
                reference=str(SAMPLE_REFERENCE), target=str(alone), n_bootstrap=40, seed=5
            )
        )
        assert _json(single) == {k: v for k, v in batch.items() if k != "batch"}


@pytest.mark.parametrize("rows", [["0.3"], ["0.2", "0.2", "0.2", "0.2"]])
def test_tiny_and_constant_targets(tmp_path: Path, rows: list[str]) -> None:
    target = tmp_path / "t.csv"
    target.write_text("score\n" + "\n".join(rows) + "\n")
    result = _json(
        run_estimate_shift(
            EstimateShiftRequest(
                reference=str(SAMPLE_REFERENCE), target=str(target), n_bootstrap=40, seed=5
            )
        )
    )
    assert isinstance(result, dict)
    assert result["n"] == len(rows)
    assert 0 <= result["ci_low"] <= result["prevalence"] <= result["ci_high"] <= 1


def test_uninformative_scores_warn_and_give_a_wide_interval(tmp_path: Path) -> None:
    rng = np.random.default_rng(2)
    pl.DataFrame(
        {"score": rng.random(3000), "label": (rng.random(3000) < 0.1).astype(int)}
    ).write_csv(tmp_path / "ref.csv")
    pl.DataFrame({"score": rng.random(1000)}).write_csv(tmp_path / "tgt.csv")
    warnings: list[str] = []
    result = run_estimate_shift(
        EstimateShiftRequest(
            reference=str(tmp_path / "ref.csv"),
            target=str(tmp_path / "tgt.csv"),
            n_bootstrap=40,
            seed=5,
        ),
        warn=warnings.append,
    )
    estimate = result.batches[0].estimate
    assert estimate.ci_high - estimate.ci_low > 0.5
    assert warnings and warnings == list(estimate.warnings)


def test_profile_likelihood_interval_for_mle() -> None:
    result = run_estimate_shift(
        EstimateShiftRequest(
            reference=str(SAMPLE_REFERENCE),
            target=str(SAMPLE_BATCHES),
            method="mle",
            ci_method="profile",
            n_bootstrap=40,
            seed=5,
        )
    )
    estimate = result.batches[0].estimate
    assert estimate.ci_method == "profile"
    assert estimate.ci_low < estimate.prevalence < estimate.ci_high


def test_a_reference_without_positives_is_refused(tmp_path: Path) -> None:
    reference = tmp_path / "ref.csv"
    reference.write_text("score,label\n0.1,0\n0.4,0\n")
    request = EstimateShiftRequest(reference=str(reference), target=str(SAMPLE_BATCHES))
    with pytest.raises(InputError) as caught:
        run_estimate_shift(request)
    assert (
        str(caught.value)
        == f"{reference}: the reference has no positive rows (with positive weight)"
    )


def test_json_and_rows_both_on_stdout_are_refused() -> None:
    request = EstimateShiftRequest(
        reference=str(SAMPLE_REFERENCE), target=str(SAMPLE_BATCHES), as_json=True, output="-"
    )
    with pytest.raises(UsageError) as caught:
        run_estimate_shift(request)
    assert str(caught.value) == "--json and -o - would both write to stdout; give -o a file"


def test_profile_intervals_with_another_method_are_refused_with_the_full_line() -> None:
    request = EstimateShiftRequest(
        reference=str(SAMPLE_REFERENCE),
        target=str(SAMPLE_BATCHES),
        method="em",
        ci_method="profile",
    )
    with pytest.raises(UsageError) as caught:
        run_estimate_shift(request)
    assert str(caught.value) == (
        "--ci-method profile is the profile likelihood of --method mle (auto runs mle); "
        "--method em has bootstrap intervals: drop --ci-method profile or use --method mle"
    )


@pytest.mark.parametrize("text", ["1-20", "1:2:3"])
def test_costs_without_one_colon_name_the_expected_form(text: str) -> None:
    with pytest.raises(UsageError) as caught:
        parse_costs(text)
    assert str(caught.value) == f"--costs must look like FP:FN (e.g. 1:20), got {text!r}"


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_streaming_engine_gives_the_memory_engine_s_report_and_rows_on_the_sample(
    tmp_path: Path, suffix: str
) -> None:
    """20,000 rows span one counting chunk either way: identical report, identical output
    bytes for CSV (the same table for Parquet), the input's columns and row order first."""
    target = SAMPLE_BATCHES
    if suffix == ".parquet":
        target = tmp_path / "batches.parquet"
        pl.read_csv(SAMPLE_BATCHES).write_parquet(target)
    reports = {}
    for engine in ("memory", "streaming"):
        result = run_estimate_shift(
            EstimateShiftRequest(
                reference=str(SAMPLE_REFERENCE),
                weight_col="weight",
                target=str(target),
                batch_col="day",
                costs="1:20",
                as_json=True,
                output=str(tmp_path / f"out_{engine}{suffix}"),
                engine=engine,
                n_bootstrap=40,
                seed=5,
            )
        )
        assert result.engine == engine
        reports[engine] = _json(result)
    assert reports["memory"] == reports["streaming"]
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


def test_both_engines_refuse_a_bad_sample_row_with_the_same_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.csv"
    lines = SAMPLE_BATCHES.read_text().splitlines()
    lines[12000] = lines[12000].replace(lines[12000].split(",")[2], "1.7")
    bad.write_text("\n".join(lines) + "\n")
    errors = []
    for engine in ("memory", "streaming"):
        out = tmp_path / f"out_{engine}.csv"
        request = EstimateShiftRequest(
            reference=str(SAMPLE_REFERENCE),
            target=str(bad),
            output=str(out),
            engine=engine,
            n_bootstrap=40,
            seed=5,
        )
        with pytest.raises(InputError) as caught:
            run_estimate_shift(request)
        assert not out.exists()
        errors.append(str(caught.value))
    assert errors[0] == errors[1]
    assert (
        errors[1] == f"{bad}: column 'score' has 1 value outside [0, 1] (first at row 12000: 1.7)"
    )


def test_a_target_on_standard_input_is_read_in_memory_whatever_the_engine(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Standard input cannot be read twice: --engine streaming reads it into memory, with the
    memory engine's figures."""
    reports, engines = [], []
    for engine in ("memory", "streaming"):
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(SAMPLE_BATCHES.read_bytes())))
        result = run_estimate_shift(
            EstimateShiftRequest(
                reference=str(SAMPLE_REFERENCE),
                target="-",
                as_json=True,
                engine=engine,
                n_bootstrap=40,
                seed=5,
            )
        )
        reports.append(_json(result))
        engines.append(result.engine)
    assert reports[0] == reports[1]
    assert engines == ["memory", "memory"]


@pytest.mark.parametrize("engine", ["memory", "streaming"])
def test_rows_without_a_batch_value_are_one_batch_with_a_warning(
    tmp_path: Path, engine: str
) -> None:
    rng = np.random.default_rng(9)
    y = rng.random(2000) < 0.3
    reference = tmp_path / "ref.csv"
    pl.DataFrame(
        {"score": np.where(y, rng.beta(4, 2, y.size), rng.beta(2, 4, y.size)), "label": y}
    ).with_columns(pl.col("label").cast(pl.Int64)).write_csv(reference)
    day = [1] * 300 + [2] * 300 + [None] * 40
    target = tmp_path / "tgt.csv"
    pl.DataFrame({"day": day, "score": rng.random(len(day))}).write_csv(target)
    said: list[str] = []
    result = run_estimate_shift(
        EstimateShiftRequest(
            reference=str(reference),
            target=str(target),
            batch_col="day",
            n_bootstrap=0,
            engine=engine,  # type: ignore[arg-type]
        ),
        warn=said.append,
    )
    assert [b.batch for b in result.batches][:2] == [1, 2] and len(result.batches) == 3
    assert (
        "batch (missing): 40 rows have no 'day' value; they are estimated together as one "
        "batch, after all the others"
    ) in said
