"""``--on-invalid drop`` and ``--max-invalid``: rows dropped, counted by reason, and capped.

Every reader that drops invalid rows (the in-memory :func:`~calib_cli.io.table.drop_invalid_rows`,
the streaming :func:`~calib_cli.io.scored_scan.scored_scan` and ``stream_map.scan_input``)
counts each dropped row once, under the first problem found in it (in the order the checks
run: scores, then the label, then the weight), so the counts by reason add up to the rows
dropped. Above ``--max-invalid`` the command refuses (exit 65) before anything is written.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

from calib_cli.errors import InputError, UsageError
from calib_cli.types import DEFAULT_MAX_INVALID, GroupValue

__all__ = [
    "InvalidRows",
    "check_max_invalid_option",
    "max_invalid_text",
    "reason",
]


@dataclass(frozen=True)
class InvalidRows:
    """What ``--on-invalid drop`` dropped from one input: ``dropped`` of ``rows`` read, and by
    reason (``"score not a number"`` -> rows), each row under its first problem."""

    name: str
    rows: int
    dropped: int
    by_reason: Mapping[str, int] = field(default_factory=dict)
    #: with a grouping column (``--by``): (group, rows read, rows dropped) for each group, in
    #: the groups' order (:func:`~calib_cli.io.identity.order_key`; missing, None, last)
    by_group: tuple[tuple[GroupValue, int, int], ...] = ()

    @property
    def kept(self) -> int:
        return self.rows - self.dropped

    def reasons_text(self) -> str:
        """``score not a number: 400, label not 0/1: 12``."""
        return ", ".join(f"{why}: {count:,}" for why, count in self.by_reason.items() if count)

    def warning(self) -> str:
        """The line a command prints when it dropped rows.

        >>> InvalidRows("s.csv", 2000, 12, {"label not 0/1": 12}).warning()
        's.csv: dropped 12 invalid rows of 2,000 (label not 0/1: 12)'
        """
        noun = "row" if self.dropped == 1 else "rows"
        return (
            f"{self.name}: dropped {self.dropped:,} invalid {noun} of {self.rows:,} "
            f"({self.reasons_text()})"
        )

    def check(self, max_invalid: float | None) -> None:
        """Refuse (exit 65) more invalid rows than ``max_invalid`` allows: a fraction of the
        rows read when below 1, else a count of rows (None: the default, 1%).

        >>> InvalidRows("s.csv", 2000, 412, {"score not a number": 400, "label not 0/1": 12}
        ...     ).check(None)  # doctest: +NORMALIZE_WHITESPACE
        Traceback (most recent call last):
        ...
        calib_cli.errors.InputError: s.csv: 412 of 2,000 rows invalid (score not a number: 400,
        label not 0/1: 12); above --max-invalid 1%, nothing written (raise it to drop them)
        """
        limit = DEFAULT_MAX_INVALID if max_invalid is None else max_invalid
        allowed = limit * self.rows if limit < 1 else limit
        if self.dropped > allowed:
            raise InputError(
                f"{self.name}: {self.dropped:,} of {self.rows:,} rows invalid "
                f"({self.reasons_text()}); above --max-invalid {max_invalid_text(limit)}, "
                "nothing written (raise it to drop them)"
            )


def max_invalid_text(value: float) -> str:
    """``--max-invalid`` as a user wrote it: a fraction as a percentage, a count as a count.

    >>> max_invalid_text(0.01), max_invalid_text(0.125), max_invalid_text(50.0)
    ('1%', '12.5%', '50')
    """
    if value < 1:
        return f"{value * 100:g}%"
    return f"{value:g}"


def check_max_invalid_option(value: float | None) -> None:
    """Refuse (exit 2) a ``--max-invalid`` that is negative, not finite, or a count (1 or
    more) that is not a whole number.

    >>> check_max_invalid_option(2.5)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    calib_cli.errors.UsageError: --max-invalid must be ... a whole count of rows, got 2.5
    """
    if value is None:
        return
    if not math.isfinite(value) or value < 0 or (value >= 1 and value != math.floor(value)):
        raise UsageError(
            "--max-invalid must be a fraction below 1 (0.05, 5%) or a whole count of rows, "
            f"got {value:g}"
        )


_SHORT = {
    "that are not numbers": "not a number",
    "missing or NaN": "missing",
    "that are not 0 or 1": "not 0/1",
    "that are not 0/1 or true/false": "not 0/1",
    "that are infinite": "infinite",
    "that are negative": "negative",
    "that are negative, missing or infinite": "negative, missing or infinite",
    "positive but outside [1e-15, 1e15]": "outside [1e-15, 1e15]",
}


def reason(column: str, problem: str) -> str:
    """The reason a row was dropped, from a check's column and problem (as worded in error
    messages).

    >>> reason("score", "that are not numbers"), reason("label", "that are not 0 or 1")
    ('score not a number', 'label not 0/1')
    """
    return f"{column} {_SHORT.get(problem, problem.removeprefix('that are '))}"
