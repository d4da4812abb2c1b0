"""How calib reads a label (``--positive-label``) in SQL, whatever the column's type.

The emitters know the table's name only, not its columns' types, so each expression is right
for every type the column may have. calib's rule
(:func:`calib_cli.io.columns.positive_label_expr`) with ``--positive-label V``:

* a numeric column is compared as a number with ``float(V)`` (calib refuses a ``V`` that is
  not a number there);
* any other column (text, booleans, dates) is read as its trimmed text ``t``: when ``V`` is a
  number's text and ``t`` reads as a number, they are compared as numbers (``"1.0"`` matches
  ``1``), otherwise as text (``t == V.strip()``, case-sensitive: booleans are ``true`` and
  ``false``).

Without ``--positive-label`` a boolean is positive where true, a number where it is 1, and a
text where, trimmed and in lower case, it is ``1``, ``1.0``, ``true``, ``t``, ``yes`` or ``y``.
In SQL ``LOWER(t)`` is compared with calib's texts first (true ``1``, ``1.0``, ``true``, ``t``,
``yes``, ``y``; false ``0``, ``0.0``, ``false``, ``f``, ``no``, ``n``), which settles 0/1
integers and doubles (their text in every engine), booleans (``true``/``false``) and text
labels with a few comparisons; any other number's text (a decimal's ``1.00``, ``1E0``) is
positive where it reads as 1: the same rows as calib's on every label calib accepts. (The
SQL cast the label to a double: a text label ``yes``/``no`` failed in DuckDB and was NULL, so
never positive, in Spark without ANSI mode, and Postgres cannot cast a boolean to a double.)
calib refuses a label outside its rule (``2``, ``maybe``); SQL cannot stop a query, so a
summary query counts such rows apart, as label 2 (:func:`label_class_node`), and calib refuses
the summary, naming how many (they counted as negatives); the sampling query samples them as
negatives and calib refuses them when it reads the sample. A number's text that reads as 1 or
0 (``1.00``, ``-0``, ``1e0`` as text) is a positive or a negative.

In SQL, every column is read as its trimmed text ``t`` (``CAST(label AS <string>)`` without
the white space around it: :meth:`~calib_cli.sql.dialects.Dialect.trim`), which
serves both cases: a numeric column's text is a number's text in every engine
(DuckDB ``1.0``, Spark ``1.0E10``, Postgres ``1e+16``) that reads back as the same double, and
a boolean's is ``true``/``false`` (never a number's text, as in calib: a boolean column with
``--positive-label 1`` has no positive row, which calib refuses). When ``V`` is a number's
text, a row is positive where ``t`` is a number's text (the syntax Polars reads:
:data:`NUMBER_PATTERN`, checked with a regular expression, so that Spark's ``1d`` or
DuckDB's ``1_0`` stay text, as in calib) and reads as a double equal to ``float(V)``, or
where ``t`` is not a number's text and equals ``V``; when ``V`` is other text, where ``t``
equals it. Postgres has no cast that returns NULL instead of an error, so there a number's
text is compared as an exact decimal (``NUMERIC``), which differs from calib's double
comparison only for texts of more than 17 significant digits (``1.00000000000000000001``).
The text is trimmed of every Unicode white space, as calib strips it (tabs, carriage returns:
a CRLF file loaded as LF ends each label in ``\r``; no-break spaces: ``Dialect.trim``). A
number's text whose exponent has more than three digits (``1e99999``, ``0e1000``: no
engine's text of a typed number) is text to the SQL, a label refused without
``--positive-label``: it failed Postgres' query, and DuckDB read ``1e-99999`` as 0.
"""

from __future__ import annotations

import functools
import math

from calib_cli.core.checks import FALSE_LABEL_TEXT, REFUSED_LABEL, TRUE_LABEL_TEXT
from calib_cli.errors import OptionError
from calib_cli.sql.tree import (
    FALSE,
    TRUE,
    Binary,
    Call,
    Cast,
    FullMatch,
    Int,
    IsNull,
    Node,
    Not,
    NumberEquals,
    Text,
    Trimmed,
    case,
    if_else,
)

__all__ = [
    "NUMBER_PATTERN",
    "label_class_node",
    "label_present_node",
    "positive_label_node",
]


#: A finite number's text as Polars reads it (``1``, ``-0``, ``1.``, ``.5``, ``+1e-3``), its
#: exponent of at most three digits after any zeros: every engine's text of a double or
#: decimal (``4.9e-324``), never ``1e99999`` or ``1e-99999``, beyond a double's range (a label
#: calib refuses, read as inf or 0 by a cast; Postgres' NUMERIC cast raised); without
#: backslashes, so that no dialect's string escapes change it.
NUMBER_PATTERN = "[+-]?([0-9]+[.]?[0-9]*|[.][0-9]+)([eE][+-]?0*[0-9]{1,3})?"


def label_present_node(label: Node) -> Node:
    """Whether the row has a label, by calib's rule of a missing one
    (:func:`calib_cli.io.columns.label_missing`): not NULL, and its trimmed text neither empty
    nor ``nan`` in any case (a double NaN is ``nan`` in DuckDB and BigQuery, ``NaN`` in Spark,
    Snowflake and Postgres; a text ``NaN`` is how a CSV writer writes a missing float). A row
    without a label is left out, as a NULL one was: a NaN was counted as a negative.

    >>> from calib_cli.sql.dialects import dialect
    >>> from calib_cli.sql.tree import Column, render
    >>> print(render(label_present_node(Column("y")), dialect("postgres")))  # doctest: +ELLIPSIS
    ((NOT ("y" IS NULL)) AND CASE WHEN ((((((((((((LOWER(TRIM(CAST("y" AS TEXT))) = '0') OR ...
    """
    quick, full = _label_texts(label)
    lower = Call("LOWER", (full,))
    has_text = Binary("AND", Binary("<>", lower, Text("")), Binary("<>", lower, Text("nan")))
    known = _any_of(Call("LOWER", (quick,)), TRUE_LABEL_TEXT | FALSE_LABEL_TEXT)
    return Binary("AND", Not(IsNull(label)), if_else(known, TRUE, has_text))


