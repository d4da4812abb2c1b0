"""Whether fit data can support a calibration map: both classes, enough rows of each, scores
that vary. Degenerate data are refused before any fit, with one message naming the problem.

A fit on data that cannot support it still returns numbers: Platt's fit on a constant score
has slope 0 and maps every future score to the base rate; a fit on three positives is noise.
A scheduled refit on a broken day would save such a map. The rules, checked in this order:

1. **Both classes** carry positive weight.
2. **Enough rows of each class.** Rows are counted by weight (a row of weight 2 counts as two
   rows, as everywhere in calib; weights below 1 on average, e.g. normalised to sum to 1,
   count in units of their mean, :func:`~calib_cli.core.metrics.count_unit`), and the
   smaller class must reach the method's minimum (:data:`MIN_CLASS_ROWS`):

   * ``platt``: 10. One covariate (the score's log-odds) and an intercept: the classic floor
     of 10 events per covariate for a logistic regression (Peduzzi et al. 1996), where the
     events are the rows of the smaller class.
   * ``beta``: 20. Two covariates (``ln p`` and ``-ln(1 - p)``): 10 events for each.
   * ``isotonic``: 10. A step map with one level per block of pooled rows; it has at least
     as many free levels as Platt has parameters, so it cannot need fewer rows (practical
     advice, e.g. Niculescu-Mizil and Caruana 2005, asks for far more: about a thousand).
   * ``histogram``: ``max(10, n_bins)``: the same floor, and at least one row of the smaller
     class per bin on average, else most bins hold none of it and their rates are the prior.
   * ``auto``: the least demanding candidate's minimum (10); the candidates whose own minimum
     is not met are left out of the comparison (:func:`supported_methods`).

   Cross-fitting holds every fold's fit, made on the other folds, to the same minimum
   (:func:`calib_cli.core.selection.cross_fit` with ``required_rows``): the whole data can
   meet it while each fit, on (K - 1)/K of them, does not.

3. **Scores that vary.** The spread of what the map reads, over the rows of positive weight,
   must be at least :data:`MIN_SPREAD`. For probabilities the spread is measured in log-odds,
   ``logit(max) - logit(min)`` (scores clipped to ``[1e-12, 1 - 1e-12]``, as Platt's and
   beta's features are): the scale on which the maps work and on which a rare-event model's
   scores (1e-7 to 1e-5) spread as much as a balanced one's. Logit scores are log-odds
   already; raw margins have no scale, so their spread is relative to the largest magnitude.
   A log-odds spread below 1e-6 is a constant score plus rounding noise: a float32 score near
   0.5 moves by 2.4e-7 in log-odds per unit of its last place, and the streaming engine's fit
   grid (cells 2^-20 wide relative to the tail, 1e-6 to 2e-6 in log-odds) cannot tell such
   scores apart. The check uses only the smallest and largest score and the weight of each
   class, which a summary keeps exactly, so a fit on rows and a fit on a summary are refused
   alike, with the same message.

References
----------
P. Peduzzi, J. Concato, E. Kemper, T. R. Holford and A. R. Feinstein, "A simulation study of
the number of events per variable in logistic regression analysis", J. Clin. Epidemiol. 49,
1996.
A. Niculescu-Mizil and R. Caruana, "Predicting Good Probabilities With Supervised Learning",
ICML 2005.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
import numpy.typing as npt

from calib_cli.core.checks import (
    check_labels,
    check_scores,
    check_weights,
    require_same_length,
)
from calib_cli.core.metrics import count_unit
from calib_cli.errors import InputError
from calib_cli.types import FittedMethod, FloatArray, ScoreKind

__all__ = [
    "MIN_CLASS_ROWS",
    "MIN_SPREAD",
    "FitFacts",
    "below_minimum",
    "check_weight_unit",
    "class_rows_text",
    "fit_facts",
    "min_class_rows",
    "require_fit_support",
    "score_spread",
    "spread_problem",
    "supported_methods",
]

#: The fewest rows (counted by weight) of the smaller class each method is fitted on.
MIN_CLASS_ROWS: dict[str, int] = {"platt": 10, "isotonic": 10, "beta": 20, "histogram": 10}
#: The smallest spread of the scores a map is fitted on (log-odds, or relative for raw scores).
MIN_SPREAD = 1e-6
#: The clip of probability scores before their log-odds (Platt's and beta's ``eps``).
SPREAD_EPS = 1e-12


@dataclass(frozen=True)
class FitFacts:
    """What decides whether data can support a fit (exact in a summary as on rows).

    Attributes
    ----------
    lowest, highest : float
        The smallest and largest score among rows of positive weight.
    positives, negatives : float
        The rows of each class: their weight, in units of the mean weight where it is below 1
        (the row counts when there are no weights).
    score_kind : {"probability", "logit", "raw"}
        What the scores are.
    """

    lowest: float
    highest: float
    positives: float
    negatives: float
    score_kind: ScoreKind = "probability"


def fit_facts(
    scores: npt.ArrayLike,
    y_true: npt.ArrayLike,
    sample_weight: npt.ArrayLike | None = None,
    *,
    score_kind: ScoreKind = "probability",
) -> FitFacts:
    """The :class:`FitFacts` of fit data given as rows (validated like every fit's input).

    >>> fit_facts([0.2, 0.9, 0.5], [0, 1, 1], [1.0, 2.0, 0.0])
    FitFacts(lowest=0.2, highest=0.9, positives=2.0, negatives=1.0, score_kind='probability')
    """
    x = check_scores(scores, kind=score_kind)
    y = check_labels(y_true)
    require_same_length([x, y], ["scores", "y_true"])
    w = check_weights(sample_weight, x.shape[0])
    used = w > 0.0
    lowest, highest = (float(x[used].min()), float(x[used].max())) if used.any() else (0.0, 0.0)
    unit = count_unit(w)
    return FitFacts(
        lowest=lowest,
        highest=highest,
        positives=float(np.sum(w[y == 1.0])) / unit,
        negatives=float(np.sum(w[y == 0.0])) / unit,
        score_kind=score_kind,
    )


def check_weight_unit(weight_unit: float | None, sample_weight: FloatArray) -> float:
    """The weight that counts as one row in a fit's pseudo-counts (Platt's target smoothing,
    the histogram's prior): ``weight_unit`` when given, else
    :func:`~calib_cli.core.metrics.count_unit` of the (validated) ``sample_weight``.

    Weights below 1 on average count in units of their mean, so that any scale of such weights
    (normalised to sum to 1, or to a mean of 0.5) gives the fit of the weights scaled to a
    mean of 1, as the minimum class rows count them (:func:`fit_facts`); weights of 1 or more
    on average count as they are (a weight of 2 is two rows). A fit on aggregated points (a
    summary's cells, each the sum of many rows' weights) must pass the unit of the rows, which
    the points' own mean weight is not (``count_unit_of(total weight, rows)``).

    >>> check_weight_unit(None, np.array([0.25, 0.25, 0.0])), check_weight_unit(0.5, np.ones(2))
    (0.25, 0.5)
    >>> check_weight_unit(0.0, np.ones(2))
    Traceback (most recent call last):
    ...
    calib_cli.errors.InputError: weight_unit must be a positive number, got 0.0
    """
    if weight_unit is None:
        return count_unit(sample_weight)
    value = math.nan if isinstance(weight_unit, bool) else float(weight_unit)
    if not (math.isfinite(value) and value > 0.0):
        raise InputError(f"weight_unit must be a positive number, got {weight_unit!r}")
    return value


def min_class_rows(method: FittedMethod | Literal["auto"], *, n_bins: int | None = None) -> int:
    """The fewest rows of the smaller class ``method`` is fitted on (module docstring).

    >>> min_class_rows("beta"), min_class_rows("histogram", n_bins=25), min_class_rows("auto")
    (20, 25, 10)
    """
    if method == "auto":
        return min(MIN_CLASS_ROWS.values())
    floor = MIN_CLASS_ROWS[method]
    if method == "histogram" and n_bins is not None:
        return max(floor, int(n_bins))
    return floor


def score_spread(facts: FitFacts) -> float:
    """The spread of the scores: in log-odds for probabilities (clipped to ``[1e-12,
    1 - 1e-12]``) and logits, relative to the largest magnitude for raw scores.

    >>> round(score_spread(FitFacts(0.5, 0.75, 1.0, 1.0)), 6)
    1.098612
    >>> score_spread(FitFacts(-2.0, 4.0, 1.0, 1.0, score_kind="raw"))
    1.5
    """
    lo, hi = facts.lowest, facts.highest
    if facts.score_kind == "probability":
        lo, hi = (min(max(v, SPREAD_EPS), 1.0 - SPREAD_EPS) for v in (lo, hi))
        return (math.log(hi) - math.log1p(-hi)) - (math.log(lo) - math.log1p(-lo))
    if facts.score_kind == "raw":
        scale = max(abs(lo), abs(hi))
        return (hi - lo) / scale if scale > 0.0 else 0.0
    return hi - lo


def _shown(value: float) -> str:
    return f"{value:.10g}"  # a range described, not a bad value: ten digits say it


def _settled(count: float) -> float:
    """A weighted count within 1e-9 (relative) of a whole number taken as that number: sums of
    fractional weights (ten rows of 0.1) land a rounding away from it, on either side
    depending on the order of addition, which differs between the engines.

    >>> _settled(sum([0.1] * 100)), _settled(12.5)
    (10.0, 12.5)
    """
    whole = round(count)
    return float(whole) if abs(count - whole) <= 1e-9 * max(1.0, count) else count


def below_minimum(count: float, needed: int) -> bool:
    """Whether ``count`` rows of a class (weighted, :func:`_settled`) fall short of ``needed``:
    the one comparison of every minimum-rows check (a whole fit, ``auto``'s candidates, each
    fold's fit when cross-fitting).

    >>> below_minimum(sum([0.1] * 100), 10), below_minimum(9.5, 10)
    (False, True)
    """
    return _settled(count) < needed


def class_rows_text(count: float, name: str) -> str:
    """``12 positive rows``: a weighted count shown as a whole number when it is one.

    >>> class_rows_text(12.0, "positive"), class_rows_text(1.0, "negative")
    ('12 positive rows', '1 negative row')
    """
    settled = _settled(count)
    shown = str(round(settled)) if settled == round(settled) else f"{count:.4g}"
    return f"{shown} {name} {'row' if shown == '1' else 'rows'}"


def require_fit_support(
    method: FittedMethod | Literal["auto"],
    facts: FitFacts,
    *,
    n_bins: int | None = None,
    what: str = "the scores",
) -> None:
    """Raise InputError unless ``facts`` can support a ``method`` fit (module docstring).

    ``what`` names the scores in the message (e.g. "the prior-corrected scores").

    >>> require_fit_support("platt", FitFacts(0.3, 0.3, 50.0, 50.0))
    Traceback (most recent call last):
    ...
    calib_cli.errors.InputError: cannot fit platt: the scores do not vary (every score is 0.3)
    >>> require_fit_support("beta", FitFacts(0.1, 0.9, 12.0, 300.0))
    Traceback (most recent call last):
    ...
    calib_cli.errors.InputError: cannot fit beta: the labels have 12 positive rows; beta needs at least 20 rows of each class
    """  # noqa: E501
    start = f"cannot fit {method}" if method != "auto" else "cannot fit any method"
    for count, name in ((facts.positives, "positive"), (facts.negatives, "negative")):
        if count <= 0.0:
            raise InputError(f"{start}: the labels have no {name} rows (with positive weight)")
    needed = min_class_rows(method, n_bins=n_bins)
    for count, name in ((facts.positives, "positive"), (facts.negatives, "negative")):
        if below_minimum(count, needed):
            whose = method if method != "auto" else "platt, the least demanding method,"
            raise InputError(
                f"{start}: the labels have {class_rows_text(count, name)}; "
                f"{whose} needs at least {needed} rows of each class"
            )
    problem = spread_problem(facts)
    if problem is not None:
        raise InputError(f"{start}: {what} {problem}")


def spread_problem(facts: FitFacts) -> str | None:
    """How scores fail to vary (:data:`MIN_SPREAD`), to follow "the scores", or None.

    >>> spread_problem(FitFacts(0.5, 0.5, 1.0, 1.0))
    'do not vary (every score is 0.5)'
    >>> spread_problem(FitFacts(0.5, 0.5 + 1e-8, 1.0, 1.0))
    'barely vary (from 0.5 to 0.50000001, a log-odds spread of 4e-08, below 1e-06)'
    >>> spread_problem(FitFacts(0.5, 0.6, 1.0, 1.0)) is None
    True
    """
    if facts.lowest == facts.highest:
        return f"do not vary (every score is {_shown(facts.lowest)})"
    spread = score_spread(facts)
    if spread >= MIN_SPREAD:
        return None
    scale = "relative" if facts.score_kind == "raw" else "log-odds"
    return (
        f"barely vary (from {_shown(facts.lowest)} to {_shown(facts.highest)}, "
        f"a {scale} spread of {spread:.2g}, below {MIN_SPREAD:g})"
    )


def supported_methods(
    candidates: Sequence[FittedMethod], facts: FitFacts, *, n_bins: int | None = None
) -> tuple[FittedMethod, ...]:
    """The candidates whose minimum rows of each class ``facts`` meets (``auto`` compares
    only these; :func:`require_fit_support` has refused data that meet none).

    >>> supported_methods(("platt", "beta"), FitFacts(0.1, 0.9, 15.0, 100.0))
    ('platt',)
    """
    smaller = min(facts.positives, facts.negatives)
    return tuple(
        method
        for method in candidates
        if not below_minimum(smaller, min_class_rows(method, n_bins=n_bins))
    )
