"""``calib rerank-strata``: one ranking across strata (Zuo 2021), and its posterior."""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np
import numpy.typing as npt

from calib_cli import io
from calib_cli.core.decisions import bounded_prevalence
from calib_cli.core.pca import (
    DEFAULT_N_STRATA,
    WEAK_DIRECTION_ERROR,
    PCACut,
    PCAScaling,
    PcaStrata,
    pca_strata,
)
from calib_cli.core.shift import ShiftEstimate
from calib_cli.core.strata import (
    RankingComparison,
    StratumSlope,
    StratumSummary,
    compare_rankings,
    compare_rankings_from_counts,
    estimate_stratum_prevalence,
    fit_stratum_slope_from_counts,
    odds_from_prevalence,
    require_strata,
    rerank,
    rerank_coded,
    rerank_rank,
    stratum_aucs,
    stratum_odds_from_counts,
    summarise_strata,
    summarise_strata_counts,
)
from calib_cli.errors import InputError, UsageError
from calib_cli.io import Table
from calib_cli.io.strata_scan import (
    CHUNK_ROWS,
    StratumCells,
    reference_cells,
    reference_cells_of_rows,
    sink_reranked,
    target_strata,
)
from calib_cli.types import (
    DEFAULT_DIALECT,
    CsvDialect,
    Engine,
    FloatArray,
    InputFormat,
    IntArray,
    PlotScale,
    ScoreKind,
    SlopeSmoothing,
    Warn,
    WeightKind,
)
from calib_cli.workflows.common import (
    Progress,
    check_paths,
    check_plot,
    choose_engine,
    data_destination,
    ignore,
    in_dialect,
    refuse_added_columns,
    refuse_clashing_columns,
    refuse_shared_columns,
    require_once_each,
)

#: False-positive rates at which a picture's ROC curves are drawn (``--plot``, labelled
#: target): every 1% of the axis, and 120 steps per five decades down to 1e-5 for the
#: picture's log axis.
ROC_FPRS: tuple[float, ...] = tuple(
    sorted({0.0, 1.0, *np.geomspace(1e-5, 1.0, 121).tolist(), *np.linspace(0.0, 1.0, 101).tolist()})
)


@dataclass(frozen=True)
class RerankStrataRequest:
    """The options of a ``rerank-strata`` run."""

    reference: str
    target: str
    output: str | None = None
    strata_col: str | None = None
    pca_features: str | None = None
    #: ``--n-strata``: None is 3 for ``--pca-cut quantiles`` and 2 for ``sign``
    n_strata: int | None = None
    #: ``--pca-scaling``: None is ``standardize`` (README, "Algorithm 2")
    pca_scaling: PCAScaling | None = None
    #: ``--pca-cut``: None is ``quantiles``
    pca_cut: PCACut | None = None
    smoothing: SlopeSmoothing = "hull"
    prevalence_file: str | None = None
    estimate_target_prevalence: bool = False
    score_col: str = "score"
    label_col: str = "label"
    weight_col: str | None = None
    #: ``--weight-kind``: recorded in the report. The only intervals (the strata's target
    #: prevalences) come from estimate-shift's bootstrap of reference rows, each row keeping
    #: its weight, which is right for importance weights whatever the kind.
    weight_kind: WeightKind = "frequency"
    positive_label: str | None = None
    score_kind: ScoreKind = "probability"
    output_col: str = "calibrated"
    input_format: InputFormat | None = None
    #: ``--separator`` and ``--decimal-comma`` of CSV inputs (and CSV outputs)
    dialect: CsvDialect = DEFAULT_DIALECT
    output_format: InputFormat | None = None
    report: str | None = None
    seed: int = 0
    engine: Engine = "auto"
    #: ``--plot PATH``: ROC curves of a labelled target, else the strata's ROC slopes
    plot: str | None = None
    #: ``--plot-scale`` (None: not given, linear)
    plot_scale: PlotScale | None = None


