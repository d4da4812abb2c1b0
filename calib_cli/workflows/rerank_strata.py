"""``calib rerank-strata``: one ranking across strata (Zuo 2021), and its posterior."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from calib_cli import io
from calib_cli.core.decisions import bounded_prevalence
from calib_cli.core.pca import PcaStrata, pca_strata
from calib_cli.core.shift import ShiftEstimate
from calib_cli.core.strata import (
    RankingComparison,
    StratumSummary,
    compare_rankings,
    estimate_stratum_prevalence,
    fit_strata,
    odds_from_prevalence,
    rerank,
    rerank_rank,
    stratum_odds,
    summarise_strata,
)
from calib_cli.errors import UsageError
from calib_cli.io import Table
from calib_cli.types import FloatArray, InputFormat, ScoreKind, SlopeSmoothing, Warn
from calib_cli.workflows.common import check_paths, data_destination, ignore


@dataclass(frozen=True)
class RerankStrataRequest:
    """The options of a ``rerank-strata`` run."""

    reference: str
    target: str
    output: str | None = None
    strata_col: str | None = None
    pca_features: str | None = None
    n_strata: int = 3
    smoothing: SlopeSmoothing = "hull"
    prevalence_file: str | None = None
    estimate_target_prevalence: bool = False
    score_col: str = "score"
    label_col: str = "label"
    weight_col: str | None = None
    positive_label: str | None = None
    score_kind: ScoreKind = "probability"
    output_col: str = "calibrated"
    input_format: InputFormat | None = None
    output_format: InputFormat | None = None
    report: str | None = None
    seed: int = 0


@dataclass(frozen=True)
class RerankStrataResult:
    """The strata, where their odds came from, and (on a labelled target) the comparison."""

    seed: int
    smoothing: SlopeSmoothing
    pca: PcaStrata | None
    target_prevalence: Mapping[str, ShiftEstimate] | None
    odds_source: str
    strata: tuple[StratumSummary, ...]
    comparison: RankingComparison | None
    output: str


def run_rerank_strata(request: RerankStrataRequest, *, warn: Warn = ignore) -> RerankStrataResult:
    """Cut or read the strata, fit each stratum's ROC slope, take the odds, re-rank, write."""
    if (request.strata_col is None) == (request.pca_features is None):
        raise UsageError("give --strata-col COL or --pca-features C1,C2,... (one of them)")
    if request.prevalence_file is not None and request.estimate_target_prevalence:
        raise UsageError("give --prevalence-file or --estimate-target-prevalence, not both")
    check_paths(
        inputs=[request.reference, request.target, request.prevalence_file],
        table_output=request.output,
        output_format=request.output_format,
        files=[request.report],
    )
    kind = request.score_kind
    ref = io.read_table(request.reference, input_format=request.input_format)
    tgt = io.read_table(
        request.target,
        input_format=request.input_format,
        typed=io.typed_output(request.output or "-", request.output_format),
    )
    ref_scores = ref.scores(request.score_col, kind=kind)
    ref_labels = ref.labels(request.label_col, positive_label=request.positive_label)
    ref_weights = ref.weights(request.weight_col)
    tgt_scores = tgt.scores(request.score_col, kind=kind)
    added: dict[str, object] = {}

    pca: PcaStrata | None = None
    if request.pca_features is not None:
        pca = _pca_strata(ref, tgt, request.pca_features, request.n_strata, ref_labels, ref_weights)
        ref_strata, tgt_strata = pca.reference_strata, pca.target_strata
        added["pca_stratum"] = tgt_strata
    else:
        ref_strata = ref.text(str(request.strata_col), option="--strata-col")
        tgt_strata = tgt.text(str(request.strata_col), option="--strata-col")

    with ref.context():
        slopes = fit_strata(
            ref_scores,
            ref_labels,
            ref_strata,
            sample_weight=ref_weights,
            smoothing=request.smoothing,
        )
    estimates: dict[str, ShiftEstimate] | None = None
    if request.prevalence_file is not None:
        odds = odds_from_prevalence(read_prevalence_file(request.prevalence_file))
        odds_source = "prevalence file"
    elif request.estimate_target_prevalence:
        estimates = estimate_stratum_prevalence(
            ref_scores,
            ref_labels,
            ref_strata,
            tgt_scores,
            tgt_strata,
            reference_weight=ref_weights,
            score_kind=kind,
            seed=request.seed,
        )
        for stratum, estimate in estimates.items():
            for warning in estimate.warnings:
                warn(f"stratum '{stratum}': {warning}")
        odds = odds_from_prevalence(_bounded(estimates, warn))
        odds_source = "estimated on the target"
    else:
        odds = stratum_odds(ref_labels, ref_strata, sample_weight=ref_weights)
        odds_source = "reference"
    result = rerank(tgt_scores, tgt_strata, slopes, odds)
    comparison = None
    if tgt.has_column(request.label_col):
        comparison = compare_rankings(
            tgt.labels(request.label_col, positive_label=request.positive_label),
            tgt_scores,
            result.rerank_score,
            sample_weight=tgt.weights(request.weight_col),
        )
    added.update(
        {
            "rerank_score": result.rerank_score,
            request.output_col: result.calibrated,
            "rerank_rank": rerank_rank(result.rerank_score, tgt_scores),
        }
    )
    destination = data_destination(request.output)
    io.write_table(
        tgt.with_columns(added), destination, output_format_override=request.output_format
    )
    return RerankStrataResult(
        seed=request.seed,
        smoothing=request.smoothing,
        pca=pca,
        target_prevalence=estimates,
        odds_source=odds_source,
        strata=summarise_strata(slopes, odds, tgt_strata),
        comparison=comparison,
        output=destination,
    )


