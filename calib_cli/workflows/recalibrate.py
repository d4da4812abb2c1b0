"""``calib recalibrate``: a prior correction, a fitted map, or both, applied and saved."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, cast

import numpy as np

from calib_cli import io
from calib_cli.artifacts import (
    fitted_score_kind,
    load_artifact,
    prior_from_sampling,
    provenance,
    save_artifact,
    steps_artifact,
    steps_of,
)
from calib_cli.core.cells import (
    CellSums,
    cell_facts,
    choose_method_on_cells,
    concat_cells,
    fit_on_cells,
)
from calib_cli.core.chain import (
    ChainFit,
    PriorParams,
    Step,
    Strata,
    apply_chain,
    apply_step,
    cross_fit_chain,
    fit_chain,
    fitted_scores_name,
)
from calib_cli.core.effects import AUC_CHANGE_TOLERANCE, auc_change, recalibration_effect
from calib_cli.core.fit_support import (
    FitFacts,
    below_minimum,
    class_rows_text,
    min_class_rows,
    require_fit_support,
    supported_methods,
)
from calib_cli.core.metrics import CalibrationEffect, EffectFigures
from calib_cli.core.platt import PlattParams
from calib_cli.core.prior import base_rate_looks_sampled, prior_shift_log_odds
from calib_cli.core.selection import (
    PROBABILITY_ONLY,
    CalibratorParams,
    FoldShortfall,
    FoldSupportError,
    MethodChoice,
)
from calib_cli.errors import InputError, UsageError
from calib_cli.io import InvalidRows, Table
from calib_cli.io.stream_map import (
    BatchMap,
    StreamInput,
    scan_input,
    stream_calibrated,
    summarize_for_fit,
)
from calib_cli.summaries import ScoreSummary, reliability_from_summary
from calib_cli.types import (
    DEFAULT_DIALECT,
    CalibrationMethod,
    CsvDialect,
    Engine,
    FitData,
    FittedMethod,
    FloatArray,
    InputFormat,
    IntArray,
    OnInvalid,
    ScoreKind,
    Warn,
    WeightKind,
)
from calib_cli.workflows.common import (
    Progress,
    check_invalid_options,
    check_paths,
    choose_engine,
    data_destination,
    ignore,
    in_dialect,
    read_scored_table,
    refuse_row_options_without_rows,
    refuse_row_reading_options,
    refuse_shared_columns,
    require_column_name,
    warn_dropped,
    whole_option,
)
from calib_cli.workflows.histogram_stream import (
    HistogramStreamFit,
    fit_histogram_streaming,
    fit_histogram_summary,
)
from calib_cli.workflows.isotonic_stream import (
    ISOTONIC_MANTISSA_BITS,
    IsotonicStreamFit,
    OpenCells,
    fit_isotonic_streaming,
    fit_isotonic_summary,
)
from calib_cli.workflows.summary_paths import expand_summary_paths

ISOTONIC_EPS = 1e-6
#: ``--folds``' default: the cross-validation folds of ``auto`` on rows.
AUTO_FOLDS = 5
#: The grid of the summary a streaming fit is made on, by method. Platt and beta move rows
#: to a point inside their cell, which changes the loss to second order in its width: held-out
#: log loss within 3e-11 of the in-memory fit at 12 bits (200,000 rows, README "Out of
#: core"). The histogram's edges cut cells, so a summary file must be on the finer grid (1.5e-5
#: at 12 bits, below 1e-6 at 20); the streaming fit instead reads again the cells its edges fall
#: in (STREAM_FIT_BITS). Isotonic starts on 12 bits and is made exact by refinement passes
#: (:mod:`calib_cli.workflows.isotonic_stream`).
FIT_MANTISSA_BITS: dict[str, int] = {
    "platt": 12,
    "beta": 12,
    "histogram": 20,
    "isotonic": ISOTONIC_MANTISSA_BITS,
}
#: The grid of the summary the streaming engine fits on, by method: the histogram's 12-bit
#: summary is made exact by reading again the cells its edges fall in
#: (:mod:`calib_cli.workflows.histogram_stream`), where a summary file cannot be read again.
STREAM_FIT_BITS: dict[str, int] = {**FIT_MANTISSA_BITS, "histogram": 12}
#: The clipping of the summary's logits: Platt's and beta's own ``eps``.
FIT_EPS = 1e-12
#: The grid ``auto``'s cross-validation is run on with the streaming engine: each class of a
#: cell is scored at its mean, the rows' log loss within a bound the comparison reports
#: (1-2e-5 at 12 bits on 1e7-1e8 rows: 1e-4 of the log loss); the chosen method is then fitted
#: on its own grid.
AUTO_MANTISSA_BITS = 12
#: The most ``--fold-col`` groups cross-validation takes (each fold's training part is the
#: other groups' cells: the work grows with the square of the groups).
MAX_FOLD_GROUPS = 100


def _summary_provenance(
    on_summary: bool,
    method: str,
    isotonic: IsotonicStreamFit | None = None,
    choice: MethodChoice | None = None,
    histogram: HistogramStreamFit | None = None,
    weight_col: str | None = None,
) -> dict[str, Any]:
    """``fitted_on.engine`` of a fit made on a summary: the engine and its grid (for the
    isotonic fit, exact by refinement: its passes and the cells it resolved; for a method
    ``auto`` chose, how the comparison was made)."""
    if not on_summary:
        return {}
    grid = {"kind": "relative-tails", "mantissa_bits": STREAM_FIT_BITS[method]}
    engine: dict[str, Any] = {"kind": "streaming", "fitted_on": "summary", "grid": grid}
    if histogram is not None:
        engine |= {
            # the edges and bins of the rows; with weights, their cumulative sums in another
            # order can round a k/n crossing that falls exactly on a cell's boundary otherwise
            "exact": weight_col is None,
            "refinement_passes": histogram.refinement_passes,
            "cells": histogram.cells,
            "resolved_cells": histogram.resolved_cells,
        }
    if choice is not None:
        engine["chosen_by"] = {
            "method": "auto",
            "folds": choice.folds,
            "n_folds": choice.n_folds,
            "grid": {"kind": "relative-tails", "mantissa_bits": AUTO_MANTISSA_BITS},
        }
    if isotonic is not None:
        engine |= {
            "exact": True,
            "refinement_passes": isotonic.refinement_passes,
            "cells": isotonic.cells,
            "resolved_cells": isotonic.resolved_cells,
            "resolved_scores": isotonic.resolved_scores,
        }
    return {"engine": engine}


HISTOGRAM_BINS = 10
FITTED_METHODS: tuple[FittedMethod, ...] = ("platt", "isotonic", "beta", "histogram")
METHOD_OF_OPTION = {
    "--eps": "isotonic",
    "--strict": "isotonic",
    "--target-smoothing": "platt",
    "--bins": "histogram",
}


@dataclass(frozen=True)
class RecalibrateRequest:
    """The options of a ``recalibrate`` run."""

    file: str | None = None
    output: str | None = None
    method: CalibrationMethod | None = None
    sampling_record: str | None = None
    negative_rate: float | None = None
    positive_rate: float | None = None
    train_prior: float | None = None
    target_prior: float | None = None
    fit: str | None = None
    model: str | None = None
    cross_fit_folds: int | None = None
    save_model: str | None = None
    fit_data: FitData = "population"
    score_col: str = "score"
    label_col: str = "label"
    weight_col: str | None = None
    #: ``--weight-kind``: recorded in the report (recalibrate reports no interval or test)
    weight_kind: WeightKind = "frequency"
    positive_label: str | None = None
    strata_col: str | None = None
    score_kind: ScoreKind = "probability"
    output_col: str = "calibrated"
    eps: float | None = None
    strict: bool = False
    target_smoothing: bool = False
    bins: int | None = None
    #: ``--folds`` (None: not given, :data:`AUTO_FOLDS`)
    folds: int | None = None
    input_format: InputFormat | None = None
    #: ``--separator`` and ``--decimal-comma`` of CSV inputs (and CSV outputs)
    dialect: CsvDialect = DEFAULT_DIALECT
    output_format: InputFormat | None = None
    on_invalid: OnInvalid = "error"
    #: ``--max-invalid``: a fraction of the rows below 1, else a count (None: 1%)
    max_invalid: float | None = None
    report: str | None = None
    seed: int = 0
    engine: Engine = "auto"
    #: ``--fit-summary``: summary files (``calib summarize``, or a SQL engine's) to fit on,
    #: merged, in place of ``fit`` rows
    fit_summaries: tuple[str, ...] = ()
    #: ``--refine-summary``: summaries on finer grids of the rows of cells an isotonic fit on
    #: ``fit_summaries`` left open (the queries ``refine_sql`` wrote, run in the engine)
    refine_summaries: tuple[str, ...] = ()
    #: ``--refine-sql PATH``: where to write the query that summarises the open cells' rows
    #: on a finer grid, for ``refine_dialect`` and ``refine_table``
    refine_sql: str | None = None
    refine_dialect: str | None = None
    refine_table: str | None = None
    #: ``--fold-col``: with ``fit_summaries`` and ``auto``, the summaries' ``--by`` column
    #: whose groups are the cross-validation folds
    fold_col: str | None = None

    @property
    def prior_given(self) -> bool:
        """Whether a prior correction was asked for (a record, rates or priors)."""
        given = (self.sampling_record, self.negative_rate, self.train_prior, self.target_prior)
        return any(value is not None for value in given)

    @property
    def auto_folds(self) -> int:
        """``--folds``, else :data:`AUTO_FOLDS`."""
        return AUTO_FOLDS if self.folds is None else self.folds


@dataclass(frozen=True)
class RecalibrationPlan:
    """What a recalibrate call does, checked before any file is read."""

    method: str  # "prior", "model", a fitted method, or "auto"
    cross_fit: bool


@dataclass(frozen=True)
class FileEffect:
    """The effect of the calibration on one file (label figures only when it had labels)."""

    file: str
    effect: CalibrationEffect
    has_labels: bool


@dataclass(frozen=True)
class RecalibrateResult:
    """The steps applied (and saved), the ``auto`` comparison, the effect on each file."""

    method: str
    seed: int
    steps: tuple[Step, ...]
    choice: MethodChoice | None
    fit: FileEffect | None
    cross_fit: int | None
    input: FileEffect | None
    saved_model: str | None
    output: str | None
    #: with ``--on-invalid drop``: the rows each file read (fit, then input) lost, by reason
    invalid_rows: tuple[InvalidRows, ...] = ()
    #: what the weights meant (``--weight-kind``; None without ``--weight-col``)
    weight_kind: WeightKind | None = None

    @property
    def step_kinds(self) -> tuple[str, ...]:
        return tuple(step.kind for step in self.steps)


def plan_recalibration(request: RecalibrateRequest) -> RecalibrationPlan:
    """Refuse option combinations that do not fit together (exit 2), and name the method."""
    file, fit, model, method = request.file, request.fit, request.model, request.method
    summaries = request.fit_summaries or None
    if file is None:
        if (fit is None and summaries is None) or request.save_model is None:
            raise UsageError(
                "give an INPUT file to calibrate (or --fit or --fit-summary with --save-model)"
            )
        if request.output is not None:
            raise UsageError("-o needs an INPUT file to calibrate")
        refuse_row_options_without_rows(
            False,
            output_col=request.output_col,
            output_format=request.output_format,
            why="no INPUT file",
        )
        if fit is None:
            refuse_row_reading_options(
                request,
                "this call reads only --fit-summary summaries (no INPUT file)",
                on_invalid=request.on_invalid,
            )
    sources = [
        name
        for name, given in (
            ("--fit", fit),
            ("--fit-summary", summaries),
            ("--model", model),
            ("--cross-fit", request.cross_fit_folds),
        )
        if given is not None
    ]
    if len(sources) > 1:
        raise UsageError(
            f"give one of --fit, --fit-summary, --model, --cross-fit (got {' and '.join(sources)})"
        )
    if request.score_kind != "probability" and method in PROBABILITY_ONLY:
        # before any work: found while fitting, it was exit 65 after reading the whole file
        raise UsageError(
            f"--method {method} maps probabilities, and --score-kind {request.score_kind} "
            "scores are not: use --method platt (its map takes logits and margins), or turn "
            "the scores into probabilities first (expit of a logit)"
        )
    if summaries is not None:
        _plan_summary_fit(request)
    elif request.fold_col is not None:
        raise UsageError(
            "--fold-col names the folds of --fit-summary summaries (their --by column) for "
            "--method auto; --fit FILE deals its own folds (--folds)"
        )
    _plan_refinement(request)
    if model is not None:
        if method is not None:
            raise UsageError("--model already holds its method; drop --method")
        if request.save_model is not None:  # it would record this call's file as the fit's
            raise UsageError(
                "--model applies a saved calibrator and fits nothing, so --save-model would "
                "save the same one as fitted on this call's file: drop --save-model (to copy "
                "the calibrator, copy its file)"
            )
        if request.prior_given:
            raise UsageError(
                "--model cannot take a prior correction too: save both in one "
                "chain with --fit ... --sampling-record ... --save-model"
            )
        return RecalibrationPlan(method="model", cross_fit=False)
    if fit is not None or summaries is not None or request.cross_fit_folds is not None:
        if method == "prior":
            raise UsageError(
                "--method prior fits nothing; drop --fit/--fit-summary/--cross-fit, or choose "
                "platt, isotonic, beta, histogram or auto"
            )
        return RecalibrationPlan(
            method=method or "auto", cross_fit=request.cross_fit_folds is not None
        )
    if method not in (None, "prior"):
        raise UsageError(f"--method {method} needs --fit FILE, --fit-summary S or --cross-fit K")
    if not request.prior_given:
        raise UsageError(
            "nothing to do: give --sampling-record, --negative-rate, "
            "--train-prior/--target-prior, --fit, --model or --cross-fit"
        )
    return RecalibrationPlan(method="prior", cross_fit=False)


def _plan_refinement(request: RecalibrateRequest) -> None:
    """--refine-summary and --refine-sql go with an isotonic or histogram --fit-summary;
    --refine-sql needs --dialect and --table, which go with it only (exit 2)."""
    refining = bool(request.refine_summaries) or request.refine_sql is not None
    if refining and (not request.fit_summaries or request.method not in ("isotonic", "histogram")):
        raise UsageError(
            "--refine-summary and --refine-sql refine an isotonic or histogram fit on "
            "summaries: use them with --fit-summary and --method isotonic or histogram"
        )
    sql_options = (request.refine_dialect, request.refine_table)
    if request.refine_sql is None and any(o is not None for o in sql_options):
        raise UsageError("--dialect and --table go with --refine-sql")
    # an empty --table names no table (as --emit-sql's check)
    missing = [o for o, v in zip(("--dialect", "--table"), sql_options, strict=True) if not v]
    if request.refine_sql is not None and missing:
        raise UsageError(f"--refine-sql needs {' and '.join(missing)} (the table summarised)")


def _plan_summary_fit(request: RecalibrateRequest) -> None:
    """What a fit on summaries cannot do, refused before any file is read (exit 2)."""
    if request.method in (None, "auto") and request.fold_col is None:
        raise UsageError(
            "--fit-summary with --method auto needs folds: summarise with --by a fold column "
            "(e.g. pmod(xxhash64(id), 5) in Spark, hash(id) % 5 in DuckDB) and name it with "
            "--fold-col; or name the method (platt, isotonic, beta, histogram), or fit with "
            "--fit FILE --method auto (a big file streams)"
        )
    if request.fold_col is not None and request.method not in (None, "auto"):
        raise UsageError(
            f"--fold-col gives --method auto its folds; --method {request.method} needs none"
        )
    if request.score_kind != "probability":
        raise UsageError(
            "--fit-summary fits on summaries of probabilities: --score-kind "
            f"{request.score_kind} scores need --fit FILE"
        )
    if request.prior_given and request.fit_data == "population":
        raise UsageError(
            "--fit-summary with a prior correction needs --fit-data sampled (the map is fitted "
            "on the scores as the summary holds them, the prior correction comes after it); "
            "rows drawn from the population need no prior correction: drop the rates and "
            "fit the map on the summary alone, or use --fit FILE"
        )


def _require_method_for_options(method: str, given: Mapping[str, bool]) -> None:
    """A method's own options are refused with another method (they would have no effect)."""
    for option, is_given in given.items():
        owner = METHOD_OF_OPTION[option]
        if is_given and method not in (owner, "auto"):
            raise UsageError(
                f"{option} applies to --method {owner} (or auto); this call {_doing(method)}"
            )


