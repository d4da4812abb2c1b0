"""One interface over the fitted calibrators, cross-fitting, and the ``auto`` method choice.

* :func:`fit_calibrator` / :func:`apply_calibrator` dispatch to Platt, isotonic, beta and
  histogram calibration by name and by the fitted parameters' type.
* :func:`cross_fit` gives out-of-fold calibrated probabilities: rows are split into
  ``n_folds`` folds stratified by label (each class is shuffled with ``rng`` and dealt round
  robin, so every fold holds both classes whenever each class has at least ``n_folds`` rows),
  and each fold is calibrated by a map fitted on the other folds. With ``required_rows``
  (the method's minimum, :func:`calib_cli.core.fit_support.min_class_rows`) every fold's fit
  must have that many rows of each class, else :class:`FoldSupportError` before any fit.
* :func:`choose_method` compares candidate methods by the weighted log loss (and Brier score)
  of their out-of-fold probabilities on the same folds, and picks the lowest log loss.

Every fit counts rows in one weight unit (:func:`calib_cli.core.fit_support.check_weight_unit`:
1, or the mean weight when weights are below 1 on average) for its pseudo-counts (Platt's
target smoothing, the histogram's prior). Cross-fitting takes that unit from all the rows and
gives it to every fold's fit, so a fold whose weights happen to average below 1 counts its
rows as the whole data do, and any scale of weights below 1 on average gives the same folds'
maps.

Isotonic, beta and histogram calibration take probability scores only; with logit or raw
scores they are refused (convert the scores with ``scipy.special.expit`` first, or use Platt
scaling, which takes logits and raw margins directly).

References
----------
A. Niculescu-Mizil and R. Caruana, "Predicting Good Probabilities With Supervised Learning",
ICML 2005 (comparing calibration methods by held-out log loss and Brier score).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeAlias

import numpy as np
import numpy.typing as npt

from calib_cli.core.beta import BetaParams, apply_beta, fit_beta
from calib_cli.core.checks import (
    check_fit_data,
    check_score_kind,
)
from calib_cli.core.fit_support import below_minimum, check_weight_unit, class_rows_text
from calib_cli.core.histogram import HistogramParams, apply_histogram, fit_histogram
from calib_cli.core.isotonic import IsotonicParams, apply_isotonic, fit_isotonic
from calib_cli.core.metrics import brier_score, log_loss
from calib_cli.core.platt import PlattParams, apply_platt, fit_platt
from calib_cli.errors import InputError
from calib_cli.types import FittedMethod, FloatArray, IntArray, ScoreKind

__all__ = [
    "CalibratorParams",
    "FoldShortfall",
    "FoldSupportError",
    "MethodChoice",
    "MethodScore",
    "apply_calibrator",
    "choose_method",
    "cross_fit",
    "cross_val_log_loss",
    "fit_calibrator",
]

CalibratorParams: TypeAlias = PlattParams | IsotonicParams | BetaParams | HistogramParams

_METHODS: tuple[FittedMethod, ...] = ("platt", "isotonic", "beta", "histogram")
#: The methods whose maps take probabilities, not logits or margins (``--score-kind``).
PROBABILITY_ONLY = frozenset({"isotonic", "beta", "histogram"})
_OPTIONS: dict[str, frozenset[str]] = {
    "platt": frozenset({"target_smoothing", "eps", "tol", "max_iter"}),
    "isotonic": frozenset({"increasing", "strict", "eps"}),
    "beta": frozenset({"eps", "tol", "max_iter"}),
    "histogram": frozenset({"n_bins", "prior_strength"}),
}


@dataclass(frozen=True)
class MethodScore:
    """Cross-validated scores of one candidate method (weighted, out-of-fold).

    Attributes
    ----------
    method : str
        The calibration method.
    cv_log_loss : float
        Weighted log loss of the out-of-fold calibrated probabilities.
    cv_brier : float
        Weighted Brier score of the out-of-fold calibrated probabilities.
    cv_log_loss_bound : float
        How far the out-of-fold log loss of the same fitted maps over every row can be from
        ``cv_log_loss``: 0 when every row was evaluated (in memory); on a summary's cells
        (each class of a cell evaluated at its mean score) the width of the interval that the
        rows' value lies in (:func:`calib_cli.core.cells.choose_method_on_cells`). The maps
        themselves are fitted on cells, as the streaming engine fits them, so maps fitted on
        the rows would score differently again (by the cell fit's own error).
    """

    method: str
    cv_log_loss: float
    cv_brier: float
    cv_log_loss_bound: float = 0.0


@dataclass(frozen=True)
class MethodChoice:
    """The ``auto`` comparison table and the method it chose.

    Attributes
    ----------
    chosen : str
        The candidate with the lowest ``cv_log_loss`` (the earlier candidate on a tie).
    n_folds : int
        Number of cross-validation folds (the same folds for every candidate).
    candidates : tuple of MethodScore
        One row per candidate, in the order given.
    folds : {"stratified", "hashed", "groups"}
        How rows were dealt to folds: shuffled and dealt round robin within each class (in
        memory), by a hash of the seed and the row's number (on a streaming summary, where
        the classes' counts are not known before the pass), or by the ``--by`` groups of
        summary files (``--fit-summary --fold-col``).
    """

    chosen: str
    n_folds: int
    candidates: tuple[MethodScore, ...]
    folds: str = "stratified"


def _check_method(method: str) -> FittedMethod:
    for known in _METHODS:
        if method == known:
            return known
    raise InputError(f"method must be one of {', '.join(_METHODS)}, got {method!r}")


def _require_kind_supported(method: FittedMethod, score_kind: ScoreKind) -> None:
    if score_kind != "probability" and method in PROBABILITY_ONLY:
        raise InputError(
            f"method '{method}' needs probability scores, got score_kind={score_kind!r}; "
            "convert the scores with expit first, or use method 'platt'"
        )


def fit_calibrator(
    method: FittedMethod,
    scores: npt.ArrayLike,
    y_true: npt.ArrayLike,
    *,
    sample_weight: npt.ArrayLike | None = None,
    score_kind: ScoreKind = "probability",
    weight_unit: float | None = None,
    **options: Any,
) -> CalibratorParams:
    """Fit the calibrator named by ``method``.

    Parameters
    ----------
    method : {"platt", "isotonic", "beta", "histogram"}
        Which calibrator to fit.
    scores, y_true, sample_weight
        As for the individual ``fit_*`` functions.
    score_kind : {"probability", "logit", "raw"}, default "probability"
        Only ``platt`` accepts logit or raw scores; the others refuse them.
    weight_unit : float, optional
        The weight of one row in the pseudo-counts of ``platt``, ``beta`` and ``histogram``
        (default: 1, or the mean positive weight when that is below 1;
        :func:`calib_cli.core.fit_support.check_weight_unit`). ``isotonic`` has none: any
        scale of the weights gives it the same map.
    **options
        Passed on to the method's fit function (e.g. ``strict=True`` for isotonic,
        ``n_bins=20`` for histogram, ``target_smoothing=True`` for Platt).

    Returns
    -------
    PlattParams or IsotonicParams or BetaParams or HistogramParams
        The fitted parameters; their class attribute ``kind`` names the method.

    Examples
    --------
    >>> params = fit_calibrator("histogram", [0.1, 0.4, 0.6, 0.9], [0, 0, 1, 1], n_bins=2)
    >>> params.kind, apply_calibrator(params, [0.2, 0.8]).round(3).tolist()
    ('histogram', [0.167, 0.833])
    """
    checked = _check_method(method)
    kind = check_score_kind(score_kind)
    _require_kind_supported(checked, kind)
    unknown = sorted(set(options) - _OPTIONS[checked])
    if unknown:
        raise InputError(
            f"method '{checked}' does not take option(s) {', '.join(unknown)}; "
            f"it takes {', '.join(sorted(_OPTIONS[checked]))}"
        )
    if checked == "platt":
        return fit_platt(
            scores,
            y_true,
            sample_weight=sample_weight,
            score_kind=kind,
            weight_unit=weight_unit,
            **options,
        )
    if checked == "isotonic":
        return fit_isotonic(scores, y_true, sample_weight=sample_weight, **options)
    if checked == "beta":
        return fit_beta(
            scores, y_true, sample_weight=sample_weight, weight_unit=weight_unit, **options
        )
    return fit_histogram(
        scores, y_true, sample_weight=sample_weight, weight_unit=weight_unit, **options
    )


def apply_calibrator(params: CalibratorParams, scores: npt.ArrayLike) -> FloatArray:
    """Calibrated probabilities from any fitted calibrator.

    Parameters
    ----------
    params : PlattParams or IsotonicParams or BetaParams or HistogramParams
        Fitted parameters from :func:`fit_calibrator` or a ``fit_*`` function.
    scores : array-like of shape (n_rows,)
        Scores of the kind the calibrator was fitted on.

    Returns
    -------
    ndarray of shape (n_rows,)
        Calibrated probabilities. Platt and beta maps clip probability scores with their
        default ``eps`` (1e-12); isotonic outputs are clipped to ``[params.eps, 1 - params.eps]``.

    Examples
    --------
    >>> apply_calibrator(BetaParams(a=1.0, b=1.0, c=0.0, converged=True, n_iter=0), [0.3])
    array([0.3])
    """
    if isinstance(params, PlattParams):
        return apply_platt(params, scores)
    if isinstance(params, IsotonicParams):
        return apply_isotonic(params, scores)
    if isinstance(params, BetaParams):
        return apply_beta(params, scores)
    if isinstance(params, HistogramParams):
        return apply_histogram(params, scores)
    raise InputError(f"not a fitted calibrator: {type(params).__name__}")


def _check_n_folds(n_folds: int, y: FloatArray) -> int:
    if isinstance(n_folds, bool) or not isinstance(n_folds, int | np.integer) or n_folds < 2:
        raise InputError(f"n_folds must be an integer of at least 2, got {n_folds!r}")
    n_pos = int(np.count_nonzero(y == 1.0))
    n_neg = y.shape[0] - n_pos
    if min(n_pos, n_neg) < 2:
        raise InputError(
            f"cross-fitting needs at least 2 positive and 2 negative rows, "
            f"got {n_pos} positive and {n_neg} negative"
        )
    return int(n_folds)


def _stratified_folds(y: FloatArray, n_folds: int, rng: np.random.Generator) -> IntArray:
    """Fold of each row: rows shuffled by ``rng``, grouped by label, dealt round robin."""
    return _deal(_dealing_order(y, rng), n_folds)


def _dealing_order(y: FloatArray, rng: np.random.Generator) -> IntArray:
    """The rows shuffled by ``rng`` and grouped by label (negatives first): the order in which
    they are dealt to folds. It does not depend on the number of folds, so the folds another
    K would give from the same ``rng`` are known (:func:`_fewest_folds`)."""
    shuffled = rng.permutation(y.shape[0])
    order: IntArray = shuffled[np.argsort(y[shuffled], kind="stable")]
    return order


def _deal(order: IntArray, n_folds: int) -> IntArray:
    """Fold of each row: the ``i``-th row of ``order`` goes to fold ``i % n_folds``."""
    folds = np.empty(order.shape[0], dtype=np.int64)
    folds[order] = np.arange(order.shape[0], dtype=np.int64) % n_folds
    return folds


@dataclass(frozen=True)
class FoldShortfall:
    """The fold whose fit (on the other folds) has the fewest rows of a class, below the
    method's minimum.

    Attributes
    ----------
    fold : int
        The fold, numbered from 1, whose map would be fitted on the other folds.
    n_folds : int
        The number of folds K.
    label : {"positive", "negative"}
        The class that falls short.
    rows : float
        Its rows in the other folds, counted by weight in the unit of all the rows (as the
        fits count them).
    needed : int
        The rows of each class every fit needs.
    fewest_folds : int or None
        The fewest folds above ``n_folds``, dealt from the same shuffle, that leave every
        fold's fit ``needed`` rows of each class; None when no number of folds does (a class
        whose rows less its heaviest row fall short).
    """

    fold: int
    n_folds: int
    label: str
    rows: float
    needed: int
    fewest_folds: int | None


class FoldSupportError(InputError):
    """A fold's fit would have fewer rows of a class than the method's minimum
    (:func:`cross_fit` with ``required_rows``); ``shortfall`` says which and what would pass."""

    def __init__(self, message: str, shortfall: FoldShortfall) -> None:
        super().__init__(message)
        self.shortfall = shortfall


_ClassBlock: TypeAlias = tuple[str, int, FloatArray]


def _class_blocks(y: FloatArray, w: FloatArray, order: IntArray) -> list[_ClassBlock]:
    """Each class's name, first position in ``order`` and weights in that order: a class's
    rows are one run of ``order``, so its ``j``-th row goes to fold ``(start + j) % K``."""
    n_neg = int(np.count_nonzero(y == 0.0))
    dealt = w[order]
    return [("positive", n_neg, dealt[n_neg:]), ("negative", 0, dealt[:n_neg])]


def _short_fold(
    blocks: Sequence[_ClassBlock], n_folds: int, unit: float, needed: int
) -> tuple[int, str, float] | None:
    """The (0-based) fold whose fit has the fewest rows of a class, the class and that count,
    when below ``needed``; else None."""
    worst: tuple[int, str, float] | None = None
    for label, start, weights in blocks:
        place = (start + np.arange(weights.shape[0], dtype=np.int64)) % n_folds
        held = np.bincount(place, weights=weights, minlength=n_folds)
        rest = (float(np.sum(weights)) - held) / unit
        fold = int(np.argmin(rest))
        count = float(rest[fold])
        if below_minimum(count, needed) and (worst is None or count < worst[2]):
            worst = (fold, label, count)
    return worst


def _fewest_folds(
    blocks: Sequence[_ClassBlock], n_folds: int, unit: float, needed: int
) -> int | None:
    """The fewest folds above ``n_folds`` whose fits all have ``needed`` rows of each class.

    More folds leave each fit more rows: with K at least a class's rows, every fold holds at
    most one of them and its fits have all of its rows but one, the most they can have; so
    if that falls short for a class no K passes, and K = the larger class's rows always does.
    """
    for _, _, weights in blocks:
        if weights.size == 0 or below_minimum(
            (float(np.sum(weights)) - float(np.max(weights))) / unit, needed
        ):
            return None
    most = max(weights.shape[0] for _, _, weights in blocks)
    for more in range(n_folds + 1, most + 1):
        if _short_fold(blocks, more, unit, needed) is None:
            return more
    return None


def _require_fold_support(
    y: FloatArray, w: FloatArray, order: IntArray, n_folds: int, unit: float, needed: int
) -> None:
    """Raise :class:`FoldSupportError` when a fold's fit would have fewer than ``needed``
    rows of a class (counted in ``unit``, the weight of one row of all the data)."""
    blocks = _class_blocks(y, w, order)
    short = _short_fold(blocks, n_folds, unit, needed)
    if short is None:
        return
    fold, label, rows = short
    shortfall = FoldShortfall(
        fold=fold + 1,
        n_folds=n_folds,
        label=label,
        rows=rows,
        needed=needed,
        fewest_folds=_fewest_folds(blocks, n_folds, unit, needed),
    )
    remedy = (
        f"{shortfall.fewest_folds} folds leave every fit enough"
        if shortfall.fewest_folds is not None
        else "no number of folds leaves every fit enough"
    )
    raise FoldSupportError(
        f"fold {fold + 1} of {n_folds}: its map would be fitted on the other folds, which "
        f"hold {class_rows_text(rows, label)}; every fit needs at least {needed} rows of "
        f"each class ({remedy})",
        shortfall,
    )


def _out_of_fold(
    method: FittedMethod,
    x: FloatArray,
    y: FloatArray,
    w: FloatArray,
    folds: IntArray,
    n_folds: int,
    score_kind: ScoreKind,
    options: Mapping[str, Any],
) -> FloatArray:
    """Each fold calibrated by the map fitted on the other folds, every fit counting rows in
    the unit of all the rows (module docstring)."""
    unit = _fold_unit(w)
    result = np.empty(x.shape[0])
    for fold in range(n_folds):
        test = folds == fold
        if not test.any():
            continue
        train = ~test
        try:
            params = fit_calibrator(
                method,
                x[train],
                y[train],
                sample_weight=w[train],
                score_kind=score_kind,
                weight_unit=unit,
                **options,
            )
        except InputError as exc:
            raise InputError(f"fold {fold + 1} of {n_folds}: {exc}") from None
        result[test] = apply_calibrator(params, x[test])
    return result


def _fold_unit(w: FloatArray) -> float:
    """The weight of one row in every fold's fit: that of all the rows (module docstring)."""
    return check_weight_unit(None, w)


