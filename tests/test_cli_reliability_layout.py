"""``calib reliability --by`` on hundreds of groups, end to end: one row per group in an
80-column terminal, nothing cut, and the human table agrees with the JSON report of the run
(its speed on thousands of groups is measured by bench/bench_groups.py)."""

from __future__ import annotations

import json
import math
import re
import subprocess
from pathlib import Path

import numpy as np
import polars as pl

from calib_cli.report.tables import DETAIL_MAX_ENTRIES, MISSING, fmt, fmt_count
from tests.conftest import CALIB, RunCalib, _environment


def test_hundreds_of_groups_in_80_columns_agree_with_the_json_report(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    n = 400  # well past DETAIL_MAX_ENTRIES: the long layout and the note
    pl.DataFrame(
        {
            "g": [f"g{i}" for i in range(n)],
            "score": rng.random(n),
            "label": (rng.random(n) < 0.3).astype(int),
        }
    ).write_csv(tmp_path / "groups.csv")
    done = subprocess.run(
        [CALIB, "reliability", "groups.csv", "--by", "g", "--report", "report.json"],
        capture_output=True,
        cwd=tmp_path,
        env={**_environment(), "COLUMNS": "80"},
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr == b""
    text = done.stdout.decode()
    lines = text.splitlines()
    assert "…" not in text
    assert max(len(line) for line in lines) <= 80
    # the long layout: one table of the headline figures, one row per group, then a note
    headers = [line.split() for line in lines if line.startswith("g ")]
    # all rows are named "all rows" (a group may be called "all"): with group names of 4
    # characters that label is 4 wider, and the AUC interval no longer fits 80 columns
    assert headers == [["g", "rows", "positives", "ECE", "Brier", "log", "loss", "AUC"]]
    assert "Bins:" not in text
    assert f"{n + 1:,} entries" in text and "--json" in text
    assert str(DETAIL_MAX_ENTRIES) in text
    split = [re.split(r" {2,}", line.strip()) for line in lines[3:] if line.strip()]
    rows = {cells[0]: cells for cells in split}
    payload = json.loads((tmp_path / "report.json").read_text())
    assert len(payload) == n + 1
    for entry in payload:
        group = "all rows" if entry["group"] is None else entry["group"]
        low, high = entry["auc_ci"]
        interval = (
            f"{fmt(low)}–{fmt(high)}"
            if low is not None and high is not None and math.isfinite(low)
            else MISSING
        )
        assert rows[group] == [
            group,
            fmt_count(entry["n"]),
            fmt_count(entry["positives"]),
            fmt(entry["ece"]),
            fmt(entry["brier"]),
            fmt(entry["log_loss"]),
            fmt(entry["auc"]),
        ], group
        assert interval  # in the JSON report


def test_the_title_gives_the_bins_the_report_used(tmp_path: Path, run_calib: RunCalib) -> None:
    """Equal-mass bins on one repeated score are one bin: the title said "10 quantile bins"."""
    rows = "".join(f"0.3,{i % 2}\n" for i in range(40))
    (tmp_path / "const.csv").write_text("score,label\n" + rows)
    done = run_calib(["reliability", "const.csv", "--strategy", "quantile"], cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.decode().splitlines()[0] == "Reliability of const.csv (1 quantile bin)"


def test_a_group_called_all_is_told_from_all_rows(invoke_calib: RunCalib, tmp_path: Path) -> None:
    """All rows are "all rows" in tables and gate messages; ``segment=all`` is the group.
    Both read ``segment=all`` (``... for score (segment=all); ... for score (segment=all)``)."""
    rng = np.random.default_rng(1)
    n = 200
    pl.DataFrame(
        {
            "segment": rng.choice(["all", "b"], n),
            "score": rng.random(n),
            "label": (rng.random(n) < 0.3).astype(int),
        }
    ).write_csv(tmp_path / "s.csv")
    done = invoke_calib(
        ["reliability", "s.csv", "--by", "segment", "--fail-above-ece", "0.001", "-q"],
        cwd=tmp_path,
    )
    assert done.returncode == 1
    (line,) = done.stderr.decode().splitlines()
    assert "for score (all rows); " in line and "for score (segment=all); " in line
    done = invoke_calib(["reliability", "s.csv", "--by", "segment"], cwd=tmp_path)
    wide = done.stdout.decode().splitlines()
    headings = next(line for line in wide if "segment=" in line).split("┃")
    assert [h.strip() for h in headings[1:-1]] == ["figure", "all rows", "segment=all", "segment=b"]
    assert "Bins: score" in done.stdout.decode()
    report = tmp_path / "r.json"
    done = invoke_calib(["reliability", "s.csv", "--by", "segment", "--report", str(report)],
                        cwd=tmp_path)  # fmt: skip
    assert [e["group"] for e in json.loads(report.read_text())] == [None, "all", "b"]  # unchanged