@dataclass(frozen=True)
class StreamingApproximation:
    """The streaming engine's cells, and its figures' bounds (README, "Streaming").

    Both engines fit each stratum's ROC slopes on the same reference cells of a fine score
    grid (relative width ``2**-mantissa_bits``), so the rows (``rerank_score``, ``calibrated``,
    ``rerank_rank``) are the same bytes in either engine. ``exact_cells`` of the
    ``reference_cells`` hold one distinct score each; a target score inside a cell of several
    scores gets an FPR interpolated between the cells' mean scores (in both engines), within
    ``max_cell_fpr`` of the ROC of the distinct scores (the largest share of a stratum's
    reference negatives in one cell of several scores). What the streaming engine alone
    approximates are report figures: ``stratum_auc_bound`` bounds the error of the strata
    table's ``auc`` (exact in memory); ``auc_raw_bound``/``auc_reranked_bound`` those of the
    comparison (labelled target), whose AUC and TPR come from cells of the raw and of the
    rerank score.
    """

    engine: str
    mantissa_bits: int
    reference_cells: int
    exact_cells: int
    max_cell_fpr: float
    stratum_auc_bound: float
    auc_raw_bound: float | None
    auc_reranked_bound: float | None


@dataclass(frozen=True)
class RerankStrataResult:
    """The strata, where their odds came from, and (on a labelled target) the comparison.

    ``slopes`` are the fitted ROC slopes per stratum; with ``--plot`` and a labelled target,
    ``roc`` is the comparison again at :data:`ROC_FPRS` (for the picture; the report keeps
    ``comparison``'s few rates)."""

    seed: int
    smoothing: SlopeSmoothing
    pca: PcaStrata | None
    target_prevalence: Mapping[str, ShiftEstimate] | None
    odds_source: str
    strata: tuple[StratumSummary, ...]
    comparison: RankingComparison | None
    output: str
    streaming: StreamingApproximation | None = None
    slopes: Mapping[str, StratumSlope] | None = None
    roc: RankingComparison | None = None
    #: what the weights meant (``--weight-kind``; None without ``--weight-col``)
    weight_kind: WeightKind | None = None
    #: the target rows the comparison is on: those with a label, whatever their weight (None
    #: without a comparison)
    comparison_rows: int | None = None


def _added_columns(request: RerankStrataRequest) -> list[str]:
    """The columns appended to the target's rows."""
    return ["rerank_score", request.output_col, "rerank_rank"]


