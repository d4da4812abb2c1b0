"""Learning from late labels: backtests of batch estimates, history blends, conformal widths.

A job that estimates each batch's positive rate from scores gets the batch's labels later
(chargebacks, defaults, conversions): batch :math:`t` is estimated when the labels of batches
up to :math:`t - K` have arrived (``label_delay`` :math:`K \\ge 1`). Everything here uses, for
batch :math:`t`, the true rates :math:`y_s` of batches :math:`s \\le t - K` only, so a
backtest on a labelled file shows what the job would have reported (tests poison the later
labels and check nothing moves).

Candidates (:func:`history_candidates`), each a number per batch:

* the label-shift estimate and PCC of batch :math:`t` (scores only: no labels),
* ``no shift``: the reference rate,
* the rolling mean of the last :math:`W` labelled rates (:func:`rolling_rate`),
* PCC corrected by its mean error over the last :math:`W` labelled batches
  (:func:`residual_corrected`: a rolling recalibration of the mean posterior).

The blend (:func:`history_blend`) weights the candidates by the inverse of their mean squared
error on the labelled batches (each candidate's past value was itself computed from the labels
available then, so these errors are out of sample):
:math:`\\hat y_t = \\sum_j w_{tj} c_{tj}`,
:math:`w_{tj} \\propto 1 / \\mathrm{mean}_{s \\le t-K} (c_{sj} - y_s)^2`. This is the
forecast combination of Bates and Granger (1969), optimal for unbiased candidates with
uncorrelated errors and, with few past batches, more accurate than picking the candidate that
led so far (its lead is mostly noise): it keeps candidates that err differently, and a
candidate that is right on this data (the label-shift estimate under label shift, PCC under
covariate shift) gains weight as batches accumulate.

Its interval is split-conformal on the blend's own past absolute errors
:math:`r_s = |\\hat y_s - y_s|`, :math:`s \\le t - K`: the half-width is the
:math:`\\lceil (n + 1)\\,\\mathrm{level} \\rceil`-th smallest of the :math:`n` errors
(:func:`conformal_halfwidth`), which covers a new error exchangeable with the past ones with
probability at least ``level`` (Vovk, Gammerman and Shafer 2005; Lei et al. 2018). With fewer
than :math:`\\lceil \\mathrm{level} / (1 - \\mathrm{level}) \\rceil` past errors (19 at 95%)
no finite width has that guarantee and the interval is [0, 1].

References
----------
J. M. Bates, C. W. J. Granger, "The Combination of Forecasts", Operational Research Quarterly
20, 1969.
V. Vovk, A. Gammerman, G. Shafer, "Algorithmic Learning in a Random World", Springer, 2005.
J. Lei, M. G'Sell, A. Rinaldo, R. J. Tibshirani, L. Wasserman, "Distribution-Free Predictive
Inference for Regression", JASA 113, 2018.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from calib_cli.core.dots import dot
from calib_cli.errors import InputError
from calib_cli.types import FloatArray, IntArray

__all__ = [
    "CANDIDATE_NAMES",
    "HistoryBlend",
    "blend_weights",
    "conformal_halfwidth",
    "conformal_min_errors",
    "history_blend",
    "history_candidates",
    "history_schedule",
    "last_labelled",
    "residual_corrected",
    "rolling_rate",
]

#: The columns of :func:`history_candidates`, in order.
CANDIDATE_NAMES = (
    "label_shift",
    "pcc",
    "no_shift",
    "rolling_1",
    "rolling_4",
    "pcc_corrected_1",
    "pcc_corrected_4",
)


def _check_delay(label_delay: int) -> int:
    if isinstance(label_delay, bool) or not isinstance(label_delay, int | np.integer):
        raise InputError(f"label_delay must be an integer, got {label_delay!r}")
    if label_delay < 1:
        raise InputError(
            f"label_delay must be at least 1 (a batch's own labels arrive after it), "
            f"got {label_delay}"
        )
    return int(label_delay)


def _check_window(window: int) -> int:
    if isinstance(window, bool) or not isinstance(window, int | np.integer) or window < 1:
        raise InputError(f"window must be a positive integer, got {window!r}")
    return int(window)


def _check_rates(values: npt.ArrayLike, name: str) -> FloatArray:
    arr = np.asarray(values, dtype=np.float64)
    if arr.ndim != 1:
        raise InputError(f"{name} must be one-dimensional, got shape {arr.shape}")
    bad = ~(np.isfinite(arr) & (arr >= 0.0) & (arr <= 1.0))
    if bad.any():
        first = int(np.flatnonzero(bad)[0])
        count = int(bad.sum())
        raise InputError(
            f"{name} has {count} value{'s' if count > 1 else ''} that are not rates in [0, 1] "
            f"(first at batch {first + 1}: {float(arr[first])!r})"
        )
    return arr


def last_labelled(n_batches: int, *, label_delay: int) -> IntArray:
    """For each batch, the position of the last batch whose labels it may use.

    Batch :math:`t` (0-based, in time order) sees the labels of batches :math:`0 .. t - K`;
    ``-1`` means none yet.

    Examples
    --------
    >>> last_labelled(5, label_delay=2)
    array([-1, -1,  0,  1,  2])
    """
    delay = _check_delay(label_delay)
    if n_batches < 0:
        raise InputError(f"n_batches must be non-negative, got {n_batches}")
    result: IntArray = np.arange(n_batches, dtype=np.int64) - delay
    return np.maximum(result, -1)


def history_schedule(n_history: int, n_new: int, *, label_delay: int) -> IntArray:
    """The labelled batches each batch may use when ``n_new`` unlabelled batches follow
    ``n_history`` labelled ones (``--history``): a past batch ``s`` sees up to ``s - K`` (as
    it was estimated then), every new batch sees the whole history.

    Examples
    --------
    >>> history_schedule(4, 2, label_delay=2)
    array([-1, -1,  0,  1,  3,  3])
    """
    if n_history < 0 or n_new < 0:
        raise InputError(f"batch counts must be non-negative, got {n_history} and {n_new}")
    past = last_labelled(n_history, label_delay=label_delay)
    return np.concatenate([past, np.full(n_new, n_history - 1, dtype=np.int64)])


def _schedule(n_batches: int, label_delay: int | None, last: npt.ArrayLike | None) -> IntArray:
    """``last_labelled(n_batches, label_delay)``, or ``last`` checked: one integer per batch,
    ``-1 <= last[t] < t`` (no batch sees its own label or a later one)."""
    if (label_delay is None) == (last is None):
        raise InputError("give label_delay or last (one of them)")
    if label_delay is not None:
        return last_labelled(n_batches, label_delay=label_delay)
    arr = np.asarray(last)
    if arr.shape != (n_batches,) or not np.issubdtype(arr.dtype, np.integer):
        raise InputError(f"last must hold one integer per batch ({n_batches}), got {arr!r}")
    result: IntArray = arr.astype(np.int64)
    bad = (result < -1) | (result >= np.arange(n_batches))
    if bad.any():
        first = int(np.flatnonzero(bad)[0])
        raise InputError(
            f"last[{first}] = {int(result[first])}: batch {first} may only use the labels of "
            "earlier batches"
        )
    return result


def rolling_rate(
    rates: npt.ArrayLike,
    *,
    window: int,
    fallback: float,
    label_delay: int | None = None,
    last: npt.ArrayLike | None = None,
) -> FloatArray:
    """The mean true rate of the last ``window`` labelled batches (``fallback`` before any).

    Examples
    --------
    >>> rolling_rate([0.1, 0.2, 0.3, 0.4], label_delay=1, window=2, fallback=0.5)
    array([0.5 , 0.1 , 0.15, 0.25])
    """
    y = _check_rates(rates, "rates")
    schedule = _schedule(y.shape[0], label_delay, last)
    return _rolling_mean(y, schedule, window=window, fallback=fallback)


def _rolling_mean(
    values: FloatArray, schedule: IntArray, *, window: int, fallback: float
) -> FloatArray:
    width = _check_window(window)
    result: FloatArray = np.full(values.shape[0], float(fallback))
    for t, stop in enumerate(schedule + 1):
        if stop > 0:
            result[t] = float(np.mean(values[max(0, stop - width) : stop]))
    return result


def residual_corrected(
    estimates: npt.ArrayLike,
    rates: npt.ArrayLike,
    *,
    window: int,
    label_delay: int | None = None,
    last: npt.ArrayLike | None = None,
) -> FloatArray:
    """Each batch's estimate plus the mean error ``rate - estimate`` of the last ``window``
    labelled batches, clipped to [0, 1] (the estimate itself before any label).

    Examples
    --------
    >>> residual_corrected([0.2, 0.2, 0.3], [0.3, 0.1, 0.5], label_delay=1, window=1)
    array([0.2, 0.3, 0.2])
    """
    est = _check_rates(estimates, "estimates")
    y = _check_rates(rates, "rates")
    if est.shape != y.shape:
        raise InputError(f"estimates has {est.shape[0]} batches and rates {y.shape[0]}")
    schedule = _schedule(y.shape[0], label_delay, last)
    correction = _rolling_mean(y - est, schedule, window=window, fallback=0.0)
    result: FloatArray = np.clip(est + correction, 0.0, 1.0)
    return result


def history_candidates(
    label_shift: npt.ArrayLike,
    pcc: npt.ArrayLike,
    rates: npt.ArrayLike,
    *,
    reference_rate: float,
    label_delay: int | None = None,
    last: npt.ArrayLike | None = None,
) -> FloatArray:
    """The candidates of the blend, one column each (see :data:`CANDIDATE_NAMES`).

    Parameters
    ----------
    label_shift, pcc : array-like of shape (n_batches,)
        Each batch's label-shift estimate and PCC (from its scores alone).
    rates : array-like of shape (n_batches,)
        Each batch's true rate; batch ``t`` uses only ``rates[: t - label_delay + 1]``.
    reference_rate : float
        The reference's positive rate (``no shift``, and the rolling mean before any label).
    label_delay : int, optional
        :math:`K \\ge 1`: batch ``t`` sees the labels of batches up to ``t - K``.
    last : array-like of int, optional
        In place of ``label_delay``: the last labelled batch of each batch
        (:func:`history_schedule`).

    Returns
    -------
    ndarray of shape (n_batches, 7)

    Examples
    --------
    >>> c = history_candidates([0.3, 0.4], [0.2, 0.25], [0.5, 0.1], reference_rate=0.2,
    ...                        label_delay=1)
    >>> c[1].round(3).tolist()
    [0.4, 0.25, 0.2, 0.5, 0.5, 0.55, 0.55]
    """
    shift = _check_rates(label_shift, "label_shift")
    posterior_mean = _check_rates(pcc, "pcc")
    y = _check_rates(rates, "rates")
    if not (shift.shape == posterior_mean.shape == y.shape):
        raise InputError(
            f"label_shift, pcc and rates must have one value per batch, got "
            f"{shift.shape[0]}, {posterior_mean.shape[0]} and {y.shape[0]}"
        )
    if not (math.isfinite(reference_rate) and 0.0 <= reference_rate <= 1.0):
        raise InputError(f"reference_rate must be in [0, 1], got {reference_rate!r}")
    schedule = _schedule(y.shape[0], label_delay, last)
    columns = [shift, posterior_mean, np.full(y.shape[0], float(reference_rate))]
    for window in (1, 4):
        columns.append(_rolling_mean(y, schedule, window=window, fallback=reference_rate))
    for window in (1, 4):
        correction = _rolling_mean(y - posterior_mean, schedule, window=window, fallback=0.0)
        columns.append(np.clip(posterior_mean + correction, 0.0, 1.0))
    return np.column_stack(columns)


def blend_weights(errors: npt.ArrayLike) -> FloatArray:
    """Inverse-mean-squared-error weights of candidates from their past errors.

    Parameters
    ----------
    errors : array-like of shape (n_past, n_candidates)
        Each candidate's error on each labelled batch (at least one row).

    Returns
    -------
    ndarray of shape (n_candidates,)
        :math:`w_j \\propto 1 / \\mathrm{mean}_s e_{sj}^2` (Bates and Granger 1969), summing to
        1; candidates with no error at all share the whole weight.

    Examples
    --------
    >>> blend_weights([[0.1, -0.2], [-0.1, 0.2]]).round(4).tolist()
    [0.8, 0.2]
    """
    err = np.asarray(errors, dtype=np.float64)
    if err.ndim != 2 or err.shape[0] < 1 or err.shape[1] < 1:
        raise InputError(f"errors must be a non-empty 2-D array, got shape {err.shape}")
    if not np.isfinite(err).all():
        raise InputError("errors must be finite")
    mean = np.square(err).mean(axis=0)
    exact = mean == 0.0
    inverse = exact.astype(np.float64) if exact.any() else 1.0 / mean
    result: FloatArray = inverse / inverse.sum()
    return result


def conformal_halfwidth(abs_residuals: npt.ArrayLike, *, level: float) -> float:
    """Split-conformal half-width: the :math:`\\lceil (n+1)\\,\\mathrm{level} \\rceil`-th
    smallest of ``n`` past absolute errors, ``inf`` when that exceeds ``n``.

    Examples
    --------
    >>> conformal_halfwidth(np.arange(1, 20) / 100, level=0.95)
    0.19
    >>> conformal_halfwidth(np.arange(1, 19) / 100, level=0.95)
    inf
    """
    if not (math.isfinite(level) and 0.0 < level < 1.0):
        raise InputError(f"level must be in (0, 1), got {level!r}")
    r = np.abs(np.asarray(abs_residuals, dtype=np.float64)).ravel()
    if not np.isfinite(r).all():
        raise InputError("abs_residuals must be finite")
    n = r.shape[0]
    # the rank, computed so that (n + 1) * level landing on an integer is not pushed up by
    # the rounding of the product (0.95 * 20 = 19.000000000000004)
    rank = math.ceil((n + 1) * level - 1e-9)
    if rank > n:
        return math.inf
    return float(np.partition(r, rank - 1)[rank - 1])


def conformal_min_errors(level: float) -> int:
    """The fewest past errors for which :func:`conformal_halfwidth` is finite:
    :math:`\\lceil (n+1)\\,\\mathrm{level} \\rceil \\le n \\iff n \\ge \\mathrm{level} /
    (1 - \\mathrm{level})`.

    Examples
    --------
    >>> conformal_min_errors(0.95), conformal_min_errors(0.9), conformal_min_errors(0.8)
    (19, 9, 4)
    """
    if not (math.isfinite(level) and 0.0 < level < 1.0):
        raise InputError(f"level must be in (0, 1), got {level!r}")
    return max(math.ceil(level / (1.0 - level) - 1e-9), 1)


@dataclass(frozen=True)
class HistoryBlend:
    """Each batch's blend of candidates fitted on the labelled batches before it.

    Attributes
    ----------
    prevalence : ndarray of shape (n_batches,)
        :math:`\\sum_j w_{tj} c_{tj}`.
    weights : ndarray of shape (n_batches, n_candidates)
        The weights used for each batch (one-hot on ``fallback`` before ``min_history``
        labelled batches).
    n_history : ndarray of shape (n_batches,)
        Labelled batches the weights and the interval of each batch were learnt from.
    ci_low, ci_high : ndarray of shape (n_batches,)
        ``prevalence -/+ halfwidth`` clipped to [0, 1].
    halfwidth : ndarray of shape (n_batches,)
        The conformal half-width (``inf`` with too few past errors: the interval is [0, 1]).
    level : float
        Nominal coverage of the interval.
    """

    prevalence: FloatArray
    weights: FloatArray
    n_history: IntArray
    ci_low: FloatArray
    ci_high: FloatArray
    halfwidth: FloatArray
    level: float


def history_blend(
    candidates: npt.ArrayLike,
    rates: npt.ArrayLike,
    *,
    label_delay: int | None = None,
    last: npt.ArrayLike | None = None,
    min_history: int = 2,
    fallback: int = 1,
    level: float = 0.95,
) -> HistoryBlend:
    """Blend candidates by their past errors, with conformal intervals (see module notes).

    Parameters
    ----------
    candidates : array-like of shape (n_batches, n_candidates)
        Each batch's candidate estimates (e.g. :func:`history_candidates`); candidate values
        of batch ``t`` must use no label after batch ``t - label_delay``.
    rates : array-like of shape (n_batches,)
        True rates; batch ``t`` uses ``rates[: t - label_delay + 1]`` only.
    label_delay : int, optional
        :math:`K \\ge 1`: batch ``t`` sees the labels of batches up to ``t - K``.
    last : array-like of int, optional
        In place of ``label_delay``: each batch's last labelled batch
        (:func:`history_schedule`); the rates of batches no batch sees are never read (so
        unlabelled batches may hold any rate, e.g. 0).
    min_history : int, default 2
        Labelled batches needed before the weights are learnt; before, the ``fallback``
        candidate alone (default 1: PCC in :func:`history_candidates`).
    level : float, default 0.95
        Nominal coverage of the conformal interval.

    Returns
    -------
    HistoryBlend

    Examples
    --------
    >>> c = np.array([[0.1, 0.3], [0.2, 0.3], [0.3, 0.3], [0.4, 0.3]])
    >>> blend = history_blend(c, [0.1, 0.2, 0.3, 0.4], label_delay=1, min_history=1)
    >>> blend.prevalence.tolist(), blend.n_history.tolist()
    ([0.3, 0.2, 0.3, 0.4], [0, 1, 2, 3])
    """
    cand = np.asarray(candidates, dtype=np.float64)
    if cand.ndim != 2 or cand.shape[1] < 1:
        raise InputError(f"candidates must be a 2-D array with a column each, got {cand.shape}")
    if not np.isfinite(cand).all():
        raise InputError("candidates must be finite")
    y = _check_rates(rates, "rates")
    if cand.shape[0] != y.shape[0]:
        raise InputError(f"candidates has {cand.shape[0]} batches and rates {y.shape[0]}")
    if isinstance(min_history, bool) or not isinstance(min_history, int) or min_history < 1:
        raise InputError(f"min_history must be a positive integer, got {min_history!r}")
    if not 0 <= fallback < cand.shape[1]:
        raise InputError(f"fallback must be a candidate column, got {fallback!r}")
    n, m = cand.shape
    schedule = _schedule(n, label_delay, last)
    weights = np.zeros((n, m))
    prevalence = np.empty(n)
    halfwidth = np.empty(n)
    for t in range(n):
        seen = int(schedule[t]) + 1  # batches 0 .. schedule[t] are labelled
        if seen >= min_history:
            weights[t] = blend_weights(cand[:seen] - y[:seen, None])
        else:
            weights[t, fallback] = 1.0
        prevalence[t] = dot(cand[t], weights[t])
        # prevalence[s] for s < seen used labels up to s - K only: its error is out of sample
        halfwidth[t] = conformal_halfwidth(prevalence[:seen] - y[:seen], level=level)
    return HistoryBlend(
        prevalence=prevalence,
        weights=weights,
        n_history=schedule + 1,
        ci_low=np.clip(prevalence - halfwidth, 0.0, 1.0),
        ci_high=np.clip(prevalence + halfwidth, 0.0, 1.0),
        halfwidth=halfwidth,
        level=level,
    )
