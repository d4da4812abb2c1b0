"""``calib estimate-shift``: the positive rate of unlabeled batches, and their decisions."""

from __future__ import annotations

import contextlib
import datetime as dt
import math
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from typing import Literal

import numpy as np

from calib_cli import io
from calib_cli.core.decisions import flag_rows
from calib_cli.core.shift import (
    COUNT_CHUNK,
    MAP_BETA,
    MAP_NODES,
    MAP_POWER,
    DecisionCosts,
    EstimatedMethod,
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
from calib_cli.core.shift_cells import (
    CellBinning,
    SummaryBinning,
    SummaryKeys,
    reference_counts_from_keys,
    target_counts_from_keys,
)
from calib_cli.core.shift_history import (
    CANDIDATE_NAMES,
    conformal_min_errors,
    history_blend,
    history_candidates,
    history_schedule,
    rolling_rate,
)
from calib_cli.errors import InputError, UsageError
from calib_cli.io.shift_scan import scan_chunks, sink_mapped, whole_columns
from calib_cli.io.table import Table
from calib_cli.summaries import ScoreSummary
from calib_cli.types import (
    DEFAULT_DIALECT,
    MISSING_GROUP,
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
    WeightKind,
)
from calib_cli.workflows.common import (
    Progress,
    check_paths,
    check_plot,
    choose_engine,
    finite_option,
    groups,
    ignore,
    in_dialect,
    refuse_added_columns,
    refuse_clashing_columns,
    refuse_row_options_without_rows,
    refuse_row_reading_options,
    refuse_shared_columns,
    summary_groups,
    unit_interval_option,
)
from calib_cli.workflows.summarize import check_summary_weight_col, load_summaries, shown_field
from calib_cli.workflows.summary_paths import expand_summary_paths


@dataclass(frozen=True)
class EstimateShiftRequest:
    """The options of an ``estimate-shift`` run."""

    #: the labelled reference's rows (or ``reference_summaries``)
    reference: str | None = None
    #: the target's rows (or ``target_summaries``)
    target: str | None = None
    output: str | None = None
    method: ShiftMethod = "auto"
    batch_col: str | None = None
    n_bootstrap: int = 200
    ci_method: CiMethod = "bootstrap"
    costs: str | None = None
    threshold: float | None = None
    #: ``--map-nodes``, ``--map-beta``, ``--map-power`` (None: not given, the core's defaults)
    map_nodes: int | None = None
    map_beta: float | None = None
    map_power: float | None = None
    score_col: str = "score"
    label_col: str = "label"
    weight_col: str | None = None
    #: ``--weight-kind``: ``frequency`` weights count as rows (the bootstrap draws the rows
    #: they stand for); ``importance`` weights keep the variance of the rows observed
    weight_kind: WeightKind = "frequency"
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
    #: ``--backtest``: every method on each labelled batch as a job with late labels
    #: (:func:`run_backtest`), batch t seeing the labels of batches up to t - label_delay
    backtest: bool = False
    #: None: not given (1 where it applies; refused where it does not)
    label_delay: int | None = None
    #: ``--history FILE``: labelled past batches (same --batch-col) to learn a blend from
    history: str | None = None
    #: ``--reference-summary``: summary files of the labelled reference (merged, groups
    #: pooled), in place of ``reference`` rows
    reference_summaries: tuple[str, ...] = ()
    #: ``--target-summary``: summary files of the target (merged; ``batch_col`` names their
    #: ``--by`` column), in place of ``target`` rows
    target_summaries: tuple[str, ...] = ()


@dataclass(frozen=True)
class BatchEstimate:
    """One batch's estimate, its error when the target has labels, and its decisions."""

    batch: GroupValue  # None without --batch-col
    estimate: ShiftEstimate
    true_prevalence: float | None = None
    error: float | None = None
    decision: DecisionCosts | None = None
    #: rows of the batch whose label is missing (late), in a target with labels: the batch's
    #: true rate, its error and its decisions' realised costs are then None
    unlabelled_rows: int = 0


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
    #: ``--history``: the blend learnt on the past batches, per batch of ``batches``
    history: HistoryResult | None = None
    #: from summaries: how their keys fell on the fine grid (the bound of the counts)
    binning: SummaryBinning | None = None
    #: what the reference weights meant (``--weight-kind``; None without ``--weight-col``)
    weight_kind: WeightKind | None = None


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


def _delay(request: EstimateShiftRequest) -> int:
    """``--label-delay``, 1 when not given."""
    return 1 if request.label_delay is None else request.label_delay


@in_dialect
def run_estimate_shift(
    request: EstimateShiftRequest, *, warn: Warn = ignore, progress: Progress = ignore
) -> EstimateShiftResult:
    """Fit the reference, estimate each batch, recalibrate it, write the rows (with -o);
    ``progress``: each stage, for a progress display."""
    output = request.output
    check_plot(request.plot)
    _check_sources(request)
    refuse_shared_columns(request)
    request = replace(  # directories of part files, or quoted globs
        request,
        reference_summaries=expand_summary_paths(request.reference_summaries),
        target_summaries=expand_summary_paths(request.target_summaries),
    )
    check_paths(
        inputs=[
            request.reference,
            request.target,
            *request.reference_summaries,
            *request.target_summaries,
        ]
        + ([request.history] if request.history is not None else []),
        table_output=output,
        output_format=request.output_format,
        files=[request.report, request.plot],
        input_format=request.input_format,
        dialect=request.dialect,
    )
    if request.ci_method == "profile" and request.method not in ("mle", "auto"):
        raise UsageError(
            "--ci-method profile is the profile likelihood of --method mle (auto runs mle); "
            f"--method {request.method} has bootstrap intervals: drop --ci-method profile or "
            "use --method mle"
        )
    if request.as_json and output is not None and io.canonical_output(output) == io.STDIO:
        raise UsageError("--json and -o - would both write to stdout; give -o a file")
    _check_method_options(request)
    refuse_row_options_without_rows(
        output is not None,
        output_col=request.output_col,
        output_format=request.output_format,
        why="a --target-summary holds no rows" if request.target_summaries else "no -o PATH",
    )
    finite_option(request.threshold, "--threshold")
    if request.score_kind == "probability":
        unit_interval_option(request.threshold, "--threshold")
    costs = parse_costs(request.costs) if request.costs is not None else None
    if output is not None and request.target is not None:
        refuse_added_columns(
            request.target,
            _added_columns(request, costs),
            input_format=request.input_format,
            output=output,
            output_format=request.output_format,
        )
    if request.label_delay is not None and request.history is None:
        raise UsageError(
            "--label-delay says how late the labels of --backtest or --history arrive; "
            "give one of them, or drop --label-delay"
        )
    if request.reference_summaries and request.target_summaries:
        refuse_row_reading_options(
            request, "--reference-summary and --target-summary are summaries, not rows"
        )
    if request.reference_summaries or request.target_summaries:
        progress("estimating from summaries")
        return _with_kind(_run_with_summaries(request, costs, warn=warn), request)
    past = None
    if request.history is not None:
        if request.batch_col is None:
            raise UsageError("--history needs --batch-col: the column that orders the past batches")
        progress(f"reading the history {io.display_name(request.history)}")
        past = _read_history(request, request.history, request.batch_col, warn)
        if _rows_path(request.target) != "-":  # standard input is read once: checked later
            target_values = _target_batch_values(request, request.batch_col)
            _check_same_kind(past.values, past.name, target_values, request.batch_col)
    reference, target = _rows_path(request.reference), _rows_path(request.target)
    streams = _streams(request, [reference, target], warn)
    progress(
        f"estimating {io.display_name(target)} against {io.display_name(reference)}"
        + (f", writing {io.display_name(output)}" if output is not None else "")
    )
    if streams:
        result = _run_streaming(request, costs, warn=warn)
    else:
        result = _run_memory(request, costs, warn=warn)
    result = _with_kind(result, request)
    if past is None or result.model is None:
        return result
    progress("learning from the history's errors")
    return replace(result, history=_history(request, past, result.model, result.batches, warn=warn))


def _streams(request: EstimateShiftRequest, paths: list[str], warn: Warn) -> bool:
    """Whether to stream ``paths``: the engine chosen, except that standard input, which
    cannot be read twice, is read into memory whatever the engine (with a warning when
    ``--engine streaming`` was asked for)."""
    engine = choose_engine(request.engine, paths, input_format=request.input_format, warn=warn)
    if engine == "streaming" and io.STDIO in paths:
        return False
    return engine == "streaming"


def _with_kind(result: EstimateShiftResult, request: EstimateShiftRequest) -> EstimateShiftResult:
    """The result with ``--weight-kind`` recorded (when there is a ``--weight-col``)."""
    if request.weight_col is None:
        return result
    return replace(result, weight_kind=request.weight_kind)


def _rows_path(path: str | None) -> str:
    """A file of rows the run reads (present: :func:`_check_sources` refused its absence)."""
    if path is None:
        raise UsageError("give --reference FILE and --target FILE (or their summaries)")
    return path


def _check_sources(request: EstimateShiftRequest) -> None:
    """One source each for the reference and the target: rows or summaries (exit 2)."""
    for rows, summaries, name in (
        (request.reference, request.reference_summaries, "reference"),
        (request.target, request.target_summaries, "target"),
    ):
        if rows is not None and summaries:
            raise UsageError(f"give --{name} FILE or --{name}-summary S, not both")
        if rows is None and not summaries:
            raise UsageError(f"give --{name} FILE (or --{name}-summary S)")


def _added_columns(request: EstimateShiftRequest, costs: tuple[float, float] | None) -> list[str]:
    """The columns ``-o`` appends to the target's: the calibrated scores, and the decision
    with ``--costs``."""
    return [request.output_col] + (["decision"] if costs is not None else [])


def _estimate(
    request: EstimateShiftRequest,
    model: ReferenceModel,
    counts: TargetCounts,
    *,
    method: ShiftMethod | None = None,
    n_bootstrap: int | None = None,
) -> ShiftEstimate:
    """One batch's estimate with the request's options: its method, replicates and interval,
    unless ``method`` (then a bootstrap interval) or ``n_bootstrap`` say otherwise."""
    # A fresh generator per batch: one call with --batch-col equals one call per batch.
    return estimate_prevalence(
        model,
        target_counts=counts,
        method=request.method if method is None else method,
        n_bootstrap=request.n_bootstrap if n_bootstrap is None else n_bootstrap,
        ci_method=request.ci_method if method is None else "bootstrap",
        rng=np.random.default_rng(request.seed),
        threshold=request.threshold,
        map_nodes=MAP_NODES if request.map_nodes is None else request.map_nodes,
        map_beta=MAP_BETA if request.map_beta is None else request.map_beta,
        map_power=MAP_POWER if request.map_power is None else request.map_power,
    )


def _check_method_options(request: EstimateShiftRequest) -> None:
    """A method's own options are refused when that method does not run (they would change
    nothing, exit 2): ``--threshold`` is ``acc``'s, ``--map-*`` are ``map``'s (``auto`` is
    ``mle``; ``--backtest`` runs :data:`BACKTEST_METHODS`)."""
    if request.backtest:
        runs: tuple[str, ...] = BACKTEST_METHODS
        doing = f"--backtest runs {', '.join(runs)}"
    else:
        runs = ("mle",) if request.method == "auto" else (request.method,)
        named = "auto (mle)" if request.method == "auto" else request.method
        doing = f"this call runs --method {named}"
    for option, value, owner in (
        ("--threshold", request.threshold, "acc"),
        ("--map-nodes", request.map_nodes, "map"),
        ("--map-beta", request.map_beta, "map"),
        ("--map-power", request.map_power, "map"),
    ):
        if value is not None and owner not in runs:
            raise UsageError(
                f"{option} applies to --method {owner}; {doing}: drop {option}"
                + ("" if request.backtest else f" or use --method {owner}")
            )


def _batch_result(
    request: EstimateShiftRequest,
    batch: GroupValue,
    estimate: ShiftEstimate,
    truth: float | None,
    decision: DecisionCosts | None,
    warn: Warn,
    unlabelled_rows: int = 0,
) -> BatchEstimate:
    if request.batch_col is not None and batch in (None, MISSING_GROUP):
        warn(
            f"batch {MISSING_GROUP}: {estimate.n} rows have no '{request.batch_col}' value; "
            "they are estimated together as one batch, after all the others"
        )
    for warning in estimate.warnings:
        prefix = f"batch {batch}: " if request.batch_col is not None else ""
        warn(f"{prefix}{warning}")
    return BatchEstimate(
        batch=batch,
        estimate=estimate,
        true_prevalence=truth,
        error=None if truth is None else estimate.prevalence - truth,
        decision=decision,
        unlabelled_rows=unlabelled_rows,
    )


@dataclass(frozen=True)
class _TargetTruth:
    """Per batch of a target (in the batches' order): its true rate (None when the target
    has no labels or the batch lacks some) and its rows whose label is missing."""

    truth: list[float | None]
    unlabelled: list[int]

    def labels_of(self, code: int, labels: FloatArray | None) -> FloatArray | None:
        """``labels`` (a batch's rows') for its realised costs: only when it has every label."""
        return labels if self.truth[code] is not None else None


def _target_truth(
    request: EstimateShiftRequest,
    name: str,
    sizes: IntArray,
    positives: FloatArray | None,
    unlabelled: IntArray | None,
    warn: Warn,
) -> _TargetTruth:
    """The batches' true rates from their rows (``sizes``), positives and rows without a label
    (None: the target has no label column), by one rule for both engines.

    Labels arrive late: a target's most recent rows often have none yet. A batch's true rate
    is reported only when every row of it is labelled (the labelled part of a batch is not a
    random sample of it: its latest rows are missing), with one warning counting the batches
    left without one; a label column with no label at all is a target without labels.
    """
    n_batches = int(sizes.shape[0])
    none = _TargetTruth([None] * n_batches, [0] * n_batches)
    if positives is None or unlabelled is None:
        return none
    rows, missing = int(sizes.sum()), int(unlabelled.sum())
    if rows and missing == rows:
        warn(io.unlabelled_target_message(name, request.label_col, rows))
        return none
    if missing:
        if request.batch_col is None:
            warn(
                f"{name}: {missing:,} of {rows:,} rows have no label: "
                "no true rate or error reported"
            )
        else:
            partly = int(np.count_nonzero(unlabelled))
            warn(
                f"{name}: {partly} of {n_batches} batches have missing labels ({missing:,} "
                "rows without one): no true rate or error reported for them"
            )
    return _TargetTruth(
        truth=[
            None if unlabelled[code] else float(positives[code]) / float(sizes[code])
            for code in range(n_batches)
        ],
        unlabelled=[int(count) for count in unlabelled],
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
    request: EstimateShiftRequest,
    costs: tuple[float, float] | None,
    *,
    warn: Warn,
    model: ReferenceModel | None = None,
) -> EstimateShiftResult:
    """Every row in memory; counted in the chunks of the streaming engine (same figures).
    ``model``: the reference already fitted (from a summary), else fitted on its rows."""
    output = request.output
    kind = request.score_kind
    if model is None:
        model = _memory_reference(request)
    tgt = io.read_table(
        _rows_path(request.target),
        input_format=request.input_format,
        typed=io.typed_output(output, request.output_format),
    )
    if output is not None:  # standard input's columns are known only now
        refuse_clashing_columns(tgt.name, tgt.columns, _added_columns(request, costs))
    scores = tgt.scores(request.score_col, kind=kind)
    labels = (
        tgt.partial_labels(request.label_col, positive_label=request.positive_label)
        if tgt.has_column(request.label_col)
        else None
    )
    selections = list(groups(tgt, request.batch_col))
    codes = np.zeros(tgt.n_rows, dtype=np.int64)
    for code, (_, rows) in enumerate(selections):
        codes[rows] = code
    n_batches = len(selections)
    sizes = np.bincount(codes, minlength=n_batches)
    positives = unlabelled = None
    if labels is not None:
        missing = np.isnan(labels)
        known = np.where(missing, 0.0, labels)
        positives = np.bincount(codes, known, minlength=n_batches).astype(np.float64)
        unlabelled = np.bincount(codes, missing, minlength=n_batches).astype(np.int64)
    truths = _target_truth(request, tgt.name, sizes, positives, unlabelled, warn)
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
                            truths.labels_of(code, None if labels is None else labels[mine]),
                            costs,
                        )
                    )
            decision = merge_decision_costs(pieces)
        batches.append(
            _batch_result(
                request,
                batch,
                estimate,
                truths.truth[code],
                decision,
                warn,
                truths.unlabelled[code],
            )
        )
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