def cross_fit(
    method: FittedMethod,
    scores: npt.ArrayLike,
    y_true: npt.ArrayLike,
    *,
    sample_weight: npt.ArrayLike | None = None,
    n_folds: int = 5,
    rng: np.random.Generator,
    score_kind: ScoreKind = "probability",
    required_rows: int | None = None,
    **options: Any,
) -> FloatArray:
    """Out-of-fold calibrated probabilities (K-fold cross-fitting, stratified by label).

    Parameters
    ----------
    method : {"platt", "isotonic", "beta", "histogram"}
        Which calibrator to fit on each training part.
    scores, y_true : array-like of shape (n_rows,)
        Scores and binary labels; each class needs at least 2 rows.
    sample_weight : array-like of shape (n_rows,), optional
        Non-negative row weights, used by every fit.
    n_folds : int, default 5
        Number of folds K (at least 2).
    rng : numpy.random.Generator
        Source of the fold assignment (the same generator state gives the same folds).
    score_kind : {"probability", "logit", "raw"}, default "probability"
        What the scores are (only Platt takes logit or raw scores).
    required_rows : int, optional
        The rows of each class every fold's fit needs, counted by weight in the unit of all
        the rows (:func:`calib_cli.core.fit_support.min_class_rows` of the method); checked
        on the folds drawn, before any fit. None: not checked.
    **options
        Passed on to the method's fit function.

    Returns
    -------
    ndarray of shape (n_rows,)
        For each row, the calibrated probability from the map fitted without its fold.

    Raises
    ------
    FoldSupportError
        When a fold's fit would have fewer than ``required_rows`` rows of a class; its
        ``shortfall`` names the fold, the count and the fewest folds that would pass.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> out = cross_fit("platt", [0.1, 0.2, 0.3, 0.4, 0.6, 0.7, 0.8, 0.9],
    ...                 [0, 0, 1, 0, 1, 0, 1, 1], n_folds=2, rng=rng)
    >>> out.shape, bool(((out > 0) & (out < 1)).all())
    ((8,), True)
    """
    checked = _check_method(method)
    kind = check_score_kind(score_kind)
    _require_kind_supported(checked, kind)
    x, y, w = check_fit_data(scores, y_true, sample_weight, score_kind=kind)
    k = _check_n_folds(n_folds, y)
    order = _dealing_order(y, rng)
    if required_rows is not None:
        _require_fold_support(y, w, order, k, _fold_unit(w), required_rows)
    return _out_of_fold(checked, x, y, w, _deal(order, k), k, kind, options)


