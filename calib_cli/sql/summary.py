"""A calib summary as one SQL ``GROUP BY`` (``calib summarize --emit-sql``).

The query returns the rows of a :class:`~calib_cli.summaries.ScoreSummary` (the format of
:mod:`calib_cli.summaries`: one row per occupied ``(group, cell, bin, label)`` with its counts,
sums, minima and maxima), computed by the engine from the table's rows, plus a constant column
``calib_summary`` holding the summary's metadata (JSON), so that the result saved as Parquet by
any engine carries what a reader needs. (DuckDB can also write that JSON as the Parquet
key-value metadata ``calib.summary``: ``COPY (query) TO 'day.parquet' (FORMAT parquet,
KV_METADATA {'calib.summary': '...'})``, which ``calib reliability --from-summary`` reads
as it reads calib's own files.)

The per-row terms repeat calib's formulas (:func:`calib_cli.summaries.summary.summarize_arrays`)
in SQL: the grid cell from the score's binary exponent and mantissa (the arithmetic form in
:mod:`calib_cli.summaries.grid`: the exponent from ``FLOOR(LN(x) / LN(2))``, corrected by one
either way against exact powers of two, so it is exact; subnormal scores scaled by
``2**1022`` first), the bin as the number of inner edges strictly below the score (a balanced
``CASE``), ``log1p`` where calib uses it by Goldberg's formula
``log1p(v) = v ln(1 + v) / ((1 + v) - 1)`` (a few units in the last place; SQL engines have
no common ``log1p``), and SciPy's ``logit`` with its own two branches. Counts and keys are
exact; sums differ from calib's only by the order of summation (about 1e-16 relative per
term), far inside the 1e-9 the figures are compared at.

Rows whose score or weight is NULL are left out (calib refuses them); a row without a label
(NULL, NaN, empty) is counted apart as label 3 (:data:`~calib_cli.core.checks.UNLABELLED`),
which every reader refuses, naming how many rows and what to do; a label is
positive by calib's rule, with or without ``positive_label`` (as in :mod:`calib_cli.sql.sampling`;
:func:`calib_cli.sql.values.positive_label_node`, as a number where the label's text is a
number's text, else as text; ``positive_label`` is recorded in the metadata so that
readers merge only summaries whose labels mean the same, and a refinement query,
:meth:`SummaryQuery.refining`, reads them alike). Without ``positive_label`` a label calib
refuses (``2``, ``maybe``) is label 2 (:func:`calib_cli.sql.values.label_class_node`): the query
cannot stop, and calib refuses a summary that holds such rows; with it, any other value is a
negative. The
group is the ``by`` column's text as calib writes it (:mod:`calib_cli.sql.names`: timestamps
and doubles as Polars writes them; NULL stays the missing group).

On a table (or partition) without rows the query returns no rows, so its result holds no
metadata: readers of several summary files leave such a file out
(:func:`calib_cli.io.summary_file.read_summary_part`).

Cost: one scan and one aggregation of the table; the result has at most ``groups x occupied
(cell, bin) x 2`` rows, a few MB per group whatever the rows (see :mod:`calib_cli.summaries`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from calib_cli.core.checks import UNLABELLED
from calib_cli.errors import InputError
from calib_cli.sql.dialects import Dialect, dialect
from calib_cli.sql.tree import (
    Binary,
    Cast,
    Column,
    Double,
    GroupText,
    Int,
    IsNull,
    Node,
    Not,
    Null,
    add,
    call,
    case,
    clip,
    div,
    if_else,
    mul,
    render,
    sub,
)
from calib_cli.sql.values import label_class_node, label_present_node
from calib_cli.summaries.grid import check_bin_edges, check_mantissa_bits, half_cell
from calib_cli.summaries.summary import (
    DEFAULT_BIN_EDGES,
    DEFAULT_EPS,
    GRID_KIND,
    SCHEMA_VERSION,
    SUMMARY_KIND,
    check_eps,
    check_positive_label,
)

if TYPE_CHECKING:
    from calib_cli.summaries.summary import ScoreSummary

__all__ = ["METADATA_COLUMN", "SummaryQuery", "summary_metadata", "summary_sql"]

#: The constant column of the query that holds the summary's metadata (JSON).
METADATA_COLUMN = "calib_summary"
_SMALLEST_NORMAL = 2.0**-1022


@dataclass(frozen=True)
class SummaryQuery:
    """What a summary query needs (the options of ``calib summarize``)."""

    table: str
    score_col: str = "score"
    label_col: str = "label"
    weight_col: str | None = None
    by: str | None = None
    positive_label: str | None = None
    bin_edges: Sequence[float] = field(default=DEFAULT_BIN_EDGES)
    mantissa_bits: int = 12
    eps: float = DEFAULT_EPS

    @classmethod
    def refining(cls, summary: ScoreSummary, *, table: str, mantissa_bits: int) -> SummaryQuery:
        """The query that summarises ``table``'s rows as ``summary`` was made, on a grid of
        ``mantissa_bits``, every group pooled: the same columns, label rule
        (``positive_label``), bins and ``eps``, so that its result refines ``summary``.

        >>> from calib_cli.summaries.summary import summarize_arrays
        >>> s = summarize_arrays([1, 0], [0.2, 0.7], label_column="y", positive_label="0")
        >>> q = SummaryQuery.refining(s, table="t", mantissa_bits=20)
        >>> q.label_col, q.positive_label, q.mantissa_bits
        ('y', '0', 20)
        """
        return cls(
            table=table,
            score_col=summary.score_column,
            label_col=summary.label_column,
            weight_col=summary.weight_column,
            positive_label=summary.positive_label,
            bin_edges=summary.bin_edges,
            mantissa_bits=mantissa_bits,
            eps=summary.eps,
        )


def summary_metadata(query: SummaryQuery) -> dict[str, Any]:
    """The summary's metadata, as :meth:`ScoreSummary.metadata` writes it."""
    return {
        "kind": SUMMARY_KIND,
        "schema_version": SCHEMA_VERSION,
        "grid": {"kind": GRID_KIND, "mantissa_bits": check_mantissa_bits(query.mantissa_bits)},
        "bin_edges": [float(e) for e in check_bin_edges(list(query.bin_edges))],
        "eps": float(query.eps),
        "score_column": query.score_col,
        "label_column": query.label_col,
        "weight_column": query.weight_col,
        "group_column": query.by,
        "positive_label": check_positive_label(query.positive_label),
    }


