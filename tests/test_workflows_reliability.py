"""The reliability workflow in-process: a table in, a typed result out (no subprocess)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import polars as pl
import pytest

import calib_cli.summaries.scan as summary_scan
from calib_cli.core.metrics import ReliabilitySummary
from calib_cli.errors import InputError, UsageError
from calib_cli.io import Table
from calib_cli.report.payloads import reliability_payload
from calib_cli.summaries import Exactness
from calib_cli.workflows.reliability import ReliabilityRequest, assess_table, run_reliability
from calib_cli.workflows.summarize import SummarizeRequest, run_summarize


def _frame(n: int = 400, seed: int = 0) -> pl.DataFrame:
    rng = np.random.default_rng(seed)
    score = rng.uniform(0.01, 0.99, n)
    return pl.DataFrame(
        {
            "score": score,
            "other": np.clip(score + rng.normal(0, 0.1, n), 0, 1),
            "label": (rng.random(n) < score).astype(np.int64),
            "segment": rng.choice([3, 1, 2], n),
        }
    )


def _table(frame: pl.DataFrame) -> Table:
    return Table(frame=frame, name="t.csv", format="parquet")


def test_one_column_gives_one_entry_on_all_rows() -> None:
    frame = _frame()
    result = assess_table(_table(frame), ReliabilityRequest(file="unused"))
    (entry,) = result.entries
    assert (entry.score_column, entry.group, entry.heading) == ("score", None, "score")
    assert entry.summary.n == frame.height
    assert entry.summary.base_rate == pytest.approx(frame["label"].mean())
    assert result.gate_failures == () and result.source == "t.csv"


def test_by_adds_each_group_in_order_with_its_value_as_read() -> None:
    request = ReliabilityRequest(file="unused", score_cols=("score", "other"), by="segment")
    result = assess_table(_table(_frame()), request)
    assert [(e.score_column, e.group) for e in result.entries] == [
        (column, group) for column in ("score", "other") for group in (None, 1, 2, 3)
    ]
    assert result.entries[1].heading == "score\nsegment=1"
    assert result.entries[1].label == "score (segment=1)"
    payload = reliability_payload(result)
    assert isinstance(payload, list) and len(payload) == 8
    first = payload[1]
    assert isinstance(first, dict)
    assert (first["score_column"], first["by"], first["group"], first["seed"]) == (
        "score",
        "segment",
        1,
        0,
    )


def test_a_weight_of_two_counts_as_two_rows() -> None:
    frame = _frame(100)
    doubled = pl.concat([frame, frame.head(10)])
    weighted = frame.with_columns(
        pl.Series("w", np.r_[np.full(10, 2.0), np.ones(frame.height - 10)])
    )
    plain = assess_table(_table(doubled), ReliabilityRequest(file="unused"))
    heavy = assess_table(_table(weighted), ReliabilityRequest(file="unused", weight_col="w"))
    assert heavy.entries[0].summary.ece == pytest.approx(plain.entries[0].summary.ece)
    assert heavy.entries[0].summary.auc == pytest.approx(plain.entries[0].summary.auc)


def test_gates_that_fail_are_named_in_the_result() -> None:
    request = ReliabilityRequest(file="unused", fail_above_ece=1e-9, fail_below_auc=0.5)
    result = assess_table(_table(_frame()), request)
    assert len(result.gate_failures) == 1
    assert result.gate_failures[0].startswith("ECE ") and "for score" in result.gate_failures[0]


def test_run_reads_the_file_drops_invalid_rows_and_warns(tmp_path: Path) -> None:
    path = tmp_path / "s.csv"
    lines = _frame(50).write_csv().splitlines()
    lines[4] = "1.5," + lines[4].split(",", 1)[1]  # row 4 of the file: a score above 1
    path.write_text("\n".join(lines) + "\n")
    warnings: list[str] = []
    request = ReliabilityRequest(file=str(path), on_invalid="drop", max_invalid=1)
    result = run_reliability(request, warn=warnings.append)
    assert result.entries[0].summary.n == 49
    assert warnings == [f"{path}: dropped 1 invalid row of 50 (score outside [0, 1]: 1)"]
    payload = reliability_payload(result)
    assert isinstance(payload, dict)
    assert payload["invalid_rows"] == {
        "file": str(path),
        "rows_read": 50,
        "dropped": 1,
        "by_reason": {"score outside [0, 1]": 1},
    }


def test_a_non_finite_gate_is_a_usage_error(tmp_path: Path) -> None:
    path = tmp_path / "s.csv"
    _frame(20).write_csv(path)
    with pytest.raises(UsageError, match="--fail-above-ece must be a finite number"):
        run_reliability(ReliabilityRequest(file=str(path), fail_above_ece=float("nan")))


# ------------------------------------------------------------------ streaming and summaries

#: Figures the streaming path computes exactly (to floating-point summation) with uniform bins.
STREAMING_EXACT = (
    "n",
    "weight_total",
    "positives",
    "base_rate",
    "mean_score",
    "calibration_in_the_large",
    "observed_expected_ratio",
    "log_loss",
    "brier",
    "brier_reliability",
    "brier_resolution",
    "brier_uncertainty",
    "ece",
    "mce",
    "ece_debiased",
    "spiegelhalter_z",
    "spiegelhalter_pvalue",
)


def _write(frame: pl.DataFrame, path: Path) -> Path:
    if path.suffix == ".csv":
        frame.write_csv(path)
    elif path.suffix == ".parquet":
        frame.write_parquet(path)
    else:
        frame.write_ndjson(path)
    return path


def _agree(memory: ReliabilitySummary, streaming: ReliabilitySummary, bound: Exactness) -> None:
    for key in STREAMING_EXACT:
        assert getattr(streaming, key) == pytest.approx(
            getattr(memory, key), rel=1e-9, abs=1e-12
        ), key
    assert abs(streaming.auc - memory.auc) <= bound.auc_bound + 1e-12
    assert abs(streaming.average_precision - memory.average_precision) <= (
        bound.average_precision_bound + 1e-12
    )
    assert streaming.calibration_slope == pytest.approx(memory.calibration_slope, rel=1e-6)
    assert [b.count for b in streaming.bins] == pytest.approx([b.count for b in memory.bins])


@pytest.mark.parametrize("name", ["rows.csv", "rows.parquet", "rows.ndjson"])
def test_streaming_and_memory_agree_within_the_bounds(tmp_path: Path, name: str) -> None:
    frame = _frame(3000).with_columns(w=pl.Series(np.resize([0.0, 1.0, 2.5], 3000)))
    path = _write(frame, tmp_path / name)
    base = ReliabilityRequest(
        file=str(path), score_cols=("score", "other"), weight_col="w", by="segment"
    )
    memory = run_reliability(replace(base, engine="memory"))
    streaming = run_reliability(replace(base, engine="streaming"))
    assert (memory.engine, streaming.engine) == ("memory", "streaming")
    assert [(e.score_column, e.group) for e in streaming.entries] == [
        (e.score_column, e.group) for e in memory.entries
    ]
    for m, s in zip(memory.entries, streaming.entries, strict=True):
        assert m.exactness is None and s.exactness is not None
        assert s.exactness.bins_exact and s.exactness.ece_bound == 0.0
        _agree(m.summary, s.summary, s.exactness)


def test_the_exactness_keys_are_the_same_on_every_path(tmp_path: Path) -> None:
    path = _write(_frame(500), tmp_path / "rows.parquet")
    payloads = []
    for engine in ("memory", "streaming"):
        result = run_reliability(ReliabilityRequest(file=str(path), engine=engine))
        payload = reliability_payload(result)
        assert isinstance(payload, dict) and payload["engine"] == engine
        payloads.append(payload)
    memory, streaming = payloads
    assert isinstance(memory["exactness"], dict) and isinstance(streaming["exactness"], dict)
    assert set(memory["exactness"]) == set(streaming["exactness"])
    assert memory["exactness"]["auc_bound"] == 0.0 and memory["exactness"]["bins_exact"] is True
    assert list(memory) == list(streaming)


def test_summary_files_merge_into_the_figures_of_their_rows(tmp_path: Path) -> None:
    frames = [_frame(800, seed) for seed in (1, 2, 3)]
    paths = []
    for index, frame in enumerate(frames):
        path = _write(frame, tmp_path / f"day{index}.csv")
        out = tmp_path / f"day{index}.summary.parquet"
        run_summarize(SummarizeRequest(files=(str(path),), output=str(out), by="segment"))
        paths.append(str(out))
    whole = _write(pl.concat(frames), tmp_path / "all.parquet")
    merged = run_reliability(
        ReliabilityRequest(file=None, from_summaries=tuple(paths), by="segment")
    )
    rows = run_reliability(ReliabilityRequest(file=str(whole), by="segment", engine="memory"))
    assert merged.engine == "summary"
    assert [e.group for e in merged.entries] == [e.group for e in rows.entries] == [None, 1, 2, 3]
    for m, r in zip(merged.entries, rows.entries, strict=True):
        assert m.exactness is not None
        _agree(r.summary, m.summary, m.exactness)


def test_from_summary_refuses_a_file_and_summaries_together(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="not both"):
        run_reliability(ReliabilityRequest(file="x.csv", from_summaries=("s.parquet",)))
    with pytest.raises(UsageError, match="--from-summary"):
        run_reliability(ReliabilityRequest(file=None))


def test_streaming_reports_progress_steps(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The read, then the rows read after each block (blocks of 200 rows here)."""
    monkeypatch.setattr(summary_scan, "BLOCK_ROWS", 200)
    path = _write(_frame(500), tmp_path / "rows.parquet")
    steps: list[str] = []
    run_reliability(ReliabilityRequest(file=str(path), engine="streaming"), progress=steps.append)
    rows = int(pl.read_parquet(path).height)
    assert steps[0] == f"reading {path}"
    counts = [f"reading {path}: {n:,} rows" for n in (200, 400, rows)]
    assert steps[1:4] == counts


