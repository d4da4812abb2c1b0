"""``calib reliability``: calibration and discrimination figures per score column and group.

Three ways to the same figures: every row in memory (``engine="memory"``: exact), a streaming
scan into a summary with a second pass over the cells that bound the AUC (``"streaming"``:
memory bounded by the summary; see the README for which figures carry a bound), or summary
files merged (``from_summaries``).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Literal

import numpy as np

from calib_cli import io
from calib_cli.core import elementary as el
from calib_cli.core.decisions import gate_failures
from calib_cli.core.fit_support import FitFacts, spread_problem
from calib_cli.core.metrics import ReliabilitySummary, reliability_summary
from calib_cli.core.special import import_in_background
from calib_cli.errors import InputError, UsageError
from calib_cli.io import InvalidRows, Table
from calib_cli.summaries import (
    Exactness,
    RefinementLevel,
    ScoreSummary,
    reliability_from_summary,
)
from calib_cli.summaries.subcells import SubCells
from calib_cli.types import (
    ALL_ROWS,
    DEFAULT_DIALECT,
    LOGIT_EDGE,
    BinStrategy,
    CsvDialect,
    Engine,
    FloatArray,
    GroupValue,
    InputFormat,
    OnInvalid,
    PlotScale,
    ScoreHistogram,
    Warn,
    WeightKind,
)
from calib_cli.workflows.common import (
    Progress,
    check_invalid_options,
    check_paths,
    check_plot,
    choose_engine,
    finite_option,
    groups,
    ignore,
    in_dialect,
    read_scored_table,
    refuse_row_reading_options,
    refuse_shared_columns,
    rows_read,
    summary_groups,
    unit_interval_option,
)
from calib_cli.workflows.summarize import (
    check_summary_weight_col,
    load_summaries,
    shown_field,
    summarize_scan,
    uniform_edges,
)
from calib_cli.workflows.summary_paths import refuse_repeated_summaries

#: How the figures were computed: rows in memory, a streaming summary, or summary files.
ReliabilityEngine = Literal["memory", "streaming", "summary"]

#: The streaming path refines the AUC (passes over the rows of the cells that carry its bound,
#: on finer grids, in memory bounded by the keys of a pass) until its bound is below this.
AUC_TOLERANCE = 1e-6
#: Dense slots (sub-cell, bin, class) of one refinement pass, about 100 bytes each: 2**22
#: slots are about 400 MB whatever the rows (a 1e8-row file needs about 2**21).
REFINE_MAX_SLOTS = 1 << 22
#: Refinement passes at most (usually one meets the tolerance).
MAX_REFINE_PASSES = 3
#: The tolerance the first pass is planned for. The planner aims at half of it (its model of
#: how a finer grid shrinks the bound is an estimate) and its keys grow as one over its aim:
#: 1.6e-6 aims at 8e-7, which lands below 1e-6 on the files measured with 1.6 times fewer keys
#: (less time and memory in the pass and in the figures). When it does not, a second pass is
#: planned with :data:`AUC_TOLERANCE` itself, so the reported bound is at most that.
FIRST_PASS_TOLERANCE = 1.6 * AUC_TOLERANCE
#: Sub-cell bits the summary's pass adds for the AUC (:mod:`calib_cli.summaries.subcells`):
#: 16-bit cells leave a bound of about 7e-7 on the benchmark's scores (1e7 and 1e8 rows), so
#: the second pass over the rows is needed only for scores more concentrated than those. They
#: cost one more addition a row and 8 bytes a (12-bit key, sub-cell): about 30 MB.
SUB_BITS = 4


@dataclass(frozen=True)
class ReliabilityRequest:
    """The options of a ``reliability`` run."""

    file: str | None
    score_cols: tuple[str, ...] = ("score",)
    label_col: str = "label"
    weight_col: str | None = None
    #: ``--weight-kind``: None is frequency for rows and each summary's own kind for summaries
    weight_kind: WeightKind | None = None
    positive_label: str | None = None
    by: str | None = None
    n_bins: int = 10
    strategy: BinStrategy = "uniform"
    n_bootstrap: int = 0
    fail_above_ece: float | None = None
    fail_below_auc: float | None = None
    input_format: InputFormat | None = None
    #: ``--separator`` and ``--decimal-comma`` of CSV inputs (and CSV outputs)
    dialect: CsvDialect = DEFAULT_DIALECT
    on_invalid: OnInvalid = "error"
    #: ``--max-invalid``: a fraction of the rows below 1, else a count (None: 1%)
    max_invalid: float | None = None
    report: str | None = None
    seed: int = 0
    engine: Engine = "auto"
    #: summary files to report on instead of ``file`` (``score_cols`` empty: every column)
    from_summaries: tuple[str, ...] = ()
    #: ``--plot PATH``: each entry then carries a fine histogram of its scores for the picture
    plot: str | None = None
    #: ``--plot-scale`` (None: not given, linear)
    plot_scale: PlotScale | None = None


@dataclass(frozen=True)
class ReliabilityEntry:
    """The figures of one score column on all rows (``group`` None) or on one group."""

    score_column: str
    group: GroupValue
    heading: str  # the column, or "column\\nby=group" (the table shows the group below)
    summary: ReliabilitySummary
    #: how far each figure can be from the in-memory one (None: computed in memory, exact)
    exactness: Exactness | None = None
    #: with ``--plot``: the (weighted) histogram of the scores, on the picture's scale
    histogram: ScoreHistogram | None = None

    @property
    def label(self) -> str:
        """The heading on one line (for gate messages)."""
        return self.heading.replace("\n", " (") + ")" if "\n" in self.heading else self.heading


@dataclass(frozen=True)
class ReliabilityResult:
    """Every entry (column x group) and the quality gates that failed."""

    source: str
    by: str | None
    n_bins: int
    strategy: BinStrategy
    seed: int
    entries: tuple[ReliabilityEntry, ...]
    gate_failures: tuple[str, ...]
    engine: ReliabilityEngine = "memory"
    #: the weight column of the figures (of the rows, or of the summaries); None: unweighted
    weight_col: str | None = None
    #: with ``--on-invalid drop``: the rows dropped, by reason
    invalid_rows: InvalidRows | None = None


@in_dialect
def run_reliability(
    request: ReliabilityRequest, *, warn: Warn = ignore, progress: Progress = ignore
) -> ReliabilityResult:
    """Check the paths and options, then assess every column and group: from summary files,
    by a streaming summary of the file, or with the file in memory (see the module)."""
    for value, option in (
        (request.fail_above_ece, "--fail-above-ece"),
        (request.fail_below_auc, "--fail-below-auc"),
    ):
        finite_option(value, option)
        unit_interval_option(value, option)
    check_invalid_options(request.on_invalid, request.max_invalid)
    # rows: no --score-col means the column 'score', which counts (summaries: every column)
    columns = request.score_cols or (() if request.from_summaries else ("score",))
    refuse_shared_columns(replace(request, score_cols=columns))
    check_plot(request.plot, request.plot_scale)
    if request.from_summaries:
        if request.file is not None:
            raise UsageError("give either FILE or --from-summary, not both")
        check_paths(inputs=list(request.from_summaries), files=[request.report, request.plot])
        refuse_row_reading_options(
            request, "--from-summary reads summaries, not rows", on_invalid=request.on_invalid
        )
        return assess_summary_files(request, warn=warn, progress=progress)
    if request.file is None:
        raise UsageError("give a FILE of scored rows, or --from-summary SUMMARY")
    file = request.file
    check_paths(
        inputs=[file],
        files=[request.report, request.plot],
        input_format=request.input_format,
        dialect=request.dialect,
    )
    engine = choose_engine(request.engine, [file], input_format=request.input_format, warn=warn)
    if engine == "streaming":
        return assess_streaming(file, request, warn=warn, progress=progress)
    table, invalid = read_scored_table(
        file,
        input_format=request.input_format,
        score_cols=request.score_cols or ("score",),
        label_col=request.label_col,
        weight_col=request.weight_col,
        positive_label=request.positive_label,
        on_invalid=request.on_invalid,
        warn=warn,
        max_invalid=request.max_invalid,
        by=request.by,
    )
    return replace(assess_table(table, request, warn=warn), invalid_rows=invalid)


def assess_table(
    table: Table, request: ReliabilityRequest, *, warn: Warn = ignore
) -> ReliabilityResult:
    """The reliability figures of a table already read (``request.file`` is not read). Its
    columns are checked in the order of every reader, so a bad file gets the streaming
    engine's message: the scores, then the labels, then the weights."""
    columns = request.score_cols or ("score",)
    all_scores = {column: table.scores(column) for column in dict.fromkeys(columns)}
    y_true = table.labels(request.label_col, positive_label=request.positive_label)
    weights = table.weights(request.weight_col)
    by = request.by
    entries: list[ReliabilityEntry] = []
    for column in columns:
        scores = all_scores[column]
        used = scores[weights > 0.0]
        if used.size:
            warn_if_flat(table.name, column, float(used.min()), float(used.max()), warn)
        for group, rows in groups(table, by, with_all_rows=True):
            where = table.name if group is None else f"{table.name} ({by}={group})"
            if _weightless(where, group, float(np.sum(weights[rows])), warn):
                continue
            with io.naming(where):
                # a fresh generator per entry: a column's interval does not depend on which
                # other columns or groups are reported
                summary = reliability_summary(
                    y_true[rows],
                    scores[rows],
                    sample_weight=weights[rows],
                    n_bins=request.n_bins,
                    strategy=request.strategy,
                    n_bootstrap=request.n_bootstrap,
                    rng=np.random.default_rng(request.seed),
                    weight_kind=request.weight_kind or "frequency",
                )
            entries.append(
                ReliabilityEntry(
                    score_column=column,
                    group=group,
                    heading=_heading(column, by, group),
                    summary=summary,
                    histogram=_rows_histogram(scores[rows], weights[rows], request),
                )
            )
    return _result(table.name, request, entries, engine="memory")


