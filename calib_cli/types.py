"""Array aliases and the choices shared by the CLI and the numeric core (defined once here).

The CLI builds its option choices from these ``Literal`` aliases with :func:`choices`, so the
help text and the library cannot drift apart.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal, TypeAlias, get_args

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]
UInt64Array = npt.NDArray[np.uint64]

ScoreKind = Literal["probability", "logit", "raw"]
BinStrategy = Literal["uniform", "quantile"]
InputFormat = Literal["csv", "tsv", "parquet", "arrow", "ndjson"]
OnInvalid = Literal["error", "drop"]
CalibrationMethod = Literal["prior", "platt", "isotonic", "beta", "histogram", "auto"]
FittedMethod = Literal["platt", "isotonic", "beta", "histogram"]
ShiftMethod = Literal["auto", "mle", "em", "acc", "pacc", "map"]
SlopeSmoothing = Literal["hull", "loess"]
FitData = Literal["population", "sampled"]
CiMethod = Literal["bootstrap", "profile"]
#: What a weight means (``--weight-kind``): ``frequency``, a row of weight 2 is two rows (every
#: interval as for the rows repeated); ``importance``, survey-style weights such as
#: ``1 / negative_rate`` after sampling (the same point estimates, with variances from the rows
#: actually observed: sandwich, linearisation, bootstrap of rows).
WeightKind = Literal["frequency", "importance"]
#: How a command reads its rows: ``memory`` (exact, every row in memory), ``streaming`` (a
#: summary in bounded memory, then a streaming pass for row-wise outputs) or ``auto``.
Engine = Literal["auto", "memory", "streaming"]
#: Axis scale of a picture's probability axes (``--plot-scale``): ``logit`` keeps 0.1% and 1%
#: apart for rare events.
PlotScale = Literal["linear", "logit"]

#: A plain JSON value: what report payloads and artifacts are made of.
JsonValue: TypeAlias = bool | int | float | str | list["JsonValue"] | dict[str, "JsonValue"] | None
JsonObject: TypeAlias = dict[str, "JsonValue"]
#: The value of a group (``--by``, ``--batch-col``) as read: numbers stay numbers; None for
#: all rows.
GroupValue: TypeAlias = str | int | float | bool | None
#: The group of rows without a value in a --by or --batch-col column.
MISSING_GROUP = "(missing)"
#: All rows (``group`` null in JSON) as tables, pictures and messages name them for humans,
#: where a group is ``by=value``: a group whose value is ``all`` is ``segment=all``.
ALL_ROWS = "all rows"
#: A histogram of scores for a picture: bin edges, shape (k + 1,), and weighted counts, (k,).
ScoreHistogram: TypeAlias = tuple[FloatArray, FloatArray]
#: Scores within this of 0 or 1 (exact 0s and 1s among them) have no place on a picture's
#: logit axis: a reliability histogram keeps them in end steps of their own, beyond it.
LOGIT_EDGE = 1e-6
#: Where a workflow sends a warning line as it happens (the CLI prints it on stderr).
Warn: TypeAlias = Callable[[str], None]


@dataclass(frozen=True)
class CsvDialect:
    """How CSV text is read and written: ``separator`` (None: ``,`` for CSV and a tab for
    TSV) and ``decimal_comma`` (numbers written ``0,37``)."""

    separator: str | None = None
    decimal_comma: bool = False

    def read_separator(self, fmt: str) -> str:
        """The separator to read a CSV or TSV input with.

        >>> CsvDialect().read_separator("tsv"), CsvDialect(";").read_separator("csv")
        ('\\t', ';')
        """
        if self.separator is not None:
            return self.separator
        return "\t" if fmt == "tsv" else ","

    def write_separator(self, fmt: str) -> str:
        """The separator of a CSV or TSV output: a tab for TSV, else the input's separator.

        >>> CsvDialect(";").write_separator("csv"), CsvDialect(";").write_separator("tsv")
        (';', '\\t')
        """
        if fmt == "tsv":
            return "\t"
        return self.separator if self.separator is not None else ","


def choices(alias: object) -> tuple[str, ...]:
    """The string choices of a ``Literal`` alias, in declaration order.

    >>> choices(BinStrategy)
    ('uniform', 'quantile')
    """
    return tuple(str(a) for a in get_args(alias))


#: The CSV dialect without ``--separator`` or ``--decimal-comma``.
DEFAULT_DIALECT = CsvDialect()

#: ``--max-invalid`` when not given: ``--on-invalid drop`` drops at most 1% of the rows.
DEFAULT_MAX_INVALID = 0.01
