"""The effect of a calibration on one file: figures before and after, and ranking changes."""

from __future__ import annotations

import numpy.typing as npt

from calib_cli.core import elementary as el
from calib_cli.core.metrics import CalibrationEffect, calibration_effect
from calib_cli.types import FloatArray, ScoreKind

#: A change of AUC below this is rounding, not a change of the ranking.
AUC_CHANGE_TOLERANCE = 1e-6


def recalibration_effect(
    y_true: npt.ArrayLike | None,
    scores: FloatArray,
    calibrated: FloatArray,
    *,
    sample_weight: npt.ArrayLike | None = None,
    score_kind: ScoreKind = "probability",
) -> CalibrationEffect:
    """Figures before and after a calibration, reading the scores as ``score_kind`` says: a
    logit's own probability is ``expit(logit)``; raw margins have no "before" figures.

    >>> effect = recalibration_effect([0, 1], [-1.0, 2.0], [0.2, 0.9], score_kind="logit")
    >>> round(effect.mean_score_before, 4), effect.mean_score_after
    (0.5749, 0.55)
    """
    before = el.sigmoid(scores) if score_kind == "logit" else scores
    return calibration_effect(
        y_true,
        before,
        calibrated,
        sample_weight=sample_weight,
        before_are_probabilities=score_kind != "raw",
    )


def auc_change(effect: CalibrationEffect, *, tol: float = AUC_CHANGE_TOLERANCE) -> float | None:
    """How much a calibration changed the AUC, when it changed it by more than ``tol`` (None
    when it kept the ranking, or when the AUC is not defined before or after).

    >>> from calib_cli.core.metrics import EffectFigures as F
    >>> before, after = F(0.6, 0.2, 0.1, 0.75), F(0.5, 0.2, 0.1, 0.7)
    >>> effect = CalibrationEffect(2, 0.5, 0.5, 1.0, 0.5, before, after)
    >>> round(auc_change(effect), 6)
    0.05
    """
    if effect.before is None or effect.after is None:
        return None
    before, after = effect.before.auc, effect.after.auc
    if before != before or after != after:  # NaN: one class only
        return None
    change = abs(after - before)
    return change if change > tol else None