def _doing(method: str) -> str:
    """What a call of the planned ``method`` does, for the refusal of an option it ignores."""
    return "applies a saved model" if method == "model" else f"uses {method}"


@dataclass(frozen=True)
class _PriorRates:
    """The base rates a prior correction moves between, and how the warning names them."""

    population: float
    sampled: float
    population_name: str
    sampled_name: str


def _prior_rates(request: RecalibrateRequest, record: Any) -> _PriorRates | None:
    """The population and sampled base rates of the prior correction, where known: the
    record's ``fitted_on`` before and after sampling, or --target-prior and --train-prior."""
    if record is not None:
        before = record.fitted_on.get("before", {}).get("base_rate")
        after = record.fitted_on.get("after", {}).get("base_rate")
        if not isinstance(before, float | int) or not isinstance(after, float | int):
            return None
        return _PriorRates(
            population=float(before),
            sampled=float(after),
            population_name="its population rate",
            sampled_name="the sampling record's sampled rate",
        )
    if request.train_prior is not None and request.target_prior is not None:
        return _PriorRates(
            population=request.target_prior,
            sampled=request.train_prior,
            population_name="--target-prior",
            sampled_name="--train-prior",
        )
    return None


def _prior(request: RecalibrateRequest) -> tuple[PriorParams | None, _PriorRates | None]:
    """The prior correction: from a sampling record, or from explicit rates or priors; and
    the base rates it moves between, where known."""
    if request.sampling_record is not None:
        explicit = (
            request.negative_rate,
            request.positive_rate,
            request.train_prior,
            request.target_prior,
        )
        if any(value is not None for value in explicit):
            raise UsageError("give --sampling-record or explicit rates/priors, not both")
        record = load_artifact(request.sampling_record, kinds=("sampling",))
        prior: PriorParams = prior_from_sampling(record)
        return prior, _prior_rates(request, record)
    if not request.prior_given:
        return None, None
    return PriorParams(
        log_odds_shift=prior_shift_log_odds(
            negative_rate=request.negative_rate,
            positive_rate=1.0 if request.positive_rate is None else request.positive_rate,
            train_prior=request.train_prior,
            target_prior=request.target_prior,
        )
    ), _prior_rates(request, None)