def _pca_strata(
    ref: Table,
    tgt: Table,
    features: str,
    n_strata: int,
    ref_labels: FloatArray,
    ref_weights: FloatArray,
) -> PcaStrata:
    """Algorithm 2 wiring: read the feature columns, let the core cut the strata."""
    names = [name.strip() for name in features.split(",") if name.strip()]
    if not names:
        raise UsageError("--pca-features needs at least one column name")
    ref_x: npt.NDArray[np.float64] = np.column_stack(
        [ref.numbers(name, option="--pca-features") for name in names]
    )
    tgt_x: npt.NDArray[np.float64] = np.column_stack(
        [tgt.numbers(name, option="--pca-features") for name in names]
    )
    return pca_strata(
        ref_x,
        tgt_x,
        n_strata=n_strata,
        names=names,
        reference_labels=ref_labels,
        reference_weights=ref_weights,
    )


def _bounded(estimates: Mapping[str, ShiftEstimate], warn: Warn) -> dict[str, float]:
    """Estimated rates as odds need 0 < rate < 1: a stratum estimated at exactly 0 (or 1) is
    kept at 1e-6 (1 - 1e-6), with a warning, so its rows rank last (first) but stay ranked."""
    bounded: dict[str, float] = {}
    for stratum, estimate in estimates.items():
        rate = float(estimate.prevalence)
        kept = bounded_prevalence(rate)
        if kept != rate:
            warn(
                f"stratum '{stratum}': estimated positive rate {rate:g}; using {kept:g} "
                "for its odds"
            )
        bounded[stratum] = kept
    return bounded


def read_prevalence_file(path: str) -> dict[str, float]:
    """``--prevalence-file``: stratum -> population positive rate."""
    table = io.read_table(path)
    names, codes = table.categories("stratum", option="--prevalence-file (column 'stratum')")
    column = "prevalence" if table.has_column("prevalence") else "rate"
    rates = table.numbers(column, option="--prevalence-file (column 'prevalence')")
    if len(names) != table.n_rows:
        raise UsageError(f"{table.name}: each stratum must appear once")
    return {names[code]: float(rates[row]) for row, code in enumerate(codes)}
