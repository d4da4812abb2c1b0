"""The rows ``calib resample`` keeps, as one SQL ``SELECT``: ``calib-hash64-v2`` in SQL.

The rule (:mod:`calib_cli.core.sampling`): a row is kept when ``mix64(k ^ mix64(seed))``,
read as an unsigned 64-bit integer, is below ``T(rate) = floor(rate * 2**64)`` of its class
(and stratum), every row when the rate is 1.

Exact under every engine's default settings
-------------------------------------------
SplitMix64 multiplies modulo ``2**64``. Spark 4 (ANSI mode) raises an error when a 64-bit
product overflows, BigQuery and Postgres have no unsigned integers, and Snowflake's integers
are decimals; so the emitted SQL never lets an integer pass ``2**35``: the 64-bit state is held
as four 16-bit limbs (``BIGINT`` columns in ``[0, 65535]``), added with explicit carries,
multiplied by the (constant) SplitMix64 multipliers limb by limb (each partial product below
``2**32``, each column sum below ``2**35``), shifted and xor-ed limb by limb. ``mix64(seed)``
and ``T(rate)`` are computed here, in Python, and appear as limbs. The key's limbs are its
two's-complement bits: ``(k >> 16 i) & 65535`` of ``CAST(key AS BIGINT)`` (an arithmetic
shift, then a mask), so ``-1`` is ``0xFFFF...``, as calib reads it.

Keys, as calib reads them: in DuckDB and Spark the key is taken as it is and calib's whole
rule applies to each key on its own (:mod:`calib_cli.core.sampling`): a key whose text is an
integer's text (it comes back as the same text through ``TRY_CAST`` to ``BIGINT``, or, up to
2**64 - 1, to DuckDB's ``UBIGINT`` or Spark's ``DECIMAL(20, 0)``; integer columns always are)
hashes as that integer, any other key (``007``, ``+7``, ``u9``) as ``fnv1a64`` of its UTF-8
bytes, folded byte by byte over the same 16-bit limbs (``list_reduce`` in DuckDB,
``aggregate`` in Spark; bytes from the text's hex form). Elsewhere the key must be an integer
column (``CAST(key AS BIGINT)``): BigQuery, Snowflake and Postgres have no such fold in plain
SQL (:data:`TEXT_KEY_DIALECTS`); a text column there is cast, which reads ``007`` as 7 where
calib hashes its text.

The query hashes each distinct key once, in a chain of common table expressions (one per step
of SplitMix64: nesting them as one expression would repeat each limb exponentially often),
and joins the hashes back to the table, so rows sharing a key are kept or dropped together.
The last step groups by the (already distinct) key: an aggregate is a fence no optimizer
pushes the ``WHERE`` through. Without it, Spark pushed the threshold test down the chain,
substituting each stage's limbs into the next, and its plan grew exponentially (1.2 million
characters for 9,000 of SQL; a 1 GB driver ran out of memory)::

    WITH _calib_k AS (SELECT DISTINCT CAST(key AS BIGINT) AS k FROM T),
         _calib_h1 AS (...), ...,
         _calib_hash AS (SELECT k, MIN(...) AS hi, MIN(...) AS lo FROM ... GROUP BY k)
    SELECT t.* FROM T AS t JOIN _calib_hash AS h ON CAST(t.key AS BIGINT) = h.k
    WHERE <the row's class (and stratum) threshold against (hi, lo)>

Limits, against ``calib resample`` on a file: the row-number key (a table has no row order) is
not emitted; text keys only in DuckDB and Spark; elsewhere keys beyond the int64 range are
refused by the cast. Rows whose key or label is NULL, or whose stratum has no rates, are not
returned (``calib resample`` refuses such input). The label is positive by calib's rule, with
or without ``--positive-label V`` (:func:`calib_cli.sql.values.positive_label_node`: as a number
where the label's trimmed text is a number's text, so ``0`` matches a double column's ``0.0``;
else as text, ``yes`` or ``true`` without ``V``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from calib_cli.core.sampling import UINT64_MAX, ClassRates, check_class_rates, rate_threshold
from calib_cli.errors import InputError
from calib_cli.sql.dialects import Dialect, dialect
from calib_cli.sql.tree import (
    FALSE,
    TRUE,
    Binary,
    BitAnd,
    Case,
    Cast,
    Column,
    Double,
    GroupText,
    Int,
    Let,
    Node,
    Raw,
    ShiftRight,
    Text,
    Var,
    Xor,
    add,
    if_else,
    mul,
    render,
)
from calib_cli.sql.values import label_present_node, positive_label_node

__all__ = ["TEXT_KEY_DIALECTS", "SamplingQuery", "sampling_sql"]

#: Dialects whose SQL takes the key as it is and applies calib's whole key rule (an integer's
#: text hashed as the integer, other text by FNV-1a over its UTF-8 bytes, folded over them).
#: Elsewhere the key must be an integer column (cast to BIGINT). (Spark once ran out of memory
#: on the fold: its optimizer pushed the WHERE into it, which the chain's GROUP BY now fences.)
TEXT_KEY_DIALECTS = ("duckdb", "spark")
_FNV_OFFSET = 0xCBF29CE484222325
_FNV_PRIME = 0x00000100000001B3

_MASK = 0xFFFF
_GOLDEN = 0x9E3779B97F4A7C15
_MIX_1 = 0xBF58476D1CE4E5B9
_MIX_2 = 0x94D049BB133111EB

Limbs = tuple[Node, Node, Node, Node]


#: The rates of a query named as the rates file's columns.
_RATE_NAMES = ("negative_rate", "positive_rate")


def _mix64_int(x: int) -> int:
    z = (x + _GOLDEN) & UINT64_MAX
    z = ((z ^ (z >> 30)) * _MIX_1) & UINT64_MAX
    z = ((z ^ (z >> 27)) * _MIX_2) & UINT64_MAX
    return z ^ (z >> 31)


def _limbs_of(value: int) -> tuple[int, int, int, int]:
    a, b, c, d = ((value >> (16 * i)) & _MASK for i in range(4))
    return a, b, c, d


def _four(nodes: Sequence[Node]) -> Limbs:
    a, b, c, d = nodes
    return a, b, c, d


def _columns(prefix: str) -> Limbs:
    return _four([Column(f"{prefix}{i}") for i in range(4)])


def _normalised(sums: list[Node]) -> Limbs:
    """Limbs of ``sum_i sums[i] 2**(16 i)`` modulo 2**64 (each sum below 2**40): carries
    propagated up, the last carry dropped."""
    out: list[Node] = []
    carry: Node | None = None
    for value in sums:
        v = value if carry is None else add(value, carry)
        out.append(BitAnd(v, Int(_MASK)))
        carry = ShiftRight(v, 16)
    return _four(out)


def _add_constant(x: Limbs, constant: int) -> Limbs:
    c = _limbs_of(constant)
    return _normalised([add(x[i], Int(c[i])) for i in range(4)])


def _times_constant(x: Limbs, constant: int) -> Limbs:
    c = _limbs_of(constant)
    sums: list[Node] = []
    for k in range(4):
        terms = [mul(x[i], Int(c[k - i])) for i in range(k + 1) if c[k - i]]
        total: Node = terms[0] if terms else Int(0)
        for term in terms[1:]:
            total = add(total, term)
        sums.append(total)
    return _normalised(sums)


def _shifted_right(x: Limbs, bits: int) -> list[Node | None]:
    """Limbs of ``x >> bits`` (None for a limb that is zero)."""
    q, r = divmod(bits, 16)
    out: list[Node | None] = []
    for i in range(4):
        low = i + q
        if low > 3:
            out.append(None)
            continue
        part: Node = x[low] if r == 0 else ShiftRight(x[low], r)
        if r and low + 1 <= 3:
            part = add(part, BitAnd(mul(x[low + 1], Int(1 << (16 - r))), Int(_MASK)))
        out.append(part)
    return out


def _xorshift(x: Limbs, bits: int) -> Limbs:
    shifted = _shifted_right(x, bits)
    return _four([x[i] if s is None else Xor(x[i], s) for i, s in enumerate(shifted)])


@dataclass(frozen=True)
class SamplingQuery:
    """What a sampling SELECT needs (the options of ``calib resample``)."""

    table: str
    key_col: str
    label_col: str = "label"
    positive_label: str | None = None
    seed: int = 0
    rates: ClassRates | None = None
    strata_col: str | None = None
    stratum_rates: Mapping[str, ClassRates] | None = None
    weight_col_out: str | None = None


def _int_limbs(key: Node) -> Limbs:
    """The 16-bit limbs of a BIGINT's two's-complement bits."""
    return _four([BitAnd(ShiftRight(key, 16 * i) if i else key, Int(_MASK)) for i in range(4)])


def _stages(seed: int, *, text_keys: bool) -> list[tuple[str, Limbs]]:
    """The CTE chain: (name, the limbs it computes from the previous stage's limbs)."""
    seed_mix = _mix64_int(seed)
    key_limbs = _columns("z") if text_keys else _int_limbs(Column("k"))
    seed_limbs = _limbs_of(seed_mix)
    stages: list[tuple[str, Limbs]] = [
        ("_calib_h1", _four([Xor(key_limbs[i], Int(seed_limbs[i])) for i in range(4)]))
    ]
    steps: list[Callable[[Limbs], Limbs]] = [
        lambda x: _add_constant(x, _GOLDEN),
        lambda x: _xorshift(x, 30),
        lambda x: _times_constant(x, _MIX_1),
        lambda x: _xorshift(x, 27),
        lambda x: _times_constant(x, _MIX_2),
        lambda x: _xorshift(x, 31),
    ]
    for index, step in enumerate(steps, start=2):
        stages.append((f"_calib_h{index}", step(_columns("z"))))
    return stages


def _text_key_stages(d: Dialect) -> list[str]:
    """CTEs turning the keys ``k`` into four limbs ``z0..z3``, each key on its own by calib's
    rule (:mod:`calib_cli.core.sampling`): a key whose text is an integer's text (it comes back
    as the same text through ``BIGINT``, or an unsigned 64-bit integer above the int64 range:
    so not ``007``, `` 7`` or ``+7``) as that integer's bits, any other key by FNV-1a of its
    UTF-8 bytes, folded byte by byte in 16-bit limbs: ``list_reduce`` in DuckDB, ``aggregate``
    in Spark."""
    acc = _four([Raw(f"acc.z{i}") for i in range(4)])
    stepped = _times_constant(_four([Xor(acc[0], Raw("b")), acc[1], acc[2], acc[3]]), _FNV_PRIME)
    offset = _limbs_of(_FNV_OFFSET)
    if d.name == "duckdb":
        body = ", ".join(f"'z{i}': {render(limb, d)}" for i, limb in enumerate(stepped))
        start = ", ".join(f"'z{i}': CAST({offset[i]} AS BIGINT)" for i in range(4))
        text = "encode(s)"
        byte = f"('0x' || substr(hex({text}), 2 * i + 1, 2))::BIGINT"
        fold = (
            f"list_reduce(list_transform(range(octet_length({text})), lambda i: {byte}), "
            f"lambda acc, b: {{{body}}}, {{{start}}})"
        )
        as_text = "VARCHAR"
        # above the int64 range: UBIGINT, whose limbs are cast back to BIGINT
        unsigned = f"CASE WHEN {_round_trip('UBIGINT', as_text)} THEN TRY_CAST(s AS UBIGINT) END"
        unsigned_limbs = [f"CAST({render(limb, d)} AS BIGINT)" for limb in _int_limbs(Raw("u"))]
    else:  # spark
        body = ", ".join(f"'z{i}', {render(limb, d)}" for i, limb in enumerate(stepped))
        start = ", ".join(f"'z{i}', CAST({offset[i]} AS BIGINT)" for i in range(4))
        n = "octet_length(s)"
        byte = "CAST(conv(substring(hex(encode(s, 'UTF-8')), 2 * i + 1, 2), 16, 10) AS BIGINT)"
        # sequence(0, -1) counts down in Spark: the empty text folds over no bytes
        fold = (
            f"aggregate(transform(filter(sequence(0, {n} - 1), i -> i >= 0 AND i < {n}), "
            f"i -> {byte}), named_struct({start}), (acc, b) -> named_struct({body}))"
        )
        as_text = "STRING"
        # no unsigned type: DECIMAL(20, 0), its limbs by integer division (each quotient a
        # BIGINT), so no constant nears 2**63; its top limb in [2**15, 2**16): above int64
        unsigned_limbs = [f"CAST({_quotient('u', n)} % 65536 AS BIGINT)" for n in range(3)]
        unsigned_limbs.append(_quotient("u", 3))
        wide = "TRY_CAST(s AS DECIMAL(20, 0))"
        unsigned = (
            f"CASE WHEN {_round_trip('DECIMAL(20, 0)', as_text)} "
            f"AND {_quotient(wide, 3)} BETWEEN 32768 AND 65535 THEN {wide} END"
        )
    signed = f"CASE WHEN {_round_trip('BIGINT', as_text)} THEN TRY_CAST(s AS BIGINT) END"
    signed_limbs = _int_limbs(Raw("i"))
    limbs = ", ".join(
        f"CASE WHEN i IS NOT NULL THEN {render(signed_limbs[n], d)} "
        f"WHEN u IS NOT NULL THEN {unsigned_limbs[n]} ELSE f.z{n} END AS z{n}"
        for n in range(4)
    )
    return [
        f"_calib_ks AS (SELECT k, CAST(k AS {as_text}) AS s FROM _calib_k),",
        f"_calib_ki AS (SELECT k, s, {signed} AS i, {unsigned} AS u FROM _calib_ks),",
        f"_calib_kf AS (SELECT k, i, u, CASE WHEN i IS NULL AND u IS NULL THEN {fold} END AS f "
        "FROM _calib_ki),",
        f"_calib_h0 AS (SELECT k, {limbs} FROM _calib_kf),",
    ]


def _quotient(value: str, times: int) -> str:
    """Spark's ``value DIV 65536``, ``times`` times over (``DIV`` returns a BIGINT)."""
    for _ in range(times):
        value = f"({value} DIV 65536)"
    return value


def _round_trip(sql_type: str, as_text: str) -> str:
    """The key's text ``s`` comes back unchanged through ``sql_type``: an integer's text."""
    return f"CAST(TRY_CAST(s AS {sql_type}) AS {as_text}) = s"


def _threshold_test(hi: Node, lo: Node, rate: float) -> Node | None:
    """``(hi, lo) < T(rate)`` as limbs; None when the rate keeps every row."""
    threshold = rate_threshold(rate)
    if threshold == UINT64_MAX:
        return None
    t_hi, t_lo = threshold >> 32, threshold & 0xFFFFFFFF
    return Binary(
        "OR",
        Binary("<", hi, Int(t_hi)),
        Binary("AND", Binary("=", hi, Int(t_hi)), Binary("<", lo, Int(t_lo))),
    )


def _class_test(positive: Node, hi: Node, lo: Node, rates: ClassRates) -> Node:
    """The row's class threshold test: a ``CASE``, so the label rule is evaluated once a row
    (``(positive AND ...) OR (NOT positive AND ...)`` took DuckDB 1.8 s on 1e6 rows, the
    ``CASE`` 0.7 s). The label is never NULL here (the ``WHERE`` requires it)."""
    pos = _threshold_test(hi, lo, rates.positive_rate)
    neg = _threshold_test(hi, lo, rates.negative_rate)
    return if_else(positive, pos if pos is not None else TRUE, neg if neg is not None else TRUE)


def _positive(query: SamplingQuery) -> Node:
    return positive_label_node(Column(query.label_col, "t"), query.positive_label)


def sampling_sql(query: SamplingQuery, *, dialect_name: str) -> str:
    """The ``SELECT`` returning the rows ``calib resample`` keeps (module docstring).

    Examples
    --------
    >>> sql = sampling_sql(SamplingQuery(table="events", key_col="user_id", seed=42,
    ...                    rates=ClassRates(negative_rate=0.1)), dialect_name="spark")
    >>> sql.splitlines()[0]
    'WITH _calib_k AS (SELECT DISTINCT t.`user_id` AS k FROM events AS t),'
    """
    d = dialect(dialect_name)
    table = query.table.strip()
    if not table or ";" in table:
        raise InputError(f"table must name one table or view, got {query.table!r}")
    if (query.rates is None) == (query.stratum_rates is None):
        raise InputError("give either rates or stratum_rates (with strata_col)")
    if query.stratum_rates is not None and query.strata_col is None:
        raise InputError("stratum_rates need strata_col")
    text_keys = d.name in TEXT_KEY_DIALECTS
    # DuckDB and Spark: the key as it is (text is cast only where the fold reads it)
    key: Node = (
        Column(query.key_col, "t") if text_keys else Cast(Column(query.key_col, "t"), "bigint")
    )
    lines = [f"WITH _calib_k AS (SELECT DISTINCT {render(key, d)} AS k FROM {table} AS t),"]
    previous = "_calib_k"
    if text_keys:
        lines.extend(_text_key_stages(d))
        previous = "_calib_h0"
    for name, limbs in _stages(query.seed, text_keys=text_keys):
        select = ", ".join(f"{render(limb, d)} AS z{i}" for i, limb in enumerate(limbs))
        lines.append(f"{name} AS (SELECT k, {select} FROM {previous}),")
        previous = name
    z = _columns("z")
    hi = add(mul(z[3], Int(65536)), z[2])
    lo = add(mul(z[1], Int(65536)), z[0])
    # grouped by the (already distinct) key: a fence for the optimizer (module docstring)
    lines.append(
        f"_calib_hash AS (SELECT k, MIN({render(hi, d)}) AS hi, MIN({render(lo, d)}) AS lo "
        f"FROM {previous} GROUP BY k)"
    )
    h_hi, h_lo = Column("hi", "h"), Column("lo", "h")
    positive = _positive(query)
    weight: Node | None = None
    if query.rates is not None:
        check_class_rates(query.rates, "", _RATE_NAMES)
        keep = _class_test(positive, h_hi, h_lo, query.rates)
        if query.weight_col_out is not None:
            weight = _inverse_rate(positive, query.rates)
    else:
        assert query.stratum_rates is not None and query.strata_col is not None
        # the stratum's text (calib's, whatever the column's type), written once per use
        text = GroupText(Column(query.strata_col, "t"), query.strata_col)
        stratum = Var("_calib_stratum")
        tests: list[tuple[Node, Node]] = []
        weights: list[tuple[Node, Node]] = []
        for name, rates in sorted(query.stratum_rates.items()):
            check_class_rates(rates, f"stratum {name!r}: ", _RATE_NAMES)
            is_stratum = Binary("=", stratum, Text(name))
            tests.append((is_stratum, _class_test(positive, h_hi, h_lo, rates)))
            weights.append((is_stratum, _inverse_rate(positive, rates)))
        # one stratum's test a row (the label rule once), none for a stratum without rates
        keep = Let("_calib_stratum", text, Case(tuple(tests), FALSE))
        if query.weight_col_out is not None:
            weight = Let("_calib_stratum", text, Case(tuple(weights), None))
    extra = (
        ""
        if weight is None
        else f", {render(weight, d)} AS {d.identifier(query.weight_col_out or '')}"
    )
    lines.append(
        f"SELECT t.*{extra} FROM {table} AS t JOIN _calib_hash AS h ON {render(key, d)} = h.k"
    )
    # a row without a label is not returned (a NaN label was sampled as a negative)
    keep = Binary("AND", label_present_node(Column(query.label_col, "t")), keep)
    lines.append(f"WHERE {render(keep, d)}")
    return "\n".join(lines)


def _inverse_rate(positive: Node, rates: ClassRates) -> Node:
    """``1 / rate`` of the row's class (calib's importance weight, computed here)."""
    return if_else(positive, Double(1.0 / rates.positive_rate), Double(1.0 / rates.negative_rate))