def _log1p(v: Node, u: Node) -> Node:
    """``log1p(v)`` with ``u = 1 + v`` (Goldberg: exact where ``u == 1``, a few ulps else)."""
    return if_else(Binary("=", u, Double(1.0)), v, div(mul(call("LN", u), v), sub(u, Double(1.0))))


def _neg(x: Node) -> Node:
    return Binary("-", Double(0.0), x)


def _bin(p: Node, inner: list[float]) -> Node:
    """Number of inner edges strictly below ``p`` (searchsorted side='left'), balanced."""

    def node(lo: int, hi: int) -> Node:
        if lo == hi:
            return Int(lo)
        mid = (lo + hi + 1) // 2  # bins >= mid hold the scores > inner[mid - 1]
        return if_else(Binary("<=", p, Double(inner[mid - 1])), node(lo, mid - 1), node(mid, hi))

    return node(0, len(inner))


def _select(columns: Sequence[tuple[str, Node]], source: str, d: Dialect, where: str = "") -> str:
    listed = ", ".join(f"{render(node, d)} AS {d.alias(name)}" for name, node in columns)
    return f"SELECT {listed} FROM {source}{where}"


def summary_sql(query: SummaryQuery, *, dialect_name: str) -> str:
    """The ``GROUP BY`` query whose result is the summary of the table's rows.

    Examples
    --------
    >>> sql = summary_sql(SummaryQuery(table="scores"), dialect_name="duckdb")
    >>> sql.splitlines()[0]
    'SELECT "group", "cell", "bin", "label", COUNT(*) AS "n_rows",'
    """
    d = dialect(dialect_name)
    table = query.table.strip()
    if not table or ";" in table:
        raise InputError(f"table must name one table or view, got {query.table!r}")
    meta = summary_metadata(query)
    m = meta["grid"]["mantissa_bits"]
    edges = meta["bin_edges"]
    eps = check_eps(query.eps)

    # stage 1: the row's values
    score = Column(query.score_col)
    label = Column(query.label_col)
    weight: Node = (
        Double(1.0) if query.weight_col is None else Cast(Column(query.weight_col), "double")
    )
    group: Node = (
        Cast(Null(), "string") if query.by is None else GroupText(Column(query.by), query.by)
    )
    p = Cast(score, "double")
    present: Node = Not(IsNull(score))
    if query.weight_col is not None:
        present = Binary("AND", present, Not(IsNull(Column(query.weight_col))))
    # a row without a label is counted apart (UNLABELLED), never left out unsaid: a target
    # batch whose labels have not all arrived was estimated on its labelled rows alone
    y = if_else(
        label_present_node(label), label_class_node(label, query.positive_label), Int(UNLABELLED)
    )
    stage1 = _select(
        [
            ("g", group),
            ("p", p),
            ("y", y),
            ("w", weight),
        ],
        table,
        d,
        f" WHERE {render(present, d)}",
    )

    # stage 2: clipped score, tail distance, first guess of the binary exponent
    P, Y, W, G = Column("p"), Column("y"), Column("w"), Column("g")
    x = if_else(Binary("<=", P, Double(0.5)), P, sub(Double(1.0), P))
    positive_x = if_else(Binary(">", x, Double(0.0)), x, Double(1.0))
    guess = Cast(call("FLOOR", div(call("LN", positive_x), Double(math.log(2.0)))), "bigint")
    q = clip(P, eps, 1.0 - eps)
    stage2 = _select(
        [("g", G), ("p", P), ("y", Y), ("w", W), ("x", x), ("e0", guess), ("q", q)],
        f"({stage1}) AS _calib_s1",
        d,
    )

    # stage 3: the exact exponent, and the logarithms' arguments
    X, E0, Q = Column("x"), Column("e0"), Column("q")
    two = Double(2.0)
    exponent = add(
        sub(E0, if_else(Binary("<", X, call("POWER", two, E0)), Int(1), Int(0))),
        if_else(Binary(">=", X, call("POWER", two, add(E0, Int(1)))), Int(1), Int(0)),
    )
    centred_q = mul(Double(2.0), sub(Q, Double(0.5)))
    stage3 = _select(
        [
            ("g", G),
            ("p", P),
            ("y", Y),
            ("w", W),
            ("x", X),
            ("e", exponent),
            ("q", Q),
            ("u", sub(Double(1.0), Q)),  # 1 + v for v = -q
            ("s", centred_q),
            ("u_plus", add(Double(1.0), centred_q)),
            ("u_minus", sub(Double(1.0), centred_q)),
        ],
        f"({stage2}) AS _calib_s2",
        d,
    )

    # stage 4: cell, bin and every per-row term
    E, U, S = Column("e"), Column("u"), Column("s")
    U_PLUS, U_MINUS = Column("u_plus"), Column("u_minus")
    scale = Double(2.0**m)
    normal = add(
        add(
            mul(add(E, Int(1023)), Int(2**m)),
            Cast(
                call("FLOOR", mul(sub(div(X, call("POWER", two, E)), Double(1.0)), scale)), "bigint"
            ),
        ),
        Int(1),
    )
    subnormal = add(Cast(call("FLOOR", mul(mul(X, Double(2.0**1022)), scale)), "bigint"), Int(1))
    f = case(
        [
            (Binary("=", X, Double(0.0)), Int(0)),
            (Binary("<", X, Double(_SMALLEST_NORMAL)), subnormal),
        ],
        normal,
    )
    h = half_cell(m)
    cell = if_else(Binary("<=", P, Double(0.5)), f, sub(Int(2 * h), f))
    complement = sub(Double(1.0), P)
    centred = sub(Double(1.0), mul(Double(2.0), P))
    loss = if_else(Binary("=", Y, Int(1)), _neg(call("LN", Q)), _neg(_log1p(_neg(Q), U)))
    logit = if_else(
        Binary("OR", Binary("<", Q, Double(0.3)), Binary(">", Q, Double(0.65))),
        call("LN", div(Q, U)),
        sub(_log1p(S, U_PLUS), _log1p(_neg(S), U_MINUS)),
    )
    weighted = Binary(">", W, Double(0.0))
    stage4 = _select(
        [
            ("group", G),
            ("cell", cell),
            ("bin", _bin(P, edges[1:-1])),
            ("label", Y),
            ("positive_weight", if_else(weighted, Int(1), Int(0))),
            ("weight", W),
            ("weight_sq", mul(W, W)),
            ("score_sum", mul(W, P)),
            ("score_sq_sum", mul(mul(W, P), P)),
            ("complement_sum", mul(W, complement)),
            ("complement_sq_sum", mul(mul(W, complement), complement)),
            ("log_loss_sum", mul(W, loss)),
            ("logit_sum", mul(W, logit)),
            ("spiegelhalter_num", mul(W, mul(sub(Cast(Y, "double"), P), centred))),
            ("spiegelhalter_var", mul(W, mul(mul(mul(centred, centred), P), complement))),
            ("weight_min", if_else(weighted, W, Null())),
            ("score_value", if_else(weighted, P, Null())),
        ],
        f"({stage3}) AS _calib_s3",
        d,
    )

    sums = [
        "weight", "weight_sq", "score_sum", "score_sq_sum", "complement_sum",
        "complement_sq_sum", "log_loss_sum", "logit_sum", "spiegelhalter_num",
        "spiegelhalter_var",
    ]  # fmt: skip
    a = d.alias
    keys = ", ".join(a(k) for k in ("group", "cell", "bin", "label"))
    aggregates = [
        f"COUNT(*) AS {a('n_rows')}",
        f"SUM({a('positive_weight')}) AS {a('n_rows_weighted')}",
        *(f"SUM({a(name)}) AS {a(name)}" for name in sums),
        f"MIN({a('weight_min')}) AS {a('weight_min')}",
        f"MIN({a('score_value')}) AS {a('score_min')}",
        f"MAX({a('score_value')}) AS {a('score_max')}",
        f"{d.string(json.dumps(meta, separators=(',', ':')))} AS {a(METADATA_COLUMN)}",
    ]
    return "\n".join(
        [
            f"SELECT {keys}, {aggregates[0]},",
            "  " + ",\n  ".join(aggregates[1:]),
            f"FROM ({stage4}) AS _calib_s4",
            f"GROUP BY {keys}",
        ]
    )
