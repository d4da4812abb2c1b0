"""The summarize workflow in-process, and reliability on its summary files: daily summaries
merged give the month's figures, options reach the summary, refusals name the file and field.

``calib summarize`` and ``calib reliability --from-summary`` end to end (the wiring, exit
codes, stdin and stdout) are in test_cli_summarize.py, which shares the helpers here.
"""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest

from calib_cli import io
from calib_cli.errors import InputError, MissingInputError
from calib_cli.report.payloads import reliability_payload, summarize_payload
from calib_cli.summaries import ScoreSummary
from calib_cli.workflows.reliability import ReliabilityRequest, run_reliability
from calib_cli.workflows.summarize import SummarizeRequest, run_summarize

#: Figures a summary gives exactly (to floating-point summation) with its own bins.
EXACT = (
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
)

#: Rows with a score above 1 (row 2) and a label that is not 0/1 (row 3).
BAD_ROWS = "score,label\n0.2,0\n1.5,1\n0.4,x\n0.3,1\n"


def day_frame(seed: int, n: int = 3000) -> pl.DataFrame:
    """One day of scored rows, with a segment, weights (some zero) and a second score."""
    rng = np.random.default_rng(seed)
    score = rng.beta(1.0, 6.0, n)
    return pl.DataFrame(
        {
            "id": np.arange(n) + 10_000 * seed,
            "score": score,
            "label": (rng.random(n) < score).astype(np.int64),
            "segment": rng.choice(["a", "b", "c"], n),
            "w": rng.choice([0.0, 1.0, 2.5], n),
            "other": score**2,
        }
    )


def write_days(folder: Path) -> list[Path]:
    """day1.csv, day2.csv, day3.csv and their rows together as month.parquet."""
    paths = []
    for seed in (1, 2, 3):
        path = folder / f"day{seed}.csv"
        day_frame(seed).write_csv(path)
        paths.append(path)
    pl.concat([day_frame(s) for s in (1, 2, 3)]).write_parquet(folder / "month.parquet")
    return paths


def close(a: dict[str, Any], b: dict[str, Any], keys: tuple[str, ...]) -> None:
    """The figures ``keys`` of two reliability payloads agree (to summation order)."""
    for key in keys:
        if a[key] is None or b[key] is None:
            assert a[key] is None and b[key] is None, key
        else:
            assert a[key] == pytest.approx(b[key], rel=1e-9, abs=1e-12), key


def same_summary(a: ScoreSummary, b: ScoreSummary) -> None:
    """Two summaries hold the same metadata, groups and stored rows."""
    assert a.metadata() == b.metadata() and a.groups == b.groups
    for name, values in a.to_columns().items():
        got = b.to_columns()[name]
        if values.dtype.kind == "f":
            np.testing.assert_array_equal(got, values)
        else:
            assert got.tolist() == values.tolist(), name


def summarize(*files: Path, output: Path, **options: Any) -> Path:
    run_summarize(SummarizeRequest(files=tuple(map(str, files)), output=str(output), **options))
    return output


def from_summaries(*paths: Path | str, **options: Any) -> Any:
    """The JSON payload of ``reliability --from-summary PATHS`` (no --score-col: every one)."""
    request = ReliabilityRequest(
        file=None, score_cols=(), from_summaries=tuple(map(str, paths)), **options
    )
    return reliability_payload(run_reliability(request))


def of_rows(path: Path, **options: Any) -> Any:
    """The JSON payload of ``reliability FILE`` (the engine it chooses)."""
    return reliability_payload(run_reliability(ReliabilityRequest(file=str(path), **options)))


@pytest.fixture
def days(tmp_path: Path) -> list[Path]:
    return write_days(tmp_path)