class _Run:
    """One recalibrate run: the plan, the options of the fits, and what was found so far."""

    def __init__(self, request: RecalibrateRequest, plan: RecalibrationPlan, warn: Warn) -> None:
        self.request = request
        self.plan = plan
        self.warn = warn
        self.rng = np.random.default_rng(request.seed)
        eps = ISOTONIC_EPS if request.eps is None else request.eps
        self.options: dict[str, dict[str, Any]] = {
            "platt": {"target_smoothing": request.target_smoothing},
            "isotonic": {"strict": request.strict, "eps": eps},
            "histogram": {"n_bins": HISTOGRAM_BINS if request.bins is None else request.bins},
        }
        self.prior: PriorParams | None = None
        self.prior_rates: _PriorRates | None = None
        self.choice: MethodChoice | None = None
        #: with --on-invalid drop: what each file read lost, by reason
        self.invalid_rows: list[InvalidRows] = []
        #: a streaming isotonic fit: how its refinement went (for the saved model)
        self.isotonic_stream: IsotonicStreamFit | None = None
        #: a streaming histogram fit: likewise
        self.histogram_stream: HistogramStreamFit | None = None
        #: a step shifts each stratum by its own prior (rows of two strata can change order)
        self.stratified_prior = False

    def check_fit_rate(self, name: str, positives: float, negatives: float) -> None:
        """Warn when --fit-data population meets fit data whose base rate is the sampled
        rate, not the population's (:func:`~calib_cli.core.prior.base_rate_looks_sampled`)."""
        rates = self.prior_rates
        if rates is None or self.request.fit_data != "population":
            return
        if not base_rate_looks_sampled(
            positives, negatives, population_rate=rates.population, sampled_rate=rates.sampled
        ):
            return
        rate = positives / (positives + negatives)
        self.warn(
            f"{name}: the fit data's base rate ({rate:.4g}) matches {rates.sampled_name} "
            f"({rates.sampled:.4g}), not {rates.population_name} ({rates.population:.4g}): "
            "if these rows were sampled like the training set, use --fit-data sampled"
        )

    def check_fit_labels(self, name: str, labels: FloatArray, weights: FloatArray) -> None:
        """:meth:`check_fit_rate` on labelled rows."""
        if self.prior_rates is not None:
            positives = float(np.sum(weights[labels == 1.0]))
            self.check_fit_rate(name, positives, float(np.sum(weights)) - positives)

    def fit(
        self,
        source: Table,
        scores: FloatArray,
        labels: FloatArray,
        weights: FloatArray,
        strata: Strata | None,
    ) -> ChainFit:
        """Fit the chain on one labelled table (keeping auto's comparison when it chose)."""
        if self.plan.method == "auto" and self.request.folds is not None:
            _check_folds(self.request.folds, labels, source.name, self.warn, option="--folds")
        with source.context():
            fitted = fit_chain(
                scores,
                labels,
                method=cast("FittedMethod", self.plan.method),
                sample_weight=weights,
                prior=self.prior,
                fit_data=self.request.fit_data,
                score_kind=self.request.score_kind,
                strata=strata,
                rng=self.rng,
                n_folds=self.request.auto_folds,
                options=self.options,
            )
        if fitted.choice is not None:
            self.choice = fitted.choice
            positives = float(np.sum(weights[labels == 1.0]))
            compared = [score.method for score in fitted.choice.candidates]
            self.warn_left_out(source.name, compared, positives, float(np.sum(weights)) - positives)
        return fitted

    def warn_left_out(
        self, name: str, compared: Sequence[str], positives: float, negatives: float
    ) -> None:
        """Say which methods ``auto`` left out for want of rows of a class (``compared``:
        the ones the data meet)."""
        if self.request.score_kind != "probability":
            return
        n_bins = self.options["histogram"]["n_bins"]
        left = [m for m in FITTED_METHODS if m not in compared]
        if not left:
            return
        smaller = min(positives, negatives)
        needs = ", ".join(f"{m} needs {min_class_rows(m, n_bins=n_bins)}" for m in left)
        self.warn(
            f"{name}: --method auto compared {', '.join(compared)} only: the smaller "
            f"class has {smaller:g} rows, and {needs}"
        )

    def cross_fit(
        self,
        source: Table,
        method: FittedMethod,
        scores: FloatArray,
        labels: FloatArray,
        weights: FloatArray,
        strata: Strata | None,
        n_folds: int,
    ) -> FloatArray:
        """Out-of-fold probabilities of ``method``, refused before any fold's fit when one
        would have fewer rows of a class than a whole fit needs (:func:`_fold_refusal`)."""
        with source.context():
            try:
                return cross_fit_chain(
                    scores,
                    labels,
                    method=method,
                    sample_weight=weights,
                    prior=self.prior,
                    fit_data=self.request.fit_data,
                    score_kind=self.request.score_kind,
                    strata=strata,
                    rng=self.rng,
                    n_folds=n_folds,
                    options=self.options,
                )
            except FoldSupportError as error:
                raise InputError(_fold_refusal(self, method, error.shortfall)) from None

    def effect(
        self,
        table: Table,
        scores: FloatArray,
        calibrated: FloatArray,
        labels: FloatArray | None,
        weights: FloatArray,
        *,
        cross_fitted: bool = False,
    ) -> FileEffect:
        """The before/after figures of one file, warning when the ranking changed."""
        with io.naming(table.name):
            effect = recalibration_effect(
                labels,
                scores,
                calibrated,
                sample_weight=weights,
                score_kind=self.request.score_kind,
            )
        _warn_auc_change(
            table.name,
            effect,
            self.warn,
            cross_fitted=cross_fitted,
            stratified=self.stratified_prior,
        )
        return FileEffect(file=table.name, effect=effect, has_labels=labels is not None)

    def read(self, path: str, *, typed: bool = False) -> Table:
        request = self.request
        table, invalid = read_scored_table(
            path,
            input_format=request.input_format,
            score_cols=[request.score_col],
            label_col=request.label_col,
            weight_col=request.weight_col,
            positive_label=request.positive_label,
            on_invalid=request.on_invalid,
            score_kind=request.score_kind,
            typed=typed,
            warn=self.warn,
            max_invalid=request.max_invalid,
        )
        if invalid is not None:
            self.invalid_rows.append(invalid)
        return table