def _weightless(where: str, group: GroupValue, weight: float, warn: Warn) -> bool:
    """Whether a ``--by`` group carries no weight (every row's weight 0): it has no figures,
    and is left out with a warning rather than stopping the other groups' report. The
    whole file's entry (``group`` None) is never left out: with no weight it is refused."""
    if group is None or weight > 0.0:
        return False
    warn(f"{where}: every weight is 0, so the group has no figures: it is left out")
    return True


def warn_if_flat(name: str, column: str, lowest: float, highest: float, warn: Warn) -> None:
    """Warn when a score column does not vary (the test of
    :func:`~calib_cli.core.fit_support.spread_problem`): its AUC is 0.5 by construction."""
    problem = spread_problem(FitFacts(lowest=lowest, highest=highest, positives=1, negatives=1))
    if problem is not None:
        warn(
            f"{name}: the scores of column '{column}' {problem}: the AUC and its interval "
            "cannot measure ranking"
        )


def _flat_summary(name: str, column: str, summary: ScoreSummary, warn: Warn) -> None:
    """:func:`warn_if_flat` on a summary's smallest and largest score."""
    seen = (summary.weight > 0.0) & np.isfinite(summary.score_min)
    if seen.any():
        lowest, highest = summary.score_min[seen].min(), summary.score_max[seen].max()
        warn_if_flat(name, column, float(lowest), float(highest), warn)