def _memory_reference(request: EstimateShiftRequest) -> ReferenceModel:
    """The reference fitted on its rows, read into memory."""
    kind = request.score_kind
    ref = io.read_table(_rows_path(request.reference), input_format=request.input_format)
    ref_scores = ref.scores(request.score_col, kind=kind)
    ref_labels = ref.labels(request.label_col, positive_label=request.positive_label)
    with ref.context():
        return fit_reference(
            ref_scores,
            ref_labels,
            sample_weight=ref.weights(request.weight_col),
            score_kind=kind,
            weight_kind=request.weight_kind,
        )


# --------------------------------------------------------------------------- streaming


def _target_batch_values(request: EstimateShiftRequest, batch_col: str) -> tuple[GroupValue, ...]:
    """The target's batch values (one column read in chunks), before any work: a history
    whose values cannot be compared with them is refused before any output is written."""
    target = _rows_path(request.target)
    values: dict[GroupValue, None] = {}
    for table in scan_chunks(
        target,
        columns=[batch_col],
        chunk_rows=COUNT_CHUNK,
        required=[batch_col],
        input_format=request.input_format,
    ):
        values.update(dict.fromkeys(_chunk_groups(table, batch_col)[0]))
    return tuple(values)


def _chunk_groups(table: Table, batch_col: str | None) -> tuple[list[GroupValue], IntArray]:
    """A chunk's batch values (``None`` for missing) and each row's index into them."""
    if batch_col is None:
        return [None], np.zeros(table.n_rows, dtype=np.int64)
    values, codes = table.groups(batch_col, option="--batch-col")
    return list(values), np.asarray(codes, dtype=np.int64)


