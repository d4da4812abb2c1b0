"""Identity columns: the values that name a group, a batch, a stratum or a row's key.

``--by``, ``--batch-col``, ``--strata-col`` and ``--key-col`` name rows, they do not measure
them, so one rule holds in every reader and every engine (in memory, streaming, summaries):

* **A value is its text.** In CSV and TSV, the text as written; in a typed format (Parquet,
  Arrow, NDJSON), the value, whose text is the one a summary keeps (Polars' ``cast(String)``).
  Two different texts are two identities: ``"007"`` and ``"7"``, ``"1"`` and ``"1.0"``,
  ``"02134"`` and ``"2134"`` are never merged, whatever else the column holds.
* **An integer's text is that integer.** A text that is exactly how a 64-bit integer is
  written (:func:`~calib_cli.core.sampling.integer_of_text`: an optional ``-``, digits
  without a leading zero; no ``+``, spaces or decimal point; within ``[-2**63, 2**64 - 1]``)
  stands for the integer: ``7`` in a Parquet column, ``"7"`` in a CSV and
  ``CAST(7 AS VARCHAR)`` in SQL are one group, one stratum, one key
  (:mod:`calib_cli.core.sampling` hashes it as the integer). Reports show it as the number
  (:func:`reported_value`) and every other text as itself, so the text a report shows is
  always the text read. The rule looks at one value at a time, never at the rest of
  the column, so a file read in chunks, or grown by a day, names its rows as before.
* **Order.** Values that read as numbers come first, by value (``"9"`` before ``"10"``, the
  week ``"09"`` before ``10``; equal values by text, ``"007"`` before ``7``), then the other
  texts in text order; rows without a value last (:func:`order_key`).

Typed columns keep their type (integers stay integers, dates dates); booleans are the text
``"false"``/``"true"``, as a summary keeps them. When a typed output (Parquet, Arrow, NDJSON)
is written from a CSV, an identity column becomes integers only when every value is an
integer's text (:func:`calib_cli.io.read.reading_identities`), never floating-point numbers.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Sequence
from decimal import Decimal
from typing import Any

import polars as pl

from calib_cli.core.sampling import integer_of_text
from calib_cli.errors import InputError
from calib_cli.types import MISSING_GROUP, GroupValue

__all__ = [
    "integer_of_text",
    "integer_text_bits",
    "order_key",
    "reads_as_number",
    "refuse_missing_name",
    "reported_value",
    "typed_value",
]

#: Text that reads as a number, for ordering only (ASCII digits, an optional sign, point and
#: exponent, spaces around): ``"007"``, ``"1.0"``, ``" 7"``, ``"1e3"``; not ``"nan"``, ``"1_0"``.
_NUMBER_TEXT = re.compile(r"\s*[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?\s*")


def integer_text_bits(text: pl.Expr) -> pl.Expr:
    """:func:`integer_of_text` in Polars: the integer's 64 bits (UInt64, two's complement, so
    ``-1`` is ``2**64 - 1``) where ``text`` is an integer's text, null elsewhere.

    >>> frame = pl.DataFrame({"k": ["7", "007", "-1", " 7", "18446744073709551615", None]})
    >>> frame.select(integer_text_bits(pl.col("k")))["k"].to_list()
    [7, None, 18446744073709551615, None, 18446744073709551615, None]
    """
    signed = text.cast(pl.Int64, strict=False)
    unsigned = text.cast(pl.UInt64, strict=False)
    return (
        pl.when(signed.cast(pl.String) == text)
        .then(signed.reinterpret(signed=False))
        .when(unsigned.cast(pl.String) == text)
        .then(unsigned)
        .otherwise(pl.lit(None, dtype=pl.UInt64))
    )


def reported_value(text: str) -> int | str:
    """How a report shows an identity read as ``text``: the integer for an integer's text,
    else the text itself (so the text shown is always the text read).

    >>> [reported_value(t) for t in ["7", "007", "1.0", "02134", "north"]]
    [7, '007', '1.0', '02134', 'north']
    """
    value = integer_of_text(text)
    return text if value is None else value


def typed_value(text: str, dtype: pl.DataType | None) -> Any:
    """The value of a typed column (``dtype``) whose text a streaming pass kept (Polars'
    ``cast(String)``), as the in-memory reader reports it: a float for a float column, a date
    or datetime for a temporal one (``2024-01-01 05:00:00.000000`` is the datetime, shown as
    ``2024-01-01 05:00:00`` in both engines); any other type (or None: not known, as in a
    summary file) by :func:`reported_value`.

    >>> typed_value("1e-300", pl.Float64), typed_value("7", pl.Int64), typed_value("7", None)
    (1e-300, 7, 7)
    >>> str(typed_value("2024-01-01 05:00:00.000000", pl.Datetime("us")))
    '2024-01-01 05:00:00'
    """
    if dtype is not None:
        if dtype.is_float():
            return float(text)
        if dtype == pl.Date:
            return dt.date.fromisoformat(text)
        if isinstance(dtype, pl.Datetime):
            return dt.datetime.fromisoformat(text)
    return reported_value(text)


def order_key(value: GroupValue | dt.date) -> tuple[Any, ...]:
    """A key that sorts identities (groups, batches, strata) in the order of the module: the
    values that read as numbers by value (then by text), then other text, missing last.

    >>> sorted(["10", 9, "x", "09", None, 7, "007"], key=order_key)
    ['007', 7, '09', 9, '10', 'x', None]
    """
    if value is None:
        return (3,)
    if isinstance(value, bool):
        return _text_key(str(value).lower())
    if isinstance(value, int | float):
        if value != value:  # NaN: after every number
            return (0, Decimal("Infinity"), 1, str(value))
        return (0, Decimal(value), 0, str(value))
    if isinstance(value, str):
        return _text_key(value)
    return (1, value)


def _text_key(text: str) -> tuple[Any, ...]:
    if _NUMBER_TEXT.fullmatch(text) is not None:
        return (0, Decimal(text.strip()), 0, text)
    return (2, text)


def reads_as_number(value: GroupValue | dt.date) -> bool:
    """Whether ``value`` orders among the numbers (:func:`order_key`): a number, or text
    that reads as one (``"007"``, ``"1.0"``, ``" 7"``), booleans and dates not.

    >>> [reads_as_number(v) for v in [7, "007", "1e3", "x", True, None]]
    [True, True, True, False, False, False]
    """
    return value is not None and order_key(value)[0] == 0


def refuse_missing_name(values: Sequence[Any], column: str, option: str | None) -> None:
    """Refuse (exit 65) a grouping column (``--by``, ``--batch-col``) with rows without a value
    (``None`` among ``values``) and rows whose value is the text ``(missing)``
    (:data:`~calib_cli.types.MISSING_GROUP`), the name every report gives the rows without a
    value: the two groups would have one name, and a job reading the report could not tell
    them apart. The text alone is that group (a value filled in for the missing ones).

    >>> refuse_missing_name(["a", "(missing)"], "g", "--by")
    >>> refuse_missing_name(["a", "(missing)", None], "g", "--by")
    Traceback (most recent call last):
    ...
    calib_cli.errors.InputError: column 'g' has rows without a value and rows whose value \
is the text '(missing)', the name calib's reports give the rows without a value, so --by \
would report two groups by one name: rename that value, or leave those rows empty
    """
    if None in values and MISSING_GROUP in values:
        by = option or "grouping"
        raise InputError(
            f"column '{column}' has rows without a value and rows whose value is the text "
            f"'{MISSING_GROUP}', the name calib's reports give the rows without a value, so "
            f"{by} would report two groups by one name: rename that value, or leave those "
            "rows empty"
        )
