"""Composing calibration steps: a prior correction and a fitted map, in either order.

A chain is a tuple of steps applied left to right. The first step reads the scores as given
(``score_kind``); every later step reads the probabilities the previous step produced. Two
orders matter in practice (see the README, "Composing a prior correction and a fitted map"):

* calibration data sampled like the training data: ``(fitted map, prior)``: the map learns
  the sampled world, the prior correction then moves it to the population;
* calibration data drawn from the population: ``(prior, fitted map)``: the prior correction
  removes the gross bias the sampling caused, the map then fixes what is left.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

import numpy as np
import numpy.typing as npt

from calib_cli.core import elementary as el
from calib_cli.core.fit_support import (
    fit_facts,
    min_class_rows,
    require_fit_support,
    supported_methods,
)
from calib_cli.core.platt import PlattParams
from calib_cli.core.prior import apply_prior_shift
from calib_cli.core.selection import (
    CalibratorParams,
    MethodChoice,
    apply_calibrator,
    choose_method,
    cross_fit,
    fit_calibrator,
)
from calib_cli.errors import InputError
from calib_cli.types import FitData, FittedMethod, FloatArray, ScoreKind

Strata = tuple[Sequence[str], npt.NDArray[np.int64]]


@dataclass(frozen=True)
class PriorParams:
    """A prior (odds) correction: every row's log-odds shifted by ``log_odds_shift``, or by its
    stratum's shift when ``strata_col`` is set (stratified sampling records)."""

    kind: ClassVar[str] = "prior"

    log_odds_shift: float
    strata_col: str | None = None
    stratum_shifts: Mapping[str, float] = field(default_factory=dict)


Step = PriorParams | CalibratorParams


def row_shifts(params: PriorParams, strata: Strata | None) -> float | FloatArray:
    """The log-odds shift of each row: one number, or per row from its stratum's shift.

    ``strata`` is (sorted stratum names, code per row) of the column ``params.strata_col``.
    """
    if params.strata_col is None:
        return params.log_odds_shift
    if strata is None:
        raise InputError(
            f"the prior correction is per stratum: column '{params.strata_col}' "
            "is needed (set --strata-col)"
        )
    names, codes = strata
    unknown = [name for name in names if name not in params.stratum_shifts]
    if unknown:
        counts = np.bincount(codes, minlength=len(names))
        first = unknown[0]
        raise InputError(
            f"column '{params.strata_col}' has stratum '{first}' "
            f"({int(counts[list(names).index(first)])} rows) that the sampling record does not "
            f"know; it knows: {', '.join(sorted(params.stratum_shifts))}"
        )
    per_name = np.array([params.stratum_shifts[name] for name in names], dtype=np.float64)
    return per_name[codes]


def apply_step(
    step: Step,
    scores: FloatArray,
    *,
    score_kind: ScoreKind = "probability",
    strata: Strata | None = None,
) -> FloatArray:
    """Apply one step to scores of the given kind; returns probabilities."""
    if isinstance(step, PriorParams):
        shifted = apply_prior_shift(scores, row_shifts(step, strata), score_kind=score_kind)
        if score_kind == "logit":
            return el.sigmoid(shifted)
        return shifted
    if isinstance(step, PlattParams):
        if score_kind != step.score_kind:
            raise InputError(
                f"this Platt calibrator was fitted on {step.score_kind} scores, "
                f"not {score_kind} scores (set --score-kind {step.score_kind})"
            )
    elif score_kind != "probability":
        raise InputError(
            f"{step.kind} calibration reads probabilities in [0, 1], not {score_kind} scores; "
            "use --method platt, or put a Platt or prior step first"
        )
    return apply_calibrator(step, scores)


def apply_chain(
    steps: Sequence[Step],
    scores: FloatArray,
    *,
    score_kind: ScoreKind = "probability",
    strata: Strata | None = None,
) -> FloatArray:
    """Apply steps left to right: the first reads ``score_kind`` scores, the rest
    probabilities.

    >>> steps = (PriorParams(log_odds_shift=float(np.log(0.1))),)
    >>> apply_chain(steps, np.array([0.5, 0.0, 1.0])).round(6).tolist()
    [0.090909, 0.0, 1.0]
    """
    if not steps:
        raise InputError("a calibration chain needs at least one step")
    current = scores
    kind: ScoreKind = score_kind
    for step in steps:
        current = apply_step(step, current, score_kind=kind, strata=strata)
        kind = "probability"
    return current


@dataclass(frozen=True)
class ChainFit:
    """A fitted chain, with the ``auto`` comparison when a method was chosen."""

    steps: tuple[Step, ...]
    choice: MethodChoice | None


