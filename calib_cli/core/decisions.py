"""Decision rules on computed figures: quality gates, flagged rows, bounded prevalences.

These rules used to live in the command line; here they are plain functions on numbers and
arrays, with messages that name figures and parameters (never command-line options).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from calib_cli.errors import InputError
from calib_cli.types import IntArray

#: A stratum's estimated positive rate is kept inside [floor, 1 - floor] before it becomes odds.
PREVALENCE_FLOOR = 1e-6


def gate_failures(
    figures: Sequence[tuple[str, float, float]],
    *,
    max_ece: float | None = None,
    min_auc: float | None = None,
) -> tuple[str, ...]:
    """The quality gates that fail, as sentences (empty when every gate passes).

    Parameters
    ----------
    figures : sequence of (label, ece, auc)
        One entry per score column (and group), with the label the sentence names it by.
    max_ece : float, optional
        The largest acceptable ECE; an undefined (NaN) ECE fails.
    min_auc : float, optional
        The smallest acceptable AUC; an undefined AUC (one class only) fails with its reason.

    >>> gate_failures([("a", 0.05, 0.8), ("b", 0.01, 0.6)], max_ece=0.02, min_auc=0.7)
    ('ECE 0.05 > 0.02 for a', 'AUC 0.6 < 0.7 for b')
    """
    for name, value in (("max_ece", max_ece), ("min_auc", min_auc)):
        if value is not None and not math.isfinite(value):
            raise InputError(f"{name} must be a finite number, got {value}")
    failures: list[str] = []
    for label, ece, auc in figures:
        if max_ece is not None and not ece <= max_ece:
            failures.append(f"ECE {ece:.4g} > {max_ece:g} for {label}")
        if min_auc is not None and math.isnan(auc):
            failures.append(
                f"AUC is undefined for {label} (one class only), so it cannot be shown to "
                f"reach {min_auc:g}"
            )
        elif min_auc is not None and not auc >= min_auc:
            failures.append(f"AUC {auc:.4g} < {min_auc:g} for {label}")
    return tuple(failures)


def flag_rows(calibrated: npt.ArrayLike, threshold: float) -> IntArray:
    """The decision column: 1 where the calibrated probability is at least ``threshold``.

    >>> flag_rows([0.01, 0.05, 0.2], 0.05).tolist()
    [0, 1, 1]
    """
    return (np.asarray(calibrated, dtype=np.float64) >= threshold).astype(np.int64)


def bounded_prevalence(rate: float, *, floor: float = PREVALENCE_FLOOR) -> float:
    """An estimated positive rate kept inside ``[floor, 1 - floor]``, so that its odds are
    finite and positive: a stratum estimated at exactly 0 (or 1) ranks last (first) but stays
    ranked.

    >>> bounded_prevalence(0.0), bounded_prevalence(0.3), bounded_prevalence(1.0)
    (1e-06, 0.3, 0.999999)
    """
    if not 0.0 < floor < 0.5:
        raise InputError(f"floor must be in (0, 0.5), got {floor}")
    return min(max(float(rate), floor), 1.0 - floor)
