"""Row-wise outputs as one streaming pass: scan -> check -> map -> sink (``recalibrate``).

A calibrator is applied batch by batch as a NumPy function (the core's own ``apply_*``), so a
streamed output equals the in-memory one bit for bit; memory does not grow with rows. Before
anything is written, one cheap streaming aggregate counts the invalid scores, labels, weights
and strata, and refuses them with the messages of :class:`~calib_cli.io.table.Table` (or, with
``--on-invalid drop``, counts the rows it drops). The figures that need labels come from
summaries (:mod:`calib_cli.summaries`) of the scores before and after, built in one pass after
the sink, and the totals in another (a pass shared with the sink multiplexes the scan, and
Polars buffers without bound for its slowest consumer: memory grew with rows).

Every float sum is taken in the rows' order (the summaries' :class:`~calib_cli.summaries.
accumulate.GridSums`, :class:`~calib_cli.core.keyed_sums.KeyedSums` for the totals and the
refinement passes), never by a Polars group-by, whose partial sums merge in whatever order its
threads finish: the same file gives the same output, model and report bytes on every run.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import cast

import numpy as np
import numpy.typing as npt
import polars as pl

from calib_cli.core.checks import (
    POSITIVE_LABEL_HINT,
    WEIGHT_RANGE_PROBLEM,
    outside_weight_range,
    shown_number,
    values_message,
)
from calib_cli.core.keyed_sums import KeyedSums
from calib_cli.errors import InputError, UsageError
from calib_cli.io.columns import label_missing as label_missing_expr
from calib_cli.io.columns import positive_label_expr, present_label_text
from calib_cli.io.dialect import number_text, refuse_nested_groups, require_column
from calib_cli.io.invalid import InvalidRows, reason
from calib_cli.io.sampling import _key_hash_expr
from calib_cli.io.scan import ROW_INDEX, collect, ordered_batches, scan_table
from calib_cli.io.sink import sink_collecting
from calib_cli.summaries.grid import bin_index, cell_index
from calib_cli.summaries.scan import bin_expr, cell_expr, summarize_lazy_many
from calib_cli.summaries.summary import DEFAULT_BIN_EDGES, ScoreSummary
from calib_cli.types import FloatArray, InputFormat, IntArray, OnInvalid, ScoreKind

#: Strata of a batch: (sorted distinct names, code per row), as ``core.chain.Strata``.
BatchStrata = tuple[Sequence[str], npt.NDArray[np.int64]]
#: A calibrator as a batch-wise map: scores (and strata) of some rows -> probabilities.
BatchMap = Callable[[FloatArray, "BatchStrata | None"], FloatArray]

_P, _Y, _W, _OUT, _FOLD = (
    "__calib_p__",
    "__calib_y__",
    "__calib_w__",
    "__calib_out__",
    "__calib_fold__",
)


@dataclass(frozen=True)
class StreamInput:
    """A checked lazy scan of a scored file (invalid rows filtered with ``--on-invalid drop``).

    ``label_problem`` says why the labels cannot be used (None when they can, or when there is
    no label column); ``strata`` holds the distinct values of the strata column, as text.
    """

    lazy: pl.LazyFrame
    name: str
    format: InputFormat
    columns: tuple[str, ...]
    rows: int
    dropped: int
    score_col: str
    score_kind: ScoreKind
    label_col: str
    positive_label: str | None
    weight_col: str | None
    strata_col: str | None
    has_label_column: bool
    label_problem: str | None
    strata: tuple[str, ...] | None
    #: what ``on_invalid="drop"`` dropped, by reason (None with ``"error"``)
    invalid: InvalidRows | None = None

    @property
    def has_labels(self) -> bool:
        return self.has_label_column and self.label_problem is None


@dataclass(frozen=True)
class StreamedScores:
    """What one pass measured: totals, and with labels the summaries before and after."""

    rows: int
    weight: float
    score_sum_before: float | None
    score_sum_after: float
    before: ScoreSummary | None
    after: ScoreSummary | None


# ----------------------------------------------------------------------------- checking


def _shown(value: object, numeric: bool) -> str:
    """A value as :func:`calib_cli.core.checks.bad_values_message` shows it."""
    if value is None:
        return "nan" if numeric else "empty"
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, int) and numeric:
        return str(value)
    if isinstance(value, float):
        return shown_number(value)
    return repr(value) if isinstance(value, str) else str(value)


def _as_number(column: str, dtype: pl.DataType, name: str) -> tuple[pl.Expr, pl.Expr | None]:
    """A column as Float64 (the rules of ``io.columns.as_float``), and for text the rows that
    are not numbers."""
    col = pl.col(column)
    if dtype == pl.Boolean or dtype.is_numeric():
        return col.cast(pl.Float64), None
    if dtype == pl.String:
        stripped = number_text(col)
        value = stripped.cast(pl.Float64, strict=False)
        return value, value.is_null() & stripped.is_not_null() & (stripped != "")
    raise InputError(f"{name}: column '{column}' has type {dtype}, not numbers")


def score_value(column: str, dtype: pl.DataType, name: str) -> pl.Expr:
    """The score column as Float64, exactly as the in-memory reader converts it."""
    return _as_number(column, dtype, name)[0]


class _Checks:
    """Named problems: (column, problem, mask, value shown), counted in one aggregate."""

    def __init__(self) -> None:
        self.items: list[tuple[str, str, pl.Expr, pl.Expr, bool, str]] = []

    def add(
        self,
        column: str,
        problem: str,
        mask: pl.Expr,
        value: pl.Expr,
        *,
        numeric: bool,
        suffix: str = "",
    ) -> None:
        self.items.append((column, problem, mask.fill_null(False), value, numeric, suffix))

    def exprs(self) -> list[pl.Expr]:
        out = []
        for i, (_, _, mask, value, _, _) in enumerate(self.items):
            out += [
                mask.sum().alias(f"n{i}"),
                pl.col(ROW_INDEX).filter(mask).first().alias(f"r{i}"),
                value.filter(mask).first().alias(f"v{i}"),
            ]
        return out

    def first_problem(self, found: pl.DataFrame, columns: Sequence[str]) -> str | None:
        for i, (column, problem, _, _, numeric, suffix) in enumerate(self.items):
            if column not in columns:
                continue
            count = int(found[f"n{i}"][0] or 0)
            if count:
                row = int(found[f"r{i}"][0]) + 1
                shown = _shown(found[f"v{i}"][0], numeric)
                return values_message(column, problem, count, row, shown) + suffix
        return None


def _require(schema: pl.Schema, name: str, column: str, option: str) -> None:
    require_column(list(schema), column, option, name)


def scan_input(
    path: str,
    *,
    input_format: InputFormat | None,
    typed: bool,
    score_col: str,
    score_kind: ScoreKind,
    label_col: str,
    positive_label: str | None,
    weight_col: str | None,
    strata_col: str | None,
    on_invalid: OnInvalid,
    labels_required: bool,
    max_invalid: float | None = None,
) -> StreamInput:
    """Scan a scored file and check it in one streaming aggregate, before any output.

    Invalid scores, weights and strata are refused (``on_invalid="error"``) with the messages
    of the in-memory reader; with ``on_invalid="drop"`` rows with an invalid score, label or
    weight are filtered out and counted by reason (each under its first problem), and refused
    above ``max_invalid`` (a fraction below 1, else a count; None: 1%). Label problems are
    errors when ``labels_required``, else they are kept in ``label_problem`` (the labels then
    only serve the report).
    """
    lazy, fmt = scan_table(path, input_format=input_format, typed=typed)
    name = _display(path)
    schema = lazy.collect_schema()
    _require(schema, name, score_col, "--score-col")
    has_labels = label_col in schema
    if labels_required:
        _require(schema, name, label_col, "--label-col")
    if weight_col is not None:
        _require(schema, name, weight_col, "--weight-col")
    if strata_col is not None:
        _require(schema, name, strata_col, "--strata-col")
        refuse_nested_groups(schema[strata_col], strata_col, "--strata-col", name)
    checks = _Checks()
    valid: list[pl.Expr] = []

    #: (reason, bad) of --on-invalid drop, in the order rows are attributed to them
    drops: list[tuple[str, pl.Expr]] = []
    p, not_number = _as_number(score_col, schema[score_col], name)
    raw = pl.col(score_col)
    if not_number is not None:
        checks.add(score_col, "that are not numbers", not_number, raw, numeric=False)
    missing = p.is_null() | p.is_nan()
    checks.add(score_col, "missing or NaN", missing, p, numeric=True)
    if not_number is not None:
        drops.append((reason(score_col, "that are not numbers"), not_number))
    drops.append((reason(score_col, "missing or NaN"), missing))
    if score_kind == "probability":
        checks.add(score_col, "outside [0, 1]", ~missing & ((p < 0.0) | (p > 1.0)), p, numeric=True)
        valid.append(~missing & (p >= 0.0) & (p <= 1.0))
        drops.append((reason(score_col, "outside [0, 1]"), (p < 0.0) | (p > 1.0)))
    else:
        checks.add(score_col, "that are infinite", ~missing & p.is_infinite(), p, numeric=True)
        valid.append(~missing & p.is_finite())
        drops.append((reason(score_col, "that are infinite"), p.is_infinite()))

    label_checks = _Checks()
    if has_labels:
        dtype = schema[label_col]
        label = pl.col(label_col)
        label_missing = label_missing_expr(label_col, dtype)
        label_checks.add(label_col, "missing", label_missing, label, numeric=dtype.is_numeric())
        _, is_valid = positive_label_expr(label_col, dtype, positive_label)
        problem = "that are not 0 or 1" if dtype.is_numeric() else "that are not 0/1 or true/false"
        label_checks.add(
            label_col,
            problem,
            ~label_missing.fill_null(True) & ~is_valid.fill_null(False),
            label,
            numeric=dtype.is_numeric(),
            suffix=POSITIVE_LABEL_HINT,
        )
        valid.append(~label_missing.fill_null(True) & is_valid.fill_null(False))
        drops.append((reason(label_col, "missing"), label_missing.fill_null(True)))
        drops.append((reason(label_col, problem), ~is_valid.fill_null(False)))
    if weight_col is not None:
        w, w_not_number = _as_number(weight_col, schema[weight_col], name)
        if w_not_number is not None:
            checks.add(
                weight_col, "that are not numbers", w_not_number, pl.col(weight_col), numeric=False
            )
        bad_w = w.is_null() | ~w.is_finite() | (w < 0.0)
        checks.add(weight_col, "that are negative, missing or infinite", bad_w, w, numeric=True)
        valid.append(~bad_w.fill_null(True))
        if w_not_number is not None:
            drops.append((reason(weight_col, "that are not numbers"), w_not_number))
        drops.append((reason(weight_col, "that are negative, missing or infinite"), bad_w))
        extreme = outside_weight_range(w)
        checks.add(weight_col, WEIGHT_RANGE_PROBLEM, extreme, w, numeric=True)
        valid.append(~extreme.fill_null(False))
        drops.append((reason(weight_col, WEIGHT_RANGE_PROBLEM), extreme))
    if strata_col is not None:
        s = pl.col(strata_col)
        checks.add(strata_col, "missing", s.is_null(), s, numeric=schema[strata_col].is_numeric())

    all_valid = pl.lit(True)
    for term in valid:
        all_valid = all_valid & term.fill_null(False)
    indexed = lazy.with_row_index(ROW_INDEX)
    earlier = pl.lit(False)
    firsts: list[pl.Expr] = []
    if on_invalid == "drop":  # each invalid row once, under its first problem
        for index, (_, bad) in enumerate(drops):
            firsts.append((bad.fill_null(True) & ~earlier).sum().alias(f"drop{index}"))
            earlier = earlier | bad.fill_null(True)
    aggregate = indexed.select(
        pl.len().alias("rows"),
        (~all_valid).sum().alias("invalid"),
        *checks.exprs(),
        *[e.name.prefix("l") for e in label_checks.exprs()],
        *firsts,
    )
    queries = [aggregate]
    if has_labels and positive_label is not None:
        text = present_label_text(label_col, schema[label_col])
        queries.append(
            lazy.select(
                text.n_unique().alias("count"),
                text.unique().sort().head(5).implode().alias("shown"),
            )
        )
    if strata_col is not None:
        queries.append(lazy.select(pl.col(strata_col).cast(pl.String).drop_nulls().unique().sort()))
    results = collect(lambda: pl.collect_all(queries, engine="streaming"), name)
    found = results[0]
    rows, invalid = int(found["rows"][0]), int(found["invalid"][0] or 0)
    if rows == 0:
        raise InputError(f"{name}: no data rows")
    columns = tuple(schema)
    label_found = found.select([pl.col(c).alias(c[1:]) for c in found.columns if c.startswith("l")])
    label_problem = label_checks.first_problem(label_found, columns) if has_labels else None
    dropped = 0
    invalid_rows = None
    if on_invalid == "drop":
        by_reason: dict[str, int] = {}
        for index, (why, _) in enumerate(drops):
            count = int(found[f"drop{index}"][0] or 0)
            if count:
                by_reason[why] = by_reason.get(why, 0) + count
        invalid_rows = InvalidRows(name, rows, invalid, by_reason)
        invalid_rows.check(max_invalid)
        if invalid == rows:
            raise InputError(f"{name}: no valid rows left after dropping {invalid} invalid rows")
        dropped, label_problem = invalid, None
        if invalid:
            lazy = lazy.filter(all_valid)
            rows -= invalid
    else:
        refused = checks.first_problem(found, columns)
        if refused is not None:
            raise InputError(f"{name}: {refused}")
    if has_labels and positive_label is not None and label_problem is None:
        seen = results[1]
        if int(seen["count"][0]) > 2:
            shown = ", ".join(repr(v) for v in seen["shown"][0].to_list())
            label_problem = (
                f"column '{label_col}' has {int(seen['count'][0])} distinct values "
                f"({shown}...); labels must take two values"
            )
    if label_problem is not None:
        label_problem = f"{name}: {label_problem}"
        if labels_required:
            raise InputError(label_problem)
    strata = None
    if strata_col is not None:
        strata = tuple(str(v) for v in results[-1].to_series().to_list())
    return StreamInput(
        lazy=lazy,
        name=name,
        format=cast("InputFormat", fmt),
        columns=columns,
        rows=rows,
        dropped=dropped,
        score_col=score_col,
        score_kind=score_kind,
        label_col=label_col,
        positive_label=positive_label,
        weight_col=weight_col,
        strata_col=strata_col,
        has_label_column=has_labels,
        label_problem=label_problem,
        strata=strata,
        invalid=invalid_rows,
    )


def _display(path: str) -> str:
    from calib_cli.io.formats import display_name

    return display_name(path)


# ----------------------------------------------------------------------------- mapping


def _batch_map(fn: BatchMap, with_strata: bool) -> Callable[[pl.Series], pl.Series]:
    """The Polars batch function of a NumPy map (scores, or a struct of scores and strata)."""

    def scores_only(batch: pl.Series) -> pl.Series:
        scores = np.asarray(batch.to_numpy(), dtype=np.float64)
        return pl.Series(np.asarray(fn(scores, None), dtype=np.float64), dtype=pl.Float64)

    def with_groups(batch: pl.Series) -> pl.Series:
        frame = batch.struct.unnest()
        scores = np.asarray(frame[_P].to_numpy(), dtype=np.float64)
        names, codes = np.unique(frame["__calib_g__"].to_numpy().astype(str), return_inverse=True)
        strata = ([str(n) for n in names], codes.astype(np.int64))
        return pl.Series(np.asarray(fn(scores, strata), dtype=np.float64), dtype=pl.Float64)

    return with_groups if with_strata else scores_only


def mapped_expr(scan: StreamInput, fn: BatchMap) -> pl.Expr:
    """The calibrated column of ``scan`` as a batch-wise map (elementwise, so it streams)."""
    schema = scan.lazy.collect_schema()
    p = score_value(scan.score_col, schema[scan.score_col], scan.name)
    if scan.strata_col is None:
        return p.map_batches(_batch_map(fn, False), return_dtype=pl.Float64, is_elementwise=True)
    source = pl.struct(p.alias(_P), pl.col(scan.strata_col).cast(pl.String).alias("__calib_g__"))
    return source.map_batches(_batch_map(fn, True), return_dtype=pl.Float64, is_elementwise=True)


def _inputs(scan: StreamInput) -> list[pl.Expr]:
    """Score, label (Int8 0/1) and weight columns of a checked scan under internal names."""
    schema = scan.lazy.collect_schema()
    out = [score_value(scan.score_col, schema[scan.score_col], scan.name).alias(_P)]
    if scan.has_labels:
        is_positive, _ = positive_label_expr(
            scan.label_col, schema[scan.label_col], scan.positive_label
        )
        out.append(is_positive.fill_null(False).cast(pl.Int8).alias(_Y))
    w = (
        pl.lit(1.0)
        if scan.weight_col is None
        else _as_number(scan.weight_col, schema[scan.weight_col], scan.name)[0]
    )
    out.append(w.alias(_W))
    return out


def stream_calibrated(
    scan: StreamInput,
    fn: BatchMap,
    *,
    output_col: str,
    output: str | None,
    output_format: InputFormat | None,
) -> StreamedScores:
    """One pass: the input's columns plus ``output_col`` (``fn`` of the scores) sunk to
    ``output`` (None: nothing written), and the figures of the scores before and after
    (summaries when there are labels)."""
    if output_col in scan.columns:
        raise UsageError(
            f"{scan.name} already has a column '{output_col}'; choose another output name"
        )
    mapped = scan.lazy.with_columns(mapped_expr(scan, fn).alias(_OUT))
    keyed = mapped.select(*_inputs(scan), pl.col(_OUT))
    before: pl.Expr | None = pl.col(_P)
    if scan.score_kind == "logit":
        before = 1.0 / (1.0 + (-pl.col(_P)).exp())
    elif scan.score_kind == "raw":
        before = None
    keyed = keyed.with_columns((pl.lit(None, pl.Float64) if before is None else before).alias("_b"))
    if output is not None:
        rows = mapped.rename({_OUT: output_col})
        sink_collecting(
            rows, output, output_format_override=output_format, queries=[], name=scan.name
        )
    # each figure in a pass of its own after the sink (a shared pass buffers for its slowest
    # consumer: memory grows), every sum taken in the rows' order (the same bytes every run)
    totals = KeyedSums(("weight", "before", "after"))
    names = ["_b", _OUT] if before is not None else [_OUT]
    for batch in ordered_batches(keyed.select(_W, *names), scan.name):
        w = batch[_W].to_numpy().astype(np.float64)
        after = w * batch[_OUT].to_numpy().astype(np.float64)
        was = w * batch["_b"].to_numpy().astype(np.float64) if before is not None else after
        totals.add(np.zeros(w.size, dtype=np.int64), {"weight": w, "before": was, "after": after})
    summaries: dict[str, ScoreSummary] = {}
    if scan.has_labels:
        summaries = collect(
            lambda: summarize_lazy_many(
                keyed, names, label_column=_Y, weight_column=_W, bin_edges=DEFAULT_BIN_EDGES
            ),
            scan.name,
        )
    found = totals.counts.size > 0
    return StreamedScores(
        rows=int(totals.counts[0]) if found else 0,
        weight=float(totals.sums["weight"][0]) if found else 0.0,
        score_sum_before=None
        if before is None
        else (float(totals.sums["before"][0]) if found else 0.0),
        score_sum_after=float(totals.sums["after"][0]) if found else 0.0,
        after=summaries.get(_OUT),
        before=summaries.get("_b"),
    )


def summarize_for_fit(
    scan: StreamInput,
    fn: BatchMap | None,
    *,
    mantissa_bits: int,
    eps: float,
    n_folds: int | None,
    seed: int,
) -> ScoreSummary:
    """One pass: the summary of the fit's inputs (``fn`` of the scores, e.g. a prior
    correction, or the scores), grouped by fold (``hash64(seed, row) mod n_folds``, as text)
    when ``n_folds`` is given."""
    lazy = scan.lazy
    score = (
        score_value(scan.score_col, lazy.collect_schema()[scan.score_col], scan.name)
        if fn is None
        else mapped_expr(scan, fn)
    )
    keyed = lazy.with_row_index(ROW_INDEX).select(
        *[e for e in _inputs(scan) if e.meta.output_name() != _P],
        score.alias(_P),
        pl.col(ROW_INDEX),
    )
    group = None
    if n_folds is not None:
        fold = _key_hash_expr(None, "row", seed) % n_folds
        keyed = keyed.with_columns(fold.cast(pl.String).alias(_FOLD))
        group = _FOLD
    summary: ScoreSummary = collect(
        lambda: summarize_lazy_many(
            keyed,
            [_P],
            label_column=_Y,
            weight_column=_W,
            group_column=group,
            bin_edges=DEFAULT_BIN_EDGES,
            mantissa_bits=mantissa_bits,
            eps=eps,
        )[_P],
        scan.name,
    )
    return summary


# ------------------------------------------------------------------ refinement passes of a fit
# A fit made on a summary holds the rows of each grid cell at one point; the isotonic fit
# (calib_cli.core.isotonic.fit_isotonic_units) names the cells that the fit on the rows could
# split, and these passes read them again on a finer grid (the grids nest, and at 52 bits a
# cell is one distinct score). Memory: the keys returned, which the caller bounds.


@dataclass(frozen=True)
class CellRows:
    """Sums of the rows of some cells on a finer grid, one entry per (bin, cell, class).

    Attributes
    ----------
    bin, cell : ndarray of int64
        The bin and the cell on the finer grid.
    label : ndarray of int8
    weight, score_sum : ndarray of float64
        Summed weight and ``weight * score`` of the rows (rows of weight 0 are left out).
    score_min, score_max : ndarray of float64
        Smallest and largest score.
    n_rows : ndarray of int64
    """

    bin: IntArray
    cell: IntArray
    label: npt.NDArray[np.int8]
    weight: FloatArray
    score_sum: FloatArray
    score_min: FloatArray
    score_max: FloatArray
    n_rows: IntArray


def rows_of_cells(
    scan: StreamInput,
    fn: BatchMap | None,
    keys: Mapping[int, tuple[npt.ArrayLike, npt.ArrayLike]],
    *,
    to_bits: int,
    bin_edges: tuple[float, ...],
) -> CellRows:
    """One streaming pass: the rows of positive weight whose fit input (``fn`` of the scores,
    or the scores) falls in one of the (bin, cell) ``keys[bits]`` of the ``bits`` grid (for
    each grid given), summed per (bin, cell of the ``to_bits`` grid, class)."""
    inputs = _inputs(scan)
    score = inputs[0] if fn is None else mapped_expr(scan, fn).alias(_P)
    n_keys = len(bin_edges)  # bins run from 0 to len(edges) - 2: pack (cell, bin) in one int
    p = pl.col(_P)
    bin_ = bin_expr(p, bin_edges).cast(pl.Int64)
    wanted = pl.lit(False)
    for bits, (bins, cells) in keys.items():
        packed = np.asarray(cells, dtype=np.int64) * n_keys + np.asarray(bins, dtype=np.int64)
        key = cell_expr(p, mantissa_bits=bits) * n_keys + bin_
        wanted = wanted | key.is_in(pl.Series(packed, dtype=pl.Int64))
    rows = (
        scan.lazy.select(score, *inputs[1:])
        .filter((pl.col(_W) > 0.0) & wanted)
        .select(
            p,
            pl.col(_Y),
            pl.col(_W).cast(pl.Float64),
            (cell_expr(p, mantissa_bits=to_bits) + bin_).alias("key"),
        )
    )
    # per (cell + bin, class), in the rows' order: ``cell + bin`` is one integer per (cell,
    # bin) pair that occurs (summaries.accumulate), decoded from the cell's scores below
    sums = KeyedSums(("weight", "score_sum"), n_sub=2, extremes=("score",))
    for batch in ordered_batches(rows, scan.name):
        score_values = batch[_P].to_numpy().astype(np.float64)
        w = batch[_W].to_numpy().astype(np.float64)
        sums.add(
            batch["key"].to_numpy().astype(np.int64),
            {"weight": w, "score_sum": w * score_values},
            sub=batch[_Y].to_numpy().astype(np.int64),
            extremes={"score": score_values},
        )
    used = sums.used()
    slot_key, label = sums.slot_keys(used)
    score_min, score_max = sums.low["score"][used], sums.high["score"][used]
    found_bin = bin_index(score_min, np.asarray(bin_edges, dtype=np.float64))
    found_cell = cell_index(score_min, mantissa_bits=to_bits)
    if np.any(found_cell + found_bin != slot_key):
        raise InputError(f"{scan.name}: internal: a refined cell does not match its scores")
    return CellRows(
        bin=found_bin,
        cell=found_cell,
        label=label.astype(np.int8),
        weight=sums.sums["weight"][used],
        score_sum=sums.sums["score_sum"][used],
        score_min=score_min,
        score_max=score_max,
        n_rows=sums.counts[used],
    )