def _heading(column: str, by: str | None, group: GroupValue) -> str:
    r"""The entry's heading for humans: ``column``, with --by ``column\nby=group``, or
    ``column\nall rows`` (:data:`ALL_ROWS`: not ``by=all``, which is the group ``all``).

    >>> _heading("score", None, None), _heading("score", "segment", None)
    ('score', 'score\nall rows')
    >>> _heading("score", "segment", "all")
    'score\nsegment=all'
    """
    if by is None:
        return column
    return f"{column}\n{ALL_ROWS if group is None else f'{by}={group}'}"


def _result(
    source: str,
    request: ReliabilityRequest,
    entries: Sequence[ReliabilityEntry],
    *,
    engine: ReliabilityEngine,
    weight_col: str | None = None,
) -> ReliabilityResult:
    failures = gate_failures(
        [(e.label, e.summary.ece, e.summary.auc) for e in entries],
        max_ece=request.fail_above_ece,
        min_auc=request.fail_below_auc,
    )
    return ReliabilityResult(
        source=source,
        by=request.by,
        n_bins=request.n_bins,
        strategy=request.strategy,
        seed=request.seed,
        entries=tuple(entries),
        gate_failures=failures,
        engine=engine,
        weight_col=weight_col if engine == "summary" else request.weight_col,
    )