@in_dialect
def run_rerank_strata(
    request: RerankStrataRequest, *, warn: Warn = ignore, progress: Progress = ignore
) -> RerankStrataResult:
    """Cut or read the strata, fit each stratum's ROC slope, take the odds, re-rank, write
    (``progress``: the stage, for a progress display)."""
    if (request.strata_col is None) == (request.pca_features is None):
        raise UsageError("give --strata-col COL or --pca-features C1,C2,... (one of them)")
    if request.prevalence_file is not None and request.estimate_target_prevalence:
        raise UsageError("give --prevalence-file or --estimate-target-prevalence, not both")
    _check_pca_options(request)
    refuse_shared_columns(request)
    if request.engine == "streaming":
        for given, option in (
            (request.pca_features is not None, "--pca-features"),
            (request.estimate_target_prevalence, "--estimate-target-prevalence"),
        ):
            if given:
                raise UsageError(
                    f"--engine streaming does not support {option} yet; use --engine memory"
                )
    check_plot(request.plot, request.plot_scale)
    check_paths(
        inputs=[request.reference, request.target, request.prevalence_file],
        table_output=request.output,
        output_format=request.output_format,
        files=[request.report, request.plot],
        input_format=request.input_format,
        dialect=request.dialect,
        rows_to_stdout=True,
    )
    added_columns = _added_columns(request)
    refuse_added_columns(
        request.target,
        added_columns,
        input_format=request.input_format,
        output=request.output or io.STDIO,
        output_format=request.output_format,
    )
    data_destination(request.output)  # rows on a terminal (no -o): refused before any work
    engine: Engine = "memory"
    if request.pca_features is None and not request.estimate_target_prevalence:
        engine = choose_engine(
            request.engine,
            [request.reference, request.target],
            input_format=request.input_format,
            warn=warn,
        )
    progress(
        f"re-ranking {io.display_name(request.target)} against "
        f"{io.display_name(request.reference)} into "
        f"{io.display_name(request.output or '-', output=True)}"
    )
    if engine == "streaming":
        return _run_streaming(request, warn)
    kind = request.score_kind
    ref = io.read_table(request.reference, input_format=request.input_format)
    tgt = io.read_table(
        request.target,
        input_format=request.input_format,
        typed=io.typed_output(request.output or "-", request.output_format),
    )
    refuse_clashing_columns(tgt.name, tgt.columns, added_columns)  # standard input's, now
    ref_scores = ref.scores(request.score_col, kind=kind)
    ref_labels = ref.labels(request.label_col, positive_label=request.positive_label)
    ref_weights = ref.weights(request.weight_col)
    tgt_scores = tgt.scores(request.score_col, kind=kind)
    tgt_labels = None
    if tgt.has_column(request.label_col):
        tgt_labels = tgt.partial_labels(request.label_col, positive_label=request.positive_label)
        missing = int(np.count_nonzero(np.isnan(tgt_labels)))
        if not _labelled_target(tgt.name, request.label_col, tgt.n_rows, missing, warn):
            tgt_labels = None
    tgt_weight_col = _target_weight_col(
        request, tgt.columns, tgt.name, warn, labelled=tgt_labels is not None
    )
    tgt_weights = tgt.weights(tgt_weight_col)
    added: dict[str, object] = {}

    pca: PcaStrata | None = None
    if request.pca_features is not None:
        pca = _pca_strata(ref, tgt, request, ref_weights, tgt_weights)
        if pca.weak_component:
            warn(_weak_component_warning(pca))
        if request.n_strata is not None and pca.n_strata < request.n_strata:
            warn(
                f"--n-strata {request.n_strata} made {pca.n_strata} strata: the component's "
                "tied values leave no room for more cut points"
            )
        ref_strata, tgt_strata = pca.reference_strata, pca.target_strata
        added["pca_stratum"] = tgt_strata
    else:
        ref_strata = ref.text(str(request.strata_col), option="--strata-col")
        tgt_strata = tgt.text(str(request.strata_col), option="--strata-col")

    ref_name = io.display_name(request.reference)
    with ref.context():
        # exact within-stratum AUCs for the table (and a stratum lacking a class refused)
        aucs = stratum_aucs(ref_scores, ref_labels, ref_strata, sample_weight=ref_weights)
        cells = reference_cells_of_rows(
            ref_scores,
            ref_labels,
            ref_strata,
            ref_weights,
            score_kind=kind,
            mantissa_bits=REFERENCE_MANTISSA_BITS,
        )
    slopes = {
        name: replace(slope, auc=aucs[name])
        for name, slope in _fit_cells(cells, request.smoothing, ref_name).items()
    }
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
        with io.naming(ref_name):
            odds = _reference_odds(cells)
        odds_source = "reference"
    with io.naming(tgt.name):  # the target's strata, against the reference's, named
        result = rerank(tgt_scores, tgt_strata, slopes, odds, reference_name=ref_name)
    comparison = roc = None
    comparison_rows: int | None = None
    if tgt_labels is not None:
        # the rows whose label is missing (late labels) are left out of the comparison
        known = ~np.isnan(tgt_labels)
        y, w = tgt_labels[known], tgt_weights[known]
        raw, reranked = tgt_scores[known], result.rerank_score[known]
        positives = float(np.sum(w[y == 1.0]))
        negatives = float(np.sum(w[y == 0.0]))
        if _both_classes(positives, negatives, io.display_name(request.target), warn):
            comparison = compare_rankings(y, raw, reranked, sample_weight=w)
            comparison_rows = int(y.size)
            if request.plot is not None:
                roc = compare_rankings(y, raw, reranked, sample_weight=w, fprs=ROC_FPRS)
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
    strata = summarise_strata(slopes, odds, tgt_strata)
    _warn_backwards(strata, warn)
    return RerankStrataResult(
        seed=request.seed,
        smoothing=request.smoothing,
        pca=pca,
        target_prevalence=estimates,
        odds_source=odds_source,
        strata=strata,
        comparison=comparison,
        output=destination,
        slopes=slopes,
        roc=roc,
        weight_kind=request.weight_kind if request.weight_col is not None else None,
        comparison_rows=comparison_rows,
    )


#: ``--pca-scaling`` when not given: scale-free, safe for features in different units; its
#: failure on uncorrelated features is detected and warned (README, "Algorithm 2").
DEFAULT_PCA_SCALING: PCAScaling = "standardize"
#: ``--pca-cut`` when not given.
DEFAULT_PCA_CUT: PCACut = "quantiles"


def _warn_backwards(strata: Sequence[StratumSummary], warn: Warn) -> None:
    """Say when a stratum's reference scores rank its labels backwards (AUC below 0.5): its
    ROC slopes then fall as the score rises, the usual sign of flipped labels."""
    for summary in strata:
        if summary.auc < 0.5:
            warn(
                f"stratum '{summary.stratum}': the reference scores rank its labels backwards "
                f"(AUC {summary.auc:.3f}); are the labels flipped (--positive-label)?"
            )


