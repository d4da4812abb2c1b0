"""``--on-invalid drop`` with ``--by``: how many rows each group lost, in both engines.

A group's figures are of the rows it kept, so rows dropped from one group more than the
others (its labels arrive late, its scores are broken) make it less like its rows. The count
by group is checked against numpy on the file's own columns, the two engines against each
other (the same values, order and warning), for integer, float (NaN: the missing group),
text and datetime groups. The command lines run in-process (``invoke_calib``).
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest

from calib_cli.io import InvalidRows
from calib_cli.workflows.common import warn_dropped
from tests.conftest import RunCalib

N = 3000

#: the --by column's values of each type, the last of each missing
GROUPS: dict[str, list[Any]] = {
    "int": [3, 11, 7, None],
    "float": [0.5, 2.0, -1.25, float("nan")],
    "text": ["north", "007", "7", None],
    "datetime": [dt.datetime(2024, 1, d) for d in (1, 3, 2)] + [None],
}


def _rows(kind: str) -> pl.DataFrame:
    """Scores with labels, a quarter of group 1's labels missing and every score of group 2
    above 1 in a tenth of its rows; the other groups lose nothing."""
    rng = np.random.default_rng(5)
    values = GROUPS[kind]
    code = rng.integers(0, len(values), N)
    score = rng.uniform(0.01, 0.99, N)
    label = (rng.random(N) < score).astype(np.float64)
    label[(code == 1) & (rng.random(N) < 0.25)] = np.nan
    score[(code == 2) & (rng.random(N) < 0.1)] = 1.5
    group = pl.Series("g", [values[c] for c in code], strict=False)
    return pl.DataFrame({"score": score, "label": label}).with_columns(group)


def _expected(frame: pl.DataFrame) -> dict[Any, tuple[int, int]]:
    """(rows read, rows dropped) per group by numpy, keyed by the group's text."""
    bad = frame["label"].is_nan().to_numpy() | (frame["score"].to_numpy() > 1.0)
    group = frame["g"]
    if group.dtype.is_float():
        group = group.fill_nan(None)
    text = group.cast(pl.String).fill_null("(missing)").to_numpy()
    return {t: (int(np.sum(text == t)), int(np.sum(bad & (text == t)))) for t in set(text)}


#: every run here: by the column g, dropping invalid rows (up to half of them)
DROP_BY_G = ("--by", "g", "--on-invalid", "drop", "--max-invalid", "0.5")


def _run(invoke_calib: RunCalib, path: Path, engine: str) -> Any:
    done = invoke_calib(["reliability", str(path), *DROP_BY_G, "--engine", engine, "--json"])
    assert done.returncode == 0, done.stderr.decode()
    return done


@pytest.mark.parametrize("kind", list(GROUPS))
def test_both_engines_count_each_group_s_dropped_rows(
    invoke_calib: RunCalib, tmp_path: Path, kind: str
) -> None:
    frame = _rows(kind)
    path = tmp_path / "rows.parquet"
    frame.write_parquet(path)
    reports, warnings = [], []
    for engine in ("memory", "streaming"):
        done = _run(invoke_calib, path, engine)
        reports.append(json.loads(done.stdout))
        warnings.append(done.stderr.decode().splitlines())
    assert reports[0][0]["invalid_rows"] == reports[1][0]["invalid_rows"]
    assert warnings[0] == warnings[1]
    by_group = reports[0][0]["invalid_rows"]["by_group"]
    # the entries' groups, in their order, and the counts numpy finds
    assert [g["group"] for g in by_group] == [entry["group"] for entry in reports[0][1:]]
    expected = _expected(frame)
    texts = [str(e["group"]) for e in by_group]
    if kind == "datetime":
        texts = [t if t == "(missing)" else t + ".000000" for t in texts]
    counts = {t: (g["rows_read"], g["dropped"]) for t, g in zip(texts, by_group, strict=True)}
    assert counts == expected
    for entry in reports[0][1:]:  # each group's figures are of its kept rows
        group = next(g for g in by_group if g["group"] == entry["group"])
        assert entry["n"] == group["rows_read"] - group["dropped"]
    lost = sorted(
        (g for g in by_group if g["dropped"]), key=lambda g: -g["dropped"] / g["rows_read"]
    )
    assert warnings[0][1].startswith(
        f"warning: {path}: dropped rows by g: {lost[0]['group']} {lost[0]['dropped']:,} of "
    )
    assert warnings[0][1].endswith(
        "; none from 2 other groups; each group's figures are of the rows it kept"
    )