def test_daily_summaries_merged_equal_the_summary_of_the_month(
    days: list[Path], tmp_path: Path
) -> None:
    """The cron job of the README: summarise each day once, report the month from them."""
    daily = [
        summarize(p, output=tmp_path / f"{p.stem}.summary.parquet", by="segment") for p in days
    ]
    month = summarize(
        tmp_path / "month.parquet", output=tmp_path / "month.summary.parquet", by="segment"
    )
    merged = from_summaries(*daily, by="segment")
    whole = from_summaries(month, by="segment")
    rows = of_rows(tmp_path / "month.parquet", by="segment")
    assert isinstance(merged, list) and isinstance(whole, list) and isinstance(rows, list)
    assert [e["group"] for e in merged] == [None, "a", "b", "c"] == [e["group"] for e in rows]
    for m, w, r in zip(merged, whole, rows, strict=True):
        assert m["engine"] == "summary" and r["engine"] == "memory"
        close(m, w, (*EXACT, "auc", "average_precision", "hosmer_lemeshow"))
        assert m["exactness"] == w["exactness"]
        close(m, r, EXACT)
        assert abs(m["auc"] - r["auc"]) <= m["exactness"]["auc_bound"] + 1e-12
        for a, b in zip(m["bins"], r["bins"], strict=True):
            close(a, b, ("lower", "upper", "count", "n_rows", "mean_score", "observed_rate"))
    # without --by: the figures of all rows, in whatever order the files come
    pooled = from_summaries(*reversed(daily))
    assert isinstance(pooled, dict)
    close(pooled, merged[0], (*EXACT, "auc"))


def test_several_files_one_summary_json_and_weights(days: list[Path], tmp_path: Path) -> None:
    out = tmp_path / "all.json"
    result = run_summarize(
        SummarizeRequest(files=tuple(map(str, days)), output=str(out), weight_col="w")
    )
    assert json.loads(out.read_text())["kind"] == "calib.score_summary"
    meta = summarize_payload(result)  # what --report writes
    assert meta["rows"] == 9000 and meta["inputs"] == [str(p) for p in days]
    assert meta["summaries"][0]["metadata"]["weight_column"] == "w"  # type: ignore[index,call-overload]
    from_summary = from_summaries(out)
    rows = of_rows(tmp_path / "month.parquet", weight_col="w")
    assert isinstance(from_summary, dict) and isinstance(rows, dict)
    close(from_summary, rows, EXACT)


def test_several_score_columns_write_one_file_each(days: list[Path], tmp_path: Path) -> None:
    out = tmp_path / "two.summary.parquet"
    result = run_summarize(
        SummarizeRequest(files=(str(days[0]),), output=str(out), score_cols=("score", "other"))
    )
    first, second = tmp_path / "two.summary.score.parquet", tmp_path / "two.summary.other.parquet"
    assert first.exists() and second.exists() and not out.exists()
    assert [(w.score_column, w.path) for w in result.outputs] == [
        ("score", str(first)),
        ("other", str(second)),
    ]
    both = from_summaries(first, second)
    assert isinstance(both, list)
    assert [e["score_column"] for e in both] == ["score", "other"]
    assert [e["n"] for e in both] == [3000, 3000]


@pytest.mark.parametrize(
    ("files", "by", "message"),
    [
        (
            ("ten.parquet", "twenty.parquet"),
            None,
            "{twenty.parquet}: summary field 'bin_edges' is [0.0, 0.05, ... 21 values], but "
            "{ten.parquet} has [0.0, 0.1, ... 11 values]: summaries merge only when they share it",
        ),
        (
            ("ten.parquet", "by.parquet"),
            None,
            "{by.parquet}: summary field 'group_column' is 'segment', but {ten.parquet} has "
            "null: summaries merge only when they share it",
        ),
        (
            ("ten.parquet",),
            "segment",
            "{ten.parquet}: summary field 'group_column' is null, so it cannot report --by "
            "'segment' (summarise with --by segment)",
        ),
        (
            ("day1.csv",),
            None,
            "{day1.csv}: not a calib summary (neither Parquet nor JSON; `calib summarize` "
            "writes them, and a file of rows is read without the summary options)",
        ),
        (
            ("plain.parquet",),
            None,
            "{plain.parquet}: not a calib summary (no 'calib.summary' metadata; write one with "
            "calib summarize)",
        ),
        (
            ("broken.json",),
            None,
            "{broken.json}: schema_version 99 is not supported (this calib reads 1)",
        ),
    ],
    ids=["bin_edges", "group_column", "by_without_groups", "csv", "plain_parquet", "schema"],
)
def test_mismatched_or_bad_summaries_are_refused_naming_the_file_and_field(
    days: list[Path], tmp_path: Path, files: tuple[str, ...], by: str | None, message: str
) -> None:
    summarize(days[0], output=tmp_path / "ten.parquet")
    summarize(days[1], output=tmp_path / "twenty.parquet", n_bins=20)
    summarize(days[1], output=tmp_path / "by.parquet", by="segment")
    good = summarize(days[0], output=tmp_path / "good.json")
    broken = json.loads(good.read_text()) | {"schema_version": 99}
    (tmp_path / "broken.json").write_text(json.dumps(broken))
    day_frame(1).write_parquet(tmp_path / "plain.parquet")
    paths = {name: str(tmp_path / name) for name in ("day1.csv", *files)}
    expected = re.sub(r"\{([^}]+)\}", lambda m: paths[m.group(1)], message)
    with pytest.raises(InputError) as refused:
        from_summaries(*(paths[name] for name in files), by=by)
    assert str(refused.value) == expected
    assert refused.value.exit_code == 65