def cross_val_log_loss(
    method: FittedMethod,
    scores: npt.ArrayLike,
    y_true: npt.ArrayLike,
    *,
    sample_weight: npt.ArrayLike | None = None,
    n_folds: int = 5,
    rng: np.random.Generator,
    score_kind: ScoreKind = "probability",
    **options: Any,
) -> float:
    """Weighted log loss of the out-of-fold calibrated probabilities of :func:`cross_fit`.

    .. math::

        -\\frac{1}{\\sum_i w_i} \\sum_i w_i [y_i \\log \\hat p_i + (1 - y_i) \\log(1 - \\hat p_i)],

    with :math:`\\hat p_i` clipped to ``[1e-15, 1 - 1e-15]``.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> loss = cross_val_log_loss("beta", [0.1, 0.2, 0.3, 0.4, 0.6, 0.7, 0.8, 0.9],
    ...                           [0, 0, 1, 0, 1, 0, 1, 1], n_folds=2, rng=rng)
    >>> 0.0 < loss < 2.0
    True
    """
    checked = _check_method(method)
    kind = check_score_kind(score_kind)
    _require_kind_supported(checked, kind)
    x, y, w = check_fit_data(scores, y_true, sample_weight, score_kind=kind)
    k = _check_n_folds(n_folds, y)
    folds = _stratified_folds(y, k, rng)
    prob = _out_of_fold(checked, x, y, w, folds, k, kind, options)
    return log_loss(y, prob, sample_weight=w)


