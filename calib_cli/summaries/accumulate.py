"""The summary of rows given batch by batch, summed in the rows' order (NumPy, no Polars).

A streaming group-by merges partial sums in whatever order its threads finish, so the same
file can give sums that differ in their last bits from run to run. Here every key's sums are
added in the order the rows arrive (:func:`~calib_cli.core.scatter.scatter_add`:
:func:`numpy.add.at`'s sums, in index order, without holding the GIL): row by row
(:meth:`GridSums.add`), or, on the streaming pass, per block of rows from zero in a worker
thread and then block by block (:class:`BlockSums`; blocks of a fixed size counted from the
first row), so the same rows in the same order give the same bytes, however the reader cuts
them and whatever the threads' timing. Integer counts (the sub-cells') are added by the
worker that has the block, in its own array (:class:`SubCounts`): their order cannot matter.

Keys. A row's key is (group, cell, bin, label). ``cell + bin`` is one integer per (cell, bin)
pair that occurs: cells and bins both grow with the score and a cell's bins are consecutive,
so for cells :math:`c < c'`, :math:`c' + b' \\ge c + 1 + \\text{last bin of } c > c + b`.
That integer, below :math:`2H + k` (:func:`~calib_cli.summaries.grid.half_cell`, ``k`` bins),
is cut into *pages* of :math:`2^{\\text{page bits}}`; a page (per group) gets its slots
(two per integer: one per class) the first time a row falls in it. Memory is the pages the
scores occupy (a few dozen for real scores, one per binade of :math:`\\min(p, 1 - p)` they
span), never the rows.

The sums are those of :func:`~calib_cli.summaries.scan.summary_plan`, from other terms: with
:math:`x = \\min(p, 1 - p)` (exact) and :math:`c` the lower edge of the row's cell, each row
adds :math:`w (x - c)^k` for :math:`k = 1 \\ldots 4` (:func:`row_terms`; :math:`x - c` exact).
A key's sums of :math:`x` and :math:`x^2` follow without cancellation, and from them
``score_sum``, ``complement_sum``, their squares and Spiegelhalter's numerator
(:func:`format_columns`); its sums of :math:`\\log x` and :math:`\\log(1 - x)`, hence
``log_loss_sum`` and ``logit_sum``, follow from ``log1p``'s series to the fourth power
(:func:`log_sums`: its fifth term below ``2**-55`` of the sums, tested within ``2e-15`` of
the exact sums; two logarithms a row took 13 ns, these four powers 0.5).
Rows of cells that may hold clipped scores (those starting below ``eps``, e.g. the cells of 0
and 1), and every row of a grid coarser than 11 bits, add their two logarithms instead
(:func:`~calib_cli.summaries.summary.clipped_logs`).
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import Protocol, TypeVar

import numpy as np
import numpy.typing as npt

from calib_cli.core import elementary as el
from calib_cli.core.scatter import scatter_add, scatter_columns, scatter_sums
from calib_cli.errors import InputError
from calib_cli.summaries.grid import bin_index, cell_floor, cell_floors, cell_index, half_cell
from calib_cli.summaries.subcells import SubCells
from calib_cli.summaries.summary import (
    GroupName,
    ScoreSummary,
    clip_edge,
    clipped_logs,
    group_ranks,
)
from calib_cli.types import FloatArray, IntArray

__all__ = [
    "TERMS",
    "BlockSums",
    "GridSums",
    "TermBatch",
    "add_rows",
    "bin_of",
    "check_batch_values",
    "format_columns",
    "in_order_ahead",
    "lower",
    "raise_to",
    "row_terms",
    "slot_weights",
    "sub_cell_index",
    "term_batch",
]

_Item = TypeVar("_Item")
_G = TypeVar("_G", bound=np.generic)
_T = TypeVar("_T")

#: The per-row terms summed per key, each times the row's weight.
TERMS = ("dev", "dev_sq", "dev_cube", "dev_fourth", "spieg_var")

#: Grids with at least these mantissa bits have cells of relative width ``2**-11`` at most,
#: where a key's logarithm sums follow from the moments of its rows about the cell's lower
#: edge to the fourth (:func:`log_sums`); on coarser grids every row carries its logarithms.
MOMENT_MIN_BITS = 11


@dataclass(frozen=True)
class TermBatch:
    """One batch of rows, reduced to what a summary adds up.

    ``key`` is ``cell + bin`` (module docstring), ``terms`` the :data:`TERMS` (weighted),
    ``weight`` None for unweighted rows, ``group`` the rows' group codes (None: one group).
    """

    key: IntArray
    label: npt.NDArray[np.int8]
    score: FloatArray
    terms: Mapping[str, FloatArray]
    weight: FloatArray | None = None
    group: npt.NDArray[np.int32] | None = None
    #: each row's sub-cell in its cell (ascending with the score), with ``sub_bits``
    sub: IntArray | None = None
    #: each row's slot looked up ahead (:meth:`GridSums.sums_ahead`; -1: not yet allocated)
    slot: IntArray | None = None
    #: the batch's sums per slot, computed ahead (:meth:`GridSums.sums_ahead`)
    block: BlockSums | None = None


@dataclass(frozen=True)
class BlockSums:
    """A batch's sums per slot, computed in a worker thread (:meth:`GridSums.sums_ahead`)
    from a snapshot of the slots allocated so far, for the rows whose page had one (*found*
    rows; a page's rows are all found or all not). Each slot's sum adds the batch's rows in
    their order from zero (``scatter_add`` into zeros), so the summary adds, per slot, one such
    sum per batch, in the batches' order, whichever rows were found: the bytes depend on
    where batches start (fixed blocks of rows, :data:`~calib_cli.summaries.scan.BLOCK_ROWS`),
    never on the threads' timing.

    ``sums`` per term (and ``weight``, ``weight_sq`` when weighted) over the first ``size``
    slots; ``n_rows`` and ``n_rows_weighted`` the found rows' counts (None: counted in the
    sub-cells); ``lowers`` and ``raises`` the rows that may move their slot's extremes (a
    snapshot's extremes only ever move outwards, so comparing with it keeps every row that
    can), the not-found rows among them; ``missed`` the not-found rows.
    """

    size: int
    sums: Mapping[str, FloatArray]
    n_rows: IntArray | None
    n_rows_weighted: IntArray | None
    missed: IntArray
    lowers: IntArray
    raises: IntArray
    #: weighted rows only: rows that may lower the weight minimum, raise ``score_any``
    lighter: IntArray | None = None
    later: IntArray | None = None
    #: whether the found rows' sub-cell counts were added ahead (:class:`SubCounts`)
    sub_counted: bool = False


def term_batch(
    y_true: npt.ArrayLike,
    y_prob: npt.ArrayLike,
    *,
    sample_weight: npt.ArrayLike | None = None,
    bin_edges: npt.ArrayLike,
    mantissa_bits: int,
    eps: float,
    group: npt.ArrayLike | None = None,
    sub_bits: int = 0,
) -> TermBatch:
    """The :class:`TermBatch` of rows in memory (the NumPy twin of the streaming terms);
    with ``sub_bits``, each row's sub-cell (:mod:`calib_cli.summaries.subcells`).

    >>> b = term_batch([0, 1], [0.25, 0.75], bin_edges=[0.0, 0.5, 1.0], mantissa_bits=12,
    ...                eps=1e-15)
    >>> b.key.tolist(), b.terms["dev"].tolist()  # 0.25 is its cell's lower edge
    ([4182017, 4190210], [0.0, 0.0])
    """
    p = np.asarray(y_prob, dtype=np.float64)
    y = np.asarray(y_true).astype(np.int8, copy=False)
    w = None if sample_weight is None else np.asarray(sample_weight, dtype=np.float64)
    x = np.minimum(p, 1.0 - p)  # exact: p on the lower tail, 1 - p above
    low = p <= 0.5
    key, sub = _cells_and_subs(x, low, mantissa_bits, sub_bits)
    key += bin_of(p, np.asarray(bin_edges, dtype=np.float64))
    terms = row_terms(p, y, w, eps=eps, x=x, mantissa_bits=mantissa_bits)
    codes = None if group is None else np.asarray(group, dtype=np.int32)
    return TermBatch(key=key, label=y, score=p, terms=terms, weight=w, group=codes, sub=sub)


def row_terms(
    p: FloatArray,
    y: npt.NDArray[np.int8],
    w: FloatArray | None,
    *,
    eps: float,
    mantissa_bits: int | IntArray,
    x: FloatArray | None = None,
) -> dict[str, FloatArray]:
    """Each row's :data:`TERMS` (times its weight ``w``; ``x = min(p, 1 - p)`` if known) on
    the grid of ``mantissa_bits`` (one for all rows, or each row's).

    The powers of ``x - c`` (``c`` the lower edge of the row's cell,
    :func:`~calib_cli.summaries.grid.cell_floor`: ``x - c`` exact), from which a key's sums
    of ``x`` and ``x**2`` follow without cancellation, and its sums of ``log x`` and
    ``log(1 - x)`` by :func:`log_sums`. Rows of a cell that starts below
    :func:`~calib_cli.summaries.summary.clip_edge` (a cell that may hold clipped scores) and
    rows on a grid coarser than :data:`MOMENT_MIN_BITS` carry those two logarithms in place
    of the third and fourth powers (:func:`~calib_cli.summaries.summary.clipped_logs`), as
    their keys read them (a key's ``c`` is its rows').
    """
    complement = 1.0 - p
    if x is None:
        x = np.minimum(p, complement)
    floors = cell_floor(x, mantissa_bits)
    dev = np.subtract(x, floors)
    dev_sq = dev * dev
    dev_cube = dev_sq * dev
    dev_fourth = dev_sq * dev_sq
    edge = clip_edge(eps)
    coarse = np.asarray(mantissa_bits) < MOMENT_MIN_BITS
    if coarse.any() or (x.size and not floors.min() >= edge):
        own = coarse | ~(floors >= edge)
        near, far = clipped_logs(p[own], x[own], eps)
        dev_cube[own] = near
        dev_fourth[own] = far
    spieg_var = np.multiply(p, -2.0)
    spieg_var += 1.0  # 1 - 2p
    np.multiply(spieg_var, spieg_var, out=spieg_var)
    spieg_var *= p
    spieg_var *= complement  # (1 - 2p)^2 p (1 - p), multiplied in that order
    raw = {
        "dev": dev,
        "dev_sq": dev_sq,
        "dev_cube": dev_cube,
        "dev_fourth": dev_fourth,
        "spieg_var": spieg_var,
    }
    return raw if w is None else {name: w * v for name, v in raw.items()}


def log_sums(
    c: FloatArray,
    *,
    mantissa_bits: int,
    eps: float,
    weight: FloatArray,
    sums: Mapping[str, FloatArray],
) -> tuple[FloatArray, FloatArray]:
    """Each key's sums of ``w log x`` and ``w log(1 - x)`` (``x = min(q, 1 - q)``, ``q`` the
    clipped score) from its sums of :data:`TERMS`, ``c`` its cell's lower edge.

    With :math:`S_k = \\sum w (x - c)^k` (``dev`` to ``dev_fourth``):
    :math:`\\sum w \\log x = W \\log c + \\sum_{k \\le 4} (-1)^{k+1} S_k / (k c^k)` and
    :math:`\\sum w \\log(1 - x) = W \\log(1 - c) - \\sum_{k \\le 4} S_k / (k (1 - c)^k)`:
    ``log1p``'s series in ``(x - c) / c < 2**-11`` and ``(x - c) / (1 - c)``, whose fifth
    terms are below ``2**-55`` of the sums. Held in ``tests/test_summaries_accumulate.py``
    against the exact sums of each row's logarithms. Keys whose cell starts below
    :func:`~calib_cli.summaries.summary.clip_edge`, and every key of a grid coarser than
    :data:`MOMENT_MIN_BITS`, summed the logarithms themselves (:func:`row_terms`).
    """
    dev_cube, dev_fourth = sums["dev_cube"], sums["dev_fourth"]
    if mantissa_bits < MOMENT_MIN_BITS:
        return dev_cube, dev_fourth
    moments = c >= clip_edge(eps)
    if not moments.any():
        return dev_cube, dev_fourth
    c = np.where(moments, c, 0.25)  # keys that summed their logarithms: any c, unused
    s1, s2 = sums["dev"], sums["dev_sq"]
    with np.errstate(all="ignore"):
        c2 = c * c
        u1, u2, u3, u4 = s1 / c, s2 / c2, dev_cube / (c2 * c), dev_fourth / (c2 * c2)
        log_near = weight * el.log(c) + (((u4 * -0.25 + u3 / 3.0) - u2 * 0.5) + u1)
        k = 1.0 - c
        k2 = k * k
        v1, v2, v3, v4 = s1 / k, s2 / k2, dev_cube / (k2 * k), dev_fourth / (k2 * k2)
        log_far = weight * el.log1p(-c) - (((v4 * 0.25 + v3 / 3.0) + v2 * 0.5) + v1)
    return np.where(moments, log_near, dev_cube), np.where(moments, log_far, dev_fourth)


def in_order_ahead(
    items: Iterable[_Item], work: Callable[[_Item], _T], *, workers: int = 1
) -> Iterator[_T]:
    """``work(item)`` for each item, in order, computed up to ``workers`` items ahead in
    worker threads (NumPy releases the GIL in its loops, but not in ``numpy.add.at`` or
    ``numpy.bincount``: see :mod:`calib_cli.core.scatter`; the caller's work on one result
    overlaps the next ones'). The results, and their order, are those of a plain loop."""
    with ThreadPoolExecutor(max_workers=workers) as pool:
        pending: deque[Future[_T]] = deque()
        for item in items:
            pending.append(pool.submit(work, item))
            if len(pending) > workers:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()


def _cells_and_subs(
    x: FloatArray, low: npt.NDArray[np.bool_], mantissa_bits: int, sub_bits: int
) -> tuple[IntArray, IntArray | None]:
    """Each row's :func:`~calib_cli.summaries.grid.cell_index` from ``x = min(p, 1 - p)``
    (as there; -0.0 has a negative pattern and joins 0's cell) and, with ``sub_bits``, its
    sub-cell in that cell: the next ``sub_bits`` bits of the pattern, counted upwards in
    ``p`` (downwards in ``x`` on the upper tail); 0 for ``x = 0``. One shift gives both."""
    pattern = x.view(np.int64)
    zero = pattern <= 0
    t = pattern >> (52 - mantissa_bits - sub_bits)
    sub = None
    if sub_bits:
        top = (1 << sub_bits) - 1
        raw = t & top
        raw[zero] = 0
        sub = np.where(low, raw, top - raw)
        t >>= sub_bits
    t += 1
    t[zero] = 0
    return np.where(low, t, 2 * half_cell(mantissa_bits) - t), sub


#: Bins by comparisons (one pass per inner edge) up to this many inner edges, else a search.
_COMPARED_EDGES = 16


def bin_of(p: FloatArray, edges: FloatArray) -> IntArray:
    """:func:`~calib_cli.summaries.grid.bin_index`: the inner edges strictly below ``p``."""
    inner = edges[1:-1]
    if inner.size > _COMPARED_EDGES:
        return np.searchsorted(inner, p, side="left").astype(np.int64)
    count = np.zeros(p.shape, dtype=np.int8)
    for edge in inner:
        count += p > edge
    return count.astype(np.int64)


def sub_cell_index(cell: IntArray, sub: IntArray, *, base_bits: int, depth: int) -> IntArray:
    """The cell on the ``base_bits + depth`` grid of sub-cell ``sub`` (counted upwards in the
    score) of ``cell`` on the ``base_bits`` grid (:func:`~calib_cli.summaries.grid.cell_index`
    of the same scores)."""
    h = half_cell(base_bits)
    lower = cell <= h
    parent = np.where(lower, cell, 2 * h - cell)  # f of the cell's tail
    offset = np.where(lower, sub, ((1 << depth) - 1) - sub)  # bits of x below the cell's
    f = np.where(parent == 0, 0, ((parent - 1) << depth) + 1 + offset)
    out: IntArray = np.where(lower, f, 2 * half_cell(base_bits + depth) - f)
    return out


#: Rows added to the int32 sub-cell counts between spills to int64 (below 2**31 - 1).
SUB_SPILL_ROWS = (1 << 31) - 1
_ONE = np.int32(1)

#: Pairs of class slots whose sub-cells are read off at a time.
SUB_READ_PAIRS = 1 << 16


#: Most sub-cell bits a summary pass may add.
MAX_SUB_BITS = 8
#: Memory the sub-cells of one pass may take (past it they are given up).
SUB_MAX_BYTES = 1 << 28

#: Entries of the dense (group, page) table (8 bytes each) before the search takes over:
#: 2**22 entries, 32 MB, hold about 128 groups.
TABLE_ENTRIES = 1 << 22


class SubCounts:
    """The sub-cell row counts one thread adds ahead (:meth:`GridSums.sums_ahead`): int32,
    spilled to int64 before a count could overflow (:data:`SUB_SPILL_ROWS`). Counts are
    integers, so where and in what order they are added never changes them: the summary adds
    every thread's counts to its own when it reads the sub-cells, when the threads stop
    counting ahead or when the sub-cells are given up. ``lock``: held while adding, and by the
    summary while it takes the counts over (:meth:`GridSums._fold_sub_counts`)."""

    def __init__(self) -> None:
        self.rows = np.zeros(0, dtype=np.int32)
        self.spill: IntArray | None = None
        self.since = 0
        self.lock = threading.Lock()

    def add(self, fine: IntArray, size: int, limit: int) -> None:
        """Count one row in each sub-cell of ``fine`` (all below ``size``); the array grows
        by doubling, never past ``limit`` (the summary's own sub-cells: the memory cap
        counts each thread's at that size)."""
        if self.rows.size < size:  # room for the slots seen
            grown = np.zeros(max(size, min(2 * self.rows.size, limit)), dtype=np.int32)
            grown[: self.rows.size] = self.rows
            self.rows = grown
            if self.spill is not None:
                spill = np.zeros(grown.size, dtype=np.int64)
                spill[: self.spill.size] = self.spill
                self.spill = spill
        if self.since + fine.size > SUB_SPILL_ROWS:
            if self.spill is None:
                self.spill = np.zeros(self.rows.size, dtype=np.int64)
            self.spill += self.rows
            self.rows[:] = 0
            self.since = 0
        scatter_add(self.rows, fine, _ONE)
        self.since += fine.size


class SlotSums(Protocol):
    """Per-slot arrays of a pass (:class:`GridSums`, the dense refinement's sums): row counts,
    and when ``weighted`` the weight sums, weighted-row counts and weight minima."""

    weighted: bool
    sums: dict[str, FloatArray]
    n_rows: IntArray
    n_rows_weighted: IntArray
    weight_min: FloatArray
    score_min: FloatArray
    score_max: FloatArray


def add_rows(
    sums: SlotSums,
    slot: IntArray,
    p: FloatArray,
    terms: Mapping[str, FloatArray],
    w: FloatArray | None,
    *,
    count_rows: bool = True,
) -> None:
    """Add one batch's rows to their slots, in order (``scatter_add`` adds in index order:
    the same rows give the same bytes however they are cut into batches): the terms, the row
    counts (unless ``count_rows`` is False: the caller counts them), the weights and the
    score extremes of the rows of positive weight."""
    for name in TERMS:
        scatter_add(sums.sums[name], slot, terms[name])
    if count_rows:
        scatter_add(sums.n_rows, slot, 1)
    if w is None:
        lower(sums.score_min, slot, p)
        raise_to(sums.score_max, slot, p)
        return
    scatter_add(sums.sums["weight"], slot, w)
    scatter_add(sums.sums["weight_sq"], slot, w * w)
    positive = w > 0.0
    if not np.all(positive):
        slot, p, w = slot[positive], p[positive], w[positive]
    scatter_add(sums.n_rows_weighted, slot, 1)
    lower(sums.score_min, slot, p)
    raise_to(sums.score_max, slot, p)
    lower(sums.weight_min, slot, w)


def _summed(batch: TermBatch) -> dict[str, FloatArray]:
    """What a block sums per slot: the :data:`TERMS`, and the weights and their squares."""
    values = dict(batch.terms)
    if batch.weight is not None:
        values["weight"], values["weight_sq"] = batch.weight, batch.weight * batch.weight
    return values


def lower(target: FloatArray, slot: IntArray, values: FloatArray) -> None:
    """``numpy.minimum.at(target, slot, values)``, on the rows that can lower their slot's
    value only (past the first batches, a few: a gather and a comparison, not a scatter)."""
    can = values < target[slot]
    np.minimum.at(target, slot[can], values[can])


def raise_to(target: FloatArray, slot: IntArray, values: FloatArray) -> None:
    """``numpy.maximum.at(target, slot, values)`` likewise (:func:`lower`)."""
    can = values > target[slot]
    np.maximum.at(target, slot[can], values[can])


def slot_weights(
    sums: SlotSums, slots: IntArray
) -> tuple[IntArray, IntArray, FloatArray, FloatArray, FloatArray]:
    """The summary's row counts, weighted-row counts, weight, squared weight and smallest
    weight of ``slots``: from the sums when weighted, else every row of weight 1 (no
    weighted-only arrays are kept for unweighted rows)."""
    n_rows = sums.n_rows[slots]
    if not sums.weighted:
        ones = n_rows.astype(np.float64)
        return n_rows, n_rows, ones, ones, np.ones(n_rows.size)
    w_min = sums.weight_min[slots]
    return (
        n_rows,
        sums.n_rows_weighted[slots],
        sums.sums["weight"][slots],
        sums.sums["weight_sq"][slots],
        np.where(np.isfinite(w_min), w_min, np.nan),
    )


class GridSums:
    """Per-key sums of the batches added so far (module docstring).

    Parameters
    ----------
    mantissa_bits : int
        The grid (:mod:`calib_cli.summaries.grid`).
    n_bins : int
        Reliability bins.
    weighted : bool
        Whether the batches carry weights.
    page_bits : int
        Integers ``cell + bin`` a page holds, as a power of two.
    search : bool
        Find each (group, page)'s slots by a search of the pages seen (memory: those
        pages), not in a table over every possible page (8 bytes each, per group).
        With many groups, each holding few keys, ``page_bits=0`` and ``search=True`` keep
        the memory to the keys (two slots each).
    sub_bits : int
        Also add each slot's weight (squared weight, rows) in ``2**sub_bits`` sub-cells
        (:mod:`calib_cli.summaries.subcells`; the batches carry ``sub``); 0: none. Given up
        (:attr:`sub_bits` back to 0, :attr:`sub_dropped` set) if they would take more than
        :data:`SUB_MAX_BYTES`.
    counting_threads : int
        Threads that may count sub-cell rows ahead, each in its own :class:`SubCounts`
        (:meth:`sums_ahead`), while all their counts together stay within
        :data:`SUB_MAX_BYTES`; past it they hand them over and the thread that adds the
        batches counts every row (:attr:`count_ahead`).
    """

    def __init__(
        self,
        *,
        mantissa_bits: int,
        n_bins: int,
        weighted: bool,
        page_bits: int = 8,
        search: bool = False,
        sub_bits: int = 0,
        counting_threads: int = 0,
    ) -> None:
        if not 0 <= sub_bits <= MAX_SUB_BITS:
            raise InputError(f"sub_bits must lie in [0, {MAX_SUB_BITS}], got {sub_bits!r}")
        self.sub_bits = sub_bits
        self.sub_dropped = False
        #: unweighted rows are counted in their sub-cells only (:meth:`_settle_rows`)
        self.rows_in_sub = sub_bits > 0 and not weighted
        #: rows per sub-cell since the last spill (int32: half the memory, faster additions)
        self.sub_rows = np.zeros(0, dtype=np.int32)
        #: rows per sub-cell spilled from ``sub_rows`` before it could overflow (None: never)
        self.sub_spill: IntArray | None = None
        self.sub_since_spill = 0
        self.sub_weight = np.zeros(0)
        self.sub_weight_sq = np.zeros(0)
        #: threads that may count sub-cells ahead (:class:`SubCounts`), for the memory cap
        self.counting_threads = counting_threads
        #: whether threads count sub-cells ahead (not once their counts would pass the cap)
        self.count_ahead = counting_threads > 0
        self._sub_counts: list[SubCounts] = []  # every thread's (sums_ahead)
        self._own_counts = threading.local()
        self.mantissa_bits = mantissa_bits
        self.n_bins = n_bins
        self.weighted = weighted
        self.page_bits = page_bits
        self.n_pages = ((2 * half_cell(mantissa_bits) + n_bins) >> page_bits) + 1
        #: with more groups than a table of TABLE_ENTRIES holds: sorted (group, page) keys and
        #: their slots, searched (then no table: with a page per key on a 20-bit grid it would
        #: have 2^31 entries, 17 GB)
        self.known: tuple[IntArray, IntArray] | None = None
        if search:
            self.table = np.zeros(0, dtype=np.int64)
            self.known = (np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64))
        else:
            self.table = np.full(self.n_pages, -1, dtype=np.int64)  # (group, page) -> slot
        self.page_key: list[IntArray] = []  # per page slot: group * n_pages + page
        self.n_used = 0
        self.capacity = 0
        self.sums: dict[str, FloatArray] = {}
        self.n_rows = np.zeros(0, dtype=np.int64)
        self.n_rows_weighted = np.zeros(0, dtype=np.int64)
        # Extremes in pairs, one row per slot: a worker reads both of a row's slot in one
        # gather (sums_ahead). score_min, score_max; weight_min and score_any (the largest
        # score of any row, zero weights too) when weighted.
        self._scores = np.zeros((0, 2))
        self._weights = np.zeros((0, 2))
        self.score_min, self.score_max = self._scores[:, 0], self._scores[:, 1]
        self.weight_min, self.score_any = self._weights[:, 0], self._weights[:, 1]
        self._grow(0)

    @property
    def slots_per_page(self) -> int:
        return 2 << self.page_bits

    def _grow(self, pages: int) -> None:
        """Room for ``pages`` page slots (capacity doubles)."""
        if pages <= self.capacity and self.sums:
            return
        capacity = max(pages, 2 * self.capacity, 4)
        n = capacity * self.slots_per_page
        old = self.capacity * self.slots_per_page

        def grown(array: npt.NDArray[_G], fill: float) -> npt.NDArray[_G]:
            out: npt.NDArray[_G] = np.full(n, fill, dtype=array.dtype)
            out[:old] = array[:old]
            return out

        names = list(TERMS) + (["weight", "weight_sq"] if self.weighted else [])
        self.sums = {k: grown(self.sums.get(k, np.zeros(0)), 0.0) for k in names}
        self.n_rows = grown(self.n_rows, 0)

        def paired(pair: FloatArray) -> FloatArray:  # (smallest, largest) per slot
            out = np.empty((n, 2))
            out[:, 0], out[:, 1] = np.inf, -np.inf
            out[:old] = pair[:old]
            return out

        self._scores = paired(self._scores)
        self.score_min, self.score_max = self._scores[:, 0], self._scores[:, 1]
        if self.weighted:  # unweighted rows: every row counts, its weight is 1, its key's score
            self.n_rows_weighted = grown(self.n_rows_weighted, 0)
            self._weights = paired(self._weights)
            self.weight_min, self.score_any = self._weights[:, 0], self._weights[:, 1]
        self.capacity = capacity
        if self.sub_bits:
            self._grow_sub(n, old)

    def _grow_sub(self, n: int, old: int) -> None:
        """The sub-cells' arrays for ``n`` slots, or none at all past :data:`SUB_MAX_BYTES`;
        past it with every counting thread's counts too, the threads' counts are handed
        over and no thread counts ahead any more (this thread counts every row)."""
        per_slot = (4 << self.sub_bits) * (5 if self.weighted else 1)  # int32 rows, 2 float64
        if self.count_ahead and n * (per_slot + (4 << self.sub_bits) * self.counting_threads) > (
            SUB_MAX_BYTES
        ):
            self.count_ahead = False  # before the hand-over: see _fold_sub_counts
            self._fold_sub_counts()
        if n * per_slot > SUB_MAX_BYTES:
            bits, self.sub_bits = self.sub_bits, 0  # no thread counts ahead from now on
            self._settle_rows(bits)  # the rows counted so far, before their sub-cells go
            self.rows_in_sub = False
            self.sub_dropped = True
            self.sub_rows, self.sub_spill = np.zeros(0, dtype=np.int32), None
            self.sub_weight, self.sub_weight_sq = np.zeros(0), np.zeros(0)
            return
        k = 1 << self.sub_bits

        def grown(array: npt.NDArray[_G]) -> npt.NDArray[_G]:
            out: npt.NDArray[_G] = np.zeros(n * k, dtype=array.dtype)
            out[: old * k] = array[: old * k]
            return out

        self.sub_rows = grown(self.sub_rows)
        if self.sub_spill is not None:
            self.sub_spill = grown(self.sub_spill)
        if self.weighted:
            self.sub_weight = grown(self.sub_weight)
            self.sub_weight_sq = grown(self.sub_weight_sq)

    def _thread_counts(self) -> SubCounts:
        """The calling thread's :class:`SubCounts` (made on its first call)."""
        counts: SubCounts | None = getattr(self._own_counts, "counts", None)
        if counts is None:
            counts = self._own_counts.counts = SubCounts()
            self._sub_counts.append(counts)
        return counts

    def _fold_sub_counts(self) -> None:
        """Add every thread's :class:`SubCounts` to the sub-cells' own counts (into the int32
        counts while no count can pass ``SUB_SPILL_ROWS``, else into the int64 spill) and
        empty them. Each is read under its lock, so
        a thread's block is in or out whole; a thread that finds :attr:`sub_bits` 0 or
        :attr:`count_ahead` False (set before this is called) counts nothing more."""
        for counts in list(self._sub_counts):
            with counts.lock:
                if counts.rows.size and self.sub_rows.size:
                    # past the slots allocated when it counted (it grows by doubling): zeros
                    k = min(counts.rows.size, self.sub_rows.size)
                    if counts.spill is None and (
                        self.sub_since_spill + counts.since <= SUB_SPILL_ROWS
                    ):  # no count can pass the rows added to both: int32 holds the sum
                        self.sub_rows[:k] += counts.rows[:k]
                        self.sub_since_spill += counts.since
                    else:
                        if self.sub_spill is None:
                            self.sub_spill = np.zeros(self.sub_rows.size, dtype=np.int64)
                        self.sub_spill[:k] += counts.rows[:k]
                        if counts.spill is not None:
                            self.sub_spill[:k] += counts.spill[:k]
                counts.rows, counts.spill, counts.since = np.zeros(0, dtype=np.int32), None, 0

    def _settle_rows(self, bits: int | None = None) -> None:
        """The row counts from the sub-cells (of ``bits``, default :attr:`sub_bits`), when
        rows are counted there only; every thread's counts first."""
        self._fold_sub_counts()
        if self.rows_in_sub and self.sub_rows.size:
            k = 1 << (self.sub_bits if bits is None else bits)
            counts = self.sub_rows.reshape(-1, k).sum(axis=1, dtype=np.int64)
            if self.sub_spill is not None:
                counts += self.sub_spill.reshape(-1, k).sum(axis=1)
            self.n_rows[: counts.size] = counts

    def _spill_sub_rows(self, coming: int) -> None:
        """Move the int32 counts to the int64 spill before ``coming`` more rows could make one
        overflow (no count can exceed the rows added since the last spill)."""
        if self.sub_since_spill + coming <= SUB_SPILL_ROWS:
            return
        if self.sub_spill is None:
            self.sub_spill = np.zeros(self.sub_rows.size, dtype=np.int64)
        self.sub_spill += self.sub_rows
        self.sub_rows[:] = 0
        self.sub_since_spill = 0

    def _pages(self, key: IntArray, group: npt.NDArray[np.int32] | None) -> IntArray:
        """The page slot of each row, allocating the pages seen for the first time."""
        page = key >> self.page_bits
        if group is not None:
            n_groups = int(group.max()) + 1 if group.size else 0
            if self.known is None and n_groups * self.n_pages > self.table.size:
                if n_groups * self.n_pages > TABLE_ENTRIES:  # many groups: search instead
                    held = np.flatnonzero(self.table >= 0)
                    self.known = (held, self.table[held])
                    self.table = np.zeros(0, dtype=np.int64)
                else:
                    table = np.full(n_groups * self.n_pages, -1, dtype=np.int64)
                    table[: self.table.size] = self.table
                    self.table = table
            page = group.astype(np.int64) * self.n_pages + page
        slot = self._lookup(page)
        miss = slot < 0
        if np.any(miss):
            # in order: the same pages get the same slots
            new, which = np.unique(page[miss], return_inverse=True)
            slots = np.arange(self.n_used, self.n_used + new.size)
            # the arrays grow before the table names the new slots: a worker that sees a
            # slot in the table (sums_ahead) reads arrays that hold it
            self._grow(self.n_used + new.size)
            self.page_key.append(new)
            self.n_used += new.size
            if self.known is None:
                self.table[new] = slots
            else:
                keys, held = self.known  # new keys merged in order, O(keys) not a sort
                at = np.searchsorted(keys, new)
                self.known = (np.insert(keys, at, new), np.insert(held, at, slots))
            slot[miss] = slots[which]
        return slot

    def _lookup(self, page: IntArray) -> IntArray:
        """Each (group, page)'s slot, -1 where it has none yet."""
        found: IntArray
        if self.known is None:
            found = self.table[page]
            return found
        keys, slots = self.known
        if not keys.size:
            return np.full(page.size, -1, dtype=np.int64)
        # the batch's distinct pages, sorted: a search in order is far cheaper than one per row
        distinct, row = np.unique(page, return_inverse=True)
        at = np.minimum(np.searchsorted(keys, distinct), keys.size - 1)
        found = np.where(keys[at] == distinct, slots[at], -1)[row]
        return found

    def sums_ahead(self, batch: TermBatch) -> TermBatch:
        """``batch`` with its sums per slot (:class:`BlockSums`), for :meth:`add` to add in
        order. Meant for a worker thread while :meth:`add` runs on another: it reads a copy
        of the page table (entries only ever change from -1 to a slot, and the arrays grow
        before they do) and the arrays' extremes, which only ever move outwards. With groups
        the batch comes back as it is (:meth:`add` adds its rows one by one)."""
        if batch.group is not None or self.known is not None:
            return batch
        table = self.table.copy()  # one view of the pages: a page's rows all found or not
        scores, weights = self._scores, self._weights  # as they are now (main may grow them)
        page = table[batch.key >> self.page_bits]
        mask = (1 << self.page_bits) - 1
        slot = (page << (self.page_bits + 1)) + ((batch.key & mask) << 1)
        slot += batch.label
        size = (int(table.max()) + 1) * self.slots_per_page
        lost = page < 0
        missed = np.flatnonzero(lost)
        if missed.size:  # summed past the end (then cut off); all candidates for the extremes
            slot[missed] = size
        sums = scatter_columns(slot, _summed(batch), size)
        p = batch.score
        counted = self._count_sub_cells_ahead(batch, slot, lost, missed.size, size)
        # unweighted rows counted in their sub-cells need no other count
        n_rows = None if counted and batch.weight is None else scatter_sums(slot, 1, size)

        def rows(which: npt.NDArray[np.bool_], also: npt.NDArray[np.bool_]) -> IntArray:
            """The rows where ``which`` holds, or ``also`` where rows were missed."""
            return np.flatnonzero(which | also if missed.size else which)

        def of(pair: FloatArray) -> tuple[FloatArray, FloatArray]:
            """Each row's slot's two values (a missed row's: any), in one gather."""
            both = np.take(pair.view(np.complex128).ravel(), slot, mode="clip")
            return both.real, both.imag

        n_weighted = lighter = later = None
        score_min, score_max = of(scores)
        if batch.weight is None:
            lowers = rows(p < score_min, lost)
            raises = rows(p > score_max, lost)
        else:
            w = batch.weight
            positive = w > 0.0
            n_weighted = scatter_sums(slot[positive], 1, size)
            heavy = lost & positive  # the extremes of positive weights only
            weight_min, score_any = of(weights)
            lowers = rows(positive & (p < score_min), heavy)
            raises = rows(positive & (p > score_max), heavy)
            lighter = rows(positive & (w < weight_min), heavy)
            later = rows(p > score_any, lost)
        if missed.size:
            slot[missed] = -1
        block = BlockSums(
            size=size,
            sums=sums,
            n_rows=n_rows,
            n_rows_weighted=n_weighted,
            missed=missed,
            lowers=lowers,
            raises=raises,
            lighter=lighter,
            later=later,
            sub_counted=counted,
        )
        return replace(batch, slot=slot, block=block)

    def _count_sub_cells_ahead(
        self,
        batch: TermBatch,
        slot: IntArray,
        lost: npt.NDArray[np.bool_],
        n_missed: int,
        size: int,
    ) -> bool:
        """Count the found rows of ``batch`` (``lost``: the missed ones) in their sub-cells,
        in this thread's :class:`SubCounts`; False (nothing counted) without sub-cells or
        once they are given up. Integer counts: the thread and the order never matter."""
        if batch.sub is None or not self.sub_bits or not self.count_ahead:
            return False
        counts = self._thread_counts()
        with counts.lock:
            bits = self.sub_bits  # under the lock: see _fold_sub_counts
            if not bits or not self.count_ahead:
                return False
            fine = (slot << bits) + batch.sub
            # the summary's own sub-cells cover every slot allocated (at least the snapshot's)
            limit = max(self.sub_rows.size, size << bits)
            counts.add(fine[~lost] if n_missed else fine, size << bits, limit)
        return True

    def _slots(self, batch: TermBatch) -> IntArray:
        """Each row's slot, allocating the pages seen for the first time (in order)."""
        mask = (1 << self.page_bits) - 1
        if batch.slot is None:
            page = self._pages(batch.key, batch.group)
            slot = (page << (self.page_bits + 1)) + ((batch.key & mask) << 1)
            slot += batch.label
            return slot
        slot = batch.slot
        # the rows a worker did not find (sums_ahead; none other have slot -1)
        miss = batch.block.missed if batch.block is not None else np.flatnonzero(slot < 0)
        if miss.size:
            key = batch.key[miss]
            page = self._pages(key, None)
            slot[miss] = (page << (self.page_bits + 1)) + ((key & mask) << 1) + batch.label[miss]
        return slot

    def add(self, batch: TermBatch) -> None:
        """Add one batch's rows, in order."""
        if (batch.weight is not None) != self.weighted:
            raise InputError("the batches' weights do not match the summary's weight column")
        slot = self._slots(batch)
        if batch.block is not None:
            self._add_block(batch, slot, batch.block)
        else:
            if batch.weight is not None:  # a score of every row, whatever its weight (the key's)
                raise_to(self.score_any, slot, batch.score)
            add_rows(
                self, slot, batch.score, batch.terms, batch.weight, count_rows=not self.rows_in_sub
            )
        if self.sub_bits:
            if batch.sub is None:
                raise InputError("internal: the batches carry no sub-cells")
            bits, w = self.sub_bits, batch.weight
            # rows counted ahead (sums_ahead): the missed ones only here
            ahead = batch.block.missed if batch.block and batch.block.sub_counted else None
            fine = (slot << bits) + batch.sub if w is not None or ahead is None else None
            if ahead is None:
                assert fine is not None
                counted = fine
            elif fine is not None:
                counted = fine[ahead]
            else:
                counted = (slot[ahead] << bits) + batch.sub[ahead]
            self._spill_sub_rows(counted.size)
            scatter_add(self.sub_rows, counted, _ONE)
            self.sub_since_spill += counted.size
            if w is not None:
                assert fine is not None
                scatter_add(self.sub_weight, fine, w)  # floats: every row, in order
                scatter_add(self.sub_weight_sq, fine, w * w)

    def _add_block(self, batch: TermBatch, slot: IntArray, block: BlockSums) -> None:
        """Add a batch's :class:`BlockSums` (``slot``: every row's, the missed ones' now
        allocated): per slot, the batch's sum from zero, found rows and missed alike."""
        n, missed = block.size, block.missed
        lost = slot[missed]
        p, w = batch.score, batch.weight
        summed = _summed(batch) if missed.size else {}
        # their pages are not the found rows': one sum per slot still (from zero, in order)
        held, where = np.unique(lost, return_inverse=True) if missed.size else (lost, lost)
        for name, part in block.sums.items():
            total = self.sums[name]
            total[:n] += part
            if missed.size:
                total[held] += np.bincount(where, weights=summed[name][missed], minlength=held.size)
        # integers: any order gives the same counts
        if block.n_rows is not None:
            self.n_rows[:n] += block.n_rows
            scatter_add(self.n_rows, lost, 1)
        elif not self.rows_in_sub:  # sub-cells given up since the found rows were counted
            scatter_add(self.n_rows, lost, 1)  # in them (and handed over): the missed ones

        lower(self.score_min, slot[block.lowers], p[block.lowers])
        raise_to(self.score_max, slot[block.raises], p[block.raises])
        if w is not None and block.lighter is not None and block.later is not None:
            assert block.n_rows_weighted is not None
            self.n_rows_weighted[:n] += block.n_rows_weighted
            positive = missed[w[missed] > 0.0]
            scatter_add(self.n_rows_weighted, slot[positive], 1)
            lower(self.weight_min, slot[block.lighter], w[block.lighter])
            raise_to(self.score_any, slot[block.later], p[block.later])

    def columns(
        self,
        group_names: Sequence[GroupName],
        bin_edges: npt.ArrayLike,
        *,
        eps: float,
        codes: bool = False,
    ) -> dict[str, npt.ArrayLike]:
        """The occupied keys as the summary format's columns (``group_names[code]``; with
        ``codes``, the codes themselves, as :meth:`ScoreSummary.from_group_codes` reads)."""
        used, cell, bin_, label, owner = self._keys(bin_edges)
        group: npt.NDArray[np.generic] = owner // self.n_pages
        if used.size:  # the slots in the summary's key order, before any gather
            order = np.lexsort((label, bin_, cell, group_ranks(group_names)[group]))
            used, cell, bin_, label, group = (
                used[order],
                cell[order],
                bin_[order],
                label[order],
                group[order],
            )
            del order
        if not codes:
            group = np.array([*group_names, None], dtype=object)[:-1][group]
        n_rows, n_weighted, weight, weight_sq, weight_min = slot_weights(self, used)
        lo, hi = self.score_min[used], self.score_max[used]
        return format_columns(
            group=group,
            cell=cell,
            bin_=bin_,
            label=label,
            n_rows=n_rows,
            n_rows_weighted=n_weighted,
            weight=weight,
            weight_sq=weight_sq,
            sums={name: self.sums[name][used] for name in TERMS},
            weight_min=weight_min,
            score_min=np.where(np.isfinite(lo), lo, np.nan),
            score_max=np.where(np.isfinite(hi), hi, np.nan),
            mantissa_bits=self.mantissa_bits,
            eps=eps,
        )

    def _keys(
        self, bin_edges: npt.ArrayLike
    ) -> tuple[IntArray, IntArray, IntArray, npt.NDArray[np.int8], IntArray]:
        """The occupied slots and their cells, bins, labels and (group, page) keys."""
        self._settle_rows()
        n = self.n_used * self.slots_per_page
        used = np.flatnonzero(self.n_rows[:n] > 0)
        label = (used & 1).astype(np.int8)
        any_score = self.score_any[used] if self.weighted else self.score_max[used]
        cell = cell_index(any_score, mantissa_bits=self.mantissa_bits)
        bin_ = bin_index(any_score, bin_edges)
        page_key = np.concatenate(self.page_key) if self.page_key else np.zeros(0, np.int64)
        owner = page_key[used // self.slots_per_page]
        key = ((owner % self.n_pages) << self.page_bits) + (
            (used >> 1) & ((1 << self.page_bits) - 1)
        )
        if np.any(cell + bin_ != key):
            raise InputError("internal: a summary key does not match its scores")
        return used, cell, bin_, label, owner

    def sub_cells(
        self, group_names: Sequence[GroupName], bin_edges: npt.ArrayLike
    ) -> SubCells | None:
        """The sub-cells of the rows added (None without ``sub_bits`` or once given up);
        ``group_names[code]`` as in :meth:`columns`. Only the keys whose (cell, bin) holds
        both classes (over all groups): the others have no ambiguous pairs."""
        if not self.sub_bits:
            return None
        used, cell, bin_, label, owner = self._keys(bin_edges)
        # Only the keys whose (cell, bin) holds both classes over all groups (the pooled
        # atom's); those of one class have no ambiguous pairs. Their slots come in pairs
        # (s, s + 1), one per class of a (group, cell, bin) (a class may have no rows: its
        # counts are 0); the pairs in (group, cell, bin) order, each pair's counts as
        # (sub-cell, class), are the sub-cells in their canonical order without a sort.
        if not np.any(owner >= self.n_pages):  # one group: a key's two slots, its classes
            keep = self.n_rows[used ^ 1] > 0
        else:
            stride = int(np.asarray(bin_edges).size) + 1
            place = cell * stride + bin_
            keep = np.isin(place, np.intersect1d(place[label == 0], place[label == 1]))
            del place
        pairs = used[keep] & ~1  # ascending (as the slots used): each pair's first slot
        at = np.flatnonzero(np.diff(pairs, prepend=-1))  # each pair's first place
        first = pairs[at]
        cell, bin_ = cell[keep][at], bin_[keep][at]
        group = (owner[keep][at] // self.n_pages).astype(np.int32)
        del used, label, owner, keep, at, pairs
        order = np.lexsort((bin_, cell, group))
        first, cell, bin_, group = first[order], cell[order], bin_[order], group[order]
        depth = self.sub_bits
        k = 1 << depth

        base = sub_cell_index(
            cell, np.zeros(cell.size, np.int64), base_bits=self.mantissa_bits, depth=depth
        )
        edge = (cell == 0) | (cell == 2 * half_cell(self.mantissa_bits))

        def both(values: npt.NDArray[_G], pairs: slice) -> npt.NDArray[_G]:
            """Per pair of ``pairs``, per sub-cell, per class (flattened)."""
            table = values.reshape(-1, k)
            mine = first[pairs]
            out: npt.NDArray[_G] = np.stack((table[mine], table[mine + 1]), axis=2).reshape(-1)
            return out

        def rows_of(pairs: slice) -> IntArray:
            rows: IntArray = both(self.sub_rows, pairs).astype(np.int64)
            if self.sub_spill is not None:
                rows += both(self.sub_spill, pairs)
            return rows

        # Read off in chunks of pairs into arrays sized by a first count: memory is the
        # sub-cells and one chunk's temporaries, not every pair's at once.
        chunks = [slice(i, i + SUB_READ_PAIRS) for i in range(0, first.size, SUB_READ_PAIRS)]
        sizes = [int(np.count_nonzero(rows_of(c))) for c in chunks]
        total = sum(sizes)
        out_group = np.empty(total, dtype=np.int32)
        out_cell = np.empty(total, dtype=np.int64)
        out_bin = np.empty(total, dtype=np.int32)
        out_label = np.empty(total, dtype=np.int8)
        out_rows = np.empty(total, dtype=np.int64)
        out_weight = np.empty(total) if self.weighted else None
        out_square = np.empty(total) if self.weighted else None
        done = 0
        for chunk, size in zip(chunks, sizes, strict=True):
            rows = rows_of(chunk)
            at = np.flatnonzero(rows)
            put = slice(done, done + size)
            out_rows[put] = rows[at]
            del rows
            if out_weight is not None and out_square is not None:
                out_weight[put] = both(self.sub_weight, chunk)[at]
                out_square[put] = both(self.sub_weight_sq, chunk)[at]
            out_label[put] = at & 1
            sub = (at >> 1) & (k - 1)
            pair = (at >> (depth + 1)) + chunk.start
            # a sub-cell's cell is its pair's first one plus its index (sub_cell_index is
            # linear in the index on both tails), but for the cells of exactly 0 and 1
            fine = base[pair] + sub
            ends = edge[pair]
            if np.any(ends):
                fine[ends] = sub_cell_index(
                    cell[pair][ends], sub[ends], base_bits=self.mantissa_bits, depth=depth
                )
            out_cell[put] = fine
            out_group[put] = group[pair]
            out_bin[put] = bin_[pair]
            done += size
        return SubCells(
            mantissa_bits=self.mantissa_bits + depth,
            base_bits=self.mantissa_bits,
            groups=tuple(group_names),
            group=out_group,
            cell=out_cell,
            bin=out_bin,
            label=out_label,
            n_rows=out_rows,
            weight_sums=out_weight,  # None unweighted: the weights are the rows
            square_sums=out_square,
        )

    def drop_sub_cells(self) -> None:
        """Free the sub-cells' counts (once read off); the row counts stay."""
        self._settle_rows()
        self.rows_in_sub = False
        self.sub_bits = 0
        self.sub_rows, self.sub_spill = np.zeros(0, dtype=np.int32), None
        self.sub_weight, self.sub_weight_sq = np.zeros(0), np.zeros(0)

    def summary(
        self, group_names: Sequence[GroupName], metadata: Mapping[str, object]
    ) -> ScoreSummary:
        """The summary of the rows added (``metadata`` as in the summary format)."""
        edges = np.asarray(metadata["bin_edges"], dtype=np.float64)
        eps = metadata["eps"]
        assert isinstance(eps, float)
        columns = self.columns(group_names, edges, eps=eps, codes=True)
        return ScoreSummary.from_group_codes(columns, group_names, metadata)


def format_columns(
    *,
    group: npt.NDArray[np.generic],
    cell: IntArray,
    bin_: IntArray,
    label: npt.NDArray[np.int8],
    n_rows: IntArray,
    n_rows_weighted: IntArray,
    weight: FloatArray,
    weight_sq: FloatArray,
    sums: Mapping[str, FloatArray],
    weight_min: FloatArray,
    score_min: FloatArray,
    score_max: FloatArray,
    mantissa_bits: int,
    eps: float,
) -> dict[str, npt.ArrayLike]:
    """The summary format's columns from the sums of :data:`TERMS`: the far side of a cell
    is :math:`W - \\sum w x \\ge W/2` (squares: :math:`W - 2\\sum w x + \\sum w x^2`), which
    side is the score is the cell's tail, the log loss term is the key's class's.

    Spiegelhalter's numerator :math:`\\sum w (y - p)(1 - 2p)` of a key (one class, one tail):
    with :math:`x = \\min(p, 1 - p)`, :math:`2\\sum w x^2 - \\sum w x` when the class is the
    tail's own (``y = 0`` below 1/2, ``y = 1`` above), else :math:`W - 3\\sum w x + 2\\sum w
    x^2`: the same sum, exact but for the rounding of these three terms (at most about
    :math:`4 \\epsilon W`, against :math:`\\epsilon` times the rows' terms added one by one)."""
    c = cell_floors(cell, mantissa_bits=mantissa_bits)
    s1 = sums["dev"]
    near = s1 + c * weight  # the sums of x and x**2 from those of x - c: no cancellation
    near_sq = (sums["dev_sq"] + 2.0 * c * s1) + c * (c * weight)
    far = weight - near
    far_sq = weight - 2.0 * near + near_sq
    low = cell <= half_cell(mantissa_bits)
    positive = label == 1
    own = 2.0 * near_sq - near
    log_near, log_far = log_sums(c, mantissa_bits=mantissa_bits, eps=eps, weight=weight, sums=sums)
    log_q, log_1mq = np.where(low, log_near, log_far), np.where(low, log_far, log_near)
    spiegelhalter_num = np.where(positive == low, weight - 3.0 * near + 2.0 * near_sq, own)
    return {
        "group": group,
        "cell": cell,
        "bin": bin_.astype(np.int32),
        "label": label,
        "n_rows": n_rows,
        "n_rows_weighted": n_rows_weighted,
        "weight": weight,
        "weight_sq": weight_sq,
        "score_sum": np.where(low, near, far),
        "score_sq_sum": np.where(low, near_sq, far_sq),
        "complement_sum": np.where(low, far, near),
        "complement_sq_sum": np.where(low, far_sq, near_sq),
        "log_loss_sum": np.where(positive, -log_q, -log_1mq),
        "logit_sum": log_q - log_1mq,
        "spiegelhalter_num": spiegelhalter_num,
        "spiegelhalter_var": sums["spieg_var"],
        "weight_min": weight_min,
        "score_min": score_min,
        "score_max": score_max,
    }


def check_batch_values(batch: TermBatch, *, score_column: str, label_column: str) -> None:
    """Refuse, naming the column, what only bad rows give: labels other than 0/1, scores
    NaN or outside [0, 1] (the scan is validated upstream; this is the last guard)."""
    y, p = batch.label, batch.score
    if not p.size:
        return
    # int8 labels seen as uint8: -1 is 255; NaN makes min and max NaN, never in [0, 1]
    bad = y.view(np.uint8).max() > 1 if y.dtype == np.int8 else np.any((y != 0) & (y != 1))
    if bad:
        raise InputError(f"column '{label_column}' has values that are not 0 or 1")
    if not (p.min() >= 0.0 and p.max() <= 1.0):
        raise InputError(f"column '{score_column}' has values that are NaN or outside [0, 1]")
