"""``calib summarize`` and ``calib reliability --from-summary`` end to end (real subprocesses):
the options reach the workflow, stdin and stdout, exit codes and exact error lines.

The figures (merged daily summaries equal the month's summary and the rows', weights, several
score columns) and every refusal's message are checked in-process in
test_workflows_summarize.py; each test here compares what the installed command wrote with
what the workflow gives.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from calib_cli import io
from calib_cli.workflows.summarize import SummarizeRequest, run_summarize
from tests.conftest import RunCalib
from tests.test_workflows_summarize import (
    BAD_ROWS,
    EXACT,
    close,
    from_summaries,
    same_summary,
    summarize,
    write_days,
)


def _json(done: subprocess.CompletedProcess[bytes]) -> Any:
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_summarize_quietly_writes_the_workflow_s_summaries_and_report(
    run_calib: RunCalib, tmp_path: Path
) -> None:
    """The cron job of the README, with every option at once: several files, --by, weights,
    two score columns (one file each), --bins, a JSON summary and a --report, and -q."""
    days = write_days(tmp_path)
    out, report = tmp_path / "all.json", tmp_path / "report.json"
    options: list[str] = ["--by", "segment", "--weight-col", "w", "--bins", "20"]
    options += ["--score-col", "score", "--score-col", "other"]
    done = run_calib(
        ["summarize", *map(str, days), *options, "-o", str(out), "--report", str(report), "-q"]
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == b"" and done.stderr == b""
    first, second = tmp_path / "all.score.json", tmp_path / "all.other.json"
    assert not out.exists()
    expected = run_summarize(
        SummarizeRequest(
            files=tuple(map(str, days)),
            output=str(tmp_path / "expected.json"),
            score_cols=("score", "other"),
            weight_col="w",
            by="segment",
            n_bins=20,
        )
    )
    for path, written in zip((first, second), expected.outputs, strict=True):
        assert json.loads(path.read_text())["kind"] == "calib.score_summary"
        same_summary(io.read_summary(str(path)), written.summary)
    meta = json.loads(report.read_text())
    assert meta["rows"] == 9000 and meta["inputs"] == [str(p) for p in days]
    assert [s["path"] for s in meta["summaries"]] == [str(first), str(second)]
    assert [s["score_column"] for s in meta["summaries"]] == ["score", "other"]
    assert meta["summaries"][0]["metadata"]["weight_column"] == "w"
    for entry, written in zip(meta["summaries"], expected.outputs, strict=True):
        assert entry["metadata"] == written.summary.metadata()


def test_reliability_merges_summaries_repeated_and_after_the_option(
    invoke_calib: RunCalib, tmp_path: Path
) -> None:
    """``--from-summary a --from-summary b`` and a shell glob (``--from-summary day*``: the
    other paths arrive as arguments) at once: every file is merged."""
    daily = [
        str(summarize(p, output=tmp_path / f"{p.stem}.summary.parquet", by="segment"))
        for p in write_days(tmp_path)
    ]
    args = ["--from-summary", daily[0], daily[1], "--from-summary", daily[2]]
    merged = _json(invoke_calib(["reliability", *args, "--by", "segment", "--json"]))
    expected = from_summaries(*daily, by="segment")
    assert isinstance(merged, list) and isinstance(expected, list)
    assert [e["group"] for e in merged] == [None, "a", "b", "c"]
    assert merged[0]["n"] == 9000
    for m, e in zip(merged, expected, strict=True):
        assert m["engine"] == "summary" and m["group"] == e["group"]
        close(m, e, (*EXACT, "auc", "average_precision", "hosmer_lemeshow"))
        assert m["exactness"] == e["exactness"]
        for a, b in zip(m["bins"], e["bins"], strict=True):
            close(a, b, ("lower", "upper", "count", "n_rows", "mean_score", "observed_rate"))


def test_summarize_stdin_to_stdout_keeps_warnings_on_stderr(
    run_calib: RunCalib, tmp_path: Path
) -> None:
    bad = tmp_path / "bad.csv"
    bad.write_text(BAD_ROWS)
    done = run_calib(
        ["summarize", "-", "-o", "-", "--on-invalid", "drop", "--max-invalid", "0.5"],
        stdin=bad.read_bytes(),
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout[:4] == b"PAR1"
    lines = done.stderr.decode().splitlines()
    assert lines[0].startswith("warning: stdin: dropped 2 invalid rows of 4 (")
    assert lines[1].startswith("stdout: summary of 'score' over 2 rows") and len(lines) == 2
    piped = tmp_path / "piped.parquet"
    piped.write_bytes(done.stdout)
    expected = summarize(
        bad, output=tmp_path / "expected.parquet", on_invalid="drop", max_invalid=0.5
    )
    same_summary(io.read_summary(str(piped)), io.read_summary(str(expected)))
    summary = from_summaries(piped)
    assert isinstance(summary, dict) and summary["n"] == 2


def test_with_from_summary_every_path_is_a_summary_and_refusals_name_file_and_field(
    invoke_calib: RunCalib, tmp_path: Path
) -> None:
    day = write_days(tmp_path)[0]
    ten = summarize(day, output=tmp_path / "ten.parquet")
    twenty = summarize(day, output=tmp_path / "twenty.parquet", n_bins=20)
    # a FILE with --from-summary is one more summary (so that a shell glob works): merged
    # with the other, it is refused for its bins
    done = invoke_calib(["reliability", str(twenty), "--from-summary", str(ten)])
    assert done.returncode == 65 and done.stdout == b""
    assert done.stderr.decode() == (
        f"error: {twenty}: summary field 'bin_edges' is [0.0, 0.05, ... 21 values], but "
        f"{ten} has [0.0, 0.1, ... 11 values]: summaries merge only when they share it\n"
    )
    missing = tmp_path / "missing.parquet"
    done = invoke_calib(["reliability", "--from-summary", str(missing)])
    assert done.returncode == 66 and done.stderr.decode() == f"error: {missing}: no such file\n"


def test_summarize_refuses_bad_rows_writing_nothing(invoke_calib: RunCalib, tmp_path: Path) -> None:
    bad = tmp_path / "bad.csv"
    bad.write_text(BAD_ROWS)
    out = tmp_path / "s.parquet"
    done = invoke_calib(["summarize", str(bad), "-o", str(out)])
    assert done.returncode == 65 and not out.exists() and done.stdout == b""
    assert done.stderr.decode() == (
        f"error: {bad}: column 'score' has 1 value outside [0, 1] (first at row 2: 1.5)\n"
    )


def test_weight_kind_importance_needs_a_weight_column(
    invoke_calib: RunCalib, tmp_path: Path
) -> None:
    days = write_days(tmp_path)
    out = tmp_path / "s.json"
    done = invoke_calib(["summarize", str(days[0]), "--weight-kind", "importance", "-o", str(out)])
    assert done.returncode == 2
    assert (
        done.stderr.decode()
        .strip()
        .endswith(
            "--weight-kind importance needs --weight-col (the weights): name the weight column "
            "with --weight-col, or drop --weight-kind"
        )
    )
    assert not out.exists()
    done = invoke_calib(
        ["summarize", str(days[0]), "--weight-col", "w", "--weight-kind", "importance",
         "-o", str(out), "-q"]
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert io.read_summary(str(out)).weight_kind == "importance"
