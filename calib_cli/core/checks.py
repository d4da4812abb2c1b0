"""Validation at the boundary: turn user arrays into clean float64 arrays or raise InputError.

Messages follow DESIGN.md: they name the column, the problem, how many rows and the first row
(row numbers count data rows from 1, the header excluded). ``io`` prefixes the file name.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from calib_cli.errors import InputError
from calib_cli.types import BoolArray, FloatArray, ScoreKind, choices


def _first_bad(bad: BoolArray, values: npt.NDArray[np.generic]) -> tuple[int, int, object]:
    """Count of bad entries, the 1-based row of the first one, and its value."""
    idx = np.flatnonzero(bad)
    first = int(idx[0])
    value = values[first]
    return idx.size, first + 1, value.item() if hasattr(value, "item") else value


def shown_value(value: object) -> str:
    """A bad value in a message: ``empty`` for a missing one, numbers by :func:`shown_number`,
    text quoted."""
    if value is None:
        return "empty"
    if isinstance(value, float):
        return shown_number(float(value))
    return repr(value) if isinstance(value, str) else str(value)


def shown_number(value: float) -> str:
    """A value in a message: ten significant digits where they say it exactly, else every
    digit (10 digits showed 1.0000000000000002 "outside [0, 1]" as 1).

    >>> shown_number(0.25), shown_number(2e15), shown_number(1 + 2**-52), shown_number(-math.inf)
    ('0.25', '2e+15', '1.0000000000000002', '-inf')
    """
    if not math.isfinite(value):
        return repr(value)
    short = f"{value:.10g}"
    return short if float(short) == value else repr(value)


def bad_values_message(column: str, problem: str, bad: BoolArray, values: npt.ArrayLike) -> str:
    """``column 'score' has 3 values outside [0, 1] (first at row 17: 1.2)``.

    >>> bad_values_message("score", "outside [0, 1]", np.array([False, True]), [0.5, 1.2])
    "column 'score' has 1 value outside [0, 1] (first at row 2: 1.2)"
    """
    arr = np.asarray(values)
    count, row, value = _first_bad(bad, arr)
    return values_message(column, problem, count, row, shown_value(value))


#: A text label's values without --positive-label, trimmed and in lower case: positive, then
#: negative (the readers' rule, io.columns.positive_label_expr, and the SQL's,
#: sql.values.positive_label_node).
TRUE_LABEL_TEXT = frozenset({"1", "1.0", "true", "t", "yes", "y"})
FALSE_LABEL_TEXT = frozenset({"0", "0.0", "false", "f", "no", "n"})

#: The label a summary query (sql.summary) gives a row whose label calib refuses without
#: --positive-label (``2``, ``maybe``): a query cannot stop, so it counts such rows apart, and
#: the summary's reader (summaries.summary) refuses a summary that holds them.
REFUSED_LABEL = 2
#: The label a summary query gives a row without a label (NULL, NaN, empty): counted apart,
#: not left out, so that a target summary of batches whose labels have not all arrived is
#: refused rather than estimated on its labelled rows alone (and the rows it dropped unsaid).
UNLABELLED = 3

#: The end of a message about label values a label column cannot hold: the fix, where one
#: is (a present value: an empty cell names no value; with --positive-label, any value reads).
POSITIVE_LABEL_HINT = "; name the positive value with --positive-label"


def values_message(column: str, problem: str, count: int, row: int, shown: str) -> str:
    """The one line every reader, in memory or streaming, gives for bad values: how many, the
    problem (written for several, ``that are not numbers``; made singular for one) and the
    first row with its value as ``shown``.

    >>> values_message("w", "that are not numbers", 1, 4, "'abc'")
    "column 'w' has 1 value that is not a number (first at row 4: 'abc')"
    >>> values_message("w", "that are not numbers", 2, 4, "'abc'")
    "column 'w' has 2 values that are not numbers (first at row 4: 'abc')"
    >>> values_message("score", "that are not numbers", 4, 1, "'0,2'")  # doctest: +ELLIPSIS
    "column 'score' has 4 values ... (first at row 1: '0,2'); if the file writes numbers with \
a decimal comma, add --decimal-comma"
    """
    noun = "value" if count == 1 else "values"
    hint = DECIMAL_COMMA_HINT if _DECIMAL_COMMA.fullmatch(shown) else ""
    if count == 1 and problem.startswith("that are "):
        problem = "that is " + problem.removeprefix("that are ")
        problem = _SINGULAR.get(problem, problem)
    return f"column '{column}' has {count:,} {noun} {problem} (first at row {row}: {shown}){hint}"


#: A value shown as a number written with a decimal comma (``'0,37'``), which reads as a
#: number only with --decimal-comma: the message says so (it named the value, not the fix).
_DECIMAL_COMMA = re.compile(r"'[+-]?[0-9]*,[0-9]+'")
DECIMAL_COMMA_HINT = "; if the file writes numbers with a decimal comma, add --decimal-comma"


#: Problems whose singular needs more than "that is" for "that are".
_SINGULAR = {"that is not numbers": "that is not a number"}


def check_scores(
    scores: npt.ArrayLike, *, name: str = "score", kind: ScoreKind = "probability"
) -> FloatArray:
    """Scores as float64: finite, and inside [0, 1] when ``kind`` is ``probability``.

    >>> check_scores([0.1, 1.0], name="p").tolist()
    [0.1, 1.0]
    """
    arr = np.asarray(scores, dtype=np.float64)
    if arr.ndim != 1:
        raise InputError(f"column '{name}' must be one-dimensional, got shape {arr.shape}")
    missing = np.isnan(arr)
    if missing.any():
        raise InputError(bad_values_message(name, "missing or NaN", missing, arr))
    if kind == "probability":
        outside = (arr < 0.0) | (arr > 1.0)
        if outside.any():
            raise InputError(bad_values_message(name, "outside [0, 1]", outside, arr))
    else:
        infinite = ~np.isfinite(arr)
        if infinite.any():
            raise InputError(bad_values_message(name, "that are infinite", infinite, arr))
    return arr


def check_labels(y_true: npt.ArrayLike, *, name: str = "label") -> FloatArray:
    """Binary labels as float64 0.0/1.0; anything else is refused.

    >>> check_labels([0, 1, True]).tolist()
    [0.0, 1.0, 1.0]
    """
    arr = np.asarray(y_true)
    if arr.ndim != 1:
        raise InputError(f"column '{name}' must be one-dimensional, got shape {arr.shape}")
    if arr.dtype == np.bool_:
        return arr.astype(np.float64)
    try:
        as_float = arr.astype(np.float64)
    except (TypeError, ValueError):
        raise InputError(f"column '{name}' is not 0/1{POSITIVE_LABEL_HINT}") from None
    bad = ~((as_float == 0.0) | (as_float == 1.0))
    if bad.any():
        raise InputError(
            bad_values_message(name, "that are not 0 or 1", bad, arr) + POSITIVE_LABEL_HINT
        )
    return as_float


#: The range of a positive weight: within 15 orders of magnitude of 1 (a frequency weight of
#: 1e15 rows, or weights normalised over 1e15 rows). Past it, squares and their sums leave
#: the floats (1e-300 squares to 0, 1e160 to inf) and a bootstrap cannot draw rows of it.
WEIGHT_RANGE = (1e-15, 1e15)
#: How a weight outside :data:`WEIGHT_RANGE` is named, in messages and in dropped-row reasons.
WEIGHT_RANGE_PROBLEM = "positive but outside [1e-15, 1e15]"


def outside_weight_range(weights: Any) -> Any:
    """Where a weight is positive but outside :data:`WEIGHT_RANGE`: a boolean array of a NumPy
    array, or a boolean expression of a Polars one (the same comparisons serve both, so every
    reader applies one rule).

    >>> outside_weight_range(np.array([0.0, 1e-300, 1.0, 1e16])).tolist()
    [False, True, False, True]
    """
    low, high = WEIGHT_RANGE
    return (weights > 0.0) & ((weights < low) | (weights > high))


def check_weights(
    sample_weight: npt.ArrayLike | None, n_rows: int, *, name: str = "weight"
) -> FloatArray:
    """Sample weights as float64 (ones when ``None``): finite, non-negative, right length.

    >>> check_weights(None, 2).tolist()
    [1.0, 1.0]
    """
    if sample_weight is None:
        return np.ones(n_rows, dtype=np.float64)
    arr = np.asarray(sample_weight, dtype=np.float64)
    if arr.shape != (n_rows,):
        raise InputError(f"column '{name}' has {arr.size} values for {n_rows} rows")
    bad = ~np.isfinite(arr) | (arr < 0.0)
    if bad.any():
        problem = "that are negative, missing or infinite"
        raise InputError(bad_values_message(name, problem, bad, arr))
    extreme = outside_weight_range(arr)
    if extreme.any():
        raise InputError(bad_values_message(name, WEIGHT_RANGE_PROBLEM, extreme, arr))
    return arr


def require_both_classes(
    y_true: FloatArray, sample_weight: FloatArray, *, what: str = "the labels"
) -> None:
    """Raise unless both classes carry positive weight (fits and AUC need both)."""
    positive = float(np.sum(sample_weight[y_true == 1.0]))
    negative = float(np.sum(sample_weight[y_true == 0.0]))
    if positive <= 0.0:
        raise InputError(f"{what} have no positive rows (with positive weight)")
    if negative <= 0.0:
        raise InputError(f"{what} have no negative rows (with positive weight)")


def require_same_length(arrays: Sequence[npt.ArrayLike], names: Sequence[str]) -> None:
    """Raise when arrays that describe the same rows have different lengths."""
    lengths = [np.asarray(a).shape[0] for a in arrays]
    if len(set(lengths)) > 1:
        detail = ", ".join(f"{n}={length}" for n, length in zip(names, lengths, strict=True))
        raise InputError(f"arrays describe different numbers of rows ({detail})")


def check_score_kind(score_kind: str) -> ScoreKind:
    """``score_kind`` as the ScoreKind literal, or an InputError naming the choices.

    >>> check_score_kind("logit")
    'logit'
    """
    if score_kind == "probability":
        return "probability"
    if score_kind == "logit":
        return "logit"
    if score_kind == "raw":
        return "raw"
    raise InputError(
        f"score_kind must be one of {', '.join(choices(ScoreKind))}, got {score_kind!r}"
    )


def check_fit_data(
    scores: npt.ArrayLike,
    y_true: npt.ArrayLike,
    sample_weight: npt.ArrayLike | None,
    *,
    score_kind: ScoreKind = "probability",
) -> tuple[FloatArray, FloatArray, FloatArray]:
    """Validated float64 copies of scores, labels and weights for a fit: same lengths, and
    both classes carrying positive weight."""
    x = check_scores(scores, kind=score_kind)
    y = check_labels(y_true)
    require_same_length([x, y], ["scores", "y_true"])
    w = check_weights(sample_weight, x.shape[0])
    require_both_classes(y, w)
    return x, y, w