def _map_inputs(
    scores: FloatArray,
    prior: PriorParams | None,
    fit_data: FitData,
    score_kind: ScoreKind,
    strata: Strata | None,
) -> tuple[FloatArray, ScoreKind]:
    """What the fitted map reads: prior-corrected probabilities (population data), else the
    scores as given (sampled data, or no prior)."""
    if prior is not None and fit_data == "population":
        return apply_step(prior, scores, score_kind=score_kind, strata=strata), "probability"
    return scores, score_kind


def fitted_scores_name(prior: PriorParams | None, fit_data: FitData) -> str:
    """The scores the map reads, as messages name them."""
    if prior is not None and fit_data == "population":
        return "the prior-corrected scores"
    return "the scores"


def _compose(
    prior: PriorParams | None, fitted: CalibratorParams, fit_data: FitData
) -> tuple[Step, ...]:
    if prior is None:
        return (fitted,)
    return (prior, fitted) if fit_data == "population" else (fitted, prior)


def fit_chain(
    scores: FloatArray,
    y_true: FloatArray,
    *,
    method: FittedMethod | Literal["auto"],
    sample_weight: FloatArray | None = None,
    prior: PriorParams | None = None,
    fit_data: FitData = "population",
    score_kind: ScoreKind = "probability",
    strata: Strata | None = None,
    rng: np.random.Generator,
    n_folds: int = 5,
    options: Mapping[str, Mapping[str, Any]] | None = None,
) -> ChainFit:
    """Fit a calibration map (choosing it by cross-validated log loss for ``auto``) and compose
    it with an optional prior correction in the order ``fit_data`` calls for.

    With ``fit_data="population"`` the labels come from the population being scored: the map
    is fitted on prior-corrected scores and applied after the correction. With
    ``fit_data="sampled"`` the labelled rows were sampled like the training data: the map is
    fitted on the scores as given and the correction is applied after it.

    Data that cannot support the fit (one class, too few rows of a class, scores that do not
    vary) are refused first (:mod:`calib_cli.core.fit_support`); ``auto`` compares only the
    candidates whose minimum rows of each class the data meet.
    """
    x, kind = _map_inputs(scores, prior, fit_data, score_kind, strata)
    n_bins = (options or {}).get("histogram", {}).get("n_bins")
    facts = fit_facts(x, y_true, sample_weight, score_kind=kind)
    require_fit_support(method, facts, n_bins=n_bins, what=fitted_scores_name(prior, fit_data))
    choice = None
    chosen: FittedMethod
    if method == "auto":
        candidates: tuple[FittedMethod, ...] = (
            ("platt", "isotonic", "beta", "histogram") if kind == "probability" else ("platt",)
        )
        candidates = supported_methods(candidates, facts, n_bins=n_bins)
        choice = choose_method(
            x,
            y_true,
            sample_weight=sample_weight,
            n_folds=n_folds,
            rng=rng,
            score_kind=kind,
            candidates=candidates,
            method_options=options,
        )
        chosen = choice.chosen  # type: ignore[assignment]
    else:
        chosen = method
    fitted = fit_calibrator(
        chosen,
        x,
        y_true,
        sample_weight=sample_weight,
        score_kind=kind,
        **dict((options or {}).get(chosen, {})),
    )
    return ChainFit(steps=_compose(prior, fitted, fit_data), choice=choice)


def cross_fit_chain(
    scores: FloatArray,
    y_true: FloatArray,
    *,
    method: FittedMethod,
    sample_weight: FloatArray | None = None,
    prior: PriorParams | None = None,
    fit_data: FitData = "population",
    score_kind: ScoreKind = "probability",
    strata: Strata | None = None,
    rng: np.random.Generator,
    n_folds: int = 5,
    options: Mapping[str, Mapping[str, Any]] | None = None,
) -> FloatArray:
    """Out-of-fold calibrated probabilities of the same chain :func:`fit_chain` fits: each
    fold's map is fitted on the other folds, and the prior correction is applied in order.

    Each fold's fit must meet the minimum rows of each class a whole fit needs
    (:func:`calib_cli.core.fit_support.min_class_rows`), on the folds as drawn, else
    :class:`~calib_cli.core.selection.FoldSupportError` before any fit: a file that just
    meets it leaves every fit, on the other K - 1 folds, short.
    """
    x, kind = _map_inputs(scores, prior, fit_data, score_kind, strata)
    method_options = dict((options or {}).get(method, {}))
    out_of_fold = cross_fit(
        method,
        x,
        y_true,
        sample_weight=sample_weight,
        n_folds=n_folds,
        rng=rng,
        score_kind=kind,
        required_rows=min_class_rows(method, n_bins=method_options.get("n_bins")),
        **method_options,
    )
    if prior is not None and fit_data == "sampled":
        return apply_step(prior, out_of_fold, strata=strata)
    return out_of_fold
