"""Rich tables and the text reliability chart, built from the typed results.

Nothing here prints: the CLI owns the consoles (standard output for results, standard error
for diagnostics). Rendering returns values.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
from rich.cells import cell_len
from rich.console import Console, ConsoleOptions, Group, RenderableType, RenderResult
from rich.measure import Measurement
from rich.segment import Segment
from rich.style import Style
from rich.table import Table
from rich.text import Text

from calib_cli.report.payloads import bins_phrase, weighting_phrase
from calib_cli.types import ALL_ROWS

if TYPE_CHECKING:
    from calib_cli.core.metrics import ReliabilitySummary
    from calib_cli.core.pca import PcaStrata
    from calib_cli.core.selection import MethodChoice
    from calib_cli.core.shift import ShiftEstimate
    from calib_cli.core.strata import RankingComparison, StratumSummary
    from calib_cli.workflows.estimate_shift import BacktestResult, BatchEstimate, HistoryResult
    from calib_cli.workflows.recalibrate import FileEffect
    from calib_cli.workflows.reliability import ReliabilityResult
    from calib_cli.workflows.resample import ResampleResult
    from calib_cli.workflows.show import ShowResult

MISSING = "—"


# ---------------------------------------------------------------------------------- numbers


def fmt(value: float | None, digits: int = 4) -> str:
    """A figure for a table: ``—`` when undefined, scientific when tiny, else fixed.

    >>> fmt(0.123456), fmt(float("nan")), fmt(3.2e-7), fmt(12345)
    ('0.1235', '—', '3.200e-07', '12345')
    """
    if value is None:
        return MISSING
    if isinstance(value, (bool, np.bool_)):
        return "yes" if value else "no"
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    number = float(value)
    if not math.isfinite(number):
        return MISSING
    if number != 0.0 and abs(number) < 10.0 ** (-(digits - 1)):
        return f"{number:.3e}"
    if abs(number) >= 1e6:
        return f"{number:.4g}"
    return f"{number:.{digits}f}"


def fmt_interval(interval: Sequence[float] | None, digits: int = 4) -> str:
    """``[lo, hi]`` or ``—``."""
    if interval is None or len(interval) != 2:
        return MISSING
    low, high = interval
    if low is None or high is None or not (math.isfinite(low) and math.isfinite(high)):
        return MISSING
    return f"[{fmt(low, digits)}, {fmt(high, digits)}]"


def weight_kind_note(weight_col: str | None, weight_kind: str) -> str | None:
    """The line saying what ``--weight-col`` meant, for importance weights (None otherwise).

    >>> weight_kind_note("iw", "importance")
    "weights: 'iw' are importance weights (intervals and tests from the rows observed)"
    >>> weight_kind_note("w", "frequency") is None
    True
    """
    if weight_col is None or weight_kind != "importance":
        return None
    return (
        f"weights: {weight_col!r} are importance weights (intervals and tests from the rows "
        "observed)"
    )


def fmt_count(value: float) -> str:
    """A (possibly weighted) count: integer when whole, else two decimals."""
    number = float(value)
    if not math.isfinite(number):
        return MISSING
    return f"{number:,.0f}" if number == round(number) else f"{number:,.2f}"


# ---------------------------------------------------------------------------------- layout

#: Entries (score column x group) beyond which the figures are not tried side by side.
WIDE_MAX_ENTRIES = 16
#: Entries beyond which the human report leaves out the per-entry tables and bin tables (the
#: JSON report has them all).
DETAIL_MAX_ENTRIES = 50
#: The width a layout is measured at to learn its natural width.
UNBOUNDED_WIDTH = 1_000_000
#: Columns between two cells of a long table.
LONG_GAP = 2
#: A label cell (group, column) folds onto more lines rather than take more of the width than
#: this, when the table would not fit otherwise.
LABEL_MIN_WIDTH = 10


class FirstThatFits:
    """The first of several layouts whose natural width fits the console, else the last.

    Rich renders it at the width it is given (a terminal's, ``COLUMNS``, or 120 off a
    terminal), so the same report is side by side on a wide terminal and stacked on an
    80-column one; nothing is ever cut with an ellipsis.
    """

    def __init__(self, *layouts: RenderableType) -> None:
        if not layouts:
            raise ValueError("layouts: give at least one")
        self.layouts = layouts
        # natural widths by (console, layout): Rich measures a table cell by cell, and asks
        # for a layout's width at every level of nesting (a 3,000-bin table took seconds)
        self._natural: dict[tuple[Console, int], int] = {}

    def natural_width(self, console: Console, options: ConsoleOptions, index: int) -> int:
        """The width of layout ``index`` on a console as wide as it likes."""
        key = (console, index)
        if key not in self._natural:
            unbounded = options.update_width(UNBOUNDED_WIDTH)
            self._natural[key] = Measurement.get(console, unbounded, self.layouts[index]).maximum
        return self._natural[key]

    def choose(self, console: Console, options: ConsoleOptions) -> RenderableType:
        """The layout drawn at ``options.max_width``."""
        for index, layout in enumerate(self.layouts[:-1]):
            if self.natural_width(console, options, index) <= options.max_width:
                return layout
        return self.layouts[-1]

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield self.choose(console, options)

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        return Measurement.get(console, options, self.choose(console, options))


class Line:
    """A title or a note, never broken inside a word (a file name in it stays whole): off a
    terminal (a pipe, a file, a log) on one line whatever its length, as warnings are; on a
    terminal wrapped at spaces, a word wider than the console left whole. Plain text: a
    ``[`` in a path is not read as markup. Print it with ``crop=False`` (the console would
    cut a line wider than itself)."""

    def __init__(self, text: str, *, style: str = "table.title") -> None:
        self.text = text
        self.style = style

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        lines = word_lines(self.text, options.max_width) if console.is_terminal else [self.text]
        for line in lines:
            # "ignore": Rich neither wraps nor cuts the line (a word wider than the console)
            yield Text(line, style=self.style, overflow="ignore", no_wrap=True)

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        longest = max(cell_len(word) for word in self.text.split(" "))
        return Measurement(min(longest, options.max_width), cell_len(self.text))


def word_lines(text: str, width: int) -> list[str]:
    """``text`` cut at spaces into lines of at most ``width`` cells; a word wider than that
    on a line of its own, whole (Rich would fold it, breaking a path in two).

    >>> word_lines("Reliability of data/a_long_file_name.parquet (10 bins)", 20)
    ['Reliability of', 'data/a_long_file_name.parquet', '(10 bins)']
    """
    lines: list[str] = []
    current: str | None = None
    for word in text.split(" "):
        if current is None:
            current = word
        elif cell_len(current) + 1 + cell_len(word) > width:
            lines.append(current)
            current = word
        else:
            current = f"{current} {word}"
    lines.append(current or "")
    return lines


class Titled:
    """A title on lines of its own above a table (a Rich table's own title wraps at the
    table's width, breaking a long file name); measured as the table alone."""

    def __init__(self, title: str, body: RenderableType) -> None:
        self.title = title
        self.body = body

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield Line(self.title)
        yield self.body

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        return Measurement.get(console, options, self.body)


@dataclass(frozen=True)
class LongColumn:
    """One column of a :class:`LongTable`: its heading and one cell per row. Label columns
    (``label=True``: group, score column) are left-aligned and fold when space is short;
    figures are right-aligned and never fold."""

    heading: str
    cells: Sequence[str]
    label: bool = False

    @property
    def width(self) -> int:
        """The natural width: the longest of the heading and the cells."""
        return max([cell_len(self.heading), *(cell_len(c) for c in self.cells)])


class LongTable:
    """One row per entry, columns left to right, drawn as plain lines (Rich's ``Table``
    measures every cell again at each render: seconds for thousands of rows).

    Label columns fold onto more lines when the table is wider than the console; figures
    stay whole (a line too wide for a very narrow console runs on rather than being cut).
    """

    def __init__(
        self,
        columns: Sequence[LongColumn],
        *,
        title: str | None = None,
        bold_rows: frozenset[int] = frozenset(),
    ) -> None:
        if not columns:
            raise ValueError("columns: give at least one")
        lengths = {len(column.cells) for column in columns}
        if len(lengths) != 1:
            raise ValueError(f"columns: every column needs as many cells ({sorted(lengths)})")
        self.columns = tuple(columns)
        self.title = title
        self.bold_rows = bold_rows
        self.widths = [column.width for column in self.columns]

    @property
    def natural_width(self) -> int:
        """The width with every cell on one line."""
        return sum(self.widths) + LONG_GAP * (len(self.widths) - 1)

    def fitted_widths(self, max_width: int) -> list[int]:
        """Column widths for ``max_width``: label columns narrowed (down to
        :data:`LABEL_MIN_WIDTH`, widest first) until the table fits, figures untouched."""
        widths = list(self.widths)
        excess = self.natural_width - max_width
        while excess > 0:
            candidates = [
                i
                for i, column in enumerate(self.columns)
                if column.label and widths[i] > LABEL_MIN_WIDTH
            ]
            if not candidates:
                break
            widest = max(candidates, key=lambda i: widths[i])
            cut = min(excess, widths[widest] - LABEL_MIN_WIDTH)
            widths[widest] -= cut
            excess -= cut
        return widths

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        narrowest = sum(self.fitted_widths(0)) + LONG_GAP * (len(self.widths) - 1)
        return Measurement(min(narrowest, self.natural_width), self.natural_width)

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        widths = self.fitted_widths(options.max_width)
        gap = " " * LONG_GAP
        bold = console.get_style("bold")
        if self.title:
            yield from console.render(Line(self.title), options)
        limit = max(options.max_width, 1)
        for line in self._line([c.heading for c in self.columns], widths, gap):
            yield from _folded(line, limit, bold)
        rule_width = min(sum(widths) + LONG_GAP * (len(widths) - 1), limit)
        yield Segment("─" * rule_width, console.get_style("dim"))
        yield Segment.line()
        for row in range(len(self.columns[0].cells)):
            style = bold if row in self.bold_rows else None
            for line in self._line([c.cells[row] for c in self.columns], widths, gap):
                yield from _folded(line, limit, style)

    def _line(self, cells: Sequence[str], widths: Sequence[int], gap: str) -> list[str]:
        """A row on one or more lines: label cells folded to their width, figures whole."""
        pieces: list[list[str]] = []
        for column, cell, width in zip(self.columns, cells, widths, strict=True):
            if column.label and cell_len(cell) > width:
                pieces.append([cell[i : i + width] for i in range(0, len(cell), width)])
            else:
                pieces.append([cell])
        lines = []
        for index in range(max(len(p) for p in pieces)):
            parts = []
            for column, piece, width in zip(self.columns, pieces, widths, strict=True):
                text = piece[index] if index < len(piece) else ""
                parts.append(text.ljust(width) if column.label else text.rjust(width))
            lines.append(gap.join(parts).rstrip())
        return lines


def _folded(line: str, width: int, style: Style | None) -> Iterator[Segment]:
    """A line as segments, folded onto more lines when it is wider than ``width`` (Rich
    crops a line wider than the console: a figure would lose its last digits)."""
    for start in range(0, max(len(line), 1), width):
        yield Segment(line[start : start + width], style)
        yield Segment.line()


class PackedTables:
    """Rows with a few label columns (a group, a batch) and more figure columns than a line
    holds: the figures packed left to right into as few :class:`LongTable` as fit the console,
    each repeating the labels (with ``headline_only``, only the first). ``columns`` may be a
    function, called once when first drawn (thousands of rows cost nothing until then)."""

    def __init__(
        self,
        labels: Sequence[LongColumn],
        columns: Sequence[LongColumn] | Callable[[], Sequence[LongColumn]],
        *,
        title: str | None = None,
        bold_rows: frozenset[int] = frozenset(),
        headline_only: bool = False,
    ) -> None:
        self.labels = list(labels)
        self._columns = columns
        self.title = title
        self.bold_rows = bold_rows
        self.headline_only = headline_only

    def columns(self) -> Sequence[LongColumn]:
        """The figure columns, in order."""
        if callable(self._columns):
            self._columns = self._columns()
        return self._columns

    def tables(self, max_width: int) -> list[LongTable]:
        """The figures packed greedily into tables no wider than ``max_width`` (at least one
        figure per table), the labels (each given at most a quarter of the width before it
        folds) at the left of each."""
        label_width = sum(
            min(column.width, max(LABEL_MIN_WIDTH, max_width // 4)) for column in self.labels
        ) + LONG_GAP * len(self.labels)
        packs: list[list[LongColumn]] = [[]]
        used = label_width
        for column in self.columns():
            if packs[-1] and used + column.width > max_width:
                if self.headline_only:
                    break
                packs.append([])
                used = label_width
            packs[-1].append(column)
            used += column.width + LONG_GAP
        return [
            LongTable(
                [*self.labels, *pack],
                title=self.title if index == 0 else None,
                bold_rows=self.bold_rows,
            )
            for index, pack in enumerate(packs)
        ]

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        for index, table in enumerate(self.tables(options.max_width)):
            if index:
                yield Segment.line()
            yield table

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        widths = [table.natural_width for table in self.tables(options.max_width)]
        return Measurement(min(widths), max(widths))


def row_table(
    title: str | None,
    headings: Sequence[str],
    rows: Sequence[Sequence[str]],
    *,
    labels: int = 1,
    bold_rows: frozenset[int] = frozenset(),
) -> RenderableType:
    """A table of one row per item (batch, stratum, method): a Rich table when it fits the
    console, else its first ``labels`` columns repeated at the left of as many tables as the
    other columns need (:class:`PackedTables`). No cell is ever cut."""
    table = Table(header_style="bold")
    for index, heading in enumerate(headings):
        table.add_column(heading, justify="left" if index < labels else "right", no_wrap=True)
    for index, row in enumerate(rows):
        table.add_row(*row, style="bold" if index in bold_rows else None)
    columns = [
        LongColumn(heading, [row[i] for row in rows], label=i < labels)
        for i, heading in enumerate(headings)
    ]
    packed = PackedTables(columns[:labels], columns[labels:], title=title, bold_rows=bold_rows)
    return FirstThatFits(table if title is None else Titled(title, table), packed)


# ------------------------------------------------------------------------------ reliability

# (label in the table, attribute, kind) — kind: "count", "figure", "interval"
RELIABILITY_ROWS: tuple[tuple[str, str, str], ...] = (
    ("rows", "n", "count"),
    ("positives (weighted)", "positives", "count"),
    ("base rate", "base_rate", "figure"),
    ("mean score", "mean_score", "figure"),
    ("mean score - base rate", "calibration_in_the_large", "figure"),
    ("observed / expected", "observed_expected_ratio", "figure"),
    ("log loss", "log_loss", "figure"),
    ("Brier score", "brier", "figure"),
    ("  reliability", "brier_reliability", "figure"),
    ("  resolution", "brier_resolution", "figure"),
    ("  uncertainty", "brier_uncertainty", "figure"),
    ("ECE", "ece", "figure"),
    ("  ECE 95% CI", "ece_ci", "interval"),
    ("ECE debiased", "ece_debiased", "figure"),
    ("  debiased 95% CI", "ece_debiased_ci", "interval"),
    ("MCE", "mce", "figure"),
    ("AUC", "auc", "figure"),
    ("  AUC 95% CI (DeLong)", "auc_ci", "interval"),
    ("Gini", "gini", "figure"),
    ("average precision", "average_precision", "figure"),
    ("calibration intercept", "calibration_intercept", "figure"),
    ("  intercept 95% CI", "calibration_intercept_ci", "interval"),
    ("calibration slope", "calibration_slope", "figure"),
    ("  slope 95% CI", "calibration_slope_ci", "interval"),
    ("Hosmer-Lemeshow", "hosmer_lemeshow", "figure"),
    ("  HL p-value", "hosmer_lemeshow_pvalue", "figure"),
    ("Spiegelhalter z", "spiegelhalter_z", "figure"),
    ("  Spiegelhalter p-value", "spiegelhalter_pvalue", "figure"),
)

#: The same figures as columns of the long layout (one row per entry): the headline figures
#: first (they fill the first table, the only one shown beyond DETAIL_MAX_ENTRIES), then the
#: rest in the order of :data:`RELIABILITY_ROWS`, with short headings.
RELIABILITY_COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("rows", "n", "count"),
    ("positives", "positives", "count"),
    ("ECE", "ece", "figure"),
    ("Brier", "brier", "figure"),
    ("log loss", "log_loss", "figure"),
    ("AUC", "auc", "figure"),
    ("AUC 95% CI", "auc_ci", "interval"),
    ("base rate", "base_rate", "figure"),
    ("mean score", "mean_score", "figure"),
    ("score - rate", "calibration_in_the_large", "figure"),
    ("obs./exp.", "observed_expected_ratio", "figure"),
    ("Brier rel.", "brier_reliability", "figure"),
    ("Brier res.", "brier_resolution", "figure"),
    ("Brier unc.", "brier_uncertainty", "figure"),
    ("ECE 95% CI", "ece_ci", "interval"),
    ("ECE debiased", "ece_debiased", "figure"),
    ("debiased 95% CI", "ece_debiased_ci", "interval"),
    ("MCE", "mce", "figure"),
    ("Gini", "gini", "figure"),
    ("avg. precision", "average_precision", "figure"),
    ("intercept", "calibration_intercept", "figure"),
    ("intercept 95% CI", "calibration_intercept_ci", "interval"),
    ("slope", "calibration_slope", "figure"),
    ("slope 95% CI", "calibration_slope_ci", "interval"),
    ("HL", "hosmer_lemeshow", "figure"),
    ("HL p-value", "hosmer_lemeshow_pvalue", "figure"),
    ("Spieg. z", "spiegelhalter_z", "figure"),
    ("Spieg. p", "spiegelhalter_pvalue", "figure"),
)


def _cell(summary: ReliabilitySummary, attribute: str, kind: str) -> str:
    value = getattr(summary, attribute, None)
    if kind == "count":
        return fmt_count(value) if value is not None else MISSING
    if kind == "interval":
        return fmt_interval(value)
    return fmt(value)


def _long_cell(summary: ReliabilitySummary, attribute: str, kind: str) -> str:
    """A cell of the long layout: intervals as ``lo–hi`` (as in the bin table), to fit."""
    if kind == "interval":
        value = getattr(summary, attribute, None)
        return MISSING if value is None else _span(*value)
    return _cell(summary, attribute, kind)


@dataclass(frozen=True)
class EntryView:
    """One entry of the reliability report as the tables show it: its heading side by side
    (``column\\nby=group``), its labels in the long layout (score column, group) and its
    figures."""

    heading: str
    labels: tuple[str, ...]
    summary: ReliabilitySummary
    bold: bool = False


def _wide_table(entries: Sequence[EntryView], *, title: str | None) -> Table:
    """Figures as rows, one column per entry. Interval rows undefined everywhere (no
    --bootstrap) are left out."""
    table = Table(title=title, title_justify="left", header_style="bold")
    table.add_column("figure", no_wrap=True)
    for entry in entries:
        table.add_column(entry.heading, justify="right", no_wrap=True)
    for label, attribute, kind in RELIABILITY_ROWS:
        cells = [_cell(entry.summary, attribute, kind) for entry in entries]
        if kind == "interval" and all(cell == MISSING for cell in cells):
            continue
        table.add_row(label, *cells)
    return table


def _long_reliability(
    entries: Sequence[EntryView], *, label_headings: Sequence[str], headline_only: bool
) -> PackedTables:
    """The long layout of the figures: one row per entry, the columns of
    :data:`RELIABILITY_COLUMNS` (intervals undefined for every entry left out), computed only
    when drawn; with ``headline_only``, only the first table (rows, positives, ECE, Brier, log
    loss, AUC and its interval at 80 columns)."""
    labels = [
        LongColumn(heading, [entry.labels[i] for entry in entries], label=True)
        for i, heading in enumerate(label_headings)
    ]

    def figures() -> list[LongColumn]:
        columns = []
        for heading, attribute, kind in RELIABILITY_COLUMNS:
            cells = [_long_cell(entry.summary, attribute, kind) for entry in entries]
            if kind == "interval" and all(cell == MISSING for cell in cells):
                continue
            columns.append(LongColumn(heading, cells))
        return columns

    return PackedTables(
        labels,
        figures,
        bold_rows=frozenset(i for i, entry in enumerate(entries) if entry.bold),
        headline_only=headline_only,
    )


def reliability_figures(
    entries: Sequence[EntryView],
    *,
    label_headings: Sequence[str],
    title: str | None,
    headline_only: bool = False,
) -> RenderableType:
    """The figures of every entry: side by side (figures as rows, one column per entry) when
    that fits the console, else the long layout (:func:`_long_reliability`). Beyond
    :data:`WIDE_MAX_ENTRIES` entries the long layout is used whatever the width."""
    long = _long_reliability(entries, label_headings=label_headings, headline_only=headline_only)
    body: RenderableType = long
    if len(entries) <= WIDE_MAX_ENTRIES:
        body = FirstThatFits(_wide_table(entries, title=None), long)
    if title is None:
        return body
    # the title on a line of its own: a table's title wraps at the table's width
    return Group(Line(title), body)


def _span(low: float, high: float, digits: int = 4) -> str:
    if not (math.isfinite(low) and math.isfinite(high)):
        return MISSING
    return f"{fmt(low, digits)}–{fmt(high, digits)}"


def reliability_bin_table(summary: ReliabilitySummary, *, title: str) -> RenderableType:
    """The bin table: edges, weighted count, mean score, observed rate and its Wilson CI (a
    Rich table, or packed narrower tables on a console too narrow for it; see
    :func:`row_table`)."""
    edges = edge_texts([e for current in summary.bins for e in (current.lower, current.upper)])
    rows = [
        [
            f"{edges[2 * index]}–{edges[2 * index + 1]}",
            fmt_count(current.count),
            fmt(current.mean_score),
            fmt(current.observed_rate),
            _span(current.observed_ci_low, current.observed_ci_high),
        ]
        for index, current in enumerate(summary.bins)
    ]
    return row_table(title, ("bin", "count", "mean score", "observed", "95% CI (Wilson)"), rows)


def edge_texts(edges: Sequence[float]) -> list[str]:
    """Bin edges with one number of decimals, 4 or as many more as it takes for distinct
    edges to read distinct and every edge above 0 to show two significant digits (quantile
    bins of rare-event scores read 0.0000–0.0000).

    >>> edge_texts([0.0, 0.1, 0.1, 0.2]), edge_texts([0.0, 0.00012, 0.00012, 0.00031])
    (['0.0000', '0.1000', '0.1000', '0.2000'], ['0.00000', '0.00012', '0.00012', '0.00031'])
    >>> edge_texts([9.37e-20, 9.05e-07, 9.05e-07, 1.07e-05])
    ['9.4e-20', '9.1e-07', '9.1e-07', '1.1e-05']
    """

    def readable(texts: list[str], shown: bool) -> bool:
        distinct = dict(zip(edges, texts, strict=True))
        return shown and len(set(distinct.values())) == len(distinct)

    for decimals in range(4, 9):  # then scientific, with the fewest digits that tell apart
        texts = [f"{edge:.{decimals}f}" for edge in edges]
        if readable(texts, all(e == 0.0 or abs(e) >= 10.0 ** (1 - decimals) for e in edges)):
            return texts
    for digits in range(1, 17):
        texts = [f"{edge:.{digits}e}" for edge in edges]
        if readable(texts, True):
            return texts
    return [repr(edge) for edge in edges]


_NICE_LIMITS = (0.01, 0.02, 0.05, 0.1, 0.2, 0.3, 0.5, 0.75, 1.0)


def chart_limit(summary: ReliabilitySummary) -> float:
    """The axis maximum of the chart: the smallest round value above every bin's mean score
    and observed rate, so rare-event models do not crowd into one corner.

    >>> from types import SimpleNamespace as S
    >>> chart_limit(S(bins=[S(count=1, mean_score=0.03, observed_rate=0.041)]))
    0.05
    """
    top = 0.0
    for current in summary.bins:
        if current.count > 0:
            for value in (current.mean_score, current.observed_rate):
                if math.isfinite(value):
                    top = max(top, value)
    return next((limit for limit in _NICE_LIMITS if top <= limit), 1.0)


def reliability_chart(summary: ReliabilitySummary, *, width: int = 28, height: int = 12) -> Text:
    """A compact reliability diagram in text: observed rate (●) against mean score, with the
    diagonal of perfect calibration (·) and Wilson intervals (│). Both axes run from 0 to
    :func:`chart_limit`."""
    limit = chart_limit(summary)
    grid = [[" "] * width for _ in range(height)]

    def column_of(x: float) -> int:
        return min(width - 1, max(0, round(x / limit * (width - 1))))

    def row_of(y: float) -> int:
        return min(height - 1, max(0, height - 1 - round(y / limit * (height - 1))))

    for col in range(width):
        grid[row_of(col / (width - 1) * limit)][col] = "·"
    for current in summary.bins:
        if not (current.count > 0 and math.isfinite(current.observed_rate)):
            continue
        col = column_of(current.mean_score)
        low, high = current.observed_ci_low, current.observed_ci_high
        if math.isfinite(low) and math.isfinite(high):
            for row in range(row_of(min(high, limit)), row_of(low) + 1):
                if grid[row][col] in (" ", "·"):
                    grid[row][col] = "│"
        grid[row_of(current.observed_rate)][col] = "●"
    label = f"{limit:g}"
    pad = len(label)
    text = Text()
    for index, line in enumerate(grid):
        if index == 0:
            axis = f"{label} ┤"
        elif index == height - 1:
            axis = f"{'0':>{pad}} ┤"
        else:
            axis = " " * pad + " │"
        text.append(axis, style="dim")
        for char in line:
            style = "bold cyan" if char == "●" else ("cyan" if char == "│" else "dim")
            text.append(char, style=style)
        text.append("\n")
    text.append(" " * pad + " └" + "─" * width + "\n", style="dim")
    axis_label = f"mean score {label}"
    text.append(
        " " * pad + "  0" + " " * max(1, width - 1 - len(axis_label)) + axis_label + "\n",
        style="dim",
    )
    text.append(" " * pad + "  ● observed (│ 95% CI)  · ideal\n", style="dim")
    return text


def reliability_detail(summary: ReliabilitySummary, *, title: str) -> RenderableType:
    """The bin table with the chart beside it, or below it when the console has no room."""
    beside = Table.grid(padding=(0, 3))
    beside.add_column(no_wrap=True)
    beside.add_column(no_wrap=True)
    beside.add_row(reliability_bin_table(summary, title=title), reliability_chart(summary))
    below = Group(reliability_bin_table(summary, title=title), reliability_chart(summary))
    return FirstThatFits(beside, below)


def reliability_report(
    result: ReliabilityResult, *, detail_max_entries: int = DETAIL_MAX_ENTRIES
) -> RenderableType:
    """The human ``calib reliability`` report: the figures of every entry (score column x
    group; see :func:`reliability_figures`), then each entry's bin table and chart. Beyond
    ``detail_max_entries`` entries: the headline figures, one row per entry, and a note that
    the JSON report has the rest."""
    phrase = weighting_phrase(result.weight_col, (e.summary.weight_kind for e in result.entries))
    weights = "" if phrase is None else f", {phrase}"
    used = bins_phrase([entry.summary.n_bins for entry in result.entries], result.strategy)
    title = f"Reliability of {result.source} ({used}{weights})"
    columns = list(dict.fromkeys(entry.score_column for entry in result.entries))
    label_headings: list[str] = []
    if len(columns) > 1 or result.by is None:
        label_headings.append("column")
    if result.by is not None:
        label_headings.append(result.by)
    views = []
    for entry in result.entries:
        labels: list[str] = []
        if len(columns) > 1 or result.by is None:
            labels.append(entry.score_column)
        if result.by is not None:
            # all rows by name: a group may be called "all"
            labels.append(ALL_ROWS if entry.group is None else str(entry.group))
        views.append(
            EntryView(
                heading=entry.heading,
                labels=tuple(labels),
                summary=entry.summary,
                bold=result.by is not None and entry.group is None,
            )
        )
    many = len(views) > detail_max_entries
    parts: list[RenderableType] = [
        reliability_figures(views, label_headings=label_headings, title=title, headline_only=many)
    ]
    if many:
        parts.append(
            Text(
                f"Headline figures only: {len(views):,} entries (score column x group) are more "
                f"than the {detail_max_entries} shown in full; --json or --report PATH has every "
                "figure and the bin table of each.",
                style="dim",
            )
        )
    else:
        parts.extend(
            reliability_detail(entry.summary, title=f"Bins: {entry.heading}")
            for entry in result.entries
        )
    return Group(*parts)


# -------------------------------------------------------------------------------- resample


def _rate(value: float) -> str:
    return f"{float(value):.4g}"


def resample_table(result: ResampleResult) -> RenderableType:
    """Rows, positives and base rates before (in) and after (out) sampling, with the rates."""
    headings = (
        "stratum",
        "neg. rate",
        "pos. rate",
        "rows in",
        "rows out",
        "pos. in",
        "pos. out",
        "base rate in",
        "base rate out",
    )
    rows: list[list[str]] = []
    summary = result.summary
    if summary.stratified:
        for s in summary.strata:
            rows.append(
                [
                    f"{result.strata_col}={s.stratum}",
                    _rate(s.rates.negative_rate),
                    _rate(s.rates.positive_rate),
                    fmt_count(s.before.rows),
                    fmt_count(s.after.rows),
                    fmt_count(s.before.positives),
                    fmt_count(s.after.positives),
                    fmt(s.before.base_rate),
                    fmt(s.after.base_rate),
                ]
            )
    rows.append(
        [
            ALL_ROWS,
            "" if summary.stratified else _rate(summary.rates.negative_rate),
            "" if summary.stratified else _rate(summary.rates.positive_rate),
            fmt_count(summary.before.rows),
            fmt_count(summary.after.rows),
            fmt_count(summary.before.positives),
            fmt_count(summary.after.positives),
            fmt(summary.before.base_rate),
            fmt(summary.after.base_rate),
        ]
    )
    return row_table("Sampling", headings, rows, bold_rows=frozenset({len(rows) - 1}))


# ----------------------------------------------------------------------------- recalibrate


def calibration_effect_table(effect: FileEffect, *, title: str) -> RenderableType:
    """Mean score and (with labels) log loss, Brier, ECE and AUC before and after."""
    table = Table(header_style="bold")
    for heading in ("figure", "before", "after"):
        table.add_column(heading, justify="right", overflow="fold")
    figures = effect.effect
    table.add_row("mean score", fmt(figures.mean_score_before), fmt(figures.mean_score_after))
    if effect.has_labels:
        table.add_row("base rate", fmt(figures.base_rate), fmt(figures.base_rate))
        before, after = figures.before, figures.after
        for label, key in (
            ("log loss", "log_loss"),
            ("Brier score", "brier"),
            ("ECE", "ece"),
            ("AUC", "auc"),
        ):
            table.add_row(
                label,
                fmt(None if before is None else getattr(before, key)),
                fmt(None if after is None else getattr(after, key)),
            )
    return Titled(title, table)


def method_choice_table(choice: MethodChoice) -> RenderableType:
    """The ``auto`` comparison: cross-validated log loss and Brier per method."""
    on_cells = choice.folds in ("hashed", "groups")
    rows = [
        [
            row.method,
            fmt(row.cv_log_loss, 5),
            *([f"{row.cv_log_loss_bound:.1e}"] if on_cells else []),
            fmt(row.cv_brier, 5),
            "chosen" if row.method == choice.chosen else "",
        ]
        for row in choice.candidates
    ]
    title = f"auto: {choice.n_folds}-fold cross-validated comparison"
    if choice.folds == "hashed":
        title = (
            f"auto: {choice.n_folds}-fold cross-validation on the summary's cells (hashed folds)"
        )
    elif choice.folds == "groups":
        title = (
            f"auto: {choice.n_folds}-fold cross-validation on the cells (folds: --fold-col groups)"
        )
    return row_table(
        title,
        ("method", "CV log loss", *(["bound"] if on_cells else []), "CV Brier", ""),
        rows,
        bold_rows=frozenset(i for i, row in enumerate(rows) if row[-1]),
    )


# --------------------------------------------------------------------------- rerank-strata


def strata_table(summary: Sequence[StratumSummary], *, source: str) -> RenderableType:
    """Per stratum: reference rows, positives, odds, within-stratum AUC, slope range."""
    headings = (
        "stratum",
        "ref. rows",
        "positives",
        "odds",
        "AUC in stratum",
        "ROC slope min",
        "ROC slope max",
        "target rows",
    )
    rows = [
        [
            str(row.stratum),
            fmt_count(row.rows),
            fmt_count(row.positives),
            fmt(row.stratum_odds),
            fmt(row.auc),
            fmt(row.slope_min),
            fmt(row.slope_max),
            fmt_count(row.target_rows),
        ]
        for row in summary
    ]
    return row_table(f"Strata (odds: {source})", headings, rows)


def ranking_comparison_table(
    comparison: RankingComparison, rows: int | None = None
) -> RenderableType:
    """AUC and TPR at fixed FPRs, raw pooled scores against the re-ranked order, on ``rows``
    labelled target rows."""
    figures = [["AUC", fmt(comparison.auc_raw), fmt(comparison.auc_reranked)]]
    for fpr, raw, reranked in zip(
        comparison.fpr, comparison.tpr_raw, comparison.tpr_reranked, strict=True
    ):
        figures.append([f"TPR at FPR {float(fpr):g}", fmt(raw), fmt(reranked)])
    title = "Ranking on the labelled target"
    if rows is not None:
        title += f" ({fmt_count(rows)} rows)"
    return row_table(title, ("figure", "raw scores", "reranked"), figures)


def stratum_prevalence_table(prevalences: Mapping[str, ShiftEstimate]) -> RenderableType:
    """Each stratum's positive rate estimated on the target, with its interval."""
    rows = [
        [
            str(stratum),
            fmt(row.prevalence),
            _span(row.ci_low, row.ci_high),
            fmt(row.reference_prevalence),
            str(row.method),
        ]
        for stratum, row in prevalences.items()
    ]
    return row_table(
        "Positive rate per stratum, estimated on the target",
        ("stratum", "estimate", "95% CI", "reference", "method"),
        rows,
    )


def pca_note(pca: PcaStrata) -> str:
    """One line on Algorithm 2's strata: the component, its variance share, the label rates."""
    rates = ", ".join(
        f"{k}: {v:.4f}" if v is not None and math.isfinite(v) else f"{k}: —"
        for k, v in pca.reference_label_rate.items()
    )
    return (
        f"first principal component of {', '.join(pca.features)}: explains "
        f"{pca.explained_variance_ratio:.1%} of the variance; {pca.n_strata} "
        f"strata (pca_stratum), reference label rates {rates}"
    )


# -------------------------------------------------------------------------- estimate-shift


def _signed(value: float) -> str:
    """A z-like figure with its sign and one decimal, ``—`` when undefined.

    >>> _signed(-3.46), _signed(0.04), _signed(float("nan"))
    ('-3.5', '+0.0', '—')
    """
    return f"{value:+.1f}" if math.isfinite(value) else MISSING


def shift_table(
    batches: Sequence[BatchEstimate], *, batch_col: str | None, source: str
) -> RenderableType:
    """Per batch: rows, estimated prevalence and interval, method, PCC and the disagreement
    (``prevalence - pcc`` in standard errors), diagnostics (and the true rate and error when
    the target has labels)."""
    has_truth = any(b.true_prevalence is not None for b in batches)
    headings = [batch_col] if batch_col is not None else []
    headings += ["rows", "estimate", "95% CI", "ref. rate", "method", "PCC", "disagr."]
    headings += ["conv.", "ref. AUC", "fit p"]
    if has_truth:
        headings += ["true", "error"]
    rows = []
    for batch in batches:
        estimate = batch.estimate
        cells = [str(batch.batch)] if batch_col is not None else []
        cells += [
            fmt_count(estimate.n),
            fmt(estimate.prevalence),
            _span(estimate.ci_low, estimate.ci_high),
            fmt(estimate.reference_prevalence),
            str(estimate.method),
            fmt(estimate.pcc),
            _signed(estimate.disagreement),
            fmt(estimate.converged),
            fmt(estimate.reference_auc),
            fmt(estimate.fit_pvalue),
        ]
        if has_truth:
            cells += [fmt(batch.true_prevalence), fmt(batch.error)]
        rows.append(cells)
    return row_table(
        f"Positive rate of {source}", headings, rows, labels=1 if batch_col is not None else 0
    )


def decision_table(
    batches: Sequence[BatchEstimate], *, batch_col: str | None, threshold: float
) -> RenderableType:
    """Expected (and realised) cost per row of the static and the re-estimated decisions."""
    has_truth = any(
        b.decision is not None and b.decision.realised_cost_static is not None for b in batches
    )
    headings = [batch_col] if batch_col is not None else []
    # each heading says what it is: a narrow console packs them into separate tables
    headings += ["flagged: static", "flagged: re-est.", "expected: static", "expected: re-est."]
    if has_truth:
        headings += ["actual: static", "actual: re-est."]
    rows = []
    for batch in batches:
        decision = batch.decision
        cells = [str(batch.batch)] if batch_col is not None else []
        if decision is None:
            cells += [MISSING] * (6 if has_truth else 4)
        else:
            cells += [
                fmt(decision.flagged_static),
                fmt(decision.flagged_shifted),
                fmt(decision.expected_cost_static),
                fmt(decision.expected_cost_shifted),
            ]
            if has_truth:
                cells += [
                    fmt(decision.realised_cost_static),
                    fmt(decision.realised_cost_shifted),
                ]
        rows.append(cells)
    return row_table(
        f"Decisions at the Bayes threshold {threshold:.4g}: share of rows flagged, expected and "
        "actual cost per row (static = reference prior)",
        headings,
        rows,
        labels=1 if batch_col is not None else 0,
    )


# ------------------------------------------------------------------------------------ show


#: Provenance keys that hold counts: whole, with thousands separators (26,300, not 2.63e+04).
_COUNT_KEYS = frozenset({"rows", "positives", "negatives"})


def _detail(value: object, key: str = "") -> str:
    """A fitted number or setting in short: figures to four significant digits, counts (by
    their ``key``) in full, pairs as ``[lo, hi]``, mappings as ``key: value`` pairs.

    >>> _detail(0.123456), _detail([0.5, 2]), _detail({"A": 0.25}), _detail(True)
    ('0.1235', '[0.5, 2]', 'A: 0.25', 'yes')
    >>> _detail(26300.0, "positives"), _detail({"rows": 20000, "base_rate": 0.02651})
    ('26,300', 'rows: 20,000, base_rate: 0.02651')
    """
    if isinstance(value, bool):
        return "yes" if value else "no"
    if key in _COUNT_KEYS and isinstance(value, (int, float)):
        return fmt_count(value)
    if isinstance(value, float):
        return _significant(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_detail(v) for v in value) + "]"
    if isinstance(value, Mapping):
        return ", ".join(f"{k}: {_detail(v, str(k))}" for k, v in value.items())
    return str(value)


def _significant(value: float, digits: int = 4) -> str:
    """``value`` to ``digits`` significant digits, and to as many more as it takes for a
    value strictly inside (0, 1) not to read as 0 or 1 (an isotonic map's outputs end at
    1 - 1e-6: a probability of 1 would be a different claim).

    >>> _significant(0.123456), _significant(1 - 1e-6), _significant(0.99995), _significant(1.0)
    ('0.1235', '0.999999', '0.99995', '1')
    >>> _significant(1e-300), _significant(2.5), _significant(1 - 2**-52)
    ('1e-300', '2.5', '0.9999999999999998')
    """
    text = f"{value:.{digits}g}"
    while 0.0 < value < 1.0 and float(text) in (0.0, 1.0) and digits < 17:
        digits += 1
        text = f"{value:.{digits}g}"
    return text


def show_table(result: ShowResult) -> Titled:
    """``calib show``: kind, steps with their fitted numbers, and provenance, under the
    file's name (a :class:`Titled`: a table's own title wraps inside the path)."""
    artifact = result.artifact
    title = (
        f"{result.path}: {artifact.kind} (schema {artifact.schema_version}, "
        f"calib {artifact.calib_version or MISSING})"
    )
    table = Table(show_header=False)
    table.add_column("", style="bold", overflow="fold")
    table.add_column("", overflow="fold")
    for index, step in enumerate(result.steps, start=1):
        name = f"step {index}: {step.kind}" if len(result.steps) > 1 else step.kind
        details = "\n".join(f"{k} {_detail(v)}" for k, v in step.details.items())
        # Text, not markup: a list of paths prints as "[/data/a, ...]", which Rich would read as
        # a closing tag and drop
        table.add_row(name, Text(details) if details else MISSING, end_section=True)
    for key, value in result.provenance.items():
        if isinstance(value, Mapping):
            value = {k: v for k, v in value.items() if v is not None}
        table.add_row(key.replace("_", " "), Text(_detail(value, key)))
    return Titled(title, table)


# ------------------------------------------------------ estimate-shift --backtest, --history

#: What each method's name means, for the tables.
METHOD_NOTES = {
    "mle": "label shift, maximum likelihood (auto)",
    "em": "label shift, EM on Platt posteriors",
    "pacc": "label shift, probabilistic adjusted count",
    "map": "label shift with a free positive shape",
    "pcc": "mean calibrated posterior (covariate shift)",
    "no_shift": "the reference rate",
    "rolling": "mean rate of the last 4 labelled batches",
    "history_blend": "blend fitted on the labelled batches",
}


def backtest_summary_table(result: BacktestResult) -> RenderableType:
    """Per method: what it is, whether it learns from earlier labels, MAE, largest error and
    interval coverage over the batches."""
    level = f"{result.ci_level:.0%} coverage"
    rows = [
        [
            method.name,
            METHOD_NOTES.get(method.name, ""),
            fmt(method.uses_labels),
            fmt(method.mae),
            fmt(method.max_abs_error),
            "—"
            if method.coverage is None
            else f"{method.coverage:.0%} (of {method.coverage_batches})",
        ]
        for method in result.methods
    ]
    best = result.best_method
    bold = frozenset(i for i, method in enumerate(result.methods) if method.name == best)
    title = (
        f"Backtest of {result.source}: {len(result.batches)} batches by {result.batch_col}, "
        f"labels {result.label_delay} batch{'es' if result.label_delay > 1 else ''} late\n"
        f"lowest MAE: {best}"  # in words too: the bold row is lost in a pipe
    )
    return row_table(
        title,
        ["method", "what", "learns from labels", "MAE", "max |error|", level],
        rows,
        bold_rows=bold,
    )


def backtest_batch_table(result: BacktestResult) -> RenderableType:
    """Per batch: rows, true rate, each method's estimate and the history used."""
    headings = [result.batch_col, "rows", "true"]
    headings += [method.name for method in result.methods]
    headings.append("history")
    rows = []
    for t, value in enumerate(result.batches):
        cells = [str(value), fmt_count(result.rows[t]), fmt(float(result.true_prevalence[t]))]
        cells += [fmt(float(method.prevalence[t])) for method in result.methods]
        cells.append(str(int(result.n_history[t])))
        rows.append(cells)
    return row_table("Estimates per batch", headings, rows, labels=1)


def history_table(
    history: HistoryResult, batches: Sequence[BatchEstimate], *, batch_col: str | None
) -> RenderableType:
    """Per batch: the label-shift estimate, PCC, the blend learnt on the history with its
    interval, what the history changed, how much of it was used and its largest weight."""
    headings = [batch_col or "batch", "label shift", "PCC", "blend", "95% CI", "change"]
    headings += ["past batches", "largest weight"]
    rows = []
    for i, batch in enumerate(batches):
        top = int(history.weights[i].argmax())
        rows.append(
            [
                str(batch.batch),
                fmt(batch.estimate.prevalence),
                fmt(batch.estimate.pcc),
                fmt(float(history.prevalence[i])),
                f"{fmt(float(history.ci_low[i]))}–{fmt(float(history.ci_high[i]))}",
                f"{float(history.prevalence[i]) - batch.estimate.prevalence:+.4f}",
                str(int(history.n_history[i])),
                f"{history.candidates[top]} {history.weights[i, top]:.2f}",
            ]
        )
    title = (
        f"History blend: learnt on {len(history.history_batches)} labelled past batches of "
        f"{history.source} (blend MAE there {fmt(history.blend_mae)})"
    )
    return row_table(title, headings, rows, labels=1)