# ------------------------------------------------------------------------- from summaries


def _parts(
    summary: ScoreSummary, by: str | None, source: str
) -> Iterator[tuple[GroupValue, ScoreSummary]]:
    """All rows (group None), then with ``by`` each group of the summary."""
    return ((value, part) for value, part, _ in _parts_with_sub_cells(summary, None, by, source))


def _parts_with_sub_cells(
    summary: ScoreSummary,
    sub: SubCells | None,
    by: str | None,
    source: str,
    by_dtype: io.ColumnType | None = None,
) -> Iterator[tuple[GroupValue, ScoreSummary, SubCells | None]]:
    """:func:`_parts`, each with its sub-cells (None without), made one at a time as the
    caller asks (with many groups, every part's copy at once took as much again as the
    summary and its sub-cells); ``by_dtype``: the ``by`` column's type, where known. The
    groups are named before the first part (a refusal names ``source``)."""
    named: list[tuple[GroupValue, str | None]] = []
    if by is not None:
        with io.naming(source):
            named = summary_groups(summary.groups, by, "--by", by_dtype)
    return _each_part(summary, sub, named)


def _each_part(
    summary: ScoreSummary, sub: SubCells | None, named: list[tuple[GroupValue, str | None]]
) -> Iterator[tuple[GroupValue, ScoreSummary, SubCells | None]]:
    yield None, summary.pooled(), None if sub is None else sub.pooled()
    for value, name in named:
        part_sub = None if sub is None else sub.select_group(name)
        yield value, summary.select_group(name), part_sub


def _check_by(summary: ScoreSummary, by: str | None, source: str) -> None:
    if by is not None and summary.group_column != by:
        raise InputError(
            f"{source}: summary field 'group_column' is "
            f"{shown_field(summary.group_column)}, so it cannot report --by {by!r} "
            f"(summarise with --by {by})"
        )


def _figures(
    summary: ScoreSummary,
    request: ReliabilityRequest,
    *,
    refinement: Sequence[RefinementLevel] = (),
    sub_cells: SubCells | None = None,
) -> tuple[ReliabilitySummary, Exactness]:
    figures = reliability_from_summary(
        summary,
        n_bins=request.n_bins,
        strategy=request.strategy,
        n_bootstrap=request.n_bootstrap,
        rng=np.random.default_rng(request.seed),
        refinement=refinement,
        weight_kind=request.weight_kind,  # None: the summary's own (frequency when streaming)
        sub_cells=sub_cells,
    )
    return figures.reliability, figures.exactness


def assess_summary_files(
    request: ReliabilityRequest, *, warn: Warn = ignore, progress: Progress = ignore
) -> ReliabilityResult:
    """The figures of summary files merged per score column (``--from-summary``)."""
    refuse_repeated_summaries(request.from_summaries)
    progress(f"reading {len(request.from_summaries)} summary file(s)")
    loaded = load_summaries(request.from_summaries, warn=warn)
    columns = request.score_cols or tuple(loaded)
    entries: list[ReliabilityEntry] = []
    names: list[str] = []
    for column in columns:
        if column not in loaded:
            raise InputError(
                f"no summary of score column '{column}' among the summaries "
                f"(they summarise {', '.join(repr(c) for c in loaded)})"
            )
        summary, files = loaded[column]
        names.extend(f for f in files if f not in names)
        source = files[0] if len(files) == 1 else f"{len(files)} summaries of '{column}'"
        _check_by(summary, request.by, files[0])
        check_summary_weight_col(summary, request.weight_col, files[0])
        _flat_summary(source, column, summary, warn)
        for group, part in _parts(summary, request.by, source):
            where = source if group is None else f"{source} ({request.by}={group})"
            if _weightless(where, group, float(np.sum(part.weight)), warn):
                continue
            with io.naming(where):
                figures, exactness = _figures(part, request)
            entries.append(
                ReliabilityEntry(
                    score_column=column,
                    group=group,
                    heading=_heading(column, request.by, group),
                    summary=figures,
                    exactness=exactness,
                    histogram=_summary_histogram(part, request),
                )
            )
    source = names[0] if len(names) == 1 else f"{len(names)} summaries"
    weighted = (loaded[column][0].weight_column for column in columns)
    weight_col = next((w for w in weighted if w is not None), None)
    return _result(source, request, entries, engine="summary", weight_col=weight_col)


