"""``calib estimate-shift``: the positive rate of unlabeled batches, and their decisions."""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Literal

import numpy as np

from calib_cli import io
from calib_cli.core.decisions import flag_rows
from calib_cli.core.shift import (
    COUNT_CHUNK,
    DecisionCosts,
    ReferenceModel,
    ShiftEstimate,
    TargetCounts,
    bayes_threshold,
    count_reference,
    count_target,
    decision_costs,
    estimate_prevalence,
    fit_reference,
    fit_reference_counts,
    grid_range,
    logit_range,
    merge_decision_costs,
    merge_reference_counts,
    merge_target_counts,
    posterior,
    reference_posterior,
)
from calib_cli.errors import InputError, UsageError
from calib_cli.io.shift_scan import scan_chunks, sink_mapped, whole_columns
from calib_cli.io.table import Table
from calib_cli.types import (
    DEFAULT_DIALECT,
    CiMethod,
    CsvDialect,
    Engine,
    FloatArray,
    GroupValue,
    InputFormat,
    IntArray,
    ScoreKind,
    ShiftMethod,
    Warn,
)
from calib_cli.workflows.common import (
    MISSING_GROUP,
    check_paths,
    check_plot,
    choose_engine,
    finite_option,
    groups,
    ignore,
    in_dialect,
    refuse_added_columns,
    refuse_clashing_columns,
    unit_interval_option,
)


@dataclass(frozen=True)
class EstimateShiftRequest:
    """The options of an ``estimate-shift`` run."""

    reference: str
    target: str
    output: str | None = None
    method: ShiftMethod = "auto"
    batch_col: str | None = None
    n_bootstrap: int = 200
    ci_method: CiMethod = "bootstrap"
    costs: str | None = None
    threshold: float | None = None
    map_nodes: int = 10
    map_beta: float = 1000.0
    map_power: float = 1.0
    score_col: str = "score"
    label_col: str = "label"
    weight_col: str | None = None
    positive_label: str | None = None
    score_kind: ScoreKind = "probability"
    output_col: str = "calibrated"
    input_format: InputFormat | None = None
    #: ``--separator`` and ``--decimal-comma`` of CSV inputs (and CSV outputs)
    dialect: CsvDialect = DEFAULT_DIALECT
    output_format: InputFormat | None = None
    as_json: bool = False
    report: str | None = None
    seed: int = 0
    engine: Engine = "auto"
    #: ``--plot PATH``: each batch's rate over the batches, or one batch's fitted mixture
    plot: str | None = None


@dataclass(frozen=True)
class BatchEstimate:
    """One batch's estimate, its error when the target has labels, and its decisions."""

    batch: GroupValue  # None without --batch-col
    estimate: ShiftEstimate
    true_prevalence: float | None = None
    error: float | None = None
    decision: DecisionCosts | None = None


@dataclass(frozen=True)
class EstimateShiftResult:
    """Every batch's estimate; ``decision_threshold`` is the Bayes threshold with costs.

    ``model`` is the reference's fit and, without ``--batch-col``, ``counts`` the batch's
    fine-cell counts on its grid (what the estimate saw; the mixture picture draws them)."""

    source: str
    batch_col: str | None
    batches: tuple[BatchEstimate, ...]
    decision_threshold: float | None
    output: str | None
    engine: Engine = "memory"
    model: ReferenceModel | None = None
    counts: TargetCounts | None = None


def parse_costs(text: str) -> tuple[float, float]:
    """``--costs FP:FN`` as two positive, finite numbers.

    >>> parse_costs("1:20")
    (1.0, 20.0)
    """
    parts = text.split(":")
    try:
        if len(parts) != 2:
            raise ValueError
        cost_fp, cost_fn = float(parts[0]), float(parts[1])
    except ValueError:
        raise UsageError(f"--costs must look like FP:FN (e.g. 1:20), got {text!r}") from None
    if not (math.isfinite(cost_fp) and math.isfinite(cost_fn) and cost_fp > 0 and cost_fn > 0):
        raise UsageError(f"--costs needs two positive numbers, got {text!r}")
    return cost_fp, cost_fn