@in_dialect
def run_recalibrate(
    request: RecalibrateRequest, *, warn: Warn = ignore, progress: Progress = ignore
) -> RecalibrateResult:
    """Plan, fit or load the steps, apply them, save the model, write the calibrated rows
    (``progress``: each stage, for a progress display)."""
    refuse_shared_columns(request)
    plan = plan_recalibration(request)
    if request.fit_summaries:  # a directory of part files, or a quoted glob
        request = replace(
            request,
            fit_summaries=expand_summary_paths(request.fit_summaries),
            refine_summaries=expand_summary_paths(request.refine_summaries),
        )
    file, kind = request.file, request.score_kind
    check_paths(
        inputs=[
            file,
            request.fit,
            request.model,
            request.sampling_record,
            *request.fit_summaries,
            *request.refine_summaries,
        ],
        table_output=request.output if file is not None else None,
        output_format=request.output_format,
        files=[request.save_model, request.report, request.refine_sql],
        input_format=request.input_format,
        dialect=request.dialect,
        rows_to_stdout=file is not None,
    )
    if request.positive_rate is not None and request.negative_rate is None:
        raise UsageError("--positive-rate goes with --negative-rate (the rates of a sample)")
    _require_method_for_options(
        plan.method,
        {
            "--eps": request.eps is not None,
            "--strict": request.strict,
            "--target-smoothing": request.target_smoothing,
            "--bins": request.bins is not None,
        },
    )
    if request.folds is not None and (plan.method != "auto" or request.fit_summaries):
        raise UsageError(
            "--folds applies to --method auto fitted on rows (--fit FILE, --cross-fit); "
            + (
                "--fit-summary takes its folds from --fold-col"
                if request.fit_summaries and plan.method == "auto"
                else f"this call {_doing(plan.method)}"
            )
            + ": drop --folds"
        )
    if request.fit_data == "sampled" and (
        not request.prior_given or plan.method in ("prior", "model")
    ):
        raise UsageError(
            "--fit-data orders a prior correction and a map fitted on labels, and this call "
            f"{'has no prior correction' if not request.prior_given else 'fits no map'}: "
            "drop --fit-data"
        )
    eps = ISOTONIC_EPS if request.eps is None else request.eps
    if not 0.0 <= eps < 0.5:
        raise UsageError(f"--eps must be in [0, 0.5), got {request.eps}")
    whole_option(request.bins, "--bins", least=1)
    check_invalid_options(request.on_invalid, request.max_invalid)
    if file is not None:  # rows on a terminal (no -o): refused before any work, not after
        data_destination(request.output)
    whole_option(request.folds, "--folds", least=2)
    whole_option(request.cross_fit_folds, "--cross-fit", least=2)
    if file is not None and request.fit is not None and _same_file(file, request.fit):
        warn(
            f"{io.display_name(file)} is both --fit and the INPUT: its rows are calibrated "
            "by a map fitted on them, so the 'after' figures flatter it; --cross-fit K gives "
            "out-of-fold probabilities of one labelled file"
        )
    if file is not None:
        schema = io.column_schema(file, input_format=request.input_format)  # read once
        name = io.display_name(file)
        _check_input_columns(request, name, None if schema is None else list(schema))
        io.check_passthrough_columns(
            schema, request.output or io.STDIO, name=name, output_format=request.output_format
        )
    run = _Run(request, plan, warn)
    run.prior, run.prior_rates = _prior(request)
    prior = run.prior
    steps: tuple[Step, ...] = ()
    if request.model is not None:
        artifact = load_artifact(
            request.model, kinds=("chain", "prior", "platt", "isotonic", "beta", "histogram")
        )
        steps = steps_of(artifact)
        fitted = fitted_score_kind(artifact)
        if isinstance(steps[0], PlattParams) and fitted != request.score_kind:
            # before reading: raw margins read as probabilities fail as "outside [0, 1]"
            raise UsageError(
                f"{request.model} was fitted on {fitted} scores, and this call reads "
                f"{request.score_kind} scores: add --score-kind {fitted}"
            )
        if fitted != request.score_kind:  # a prior applies to either kind: say, do not refuse
            warn(
                f"{request.model} was fitted on {fitted} scores, and this call reads "
                f"{request.score_kind} scores: add --score-kind {fitted} if that is what "
                f"--score-col {request.score_col} holds"
            )
    elif plan.method == "prior":
        if prior is None:
            raise UsageError(
                "--method prior needs --sampling-record, --negative-rate, or "
                "--train-prior with --target-prior"
            )
        steps = (prior,)

    # the strata column is read only when a step is per stratum (a stratified record)
    stratified = [
        s.strata_col for s in (*steps, prior) if isinstance(s, PriorParams) and s.strata_col
    ]
    run.stratified_prior = bool(stratified)
    strata_column = (request.strata_col or stratified[0]) if stratified else None
    if request.strata_col is not None and not stratified:
        raise UsageError(
            "--strata-col names the strata of a per-stratum prior correction (a stratified "
            "--sampling-record or --model), and no step of this calibration is per stratum: "
            "drop --strata-col"
        )

    fit_effect: FileEffect | None = None
    fit_table: Table | None = None
    fit_scan: StreamInput | None = None
    summary_fit: _SummaryFit | None = None
    engines = _engines(request, plan, warn)
    if request.fit is not None:
        progress(f"fitting on {io.display_name(request.fit)}")
    if request.fit_summaries:
        progress(f"fitting on {len(request.fit_summaries)} summary file(s)")
        summary_fit = _fit_summaries(run)
        steps, fit_effect = summary_fit.steps, summary_fit.effect
    elif request.fit is not None and engines.fit == "streaming":
        fit_scan, steps, fit_effect = _stream_fit(run, request.fit, strata_column)
    elif request.fit is not None:
        fit_table = run.read(request.fit)
        fit_scores = fit_table.scores(request.score_col, kind=kind)
        fit_labels = fit_table.labels(request.label_col, positive_label=request.positive_label)
        fit_weights = fit_table.weights(request.weight_col)
        fit_strata = _strata_of(fit_table, strata_column, (run.prior,) if run.prior else ())
        run.check_fit_labels(fit_table.name, fit_labels, fit_weights)
        steps = run.fit(fit_table, fit_scores, fit_labels, fit_weights, fit_strata).steps
        after = apply_chain(steps, fit_scores, score_kind=kind, strata=fit_strata)
        fit_effect = run.effect(fit_table, fit_scores, after, fit_labels, fit_weights)

    input_effect: FileEffect | None = None
    table: Table | None = None
    calibrated: FloatArray | None = None
    streamed: StreamInput | None = None
    if file is not None:
        progress(f"reading {io.display_name(file)}")
    if file is not None and engines.apply == "streaming":
        streamed = _stream_scan(run, file, strata_column, steps)
        _check_input_columns(request, streamed.name, streamed.columns)
    elif file is not None:
        table = run.read(file, typed=io.typed_output(request.output or "-", request.output_format))
        _check_input_columns(request, table.name, table.columns)
        scores = table.scores(request.score_col, kind=kind)
        labels = _optional_labels(table, request, required=plan.cross_fit, warn=warn)
        weights = table.weights(request.weight_col)
        strata = _strata_of(table, strata_column, (*steps, *((run.prior,) if run.prior else ())))
        if plan.cross_fit:
            n_folds = request.cross_fit_folds or request.auto_folds
            _check_folds(n_folds, labels, table.name, warn)
            if labels is None:
                raise InputError(
                    f"{table.name}: --cross-fit needs labels (no column "
                    f"'{request.label_col}'; set --label-col)"
                )
            run.check_fit_labels(table.name, labels, weights)
            # the chain fitted on every row (chosen by cross-validation for auto) is what
            # --save-model keeps; the out-of-fold scores use the same method
            final = run.fit(table, scores, labels, weights, strata)
            steps = final.steps
            method = final.choice.chosen if final.choice else plan.method
            calibrated = run.cross_fit(
                table, cast("FittedMethod", method), scores, labels, weights, strata, n_folds
            )
        else:
            calibrated = apply_chain(steps, scores, score_kind=kind, strata=strata)
        input_effect = run.effect(
            table, scores, calibrated, labels, weights, cross_fitted=plan.cross_fit
        )

    _warn_about_fits(steps, warn)
    if request.save_model is not None:
        source = fit_table if fit_table is not None else table
        labelled = fit_effect or input_effect
        name, rows = (source.name, source.n_rows) if source is not None else ("", 0)
        if fit_scan is not None:
            name, rows = fit_scan.name, fit_scan.rows
        engine_record = _summary_provenance(
            fit_scan is not None,
            run.choice.chosen if run.choice is not None else run.plan.method,
            run.isotonic_stream,
            run.choice,
            run.histogram_stream,
            request.weight_col,
        )
        if summary_fit is not None:
            name, rows, engine_record = summary_fit.name, summary_fit.rows, summary_fit.record
        fitted_on = provenance(
            file=name,
            rows=rows,
            columns={
                "score": request.score_col if summary_fit is None else summary_fit.score_col,
                "label": request.label_col if summary_fit is None else summary_fit.label_col,
                "weight": request.weight_col if summary_fit is None else summary_fit.weight_col,
                "strata": strata_column,
            },
            seed=request.seed,
            score_kind=kind,
            fit_data=request.fit_data if prior is not None else None,
            sampling_record=request.sampling_record,
            **(_label_facts(labelled) if labelled is not None else {}),
            **engine_record,
        )
        save_artifact(request.save_model, steps_artifact(steps, fitted_on))
    destination: str | None = None
    if streamed is not None:
        destination = data_destination(request.output)
        progress(f"calibrating {streamed.name} into {io.display_name(destination, output=True)}")
        input_effect = _stream_apply(run, streamed, steps, destination)
    elif table is not None and calibrated is not None:
        destination = data_destination(request.output)
        progress(f"writing {io.display_name(destination, output=True)}")
        frame = table.with_columns({request.output_col: calibrated})
        io.write_table(frame, destination, output_format_override=request.output_format)
    return RecalibrateResult(
        method=plan.method,
        seed=request.seed,
        steps=steps,
        choice=run.choice,
        fit=fit_effect,
        cross_fit=request.cross_fit_folds if plan.cross_fit else None,
        input=input_effect,
        saved_model=request.save_model,
        output=destination,
        invalid_rows=tuple(run.invalid_rows),
        weight_kind=request.weight_kind if request.weight_col is not None else None,
    )