def test_default_score_column_is_checked_when_dropping_bad_rows(tmp_path: Path) -> None:
    # the CLI passes no --score-col as an empty tuple: the default column must still be the
    # one whose bad values are dropped (a regression: nothing was dropped, then exit 65)
    bad = tmp_path / "bad.csv"
    lines = ["score,label", *(f"{0.1 * (i % 9):.1f},{i % 2}" for i in range(17))]
    bad.write_text("\n".join([*lines, "1.2,0", "1.5,1", "-0.1,0"]) + "\n")
    warnings: list[str] = []
    result = run_reliability(
        ReliabilityRequest(file=str(bad), score_cols=(), on_invalid="drop", max_invalid=0.15),
        warn=warnings.append,
    )
    assert result.entries[0].summary.n == 17
    assert any(
        w.endswith("dropped 3 invalid rows of 20 (score outside [0, 1]: 3)") for w in warnings
    ), warnings


# ------------------------------------------- streaming against memory, as the JSON reports them

#: The figures of the JSON report the streaming path gives exactly with uniform bins.
PAYLOAD_EXACT = (
    "n",
    "weight_total",
    "positives",
    "base_rate",
    "mean_score",
    "log_loss",
    "brier",
    "ece",
)


def labelled_frame(n: int = 2000, seed: int = 0) -> pl.DataFrame:
    """Text labels ("yes"/"no": --positive-label) and an integer group column."""
    rng = np.random.default_rng(seed)
    score = rng.beta(1.0, 5.0, n)
    return pl.DataFrame(
        {
            "score": score,
            "label": np.where(rng.random(n) < score, "yes", "no"),
            "day": rng.integers(1, 4, n),
        }
    )