@in_dialect
def run_estimate_shift(
    request: EstimateShiftRequest, *, warn: Warn = ignore
) -> EstimateShiftResult:
    """Fit the reference, estimate each batch, recalibrate it, write the rows (with -o)."""
    output = request.output
    check_plot(request.plot)
    check_paths(
        inputs=[request.reference, request.target],
        table_output=output,
        output_format=request.output_format,
        files=[request.report, request.plot],
    )
    if request.ci_method == "profile" and request.method != "mle":
        raise UsageError(
            "--ci-method profile is the profile likelihood of --method mle; "
            "use it with --method mle (other methods: bootstrap)"
        )
    if request.as_json and output == "-":
        raise UsageError("--json and -o - would both write to stdout; give -o a file")
    finite_option(request.threshold, "--threshold")
    if request.score_kind == "probability":
        unit_interval_option(request.threshold, "--threshold")
    costs = parse_costs(request.costs) if request.costs is not None else None
    if output is not None:
        refuse_added_columns(
            request.target, _added_columns(request, costs), input_format=request.input_format
        )
    engine = choose_engine(
        request.engine, [request.reference, request.target], input_format=request.input_format
    )
    if engine == "streaming" and io.STDIO not in (request.reference, request.target):
        # standard input cannot be read twice: it is read into memory whatever the engine
        return _run_streaming(request, costs, warn=warn)
    return _run_memory(request, costs, warn=warn)


def _added_columns(request: EstimateShiftRequest, costs: tuple[float, float] | None) -> list[str]:
    """The columns ``-o`` appends to the target's: the calibrated scores, and the decision
    with ``--costs``."""
    return [request.output_col] + (["decision"] if costs is not None else [])


def _estimate(
    request: EstimateShiftRequest, model: ReferenceModel, counts: TargetCounts
) -> ShiftEstimate:
    # A fresh generator per batch: one call with --batch-col equals one call per batch.
    return estimate_prevalence(
        model,
        target_counts=counts,
        method=request.method,
        n_bootstrap=request.n_bootstrap,
        ci_method=request.ci_method,
        rng=np.random.default_rng(request.seed),
        threshold=request.threshold,
        map_nodes=request.map_nodes,
        map_beta=request.map_beta,
        map_power=request.map_power,
    )


def _batch_result(
    request: EstimateShiftRequest,
    batch: GroupValue,
    estimate: ShiftEstimate,
    truth: float | None,
    decision: DecisionCosts | None,
    warn: Warn,
) -> BatchEstimate:
    for warning in estimate.warnings:
        prefix = f"batch {batch}: " if request.batch_col is not None else ""
        warn(f"{prefix}{warning}")
    return BatchEstimate(
        batch=batch,
        estimate=estimate,
        true_prevalence=truth,
        error=None if truth is None else estimate.prevalence - truth,
        decision=decision,
    )


def _rows_by_code(codes: IntArray, n_codes: int) -> list[IntArray]:
    """The rows of each code, increasing (one stable sort, not one scan per code)."""
    order = np.argsort(codes, kind="stable")
    ends = np.cumsum(np.bincount(codes, minlength=n_codes))
    return list(np.split(order, ends[:-1]))


def _chunk_decisions(
    model: ReferenceModel,
    estimate: ShiftEstimate,
    scores: FloatArray,
    labels: FloatArray | None,
    costs: tuple[float, float],
) -> tuple[float, DecisionCosts]:
    """One chunk's rows of one batch: static and re-estimated decisions, with the row count
    (both engines merge chunks of file order with :func:`merge_decision_costs`). Static: the
    reference-calibrated probability (no shift assumed); re-estimated: the same map moved to
    the batch's estimated prevalence (:func:`posterior`)."""
    static = reference_posterior(model, scores)
    shifted = posterior(model, estimate, scores)
    return float(scores.shape[0]), decision_costs(
        static, shifted, cost_fp=costs[0], cost_fn=costs[1], y_true=labels
    )