def _check_input_columns(
    request: RecalibrateRequest, name: str, columns: Sequence[str] | None
) -> None:
    """--output-col must not name a column of the input (the calibrated scores would replace
    it), and a --label-col given (not the default) must name one, even where labels are only
    for the report (a misspelt name would silently drop the before/after figures): checked
    before any work where the columns are known (a file), else once the input is read
    (standard input, gzip), and always before anything is written."""
    require_column_name(request.output_col, "--output-col")
    if columns is None:
        return
    if request.output_col in columns:
        raise UsageError(
            f"{name} already has a column '{request.output_col}'; choose another output name"
        )
    if request.label_col != "label":
        io.require_column(columns, request.label_col, "--label-col", name)


def _same_file(first: str, second: str) -> bool:
    """Whether two paths name one file (standard input is read once, so never twice)."""
    if io.STDIO in (first, second):
        return False
    return Path(first).resolve() == Path(second).resolve()


def _check_folds(
    n_folds: int, labels: FloatArray | None, name: str, warn: Warn, option: str = "--cross-fit"
) -> None:
    """--cross-fit K (and auto's --folds K) needs K rows at least; fewer than K rows of a
    class leaves folds without that class (their maps are then fitted on the other folds
    only)."""
    if labels is None:
        return
    if n_folds > labels.shape[0]:
        raise UsageError(
            f"{option} {n_folds} asks for more folds than {name} has rows ({labels.shape[0]})"
        )
    smaller = int(min((labels == 1).sum(), (labels == 0).sum()))
    if n_folds > smaller:
        warn(
            f"{name}: {option} {n_folds} is more than the {smaller} rows of the "
            "smaller class: some folds hold none of it"
        )


def _fold_refusal(run: _Run, method: FittedMethod, short: FoldShortfall) -> str:
    """Why --cross-fit K is refused and what would pass: the fewest folds that leave every fit
    enough rows (more folds leave each fit more of them), fewer --bins, or a method that needs
    fewer rows, each checked against the short fold's count."""
    n_bins = run.options["histogram"]["n_bins"]
    whose = f"{method}, which --method auto chose," if run.plan.method == "auto" else method
    remedies = []
    if short.fewest_folds is not None:
        remedies.append(
            f"--cross-fit {short.fewest_folds} (the fewest folds that leave every fit enough)"
        )
    if method == "histogram" and not below_minimum(short.rows, min_class_rows("histogram")):
        whole = int(short.rows)  # a sum of weights a rounding below a whole number counts as it
        bins = whole if below_minimum(short.rows, whole + 1) else whole + 1
        remedies.append(f"--bins {bins} or fewer")
    kinds = FITTED_METHODS if run.request.score_kind == "probability" else ("platt",)
    others = [
        m
        for m in kinds
        if m != method and not below_minimum(short.rows, min_class_rows(m, n_bins=n_bins))
    ]
    if others:
        remedies.append(f"another --method ({_either(others)})")
    advice = "fit a map on another labelled file (--fit FILE)"
    if remedies:
        advice = f"use {', or '.join(remedies)}"
    if short.fewest_folds is None:
        advice = f"no number of folds leaves every fit enough; {advice}"
    return (
        f"--cross-fit {short.n_folds}: fold {short.fold}'s map would be fitted on the other "
        f"{short.n_folds - 1} folds, which hold {class_rows_text(short.rows, short.label)}; "
        f"{whose} needs at least {short.needed} rows of each class in every fit: {advice}"
    )


def _either(items: Sequence[str]) -> str:
    """``a``, ``a or b``, ``a, b or c``."""
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} or {items[-1]}"


def _warn_about_fits(steps: tuple[Step, ...], warn: Warn) -> None:
    """Say when a fit is not the plain optimum: separable data, or no convergence."""
    for step in steps:
        if getattr(step, "separable", False) and step.kind == "beta":
            warn(
                "the scores separate the classes perfectly: beta's fit used Platt's target "
                "smoothing to stay finite (its plain maximum-likelihood coefficients are "
                "infinite)"
            )
        elif getattr(step, "separable", False):
            warn(
                "the scores separate the classes perfectly: Platt's fit used target "
                "smoothing to stay finite (its slope is a lower bound)"
            )
        if getattr(step, "converged", True) is False:
            warn(
                f"the {step.kind} fit did not converge; its map may be off the "
                "optimum (check the before/after figures)"
            )


def _optional_labels(
    table: Table, request: RecalibrateRequest, *, required: bool, warn: Warn
) -> FloatArray | None:
    """Labels when the column is there. When they are only used for the report, invalid
    labels are a warning (the calibration itself does not need them), not an error."""
    if not table.has_column(request.label_col):
        return None
    try:
        return table.labels(request.label_col, positive_label=request.positive_label)
    except InputError as error:
        if required:
            raise
        warn(f"labels not used for the report: {error}")
        return None


def _strata_of(table: Table, column: str | None, steps: Sequence[Step]) -> Strata | None:
    """The strata of ``column`` (the one read: ``--strata-col``, else the record's), each
    known to every per-stratum prior step among ``steps`` (:func:`_check_strata`)."""
    if column is None:
        return None
    strata = table.categories(column, option="--strata-col")
    _check_strata(steps, strata[0], table.name, column)
    return strata


def _label_facts(labelled: FileEffect) -> dict[str, float | None]:
    """The positives and base rate of a labelled file (for the model's provenance)."""
    if not labelled.has_labels:
        return {}
    effect = labelled.effect
    return {"positives": _finite(effect.positives), "base_rate": _finite(effect.base_rate)}


def _finite(value: float | None) -> float | None:
    return value if value is not None and math.isfinite(value) else None


def _warn_auc_change(
    name: str,
    effect: CalibrationEffect,
    warn: Warn,
    *,
    cross_fitted: bool,
    stratified: bool = False,
    tol: float = 0.0,
) -> None:
    """Warn when the calibration changed the AUC (by more than rounding and ``tol``), saying
    why: folds' maps, strata's shifts, a decreasing or constant map, or steps."""
    change = auc_change(effect, tol=AUC_CHANGE_TOLERANCE + tol)
    if change is None or effect.before is None or effect.after is None:
        return
    before, after = effect.before.auc, effect.after.auc
    if cross_fitted:
        reason = "each fold has its own map, so rows of different folds can change order"
    elif stratified:
        reason = (
            "each stratum has its own prior shift, so rows of different strata can change "
            "order (each stratum keeps its own)"
        )
    elif before < 0.5 < after and abs(before + after - 1.0) <= 1e-6:
        reason = (  # Platt or beta with a negative slope: the fit turned the ranking round
            "the map decreases, so it reverses the ranking: the scores rank the labels "
            "backwards (AUC below 0.5); are the labels flipped (--positive-label)?"
        )
    elif after == 0.5:
        reason = "the map is constant: " + (
            "the scores rank the labels backwards (AUC below 0.5), which a map that keeps "
            "the order cannot follow; are the labels flipped (--positive-label)?"
            if before < 0.5
            else "the fit found nothing in the scores to rank by"
        )
    else:
        reason = (
            "the map is not strictly increasing (it pools scores into steps); "
            "isotonic --strict, platt and beta keep the ranking"
        )
    warn(
        f"{name}: calibration changed the AUC by {change:.2g} "
        f"({effect.before.auc:.6f} -> {effect.after.auc:.6f}): {reason}"
    )


# ------------------------------------------------------------------------ streaming engine


@dataclass(frozen=True)
class _Engines:
    fit: Engine
    apply: Engine


def _engines(request: RecalibrateRequest, plan: RecalibrationPlan, warn: Warn) -> _Engines:
    """The engine of the fit and of the apply pass (``auto``: by each file's rows)."""
    if plan.cross_fit:
        if request.engine == "streaming":
            raise UsageError(
                "--cross-fit runs in memory only: drop --engine streaming "
                "(or fit with --fit and apply with --model)"
            )
        return _Engines(fit="memory", apply="memory")
    fmt = request.input_format
    fit: Engine = "memory"
    if request.fit is not None:
        fit = choose_engine(request.engine, [request.fit], input_format=fmt, warn=warn)
        if fit == "streaming" and request.score_kind != "probability":
            if request.engine == "streaming":
                raise UsageError(
                    "--engine streaming fits on a summary of probabilities: with "
                    f"--score-kind {request.score_kind} use --engine memory"
                )
            fit = "memory"
    apply: Engine = "memory"
    if request.file is not None:
        apply = choose_engine(request.engine, [request.file], input_format=fmt, warn=warn)
    return _Engines(fit=fit, apply=apply)


def _scan(run: _Run, path: str, strata_column: str | None, *, for_fit: bool) -> StreamInput:
    """A checked streaming scan (bad input refused, or dropped and counted, before output)."""
    request = run.request
    scan = scan_input(
        path,
        input_format=request.input_format,
        typed=False if for_fit else io.typed_output(request.output or "-", request.output_format),
        score_col=request.score_col,
        score_kind=request.score_kind,
        label_col=request.label_col,
        positive_label=request.positive_label,
        weight_col=request.weight_col,
        strata_col=strata_column,
        on_invalid=request.on_invalid,
        labels_required=for_fit,
        max_invalid=request.max_invalid,
    )
    if scan.invalid is not None:
        run.invalid_rows.append(scan.invalid)
    warn_dropped(scan.invalid, None, run.warn)
    if scan.label_problem is not None:
        run.warn(f"labels not used for the report: {scan.label_problem}")
    return scan


