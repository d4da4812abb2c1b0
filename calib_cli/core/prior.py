"""Prior (odds) correction: undo class-wise sampling or move scores to another base rate.

A model trained where the positive odds were multiplied by a constant sees every posterior odds
multiplied by that constant, because the class-conditional densities P(x | y) are unchanged
(Bayes' rule; Elkan 2001). Undoing it multiplies the odds back, which is a shift of the log-odds:

.. math::

    \\operatorname{logit} p = \\operatorname{logit} p' + \\log w,
    \\qquad p = \\frac{p'}{p' + (1 - p') / w}.

Two ways to name the shift :math:`\\log w` (:func:`prior_shift_log_odds`):

* class-wise sampling kept each negative with probability ``negative_rate`` and each positive
  with probability ``positive_rate``: :math:`w = \\text{negative\\_rate} / \\text{positive\\_rate}`;
* a general prior shift from ``train_prior`` (the positive rate the model was trained at) to
  ``target_prior``: :math:`\\log w = \\operatorname{logit}(\\text{target\\_prior}) -
  \\operatorname{logit}(\\text{train\\_prior})`.

The correction is strictly increasing, so it never changes a ranking (AUC is unchanged).

References
----------
C. Elkan, "The Foundations of Cost-Sensitive Learning", IJCAI 2001, Theorem 2.
J. Haupt, "Recalibration after Negative Sampling" (references/000).
References/003: the odds identity o = o' r and the equivalent bias shift log r.
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

from calib_cli.core import elementary as el
from calib_cli.core.checks import check_scores
from calib_cli.errors import InputError, OptionError, UsageError
from calib_cli.types import FloatArray, ScoreKind


def _check_rate(value: float, option: str) -> float:
    rate = float(value)
    if not (math.isfinite(rate) and 0.0 < rate <= 1.0):
        raise OptionError(f"{option} must be a rate in (0, 1], got {value!r}")
    return rate


def _check_prior(value: float, option: str) -> float:
    prior = float(value)
    if not (math.isfinite(prior) and 0.0 < prior < 1.0):
        raise OptionError(f"{option} must be strictly between 0 and 1, got {value!r}")
    return prior


def _log_odds(prior: float) -> float:
    """log(prior / (1 - prior)), accurate near 0 (log1p) and near 1 (1 - prior is exact)."""
    if prior <= 0.5:
        return math.log(prior) - math.log1p(-prior)
    return math.log(prior) - math.log(1.0 - prior)


def prior_shift_log_odds(
    *,
    negative_rate: float | None = None,
    positive_rate: float = 1.0,
    train_prior: float | None = None,
    target_prior: float | None = None,
) -> float:
    """The log-odds shift :math:`\\log w` that maps sampled-world scores to the true world.

    Give either ``negative_rate`` (with ``positive_rate`` when positives were sampled too), or
    both ``train_prior`` and ``target_prior``.

    Parameters
    ----------
    negative_rate : float, optional
        Probability with which each negative row was kept when the training set was sampled,
        in (0, 1] (``--negative-rate``).
    positive_rate : float, default 1.0
        Probability with which each positive row was kept, in (0, 1] (``--positive-rate``).
    train_prior : float, optional
        Positive rate the model was trained or calibrated at, in (0, 1) (``--train-prior``).
    target_prior : float, optional
        Positive rate of the population being scored, in (0, 1) (``--target-prior``).

    Returns
    -------
    float
        :math:`\\log w`, with true odds = sampled odds times :math:`w`:
        ``log(negative_rate) - log(positive_rate)``, or
        ``logit(target_prior) - logit(train_prior)``.

    Raises
    ------
    InputError
        A rate outside (0, 1] or a prior outside (0, 1).
    UsageError
        Neither or both ways of naming the shift, or only one of the two priors.

    Notes
    -----
    Sampling keeps a fraction ``positive_rate`` of the positives and ``negative_rate`` of the
    negatives, so the sampled odds are the true odds times ``positive_rate / negative_rate``
    and the correction multiplies them by ``w = negative_rate / positive_rate`` (Elkan 2001).

    Examples
    --------
    >>> round(prior_shift_log_odds(negative_rate=0.1), 12)
    -2.302585092994
    >>> round(prior_shift_log_odds(train_prior=0.5, target_prior=0.1), 12)
    -2.197224577336
    """
    by_priors = train_prior is not None or target_prior is not None
    if negative_rate is not None:
        if by_priors:
            raise UsageError(
                "give either --negative-rate (and --positive-rate) or --train-prior with "
                "--target-prior, not both"
            )
        neg = _check_rate(negative_rate, "--negative-rate")
        pos = _check_rate(positive_rate, "--positive-rate")
        return math.log(neg) - math.log(pos)
    if not by_priors:
        raise UsageError(
            "give --negative-rate (and optionally --positive-rate), "
            "or --train-prior with --target-prior"
        )
    if train_prior is None or target_prior is None:
        missing = "--train-prior" if train_prior is None else "--target-prior"
        raise UsageError(f"{missing} is required with a prior shift (give both priors)")
    if float(positive_rate) != 1.0:
        raise UsageError("--positive-rate only goes with --negative-rate, not with the priors")
    train = _check_prior(train_prior, "--train-prior")
    target = _check_prior(target_prior, "--target-prior")
    return _log_odds(target) - _log_odds(train)


def _check_shift(log_odds_shift: float | npt.ArrayLike, n_rows: int) -> FloatArray | float:
    arr = np.asarray(log_odds_shift, dtype=np.float64)
    if arr.ndim == 0:
        value = float(arr)
        if not math.isfinite(value):
            raise InputError(f"log_odds_shift must be finite, got {value!r}")
        return value
    if arr.shape != (n_rows,):
        raise InputError(
            f"log_odds_shift has shape {arr.shape}; give one number or one per row ({n_rows})"
        )
    bad = ~np.isfinite(arr)
    if bad.any():
        first = int(np.flatnonzero(bad)[0])
        raise InputError(
            f"log_odds_shift has {int(bad.sum())} non-finite values "
            f"(first at row {first + 1}: {arr[first]!r})"
        )
    return arr


def apply_prior_shift(
    scores: npt.ArrayLike,
    log_odds_shift: float | npt.ArrayLike,
    *,
    score_kind: ScoreKind = "probability",
) -> FloatArray:
    """Shift scores by ``log_odds_shift`` in log-odds space.

    Parameters
    ----------
    scores : array_like, shape (n,)
        Probabilities in [0, 1] (``score_kind="probability"``) or finite log-odds
        (``score_kind="logit"``).
    log_odds_shift : float or array_like of shape (n,)
        :math:`\\log w` from :func:`prior_shift_log_odds`; one per row for stratified sampling
        records (each row shifted by its stratum's value).
    score_kind : {"probability", "logit", "raw"}, default "probability"
        ``"raw"`` scores (margins of unknown scale) are refused: calibrate them first.

    Returns
    -------
    ndarray of float64, shape (n,)
        Corrected probabilities :math:`p = p' / (p' + (1 - p') / w)`, or log-odds
        :math:`z + \\log w` for logit scores. A new array; ``scores`` is not modified.

    Notes
    -----
    Probabilities are not sent through ``logit``: its absolute error grows like
    :math:`|\\operatorname{logit} p'| \\varepsilon`, a relative error of about 1e-13 at
    :math:`p' = 10^{-300}`. Instead, with :math:`t = e^{-|\\log w|} \\le 1` (never overflows)
    and :math:`p = 1 / (1 + q)`,

    * :math:`\\log w \\le 0`: :math:`q = (1 - p') / (p' t)`;
    * :math:`\\log w > 0`: :math:`q = (1 - p') t / p'`.

    Each step is one correctly rounded operation that is monotone in :math:`p'`, so the result
    is within a few units in the last place of the exact value (tested to 1e-15 relative on
    [0, 1] including 1e-300 and 1 - 1e-16), is exactly 0 at :math:`p' = 0` and exactly 1 at
    :math:`p' = 1`, is never NaN, and never reverses the order of two scores (ties stay
    ties; two scores closer than the rounding of the result may become equal). A shift of
    exactly 0 returns the scores unchanged. Results below the smallest normal double
    (about 2.2e-308) lose relative precision, and those below about 5.6e-309 (where
    :math:`q` overflows) are 0.

    References
    ----------
    C. Elkan, "The Foundations of Cost-Sensitive Learning", IJCAI 2001.

    Examples
    --------
    >>> apply_prior_shift([0.0, 0.5, 1.0], np.log(0.1)).round(6).tolist()
    [0.0, 0.090909, 1.0]
    >>> apply_prior_shift([2.0], -1.5, score_kind="logit").tolist()
    [0.5]
    """
    if score_kind == "raw":
        raise InputError(
            "--score-kind raw: raw scores are not probabilities or log-odds, so a prior "
            "shift is undefined; calibrate them first (e.g. --method platt), or pass "
            "--score-kind logit if they are log-odds"
        )
    if score_kind not in ("probability", "logit"):
        raise OptionError(f"--score-kind must be probability, logit or raw, got {score_kind!r}")
    values = check_scores(scores, kind=score_kind)
    shift = _check_shift(log_odds_shift, values.shape[0])
    if score_kind == "logit":
        return np.asarray(values + shift, dtype=np.float64)

    shift_arr = np.broadcast_to(np.asarray(shift, dtype=np.float64), values.shape)
    # in (0, 1]; may underflow to 0 for |shift| > ~745; once for a shift shared by every row
    t = np.broadcast_to(el.exp(-np.abs(np.asarray(shift, dtype=np.float64))), values.shape)
    complement = 1.0 - values
    with np.errstate(divide="ignore", invalid="ignore", over="ignore", under="ignore"):
        q = np.where(
            shift_arr <= 0.0,
            complement / (values * t),
            (complement * t) / values,
        )
        out = 1.0 / (1.0 + q)
    # The endpoints are exact, and they are the only places a 0/0 can arise (p' = 0 with t
    # underflowed to 0 for a huge positive shift, or p' = 1 with t = 0 for a huge negative one).
    out = np.where(values == 0.0, 0.0, out)
    out = np.where(values == 1.0, 1.0, out)
    # A zero shift is the identity, bit for bit.
    out = np.where(shift_arr == 0.0, values, out)
    return np.asarray(out, dtype=np.float64)


#: How many standard errors the fit data's log-odds must lie past the midpoint between the
#: population's and the sampled log-odds for :func:`base_rate_looks_sampled`.
SAMPLED_LIKE_Z = 3.0
#: How far (as a fraction of the sampling's log-odds shift) from the population rate towards
#: the sampled rate the fit data's base rate must lie for :func:`base_rate_looks_sampled`.
SAMPLED_LIKE_POSITION = 0.75


def base_rate_looks_sampled(
    positives: float,
    negatives: float,
    *,
    population_rate: float,
    sampled_rate: float,
    z: float = SAMPLED_LIKE_Z,
    position: float = SAMPLED_LIKE_POSITION,
) -> bool:
    """Whether labelled data whose class weights are ``positives`` and ``negatives`` look
    drawn at ``sampled_rate`` (the base rate after sampling) rather than at
    ``population_rate``: far closer to the sampled rate, and significantly so.

    On the log-odds scale, let :math:`t = (\\operatorname{logit} \\hat b -
    \\operatorname{logit} \\pi_p) / (\\operatorname{logit} \\pi_s - \\operatorname{logit}
    \\pi_p)` be where the data's base rate :math:`\\hat b = N_+ / (N_+ + N_-)` lies between
    the population rate (0) and the sampled rate (1). The data look sampled when

    * :math:`t \\ge` ``position`` (0.75: the base rate is at least three times closer to the
      sampled rate than to the population rate), and
    * a one-sided z-test rejects :math:`t \\le 1/2` (closer to the population rate) at
      ``z`` standard errors (3: p < 0.0014), with the binomial standard error of the
      log-odds, :math:`1 / \\sqrt{N \\hat b (1 - \\hat b)}` (delta method), so that a handful of
      rows never triggers it.

    Weights count as rows (frequency weights). Data of one class, or rates that do not
    differ, never look sampled.

    >>> base_rate_looks_sampled(553, 3002, population_rate=0.0184, sampled_rate=0.156)
    True
    >>> base_rate_looks_sampled(553, 29447, population_rate=0.0184, sampled_rate=0.156)
    False
    >>> base_rate_looks_sampled(3, 17, population_rate=0.0184, sampled_rate=0.156)
    False
    """
    total = positives + negatives
    if positives <= 0.0 or negatives <= 0.0 or not 0.0 < population_rate < 1.0:
        return False
    if not 0.0 < sampled_rate < 1.0:
        return False
    shift = _log_odds(sampled_rate) - _log_odds(population_rate)
    if shift == 0.0:
        return False
    rate = positives / total
    t = (_log_odds(rate) - _log_odds(population_rate)) / shift
    standard_error = 1.0 / math.sqrt(total * rate * (1.0 - rate)) / abs(shift)
    return t >= position and (t - 0.5) / standard_error >= z