@dataclass
class _BatchTally:
    """A streaming target's batches, chunk by chunk: per batch value (None: missing) its
    chunks' fine-cell counts on the reference's grid, its rows and, with labels, positives."""

    counts: dict[GroupValue, list[TargetCounts]] = field(default_factory=dict)
    sizes: dict[GroupValue, int] = field(default_factory=dict)
    positives: dict[GroupValue, float] = field(default_factory=dict)
    #: with labels, the rows whose label is missing (NaN in ``y``)
    unlabelled: dict[GroupValue, int] = field(default_factory=dict)

    def add(
        self,
        model: ReferenceModel,
        x: FloatArray,
        y: FloatArray | None,
        values: list[GroupValue],
        codes: IntArray,
    ) -> None:
        """One chunk: scores ``x``, labels ``y`` (None: no label column; NaN: a missing
        label), batch ``values`` and each row's index into them."""
        counted = count_target(model, x, group_codes=codes, n_groups=len(values))
        present = np.bincount(codes, minlength=len(values))
        hits = missing = None
        if y is not None:
            unknown = np.isnan(y)
            hits = np.bincount(codes, np.where(unknown, 0.0, y), minlength=len(values))
            missing = np.bincount(codes, unknown, minlength=len(values))
        for code, value in enumerate(values):
            if not present[code]:
                continue
            self.counts.setdefault(value, []).append(counted[code])
            self.sizes[value] = self.sizes.get(value, 0) + int(present[code])
            if hits is not None and missing is not None:
                self.positives[value] = self.positives.get(value, 0.0) + float(hits[code])
                self.unlabelled[value] = self.unlabelled.get(value, 0) + int(missing[code])


def _run_streaming(
    request: EstimateShiftRequest,
    costs: tuple[float, float] | None,
    *,
    warn: Warn,
    model: ReferenceModel | None = None,
) -> EstimateShiftResult:
    """Bounded memory: the reference and the target read in chunks of ``COUNT_CHUNK`` rows
    and reduced to fine-cell counts (two passes over the reference: its range, then its
    counts; one over the target, one more with ``--costs``); ``-o`` streams scan -> map ->
    sink, applying :func:`posterior` chunk by chunk. ``model``: the reference already
    fitted (from a summary), else fitted on its rows."""
    if model is None:
        model = _streaming_reference(request)
    return _stream_target(request, costs, model, warn=warn)


