"""CSV dialects: ``--separator`` and ``--decimal-comma``, for every reader and CSV writer.

A command runs inside :func:`using_dialect`; the readers (the in-memory reader and every lazy
scan), the conversions of text to numbers and the CSV writers consult :func:`current_dialect`,
so that the dialect reaches every file a command reads without being passed through each scan.

CSV and TSV columns are read as text, so ``--decimal-comma`` does not change how a file is
parsed: it changes how the columns a command uses are turned into numbers (``"0,37"`` is 0.37,
``"0.37"`` still is too), so pass-through columns keep their text exactly. CSV outputs are
written in the input's dialect: the same separator, and the numbers calib adds with a decimal
comma (TSV outputs keep the tab).
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator, Sequence
from contextvars import ContextVar

import polars as pl

from calib_cli.errors import InputError
from calib_cli.types import CsvDialect

__all__ = [
    "CsvDialect",
    "current_dialect",
    "number_text",
    "parse_error_hint",
    "refuse_one_column",
    "require_column",
    "separator_hint",
    "using_dialect",
]

_DEFAULT = CsvDialect()
_CURRENT: ContextVar[CsvDialect | None] = ContextVar("calib_csv_dialect", default=None)


def current_dialect() -> CsvDialect:
    """The dialect of the command running (the default outside :func:`using_dialect`)."""
    return _CURRENT.get() or _DEFAULT


@contextlib.contextmanager
def using_dialect(dialect: CsvDialect) -> Iterator[None]:
    """Read and write CSV in ``dialect`` inside the block."""
    token = _CURRENT.set(dialect)
    try:
        yield
    finally:
        _CURRENT.reset(token)


def number_text(text: pl.Expr) -> pl.Expr:
    """Text of a number, stripped and, under ``--decimal-comma``, with its comma made a
    point, ready for ``cast(pl.Float64)``: the one place text becomes a number."""
    stripped = text.str.strip_chars()
    if current_dialect().decimal_comma:
        return stripped.str.replace(",", ".", literal=True)
    return stripped


def separator_hint(columns: list[str]) -> str:
    """A hint to add to "no column" errors when a CSV was read as one column whose header
    holds another separator (a European CSV read with ``,``), else ``""``.

    >>> separator_hint(["id;score;label"])
    "; the file looks separated by ';': add --separator ';'"
    """
    if len(columns) != 1:
        return ""
    for candidate, shown in ((";", "';'"), ("|", "'|'"), ("\t", "tab")):
        if candidate in columns[0] and candidate != current_dialect().separator:
            return f"; the file looks separated by {shown}: add --separator {shown}"
    return ""


def require_column(columns: Sequence[str], column: str, option: str | None, name: str) -> None:
    """Refuse (exit 65) a ``column`` that ``name`` does not have, naming the option that
    chose it, the columns it has and, for a CSV read as one column, the separator it looks
    like: the one "no column" message of every reader.

    >>> require_column(["id", "p"], "score", "--score-col", "s.csv")
    Traceback (most recent call last):
    ...
    calib_cli.errors.InputError: s.csv: no column 'score' (set --score-col); columns are: id, p
    """
    if column in columns:
        return
    names = list(columns)
    shown = ", ".join(names[:20]) + (", ..." if len(names) > 20 else "")
    hint = f" (set {option})" if option else ""
    raise InputError(
        f"{name}: no column '{column}'{hint}; columns are: {shown}" + separator_hint(names)
    )


def refuse_nested_groups(dtype: pl.DataType, column: str, option: str | None, name: str) -> None:
    """Refuse (exit 65) a grouping column (``--by``, ``--batch-col``, ``--strata-col``) of a
    nested type: a list, array or struct per row is no value to group by (it crashed with exit
    70), in every engine.

    >>> refuse_nested_groups(pl.List(pl.Int64), "g", "--by", "t.parquet")
    Traceback (most recent call last):
    ...
    calib_cli.errors.InputError: t.parquet: column 'g' holds list values, and --by groups by \
