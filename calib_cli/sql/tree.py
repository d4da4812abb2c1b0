"""A small SQL expression tree, rendered per dialect (never SQL pasted from strings).

Nodes are frozen dataclasses; :func:`render` writes one for a :class:`~calib_cli.sql.dialects.
Dialect`. Every binary operation is parenthesised, so the engine's precedence rules never
matter. The only text taken as given is a user's score expression (:class:`Raw`), which is
wrapped in parentheses.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from calib_cli.sql.dialects import Dialect
from calib_cli.sql.names import group_text

BinaryOp = Literal["+", "-", "*", "/", "<", "<=", ">", ">=", "=", "<>", "AND", "OR"]


@dataclass(frozen=True)
class Double:
    """A double constant (written so that the engine reads exactly this binary64)."""

    value: float


@dataclass(frozen=True)
class Int:
    """An integer constant (small: below 2**53)."""

    value: int


@dataclass(frozen=True)
class Text:
    """A string constant."""

    value: str


@dataclass(frozen=True)
class Null:
    """The NULL constant."""


@dataclass(frozen=True)
class Column:
    """A column, optionally qualified by a table alias."""

    name: str
    table: str | None = None


@dataclass(frozen=True)
class Raw:
    """A SQL expression given by the user (``--score-expr``), used as is in parentheses."""

    sql: str


@dataclass(frozen=True)
class Binary:
    op: BinaryOp
    left: Node
    right: Node


@dataclass(frozen=True)
class Not:
    operand: Node


@dataclass(frozen=True)
class IsNull:
    operand: Node


@dataclass(frozen=True)
class Call:
    """A function every dialect spells alike (LN, EXP, ABS, FLOOR, POWER, COUNT, SUM, ...)."""

    name: str
    args: tuple[Node, ...]


@dataclass(frozen=True)
class Cast:
    operand: Node
    to: Literal["double", "bigint", "string"]


@dataclass(frozen=True)
class Xor:
    left: Node
    right: Node


@dataclass(frozen=True)
class BitAnd:
    left: Node
    right: Node


@dataclass(frozen=True)
class ShiftRight:
    operand: Node
    bits: int


@dataclass(frozen=True)
class FullMatch:
    """Whether the text ``operand`` matches ``pattern`` (a regular expression without
    backslashes) as a whole: :meth:`~calib_cli.sql.dialects.Dialect.full_match`."""

    operand: Node
    pattern: str


@dataclass(frozen=True)
class Trimmed:
    """The text ``operand`` without the white space calib strips around a value:
    :meth:`~calib_cli.sql.dialects.Dialect.trim`."""

    operand: Node


@dataclass(frozen=True)
class NumberEquals:
    """Whether the text ``operand``, a number's text, read as a number equals ``value``:
    :meth:`~calib_cli.sql.dialects.Dialect.number_equals`."""

    operand: Node
    value: float


@dataclass(frozen=True)
class GroupText:
    """The text calib gives the value of ``column``, a column that names rows (``--by``,
    ``--strata-col``): :func:`calib_cli.sql.names.group_text`."""

    operand: Node
    column: str


@dataclass(frozen=True)
class Var:
    """The value bound by the enclosing :class:`Let` of this ``name``."""

    name: str


@dataclass(frozen=True)
class Let:
    """``body`` with :class:`Var` ``name`` standing for ``value``, computed once: so that an
    expression read many times (a step's output read by every knot of an isotonic map, a
    stratum's text read by every stratum's test) is written once. DuckDB and Spark bind it
    with a lambda over a one-element list, Postgres with a scalar subquery; BigQuery and
    Snowflake (whose correlated subqueries are limited) repeat ``value`` in its place."""

    name: str
    value: Node
    body: Node


@dataclass(frozen=True)
class Case:
    """``CASE WHEN c1 THEN v1 ... ELSE other END``."""

    whens: tuple[tuple[Node, Node], ...]
    otherwise: Node | None = None


Node = (
    Double
    | Int
    | Text
    | Null
    | Column
    | Raw
    | Binary
    | Not
    | IsNull
    | Call
    | Cast
    | Xor
    | BitAnd
    | ShiftRight
    | FullMatch
    | Trimmed
    | NumberEquals
    | GroupText
    | Var
    | Let
    | Case
)


# ------------------------------------------------------------------ small constructors

#: True and false in every dialect (BigQuery and Postgres have no boolean cast of numbers).
TRUE, FALSE = Binary("=", Int(1), Int(1)), Binary("=", Int(1), Int(0))


def add(a: Node, b: Node) -> Node:
    return Binary("+", a, b)


def sub(a: Node, b: Node) -> Node:
    return Binary("-", a, b)


def mul(a: Node, b: Node) -> Node:
    return Binary("*", a, b)


def div(a: Node, b: Node) -> Node:
    return Binary("/", a, b)


def call(name: str, *args: Node) -> Node:
    return Call(name, tuple(args))


def case(whens: Sequence[tuple[Node, Node]], otherwise: Node | None = None) -> Node:
    return Case(tuple(whens), otherwise)


def if_else(condition: Node, then: Node, otherwise: Node) -> Node:
    return Case(((condition, then),), otherwise)


def clip(value: Node, low: float, high: float) -> Node:
    """``value`` clipped to ``[low, high]`` (a CASE, so that NULL stays NULL in every engine,
    unlike GREATEST and LEAST, which skip NULLs in some)."""
    return case(
        [
            (Binary("<", value, Double(low)), Double(low)),
            (Binary(">", value, Double(high)), Double(high)),
        ],
        value,
    )


# ------------------------------------------------------------------ rendering


def render(node: Node, d: Dialect) -> str:
    """The SQL text of ``node`` in dialect ``d``.

    >>> from calib_cli.sql.dialects import dialect
    >>> render(clip(Column("score"), 0.0, 1.0), dialect("duckdb"))
    'CASE WHEN ("score" < 0.0e0) THEN 0.0e0 WHEN ("score" > 1.0e0) THEN 1.0e0 ELSE "score" END'
    """
    return _render(node, d, {})


def _render(node: Node, d: Dialect, env: dict[str, str]) -> str:
    """:func:`render` with ``env``: the SQL of each :class:`Var` in scope."""

    def render(child: Node, d: Dialect) -> str:
        return _render(child, d, env)

    if isinstance(node, Var):
        return env[node.name]
    if isinstance(node, Let):
        bound = render(node.value, d)
        if d.name == "duckdb":
            body = _render(node.body, d, {**env, node.name: node.name})
            return f"list_transform([{bound}], lambda {node.name}: {body})[1]"
        if d.name == "spark":
            body = _render(node.body, d, {**env, node.name: node.name})
            return f"transform(array({bound}), {node.name} -> {body})[0]"
        if d.name == "postgres":
            body = _render(node.body, d, {**env, node.name: node.name})
            return f"(SELECT {body} FROM (SELECT {bound} AS {node.name}) AS {node.name}_let)"
        return _render(node.body, d, {**env, node.name: f"({bound})"})
    if isinstance(node, Double):
        return d.double(node.value)
    if isinstance(node, Int):
        return str(node.value) if node.value >= 0 else f"({node.value})"
    if isinstance(node, Text):
        return d.string(node.value)
    if isinstance(node, Null):
        return "NULL"
    if isinstance(node, Column):
        name = d.identifier(node.name)
        return name if node.table is None else f"{node.table}.{name}"
    if isinstance(node, Raw):
        return f"({node.sql})"
    if isinstance(node, Binary):
        return f"({render(node.left, d)} {node.op} {render(node.right, d)})"
    if isinstance(node, Not):
        return f"(NOT {render(node.operand, d)})"
    if isinstance(node, IsNull):
        return f"({render(node.operand, d)} IS NULL)"
    if isinstance(node, Call):
        return f"{node.name}({', '.join(render(a, d) for a in node.args)})"
    if isinstance(node, Cast):
        to = {"double": d.double_type, "bigint": d.bigint_type, "string": d.string_type}[node.to]
        return f"CAST({render(node.operand, d)} AS {to})"
    if isinstance(node, Xor):
        return d.xor(render(node.left, d), render(node.right, d))
    if isinstance(node, BitAnd):
        return d.bit_and(render(node.left, d), render(node.right, d))
    if isinstance(node, ShiftRight):
        return d.shift_right(render(node.operand, d), node.bits)
    if isinstance(node, FullMatch):
        return d.full_match(render(node.operand, d), node.pattern)
    if isinstance(node, Trimmed):
        return d.trim(render(node.operand, d))
    if isinstance(node, NumberEquals):
        return d.number_equals(render(node.operand, d), node.value)
    if isinstance(node, GroupText):
        return f"({group_text(d, render(node.operand, d), column=node.column)})"
    parts = ["CASE"]
    for condition, value in node.whens:
        parts.append(f"WHEN {render(condition, d)} THEN {render(value, d)}")
    if node.otherwise is not None:
        parts.append(f"ELSE {render(node.otherwise, d)}")
    parts.append("END")
    return " ".join(parts)