def _check_strata(
    steps: Sequence[Step], strata: Sequence[str] | None, name: str, column: str | None
) -> None:
    """Every stratum of file ``name``, read from ``column`` (``--strata-col``, else the
    record's), is known to each per-stratum prior step, checked before any pass, in both
    engines; the message names the column read, which may not be the record's."""
    for step in steps:
        if not isinstance(step, PriorParams) or step.strata_col is None:
            continue
        if strata is None:
            raise InputError(
                f"{name}: the prior correction is per stratum: column "
                f"'{step.strata_col}' is needed (set --strata-col)"
            )
        unknown = [stratum for stratum in strata if stratum not in step.stratum_shifts]
        if unknown:
            raise InputError(
                f"{name}: column '{column}' has stratum '{unknown[0]}' that the sampling record "
                f"does not know; it knows: {', '.join(sorted(step.stratum_shifts))}"
            )


def _stream_scan(
    run: _Run, path: str, strata_column: str | None, steps: tuple[Step, ...]
) -> StreamInput:
    scan = _scan(run, path, strata_column, for_fit=False)
    _check_strata(steps, scan.strata, scan.name, strata_column)
    return scan


def _stream_effect(
    run: _Run, scan: StreamInput, steps: tuple[Step, ...], output: str | None
) -> FileEffect:
    """One pass: apply ``steps`` batch by batch (written to ``output`` when given) and the
    before/after figures from summaries of the scores."""
    request = run.request
    kind = request.score_kind

    def calibrate(scores: FloatArray, strata: Strata | None) -> FloatArray:
        return apply_chain(steps, scores, score_kind=kind, strata=strata)

    measured = stream_calibrated(
        scan,
        calibrate,
        output_col=request.output_col,
        output=output,
        output_format=request.output_format,
    )
    total = measured.weight
    mean_after = measured.score_sum_after / total if total else None
    mean_before = (
        measured.score_sum_before / total
        if measured.score_sum_before is not None and total
        else None
    )
    if measured.after is None:
        effect = CalibrationEffect(
            rows=measured.rows, mean_score_before=mean_before, mean_score_after=mean_after
        )
        return FileEffect(file=scan.name, effect=effect, has_labels=False)
    with io.naming(scan.name):
        after = reliability_from_summary(measured.after)
        before = None if measured.before is None else reliability_from_summary(measured.before)
    figures = [
        None
        if r is None
        else EffectFigures(
            log_loss=r.reliability.log_loss,
            brier=r.reliability.brier,
            ece=r.reliability.ece,
            auc=r.reliability.auc,
        )
        for r in (before, after)
    ]
    effect = CalibrationEffect(
        rows=measured.rows,
        mean_score_before=mean_before,
        mean_score_after=mean_after,
        positives=after.reliability.positives,
        base_rate=after.reliability.base_rate,
        before=figures[0],
        after=figures[1],
    )
    bound = after.exactness.auc_bound + (0.0 if before is None else before.exactness.auc_bound)
    _warn_auc_change(
        scan.name, effect, run.warn, cross_fitted=False, stratified=run.stratified_prior, tol=bound
    )
    return FileEffect(file=scan.name, effect=effect, has_labels=True)


def _stream_apply(
    run: _Run, scan: StreamInput, steps: tuple[Step, ...], destination: str
) -> FileEffect:
    return _stream_effect(run, scan, steps, destination)


def _stream_fit(
    run: _Run, path: str, strata_column: str | None
) -> tuple[StreamInput, tuple[Step, ...], FileEffect]:
    """Fit on a summary of the fit file (one pass), then measure the fit (a second pass)."""
    request, prior = run.request, run.prior
    scan = _scan(run, path, strata_column, for_fit=True)
    map_input = None
    if prior is not None and request.fit_data == "population":
        _check_strata((prior,), scan.strata, scan.name, strata_column)
        step = prior

        def map_input(scores: FloatArray, strata: Strata | None) -> FloatArray:
            return apply_step(step, scores, score_kind=request.score_kind, strata=strata)

    method = (
        _stream_choose(run, scan, map_input)
        if run.plan.method == "auto"
        else cast("FittedMethod", run.plan.method)
    )
    isotonic = method == "isotonic"
    summary = summarize_for_fit(
        scan,
        map_input,
        mantissa_bits=STREAM_FIT_BITS[method],
        eps=FIT_EPS,
        n_folds=None,
        seed=request.seed,
    )
    cells = summary.cells()
    positives = float(np.sum(cells.weight[cells.label == 1]))
    run.check_fit_rate(scan.name, positives, float(np.sum(cells.weight)) - positives)
    what = fitted_scores_name(prior, request.fit_data)
    with io.naming(scan.name):
        fitted: CalibratorParams
        if isotonic:  # exact: refined where the fit on the rows could split a cell
            require_fit_support(method, cell_facts(cells), what=what)
            run.isotonic_stream = fit_isotonic_streaming(
                scan, map_input, summary, options=run.options["isotonic"]
            )
            fitted = run.isotonic_stream.params
        elif method == "histogram":  # exact: the cells the edges fall in are read again
            n_bins = run.options["histogram"]["n_bins"]
            require_fit_support(method, cell_facts(cells), n_bins=n_bins, what=what)
            run.histogram_stream = fit_histogram_streaming(
                scan, map_input, summary, options=run.options["histogram"]
            )
            fitted = run.histogram_stream.params
        else:
            fitted = fit_on_cells(method, cells, options=run.options.get(method, {}), what=what)
    steps: tuple[Step, ...] = (fitted,)
    if prior is not None:
        steps = (prior, fitted) if request.fit_data == "population" else (fitted, prior)
    if prior is not None and request.fit_data == "sampled":
        _check_strata((prior,), scan.strata, scan.name, strata_column)
    return scan, steps, _stream_effect(run, scan, steps, None)


def _stream_choose(run: _Run, scan: StreamInput, map_input: BatchMap | None) -> FittedMethod:
    """``auto`` on a big fit file: one pass summarises its rows on the 12-bit grid grouped by
    ``--folds`` folds (a hash of ``--seed`` and the row's number), every candidate the data
    meet is cross-validated on the cells (:func:`calib_cli.core.cells.choose_method_on_cells`,
    the bound of each log loss reported), and the chosen method is then fitted as if named."""
    request = run.request
    summary = summarize_for_fit(
        scan,
        map_input,
        mantissa_bits=AUTO_MANTISSA_BITS,
        eps=FIT_EPS,
        n_folds=request.auto_folds,
        seed=request.seed,
    )
    folds = [
        summary.select_group(str(k)).cells() if str(k) in summary.groups else _no_cells()
        for k in range(request.auto_folds)
    ]
    choice = _choose_on_folds(
        run,
        folds,
        scan.name,
        dealt="hashed",
        why="streamed folds are dealt by a hash of the row's number, not stratified by label",
        remedy=f"use {'fewer --folds, ' if len(folds) > 2 else ''}another --seed, or "
        "--engine memory",
    )
    return cast("FittedMethod", choice.chosen)


def _choose_on_folds(
    run: _Run,
    folds: Sequence[CellSums],
    name: str,
    *,
    dealt: str,
    why: str,
    remedy: str,
    names: Sequence[str] = (),
    fits_on_grid: Callable[[FittedMethod], bool] = lambda method: True,
) -> MethodChoice:
    """``auto`` on cells grouped by fold, for both kinds of folds: the data checked for any
    fit and for a class held whole by one fold (``why`` and ``remedy`` say what to do), every
    candidate the data meet (and ``fits_on_grid``: the final fit can be made on the cells'
    grid, else left out with a warning) cross-validated, the choice kept on ``run``."""
    request = run.request
    facts = cell_facts(concat_cells(folds))
    n_bins = run.options["histogram"]["n_bins"]
    what = fitted_scores_name(run.prior, request.fit_data)
    with io.naming(name):
        require_fit_support("auto", facts, n_bins=n_bins, what=what)
        _require_both_classes_outside_each_fold(folds, facts, why=why, remedy=remedy, names=names)
        supported = supported_methods(FITTED_METHODS, facts, n_bins=n_bins)
        candidates = tuple(m for m in supported if fits_on_grid(m))  # platt always
        choice = choose_method_on_cells(
            folds, candidates=candidates, options=run.options, what=what, dealt=dealt
        )
    run.choice = choice
    run.warn_left_out(name, supported, facts.positives, facts.negatives)
    return choice