one value per row: name a column of numbers, text, dates or booleans
    """
    if dtype.is_nested() or dtype == pl.Object:
        by = f"{option} groups" if option else "a grouping column groups"
        raise InputError(
            f"{name}: column '{column}' holds {type(dtype).__name__.lower()} values, and {by} "
            "by one value per row: "
            "name a column of numbers, text, dates or booleans"
        )


def refuse_one_column(columns: list[str], name: str) -> None:
    """Refuse a CSV read as one column whose header holds ``;``, ``|`` or a tab while no
    ``--separator`` was given: every command needs two columns or more, and such a file's
    rows (``0,37`` in a decimal-comma file) would otherwise fail with a parser's message.

    >>> refuse_one_column(["id|score|label"], "s.csv")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    calib_cli.errors.InputError: s.csv: read as one column 'id|score|label'; ... --separator '|'
    """
    if current_dialect().separator is not None:
        return
    hint = separator_hint(columns)
    if hint:
        raise InputError(f"{name}: read as one column {columns[0]!r}{hint}")


def checked_header(columns: Sequence[str], name: str) -> dict[str, str]:
    """The renames a CSV header needs (:func:`unescaped_header`), after refusing a name given
    twice, as the parser renamed it or once the quotes are undone (``a"b`` and ``a""b``): the
    one check of a CSV header for the readers of whole files and of scans.

    >>> checked_header(['s ""x""', "label"], "s.csv")
    {'s ""x""': 's "x"'}
    """
    refuse_duplicated_columns(columns, name)
    renames = unescaped_header(columns)
    unescaped = [renames.get(column, column) for column in columns]
    repeated = sorted({c for c in unescaped if unescaped.count(c) > 1})
    if repeated:
        raise InputError(
            f"{name}: the header names column '{repeated[0]}' "
            f"{unescaped.count(repeated[0])} times; give each column its own name"
        )
    return renames


def unescaped_header(columns: Sequence[str]) -> dict[str, str]:
    """The renames that undo the CSV parser's doubled quotes in header names: a quoted cell
    holding ``s ""x""`` (quotes doubled, as CSV writes them) is the name ``s "x"``, which the
    parser kept as ``s ""x""`` (so the column could be named only so, and each CSV written
    doubled its quotes again).

    >>> unescaped_header(['s ""x""', "label"])
    {'s ""x""': 's "x"'}
    """
    return {name: name.replace('""', '"') for name in columns if '""' in name}


def refuse_duplicated_columns(columns: Sequence[str], name: str) -> None:
    """Refuse (exit 65) a CSV header that names a column twice. The parser renames the second
    ``x`` to ``x_duplicated_0``: the first would be read as the scores without a word, and the
    output's header would not be the input's.

    >>> refuse_duplicated_columns(["score", "label", "score_duplicated_0"], "s.csv")
    Traceback (most recent call last):
    ...
    calib_cli.errors.InputError: s.csv: the header names column 'score' 2 times; give each \
column its own name
    """
    present = set(columns)
    for column in columns:
        match = _DUPLICATED.fullmatch(column)
        if match is not None and match.group(1) in present:
            first = match.group(1)
            times = 1 + sum(
                (other := _DUPLICATED.fullmatch(c)) is not None and other.group(1) == first
                for c in columns
            )
            raise InputError(
                f"{name}: the header names column '{first}' {times} times; "
                "give each column its own name"
            )


#: How the CSV parser renames a repeated header name (``x``, ``x_duplicated_0``, ...).
_DUPLICATED = re.compile(r"(.*)_duplicated_(\d+)")


def parse_error_hint(message: str) -> str:
    """A hint for a CSV row with more fields than its header (a parser's message), most
    often a decimal comma in a comma-separated file, else ``""``.

    >>> with using_dialect(CsvDialect(decimal_comma=True)):
    ...     parse_error_hint("found more fields than defined in 'Schema'")
    "; with --decimal-comma, separate fields with another character: add --separator ';'"
    """
    if "more fields than defined" not in message:
        return ""
    dialect = current_dialect()
    if dialect.decimal_comma and dialect.separator in (None, ","):
        return "; with --decimal-comma, separate fields with another character: add --separator ';'"
    return "; a row has more fields than the header: check --separator"