def payloads_agree(memory: object, streaming: object) -> None:
    """Two ``reliability --json`` reports by group, by the memory and streaming engines."""
    assert isinstance(memory, list) and isinstance(streaming, list)
    assert [e["group"] for e in streaming] == [e["group"] for e in memory] == [None, 1, 2, 3]
    for m, s in zip(memory, streaming, strict=True):
        assert (m["engine"], s["engine"]) == ("memory", "streaming")
        assert list(m) == list(s) and set(m["exactness"]) == set(s["exactness"])
        for key in PAYLOAD_EXACT:
            assert s[key] == pytest.approx(m[key], rel=1e-9, abs=1e-12), key
        assert abs(s["auc"] - m["auc"]) <= s["exactness"]["auc_bound"] + 1e-12
        assert m["exactness"]["auc_bound"] == 0.0


@pytest.mark.parametrize("name", ["rows.csv", "rows.parquet", "rows.ndjson"])
def test_streaming_report_gives_the_in_memory_figures_with_a_positive_label(
    tmp_path: Path, name: str
) -> None:
    path = _write(labelled_frame(), tmp_path / name)
    request = ReliabilityRequest(file=str(path), positive_label="yes", by="day", score_cols=())
    memory = reliability_payload(run_reliability(replace(request, engine="memory")))
    streaming = reliability_payload(run_reliability(replace(request, engine="streaming")))
    payloads_agree(memory, streaming)


def test_streaming_refuses_bad_rows_like_memory(tmp_path: Path) -> None:
    path = tmp_path / "bad.csv"
    path.write_text("score,label\n0.1,0\n0.2,2\n0.3,1\n0.4,3\n")
    messages = set()
    for engine in ("memory", "streaming"):
        with pytest.raises(InputError) as refused:
            run_reliability(ReliabilityRequest(file=str(path), engine=engine))
        assert refused.value.exit_code == 65
        messages.add(str(refused.value))
    assert messages == {
        f"{path}: column 'label' has 2 values that are not 0/1 or true/false "
        "(first at row 2: '2'); name the positive value with --positive-label"
    }