def _labelled_target(name: str, column: str, rows: int, missing: int, warn: Warn) -> bool:
    """Whether a target with a label column counts as labelled, by one rule for both engines.

    Labels arrive late: a target's latest rows often have none yet. Its labels serve only to
    compare the rankings, so the rows without one are left out of the comparison (with a
    warning), and a column holding no label at all is a target without labels (with a
    warning)."""
    if rows and missing == rows:
        warn(io.unlabelled_target_message(name, column, rows))
        return False
    if missing:
        warn(
            f"{name}: {missing:,} of {rows:,} rows have no label: rankings compared on the "
            f"{rows - missing:,} labelled rows"
        )
    return True


def _both_classes(positives: float, negatives: float, name: str, warn: Warn) -> bool:
    """Whether a labelled target holds both classes, which the comparison of rankings needs;
    else a warning says it is left out. A day without a fraud is a normal batch: its rows
    are re-ranked all the same."""
    if positives > 0.0 and negatives > 0.0:
        return True
    missing = "positive" if positives <= 0.0 else "negative"
    warn(
        f"{name}: the target's labels hold no {missing} row (with positive weight): "
        "no comparison of the rankings (its AUC and TPRs need both classes)"
    )
    return False


def _check_pca_options(request: RerankStrataRequest) -> None:
    """The PCA options apply only with --pca-features; the sign cut makes two strata."""
    given = [
        option
        for option, value in (
            ("--n-strata", request.n_strata),
            ("--pca-scaling", request.pca_scaling),
            ("--pca-cut", request.pca_cut),
        )
        if value is not None
    ]
    if request.pca_features is None and given:
        raise UsageError(f"{given[0]} applies only with --pca-features")
    if request.pca_features is not None:
        _pca_names(request.pca_features)
    if request.pca_cut == "sign" and request.n_strata not in (None, 2):
        raise UsageError(
            f"--pca-cut sign makes 2 strata (component <= 0 and > 0); --n-strata "
            f"{request.n_strata} needs --pca-cut quantiles"
        )


def _pca_names(features: str) -> list[str]:
    """The columns of ``--pca-features C1,C2,...``: at least one, each named once (exit 2)."""
    names = [name.strip() for name in features.split(",") if name.strip()]
    if not names:
        raise UsageError("--pca-features needs at least one column name")
    twice = sorted({name for name in names if names.count(name) > 1})
    if twice:
        raise UsageError(
            f"--pca-features names {', '.join(repr(n) for n in twice)} more than once; "
            "name each feature column once"
        )
    return names


def _weak_component_warning(pca: PcaStrata) -> str:
    """The one-line warning of :func:`calib_cli.core.pca.weak_first_component`."""
    k = len(pca.features)
    hint = (
        "if the features share one scale (e.g. outputs of an earlier PCA) try "
        "--pca-scaling center; else choose correlated features or --strata-col"
        if pca.scaling == "standardize"
        else "choose correlated features or --strata-col"
    )
    error = pca.direction_error
    shown = "unbounded" if math.isinf(error) else f"{error:.2f} rad"
    return (
        f"the first principal component ({pca.scaling}) of {k} features is close to an "
        f"arbitrary direction: its direction's standard error is {shown}, above "
        f"{WEAK_DIRECTION_ERROR:g} (it explains {pca.explained_variance_ratio:.1%} of the "
        f"variance; uncorrelated features give about 1/k = {1 / k:.1%}), so the strata follow "
        f"noise; {hint}"
    )


def _target_weight_col(
    request: RerankStrataRequest,
    columns: Sequence[str],
    name: str,
    warn: Warn,
    *,
    labelled: bool,
) -> str | None:
    """``--weight-col`` weighs the target's rows where the target has the column. A population
    file often has none (the reference, a sample of ``resample --weight-col-out``, has): its
    rows then weigh 1 in the strata and the comparison, with a warning where they weigh in
    either (``--pca-features``, or a ``labelled`` target). A name that is nobody's column is
    refused by the reference, which needs it."""
    weight_col = request.weight_col
    if weight_col is None or weight_col in columns:
        return weight_col
    if request.pca_features is not None or labelled:
        warn(
            f"{name} has no column '{weight_col}' (--weight-col): its rows weigh 1 in the "
            "strata and the comparison"
        )
    return None


