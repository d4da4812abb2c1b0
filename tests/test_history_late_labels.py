"""`estimate-shift --history` and `--backtest` on one growing table whose labels fill in late.

A job keeps one table of scored batches; chargebacks and defaults label them weeks later, so
its latest batches have no labels yet, or only some. Both options leave such a batch out as if
it were absent (neither learnt from, estimated, scored nor counted), with one warning, so a
run on the table equals, to the byte, the run on the table without those batches; labels
present must still be labels, rows without a batch are still refused, and a table with no
fully labelled batch is refused (exit 65). The ``calib`` command line in-process
(``invoke_calib``: the same arguments, environment and file descriptors as the installed
command, without its start-up; the process is not the point here) on Parquet (date batches)
and CSV (numbered batches, a missing label an empty field), in both engines.
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from tests.conftest import RunCalib

FAST = ["--bootstrap", "20", "--seed", "3"]
N_REF, N_BATCH = 1200, 150
WEEKS = [dt.date(2024, 9, 2) + dt.timedelta(days=7 * i) for i in range(6)]
RATES = (0.3, 0.4, 0.35, 0.5, 0.45, 0.4)


def _frame(rng: np.random.Generator, n: int, base_rate: float) -> pl.DataFrame:
    """Scores of two Gaussian classes on the logit scale, and their 0/1 labels."""
    label = (rng.random(n) < base_rate).astype(np.int64)
    logit = rng.normal(np.where(label == 1, 1.0, -1.0), 1.0) - 1.0
    return pl.DataFrame({"score": (1.0 / (1.0 + np.exp(-logit))).round(6), "label": label})


def _write(frame: pl.DataFrame, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix == ".csv":
        frame.write_csv(path)
    else:
        frame.write_parquet(path)


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``ref``: a labelled reference; ``weeks``: six batches of 150 rows, all labelled, the
    batch column ``week`` dates in Parquet and numbers 0 to 5 in CSV (rows of the batches
    interleaved in the file: batches are ordered by value)."""
    folder = tmp_path_factory.mktemp("history_late_labels")
    rng = np.random.default_rng(5)
    batches = pl.concat(
        [
            _frame(rng, N_BATCH, rate).with_columns(pl.lit(week).alias("week"))
            for week, rate in zip(WEEKS, RATES, strict=True)
        ]
    )
    batches = batches[rng.permutation(batches.height).tolist()]
    _frame(rng, N_REF, 0.3).write_parquet(folder / "ref.parquet")
    batches.write_parquet(folder / "weeks.parquet")
    numbered = batches.with_columns(
        ((pl.col("week") - pl.lit(WEEKS[0])).dt.total_days() // 7).alias("week")
    )
    numbered.write_csv(folder / "weeks.csv")
    return folder


def _week(fmt: str, index: int) -> object:
    """Week ``index`` as the batch column holds it in ``fmt``."""
    return WEEKS[index] if fmt == "parquet" else index


def _unlabel(frame: pl.DataFrame, rows: pl.Expr) -> pl.DataFrame:
    return frame.with_columns(pl.when(rows).then(None).otherwise(pl.col("label")).alias("label"))


def _run(calib: RunCalib, lab: Path, folder: Path, args: list[str]) -> tuple[int, str, str]:
    """``estimate-shift --json`` in ``folder`` (whose files are named alike in every case, so
    the reports compare): exit code, stdout, stderr."""
    done = calib(
        [
            "estimate-shift",
            *("--reference", str(lab / "ref.parquet"), "--batch-col", "week"),
            *args,
            *FAST,
            "--json",
        ],
        cwd=folder,
    )
    return done.returncode, done.stdout.decode(), done.stderr.decode()


# ---------------------------------------------------------------------------- --history


@pytest.mark.parametrize(
    ("fmt", "unlabelled", "shown", "rows"),
    [
        # the latest two weeks not labelled yet (the growing table; this week is in it)
        ("parquet", "last", "2024-09-30, 2024-10-07", "300"),
        # a week in the middle partly labelled (40 rows without a label: empty CSV fields)
        ("csv", "middle", "2", "150"),
    ],
)
def test_history_leaves_out_the_batches_not_fully_labelled(
    invoke_calib: RunCalib,
    lab: Path,
    tmp_path: Path,
    fmt: str,
    unlabelled: str,
    shown: str,
    rows: str,
) -> None:
    full = (
        pl.read_parquet(lab / "weeks.parquet")
        if fmt == "parquet"
        else pl.read_csv(lab / "weeks.csv")
    )
    week = pl.col("week")
    if unlabelled == "last":
        late = _unlabel(full, week >= _week(fmt, 4))
        kept = full.filter(week < _week(fmt, 4))
    else:
        in_week = week == _week(fmt, 2)
        late = _unlabel(full, in_week & (in_week.cum_sum() > N_BATCH - 40))
        kept = full.filter(week != _week(fmt, 2))
    name = f"all_weeks.{fmt}"
    _write(late, tmp_path / "late" / name)
    _write(kept, tmp_path / "kept" / name)
    target = tmp_path / f"this_week.{fmt}"
    _write(full.filter(week == _week(fmt, 5)).drop("label"), target)
    args = ["--target", str(target), "--history", name]
    code, report, warnings = _run(invoke_calib, lab, tmp_path / "late", args)
    code_kept, report_kept, warnings_kept = _run(invoke_calib, lab, tmp_path / "kept", args)
    assert (code, code_kept) == (0, 0), warnings
    assert report == report_kept  # the left-out batches are absent: counts include
    left_out = (
        f"warning: {name}: {2 if unlabelled == 'last' else 1} of 6 history batches are not "
        f"fully labelled yet ({rows} rows): left out ({shown})\n"
    )
    assert warnings == left_out + warnings_kept
    history = json.loads(report)["history"]
    assert (history["past_batches"], history["past_rows"]) == (kept["week"].n_unique(), kept.height)


def test_history_refusals(invoke_calib: RunCalib, lab: Path, tmp_path: Path) -> None:
    """No fully labelled batch, a label present that is not one, a row without a batch: exit
    65 with one line, nothing on stdout."""
    full = pl.read_csv(lab / "weeks.csv")
    target = tmp_path / "this_week.csv"
    full.filter(pl.col("week") == 5).drop("label").write_csv(target)
    row = pl.int_range(pl.len())
    # every week has a label missing (its first row), the rest are labelled
    first = pl.col("i") == pl.col("i").min().over("week")
    _unlabel(full.with_row_index("i"), first).drop("i").write_csv(tmp_path / "none.csv")
    _unlabel(full, pl.col("week") == 5).with_columns(
        pl.when(row == 3).then(2).otherwise(pl.col("label")).alias("label")
    ).write_csv(tmp_path / "two.csv")
    text = full.with_columns(
        pl.when(pl.col("week") == 5)
        .then(pl.lit(""))
        .when(row == 7)  # not in week 5: the first branch takes its rows
        .then(pl.lit("maybe"))
        .when(pl.col("label") == 1)
        .then(pl.lit("fraud"))
        .otherwise(pl.lit("ok"))
        .alias("label")
    )
    text.write_csv(tmp_path / "maybe.csv")
    _unlabel(full, pl.col("week") == 5).with_columns(
        pl.when(row == 9).then(None).otherwise(pl.col("week")).alias("week")
    ).write_csv(tmp_path / "gap.csv")
    assert text["label"].to_list().count("maybe") == (full["week"][7] != 5)
    cases = [
        (
            "none.csv",
            [],
            "error: none.csv: no history batch is fully labelled yet (6 of 900 rows have no "
            "label); --history learns only from past batches whose every label has arrived: "
            "give it some, or drop --history\n",
        ),
        (
            "two.csv",
            [],
            "error: two.csv: column 'label' has 1 value that is not 0/1 or true/false (first "
            "at row 4: '2'); name the positive value with --positive-label\n",
        ),
        (
            "maybe.csv",
            ["--positive-label", "fraud"],
            "error: maybe.csv: column 'label' has 3 distinct values ('fraud', 'maybe', 'ok'); "
            "labels must take two values\n",
        ),
        (
            "gap.csv",
            [],
            "error: gap.csv: column 'week' has 1 rows without a value; --history needs every "
            "past batch's place in time\n",
        ),
    ]
    for name, extra, message in cases:
        code, report, warnings = _run(
            invoke_calib, lab, tmp_path, ["--target", str(target), "--history", name, *extra]
        )
        assert (code, report) == (65, ""), warnings
        assert warnings == message


# ---------------------------------------------------------------------------- --backtest


@pytest.mark.parametrize(
    ("fmt", "engine"),
    # the engines' equality with unlabelled batches is in test_cli_backtest (make test)
    [("parquet", "memory"), pytest.param("csv", "streaming", marks=pytest.mark.slow)],
)
def test_backtest_leaves_out_the_batches_not_fully_labelled(
    invoke_calib: RunCalib, lab: Path, tmp_path: Path, fmt: str, engine: str
) -> None:
    """The latest two weeks unlabelled and a week in the middle partly: the backtest equals the
    one on the file without them (``--label-delay`` counts the batches that remain), the same
    in both engines (tests/test_cli_backtest.py compares the engines in-process)."""
    full = (
        pl.read_parquet(lab / "weeks.parquet")
        if fmt == "parquet"
        else pl.read_csv(lab / "weeks.csv")
    )
    week = pl.col("week")
    in_middle = week == _week(fmt, 1)
    late = _unlabel(full, (week >= _week(fmt, 4)) | (in_middle & (in_middle.cum_sum() <= 5)))
    kept = full.filter((week < _week(fmt, 4)) & ~in_middle)
    name = f"weeks.{fmt}"
    _write(late, tmp_path / "late" / name)
    _write(kept, tmp_path / "kept" / name)
    args = ["--target", name, "--backtest", "--label-delay", "1", "--engine", engine]
    code, report, warnings = _run(invoke_calib, lab, tmp_path / "late", args)
    code_kept, report_kept, warnings_kept = _run(invoke_calib, lab, tmp_path / "kept", args)
    assert (code, code_kept) == (0, 0), warnings
    assert report == report_kept
    shown = "2024-09-09, 2024-09-30, 2024-10-07" if fmt == "parquet" else "1, 4, 5"
    assert warnings == (
        f"warning: {name}: 3 of 6 batches are not fully labelled yet (450 rows): left out of "
        f"the backtest ({shown})\n" + warnings_kept
    )
    _write(_unlabel(full, week >= _week(fmt, 0)), tmp_path / "none" / name)
    code, report, warnings = _run(invoke_calib, lab, tmp_path / "none", args)
    assert (code, report) == (65, "")
    assert warnings == (
        f"error: {name}: no batch is fully labelled yet (900 of 900 rows have no label); "
        "--backtest scores the methods on batches whose every label has arrived: give a "
        "target with some\n"
    )


# ----------------------------------------------------------------- batches placed in time


def test_dates_timestamps_and_iso_text_place_history_batches_alike(
    invoke_calib: RunCalib, lab: Path, tmp_path: Path
) -> None:
    """A history of dates (Parquet) and a target of timestamps (a DuckDB TIMESTAMP): the
    history's 2024-09-16 was compared with the target's 2024-09-16 00:00:00 as text, came
    "before" it, and the target batch learnt from its own labels (one more past batch). A
    date is its midnight now, and a CSV history's ISO dates are those dates, so every pairing
    of date, timestamp and ISO text gives the same blend."""
    weeks = pl.read_parquet(lab / "weeks.parquet")
    target = weeks.filter(pl.col("week").is_in(WEEKS[2:4])).drop("label")
    target.write_parquet(tmp_path / "t_date.parquet")
    target.with_columns(pl.col("week").cast(pl.Datetime("us"))).write_parquet(
        tmp_path / "t_time.parquet"
    )
    weeks.write_csv(tmp_path / "h.csv")  # the weeks as ISO text
    reports = {}
    for history in ("weeks.parquet", "h.csv"):
        for target_file in ("t_date.parquet", "t_time.parquet"):
            folder = lab if history == "weeks.parquet" else tmp_path
            code, out, err = _run(
                invoke_calib,
                lab,
                tmp_path,
                ["--target", target_file, "--history", str(folder / history)],
            )
            assert code == 0, err
            report = json.loads(out)["history"]
            reports[history, target_file] = [
                (entry["n_history"], entry["prevalence"]) for entry in report["batches"]
            ]
    assert reports["weeks.parquet", "t_date.parquet"][0][0] == 2  # weeks 0 and 1 only
    assert len(set(map(tuple, reports.values()))) == 1, reports
