"""The SQL dialects calib emits, and every quirk of each in one place.

=============  ===========  ===========  ============  ==================  ============
               duckdb       spark        bigquery      snowflake           postgres
=============  ===========  ===========  ============  ==================  ============
identifier     ``"x"``      ```x```      ```x```       ``x`` or ``"x"``    ``"x"``
double const   ``1.5e-3``   ``1.5e-3``   ``1.5e-3``    ``CAST('1.5e-3'     ``CAST('1.5e-3'
                                                       AS DOUBLE)``        AS DOUBLE
                                                                           PRECISION)``
xor            ``xor(a,b)`` ``a ^ b``    ``a ^ b``     ``BITXOR(a,b)``     ``a # b``
shift right    ``a >> n``   ``shiftright``  ``a >> n``  ``BITSHIFTRIGHT``  ``a >> n``
string type    VARCHAR      STRING       STRING        VARCHAR             TEXT
full match     ``regexp_    ``RLIKE``    ``REGEXP_     ``REGEXP_LIKE``     ``~``
               full_match``              CONTAINS``
text = number  ``TRY_CAST`` ``TRY_CAST`` ``SAFE_CAST`` ``TRY_CAST``        ``NUMERIC``
=============  ===========  ===========  ============  ==================  ============

Doubles: DuckDB, Spark (3 and later, ``spark.sql.legacy.exponentLiteralAsDecimal.enabled``
off, its default) and BigQuery read a numeric literal with an exponent as a double; Postgres
reads every literal with a point or an exponent as ``numeric`` and Snowflake as a fixed-point
number, so there constants are written as a string cast to a double (each engine's string to
double conversion is correctly rounded). Every constant is Python's shortest round-trip form
(``repr``), so the engine reads back exactly the binary64 value calib holds.

Snowflake resolves unquoted identifiers case-insensitively but quoted ones exactly, so a simple
name (letters, digits, underscores) is left unquoted there and others are quoted. String
literals escape ``'`` (and ``\\`` where the dialect reads backslash escapes: Spark, BigQuery,
Snowflake).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Final, Literal, get_args

from calib_cli.errors import OptionError

SqlDialect = Literal["duckdb", "spark", "bigquery", "snowflake", "postgres"]
SQL_DIALECTS: Final[tuple[str, ...]] = get_args(SqlDialect)
#: Dialects whose emitted SQL the test suite runs in the engine; the others are parsed only.
RUN_DIALECTS: Final = ("duckdb", "spark")

_SIMPLE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
#: Words that cannot stand unquoted as a column name (the ones calib's own names could hit).
_RESERVED = frozenset(
    {"GROUP", "ORDER", "SELECT", "FROM", "WHERE", "TABLE", "BY", "CASE", "WHEN", "THEN", "END",
     "AND", "OR", "NOT", "NULL", "AS", "ON", "JOIN", "LIMIT", "ROW", "ROWS", "VALUES"}
)  # fmt: skip


#: The code points of Unicode's white space (White_Space: what Polars' ``strip_chars`` and
#: so calib strip from a label; :meth:`Dialect.trim`): ASCII's tab to carriage return and
#: space, next line, no-break space, Ogham's space mark, the typographic spaces, the line and
#: paragraph separators, the narrow no-break, medium mathematical and ideographic spaces.
_WHITE_SPACE_CODES = (
    *range(0x9, 0xE), 0x20, 0x85, 0xA0, 0x1680, *range(0x2000, 0x200B),
    0x2028, 0x2029, 0x202F, 0x205F, 0x3000,
)  # fmt: skip


@dataclass(frozen=True)
class Dialect:
    """How one engine spells the few things that differ."""

    name: SqlDialect
    quote: str
    double_type: str
    bigint_type: str
    string_type: str
    double_from_string: bool
    backslash_escapes: bool

    def identifier(self, name: str) -> str:
        """A column of the user's table, quoted as the engine needs."""
        if self.name == "snowflake" and _SIMPLE_NAME.match(name) and name.upper() not in _RESERVED:
            return name
        return self.alias(name)

    def alias(self, name: str) -> str:
        """A name calib gives an output column: always quoted, so that its case is kept."""
        doubled = name.replace(self.quote, self.quote * 2)
        return f"{self.quote}{doubled}{self.quote}"

    def string(self, text: str) -> str:
        """A string literal."""
        if self.backslash_escapes:
            return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"
        return "'" + text.replace("'", "''") + "'"

    def double(self, value: float) -> str:
        """A double constant that the engine reads as exactly ``value`` (finite)."""
        number = float(value)
        if not math.isfinite(number):
            raise ValueError(f"cannot write {number!r} as a SQL constant")
        text = repr(number)
        if "e" not in text:
            text += "e0"
        if self.double_from_string:
            return f"CAST('{text}' AS {self.double_type})"
        return f"({text})" if number < 0 or text.startswith("-") else text

    def xor(self, left: str, right: str) -> str:
        if self.name == "duckdb":
            return f"xor({left}, {right})"
        if self.name == "snowflake":
            return f"BITXOR({left}, {right})"
        if self.name == "postgres":
            return f"({left} # {right})"
        return f"({left} ^ {right})"

    def bit_and(self, left: str, right: str) -> str:
        if self.name == "snowflake":
            return f"BITAND({left}, {right})"
        return f"({left} & {right})"

    def full_match(self, text: str, pattern: str) -> str:
        """Whether ``text`` matches the regular expression ``pattern`` as a whole (``pattern``
        holds no backslash, so that no dialect's string escapes change it)."""
        if "\\" in pattern:
            raise ValueError(f"a pattern must hold no backslash, got {pattern!r}")
        anchored = self.string(f"^{pattern}$")
        if self.name == "duckdb":
            return f"regexp_full_match({text}, {self.string(pattern)})"
        if self.name == "spark":
            return f"({text} RLIKE {anchored})"
        if self.name == "bigquery":
            return f"REGEXP_CONTAINS({text}, {anchored})"
        if self.name == "snowflake":
            return f"REGEXP_LIKE({text}, {self.string(pattern)})"
        return f"({text} ~ {anchored})"

    def trim(self, text: str) -> str:
        """``text`` without the white space around it that calib strips from a label: every
        Unicode white space (Polars' ``strip_chars``), as a label ``yes\r`` from a CRLF file
        loaded as LF, or `` no`` after a no-break space (plain ``TRIM`` strips spaces only).
        The characters are written by code, so that no literal holds a control character:
        ``CHR`` of each code point, or in Spark (whose ``chr`` is a byte) the UTF-8 bytes'
        hex. DuckDB takes a regular expression of the same class (RE2's ``\\pZ``, the
        separators, with the controls tab to carriage return and next line): its ``TRIM`` of
        25 characters took 0.70 s on 1e6 labels, the expression 0.19 s, as ASCII's six.
        BigQuery's ``TRIM`` strips every Unicode white space already.

        >>> dialect("postgres").trim("t")[:44]
        'BTRIM(t, CHR(9) || CHR(10) || CHR(11) || CHR'
        >>> dialect("spark").trim("t")[:52]
        "TRIM(BOTH decode(unhex('090A0B0C0D20C285C2A0E19A80E2"
        """
        if self.name == "bigquery":
            return f"TRIM({text})"
        if self.name == "duckdb":
            space = "[\\t-\\r\\x{85}\\pZ]+"
            return f"regexp_replace({text}, '^{space}|{space}$', '', 'g')"
        if self.name == "spark":
            utf8 = "".join(chr(code) for code in _WHITE_SPACE_CODES).encode().hex().upper()
            return f"TRIM(BOTH decode(unhex('{utf8}'), 'UTF-8') FROM {text})"
        codes = " || ".join(f"CHR({code})" for code in _WHITE_SPACE_CODES)
        if self.name == "postgres":
            return f"BTRIM({text}, {codes})"
        return f"TRIM({text}, {codes})"

    def number_equals(self, text: str, value: float) -> str:
        """Whether ``text`` (a number's text, checked by the caller) read as a number equals
        ``value``: as a double (never an error: ``TRY_CAST``, BigQuery's ``SAFE_CAST``), or in
        Postgres, which has no such cast and raises on a double's overflow or underflow, as
        exact decimals (``NUMERIC``; ``value`` written as its shortest round-trip text)."""
        if self.name == "postgres":
            return f"(CAST({text} AS NUMERIC) = CAST({self.string(repr(float(value)))} AS NUMERIC))"
        cast = "SAFE_CAST" if self.name == "bigquery" else "TRY_CAST"
        return f"({cast}({text} AS {self.double_type}) = {self.double(value)})"

    def shift_right(self, left: str, bits: int) -> str:
        if self.name == "snowflake":
            return f"BITSHIFTRIGHT({left}, {bits})"
        if self.name == "spark":
            return f"shiftright({left}, {bits})"
        return f"({left} >> {bits})"


DIALECTS: Final[dict[str, Dialect]] = {
    "duckdb": Dialect("duckdb", '"', "DOUBLE", "BIGINT", "VARCHAR", False, False),
    "spark": Dialect("spark", "`", "DOUBLE", "BIGINT", "STRING", False, True),
    "bigquery": Dialect("bigquery", "`", "FLOAT64", "INT64", "STRING", False, True),
    "snowflake": Dialect("snowflake", '"', "DOUBLE", "BIGINT", "VARCHAR", True, True),
    "postgres": Dialect("postgres", '"', "DOUBLE PRECISION", "BIGINT", "TEXT", True, False),
}


def dialect(name: str) -> Dialect:
    """The :class:`Dialect` called ``name`` (an OptionError listing the choices otherwise).

    >>> dialect("postgres").double(0.1)
    "CAST('0.1e0' AS DOUBLE PRECISION)"
    >>> dialect("spark").double(-2.5e-300)
    '(-2.5e-300)'
    """
    try:
        return DIALECTS[name]
    except KeyError:
        raise OptionError(
            f"dialect must be one of {', '.join(SQL_DIALECTS)}, got {name!r}"
        ) from None