def _pca_strata(
    ref: Table,
    tgt: Table,
    request: RerankStrataRequest,
    ref_weights: FloatArray,
    tgt_weights: FloatArray,
) -> PcaStrata:
    """Algorithm 2 wiring: read the feature columns, let the core cut the strata (weighing
    the pooled rows as the reference and the target weigh them)."""
    ref_labels = ref.labels(request.label_col, positive_label=request.positive_label)
    names = _pca_names(str(request.pca_features))
    ref_x: npt.NDArray[np.float64] = np.column_stack(
        [ref.numbers(name, option="--pca-features") for name in names]
    )
    tgt_x: npt.NDArray[np.float64] = np.column_stack(
        [tgt.numbers(name, option="--pca-features") for name in names]
    )
    cut = request.pca_cut or DEFAULT_PCA_CUT
    default_n = 2 if cut == "sign" else DEFAULT_N_STRATA
    return pca_strata(
        ref_x,
        tgt_x,
        n_strata=default_n if request.n_strata is None else request.n_strata,
        names=names,
        reference_labels=ref_labels,
        reference_weights=ref_weights,
        target_weights=tgt_weights,
        weight_kind=request.weight_kind,
        scaling=request.pca_scaling or DEFAULT_PCA_SCALING,
        cut=cut,
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
    require_once_each(table.name, names, codes)
    return {names[code]: float(rates[row]) for row, code in enumerate(codes)}


#: Mantissa bits of the reference's score cells, on which both engines fit the slopes (the
#: summaries' default grid: relative width 2**-12).
REFERENCE_MANTISSA_BITS = 12
#: Target rows ranked in memory at once by the streaming engine (the rest wait on disk).
STREAMING_CHUNK_ROWS = CHUNK_ROWS


def _run_streaming(request: RerankStrataRequest, warn: Warn) -> RerankStrataResult:
    """The streaming engine: the reference as (stratum, score cell) sums, the slopes fitted on
    them as in memory (:func:`_fit_cells`), the target mapped batch by batch and ranked exactly
    through chunks on disk (:mod:`calib_cli.io.strata_scan`)."""
    strata_col = str(request.strata_col)
    kind = request.score_kind
    ref_lazy, _ = io.scan_table(request.reference, input_format=request.input_format)
    ref_name = io.display_name(request.reference)
    cells = reference_cells(
        ref_lazy,
        name=ref_name,
        score_col=request.score_col,
        label_col=request.label_col,
        weight_col=request.weight_col,
        positive_label=request.positive_label,
        strata_col=strata_col,
        score_kind=kind,
        mantissa_bits=REFERENCE_MANTISSA_BITS,
    )
    slopes = _fit_cells(cells, request.smoothing, ref_name)
    if request.prevalence_file is not None:
        odds = odds_from_prevalence(read_prevalence_file(request.prevalence_file))
        odds_source = "prevalence file"
    else:
        with io.naming(ref_name):
            odds = _reference_odds(cells)
        odds_source = "reference"
    tgt_lazy, _ = io.scan_table(
        request.target,
        input_format=request.input_format,
        typed=io.typed_output(request.output or "-", request.output_format),
    )
    tgt_name = io.display_name(request.target)
    tgt_columns = tgt_lazy.collect_schema().names()
    target = target_strata(
        tgt_lazy,
        name=tgt_name,
        score_col=request.score_col,
        strata_col=strata_col,
        score_kind=kind,
        label_col=request.label_col,
        positive_label=request.positive_label,
        # a target without the column: its rows weigh 1 (_target_weight_col)
        weight_col=request.weight_col if request.weight_col in tgt_columns else None,
    )
    labelled = target.labelled
    if request.label_col in tgt_columns:
        labelled = _labelled_target(
            tgt_name, request.label_col, target.rows, target.missing_labels, warn
        )
    tgt_weight_col = _target_weight_col(request, tgt_columns, tgt_name, warn, labelled=labelled)
    with io.naming(tgt_name):
        require_strata(target.strata, slopes, odds, reference_name=ref_name)
    clash = [c for c in _added_columns(request) if c in target.columns]
    if clash:
        raise UsageError(
            f"{tgt_name} already has a column '{clash[0]}'; choose another output name"
        )
    names = list(target.strata)
    fits = [slopes[name] for name in names]
    stratum_odds_list = [odds[name] for name in names]

    def rerank_map(scores: FloatArray, codes: IntArray) -> tuple[FloatArray, FloatArray]:
        result = rerank_coded(scores, codes, fits, stratum_odds_list)
        return result.rerank_score, result.calibrated

    destination = data_destination(request.output)
    counts = sink_reranked(
        tgt_lazy,
        name=tgt_name,
        destination=destination,
        output_format=request.output_format,
        score_col=request.score_col,
        strata_col=strata_col,
        score_kind=kind,
        codes={name: code for code, name in enumerate(names)},
        rerank_map=rerank_map,
        rank_rows=rerank_rank,
        columns=("rerank_score", request.output_col, "rerank_rank"),
        label_col=request.label_col if labelled else None,
        positive_label=request.positive_label,
        weight_col=tgt_weight_col,
        chunk_rows=STREAMING_CHUNK_ROWS,
        mantissa_bits=REFERENCE_MANTISSA_BITS,
    )
    comparison = roc = None
    comparison_rows: int | None = None
    raw_bound = reranked_bound = None
    if counts is not None and _both_classes(
        float(np.sum(counts.raw_positives)), float(np.sum(counts.raw_negatives)), tgt_name, warn
    ):
        ranked = (
            counts.raw_positives,
            counts.raw_negatives,
            counts.reranked_positives,
            counts.reranked_negatives,
        )
        comparison_rows = target.rows - target.missing_labels
        with io.naming(tgt_name):
            comparison, raw_bound, reranked_bound = compare_rankings_from_counts(*ranked)
            if request.plot is not None:
                roc = compare_rankings_from_counts(*ranked, fprs=ROC_FPRS)[0]
    strata = summarise_strata_counts(slopes, odds, target.strata)
    _warn_backwards(strata, warn)
    return RerankStrataResult(
        seed=request.seed,
        smoothing=request.smoothing,
        pca=None,
        target_prevalence=None,
        odds_source=odds_source,
        strata=strata,
        comparison=comparison,
        output=destination,
        streaming=_approximation(cells, raw_bound, reranked_bound),
        slopes=slopes,
        roc=roc,
        weight_kind=request.weight_kind if request.weight_col is not None else None,
        comparison_rows=comparison_rows,
    )


def _fit_cells(
    cells: Sequence[StratumCells], smoothing: SlopeSmoothing, name: str
) -> dict[str, StratumSlope]:
    """Each stratum's ROC slopes fitted on its reference cells: the fit of both engines, so
    that they give the same slopes, rows and ranks whatever the reference's size."""
    slopes: dict[str, StratumSlope] = {}
    for stratum in cells:
        with io.naming(name), _stratum_context(stratum.stratum):
            slopes[stratum.stratum] = fit_stratum_slope_from_counts(
                stratum.thresholds,
                stratum.positives,
                stratum.negatives,
                rows=stratum.rows,
                smoothing=smoothing,
            )
    return slopes


def _reference_odds(cells: Sequence[StratumCells]) -> dict[str, float]:
    """Each stratum's odds from the weighted classes of its cells (the same sums, so the same
    bits, in both engines)."""
    return stratum_odds_from_counts(
        {c.stratum: float(c.positives.sum()) for c in cells},
        {c.stratum: float(c.negatives.sum()) for c in cells},
    )


def _approximation(
    cells: tuple[StratumCells, ...], raw_bound: float | None, reranked_bound: float | None
) -> StreamingApproximation:
    """The bounds of :class:`StreamingApproximation` from the reference cells."""
    max_fpr = 0.0
    auc_bound = 0.0
    for stratum in cells:
        loose = ~stratum.tied
        neg_total = float(stratum.negatives.sum())
        pos_total = float(stratum.positives.sum())
        if loose.any():
            max_fpr = max(max_fpr, float(stratum.negatives[loose].max()) / neg_total)
        auc_bound = max(
            auc_bound,
            float(np.sum(stratum.positives[loose] * stratum.negatives[loose]))
            / (2.0 * pos_total * neg_total),
        )
    return StreamingApproximation(
        engine="streaming",
        mantissa_bits=REFERENCE_MANTISSA_BITS,
        reference_cells=sum(c.thresholds.size for c in cells),
        exact_cells=sum(int(c.tied.sum()) for c in cells),
        max_cell_fpr=max_fpr,
        stratum_auc_bound=auc_bound,
        auc_raw_bound=raw_bound,
        auc_reranked_bound=reranked_bound,
    )


@contextlib.contextmanager
def _stratum_context(stratum: str) -> Iterator[None]:
    try:
        yield
    except InputError as error:
        raise InputError(f"stratum '{stratum}': {error}") from None