def test_streaming_runs_repeat_byte_for_byte(tmp_path: Path) -> None:
    """The streaming engine sums in the rows' order: the same file gives the same JSON
    report and the same summary file on every run (a multi-threaded group-by would not)."""
    rng = np.random.default_rng(11)
    n = 10_000
    score = 1.0 / (1.0 + np.exp(-rng.normal(-2.0, 1.5, n)))
    frame = pl.DataFrame(
        {
            "score": score,
            "label": (rng.random(n) < score).astype(np.int8),
            "w": rng.choice([0.5, 1.0, 2.0], n),
            "day": rng.integers(0, 4, n),
        }
    )
    path = tmp_path / "rows.parquet"
    frame.write_parquet(path, row_group_size=2_000)
    request = ReliabilityRequest(file=str(path), weight_col="w", by="day", engine="streaming")
    results = [run_reliability(request) for _ in range(2)]
    assert results[0].engine == "streaming"
    assert reliability_payload(results[0]) == reliability_payload(results[1])
    outputs = []
    for i in range(2):
        out = tmp_path / f"summary{i}.parquet"
        run_summarize(
            SummarizeRequest(files=(str(path),), output=str(out), weight_col="w", by="day")
        )
        outputs.append(out.read_bytes())
    assert outputs[0] == outputs[1]


@pytest.mark.slow
def test_streaming_refines_again_while_the_bound_is_above_the_tolerance(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With few slots a pass cannot meet the AUC tolerance: the workflow reads the bound off
    the figures and makes another pass, and the AUC stays within its bound of the exact one."""
    from sklearn.metrics import roc_auc_score

    import calib_cli.workflows.reliability as workflow

    rng = np.random.default_rng(5)
    n = 4_000
    score = 0.3 + rng.random(n) * 1e-3  # one cell of the grid holds every row
    label = (rng.random(n) < score).astype(np.int8)
    path = tmp_path / "rows.parquet"
    pl.DataFrame({"score": score, "label": label}).write_parquet(path)
    request = ReliabilityRequest(file=str(path), engine="streaming")
    monkeypatch.setattr(workflow, "REFINE_MAX_SLOTS", 256)
    narrow = run_reliability(request).entries[0]
    monkeypatch.setattr(workflow, "MAX_REFINE_PASSES", 1)
    once = run_reliability(request).entries[0]
    assert narrow.exactness is not None and once.exactness is not None
    assert narrow.exactness.refinement_levels > once.exactness.refinement_levels
    assert narrow.exactness.auc_bound < once.exactness.auc_bound
    exact = roc_auc_score(label, score)
    assert abs(narrow.summary.auc - exact) <= narrow.exactness.auc_bound + 1e-12
    # a first pass planned for a loose tolerance that the summary already meets does nothing:
    # the next pass is planned for the tolerance itself
    monkeypatch.setattr(workflow, "MAX_REFINE_PASSES", 2)
    monkeypatch.setattr(workflow, "REFINE_MAX_SLOTS", 1 << 22)
    monkeypatch.setattr(workflow, "FIRST_PASS_TOLERANCE", 1.0)
    loose = run_reliability(request).entries[0]
    assert loose.exactness is not None
    assert loose.exactness.refinement_levels > 0
    assert loose.exactness.auc_bound <= workflow.AUC_TOLERANCE
    assert abs(loose.summary.auc - exact) <= loose.exactness.auc_bound + 1e-12


@pytest.mark.parametrize("engine", ["memory", "streaming", "summary"])
def test_a_group_whose_every_weight_is_zero_is_left_out_with_a_warning(
    tmp_path: Path, engine: str
) -> None:
    """``--by`` with one group of no weight: the other groups are reported and that one is
    left out with a warning, alike in both engines and from a summary (it stopped the whole
    report, worded "sample_weight sums to 0" in memory)."""
    from calib_cli.workflows.summarize import SummarizeRequest, run_summarize

    rng = np.random.default_rng(6)
    n = 600
    group = np.repeat(["a", "b", "c"], n // 3)
    score = rng.beta(2, 5, n)
    frame = pl.DataFrame(
        {
            "score": score,
            "label": (rng.random(n) < score).astype(int),
            "w": np.where(group == "b", 0.0, 1.0),
            "g": group,
        }
    )
    rows = tmp_path / "rows.csv"
    frame.write_csv(rows)
    if engine == "summary":
        summary = tmp_path / "s.parquet"
        run_summarize(
            SummarizeRequest(files=(str(rows),), output=str(summary), weight_col="w", by="g")
        )
        request = ReliabilityRequest(file=None, from_summaries=(str(summary),), by="g")
        where = str(summary)
    else:
        request = ReliabilityRequest(
            file=str(rows),
            weight_col="w",
            by="g",
            engine=engine,  # type: ignore[arg-type]
        )
        where = str(rows)
    said: list[str] = []
    result = run_reliability(request, warn=said.append)
    assert [e.group for e in result.entries] == [None, "a", "c"]
    assert f"{where} (g=b): every weight is 0, so the group has no figures: it is left out" in said
