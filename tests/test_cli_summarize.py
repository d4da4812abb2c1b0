"""``calib summarize`` and ``calib reliability --from-summary`` end to end (real subprocesses)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest

from tests.conftest import RunCalib

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


def _day(seed: int, n: int = 3000) -> pl.DataFrame:
    rng = np.random.default_rng(seed)
    score = rng.beta(1.0, 6.0, n)
    return pl.DataFrame(
        {
            "id": np.arange(n) + 10_000 * seed,
            "score": score,
            "label": (rng.random(n) < score).astype(np.int64),
            "segment": rng.choice(["a", "b", "c"], n),
            "w": rng.choice([0.0, 1.0, 2.5], n),
        }
    )


@pytest.fixture
def days(tmp_path: Path) -> list[Path]:
    paths = []
    for seed in (1, 2, 3):
        path = tmp_path / f"day{seed}.csv"
        _day(seed).write_csv(path)
        paths.append(path)
    pl.concat([_day(s) for s in (1, 2, 3)]).write_parquet(tmp_path / "month.parquet")
    return paths


def _json(done: subprocess.CompletedProcess[bytes]) -> Any:
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def _close(a: dict[str, Any], b: dict[str, Any], keys: tuple[str, ...]) -> None:
    for key in keys:
        if a[key] is None or b[key] is None:
            assert a[key] is None and b[key] is None, key
        else:
            assert a[key] == pytest.approx(b[key], rel=1e-9, abs=1e-12), key


def test_daily_summaries_merged_equal_the_summary_of_the_month(
    run_calib: RunCalib, days: list[Path], tmp_path: Path
) -> None:
    """The cron job of the README: summarise each day once, report the month from them."""
    for path in days:
        out = tmp_path / f"{path.stem}.summary.parquet"
        done = run_calib(["summarize", str(path), "--by", "segment", "-o", str(out), "-q"])
        assert done.returncode == 0, done.stderr
        assert done.stdout == b"" and done.stderr == b""
    month = tmp_path / "month.summary.parquet"
    done = run_calib(
        ["summarize", str(tmp_path / "month.parquet"), "--by", "segment", "-o", str(month)]
    )
    assert done.returncode == 0, done.stderr
    daily = sorted(str(p) for p in tmp_path.glob("day*.summary.parquet"))
    # a shell glob after --from-summary: the other paths arrive as arguments
    merged = _json(
        run_calib(["reliability", "--from-summary", *daily, "--by", "segment", "--json"])
    )
    whole = _json(
        run_calib(["reliability", "--from-summary", str(month), "--by", "segment", "--json"])
    )
    rows = _json(
        run_calib(["reliability", str(tmp_path / "month.parquet"), "--by", "segment", "--json"])
    )
    assert isinstance(merged, list) and isinstance(whole, list) and isinstance(rows, list)
    assert [e["group"] for e in merged] == [None, "a", "b", "c"] == [e["group"] for e in rows]
    for m, w, r in zip(merged, whole, rows, strict=True):
        assert m["engine"] == "summary" and r["engine"] == "memory"
        _close(m, w, (*EXACT, "auc", "average_precision", "hosmer_lemeshow"))
        assert m["exactness"] == w["exactness"]
        _close(m, r, EXACT)
        assert abs(m["auc"] - r["auc"]) <= m["exactness"]["auc_bound"] + 1e-12
        for a, b in zip(m["bins"], r["bins"], strict=True):
            _close(a, b, ("lower", "upper", "count", "n_rows", "mean_score", "observed_rate"))
    # the same, naming each file with its own option
    repeated = _json(
        run_calib(["reliability", *(x for p in daily for x in ("--from-summary", p)), "--json"])
    )
    assert isinstance(repeated, dict)
    _close(repeated, merged[0], (*EXACT, "auc"))


def test_several_files_one_summary_json_and_weights(
    run_calib: RunCalib, days: list[Path], tmp_path: Path
) -> None:
    out = tmp_path / "all.json"
    report = tmp_path / "report.json"
    done = run_calib(
        ["summarize", *map(str, days), "--weight-col", "w", "-o", str(out), "--report", str(report)]
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(out.read_text())["kind"] == "calib.score_summary"
    meta = json.loads(report.read_text())
    assert meta["rows"] == 9000 and meta["inputs"] == [str(p) for p in days]
    assert meta["summaries"][0]["metadata"]["weight_column"] == "w"
    from_summary = _json(run_calib(["reliability", "--from-summary", str(out), "--json"]))
    rows = _json(
        run_calib(["reliability", str(tmp_path / "month.parquet"), "--weight-col", "w", "--json"])
    )
    assert isinstance(from_summary, dict) and isinstance(rows, dict)
    _close(from_summary, rows, EXACT)


def test_stdin_to_stdout_and_several_score_columns(
    run_calib: RunCalib, days: list[Path], tmp_path: Path
) -> None:
    done = run_calib(["summarize", "-", "-o", "-"], stdin=days[0].read_bytes())
    assert done.returncode == 0, done.stderr
    assert done.stdout[:4] == b"PAR1"
    (tmp_path / "piped.parquet").write_bytes(done.stdout)
    frame = _day(1).with_columns(other=pl.col("score") ** 2)
    frame.write_parquet(tmp_path / "two.parquet")
    out = tmp_path / "two.summary.parquet"
    done = run_calib(
        [
            "summarize",
            str(tmp_path / "two.parquet"),
            "--score-col",
            "score",
            "--score-col",
            "other",
            "-o",
            str(out),
            "-q",
        ]
    )
    assert done.returncode == 0, done.stderr
    first, second = tmp_path / "two.summary.score.parquet", tmp_path / "two.summary.other.parquet"
    assert first.exists() and second.exists() and not out.exists()
    both = _json(run_calib(["reliability", "--from-summary", str(first), str(second), "--json"]))
    assert isinstance(both, list)
    assert [e["score_column"] for e in both] == ["score", "other"]
    piped = _json(
        run_calib(["reliability", "--from-summary", str(tmp_path / "piped.parquet"), "--json"])
    )
    assert isinstance(piped, dict) and piped["n"] == 3000


def test_mismatched_or_bad_summaries_exit_65_naming_the_file_and_field(
    run_calib: RunCalib, days: list[Path], tmp_path: Path
) -> None:
    ten, twenty = tmp_path / "ten.parquet", tmp_path / "twenty.parquet"
    assert run_calib(["summarize", str(days[0]), "-o", str(ten), "-q"]).returncode == 0
    assert (
        run_calib(["summarize", str(days[1]), "--bins", "20", "-o", str(twenty), "-q"]).returncode
        == 0
    )
    done = run_calib(["reliability", "--from-summary", str(ten), "--from-summary", str(twenty)])
    assert done.returncode == 65
    assert "twenty.parquet: summary field 'bin_edges'" in done.stderr.decode()
    by = tmp_path / "by.parquet"
    assert (
        run_calib(["summarize", str(days[1]), "--by", "segment", "-o", str(by), "-q"]).returncode
        == 0
    )
    done = run_calib(["reliability", "--from-summary", str(ten), str(by)])
    assert (
        done.returncode == 65 and "by.parquet: summary field 'group_column'" in done.stderr.decode()
    )
    done = run_calib(["reliability", "--from-summary", str(ten), "--by", "segment"])
    assert done.returncode == 65 and "'group_column'" in done.stderr.decode()
    done = run_calib(["reliability", "--from-summary", str(days[0])])
    assert done.returncode == 65 and "day1.csv: not a calib summary" in done.stderr.decode()
    plain = tmp_path / "plain.parquet"
    _day(1).write_parquet(plain)
    done = run_calib(["reliability", "--from-summary", str(plain)])
    assert done.returncode == 65 and "plain.parquet: not a calib summary" in done.stderr.decode()
    broken = tmp_path / "broken.json"
    good = tmp_path / "good.json"
    assert run_calib(["summarize", str(days[0]), "-o", str(good), "-q"]).returncode == 0
    text = json.loads(good.read_text())
    text["schema_version"] = 99
    broken.write_text(json.dumps(text))
    done = run_calib(["reliability", "--from-summary", str(broken)])
    assert done.returncode == 65 and "broken.json: schema_version 99" in done.stderr.decode()
    assert (
        run_calib(["reliability", "--from-summary", str(tmp_path / "missing.parquet")]).returncode
        == 66
    )
    # with --from-summary every path is a summary (so that a shell glob works)
    done = run_calib(["reliability", str(days[0]), "--from-summary", str(ten)])
    assert done.returncode == 65 and "not a calib summary" in done.stderr.decode()


def test_bad_rows_are_refused_or_dropped_like_reliability(
    run_calib: RunCalib, tmp_path: Path
) -> None:
    bad = tmp_path / "bad.csv"
    bad.write_text("score,label\n0.2,0\n1.5,1\n0.4,x\n0.3,1\n")
    out = tmp_path / "s.parquet"
    done = run_calib(["summarize", str(bad), "-o", str(out)])
    assert done.returncode == 65 and not out.exists()
    assert (
        "bad.csv: column 'score' has 1 value outside [0, 1] (first at row 2: 1.5)"
        in done.stderr.decode()
    )
    done = run_calib(["summarize", str(bad), "-o", str(out), "--on-invalid", "drop"])
    assert done.returncode == 0 and "dropped 2 invalid rows of 4" in done.stderr.decode()
    summary = _json(run_calib(["reliability", "--from-summary", str(out), "--json"]))
    assert isinstance(summary, dict) and summary["n"] == 2