def _require_both_classes_outside_each_fold(
    folds: Sequence[CellSums], facts: FitFacts, *, why: str, remedy: str, names: Sequence[str] = ()
) -> None:
    """Folds not stratified by label (hashed, or a summary's groups) can hold every row of a
    small class in one fold, leaving that fold's training part (the other folds) without it.
    Refused with ``why`` and ``remedy``."""
    for k, fold in enumerate(folds):
        live = fold.weight > 0.0
        positives = float(np.sum(fold.weight[live & (fold.label == 1)]))
        negatives = float(np.sum(fold.weight[live & (fold.label == 0)]))
        for name, total, inside in (
            ("positive", facts.positives, positives),
            ("negative", facts.negatives, negatives),
        ):
            if total > 0.0 and inside >= total:
                fold_name = f"fold {names[k]!r}" if names else f"fold {k + 1} of {len(folds)}"
                raise InputError(
                    f"--method auto: every {name} row is in {fold_name}, so the other folds "
                    f"have none to fit on ({why}): {remedy}"
                )


def _no_cells() -> CellSums:
    """The cells of a fold no row was dealt to."""
    empty = np.zeros(0)
    return CellSums(
        cell=np.zeros(0, dtype=np.int64),
        label=np.zeros(0, dtype=np.int8),
        weight=empty,
        score_sum=empty,
        logit_sum=empty,
        score_min=empty,
        score_max=empty,
        rows=empty,  # else the folds joined with it would lose their row counts
    )


# ------------------------------------------------------------------- fits on summary files


@dataclass(frozen=True)
class _SummaryFit:
    """A fit made on summary files: the steps, the effect on the summarised rows, and what
    the saved model records of it."""

    steps: tuple[Step, ...]
    effect: FileEffect
    name: str
    rows: int
    score_col: str
    label_col: str
    weight_col: str | None
    record: dict[str, Any]


def _summary_choose(
    run: _Run, merged: ScoreSummary, name: str
) -> tuple[FittedMethod, dict[str, Any]]:
    """``auto`` on summary files whose ``--by`` groups are the folds (``--fold-col``): each
    candidate the data and the grid allow is cross-validated on the groups' cells
    (:func:`calib_cli.core.cells.choose_method_on_cells`); returns the chosen method and the
    record of the choice."""
    request = run.request
    column = request.fold_col
    if merged.group_column != column:
        held = (
            "no --by column"
            if merged.group_column is None
            else f"the --by column {merged.group_column!r}"
        )
        raise InputError(
            f"{name}: --fold-col {column!r}, but the summaries have {held}: summarise with "
            f"--by {column}"
        )
    if None in merged.groups:
        raise InputError(
            f"{name}: --fold-col {column!r} is missing on some rows: every row must be in a "
            "fold (give them one in the engine, e.g. coalesce the key before hashing it)"
        )
    if not 2 <= len(merged.groups) <= MAX_FOLD_GROUPS:
        raise InputError(
            f"{name}: --fold-col {column!r} has {len(merged.groups)} groups: cross-validation "
            f"takes 2 to {MAX_FOLD_GROUPS} folds (make the column a fold number, e.g. "
            "hash(id) % 5)"
        )
    bits = merged.mantissa_bits
    pooled = merged.pooled()

    def fits_on_grid(method: FittedMethod) -> bool:
        if bits >= FIT_MANTISSA_BITS[method]:
            return True
        exact = method == "histogram" and (
            fit_histogram_summary(pooled, options=run.options["histogram"]).params is not None
        )
        if not exact:
            run.warn(
                f"{name}: --method auto left out {method}: it needs a summary on a grid of at "
                f"least {FIT_MANTISSA_BITS[method]} mantissa bits, and this one has {bits} "
                f"(summarise with --grid-bits {FIT_MANTISSA_BITS[method]})"
            )
        return exact

    choice = _choose_on_folds(
        run,
        [merged.select_group(group).cells() for group in merged.groups],
        name,
        dealt="groups",
        why=f"the folds are the summaries' {column!r} groups",
        remedy="deal the folds otherwise (another key or modulus), or name the method",
        names=[str(g) for g in merged.groups],
        fits_on_grid=fits_on_grid,
    )
    record = {
        "method": "auto",
        "folds": "groups",
        "fold_col": column,
        "n_folds": choice.n_folds,
        "grid": {"kind": "relative-tails", "mantissa_bits": merged.mantissa_bits},
    }
    return cast("FittedMethod", choice.chosen), record


def _summary_column(request: RecalibrateRequest, loaded: Mapping[str, Any]) -> str:
    """The score column to fit on: ``--score-col`` when the summaries hold it, else their only
    column; summaries of several columns need ``--score-col`` to choose."""
    if request.score_col in loaded:
        return request.score_col
    if len(loaded) == 1:
        return str(next(iter(loaded)))
    held = ", ".join(repr(c) for c in loaded)
    raise UsageError(
        f"the summaries hold several score columns ({held}): choose one with --score-col"
    )


def _coarse_grid_message(name: str, method: str, bits: int) -> str:
    needed = FIT_MANTISSA_BITS[method]
    if method == "histogram":
        why = "its equal-mass bin edges fall in cells of several scores here"
        refine = (
            "read those cells again in the engine (--refine-sql with --dialect and --table, "
            "then --refine-summary), "
        )
    else:
        why, refine = "the logistic fits hold each cell's rows at one point", ""
    return (
        f"{name}: --method {method} needs a summary on a grid of at least {needed} mantissa "
        f"bits ({why}); this summary's grid has {bits}: summarise with --grid-bits {needed} "
        f"(calib summarize, or summarize --emit-sql in the engine), {refine}fit on the rows "
        "instead (--fit FILE, exact and streamed), or choose "
        + ", ".join(m for m in FITTED_METHODS if FIT_MANTISSA_BITS[m] <= bits)
    )


def _key_points(
    summary: ScoreSummary,
) -> tuple[FloatArray, FloatArray, FloatArray, IntArray]:
    """Each (group, cell, bin, class) key of positive weight as one weighted row, both classes
    of a (group, cell, bin) at their pooled mean score (kept inside its smallest and largest
    score), so that the pairs inside a cell stay ties, as the summary's AUC counts them; and
    each row's group (index into ``summary.groups``)."""
    live = summary.weight > 0.0
    weight = summary.weight[live]
    group = summary.group[live].astype(np.int64)
    cell, bins = summary.cell[live], summary.bin[live]
    order = np.lexsort((bins, cell, group))  # one sort; np.unique(axis=0) is several times slower
    g, c, b = group[order], cell[order], bins[order]
    new = np.r_[True, (g[1:] != g[:-1]) | (c[1:] != c[:-1]) | (b[1:] != b[:-1])]
    index = np.empty(order.size, dtype=np.int64)
    index[order] = np.cumsum(new) - 1
    total = np.bincount(index, weights=weight)
    sums = np.bincount(index, weights=summary.score_sum[live])
    low = np.full(total.size, np.inf)
    high = np.full(total.size, -np.inf)
    np.fmin.at(low, index, summary.score_min[live])
    np.fmax.at(high, index, summary.score_max[live])
    mean = np.clip(sums / total, low, high)[index]
    return mean, summary.label[live].astype(np.float64), weight, group


def _summary_strata(
    summary: ScoreSummary, steps: tuple[Step, ...], name: str, warn: Warn
) -> tuple[bool, Strata | None]:
    """The strata of a summary's keys for a per-stratum prior step: its ``--by`` groups when
    they are the step's strata column. (False, None) when a step needs strata the summary
    does not keep (the figures after calibration are then left out, with a warning)."""
    needed = [s.strata_col for s in steps if isinstance(s, PriorParams) and s.strata_col]
    if not needed:
        return True, None
    if summary.group_column != needed[0] or None in summary.groups:
        warn(
            f"{name}: the prior correction is per stratum ('{needed[0]}') and the summary "
            f"does not keep every row's stratum (summarise with --by {needed[0]}): the "
            "figures after calibration are left out"
        )
        return False, None
    names = [str(g) for g in summary.groups]
    return True, (names, np.arange(len(names), dtype=np.int64))


def _summary_effect(
    name: str, summary: ScoreSummary, steps: tuple[Step, ...], warn: Warn
) -> FileEffect:
    """The figures of the summarised rows before (exact from the summary; AUC within its
    bound) and after the calibration (each cell's rows at their mean score,
    :func:`_key_points`: log loss and Brier move to second order in the cell's width)."""
    pooled = summary.pooled()
    with io.naming(name):
        figures = reliability_from_summary(pooled)
    before = figures.reliability
    total = float(np.sum(pooled.weight))
    effect = CalibrationEffect(
        rows=int(np.sum(pooled.n_rows)),
        mean_score_before=float(np.sum(pooled.score_sum)) / total,
        mean_score_after=None,
        positives=before.positives,
        base_rate=before.base_rate,
        before=EffectFigures(
            log_loss=before.log_loss, brier=before.brier, ece=before.ece, auc=before.auc
        ),
    )
    known, strata = _summary_strata(summary, steps, name, warn)
    if known:
        scores, labels, weights, group = _key_points(summary)
        if strata is not None:
            strata = (strata[0], group)
        calibrated = apply_chain(steps, scores, strata=strata)
        points = recalibration_effect(labels, scores, calibrated, sample_weight=weights)
        effect = replace(effect, mean_score_after=points.mean_score_after, after=points.after)
        # the AUC before is the summary's (within its bound), after is the key points' (the
        # cells' rows tied, as a non-decreasing map of the cells keeps them): twice the bound
        # covers both, as --fit FILE warns past rounding
        bound = figures.exactness.auc_bound
        _warn_auc_change(name, effect, warn, cross_fitted=False, tol=2.0 * bound)
    return FileEffect(file=name, effect=effect, has_labels=True)