def test_summarize_says_it_too_and_no_by_no_groups(invoke_calib: RunCalib, tmp_path: Path) -> None:
    path = tmp_path / "rows.parquet"
    _rows("text").write_parquet(path)
    done = invoke_calib(["summarize", str(path), *DROP_BY_G, "-o", str(tmp_path / "s.parquet")])
    assert done.returncode == 0, done.stderr.decode()
    reliability = _run(invoke_calib, path, "streaming")
    said = [line for line in done.stderr.decode().splitlines() if "dropped rows by g" in line]
    assert said == [reliability.stderr.decode().splitlines()[1]]
    plain = invoke_calib(
        ["reliability", str(path), "--on-invalid", "drop", "--max-invalid", "0.5", "--json"]
    )
    assert "by_group" not in json.loads(plain.stdout)["invalid_rows"]
    assert "dropped rows by" not in plain.stderr.decode()


def test_summarize_reports_each_group_s_dropped_rows_over_every_input(
    invoke_calib: RunCalib, tmp_path: Path
) -> None:
    """summarize's ``dropped_by_group`` sums the inputs' counts: numpy's on the two files
    together, reliability's ``invalid_rows.by_group`` on one; none without ``--by``."""
    whole = _rows("int")
    first, second = tmp_path / "a.parquet", tmp_path / "b.csv"
    whole[:1000].write_parquet(first)
    whole[1000:].write_csv(second)
    report = tmp_path / "report.json"
    done = invoke_calib(["summarize", str(first), str(second), *DROP_BY_G, "--report",
                         str(report), "-o", str(tmp_path / "s.parquet")])  # fmt: skip
    assert done.returncode == 0, done.stderr.decode()
    by_group = json.loads(report.read_text())["dropped_by_group"]
    assert [g["group"] for g in by_group] == [3, 7, 11, "(missing)"]
    counts = {str(g["group"]): (g["rows_read"], g["dropped"]) for g in by_group}
    assert counts == _expected(whole)
    assert sum(g["dropped"] for g in by_group) == json.loads(report.read_text())["dropped"]
    alone = tmp_path / "alone.json"
    invoke_calib(["summarize", str(first), *DROP_BY_G, "--report", str(alone),
                  "-o", str(tmp_path / "t.parquet")])  # fmt: skip
    reliability = json.loads(_run(invoke_calib, first, "streaming").stdout)
    expected = reliability[0]["invalid_rows"]["by_group"]
    assert json.loads(alone.read_text())["dropped_by_group"] == expected
    plain = tmp_path / "plain.json"
    invoke_calib(["summarize", str(first), "--on-invalid", "drop", "--max-invalid", "0.5",
                  "--report", str(plain), "-o", str(tmp_path / "u.parquet")])  # fmt: skip
    assert "dropped_by_group" not in json.loads(plain.read_text())


def test_summarize_keeps_an_int_and_a_float_group_apart_as_its_summaries_do(
    invoke_calib: RunCalib, tmp_path: Path
) -> None:
    """Group 1 in one file and 1.0 in another are two groups in the summaries ('1', '1.0'),
    so two entries in dropped_by_group (Python's 1 == 1.0 had merged them)."""
    rng = np.random.default_rng(9)
    paths = []
    for name, group in (("a", pl.lit(1, pl.Int64)), ("b", pl.lit(1.0, pl.Float64))):
        label = (rng.random(200) < 0.3).astype(np.float64)
        label[:10] = np.nan
        frame = pl.DataFrame({"score": rng.uniform(0.1, 0.9, 200), "label": label})
        paths.append(tmp_path / f"{name}.parquet")
        frame.with_columns(group.alias("g")).write_parquet(paths[-1])
    report = tmp_path / "report.json"
    done = invoke_calib(["summarize", *map(str, paths), *DROP_BY_G, "--report", str(report),
                         "-o", str(tmp_path / "s.parquet")])  # fmt: skip
    assert done.returncode == 0, done.stderr.decode()
    payload = json.loads(report.read_text())
    assert payload["summaries"][0]["groups"] == ["1", "1.0"]
    entries = [(g["group"], g["rows_read"], g["dropped"]) for g in payload["dropped_by_group"]]
    assert entries == [(1, 200, 10), (1.0, 200, 10)]
    assert [type(g[0]) for g in entries] == [int, float]


def test_the_warning_names_the_most_affected_groups_first() -> None:
    by_group = (*((f"g{i}", 100, i) for i in range(9)), (None, 50, 50))
    said: list[str] = []
    warn_dropped(InvalidRows("f.csv", 950, 86, {"label missing": 86}, by_group), "g", said.append)
    assert said == [
        "f.csv: dropped 86 invalid rows of 950 (label missing: 86)",
        "f.csv: dropped rows by g: (missing) 50 of 50 (100.0%), g8 8 of 100 (8.0%), g7 7 of 100 "
        "(7.0%), g6 6 of 100 (6.0%), g5 5 of 100 (5.0%) and 4 more groups (the report's "
        "invalid_rows); none from 1 other group; each group's figures are of the rows it kept",
    ]
    said.clear()
    warn_dropped(InvalidRows("f.csv", 950, 86, {"label missing": 86}, by_group), None, said.append)
    assert len(said) == 1