def choose_method(
    scores: npt.ArrayLike,
    y_true: npt.ArrayLike,
    *,
    sample_weight: npt.ArrayLike | None = None,
    n_folds: int = 5,
    rng: np.random.Generator,
    score_kind: ScoreKind = "probability",
    candidates: Sequence[FittedMethod] = _METHODS,
    method_options: Mapping[str, Mapping[str, Any]] | None = None,
) -> MethodChoice:
    """Pick the calibration method with the lowest cross-validated log loss (``auto``).

    Every candidate is cross-fitted on the same stratified folds (drawn once from ``rng``);
    the table reports each one's out-of-fold weighted log loss and Brier score.

    Parameters
    ----------
    scores, y_true, sample_weight, n_folds, rng, score_kind
        As for :func:`cross_fit`.
    candidates : sequence of method names, default all four
        Methods to compare, in order of preference on a tie. With logit or raw scores only
        ``("platt",)`` is allowed.
    method_options : mapping, optional
        Per-method fit options, e.g. ``{"isotonic": {"eps": 1e-4}}``; entries for methods
        that are not candidates are ignored.

    Returns
    -------
    MethodChoice
        ``chosen``, ``n_folds`` and the ``candidates`` table of :class:`MethodScore`.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> scores = np.linspace(0.05, 0.95, 40)
    >>> labels = (np.arange(40) % 3 == 0) | (scores > 0.6)
    >>> choice = choose_method(scores, labels, n_folds=4, rng=rng)
    >>> choice.chosen in ("platt", "isotonic", "beta", "histogram"), len(choice.candidates)
    (True, 4)
    """
    methods = [_check_method(m) for m in candidates]
    if not methods:
        raise InputError("candidates must name at least one method")
    if len(set(methods)) != len(methods):
        raise InputError(f"candidates must not repeat a method, got {list(candidates)!r}")
    kind = check_score_kind(score_kind)
    refused = [m for m in methods if kind != "probability" and m in PROBABILITY_ONLY]
    if refused:
        raise InputError(
            f"candidates {', '.join(refused)} need probability scores, got "
            f"score_kind={kind!r}; pass candidates=('platt',) or convert the scores with expit"
        )
    options = dict(method_options or {})
    unknown = sorted(set(options) - set(_METHODS))
    if unknown:
        raise InputError(f"method_options names unknown methods: {', '.join(unknown)}")
    x, y, w = check_fit_data(scores, y_true, sample_weight, score_kind=kind)
    k = _check_n_folds(n_folds, y)
    folds = _stratified_folds(y, k, rng)
    table = []
    for method in methods:
        prob = _out_of_fold(method, x, y, w, folds, k, kind, options.get(method, {}))
        table.append(
            MethodScore(
                method=method,
                cv_log_loss=log_loss(y, prob, sample_weight=w),
                cv_brier=brier_score(y, prob, sample_weight=w),
            )
        )
    best = min(range(len(table)), key=lambda i: (table[i].cv_log_loss, i))
    return MethodChoice(chosen=table[best].method, n_folds=k, candidates=tuple(table))
