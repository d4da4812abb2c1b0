"""The text of a column that names rows (``--by``, ``--strata-col``) as calib writes it.

calib names a group or stratum by the column's value as Polars' text
(``pl.col(c).cast(pl.String)``, :mod:`calib_cli.summaries.scan`), and an engine's
``CAST(c AS VARCHAR)`` differs for some types, which would split a group when summaries from
files and from an engine merge, or miss a stratum's rows. The emitters know the table's name,
not its columns' types, so the expression asks the engine for the type (DuckDB ``typeof``,
Spark ``typeof``, Postgres ``pg_typeof``; each branch type-checks for any column, as it reads
the value through its text) and writes, for the types whose text differs:

* timestamps: ``YYYY-MM-DD HH:MM:SS.ffffff``, the fraction with as many digits as Polars
  gives the unit calib reads from the engine's Parquet: microseconds (DuckDB ``TIMESTAMP`` and
  ``TIMESTAMP_S``, Spark ``TIMESTAMP_NTZ``, Postgres ``timestamp``), milliseconds (DuckDB
  ``TIMESTAMP_MS``), nanoseconds (DuckDB ``TIMESTAMP_NS``; Spark ``TIMESTAMP``, which Spark
  writes to Parquet as INT96 by default, in UTC); a timestamp with a time zone in UTC with
  ``+00:00`` appended (DuckDB, Postgres);
* times of day (DuckDB, Postgres): ``HH:MM:SS``, the fraction dropped, as Polars writes them;
* doubles: Polars' text (:func:`float_text`): the shortest digits that read back as the
  double, written fixed from ``1e-5`` up to below ``1e16`` (``.0`` after an integer) and as
  ``1e+16``, ``1.5e-7`` outside, ``NaN``, ``inf``, ``-inf``. The digits are the engine's own
  text, re-laid out. DuckDB's are the shortest but for a few powers of two it writes wrong
  (2**81 as 2**82's text; 2**806 with a hex digit ``A``), which the query detects (the text
  does not read back) and replaces by the first rounding to 1, 2, ... 17 digits that does.
  Spark's are Java 17's ``Double.toString``, longer than the shortest for about 0.3% of
  random doubles (``5e-324`` is ``4.9E-324``), Postgres' for rare ones (``-2.5e22`` is
  ``-2.4999999999999998e+22``): where a rounding to one digit fewer reads back, the query
  fails with a message naming the column, never a silent split (measured against Polars on
  30,000 doubles in each engine: no other difference);
* 32-bit floats: Polars writes their shortest single-precision digits in a layout of its own,
  which no engine repeats: the query fails, naming the column (cast it to a double in a view,
  and in the files calib reads).

Every other type keeps the engine's text, which is Polars' (integers, text, booleans
``true``/``false``, dates, decimals). BigQuery and Snowflake have no type test usable in a
``CASE`` that stays valid for every type, so their column is cast as it is
(:data:`CHECKED_DIALECTS` lists the others), and the emitting command warns that timestamp,
float and time columns must be given as text there.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Final

from calib_cli.sql.dialects import SQL_DIALECTS, Dialect

__all__ = ["CHECKED_DIALECTS", "float_text", "group_text", "unchecked_warning"]

#: Dialects whose emitted text of a naming column is calib's for every type (or fails).
CHECKED_DIALECTS: Final = ("duckdb", "spark", "postgres")

#: Polars writes a double fixed for decimal exponents in [-5, 16), in scientific form outside.
_FIXED_LOW, _FIXED_HIGH = -5, 16
#: No double needs more significant digits than this to read back exactly.
_MAX_DIGITS = 17


def _fail(d: Dialect, message: str, text: str) -> str:
    """An expression that makes the query fail with ``message`` (and the value's ``text``)
    when it is evaluated; never a constant, which an engine may fold while planning."""
    full = f"({d.string(message + ': ')} || {text})"
    if d.name == "duckdb":
        return f"error({full})"
    if d.name == "spark":
        return f"raise_error({full})"
    # Postgres: no error function in plain SQL; a cast of the message to an integer fails,
    # and its error quotes the message
    return f"CAST(CAST({full} || (SELECT '') AS INTEGER) AS TEXT)"


def _group(d: Dialect, text: str, pattern: str) -> str:
    """The first group of ``pattern`` in ``text``, ``''`` when it does not match."""
    if d.name == "postgres":
        return f"COALESCE((regexp_match({text}, {d.string(pattern)}))[1], '')"
    return f"regexp_extract({text}, {d.string(pattern)}, 1)"


def _int(d: Dialect, sql: str) -> str:
    return f"CAST({sql} AS INTEGER)"


Refs = Callable[[str], str]


def _let(d: Dialect, levels: Sequence[Sequence[tuple[str, Callable[[Refs], str]]]],
         body: Callable[[Refs], str]) -> str:  # fmt: skip
    """``body`` with named values computed once each (so the SQL does not repeat them):
    ``levels`` of ``(name, sql)``, each ``sql`` and ``body`` reading earlier names through
    their reference. DuckDB and Spark bind a level as a one-struct list and a lambda
    (``list_transform``, ``transform``), Postgres as a scalar subquery over derived tables
    (evaluated only where its ``CASE`` branch is taken)."""
    if d.name == "postgres":

        def pg_ref(name: str) -> str:
            return f"_calib_{name}"

        source = ""
        for i, level in enumerate(levels):
            columns = ", ".join(f"{sql(pg_ref)} AS {pg_ref(name)}" for name, sql in level)
            source = (
                f"(SELECT {columns}) AS _calib_l{i}"
                if not source
                else f"(SELECT *, {columns} FROM {source}) AS _calib_l{i}"
            )
        return f"(SELECT {body(pg_ref)} FROM {source})"
    where = {name: i for i, level in enumerate(levels) for name, _ in level}

    def ref(name: str) -> str:
        return f"_calib_v{where[name]}.{name}"

    out = body(ref)
    for i in reversed(range(len(levels))):
        if d.name == "duckdb":
            fields = ", ".join(f"'{name}': {sql(ref)}" for name, sql in levels[i])
            out = f"list_transform([{{{fields}}}], lambda _calib_v{i}: {out})[1]"
        else:
            fields = ", ".join(f"'{name}', {sql(ref)}" for name, sql in levels[i])
            out = f"transform(array(named_struct({fields})), _calib_v{i} -> {out})[0]"
    return out


def _as_double(d: Dialect, text: str) -> str:
    if d.name == "postgres":
        return f"CAST({text} AS DOUBLE PRECISION)"
    return f"TRY_CAST({text} AS DOUBLE)"


def _rounded_reads_back(d: Dialect, value: str, n_digits: str) -> str:
    """Whether the double ``value`` rounded to ``n_digits`` (SQL, at least 1) significant
    digits reads back as ``value``."""
    if d.name == "postgres":
        text = f"to_char({value}, rpad('9.', {n_digits} + 1, '9') || 'EEEE')"
    else:
        function = "format_string" if d.name == "spark" else "printf"
        s = d.string_type
        text = f"{function}('%.' || CAST({n_digits} - 1 AS {s}) || 'e', {value})"
    return f"({_as_double(d, text)} = {value})"


def float_text(d: Dialect, text: str, *, column: str) -> str:
    """Polars' text of a double from ``text``, the engine's text of it (any layout: fixed or
    scientific, ``e`` or ``E``, a signed or padded exponent).

    The text is parsed into its sign, significant digits ``D`` and decimal exponent ``e``
    (the value is ``0.D x 10**(e + 1)``) and laid out as Polars does (module docstring). A
    text that is not the shortest (a rounding to one digit fewer reads back as the same
    double: Spark's Java 17 ``Double.toString`` for some doubles, Postgres for rare ones)
    makes the query fail, naming the column: calib's text has fewer digits.
    """
    s = d.string_type

    def body(r: Refs) -> str:
        digits, e, t = r("digits"), r("e"), r("t")
        scientific = (
            f"substr({digits}, 1, 1) || CASE WHEN length({digits}) > 1 THEN '.' || "
            f"substr({digits}, 2) ELSE '' END || 'e' || CASE WHEN {e} > 0 THEN '+' ELSE '' END"
            f" || CAST({e} AS {s})"
        )
        fixed_large = (
            f"CASE WHEN length({digits}) <= {e} + 1 THEN rpad({digits}, {e} + 1, '0') || '.0' "
            f"ELSE substr({digits}, 1, {e} + 1) || '.' || substr({digits}, {e} + 2) END"
        )
        fixed_small = f"'0.' || repeat('0', 0 - {e} - 1) || {digits}"
        fail = _fail(
            d,
            f"calib: column '{column}' holds a double whose text in this engine is not the "
            "shortest that reads back as it, as calib writes it: name the rows by a text or "
            "integer column",
            t,
        )
        n = f"length({digits})"
        shorter = _rounded_reads_back(d, _as_double(d, t), f"{n} - 1")
        # a CASE, not AND: Postgres may evaluate both sides of an AND
        longer = (
            f"CASE WHEN {n} > {_MAX_DIGITS} THEN TRUE WHEN {n} > 1 THEN {shorter} ELSE FALSE END"
        )
        # fast path (not Spark, whose fixed text may not be the shortest): a fixed text with
        # a point and at most 16 digits is Polars' text already (the shortest digits, in the
        # fixed layout DuckDB and Postgres share with Polars)
        plain = d.full_match(t, "-?[0-9]+[.][0-9]+")
        fast = (
            "" if d.name == "spark" else f"WHEN {plain} AND length({t}) <= {_MAX_DIGITS} THEN {t} "
        )
        return (
            f"CASE {fast}WHEN LOWER({t}) LIKE '%nan%' THEN 'NaN' "
            f"WHEN LOWER({t}) IN ('inf', 'infinity', '+inf', '+infinity') THEN 'inf' "
            f"WHEN LOWER({t}) IN ('-inf', '-infinity') THEN '-inf' "
            f"WHEN {digits} = '' THEN {r('sign')} || '0.0' "
            f"WHEN {longer} THEN {fail} "
            f"WHEN {e} >= {_FIXED_HIGH} OR {e} < {_FIXED_LOW} THEN {r('sign')} || {scientific} "
            f"WHEN {e} >= 0 THEN {r('sign')} || {fixed_large} "
            f"ELSE {r('sign')} || {fixed_small} END"
        )

    def exponent(r: Refs) -> str:
        x = r("exponent")
        return (
            f"CAST(CASE WHEN {x} = '' THEN 0 ELSE CAST({x} AS INTEGER) END + length({r('whole')})"
            f" - 1 - (length({r('whole')} || {r('fraction')}) - length({r('unled')})) AS INTEGER)"
        )

    levels: list[list[tuple[str, Callable[[Refs], str]]]] = [
        [("t", lambda r: text)],
        [
            ("sign", lambda r: _group(d, r("t"), "^(-?)")),
            ("whole", lambda r: _group(d, r("t"), "^[-+]?([0-9]*)")),
            ("fraction", lambda r: _group(d, r("t"), "^[-+]?[0-9]*[.]([0-9]*)")),
            ("exponent", lambda r: _group(d, r("t"), "[eE]([-+]?[0-9]+)$")),
        ],
        [("unled", lambda r: f"regexp_replace({r('whole')} || {r('fraction')}, '^0+', '')")],
        [
            ("digits", lambda r: f"regexp_replace({r('unled')}, '0+$', '')"),
            ("e", exponent),
        ],
    ]
    return _let(d, levels, body)


def group_text(d: Dialect, value: str, *, column: str) -> str:
    """The text calib gives the value of the naming column ``column`` (``value``: its SQL),
    NULL for NULL (module docstring)."""
    s = d.string_type
    text = f"CAST({value} AS {s})"
    if d.name not in CHECKED_DIALECTS:
        return text
    float32 = _fail(
        d,
        f"calib: column '{column}' is a 32-bit float, whose text calib writes in a layout no "
        "engine repeats: cast it to a double (in a view, and in the files calib reads)",
        text,
    )
    whens: list[tuple[str, str]]
    if d.name == "duckdb":
        kind = f"typeof({value})"

        def stamp(sql_type: str, fraction: str) -> str:
            return f"strftime(TRY_CAST({text} AS {sql_type}), '%Y-%m-%d %H:%M:%S.{fraction}')"

        utc = f"timezone('UTC', TRY_CAST({text} AS TIMESTAMPTZ))"
        # DuckDB's text is the shortest, but for a few powers of two it writes wrong (2**81
        # as 2**82's text, 2**806 with a hex digit A): there the first rounding to 1, 2, ...
        # 17 significant digits that reads back
        number = f"TRY_CAST({value} AS DOUBLE)"
        roundings = " ".join(
            f"WHEN TRY_CAST(printf('%.{k - 1}e', {number}) AS DOUBLE) = {number} "
            f"THEN printf('%.{k - 1}e', {number})"
            for k in range(1, _MAX_DIGITS)
        )
        duck_double = (
            f"CASE WHEN TRY_CAST({text} AS DOUBLE) = {number} THEN {text} "
            f"{roundings} ELSE printf('%.16e', {number}) END"
        )
        whens = [
            ("'TIMESTAMP', 'TIMESTAMP_S'", stamp("TIMESTAMP", "%f")),
            ("'TIMESTAMP_MS'", stamp("TIMESTAMP", "%g")),
            ("'TIMESTAMP_NS'", stamp("TIMESTAMP_NS", "%n")),
            (
                "'TIMESTAMP WITH TIME ZONE'",
                f"strftime({utc}, '%Y-%m-%d %H:%M:%S.%f') || '+00:00'",
            ),
            ("'TIME'", f"substr({text}, 1, 8)"),
            ("'DOUBLE'", float_text(d, duck_double, column=column)),
            ("'FLOAT'", float32),
        ]
    elif d.name == "spark":
        kind = f"typeof({value})"
        ntz = f"TRY_CAST({text} AS TIMESTAMP_NTZ)"
        ltz = f"to_utc_timestamp(TRY_CAST({text} AS TIMESTAMP), current_timezone())"
        whens = [
            ("'timestamp_ntz'", f"date_format({ntz}, 'yyyy-MM-dd HH:mm:ss.SSSSSS')"),
            ("'timestamp'", f"date_format({ltz}, 'yyyy-MM-dd HH:mm:ss.SSSSSSSSS')"),
            (
                "'double'",
                float_text(d, text, column=column),
            ),
            ("'float'", float32),
        ]
    else:
        kind = f"CAST(pg_typeof({value}) AS TEXT)"
        utc = f"(CAST({text} AS TIMESTAMPTZ) AT TIME ZONE 'UTC')"
        whens = [
            (
                "'timestamp without time zone'",
                f"to_char(CAST({text} AS TIMESTAMP), 'YYYY-MM-DD HH24:MI:SS.US')",
            ),
            (
                "'timestamp with time zone'",
                f"to_char({utc}, 'YYYY-MM-DD HH24:MI:SS.US') || '+00:00'",
            ),
            ("'time without time zone'", f"substr({text}, 1, 8)"),
            ("'double precision'", float_text(d, text, column=column)),
            ("'real'", float32),
        ]
    branches = " ".join(f"WHEN {kind} IN ({types}) THEN {sql}" for types, sql in whens)
    return f"CASE WHEN {value} IS NULL THEN NULL {branches} ELSE {text} END"


def unchecked_warning(dialect_name: str, option: str, column: str) -> str | None:
    """The warning of a naming column in a dialect whose SQL cannot write calib's text of
    every type (:data:`CHECKED_DIALECTS`); None in the others.

    >>> print(unchecked_warning("bigquery", "--by", "day"))
    --by 'day': bigquery SQL names rows by the column's text as bigquery writes it, which is \
not calib's for timestamps, doubles and times (calib writes 2024-01-01 00:00:00.000000 and \
10000000000.0): if 'day' holds such values, name the rows by a text or integer column, or \
the groups of summaries from files and from the engine do not merge (strata: rows are missed)
    >>> unchecked_warning("duckdb", "--by", "day") is None
    True
    """
    if dialect_name in CHECKED_DIALECTS or dialect_name not in SQL_DIALECTS:
        return None
    return (
        f"{option} '{column}': {dialect_name} SQL names rows by the column's text as "
        f"{dialect_name} writes it, which is not calib's for timestamps, doubles and times "
        "(calib writes 2024-01-01 00:00:00.000000 and 10000000000.0): if "
        f"'{column}' holds such values, name the rows by a text or integer column, or the "
        "groups of summaries from files and from the engine do not merge (strata: rows are "
        "missed)"
    )