def test_a_weight_column_the_summary_was_not_made_with_is_refused(
    days: list[Path], tmp_path: Path
) -> None:
    """Weights are fixed when a summary is made: ``--weight-col w`` on an unweighted one
    (which reported the unweighted total before) is refused, naming the file and the way out;
    the column it was made with is accepted."""
    plain = summarize(days[0], output=tmp_path / "plain.parquet")
    with pytest.raises(InputError) as refused:
        from_summaries(plain, weight_col="w")
    assert str(refused.value) == (
        f"{plain}: summary field 'weight_column' is null, so it cannot weight rows by "
        "--weight-col 'w' (summarise with --weight-col w)"
    )
    weighted = summarize(days[0], output=tmp_path / "weighted.parquet", weight_col="w")
    assert from_summaries(weighted, weight_col="w")["weight_total"] == pytest.approx(
        from_summaries(weighted)["weight_total"]
    )


def test_a_missing_summary_is_exit_66_naming_it(tmp_path: Path) -> None:
    missing = tmp_path / "missing.parquet"
    with pytest.raises(MissingInputError) as refused:
        from_summaries(missing)
    assert str(refused.value) == f"{missing}: no such file"
    assert refused.value.exit_code == 66


def test_bad_rows_are_refused_or_dropped_like_reliability(tmp_path: Path) -> None:
    bad = tmp_path / "bad.csv"
    bad.write_text(BAD_ROWS)
    out = tmp_path / "s.parquet"
    request = SummarizeRequest(files=(str(bad),), output=str(out))
    with pytest.raises(InputError) as refused:
        run_summarize(request)
    assert (
        str(refused.value)
        == f"{bad}: column 'score' has 1 value outside [0, 1] (first at row 2: 1.5)"
    )
    assert not out.exists()
    warnings: list[str] = []
    result = run_summarize(replace(request, on_invalid="drop", max_invalid=2), warn=warnings.append)
    assert warnings == [
        f"{bad}: dropped 2 invalid rows of 4 (score outside [0, 1]: 1, label not 0/1: 1)"
    ]
    assert (result.rows, result.dropped) == (2, 2)
    summary = from_summaries(out)
    assert isinstance(summary, dict) and summary["n"] == 2
    same_summary(io.read_summary(str(out)), result.outputs[0].summary)


def test_importance_weights_are_recorded_and_give_their_intervals(
    days: list[Path], tmp_path: Path
) -> None:
    """``--weight-kind importance`` is written into every summary's metadata, and reliability
    on those summaries uses it (the same figures, other intervals); summaries of the two
    kinds are refused together, naming both files."""
    freq = summarize(*days, output=tmp_path / "freq.json", weight_col="w")
    imp = summarize(*days, output=tmp_path / "imp.json", weight_col="w", weight_kind="importance")
    assert json.loads(imp.read_text())["weight_kind"] == "importance"
    assert json.loads(freq.read_text())["weight_kind"] == "frequency"
    a, b = from_summaries(freq), from_summaries(imp)
    assert a["weight_kind"] == "frequency" and b["weight_kind"] == "importance"
    close(a, b, ("n", "weight_total", "base_rate", "ece", "auc", "calibration_slope"))
    assert a["auc_ci"] != b["auc_ci"] and a["calibration_slope_ci"] != b["calibration_slope_ci"]
    with pytest.raises(InputError) as refused:
        from_summaries(freq, imp)
    assert str(refused.value) == (
        f"{imp}: a summary of importance weights, but {freq} holds frequency weights: "
        "summaries merge only with the same --weight-kind (their intervals need different "
        "variances)"
    )
