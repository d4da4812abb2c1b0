"""Human output that fits: the reliability report and the row tables of every command at 80
columns, in a pipe and on a wide console; no figure is ever cut with an ellipsis."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rich.console import Console, RenderableType
from rich.table import Table

from calib_cli.report.payloads import dumps, reliability_payload
from calib_cli.report.tables import (
    DETAIL_MAX_ENTRIES,
    LABEL_MIN_WIDTH,
    MISSING,
    RELIABILITY_COLUMNS,
    RELIABILITY_ROWS,
    FirstThatFits,
    LongColumn,
    LongTable,
    PackedTables,
    fmt,
    fmt_count,
    reliability_report,
    row_table,
)
from calib_cli.types import ALL_ROWS
from calib_cli.workflows.reliability import ReliabilityRequest, ReliabilityResult, run_reliability
from tests.conftest import SAMPLE_DATA

ELLIPSIS = "…"


def render(renderable: RenderableType, width: int) -> str:
    """What a console of ``width`` columns prints, without colour."""
    console = Console(file=io.StringIO(), width=width, color_system=None, highlight=False)
    console.print(renderable)
    output = console.file.getvalue()
    assert isinstance(output, str)
    return output


def assert_fits(text: str, width: int) -> None:
    assert ELLIPSIS not in text
    too_wide = [line for line in text.splitlines() if len(line.rstrip()) > width]
    assert too_wide == []


def grouped_result(
    tmp_path: Path, n_groups: int, rows_per_group: int, *, name: str = "g{i:03d}"
) -> ReliabilityResult:
    """``reliability --by g`` on ``n_groups`` groups of random scores and labels."""
    rng = np.random.default_rng(7)
    n = n_groups * rows_per_group
    scores = rng.random(n)
    frame = pl.DataFrame(
        {
            "g": [name.format(i=i % n_groups) for i in range(n)],
            "score": scores,
            "label": (rng.random(n) < scores).astype(int),
        }
    )
    path = tmp_path / "groups.csv"
    frame.write_csv(path)
    return run_reliability(ReliabilityRequest(file=str(path), by="g"))


def table_rows(text: str, first_cell: str) -> list[list[str]]:
    """The rows of the long tables that start with ``first_cell``, split into cells."""
    return [line.split("  ") for line in text.splitlines() if line.startswith(f"{first_cell}  ")]


def cells(row: list[str]) -> list[str]:
    return [cell.strip() for cell in row if cell.strip()]


def test_the_long_layout_has_every_figure_of_the_side_by_side_one() -> None:
    assert sorted(a for _, a, _ in RELIABILITY_COLUMNS) == sorted(a for _, a, _ in RELIABILITY_ROWS)
    assert [a for _, a, _ in RELIABILITY_COLUMNS[:7]] == [
        "n",
        "positives",
        "ece",
        "brier",
        "log_loss",
        "auc",
        "auc_ci",
    ]


def test_one_column_keeps_its_figure_table_and_the_chart_moves_below_at_80() -> None:
    result = run_reliability(
        ReliabilityRequest(file=str(SAMPLE_DATA / "credit_default_scores.csv"))
    )
    narrow, wide = render(reliability_report(result), 80), render(reliability_report(result), 400)
    for text, width in ((narrow, 80), (wide, 120)):
        assert_fits(text, width)
        assert "┃ figure" in text and "AUC 95% CI (DeLong)" in text
        assert "0.9000–1.0000" in text and "● observed" in text
    # at 80 the chart's axis lines are below the bin table; at 120 beside it
    assert not any("┃" in line and "┤" in line for line in narrow.splitlines())
    assert next(line for line in narrow.splitlines() if "┤" in line).startswith("1 ┤")
    assert any("Bins: score" in line and "1 ┤" in line for line in wide.splitlines())
    # narrower than the bin table: packed tables, every edge and interval whole
    tight = render(reliability_report(result), 50)
    assert_fits(tight, 50)
    for current in result.entries[0].summary.bins:
        assert f"{current.lower:.4f}–{current.upper:.4f}" in tight
        assert f"{fmt(current.observed_ci_low)}–{fmt(current.observed_ci_high)}" in tight


def test_many_groups_switch_to_one_row_per_group_with_every_figure(tmp_path: Path) -> None:
    result = grouped_result(tmp_path, n_groups=12, rows_per_group=40)
    text = render(reliability_report(result), 80)
    assert_fits(text, 80)
    assert "┃ figure" not in text  # 13 entries side by side cannot fit 80 columns
    headings = [line for line in text.splitlines() if line.startswith("g ")]
    assert len(headings) >= 3  # the figures packed into several tables, labels repeated
    shown = " ".join(headings)
    for heading, attribute, kind in RELIABILITY_COLUMNS:
        defined = kind != "interval" or getattr(result.entries[0].summary, attribute) is not None
        assert (heading in shown) == defined, heading
    for entry in result.entries:
        label = ALL_ROWS if entry.group is None else str(entry.group)
        assert len(table_rows(text, label)) == len(headings)
    assert text.count("Bins: score") == len(result.entries) == 13
    # a console wide enough shows a few groups side by side again
    few = grouped_result(tmp_path, n_groups=2, rows_per_group=40)
    assert "┃ figure" in render(reliability_report(few), 200)


def test_the_long_table_shows_the_figures_of_each_group(tmp_path: Path) -> None:
    result = grouped_result(tmp_path, n_groups=12, rows_per_group=40)
    text = render(reliability_report(result), 80)
    header = next(line for line in text.splitlines() if line.startswith("g ")).split()
    assert header[:4] == ["g", "rows", "positives", "ECE"]
    for entry in result.entries:
        label = ALL_ROWS if entry.group is None else str(entry.group)
        first = cells(table_rows(text, label)[0])
        s = entry.summary
        low, high = s.auc_ci
        assert first == [
            label,
            fmt_count(s.n),
            fmt_count(s.positives),
            fmt(s.ece),
            fmt(s.brier),
            fmt(s.log_loss),
            fmt(s.auc),
            f"{fmt(low)}–{fmt(high)}" if np.isfinite(low) else MISSING,
        ]


def test_beyond_the_detail_limit_the_headline_figures_and_a_note(tmp_path: Path) -> None:
    result = grouped_result(tmp_path, n_groups=DETAIL_MAX_ENTRIES + 10, rows_per_group=2)
    for width in (80, 120):
        text = render(reliability_report(result), width)
        assert_fits(text, width)
        assert "Bins:" not in text
        assert sum(line.startswith("g ") for line in text.splitlines()) == 1
        for entry in result.entries[1:]:
            assert len(table_rows(text, str(entry.group))) == 1
        assert f"{len(result.entries)} entries" in text and "--json" in text
    assert "AUC 95% CI" in render(reliability_report(result), 80)


def test_long_group_names_fold_onto_more_lines_and_are_never_cut(tmp_path: Path) -> None:
    name = "segment-with-a-rather-long-and-descriptive-name-{i:02d}"
    result = grouped_result(tmp_path, n_groups=20, rows_per_group=3, name=name)
    text = render(reliability_report(result), 80)
    assert_fits(text, 80)
    for entry in result.entries[1:]:
        assert str(entry.group)[:LABEL_MIN_WIDTH] in text

    label = "a-label-of-sixty-characters-that-cannot-fit-in-its-column-xyz"
    table = LongTable(
        [LongColumn("name", [label], label=True), LongColumn("ECE", ["0.1234"])]
        + [LongColumn(f"figure {k}", [f"{k}.0000"]) for k in range(3)]
    )
    width = table.fitted_widths(50)[0]
    assert LABEL_MIN_WIDTH <= width < len(label)
    lines = render(table, 50).splitlines()[2:]
    assert all(len(line) <= 50 for line in lines)
    assert lines[0].endswith("2.0000") and "0.1234" in lines[0]
    assert "".join(line[:width] for line in lines) == label


def test_row_tables_are_side_by_side_when_they_fit_and_packed_when_not() -> None:
    headings = ["day", *(f"figure {k}" for k in range(12))]
    rows = [[f"2024-05-0{d}", *(f"{d * k / 7:.4f}" for k in range(12))] for d in range(1, 5)]
    wide = render(row_table("Per day", headings, rows), 200)
    assert "┃ day" in wide and wide.splitlines()[0] == "Per day"
    narrow = render(row_table("Per day", headings, rows), 80)
    assert_fits(narrow, 80)
    assert "┃" not in narrow
    for row in rows:
        found = [cells(r) for r in table_rows(narrow, row[0])]
        assert [cell for part in found for cell in part[1:]] == row[1:]
    # with the bold row kept and no label column
    packed = render(row_table(None, headings[1:], [r[1:] for r in rows], labels=0), 40)
    assert_fits(packed, 40)


def test_first_that_fits_falls_back_to_the_last_layout() -> None:
    long = LongTable([LongColumn("x", ["1" * 50])])
    short = LongTable([LongColumn("x", ["2" * 10])])
    assert "2" * 10 in render(FirstThatFits(long, short), 30)
    assert "1" * 50 in render(FirstThatFits(long, short), 60)
    with pytest.raises(ValueError, match="as many cells"):
        LongTable([LongColumn("a", ["1"]), LongColumn("b", [])])


def test_nested_layouts_measure_each_table_once_per_width() -> None:
    """Rich asks a layout's width at every level of nesting and again to draw it; a table is
    measured cell by cell, so a 3,000-bin report took seconds. Each layout's natural width is
    measured once per console; what is drawn is unchanged."""
    measured: list[str] = []

    class Counted(LongTable):
        def __rich_measure__(self, console: Any, options: Any) -> Any:
            measured.append(self.columns[0].heading)
            return super().__rich_measure__(console, options)

    wide = Counted([LongColumn("wide", ["1" * 50])])
    narrow = Counted([LongColumn("narrow", ["2" * 10])])
    grid = Table.grid()  # measures its cells at several widths, then draws them
    grid.add_row(FirstThatFits(wide, narrow), "|")
    text = render(grid, 30)
    assert "2" * 10 in text and "1" * 50 not in text
    assert measured.count("wide") == 1  # its natural width, once
    assert 1 <= measured.count("narrow") <= 2  # the layout drawn, at the grid's widths


@settings(max_examples=40, deadline=None)
@given(
    labels=st.lists(st.text("abcxyz-_0123456789", min_size=1, max_size=40), min_size=1, max_size=6),
    n_figures=st.integers(1, 12),
    width=st.integers(40, 160),
)
def test_packed_tables_show_every_cell_whole(labels: list[str], n_figures: int, width: int) -> None:
    figures = [
        LongColumn(f"fig {k}", [f"{(i + 1) * (k + 1) / 3:.4f}" for i in range(len(labels))])
        for k in range(n_figures)
    ]
    text = render(PackedTables([LongColumn("name", labels, label=True)], figures), width)
    assert_fits(text, width)
    joined = text.replace("\n", " ")
    for figure in figures:
        assert figure.heading in joined
        for cell in figure.cells:
            assert cell in joined
    for label in labels:  # whole, or folded after at least LABEL_MIN_WIDTH characters
        assert label[:LABEL_MIN_WIDTH] in text


# ---------------------------------------------------------------------------------- JSON text

JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=6), children, max_size=4)
    ),
    max_leaves=30,
)


@settings(max_examples=200, deadline=None)
@given(value=JSON_VALUES)
def test_json_text_is_exactly_what_the_standard_library_writes(value: Any) -> None:
    assert dumps(value) == json.dumps(value, indent=2, allow_nan=False) + "\n"


def test_the_report_of_many_groups_is_the_standard_librarys_json(tmp_path: Path) -> None:
    result = grouped_result(tmp_path, n_groups=30, rows_per_group=3)
    payload = reliability_payload(result)
    assert dumps(payload) == json.dumps(payload, indent=2, allow_nan=False) + "\n"
    assert json.loads(dumps({"x": float("nan"), "y": np.float32(0.5)})) == {"x": None, "y": 0.5}


@pytest.mark.parametrize(
    ("kind", "said"), [("frequency", "weighted by 'w'"), ("importance", "importance weights 'w'")]
)
def test_the_title_says_the_counts_are_weighted(tmp_path: Path, kind: str, said: str) -> None:
    """Weighted positives (1,465.64) sat beside row counts with nothing saying so."""
    rng = np.random.default_rng(3)
    scores = rng.random(500)
    path = tmp_path / "w.csv"
    pl.DataFrame({"score": scores, "label": (rng.random(500) < scores).astype(int),
                  "w": rng.random(500) + 0.5}).write_csv(path)  # fmt: skip
    result = run_reliability(ReliabilityRequest(file=str(path), weight_col="w", weight_kind=kind))
    assert render(reliability_report(result), 400).splitlines()[0] == (
        f"Reliability of {path} (10 uniform bins, {said})"
    )
    plain = run_reliability(ReliabilityRequest(file=str(path)))
    assert render(reliability_report(plain), 400).splitlines()[0].endswith("(10 uniform bins)")