# ------------------------------------------------------------------------------ streaming


def assess_streaming(
    file: str, request: ReliabilityRequest, *, warn: Warn = ignore, progress: Progress = ignore
) -> ReliabilityResult:
    """The figures by a streaming summary of ``file`` (pass 1) and, where the AUC bound is
    above :data:`AUC_TOLERANCE`, a dense refinement pass over the rows of the cells that carry it,
    each on its own finer grid (pass 2; :func:`~calib_cli.summaries.scan.refine_dense_lazy`)."""
    name = io.display_name(file)
    score_cols = request.score_cols or ("score",)
    edges = uniform_edges(request.n_bins if request.strategy == "uniform" else 10)
    progress(f"reading {name}")
    import_in_background()  # the figures' special functions, while the pass reads
    summaries, scan, sub_cells = summarize_scan(
        file,
        score_cols=score_cols,
        label_col=request.label_col,
        weight_col=request.weight_col,
        positive_label=request.positive_label,
        by=request.by,
        bin_edges=edges,
        input_format=request.input_format,
        on_invalid=request.on_invalid,
        warn=warn,
        max_invalid=request.max_invalid,
        sub_bits=SUB_BITS,
        on_rows=rows_read(progress, f"reading {name}"),
    )
    entries: list[ReliabilityEntry] = []
    for column in dict.fromkeys(score_cols):
        _flat_summary(name, column, summaries[column], warn)
        # each column's summary and sub-cells let go once its figures are done
        parts = _parts_with_sub_cells(
            summaries.pop(column), sub_cells.pop(column), request.by, name, scan.by_dtype
        )
        for group, part, sub in parts:
            where = name if group is None else f"{name} ({request.by}={group})"
            if _weightless(where, group, float(np.sum(part.weight)), warn):
                continue
            with io.naming(where):
                figures, exactness = _refined_figures(
                    scan, part, request, sub=sub, progress=progress, where=where
                )
            entries.append(
                ReliabilityEntry(
                    score_column=column,
                    group=group,
                    heading=_heading(column, request.by, group),
                    summary=figures,
                    exactness=exactness,
                    histogram=_summary_histogram(part, request),
                )
            )
    return replace(_result(name, request, entries, engine="streaming"), invalid_rows=scan.invalid)


def _refined_figures(
    scan: io.ScoredScan,
    part: ScoreSummary,
    request: ReliabilityRequest,
    *,
    sub: SubCells | None = None,
    progress: Progress = ignore,
    where: str = "",
) -> tuple[ReliabilitySummary, Exactness]:
    """The figures of ``part``: with its sub-cells (from the summary's pass) when they bring
    the AUC bound to :data:`AUC_TOLERANCE` and the bins are exact (or the bins equal-width,
    which a finer read would not change); else after dense refinement passes over its rows,
    until the AUC bound is at most :data:`AUC_TOLERANCE` (or cannot move), at most
    :data:`MAX_REFINE_PASSES`. Whether another pass is needed is read from the figures
    (computed anyway), not planned again on the refined atoms."""
    from calib_cli.summaries.scan import refine_dense_lazy

    if sub is not None:
        figures, exactness = _figures(part, request, sub_cells=sub)
        if exactness.auc_bound <= AUC_TOLERANCE and (
            exactness.bins_exact or request.strategy == "uniform"
        ):
            return figures, exactness
    progress(f"reading again (refining): {where}")

    def one_pass(
        levels: tuple[RefinementLevel, ...], tolerance: float
    ) -> tuple[RefinementLevel, ...]:
        return refine_dense_lazy(
            scan.lazy,
            part,
            auc_tolerance=tolerance,
            max_slots=REFINE_MAX_SLOTS,
            n_bins=request.n_bins,
            strategy=request.strategy,
            max_passes=1,
            levels=levels,
        )

    levels = one_pass((), FIRST_PASS_TOLERANCE)  # none when the bound is already below it
    figures, exactness = _figures(part, request, refinement=levels)
    for _ in range(MAX_REFINE_PASSES - 1):
        if not exactness.auc_bound > AUC_TOLERANCE:
            break
        more = one_pass(levels, AUC_TOLERANCE)
        if not more:
            break
        levels += more
        figures, exactness = _figures(part, request, refinement=levels)
    return figures, exactness