def _run_memory(
    request: EstimateShiftRequest, costs: tuple[float, float] | None, *, warn: Warn
) -> EstimateShiftResult:
    """Every row in memory; counted in the chunks of the streaming engine (same figures)."""
    output = request.output
    kind = request.score_kind
    ref = io.read_table(request.reference, input_format=request.input_format)
    tgt = io.read_table(
        request.target,
        input_format=request.input_format,
        typed=io.typed_output(output, request.output_format),
    )
    if output is not None:  # standard input's columns are known only now
        refuse_clashing_columns(tgt.name, tgt.columns, _added_columns(request, costs))
    ref_scores = ref.scores(request.score_col, kind=kind)
    ref_labels = ref.labels(request.label_col, positive_label=request.positive_label)
    with ref.context():
        model = fit_reference(
            ref_scores, ref_labels, sample_weight=ref.weights(request.weight_col), score_kind=kind
        )
    scores = tgt.scores(request.score_col, kind=kind)
    labels = (
        tgt.labels(request.label_col, positive_label=request.positive_label)
        if tgt.has_column(request.label_col)
        else None
    )
    selections = list(groups(tgt, request.batch_col))
    codes = np.zeros(tgt.n_rows, dtype=np.int64)
    for code, (_, rows) in enumerate(selections):
        codes[rows] = code
    parts: list[list[TargetCounts]] = [[] for _ in selections]
    for start in range(0, tgt.n_rows, COUNT_CHUNK):
        chunk = slice(start, start + COUNT_CHUNK)
        present = np.unique(codes[chunk])
        counted = count_target(
            model, scores[chunk], group_codes=codes[chunk], n_groups=len(selections)
        )
        for code in present:
            parts[code].append(counted[code])
    calibrated = np.empty(tgt.n_rows, dtype=np.float64)
    by_chunk = (
        [
            _rows_by_code(codes[start : start + COUNT_CHUNK], len(selections))
            for start in range(0, tgt.n_rows, COUNT_CHUNK)
        ]
        if costs is not None
        else []
    )
    batches: list[BatchEstimate] = []
    merged: TargetCounts | None = None
    for code, (batch, rows) in enumerate(selections):
        merged = merge_target_counts(parts[code])
        estimate = _estimate(request, model, merged)
        calibrated[rows] = posterior(model, estimate, scores[rows])
        truth = None if labels is None else float(np.mean(labels[rows]))
        decision = None
        if costs is not None:
            pieces = []
            for start in range(0, tgt.n_rows, COUNT_CHUNK):
                mine = by_chunk[start // COUNT_CHUNK][code] + start
                if mine.size:
                    pieces.append(
                        _chunk_decisions(
                            model,
                            estimate,
                            scores[mine],
                            None if labels is None else labels[mine],
                            costs,
                        )
                    )
            decision = merge_decision_costs(pieces)
        batches.append(_batch_result(request, batch, estimate, truth, decision, warn))
    threshold = None if costs is None else bayes_threshold(*costs)
    if output is not None:
        added: dict[str, object] = {request.output_col: calibrated}
        if threshold is not None:
            added["decision"] = flag_rows(calibrated, threshold)
        io.write_table(
            tgt.with_columns(added), output, output_format_override=request.output_format
        )
    return EstimateShiftResult(
        source=tgt.name,
        batch_col=request.batch_col,
        batches=tuple(batches),
        decision_threshold=threshold,
        output=output,
        engine="memory",
        model=model,
        counts=merged if request.batch_col is None else None,
    )


# --------------------------------------------------------------------------- streaming


def _batch_key(value: GroupValue) -> tuple[int, object]:
    """Natural order of batch values (as :meth:`Table.groups`): numbers, text, missing last."""
    if value is None:
        return (2, 0)
    return (1, value) if isinstance(value, str) else (0, value)


def _chunk_groups(table: Table, batch_col: str | None) -> tuple[list[GroupValue], IntArray]:
    """A chunk's batch values (``None`` for missing) and each row's index into them."""
    if batch_col is None:
        return [None], np.zeros(table.n_rows, dtype=np.int64)
    values, codes = table.groups(batch_col, option="--batch-col")
    return list(values), np.asarray(codes, dtype=np.int64)


def _run_streaming(
    request: EstimateShiftRequest, costs: tuple[float, float] | None, *, warn: Warn
) -> EstimateShiftResult:
    """Bounded memory: the reference and the target read in chunks of ``COUNT_CHUNK`` rows
    and reduced to fine-cell counts (two passes over the reference: its range, then its
    counts; one over the target, one more with ``--costs``); ``-o`` streams scan -> map ->
    sink, applying :func:`posterior` chunk by chunk."""
    kind = request.score_kind
    fmt = request.input_format
    ref_columns = [request.score_col, request.label_col] + (
        [request.weight_col] if request.weight_col else []
    )

    def ref_chunks() -> Iterator[tuple[Table, FloatArray, FloatArray, FloatArray]]:
        for table in scan_chunks(
            request.reference,
            columns=ref_columns,
            chunk_rows=COUNT_CHUNK,
            required=ref_columns,
            input_format=fmt,
        ):
            x = table.scores(request.score_col, kind=kind)
            y = table.labels(request.label_col, positive_label=request.positive_label)
            w = table.weights(request.weight_col)
            yield table, x, y, w

    def check_reference(table: Table) -> None:
        table.scores(request.score_col, kind=kind)
        table.labels(request.label_col, positive_label=request.positive_label)
        table.weights(request.weight_col)

    with _whole_file_messages(request.reference, ref_columns, fmt, check_reference):
        ranges = []
        name = io.display_name(request.reference)
        for table, x, _, w in ref_chunks():
            name = table.name
            ranges.append(logit_range(x, sample_weight=w, score_kind=kind))
        low, high = grid_range(ranges)
        parts = [
            count_reference(
                x,
                y,
                sample_weight=w,
                score_kind=kind,
                logit_low=low,
                logit_high=high,
                n_fine=2048,
            )
            for _, x, y, w in ref_chunks()
        ]
    with io.naming(name):
        model = fit_reference_counts(merge_reference_counts(parts), score_kind=kind)

    output = request.output
    typed = io.typed_output(output, request.output_format)
    tgt_columns = [request.score_col, request.label_col] + (
        [request.batch_col] if request.batch_col else []
    )

    def tgt_chunks() -> Iterator[
        tuple[Table, FloatArray, FloatArray | None, list[GroupValue], IntArray]
    ]:
        for table in scan_chunks(
            request.target,
            columns=tgt_columns,
            chunk_rows=COUNT_CHUNK,
            required=[c for c in tgt_columns if c != request.label_col],
            input_format=fmt,
            typed=typed,
        ):
            x = table.scores(request.score_col, kind=kind)
            y = (
                table.labels(request.label_col, positive_label=request.positive_label)
                if table.has_column(request.label_col)
                else None
            )
            values, codes = _chunk_groups(table, request.batch_col)
            yield table, x, y, values, codes

    counts: dict[GroupValue, list[TargetCounts]] = {}
    positives: dict[GroupValue, float] = {}
    sizes: dict[GroupValue, int] = {}
    has_labels = True
    target_name = io.display_name(request.target)

    def check_target(table: Table) -> None:
        table.scores(request.score_col, kind=kind)
        if table.has_column(request.label_col):
            table.labels(request.label_col, positive_label=request.positive_label)
        if request.batch_col is not None:
            table.groups(request.batch_col, option="--batch-col")

    with _whole_file_messages(request.target, tgt_columns, fmt, check_target, typed=typed):
        for table, x, y, values, codes in tgt_chunks():
            target_name = table.name
            has_labels = y is not None
            counted = count_target(model, x, group_codes=codes, n_groups=len(values))
            present = np.bincount(codes, minlength=len(values))
            hits = None if y is None else np.bincount(codes, y, minlength=len(values))
            for code, value in enumerate(values):
                if not present[code]:
                    continue
                counts.setdefault(value, []).append(counted[code])
                sizes[value] = sizes.get(value, 0) + int(present[code])
                if hits is not None:
                    positives[value] = positives.get(value, 0.0) + float(hits[code])
    if not counts and request.batch_col is None:
        raise InputError("the target has no rows")
    order = sorted(counts, key=_batch_key)
    estimates = {
        value: _estimate(request, model, merge_target_counts(counts[value])) for value in order
    }
    decisions: dict[GroupValue, list[tuple[float, DecisionCosts]]] = {}
    if costs is not None:
        for _, x, y, values, codes in tgt_chunks():
            for value, mine in zip(values, _rows_by_code(codes, len(values)), strict=True):
                if mine.size:
                    decisions.setdefault(value, []).append(
                        _chunk_decisions(
                            model, estimates[value], x[mine], None if y is None else y[mine], costs
                        )
                    )
    batches = [
        _batch_result(
            request,
            MISSING_GROUP if value is None and request.batch_col is not None else value,
            estimates[value],
            positives[value] / sizes[value] if has_labels else None,
            merge_decision_costs(decisions[value]) if costs is not None else None,
            warn,
        )
        for value in order
    ]
    threshold = None if costs is None else bayes_threshold(*costs)
    if output is not None:
        _sink_calibrated(request, model, estimates, threshold, output, typed)
    return EstimateShiftResult(
        source=target_name,
        batch_col=request.batch_col,
        batches=tuple(batches),
        decision_threshold=threshold,
        output=output,
        engine="streaming",
        model=model,
        counts=merge_target_counts(counts[None]) if request.batch_col is None else None,
    )


def _sink_calibrated(
    request: EstimateShiftRequest,
    model: ReferenceModel,
    estimates: dict[GroupValue, ShiftEstimate],
    threshold: float | None,
    output: str,
    typed: bool,
) -> None:
    """The second pass: each chunk's rows get :func:`posterior` under their batch's estimate
    (and the decision with costs), the input's columns and order kept."""

    def calibrated(table: Table) -> FloatArray:
        x = table.scores(request.score_col, kind=request.score_kind)
        values, codes = _chunk_groups(table, request.batch_col)
        out = np.empty(x.shape[0], dtype=np.float64)
        for value, mine in zip(values, _rows_by_code(codes, len(values)), strict=True):
            if mine.size:
                out[mine] = posterior(model, estimates[value], x[mine])
        return out

    def decided(table: Table) -> IntArray:
        values = table.frame.get_column(request.output_col).to_numpy()
        return flag_rows(values, threshold if threshold is not None else 0.0)

    inputs = [request.score_col] + ([request.batch_col] if request.batch_col else [])
    added: list[tuple[str, Literal["float", "int"], list[str], Callable[[Table], object]]] = [
        (request.output_col, "float", inputs, calibrated)
    ]
    if threshold is not None:
        added.append(("decision", "int", [request.output_col], decided))
    sink_mapped(
        request.target,
        output,
        added=added,
        input_format=request.input_format,
        output_format=request.output_format,
        typed=typed,
    )


@contextlib.contextmanager
def _whole_file_messages(
    path: str,
    columns: list[str],
    input_format: InputFormat | None,
    check: Callable[[Table], object],
    *,
    typed: bool = False,
) -> Iterator[None]:
    """A chunk's bad-value message counts that chunk's rows; the in-memory engine counts the
    file's. On such an error, re-read the columns concerned whole and repeat the checks
    (``check``), so both engines refuse bad input with the same line (only a failing run
    pays for it)."""
    try:
        yield
    except InputError as error:
        if "first at row" not in str(error):
            raise
        check(whole_columns(path, columns=columns, input_format=input_format, typed=typed))
        raise
