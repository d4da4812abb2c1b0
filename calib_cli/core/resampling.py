"""What a sample kept: rows, positives and base rates before and after, per stratum."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from calib_cli.core.sampling import ClassRates


@dataclass(frozen=True)
class ClassBalance:
    """Rows and positives of a table or a stratum.

    >>> ClassBalance(rows=8, positives=2).base_rate, ClassBalance(rows=0, positives=0).base_rate
    (0.25, None)
    """

    rows: int
    positives: int

    @property
    def negatives(self) -> int:
        return self.rows - self.positives

    @property
    def base_rate(self) -> float | None:
        """The positive rate, None when there are no rows."""
        return self.positives / self.rows if self.rows else None


@dataclass(frozen=True)
class StratumSampling:
    """One stratum's rates and its rows before and after sampling (stratum "" without
    strata)."""

    stratum: str
    rates: ClassRates
    before: ClassBalance
    after: ClassBalance


@dataclass(frozen=True)
class SamplingSummary:
    """Totals before and after sampling, and each stratum's (one stratum "" when the sample
    had no strata, then ``stratified`` is False)."""

    before: ClassBalance
    after: ClassBalance
    strata: tuple[StratumSampling, ...]
    stratified: bool

    @property
    def rates(self) -> ClassRates:
        """The rates of an unstratified sample."""
        return self.strata[0].rates


def summarise_sampling(
    before: Sequence[tuple[str | None, ClassBalance]],
    after: Sequence[tuple[str | None, ClassBalance]],
    rates: Mapping[str, ClassRates],
) -> SamplingSummary:
    """Counts before and after a sample, overall and per stratum.

    ``before`` and ``after`` hold (stratum, counts) pairs, the stratum None when there are no
    strata; ``rates`` maps each stratum ("" without strata) to its class rates. A stratum of
    which no row was kept counts zero rows after.

    >>> summary = summarise_sampling(
    ...     [(None, ClassBalance(10, 2))], [(None, ClassBalance(6, 2))], {"": ClassRates(0.5)}
    ... )
    >>> summary.after.base_rate, summary.stratified
    (0.3333333333333333, False)
    """
    after_by = dict(after)
    empty = ClassBalance(rows=0, positives=0)
    strata = tuple(
        StratumSampling(
            stratum=stratum or "",
            rates=rates[stratum or ""],
            before=counts,
            after=after_by.get(stratum, empty),
        )
        for stratum, counts in before
    )
    return SamplingSummary(
        before=ClassBalance(
            rows=sum(c.rows for _, c in before), positives=sum(c.positives for _, c in before)
        ),
        after=ClassBalance(
            rows=sum(c.rows for _, c in after), positives=sum(c.positives for _, c in after)
        ),
        strata=strata,
        stratified=any(stratum is not None for stratum, _ in before),
    )