# ------------------------------------------------------------------------------- pictures

#: Steps of a picture's score histogram, in the logit, on the scores' range clipped to
#: [LOGIT_EDGE, 1 - LOGIT_EDGE]; the picture gathers them into its bars.
LOGIT_STEP = 0.02


def histogram_edges(scores: FloatArray) -> FloatArray:
    """Edges of a picture's histogram of ``scores`` (probabilities), for either scale: the
    multiples of :data:`LOGIT_STEP` in the logit (so every column and group shares one grid)
    from below the smallest score to above the largest. The picture gathers them into bars
    across its axis as shown (:mod:`calib_cli.report.plots`); the grid is finer than those
    bars at any zoom (0.005 wide at 0.5, 2e-4 at 0.01), where steps of 0.02 in the score
    gave an axis zoomed in on rare events two bars. Two more steps, from 0 and to 1, hold the
    scores within :data:`~calib_cli.types.LOGIT_EDGE` of 0 and 1 (exact 0s and 1s), which the
    picture draws beyond a logit axis's ends.

    >>> edges = histogram_edges(np.array([0.5, 0.5049]))
    >>> np.round(np.log(edges[1:-1] / (1 - edges[1:-1])), 6).tolist()
    [0.0, 0.02]
    """
    finite = scores[np.isfinite(scores)]
    if not finite.size:
        finite = np.array([0.5])
    ends = np.clip(np.array([finite.min(), finite.max()]), LOGIT_EDGE, 1.0 - LOGIT_EDGE)
    u = el.log_odds(ends)
    first = int(np.floor(u[0] / LOGIT_STEP + 1e-9))
    last = max(int(np.ceil(u[1] / LOGIT_STEP - 1e-9)), first + 1)
    steps = np.arange(first, last + 1, dtype=np.float64) * LOGIT_STEP
    grid: FloatArray = el.sigmoid(steps)
    return np.concatenate([[0.0], grid, [1.0]])


def score_histogram(scores: FloatArray, weights: FloatArray) -> ScoreHistogram:
    """The weighted histogram of ``scores`` on :func:`histogram_edges`; the scores within
    1e-6 of 0 or 1 (exact 0s and 1s) count in its end steps, of their own.

    >>> edges, counts = score_histogram(np.array([0.0, 0.01, 1.0]), np.ones(3))
    >>> counts[[0, -1]].tolist(), float(counts.sum())
    ([1.0, 1.0], 3.0)
    """
    edges = histogram_edges(scores)
    index = np.clip(np.searchsorted(edges, scores, side="right") - 1, 0, edges.size - 2)
    counts = np.bincount(index, weights=weights, minlength=edges.size - 1)
    return edges, np.asarray(counts, dtype=np.float64)


def _rows_histogram(
    scores: FloatArray, weights: FloatArray, request: ReliabilityRequest
) -> ScoreHistogram | None:
    """With ``--plot``: the histogram of one entry's rows (memory engine)."""
    if request.plot is None:
        return None
    return score_histogram(scores, weights)


def _summary_histogram(summary: ScoreSummary, request: ReliabilityRequest) -> ScoreHistogram | None:
    """With ``--plot``: the histogram of one entry's summary, each cell's weight at the middle
    of its scores (the cells are far finer than the histogram's steps)."""
    if request.plot is None:
        return None
    seen = (summary.weight > 0.0) & np.isfinite(summary.score_min)
    middle = 0.5 * (summary.score_min[seen] + summary.score_max[seen])
    return score_histogram(middle, summary.weight[seen])
