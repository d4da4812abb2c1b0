"""``calib estimate-shift``: the positive rate of unlabeled batches, and their decisions."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from calib_cli import io
from calib_cli.core.decisions import flag_rows
from calib_cli.core.shift import (
    DecisionCosts,
    ShiftEstimate,
    bayes_threshold,
    decision_costs,
    estimate_prevalence,
    fit_reference,
    posterior,
)
from calib_cli.errors import UsageError
from calib_cli.types import CiMethod, GroupValue, InputFormat, ScoreKind, ShiftMethod, Warn
from calib_cli.workflows.common import check_paths, groups, ignore


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
    output_format: InputFormat | None = None
    as_json: bool = False
    report: str | None = None
    seed: int = 0


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
    """Every batch's estimate; ``decision_threshold`` is the Bayes threshold with costs."""

    source: str
    batch_col: str | None
    batches: tuple[BatchEstimate, ...]
    decision_threshold: float | None
    output: str | None


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


def run_estimate_shift(
    request: EstimateShiftRequest, *, warn: Warn = ignore
) -> EstimateShiftResult:
    """Fit the reference, estimate each batch, recalibrate it, write the rows (with -o)."""
    output = request.output
    check_paths(
        inputs=[request.reference, request.target],
        table_output=output,
        output_format=request.output_format,
        files=[request.report],
    )
    if request.ci_method == "profile" and request.method != "mle":
        raise UsageError(
            "--ci-method profile is the profile likelihood of --method mle; "
            "use it with --method mle (other methods: bootstrap)"
        )
    if request.as_json and output == "-":
        raise UsageError("--json and -o - would both write to stdout; give -o a file")
    costs = parse_costs(request.costs) if request.costs is not None else None
    kind = request.score_kind
    ref = io.read_table(request.reference, input_format=request.input_format)
    tgt = io.read_table(
        request.target,
        input_format=request.input_format,
        typed=io.typed_output(output, request.output_format),
    )
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
    calibrated = np.empty(tgt.n_rows, dtype=np.float64)
    batches: list[BatchEstimate] = []
    for batch, rows in groups(tgt, request.batch_col):
        # A fresh generator per batch: one call with --batch-col equals one call per batch.
        estimate = estimate_prevalence(
            model,
            scores[rows],
            method=request.method,
            n_bootstrap=request.n_bootstrap,
            ci_method=request.ci_method,
            rng=np.random.default_rng(request.seed),
            threshold=request.threshold,
            map_nodes=request.map_nodes,
            map_beta=request.map_beta,
            map_power=request.map_power,
        )
        calibrated[rows] = posterior(model, estimate, scores[rows])
        truth = None if labels is None else float(np.mean(labels[rows]))
        decision = None
        if costs is not None:
            static = posterior(model, model.reference_prevalence, scores[rows], method="em")
            decision = decision_costs(
                static,
                calibrated[rows],
                cost_fp=costs[0],
                cost_fn=costs[1],
                y_true=None if labels is None else labels[rows],
            )
        for warning in estimate.warnings:
            prefix = f"batch {batch}: " if request.batch_col is not None else ""
            warn(f"{prefix}{warning}")
        batches.append(
            BatchEstimate(
                batch=batch,
                estimate=estimate,
                true_prevalence=truth,
                error=None if truth is None else estimate.prevalence - truth,
                decision=decision,
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
    )