def _refinements(
    request: RecalibrateRequest, summary: ScoreSummary
) -> list[tuple[str, ScoreSummary]]:
    """The ``--refine-summary`` files, each checked against the summary it refines: the same
    columns and bins, on a finer grid."""
    out: list[tuple[str, ScoreSummary]] = []
    for path in request.refine_summaries:
        finer = io.read_summary(path)
        name = io.display_name(path)
        for field in ("score_column", "label_column", "weight_column", "bin_edges"):
            if getattr(finer, field) != getattr(summary, field):
                raise InputError(
                    f"{name}: refinement summary field {field!r} is "
                    f"{getattr(finer, field)!r}, the summary's {getattr(summary, field)!r}"
                )
        if finer.mantissa_bits <= summary.mantissa_bits:
            raise InputError(
                f"{name}: a refinement summary must be on a finer grid than the summary's "
                f"{summary.mantissa_bits} mantissa bits, got {finer.mantissa_bits}"
            )
        out.append((name, finer))
    return out


def _merged_intervals(lower: FloatArray, upper: FloatArray) -> list[tuple[float, float]]:
    """Closed score intervals, sorted, with repeats dropped and touching ones joined (the
    cells of a grid tile the doubles: the next cell starts at the double after this one's
    last), so the refinement query tests fewer ranges.

    >>> _merged_intervals(np.array([0.5, 0.1, 0.1]), np.array([0.6, np.nextafter(0.2, 0), 0.2]))
    [(0.1, 0.2), (0.5, 0.6)]
    """
    order = np.lexsort((upper, lower))
    merged: list[tuple[float, float]] = []
    for lo, hi in zip(lower[order].tolist(), upper[order].tolist(), strict=True):
        if merged and lo <= float(np.nextafter(merged[-1][1], 2.0)):
            merged[-1] = (merged[-1][0], max(merged[-1][1], hi))
        else:
            merged.append((lo, hi))
    return merged


def _write_refinement_sql(
    request: RecalibrateRequest, summary: ScoreSummary, cells: OpenCells
) -> None:
    """The summary query (:func:`~calib_cli.sql.summary.summary_sql`) of the rows of the open
    cells, on their finer grid: the table's rows whose score lies in one of the cells' closed
    intervals (constants exact as the dialect reads doubles)."""
    from calib_cli.sql.dialects import dialect
    from calib_cli.sql.summary import SummaryQuery, summary_sql

    d = dialect(cast(str, request.refine_dialect))
    score = f"CAST({d.identifier(summary.score_column)} AS {d.double_type})"
    ranges = " OR ".join(
        f"({score} BETWEEN {d.double(lo)} AND {d.double(hi)})"
        for lo, hi in _merged_intervals(cells.lower, cells.upper)
    )
    query = SummaryQuery.refining(  # the summary's columns, label rule, bins and eps
        summary,
        table=f"(SELECT * FROM {request.refine_table} WHERE {ranges}) AS calib_open_cells",
        mantissa_bits=cells.to_bits,
    )
    io.write_text(cast(str, request.refine_sql), summary_sql(query, dialect_name=d.name) + "\n")


def _fit_summaries(run: _Run) -> _SummaryFit:
    """Fit the method on summary files merged (every ``--by`` group pooled: a fitted map is
    one map for every row), on the summary's own cells: the streaming engine's fit
    (:func:`~calib_cli.core.cells.fit_on_cells`; isotonic by
    :func:`~calib_cli.workflows.isotonic_stream.fit_isotonic_summary`) without the passes
    over rows that a summary file cannot give."""
    from calib_cli.workflows.summarize import load_summaries

    request, prior = run.request, run.prior
    loaded = load_summaries(request.fit_summaries, warn=run.warn)
    column = _summary_column(request, loaded)
    merged, files = loaded[column]
    name = files[0] if len(files) == 1 else f"{len(files)} summaries of '{column}'"
    summary = merged.pooled()
    chosen_by = None
    if run.plan.method == "auto":  # with --fold-col: _plan_summary_fit
        method, chosen_by = _summary_choose(run, merged, name)
    else:
        method = cast("FittedMethod", run.plan.method)
    cells = summary.cells()
    if not np.any(cells.weight > 0.0):
        raise InputError(f"{name}: the summary's weights sum to 0: no row carries weight")
    what = fitted_scores_name(prior, request.fit_data)
    exact_histogram = None
    histogram_fit = None
    refinements = _refinements(request, summary)
    coarse = summary.mantissa_bits < FIT_MANTISSA_BITS[method]
    if coarse or refinements or request.refine_sql is not None:
        if method == "histogram":  # exact all the same when every edge is a cell's one score
            n_bins = run.options["histogram"]["n_bins"]
            with io.naming(name):
                require_fit_support(method, cell_facts(cells), n_bins=n_bins, what=what)
                histogram_fit = fit_histogram_summary(
                    summary, options=run.options["histogram"], refinements=refinements
                )
            exact_histogram = histogram_fit.params
            if histogram_fit.open is not None and request.refine_sql is not None:
                _write_refinement_sql(request, summary, histogram_fit.open)
                wrote = (
                    f"{name}: {len(histogram_fit.open.lower)} cells hold an equal-mass "
                    "edge of the histogram and several scores; wrote the query that "
                    f"summarises their rows on the {histogram_fit.open.to_bits}-bit grid to "
                    f"{request.refine_sql}: run it in the engine, save its result as "
                    "Parquet, and fit again adding --refine-summary RESULT"
                )
                if coarse:
                    raise InputError(f"{wrote} (no model saved)")
                run.warn(
                    f"{wrote} (this model: the fit on the summary's "
                    f"{summary.mantissa_bits}-bit cells)"
                )
        if coarse and exact_histogram is None:
            raise InputError(_coarse_grid_message(name, method, summary.mantissa_bits))
    grid = {"kind": "relative-tails", "mantissa_bits": summary.mantissa_bits}
    record: dict[str, Any] = {
        "kind": "summary",
        "fitted_on": "summary",
        "summaries": list(files),
        "groups": len(merged.groups),
        "grid": grid,
    }
    if chosen_by is not None:
        record["chosen_by"] = chosen_by
    with io.naming(name):
        fitted: CalibratorParams
        if exact_histogram is not None:
            fitted = exact_histogram
            record["exact"] = summary.weight_column is None
            if histogram_fit is not None and request.refine_summaries:
                record |= {
                    "refinement_summaries": [n for n, _ in refinements],
                    "cells": histogram_fit.cells,
                    "resolved_cells": histogram_fit.resolved_cells,
                }
        elif method == "isotonic":
            require_fit_support(method, cell_facts(cells), what=what)
            iso = fit_isotonic_summary(
                summary, options=run.options["isotonic"], refinements=refinements
            )
            fitted = iso.params
            record |= {
                "exact": iso.exact,
                "cells": iso.cells,
                "unresolved_cells": iso.open_cells,
                "unresolved_weight": iso.open_weight,
            }
            if refinements:
                record |= {
                    "refinement_summaries": [n for n, _ in refinements],
                    "resolved_cells": iso.resolved_cells,
                }
            if iso.open is not None and request.refine_sql is not None:
                _write_refinement_sql(request, summary, iso.open)
                run.warn(
                    f"{name}: wrote the query that summarises the rows of the "
                    f"{iso.open_cells} open cells on the {iso.open.to_bits}-bit grid to "
                    f"{request.refine_sql}: run it in the engine, save its result as "
                    "Parquet, and fit again adding --refine-summary RESULT"
                )
            if not iso.exact:
                run.warn(
                    f"{name}: the isotonic fit on the summary is not certified exact: "
                    f"{iso.open_cells} of its {iso.cells} cells ({iso.open_weight:.2%} of "
                    "the weight) could be split by the fit on the rows, which --fit FILE "
                    "makes (it reads those cells' rows again); here each is held at one "
                    "value, so the knots can differ inside them (--refine-sql writes the "
                    "query that summarises their rows on a finer grid in the engine, for "
                    "--refine-summary)"
                )
        else:
            fitted = fit_on_cells(method, cells, options=run.options.get(method, {}), what=what)
    steps: tuple[Step, ...] = (fitted,) if prior is None else (fitted, prior)
    return _SummaryFit(
        steps=steps,
        effect=_summary_effect(name, merged, steps, run.warn),
        name=name,
        rows=int(np.sum(summary.n_rows)),
        score_col=column,
        label_col=summary.label_column,
        weight_col=summary.weight_column,
        record={"engine": record},
    )