def _label_texts(label: Node) -> tuple[Node, Node]:
    """The label's text without the spaces around it, and without any white space around it
    (:meth:`~calib_cli.sql.dialects.Dialect.trim`). Most labels are settled by the first,
    which engines trim at a fraction of the cost (0/1 numbers, booleans, ``yes``/``no``: one
    of calib's texts once spaces are gone); the rest are read from the second."""
    text = Cast(label, "string")
    return Call("TRIM", (text,)), Trimmed(text)


def _any_of(text: Node, texts: frozenset[str]) -> Node:
    """Whether ``text`` is one of ``texts``."""
    equal = [Binary("=", text, Text(one)) for one in sorted(texts)]
    return functools.reduce(lambda a, b: Binary("OR", a, b), equal)


def _as_number(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def positive_label_node(label: Node, positive_label: str | None) -> Node:
    """Whether the row's ``label`` is ``positive_label`` by calib's rule, or is positive by
    calib's rule without one (``None``; module docstring).

    >>> from calib_cli.sql.dialects import dialect
    >>> from calib_cli.sql.tree import Column, render
    >>> print(render(positive_label_node(Column("y"), "yes"), dialect("bigquery")))
    CASE WHEN (TRIM(CAST(`y` AS STRING)) = 'yes') THEN (1 = 1) ELSE (TRIM(CAST(`y` AS STRING)) = \
'yes') END
    >>> positive_label_node(Column("y"), "nan")
    Traceback (most recent call last):
    ...
    calib_cli.errors.OptionError: --positive-label 'nan' is not a finite number: the SQL takes \
a finite number (0, 1) or a label's text (yes)
    """
    if positive_label is None:  # the class calib's rule gives it: one statement of the rule
        return Binary("=", label_class_node(label, None), Int(1))
    quick, trimmed = _label_texts(label)
    text = positive_label.strip()
    value = _as_number(text)
    if value is None:
        return if_else(Binary("=", quick, Text(text)), TRUE, Binary("=", trimmed, Text(text)))
    if not math.isfinite(value):
        raise OptionError(
            f"--positive-label {positive_label!r} is not a finite number: the SQL takes a "
            "finite number (0, 1) or a label's text (yes)"
        )
    # a number's text once spaces are gone (0/1 labels) needs no other trimming
    return _number_or_text(
        quick, value, _number_or_text(trimmed, value, Binary("=", trimmed, Text(text)))
    )


def label_class_node(label: Node, positive_label: str | None) -> Node:
    """The row's class as an integer: 1 positive, 0 negative, and, without ``positive_label``,
    :data:`~calib_cli.core.checks.REFUSED_LABEL` (2) for a label calib refuses (``2``,
    ``maybe``, ``0.5``): calib's rule for negatives as for positives (``0``, ``false``, ``f``,
    ``no``, ``n`` in any case), and, as for positives, any number's text that reads as 0
    (``0.00``, ``-0``: a decimal or double column's text, which calib reads as numbers; calib
    refuses such text in a text column, which the SQL cannot tell apart). With
    ``positive_label``, 1 where the label is it, else 0.

    >>> from calib_cli.sql.dialects import dialect
    >>> from calib_cli.sql.tree import Column, render
    >>> print(render(label_class_node(Column("y"), "yes"), dialect("bigquery")))
    CASE WHEN CASE WHEN (TRIM(CAST(`y` AS STRING)) = 'yes') THEN (1 = 1) ELSE \
(TRIM(CAST(`y` AS STRING)) = 'yes') END THEN 1 ELSE 0 END
    """
    if positive_label is not None:
        return if_else(positive_label_node(label, positive_label), Int(1), Int(0))
    # calib's text rule first: it settles 0/1 integers and doubles, booleans and yes/no with a
    # few comparisons; other numbers' text (a decimal's 1.00) is read as a number
    quick, trimmed = _label_texts(label)
    whens = [
        (_any_of(Call("LOWER", (text,)), texts), Int(value))
        for text in (quick, trimmed)
        for texts, value in ((TRUE_LABEL_TEXT, 1), (FALSE_LABEL_TEXT, 0))
    ]
    number = case(
        [(NumberEquals(trimmed, 1.0), Int(1)), (NumberEquals(trimmed, 0.0), Int(0))],
        Int(REFUSED_LABEL),
    )
    # the number's cast only where the text is a number's (nested: Postgres' cast raises)
    return case(whens, if_else(FullMatch(trimmed, NUMBER_PATTERN), number, Int(REFUSED_LABEL)))


def _number_or_text(trimmed: Node, value: float, otherwise: Node) -> Node:
    """Where ``trimmed`` is a number's text, whether it reads as ``value``; elsewhere
    ``otherwise``."""
    number = FullMatch(trimmed, NUMBER_PATTERN)
    # nested CASEs, never AND: Postgres may evaluate both sides of an AND, and its cast of
    # text that is not a number raises; never NULL for a label present
    return if_else(number, if_else(NumberEquals(trimmed, value), TRUE, FALSE), otherwise)
