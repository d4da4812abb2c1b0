"""``calib summarize``: the mergeable summary of scored rows, by a streaming scan.

Also home of the two steps every summary-based command shares: :func:`summarize_scan` (rows ->
one summary per score column, memory bounded by the summary) and :func:`load_summaries` (files,
directories of part files or quoted globs -> summaries merged per score column, refusing files
that do not fit together).

An empty file (a day or partition without rows) is summarised as a summary of no rows, with a
warning, so that a partition-by-partition job never stops on one: alone it writes that empty
summary, among others it adds nothing. (Standard input and gzip files are read whole first,
and their reader still refuses no rows.)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import PurePath

import numpy as np

from calib_cli import io
from calib_cli.errors import InputError, OptionError, UsageError
from calib_cli.io.summary_file import NO_ROWS_NO_METADATA, read_summary_part
from calib_cli.summaries import ScoreSummary, merge_summaries
from calib_cli.summaries.grid import DEFAULT_MANTISSA_BITS
from calib_cli.summaries.subcells import SubCells
from calib_cli.summaries.summary import describe_positive_label
from calib_cli.types import (
    DEFAULT_DIALECT,
    CsvDialect,
    GroupValue,
    InputFormat,
    OnInvalid,
    Warn,
    WeightKind,
)
from calib_cli.workflows.common import (
    Progress,
    check_invalid_options,
    check_paths,
    ignore,
    in_dialect,
    refuse_shared_columns,
    rows_read,
    warn_dropped,
)
from calib_cli.workflows.summary_paths import expand_summary_paths


@dataclass(frozen=True)
class SummarizeRequest:
    """The options of a ``summarize`` run."""

    files: tuple[str, ...]
    output: str
    score_cols: tuple[str, ...] = ("score",)
    label_col: str = "label"
    weight_col: str | None = None
    #: ``--weight-kind``: what the weights mean, recorded in every summary written
    weight_kind: WeightKind = "frequency"
    positive_label: str | None = None
    by: str | None = None
    n_bins: int = 10
    #: ``--grid-bits``: mantissa bits of the score grid (12: every fit but the histogram's)
    grid_bits: int = DEFAULT_MANTISSA_BITS
    input_format: InputFormat | None = None
    #: ``--separator`` and ``--decimal-comma`` of CSV inputs (and CSV outputs)
    dialect: CsvDialect = DEFAULT_DIALECT
    on_invalid: OnInvalid = "error"
    #: ``--max-invalid``: a fraction of the rows below 1, else a count (None: 1%)
    max_invalid: float | None = None
    report: str | None = None


@dataclass(frozen=True)
class SummaryFile:
    """One summary written: its score column, path and summary."""

    score_column: str
    path: str
    summary: ScoreSummary


@dataclass(frozen=True)
class SummarizeResult:
    """The inputs read, rows kept and dropped, and the summaries written."""

    sources: tuple[str, ...]
    rows: int
    dropped: int
    outputs: tuple[SummaryFile, ...]
    #: with ``--on-invalid drop``: each file's dropped rows, by reason
    invalid_rows: tuple[io.InvalidRows, ...] = ()

    @property
    def dropped_by_reason(self) -> dict[str, int]:
        """Rows dropped by reason, over every file."""
        total: dict[str, int] = {}
        for invalid in self.invalid_rows:
            for why, count in invalid.by_reason.items():
                total[why] = total.get(why, 0) + count
        return total

    @property
    def dropped_by_group(self) -> tuple[tuple[GroupValue, int, int], ...]:
        """(group, rows read, rows dropped) over every file, in the groups' order (with
        ``--by`` and ``--on-invalid drop``; empty otherwise). A group is its value and its
        type, as the summaries name it: int 1 (``1``) and float 1.0 (``1.0``) stay apart."""
        total: dict[tuple[str, GroupValue], tuple[int, int]] = {}
        for invalid in self.invalid_rows:
            for value, read, lost in invalid.by_group:
                key = (type(value).__name__, value)
                before = total.get(key, (0, 0))
                total[key] = (before[0] + read, before[1] + lost)
        ordered = sorted(total.items(), key=lambda item: io.order_key(item[0][1]))
        return tuple((value, read, lost) for (_, value), (read, lost) in ordered)


def uniform_edges(n_bins: int) -> tuple[float, ...]:
    """``n_bins`` equal-width reliability bins on [0, 1] (the edges ``reliability`` uses)."""
    return tuple(float(e) for e in np.linspace(0.0, 1.0, n_bins + 1))


def output_paths(output: str, score_cols: Sequence[str]) -> list[str]:
    """``-o`` for one score column; with several, the column before the extension
    (``day1.parquet`` -> ``day1.model_a.parquet``, ``day1.model_b.parquet``)."""
    if len(score_cols) == 1:
        return [output]
    if io.canonical_output(output) == io.STDIO or io.is_stream(output):
        raise UsageError("several --score-col write one file each: give -o a file name, not '-'")
    path = PurePath(output)
    return [str(path.with_name(f"{path.stem}.{column}{path.suffix}")) for column in score_cols]


def summarize_scan(
    path: str,
    *,
    score_cols: Sequence[str],
    label_col: str,
    weight_col: str | None,
    positive_label: str | None,
    by: str | None,
    bin_edges: Sequence[float],
    input_format: InputFormat | None,
    on_invalid: OnInvalid,
    warn: Warn = ignore,
    max_invalid: float | None = None,
    mantissa_bits: int = DEFAULT_MANTISSA_BITS,
    sub_bits: int = 0,
    on_rows: Callable[[int], None] | None = None,
    allow_empty: bool = False,
) -> tuple[dict[str, ScoreSummary], io.ScoredScan, dict[str, SubCells | None]]:
    """One file's rows -> one summary per score column (streaming; stdin and gzip read first).

    Returns the summaries (their metadata recording ``positive_label``, the rule that made the
    labels), the checked scan (for a second pass over chosen cells) and, with ``sub_bits``,
    each column's sub-cells from the same pass (else None). ``on_rows(n)``: the rows read so
    far, after each block. A file without rows is refused, or with ``allow_empty`` gives
    summaries of no rows (its columns checked; the scan's ``rows`` 0).
    """
    from calib_cli.summaries.scan import FlaggedRowError, holds_no_rows, summarize_lazy_sub_cells

    lazy, _ = io.scan_table(path, input_format=input_format)
    name = io.display_name(path)
    # no rows: only the columns to check, which the deferred check does before any pass
    empty = allow_empty and bool(io.collect(lambda: holds_no_rows(lazy), name))
    scan = io.scored_scan(
        lazy,
        name=name,
        score_cols=score_cols,
        label_col=label_col,
        weight_col=weight_col,
        positive_label=None if empty else positive_label,
        by=by,
        on_invalid="error" if empty else on_invalid,
        max_invalid=max_invalid,
        defer=True,  # checked in the summary's pass: one read of the rows, not two
    )
    warn_dropped(scan.invalid, by, warn)
    try:
        with io.naming(name):  # every score column in one streaming run over the rows
            # a row the parser cannot read fails mid-run: bad input naming the file (io.collect)
            both = io.collect(
                lambda: summarize_lazy_sub_cells(
                    scan.lazy,
                    list(dict.fromkeys(score_cols)),
                    label_column=label_col,
                    weight_column=weight_col,
                    group_column=by,
                    bin_edges=bin_edges,
                    mantissa_bits=mantissa_bits,
                    sub_bits=sub_bits,
                    flag_column=None if scan.verify is None else io.FLAG_COLUMN,
                    on_rows=on_rows,
                    positive_label=positive_label,
                ),
                name,
            )
    except FlaggedRowError:
        if scan.verify is not None:
            scan.verify()  # raises the check's error (column, count, first row)
        raise InputError(f"{name}: the rows hold invalid values") from None
    summaries = {name: summary for name, (summary, _) in both.items()}
    if scan.verify is not None:
        rows = int(np.sum(next(iter(summaries.values())).n_rows))
        if rows == 0 and not empty:
            scan.verify()  # raises: no data rows
        scan = replace(scan, rows=rows, verify=None)
    return summaries, scan, {name: sub for name, (_, sub) in both.items()}


@in_dialect
def run_summarize(
    request: SummarizeRequest, *, warn: Warn = ignore, progress: Progress = ignore
) -> SummarizeResult:
    """Summarise every file, merge them per score column, write one summary per column.

    A file without rows adds nothing (a warning says so); when every file is empty, the
    summaries written are summaries of no rows."""
    if not request.files:
        raise UsageError("give at least one FILE to summarise")
    if request.files.count(io.STDIO) > 1:
        raise UsageError("standard input ('-') can be read only once")
    io.summary_format(request.output)  # refuses a name the summary cannot be written under
    check_invalid_options(request.on_invalid, request.max_invalid)
    refuse_shared_columns(request)
    if not isinstance(request.grid_bits, int) or not 12 <= request.grid_bits <= 30:
        raise OptionError(
            f"--grid-bits must be an integer from 12 to 30, got {request.grid_bits!r}"
        )
    outputs = output_paths(request.output, request.score_cols)
    check_paths(
        inputs=list(request.files),
        files=[*outputs, request.report],
        input_format=request.input_format,
        dialect=request.dialect,
    )
    for path in outputs:  # a Parquet summary is no more for a terminal than Parquet rows
        if io.summary_format(path) == "parquet":
            io.check_destination(path, data_format="parquet", table=True)
    edges = uniform_edges(request.n_bins)
    per_file: list[dict[str, ScoreSummary]] = []
    rows = dropped = 0
    invalid_rows: list[io.InvalidRows] = []
    empty: list[str] = []
    for index, path in enumerate(request.files):
        step = f"file {index + 1}/{len(request.files)}: summarising {io.display_name(path)}"
        progress(step)
        summaries, scan, _ = summarize_scan(
            path,
            score_cols=request.score_cols,
            label_col=request.label_col,
            weight_col=request.weight_col,
            positive_label=request.positive_label,
            by=request.by,
            bin_edges=edges,
            input_format=request.input_format,
            on_invalid=request.on_invalid,
            warn=warn,
            max_invalid=request.max_invalid,
            mantissa_bits=request.grid_bits,
            on_rows=rows_read(progress, step),
            allow_empty=True,
        )
        per_file.append(summaries)
        if scan.rows == 0:
            empty.append(io.display_name(path))
        rows += scan.rows
        dropped += scan.dropped
        if scan.invalid is not None:
            invalid_rows.append(scan.invalid)
    _warn_empty_inputs(empty, every=len(empty) == len(request.files), warn=warn)
    written: list[SummaryFile] = []
    for column, path in zip(dict.fromkeys(request.score_cols), outputs, strict=True):
        merged = merge_summaries([summaries[column] for summaries in per_file])
        if request.by is not None:  # before writing a summary that no reader would take
            with io.naming(listed([io.display_name(f) for f in request.files])):
                io.refuse_missing_name(merged.groups, request.by, "--by")
        if request.weight_kind != merged.weight_kind:
            merged = replace(merged, weight_kind=request.weight_kind)
        io.write_summary(merged, path)
        written.append(SummaryFile(score_column=column, path=path, summary=merged))
    return SummarizeResult(
        sources=tuple(io.display_name(f) for f in request.files),
        rows=rows,
        dropped=dropped,
        outputs=tuple(written),
        invalid_rows=tuple(invalid_rows),
    )


def _warn_empty_inputs(names: Sequence[str], *, every: bool, warn: Warn) -> None:
    """Say which inputs held no rows: left out, or (``every`` input) an empty summary."""
    if every:
        warn(f"{listed(names)}: no data rows: the summary written holds no rows")
    else:
        for name in names:
            warn(f"{name}: no data rows: left out of the summary")


def listed(names: Sequence[str], *, shown: int = 3) -> str:
    """File names for a message: the first ``shown``, then how many more.

    >>> listed(["a", "b"]), listed(["a", "b", "c", "d", "e"])
    ('a, b', 'a, b, c and 2 more')
    """
    if len(names) <= shown:
        return ", ".join(names)
    return f"{', '.join(names[:shown])} and {len(names) - shown} more"


#: Metadata fields that summaries merged together must share (the score column aside).
MATCHING_FIELDS = (
    "schema_version",
    "grid",
    "bin_edges",
    "eps",
    "label_column",
    "weight_column",
    "group_column",
    "weight_kind",
    "positive_label",
)


def shown_field(value: object) -> str:
    """A metadata value for a message: as the summary's JSON metadata writes it for a field
    never set (``null``, not Python's ``None``), long edge lists abbreviated."""
    if value is None:
        return "null"
    if isinstance(value, list) and len(value) > 4:
        return f"[{value[0]!r}, {value[1]!r}, ... {len(value)} values]"
    return repr(value)


def check_summary_weight_col(summary: ScoreSummary, weight_col: str | None, source: str) -> None:
    """A summary's weights are fixed when it is made: ``--weight-col`` may only name them
    (exit 65 otherwise, naming the summary's own)."""
    if weight_col is not None and summary.weight_column != weight_col:
        raise InputError(
            f"{source}: summary field 'weight_column' is "
            f"{shown_field(summary.weight_column)}, so it cannot weight rows by --weight-col "
            f"{weight_col!r} (summarise with --weight-col {weight_col})"
        )


def load_summaries(
    paths: Sequence[str], *, warn: Warn = ignore
) -> dict[str, tuple[ScoreSummary, tuple[str, ...]]]:
    """Read summary files and merge them per score column (in the order first seen).

    ``paths`` are files, directories of part files or quoted globs, resolved as every option
    that reads summaries resolves them
    (:func:`~calib_cli.workflows.summary_paths.expand_summary_paths`). A file a SQL engine
    wrote from no rows (no metadata: an empty table or partition) is left out with a warning;
    when every file is one, they are refused (exit 65). Summaries of one score column must
    agree on every field of :data:`MATCHING_FIELDS`; a file that does not is refused (exit
    65) with a line naming it, the field, and the first file with its value. Summaries of
    different score columns are reported side by side, like a repeated ``--score-col``.
    """
    if not paths:
        raise UsageError("give at least one summary file")
    files = expand_summary_paths(paths)
    if list(files).count(io.STDIO) > 1:
        raise UsageError("standard input ('-') can be read only once")
    entries = _read_summaries(files, warn)
    first_name, first = entries[0]
    for name, summary in entries[1:]:
        _check_matching(name, summary, first_name, first)
    groups: dict[str, list[tuple[str, ScoreSummary]]] = {}
    for name, summary in entries:
        groups.setdefault(summary.score_column, []).append((name, summary))
    merged: dict[str, tuple[ScoreSummary, tuple[str, ...]]] = {}
    for column, pairs in groups.items():
        names = tuple(name for name, _ in pairs)
        merged[column] = (merge_summaries([s for _, s in pairs]), names)
    return merged


def _read_summaries(files: Sequence[str], warn: Warn) -> list[tuple[str, ScoreSummary]]:
    """Each file's name and summary; a SQL engine's file of no rows (no metadata) is left out
    with one warning, and refused (exit 65) when every file is one."""
    read = [(io.display_name(path), read_summary_part(path)) for path in files]
    entries = [(name, summary) for name, summary in read if summary is not None]
    without = [name for name, summary in read if summary is None]
    if len(without) == 1 and not entries:
        raise InputError(f"{without[0]}: {NO_ROWS_NO_METADATA}")
    if not entries:
        raise InputError(
            f"{listed(without)}: none of these {len(without)} files holds a row, so none holds "
            "summary metadata: the queries that wrote them found no rows (empty tables, or "
            "days without data?); give summaries of some rows"
        )
    if without:
        warn(
            f"{listed(without)}: no rows, so no summary metadata (an empty table or "
            "partition): left out"
        )
    return entries


def _check_matching(name: str, summary: ScoreSummary, first_name: str, first: ScoreSummary) -> None:
    """Refuse (exit 65) the summary ``name`` unless its :data:`MATCHING_FIELDS` are those of
    the summary ``first_name``, naming both files and both values."""
    meta, first_meta = summary.metadata(), first.metadata()
    for field in MATCHING_FIELDS:
        if meta[field] == first_meta[field]:
            continue
        if field == "weight_kind":
            raise InputError(
                f"{name}: a summary of {meta[field]} weights, but {first_name} holds "
                f"{first_meta[field]} weights: summaries merge only with the same "
                "--weight-kind (their intervals need different variances)"
            )
        if field == "positive_label":
            raise InputError(
                f"{name}: summary field 'positive_label' is "
                f"{describe_positive_label(summary.positive_label)}, but {first_name} has "
                f"{describe_positive_label(first.positive_label)}: summaries merge only when "
                "their labels mean the same (summarise them with the same --positive-label)"
            )
        raise InputError(
            f"{name}: summary field {field!r} is {shown_field(meta[field])}, but "
            f"{first_name} has {shown_field(first_meta[field])}: summaries merge only "
            "when they share it"
        )