def _streaming_reference(request: EstimateShiftRequest) -> ReferenceModel:
    """The reference's rows in chunks: its range, then its fine counts (two passes)."""
    kind = request.score_kind
    fmt = request.input_format
    reference = _rows_path(request.reference)
    ref_columns = [request.score_col, request.label_col] + (
        [request.weight_col] if request.weight_col else []
    )

    def ref_chunks() -> Iterator[tuple[Table, FloatArray, FloatArray, FloatArray]]:
        for table in scan_chunks(
            reference,
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

    with _whole_file_messages(reference, ref_columns, fmt, check_reference):
        ranges = []
        name = io.display_name(reference)
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
        return fit_reference_counts(
            merge_reference_counts(parts), score_kind=kind, weight_kind=request.weight_kind
        )


def _stream_target(
    request: EstimateShiftRequest,
    costs: tuple[float, float] | None,
    model: ReferenceModel,
    *,
    warn: Warn,
) -> EstimateShiftResult:
    """The target's rows in chunks on ``model``'s grid, estimated per batch (and the
    decisions, and ``-o``)."""
    kind = request.score_kind
    fmt = request.input_format
    target = _rows_path(request.target)
    output = request.output
    typed = io.typed_output(output, request.output_format)
    tgt_columns = [request.score_col, request.label_col] + (
        [request.batch_col] if request.batch_col else []
    )

    def tgt_chunks() -> Iterator[
        tuple[Table, FloatArray, FloatArray | None, list[GroupValue], IntArray]
    ]:
        for table in scan_chunks(
            target,
            columns=tgt_columns,
            chunk_rows=COUNT_CHUNK,
            required=[c for c in tgt_columns if c != request.label_col],
            input_format=fmt,
            typed=typed,
        ):
            x = table.scores(request.score_col, kind=kind)
            y = (
                table.partial_labels(request.label_col, positive_label=request.positive_label)
                if table.has_column(request.label_col)
                else None
            )
            values, codes = _chunk_groups(table, request.batch_col)
            yield table, x, y, values, codes

    tally = _BatchTally()
    has_labels = True
    target_name = io.display_name(target)

    def check_target(table: Table) -> None:
        table.scores(request.score_col, kind=kind)
        if table.has_column(request.label_col):
            table.partial_labels(request.label_col, positive_label=request.positive_label)
        if request.batch_col is not None:
            table.groups(request.batch_col, option="--batch-col")

    with _whole_file_messages(target, tgt_columns, fmt, check_target, typed=typed):
        for table, x, y, values, codes in tgt_chunks():
            target_name = table.name
            has_labels = y is not None
            tally.add(model, x, y, values, codes)
    counts = tally.counts
    if not counts and request.batch_col is None:
        raise InputError("the target has no rows")
    order = sorted(counts, key=io.order_key)
    truths = _target_truth(
        request,
        target_name,
        np.array([tally.sizes[value] for value in order], dtype=np.int64),
        np.array([tally.positives[value] for value in order]) if has_labels else None,
        np.array([tally.unlabelled[value] for value in order], dtype=np.int64)
        if has_labels
        else None,
        warn,
    )
    code_of = {value: code for code, value in enumerate(order)}
    estimates = {
        value: _estimate(request, model, merge_target_counts(counts[value])) for value in order
    }
    decisions: dict[GroupValue, list[tuple[float, DecisionCosts]]] = {}
    if costs is not None:
        for _, x, y, values, codes in tgt_chunks():
            for value, mine in zip(values, _rows_by_code(codes, len(values)), strict=True):
                if mine.size:
                    labels = truths.labels_of(code_of[value], None if y is None else y[mine])
                    decisions.setdefault(value, []).append(
                        _chunk_decisions(model, estimates[value], x[mine], labels, costs)
                    )
    batches = [
        _batch_result(
            request,
            MISSING_GROUP if value is None and request.batch_col is not None else value,
            estimates[value],
            truths.truth[code],
            merge_decision_costs(decisions[value]) if costs is not None else None,
            warn,
            truths.unlabelled[code],
        )
        for code, value in enumerate(order)
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
        _rows_path(request.target),
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


# ---------------------------------------------------------------------------- backtest

#: The label-shift estimators a backtest runs on every batch (``auto`` is ``mle``).
BACKTEST_METHODS: tuple[EstimatedMethod, ...] = ("mle", "em", "pacc", "map")
#: Batches of labels the rolling mean of a backtest averages.
BACKTEST_WINDOW = 4
#: Nominal coverage of every interval of a backtest (estimate-shift's intervals are 95%).
CI_LEVEL = 0.95


@dataclass(frozen=True)
class BacktestMethod:
    """One method's estimate of every batch in a backtest, and its errors.

    ``uses_labels``: learnt from the labels of earlier batches (never from the batch's own or
    later ones); ``coverage``: share of the batches with an informative interval whose
    interval holds the true rate (None where no batch has one, as with ``--bootstrap 0``): an
    interval of [0, 1] (no evidence, or too few labelled batches for a conformal width)
    covers by construction and is not counted; ``coverage_batches``: how many were."""

    name: str
    uses_labels: bool
    prevalence: FloatArray
    ci_low: FloatArray | None
    ci_high: FloatArray | None
    mae: float
    max_abs_error: float
    coverage: float | None
    coverage_batches: int = 0


@dataclass(frozen=True)
class BacktestResult:
    """``--backtest``: every method's estimate of every batch as the job would have made it,
    batch ``t`` seeing the labels of batches up to ``t - label_delay`` only."""

    source: str
    batch_col: str
    label_delay: int
    batches: tuple[GroupValue, ...]
    rows: tuple[int, ...]
    true_prevalence: FloatArray
    reference_prevalence: float
    methods: tuple[BacktestMethod, ...]
    candidates: tuple[str, ...]
    blend_weights: FloatArray
    n_history: IntArray
    ci_level: float

    @property
    def best_method(self) -> str:
        """The method of the lowest mean absolute error over the batches."""
        return min(self.methods, key=lambda m: m.mae).name


def _backtest_method(
    name: str,
    truth: FloatArray,
    prevalence: FloatArray,
    ci_low: FloatArray | None = None,
    ci_high: FloatArray | None = None,
    *,
    uses_labels: bool = False,
) -> BacktestMethod:
    error = np.abs(prevalence - truth)
    covered = None  # over the batches with an informative interval (none: --bootstrap 0)
    counted = 0
    if ci_low is not None and ci_high is not None:
        # [0, 1] holds every rate by construction: counting it would inflate the coverage
        held = np.isfinite(ci_low) & np.isfinite(ci_high) & ((ci_low > 0.0) | (ci_high < 1.0))
        counted = int(np.sum(held))
        if counted:
            inside = (ci_low[held] <= truth[held]) & (truth[held] <= ci_high[held])
            covered = float(np.mean(inside))
    return BacktestMethod(
        name=name,
        uses_labels=uses_labels,
        prevalence=prevalence,
        ci_low=ci_low,
        ci_high=ci_high,
        mae=float(np.mean(error)),
        max_abs_error=float(np.max(error)),
        coverage=covered,
        coverage_batches=counted,
    )


@in_dialect
def run_backtest(
    request: EstimateShiftRequest, *, warn: Warn = ignore, progress: Progress = ignore
) -> BacktestResult:
    """``--backtest --label-delay K``: estimate each labelled batch of the target, in the order
    of ``--batch-col``, with every method as a job whose labels arrive ``K`` batches late
    would have, and score the estimates against the batches' labels. A batch with a label
    missing (late labels) is left out as if absent, with a warning (:func:`_fully_labelled`):
    ``K`` counts the batches that remain.

    The label-shift estimators (``mle``, ``em``, ``pacc``, ``map``) and PCC see the
    reference and the batch's scores only; ``no_shift`` is the reference rate; ``rolling``
    the mean rate of the last :data:`BACKTEST_WINDOW` labelled batches; ``history_blend`` the
    inverse-error blend of :func:`~calib_cli.core.shift_history.history_blend` with its
    conformal interval. None uses the labels of batch ``t`` or later for batch ``t``."""
    refuse_shared_columns(request)
    if request.reference_summaries or request.target_summaries:
        raise UsageError(
            "--backtest reads each labelled batch's rows: give --reference and --target files"
        )
    reference, target = _rows_path(request.reference), _rows_path(request.target)
    check_paths(
        inputs=[reference, target],
        table_output=None,
        output_format=request.output_format,
        files=[request.report],
        input_format=request.input_format,
        dialect=request.dialect,
    )
    batch_col = request.batch_col
    if batch_col is None:
        raise UsageError("--backtest needs --batch-col: the column that orders the batches")
    for given, option in (
        (request.output, "-o"),
        (request.costs, "--costs"),
        (request.plot, "--plot"),
        (request.history, "--history"),
    ):
        if given is not None:
            raise UsageError(f"--backtest reports errors only; drop {option}")
    if request.method != "auto":
        raise UsageError(
            f"--backtest runs {', '.join(BACKTEST_METHODS)} and compares them; drop --method"
        )
    if request.ci_method != "bootstrap":
        raise UsageError(
            "--backtest scores every method with its bootstrap interval, so --ci-method "
            f"{request.ci_method} would change nothing; drop --ci-method"
        )
    _check_method_options(request)
    refuse_row_options_without_rows(
        False,
        output_col=request.output_col,
        output_format=request.output_format,
        why="--backtest reports errors only",
    )
    if _delay(request) < 1:
        raise UsageError(
            f"--label-delay must be at least 1 (a batch's labels arrive after it), "
            f"got {_delay(request)}"
        )
    progress(f"reading {io.display_name(reference)} and {io.display_name(target)}")
    if _streams(request, [reference, target], warn):
        model = _streaming_reference(request)
        name, values, sizes, truth, counts = _stream_labelled_batches(
            request, model, batch_col, warn
        )
    else:
        kind = request.score_kind
        ref = io.read_table(reference, input_format=request.input_format)
        tgt = io.read_table(target, input_format=request.input_format)
        with ref.context():
            model = fit_reference(
                ref.scores(request.score_col, kind=kind),
                ref.labels(request.label_col, positive_label=request.positive_label),
                sample_weight=ref.weights(request.weight_col),
                score_kind=kind,
                weight_kind=request.weight_kind,
            )
        batches = _labelled_batches(
            request, tgt, batch_col, labels_for=_BACKTEST_LABELS, place="batch", warn=warn
        )
        values, truth, sizes, name = batches.values, batches.truth, batches.sizes, tgt.name
        counts = batches.counts(model)
        del ref, tgt, batches
    _warn_text_order(values, name, batch_col, "--backtest", warn)
    if _delay(request) >= len(values):
        warn(
            f"{name}: --label-delay {_delay(request)} leaves no batch of the {len(values)} a "
            "labelled one before it: the methods that learn from labels fall back to the "
            "reference rate (rolling) and PCC (history_blend)"
        )
    progress(f"estimating {len(values)} batches with {len(BACKTEST_METHODS)} methods")
    estimates: dict[str, list[ShiftEstimate]] = {
        method: [_estimate(request, model, batch_counts, method=method) for batch_counts in counts]
        for method in BACKTEST_METHODS
    }
    delay = _delay(request)
    methods = [
        _backtest_method(
            method,
            truth,
            np.array([e.prevalence for e in found]),
            np.array([e.ci_low for e in found]),
            np.array([e.ci_high for e in found]),
        )
        for method, found in estimates.items()
    ]
    label_shift = methods[0].prevalence
    pcc = np.array([e.pcc for e in estimates["mle"]])
    reference_rate = model.reference_prevalence
    methods.append(_backtest_method("pcc", truth, pcc))
    methods.append(_backtest_method("no_shift", truth, np.full(truth.shape, reference_rate)))
    rolling = rolling_rate(
        truth, label_delay=delay, window=BACKTEST_WINDOW, fallback=reference_rate
    )
    methods.append(_backtest_method("rolling", truth, rolling, uses_labels=True))
    candidates = history_candidates(
        label_shift, pcc, truth, reference_rate=reference_rate, label_delay=delay
    )
    blend = history_blend(candidates, truth, label_delay=delay, level=CI_LEVEL)
    methods.append(
        _backtest_method(
            "history_blend",
            truth,
            blend.prevalence,
            blend.ci_low,
            blend.ci_high,
            uses_labels=True,
        )
    )
    wide = int(np.sum(~np.isfinite(blend.halfwidth)))
    if wide:
        warn(
            f"history_blend: the interval of the first {wide} batches is [0, 1] (a "
            f"{CI_LEVEL:.0%} conformal width needs {conformal_min_errors(CI_LEVEL)} "
            "labelled batches before it)"
        )
    for method in methods:
        with_interval = 0 if method.ci_low is None else int(np.sum(np.isfinite(method.ci_low)))
        if method.coverage_batches < with_interval:
            wide = with_interval - method.coverage_batches
            if method.coverage_batches == 0:
                warn(
                    f"{method.name}: every one of its {with_interval} intervals is [0, 1], "
                    "which holds any rate: no coverage to report"
                )
                continue
            shown = "none" if method.coverage is None else f"{method.coverage:.0%}"
            warn(
                f"{method.name}: {wide} of {with_interval} intervals "
                f"{'is' if wide == 1 else 'are'} [0, 1], which holds any rate; its coverage "
                f"({shown}) counts the other {method.coverage_batches} batches only"
            )
    return BacktestResult(
        source=name,
        batch_col=batch_col,
        label_delay=delay,
        batches=values,
        rows=tuple(int(size) for size in sizes),
        true_prevalence=truth,
        reference_prevalence=reference_rate,
        methods=tuple(methods),
        candidates=CANDIDATE_NAMES,
        blend_weights=blend.weights,
        n_history=blend.n_history,
        ci_level=CI_LEVEL,
    )


_BACKTEST_LABELS = "--backtest needs each batch's labels"


def _stream_labelled_batches(
    request: EstimateShiftRequest, model: ReferenceModel, batch_col: str, warn: Warn
) -> tuple[str, tuple[GroupValue, ...], IntArray, FloatArray, list[TargetCounts]]:
    """``--backtest``'s target in chunks of ``COUNT_CHUNK`` rows (bounded memory): the
    file's name, its fully labelled batches in order, their rows, true rates and fine-cell
    counts, counted, left out and refused as :func:`_labelled_batches` and
    :func:`_count_batches` do in memory."""
    target = _rows_path(request.target)
    fmt = request.input_format
    name = io.display_name(target)
    header = io.column_names(target, input_format=fmt)
    if header is not None and request.label_col not in header:
        raise InputError(
            f"{name}: {_BACKTEST_LABELS}, and there is no column "
            f"'{request.label_col}' (name it with --label-col)"
        )
    columns = [request.score_col, request.label_col, batch_col]
    tally = _BatchTally()

    def check(table: Table) -> None:
        table.scores(request.score_col, kind=request.score_kind)
        table.partial_labels(request.label_col, positive_label=request.positive_label)
        table.groups(batch_col, option="--batch-col")

    with _whole_file_messages(target, columns, fmt, check):
        for table in scan_chunks(
            target, columns=columns, chunk_rows=COUNT_CHUNK, required=columns, input_format=fmt
        ):
            name = table.name
            x = table.scores(request.score_col, kind=request.score_kind)
            y = table.partial_labels(request.label_col, positive_label=request.positive_label)
            tally.add(model, x, y, *_chunk_groups(table, batch_col))
    counts, sizes = tally.counts, tally.sizes
    if None in sizes:  # rows without a batch (the group "(missing)" in memory)
        raise InputError(
            f"{name}: column '{batch_col}' has {sizes[None]} rows without a value; "
            "--backtest needs every batch's place in time"
        )
    order = tuple(sorted(counts, key=io.order_key))
    labelled = _fully_labelled(
        request,
        name,
        order,
        np.array([sizes[value] for value in order], dtype=np.int64),
        np.array([tally.positives[value] for value in order], dtype=np.float64),
        np.array([tally.unlabelled[value] for value in order], dtype=np.int64),
        option="--backtest",
        warn=warn,
    )
    used = tuple(order[code] for code in labelled.used)
    return (
        name,
        used,
        labelled.sizes,
        labelled.truth,
        [merge_target_counts(counts[value]) for value in used],
    )


def _count_batches(
    model: ReferenceModel, scores: FloatArray, codes: IntArray, n_batches: int
) -> list[TargetCounts]:
    """Each batch's fine-cell counts, counted in chunks of file order as the in-memory
    engine counts them (so a backtest's estimates equal estimate-shift's)."""
    parts: list[list[TargetCounts]] = [[] for _ in range(n_batches)]
    for start in range(0, codes.shape[0], COUNT_CHUNK):
        chunk = slice(start, start + COUNT_CHUNK)
        counted = count_target(model, scores[chunk], group_codes=codes[chunk], n_groups=n_batches)
        for code in np.unique(codes[chunk]):
            parts[code].append(counted[code])
    return [merge_target_counts(p) for p in parts]


# ---------------------------------------------------------------------------- --history


@dataclass(frozen=True)
class HistoryResult:
    """``--history FILE``: each target batch's blend of candidates, learnt from how they
    erred on the labelled past batches (:func:`~calib_cli.core.shift_history.history_blend`).

    ``prevalence``, ``ci_low``, ``ci_high``, ``n_history`` and ``weights`` are per target
    batch (in the order of the result's batches); ``candidate_mae`` is each candidate's mean
    absolute error over the past batches, each estimated as it would have been then
    (``label_delay`` batches of labels late); ``history_batches`` and ``history_rows`` the
    past batches used (those fully labelled: the others are left out) and their rows."""

    source: str
    label_delay: int
    history_batches: tuple[GroupValue, ...]
    history_rows: int
    candidates: tuple[str, ...]
    candidate_mae: FloatArray
    blend_mae: float
    prevalence: FloatArray
    ci_low: FloatArray
    ci_high: FloatArray
    halfwidth: FloatArray
    n_history: IntArray
    weights: FloatArray
    ci_level: float


@dataclass(frozen=True)
class _FullyLabelled:
    """Of a file's batches (in order): the codes of those whose every row is labelled
    (ascending), their rows and true rates."""

    used: IntArray
    sizes: IntArray
    truth: FloatArray


def _fully_labelled(
    request: EstimateShiftRequest,
    name: str,
    values: tuple[GroupValue, ...],
    sizes: IntArray,
    positives: FloatArray,
    unlabelled: IntArray,
    *,
    option: Literal["--history", "--backtest"],
    warn: Warn,
) -> _FullyLabelled:
    """The batches of ``--history`` or of ``--backtest``'s target that a job would have
    labelled by now: those whose every row is labelled, by the rule of a target's true rate
    (:func:`_target_truth`, shared by both engines).

    Labels arrive late: the batches of one growing table of scored rows are labelled in
    turn, its latest ones partly or not at all. A batch with a label missing is left out as
    if absent (neither learnt from, scored nor counted; its labelled part is not a random
    sample of it), with one warning naming how many and the first few; none left is refused.
    """
    truths = _target_truth(request, name, sizes, positives, unlabelled, ignore)
    used = np.array(
        [code for code, truth in enumerate(truths.truth) if truth is not None], dtype=np.int64
    )
    n_batches, left_out = len(values), len(values) - int(used.size)
    what = "history batch" if option == "--history" else "batch"
    if n_batches and not used.size:
        why = (
            "--history learns only from past batches whose every label has arrived: give it "
            "some, or drop --history"
            if option == "--history"
            else "--backtest scores the methods on batches whose every label has arrived: "
            "give a target with some"
        )
        raise InputError(
            f"{name}: no {what} is fully labelled yet ({int(unlabelled.sum()):,} of "
            f"{int(sizes.sum()):,} rows have no label); {why}"
        )
    if left_out:
        out = np.flatnonzero(np.isin(np.arange(n_batches), used, invert=True))
        shown = ", ".join(str(values[code]) for code in out[:_SHOWN_LEFT_OUT])
        more = ", ..." if left_out > _SHOWN_LEFT_OUT else ""
        where = "left out" if option == "--history" else "left out of the backtest"
        warn(
            f"{name}: {left_out} of {n_batches} {what}es are not fully labelled yet "
            f"({int(sizes[out].sum()):,} rows): {where} ({shown}{more})"
        )
    return _FullyLabelled(
        used=used,
        sizes=sizes[used],
        truth=np.array([truths.truth[code] for code in used], dtype=np.float64),
    )


#: Batch values a warning names of those left out (then "...").
_SHOWN_LEFT_OUT = 4


@dataclass(frozen=True)
class _PastBatches:
    """Labelled batches (``--history``'s, or ``--backtest``'s target), checked before any
    work: every row's scores and batch code (into the ``n_read`` batches read, in order), and
    of the fully labelled batches (:func:`_fully_labelled`; ``used``, their codes) the
    values, rows and true rates."""

    name: str
    scores: FloatArray
    codes: IntArray
    n_read: int
    used: IntArray
    values: tuple[GroupValue, ...]
    sizes: IntArray
    truth: FloatArray

    @property
    def rows(self) -> int:
        """Rows of the batches used."""
        return int(self.sizes.sum())

    def counts(self, model: ReferenceModel) -> list[TargetCounts]:
        """The used batches' fine-cell counts, counted over every row in chunks of file order
        as the streaming engine counts them (so both give the same bits)."""
        counted = _count_batches(model, self.scores, self.codes, self.n_read)
        return [counted[code] for code in self.used]


def _read_history(
    request: EstimateShiftRequest, path: str, batch_col: str, warn: Warn
) -> _PastBatches:
    """Read and check ``--history`` (labels and the batch column required; the batches not
    fully labelled yet are left out)."""
    past = io.read_table(path, input_format=request.input_format)
    if past.n_rows == 0:
        raise InputError(f"{past.name}: --history has no rows; give the labelled past batches")
    return _labelled_batches(
        request,
        past,
        batch_col,
        labels_for="--history needs the past batches' labels",
        place="past batch",
        warn=warn,
    )


def _labelled_batches(
    request: EstimateShiftRequest,
    table: Table,
    batch_col: str,
    *,
    labels_for: str,
    place: str,
    warn: Warn,
) -> _PastBatches:
    """Scores, batch codes (in the batches' order) and true rates of a labelled file, for
    ``--backtest`` (the target) and ``--history``; ``labels_for`` and ``place`` word the
    refusals (no label column; rows without a batch). Labels may be missing (late labels:
    :meth:`~calib_cli.io.table.Table.partial_labels`); the batches with one missing are left
    out (:func:`_fully_labelled`)."""
    option: Literal["--history", "--backtest"] = (
        "--history" if labels_for.startswith("--history") else "--backtest"
    )
    scores = table.scores(request.score_col, kind=request.score_kind)
    if not table.has_column(request.label_col):
        raise InputError(
            f"{table.name}: {labels_for}, and there is no column "
            f"'{request.label_col}' (name it with --label-col)"
        )
    labels = table.partial_labels(request.label_col, positive_label=request.positive_label)
    selections = list(groups(table, batch_col))
    codes = np.zeros(table.n_rows, dtype=np.int64)
    for code, (_, rows) in enumerate(selections):
        codes[rows] = code
    values = tuple(value for value, _ in selections)
    sizes = np.bincount(codes, minlength=len(values))
    if MISSING_GROUP in values:
        raise InputError(
            f"{table.name}: column '{batch_col}' has {int(sizes[values.index(MISSING_GROUP)])} "
            f"rows without a value; {option} needs every {place}'s place in time"
        )
    missing = np.isnan(labels)
    labelled = _fully_labelled(
        request,
        table.name,
        values,
        sizes,
        np.bincount(codes, np.where(missing, 0.0, labels), minlength=len(values)).astype(
            np.float64
        ),
        np.bincount(codes, missing, minlength=len(values)).astype(np.int64),
        option=option,
        warn=warn,
    )
    return _PastBatches(
        name=table.name,
        scores=scores,
        codes=codes,
        n_read=len(values),
        used=labelled.used,
        values=tuple(values[code] for code in labelled.used),
        sizes=labelled.sizes,
        truth=labelled.truth,
    )


def _history(
    request: EstimateShiftRequest,
    past: _PastBatches,
    model: ReferenceModel,
    batches: tuple[BatchEstimate, ...],
    *,
    warn: Warn,
) -> HistoryResult:
    """The blend for the target's batches, learnt on ``--history``'s labelled batches."""
    values, truth = past.values, past.truth
    batch_col = request.batch_col or ""
    # checked before any work for a target file (run_estimate_shift); standard input here
    _check_same_kind(values, past.name, tuple(b.batch for b in batches), batch_col)
    _warn_text_order(values, past.name, batch_col, "--history", warn)
    past_estimates = [
        # only the points: the blend's interval is conformal
        _estimate(request, model, counts, method=request.method, n_bootstrap=0)
        for counts in past.counts(model)
    ]
    n_past, n_new = len(values), len(batches)
    schedule = history_schedule(n_past, n_new, label_delay=_delay(request))
    # a target batch learns only from the history's batches before it: never from its own
    # labels or later ones, should the history hold them
    before = np.array(
        [
            _batches_before(values, b.batch, past_name=past.name, batch_col=batch_col)
            for b in batches
        ],
        dtype=np.int64,
    )
    schedule[n_past:] = np.minimum(schedule[n_past:], before - 1)
    if n_new and before.min() < n_past:
        first = int(np.argmin(before))
        warn(
            f"--history: {n_past - int(before.min())} of its {n_past} batches "
            f"{'is' if n_past - int(before.min()) == 1 else 'are'} not before "
            f"the target's batch {batches[first].batch}; each target batch learns only from "
            "the history's batches before it"
        )
    label_shift = np.array(
        [e.prevalence for e in past_estimates] + [b.estimate.prevalence for b in batches]
    )
    pcc = np.array([e.pcc for e in past_estimates] + [b.estimate.pcc for b in batches])
    rates = np.concatenate([truth, np.zeros(n_new)])  # the new batches' are never read
    candidates = history_candidates(
        label_shift, pcc, rates, reference_rate=model.reference_prevalence, last=schedule
    )
    blend = history_blend(candidates, rates, last=schedule, level=CI_LEVEL)
    new = slice(n_past, n_past + n_new)
    if _delay(request) >= n_past:
        warn(
            f"{past.name}: --label-delay {_delay(request)} leaves none of the history's "
            f"{n_past} batches a labelled one before it: re-estimated as they were then, "
            "the candidates that learn from labels fall back to the reference rate and PCC, "
            "so the blend learns only how those err; give a longer history or a shorter "
            "--label-delay"
        )
    short = ~np.isfinite(blend.halfwidth[new])
    if short.any():
        usable = blend.n_history[new][short]
        first_short = batches[int(np.flatnonzero(short)[0])].batch
        fewest, most = int(usable.min()), int(usable.max())
        count = f"{fewest}" if fewest == most else f"{fewest} to {most}"
        why = (
            ""
            if fewest == n_past
            else f" (of the history's {n_past}: only those before a batch count)"
        )
        warn(
            f"--history: {int(short.sum())} of the {n_new} target batches (the first: "
            f"{first_short}) have {count} usable past batches{why}, too few for a {CI_LEVEL:.0%} "
            f"conformal interval (it needs {conformal_min_errors(CI_LEVEL)}); their blend's "
            "interval is [0, 1]"
        )
    return HistoryResult(
        source=past.name,
        label_delay=_delay(request),
        history_batches=values,
        history_rows=past.rows,
        candidates=CANDIDATE_NAMES,
        candidate_mae=np.mean(np.abs(candidates[:n_past] - truth[:, None]), axis=0),
        blend_mae=float(np.mean(np.abs(blend.prevalence[:n_past] - truth))),
        prevalence=blend.prevalence[new],
        ci_low=blend.ci_low[new],
        ci_high=blend.ci_high[new],
        halfwidth=blend.halfwidth[new],
        n_history=blend.n_history[new],
        weights=blend.weights[new],
        ci_level=CI_LEVEL,
    )


#: Text batch values that order as time does: ISO dates and times (2024-05-01, 2024-05-01T08).
_ISO_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")


def _value_kind(value: GroupValue) -> str:
    """What a batch value is, for the refusal: numbers, text or dates (times; ISO date or
    date-time text, a CSV's dates, among them)."""
    if io.reads_as_number(value):  # 9, and "09" or "007" from a CSV
        return "numbers"
    if isinstance(value, str) and _as_time(value) is value:
        return "text"
    return "dates"


def _as_time(value: GroupValue | dt.date) -> GroupValue | dt.date:
    """A batch value placed in time: a date as its midnight, ISO date or date-time text (how
    a CSV holds dates: ``2024-03-04``, ``2024-03-04 00:00:00``) as that date-time, so that a
    Parquet history of dates and a target of timestamps, or a CSV history and a Parquet
    target, place their batches alike; any other value as it is.

    >>> _as_time(dt.date(2024, 3, 4)) == _as_time("2024-03-04 00:00:00")
    True
    >>> _as_time("d10"), _as_time(7)
    ('d10', 7)
    """
    if isinstance(value, dt.datetime):
        return value
    if isinstance(value, dt.date):
        return dt.datetime.combine(value, dt.time())
    if isinstance(value, str) and _ISO_DATE.match(value):
        try:
            return dt.datetime.fromisoformat(value.strip())
        except ValueError:
            return value
    return value


def _shown(value: GroupValue) -> str:
    """A batch value as a message shows it: text quoted, numbers and dates as written."""
    return repr(value) if isinstance(value, str) else str(value)


def _check_same_kind(
    past: tuple[GroupValue, ...], past_name: str, new: tuple[GroupValue, ...], batch_col: str
) -> None:
    """Refuse a history whose batch values are not of the target's kind: "3" and 21 do not
    compare as times, and text order would put the history's "3" after the target's 21."""
    placed = [v for v in new if v is not None and v != MISSING_GROUP]
    known = [v for v in past if v is not None and v != MISSING_GROUP]
    kinds_new, kinds_past = {_value_kind(v) for v in placed}, {_value_kind(v) for v in known}
    if kinds_new and kinds_past and kinds_new != kinds_past:
        raise InputError(
            f"{past_name}: column '{batch_col}' holds {' and '.join(sorted(kinds_past))} "
            f"({_shown(known[0])}, ...) and the target's holds "
            f"{' and '.join(sorted(kinds_new))} ({_shown(placed[0])}, ...): the batches' places "
            "in time cannot be compared; give both files the same type of batch values"
        )


def _warn_text_order(
    values: tuple[GroupValue, ...], name: str, batch_col: str, option: str, warn: Warn
) -> None:
    """Warn when batches are placed in time by text order that may not be time's ("d10"
    before "d2", "1/10/2024" before "1/9/2024"): ISO dates are the text that orders as time."""
    text = [
        v for v in values if isinstance(v, str) and v != MISSING_GROUP and not io.reads_as_number(v)
    ]
    if len(text) > 1 and not all(_ISO_DATE.match(v) for v in text):
        shown = ", ".join(text[:4])
        warn(
            f"{name}: {option} places the batches of '{batch_col}' in time in text order "
            f"({shown}, ...): numbers or ISO dates (2024-05-01) order as time does"
        )


def _batches_before(
    values: tuple[GroupValue, ...], value: GroupValue, *, past_name: str = "", batch_col: str = ""
) -> int:
    """How many of the history's batch ``values`` come before a target batch's ``value`` in
    time (:func:`_as_time`: a date is its midnight, so the history's 2024-03-04 is not before
    the target's 2024-03-04 00:00, whose labels it holds; compared as text, it was); all of
    them for the target's rows without a batch (not placed in time). Values of other kinds
    are refused before (:func:`_check_same_kind`); date-times with a time zone against
    date-times without one are refused here (exit 65)."""
    if value is None or value == MISSING_GROUP:
        return len(values)
    key = io.order_key(_as_time(value))
    try:
        return sum(1 for v in values if io.order_key(_as_time(v)) < key)
    except TypeError:
        raise InputError(
            f"{past_name}: column '{batch_col}' holds date-times that cannot be placed in time "
            f"against the target's ({_shown(values[0])} and {_shown(value)}: one with a time "
            "zone, one without); give both files the same type of batch values"
        ) from None


# ------------------------------------------------------------------------- from summaries


def summary_keys(summary: ScoreSummary) -> SummaryKeys:
    """The keys of a summary (one group or all) as the fine counts read them."""
    return SummaryKeys(
        cell=summary.cell.astype(np.int64),
        bin=summary.bin.astype(np.int64),
        label=summary.label.astype(np.int64),
        rows=summary.n_rows_weighted.astype(np.float64),
        n_rows=summary.n_rows.astype(np.float64),
        weight=summary.weight,
        weight_sq=summary.weight_sq,
        logit_sum=summary.logit_sum,
        score_min=summary.score_min,
        score_max=summary.score_max,
    )


def _summary_of(
    request: EstimateShiftRequest, paths: tuple[str, ...], name: str, warn: Warn
) -> tuple[ScoreSummary, str]:
    """Summary files merged, the score column chosen as ``--score-col`` or the only one."""
    loaded = load_summaries(paths, warn=warn)
    only_summaries = bool(request.reference_summaries and request.target_summaries)
    if request.score_col in loaded:
        column = request.score_col
    elif only_summaries and request.score_col != "score":  # no rows it could name
        raise InputError(
            f"no summary of score column '{request.score_col}' among the {name} summaries "
            f"(they summarise {', '.join(repr(c) for c in loaded)})"
        )
    elif len(loaded) == 1:
        column = next(iter(loaded))
    else:
        held = ", ".join(repr(c) for c in loaded)
        raise UsageError(
            f"the {name} summaries hold several score columns ({held}): choose one with --score-col"
        )
    summary, files = loaded[column]
    source = files[0] if len(files) == 1 else f"{len(files)} summaries of '{column}'"
    return summary, source


def _summary_reference(
    request: EstimateShiftRequest, warn: Warn
) -> tuple[ReferenceModel, CellBinning]:
    """The reference fitted on the fine counts of its summaries (every group pooled)."""
    summary, source = _summary_of(request, request.reference_summaries, "reference", warn)
    check_summary_weight_col(summary, request.weight_col, source)
    counts, binning = reference_counts_from_keys(summary_keys(summary.pooled()))
    with io.naming(source):
        model = fit_reference_counts(
            counts, score_kind="probability", weight_kind=request.weight_kind
        )
    return model, binning


def _summary_decisions(
    model: ReferenceModel,
    estimate: ShiftEstimate,
    part: ScoreSummary,
    costs: tuple[float, float],
    labelled: bool,
) -> DecisionCosts:
    """The decisions of a batch held as a summary: each (cell, bin, class) key's rows at
    their mean score (the cell's rows all on one side of the threshold; only the cell that
    holds the threshold's score can be split by it)."""
    live = (part.weight > 0.0) & np.isfinite(part.score_min)
    scores = np.clip(
        part.score_sum[live] / part.weight[live], part.score_min[live], part.score_max[live]
    )
    return decision_costs(
        reference_posterior(model, scores),
        posterior(model, estimate, scores),
        cost_fp=costs[0],
        cost_fn=costs[1],
        y_true=part.label[live].astype(np.float64) if labelled else None,
        sample_weight=part.weight[live],
    )


def _run_with_summaries(
    request: EstimateShiftRequest, costs: tuple[float, float] | None, *, warn: Warn
) -> EstimateShiftResult:
    """The reference and/or the target from summary files (``--reference-summary``,
    ``--target-summary``; :mod:`calib_cli.core.shift_cells` for the counts and their bound).
    A target summary's ``--by`` groups are the batches (``--batch-col`` names that column);
    its rows are in no file, so ``-o`` is refused with it."""
    if request.score_kind != "probability":
        raise UsageError(
            f"summaries hold probabilities: --score-kind {request.score_kind} needs rows "
            "(--reference FILE, --target FILE)"
        )
    for given, option in ((request.history, "--history"), (request.backtest or None, "--backtest")):
        if given is not None:
            raise UsageError(f"{option} reads labelled rows: give --reference and --target files")
    if request.target_summaries and request.output is not None:
        raise UsageError(
            "-o writes the target's rows with their calibrated probability, and a target "
            "summary holds no rows: drop -o (the estimates are the report), or give --target FILE"
        )
    binning: CellBinning | None = None
    if request.reference_summaries:
        model, binning = _summary_reference(request, warn)
    elif (
        choose_engine(
            request.engine,
            [_rows_path(request.reference)],
            input_format=request.input_format,
            warn=warn,
        )
        == "streaming"
    ):
        model = _streaming_reference(request)
    else:
        model = _memory_reference(request)
    if not request.target_summaries:
        target = _rows_path(request.target)
        run = _run_streaming if _streams(request, [target], warn) else _run_memory
        result = run(request, costs, warn=warn, model=model)
        return replace(result, binning=SummaryBinning(reference=binning, batches=()))
    summary, source = _summary_of(request, request.target_summaries, "target", warn)
    if summary.weight_column is not None:
        raise InputError(
            f"{source}: the target summary is weighted (column '{summary.weight_column}'); "
            "estimate-shift counts target rows unweighted: summarise the target without "
            "--weight-col"
        )
    by = request.batch_col
    if by is not None and summary.group_column != by:
        raise InputError(
            f"{source}: summary field 'group_column' is "
            f"{shown_field(summary.group_column)}, so it cannot give the batches of "
            f"--batch-col {by!r} (summarise the target with --by {by})"
        )
    # a summary always has a label column: a batch summarised with a constant label 0 (no
    # positive row) is read as unlabelled
    labelled = bool(np.any((summary.label == 1) & (summary.n_rows > 0)))
    if by is None:
        parts: list[tuple[GroupValue, ScoreSummary]] = [(None, summary.pooled())]
    else:
        with io.naming(source):
            named = summary_groups(summary.groups, by, "--batch-col")
        parts = [(value, summary.select_group(name)) for value, name in named]
    batches: list[BatchEstimate] = []
    target_binning: list[CellBinning] = []
    counts: TargetCounts | None = None
    for value, part in parts:
        where = source if by is None else f"{source} ({by}={value})"
        with io.naming(where):
            counts, fell = target_counts_from_keys(model, summary_keys(part))
            estimate = _estimate(request, model, counts)
        target_binning.append(fell)
        truth = None
        if labelled:
            truth = float(np.sum(part.n_rows[part.label == 1])) / float(np.sum(part.n_rows))
        decision = (
            None if costs is None else _summary_decisions(model, estimate, part, costs, labelled)
        )
        batches.append(_batch_result(request, value, estimate, truth, decision, warn))
    return EstimateShiftResult(
        source=source,
        batch_col=by,
        batches=tuple(batches),
        decision_threshold=None if costs is None else bayes_threshold(*costs),
        output=None,
        engine="memory",
        model=model,
        counts=counts if by is None else None,
        binning=SummaryBinning(reference=binning, batches=tuple(target_binning)),
    )
