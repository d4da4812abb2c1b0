"""Refinement levels by dense accumulation over batches of rows (NumPy, one pass for many levels).

:func:`calib_cli.summaries.scan.refinement_level_lazy` summarises the rows of a plan's parent
cells with a streaming group-by, whose memory grows with the keys (Polars holds about 3 KB a
key). Here the keys are known in advance: a parent cell ``c`` on a ``b``-bit grid refined to
``m = b + d`` bits holds exactly the :math:`2^d` fine cells whose high bits are ``c``'s
(:func:`~calib_cli.summaries.grid.parent_cell`), and the bins its score interval meets. So
every (fine cell, bin, class) of every plan gets a fixed *slot* in flat arrays,

.. math::

    \\text{slot} = \\text{start}_c + ((\\text{bin} - \\text{bin}_c)\\, 2^{d} + o)\\, 2 + y,

with :math:`o` the fine cell's offset in its parent (the ``d`` bits of the score's pattern
below the parent's, counted towards 0.5 on the upper tail), and each batch of rows is added
with :func:`numpy.bincount` (sums) and ``minimum.at``/``maximum.at`` (minima, maxima). The
arrays take ``plan.max_keys`` slots a plan (:func:`~calib_cli.summaries.figures.
plan_dense_refinement`), whatever the rows. The sums are the streaming summary's terms
(:func:`~calib_cli.summaries.accumulate.row_terms`: the powers of each row's distance to its
cell's lower edge on its level's grid, Spiegelhalter's terms), turned into the format's
columns the same way (:func:`~calib_cli.summaries.accumulate.format_columns`), so a level equals
:func:`~calib_cli.summaries.figures.summarize_refinement` on the same rows: the same keys,
counts, minima and maxima, sums to floating-point summation. The order of additions is the
order of the batches and of the rows in them: the same batches give the same bytes.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, cast

import numpy as np
import numpy.typing as npt

from calib_cli.errors import InputError
from calib_cli.summaries.accumulate import (
    TERMS,
    add_rows,
    bin_of,
    format_columns,
    in_order_ahead,
    row_terms,
    slot_weights,
)
from calib_cli.summaries.figures import RefinementLevel, RefinementPlan
from calib_cli.summaries.grid import bin_index, cell_bounds, half_cell
from calib_cli.summaries.summary import ScoreSummary
from calib_cli.types import FloatArray, IntArray

__all__ = ["DenseBatch", "refine_batches"]

#: Batches are sorted by slot (top 16 bits) when a pass has more slots than this.
_SORTED_SLOTS = 1 << 18
#: Parent-cell lookups by a table when the parents' cells span at most this many cells.
_TABLE_CELLS = 1 << 24


@dataclass(frozen=True)
class DenseBatch:
    """One batch of rows: scores in [0, 1], labels 0/1, weights (None: ones)."""

    score: FloatArray
    label: npt.NDArray[np.int8]
    weight: FloatArray | None = None


@dataclass(frozen=True)
class _Layout:
    """Per parent cell (``block``): its grid, its fine grid, and where its slots start."""

    bits: IntArray  # the parent's grid
    cell: IntArray  # the parent cell
    depth: IntArray  # bits added
    plan: IntArray  # index of its plan
    bin_first: IntArray  # first bin the cell can hold
    bin_span: IntArray  # bins it can hold
    start: IntArray  # first slot
    n_slots: int
    #: per parent grid: (bits, sorted cells, their blocks, a table of the blocks from the
    #: first cell to the last, or None when they span too many cells: searched instead)
    lookups: tuple[tuple[int, IntArray, IntArray, IntArray | None], ...]


def _layout(plans: Sequence[RefinementPlan], edges: FloatArray) -> _Layout:
    bits, cell, depth, plan = [], [], [], []
    for index, p in enumerate(plans):
        for b, cells in p.parents:
            c = np.unique(np.asarray(cells, dtype=np.int64))
            bits.append(np.full(c.size, b, dtype=np.int64))
            cell.append(c)
            depth.append(np.full(c.size, p.mantissa_bits - b, dtype=np.int64))
            plan.append(np.full(c.size, index, dtype=np.int64))
    b_all, c_all = np.concatenate(bits), np.concatenate(cell)
    d_all, p_all = np.concatenate(depth), np.concatenate(plan)
    first = np.zeros(c_all.size, dtype=np.int64)
    span = np.ones(c_all.size, dtype=np.int64)
    lookups = []
    for b in np.unique(b_all):
        at = np.flatnonzero(b_all == b)
        lo, hi = cell_bounds(c_all[at], mantissa_bits=int(b))
        first[at] = bin_index(lo, edges)
        span[at] = bin_index(hi, edges) - first[at] + 1
        order = np.argsort(c_all[at], kind="stable")
        keys = c_all[at][order]
        if np.any(keys[1:] == keys[:-1]):
            raise InputError("the refinement plans' parent cells overlap")
        table = None
        low_cell, high_cell = int(keys[0]), int(keys[-1])
        if high_cell - low_cell < _TABLE_CELLS:  # built once a pass, not once a batch
            table = np.full(high_cell - low_cell + 1, -1, dtype=np.int64)
            table[keys - low_cell] = at[order]
        lookups.append((int(b), keys, at[order], table))
    size = span << (d_all + 1)
    start = np.concatenate(([0], np.cumsum(size)[:-1])).astype(np.int64)
    return _Layout(
        bits=b_all,
        cell=c_all,
        depth=d_all,
        plan=p_all,
        bin_first=first,
        bin_span=span,
        start=start,
        n_slots=int(np.sum(size)),
        lookups=tuple(lookups),
    )


def _pattern(p: FloatArray) -> tuple[IntArray, npt.NDArray[np.bool_]]:
    """The bit pattern of ``x = min(p, 1 - p)`` and whether ``p`` is on the lower tail (the
    fine cell's offset in its parent is the pattern's bits below the parent's)."""
    low = p <= 0.5
    x = np.where(low, p, 1.0 - p)
    x[x == 0.0] = 0.0  # -0.0 has another pattern
    return x.view(np.int64), low


def _cells(pattern: IntArray, low: npt.NDArray[np.bool_], bits: int) -> IntArray:
    """:func:`~calib_cli.summaries.grid.cell_index` from the pattern (as there)."""
    f = np.where(pattern == 0, 0, (pattern >> (52 - bits)) + 1)
    return np.where(low, f, 2 * half_cell(bits) - f)


def _blocks(layout: _Layout, pattern: IntArray, low: npt.NDArray[np.bool_]) -> IntArray:
    """The block (parent) of each row, -1 outside every parent."""
    block = np.full(pattern.size, -1, dtype=np.int64)
    for bits, keys, blocks, table in layout.lookups:
        cells = _cells(pattern, low, bits)
        first, last = int(keys[0]), int(keys[-1])
        if table is not None:
            inside = (cells >= first) & (cells <= last)
            found = np.where(inside, table[np.clip(cells - first, 0, last - first)], -1)
        else:
            where = np.minimum(np.searchsorted(keys, cells), keys.size - 1)
            found = np.where(keys[where] == cells, blocks[where], -1)
        block = np.where(found >= 0, found, block)
    return block


class _Sums:
    """The flat per-slot arrays and the additions of one batch."""

    def __init__(self, n_slots: int, weighted: bool) -> None:
        self.n_slots = n_slots
        self.weighted = weighted
        names = list(TERMS)
        if weighted:
            names += ["weight", "weight_sq"]
        self.sums = {name: np.zeros(n_slots) for name in names}
        self.n_rows = np.zeros(n_slots, dtype=np.int64)
        unweighted = 0 if weighted else n_slots  # arrays only weighted rows use stay empty
        self.n_rows_weighted = np.zeros(n_slots - unweighted, dtype=np.int64)
        self.score_min = np.full(n_slots, np.inf)
        self.score_max = np.full(n_slots, -np.inf)
        self.weight_min = np.full(n_slots - unweighted, np.inf)

    def add(
        self, slot: IntArray, p: FloatArray, terms: dict[str, FloatArray], w: FloatArray | None
    ) -> None:
        """Add one batch's rows, in order (``numpy.add.at`` adds in index order: the same
        rows give the same bytes however they are cut into batches)."""
        add_rows(self, slot, p, terms, w)


_Prepared = tuple[IntArray, FloatArray, dict[str, FloatArray], FloatArray | None]


def refine_batches(
    summary: ScoreSummary,
    plans: Sequence[RefinementPlan],
    batches: Iterable[DenseBatch],
) -> tuple[RefinementLevel, ...]:
    """The refinement levels of ``plans`` in one pass over ``batches`` (module docstring).

    Parameters
    ----------
    summary : ScoreSummary
        The one-group summary refined (its columns, bin edges and ``eps``).
    plans : sequence of RefinementPlan
        Levels with disjoint parents (:func:`~calib_cli.summaries.figures.
        plan_dense_refinement`).
    batches : iterable of DenseBatch
        The rows of the group (rows outside every parent are skipped).

    Returns
    -------
    tuple of RefinementLevel
        One per plan, in order: what :func:`~calib_cli.summaries.figures.summarize_refinement`
        gives for each on the same rows.

    Examples
    --------
    >>> from calib_cli.summaries.figures import plan_dense_refinement, reliability_from_summary
    >>> from calib_cli.summaries.summary import summarize_arrays
    >>> y, p = np.array([0, 1, 0, 1]), np.array([0.30001, 0.30002, 0.30003, 0.9])
    >>> s = summarize_arrays(y, p)
    >>> levels = refine_batches(s, plan_dense_refinement(s), [DenseBatch(p, y.astype(np.int8))])
    >>> levels[0].summary.n_keys, reliability_from_summary(s, refinement=levels).exactness.auc_bound
    (3, 0.0)
    """
    if not plans:
        return ()
    edges = np.asarray(summary.bin_edges, dtype=np.float64)
    layout = _layout(plans, edges)
    weighted = summary.weight_column is not None
    sums = _Sums(layout.n_slots, weighted)
    # With many slots, rows added in the file's order jump across arrays far larger than the
    # caches; a stable sort of each batch by the top 16 bits of its slots (a radix sort) makes
    # the additions local, and keeps each slot's rows in their order: the same sums, bit for bit.
    spare = max(layout.n_slots.bit_length() - 16, 0)
    sort_shift = spare if layout.n_slots > _SORTED_SLOTS else None

    def prepare(batch: DenseBatch) -> _Prepared:
        """The slots and terms of one batch's rows in a parent (in a worker thread)."""
        p = np.asarray(batch.score, dtype=np.float64)
        y = np.asarray(batch.label).astype(np.int8, copy=False)
        w = None if batch.weight is None else np.asarray(batch.weight, dtype=np.float64)
        if weighted and w is None:
            raise InputError("the batches carry no weights but the summary is weighted")
        pattern, low = _pattern(p)
        block = _blocks(layout, pattern, low)
        keep = block >= 0
        if not np.all(keep):
            block, p, y, pattern = block[keep], p[keep], y[keep], pattern[keep]
            w = None if w is None else w[keep]
        d = layout.depth[block]
        shift = 52 - layout.bits[block] - d
        offset = (pattern >> shift) & ((1 << d) - 1)
        b = bin_of(p, edges) - layout.bin_first[block]
        slot = np.asarray(layout.start[block] + (((b << d) + offset) << 1) + y, dtype=np.int64)
        bits = layout.bits[block] + d  # each row's grid: its level's
        if sort_shift is not None:  # rows by their slot's high bits: local additions
            order = np.argsort((slot >> sort_shift).astype(np.uint16), kind="stable")
            slot, p, y, bits = slot[order], p[order], y[order], bits[order]
            w = None if w is None else w[order]
        return slot, p, row_terms(p, y, w, eps=summary.eps, mantissa_bits=bits), w

    for prepared in in_order_ahead(batches, prepare, workers=2):
        sums.add(*prepared)
    return tuple(
        RefinementLevel(plan=plan, summary=_level_summary(summary, plan, i, layout, sums))
        for i, plan in enumerate(plans)
    )


def _level_summary(
    summary: ScoreSummary, plan: RefinementPlan, index: int, layout: _Layout, sums: _Sums
) -> ScoreSummary:
    """The occupied slots of one plan as a summary on its grid (summary_plan's derivation)."""
    m = plan.mantissa_bits
    blocks = np.flatnonzero(layout.plan == index)
    size = layout.bin_span[blocks] << (layout.depth[blocks] + 1)
    slot = np.concatenate(
        [np.arange(s, s + n) for s, n in zip(layout.start[blocks], size, strict=True)]
    )
    owner = np.repeat(blocks, size)
    used = sums.n_rows[slot] > 0
    slot, owner = slot[used], owner[used]
    local = slot - layout.start[owner]
    d = layout.depth[owner]
    label = (local & 1).astype(np.int8)
    offset = (local >> 1) & ((1 << d) - 1)
    bin_ = layout.bin_first[owner] + (local >> (d + 1))
    h = half_cell(m)
    cell = np.zeros(owner.size, dtype=np.int64)
    for bits in np.unique(layout.bits[owner]):
        at = layout.bits[owner] == bits
        parent, depth = layout.cell[owner][at], d[at]
        hb = half_cell(int(bits))
        lower = parent <= hb
        f_parent = np.where(lower, parent, 2 * hb - parent)
        f = np.where(f_parent == 0, 0, ((f_parent - 1) << depth) + 1 + offset[at])
        cell[at] = np.where(lower, f, 2 * h - f)
    # The canonical order (cell, bin, class; each key once by construction), applied to the
    # slots before any column is gathered: one copy of each column, never the rows'.
    order = np.lexsort((label, bin_, cell))
    slot, cell, bin_, label = slot[order], cell[order], bin_[order], label[order]
    del order, owner, local, d, offset
    n_rows, n_weighted, weight, weight_sq, weight_min = slot_weights(sums, slot)
    dev_cube, dev_fourth = sums.sums["dev_cube"][slot], sums.sums["dev_fourth"][slot]
    lo, hi = sums.score_min[slot], sums.score_max[slot]
    columns = format_columns(
        group=np.zeros(0, dtype=object),  # unused: one group
        cell=cell,
        bin_=bin_,
        label=label,
        n_rows=n_rows,
        n_rows_weighted=n_weighted,
        weight=weight,
        weight_sq=weight_sq,
        sums={
            "dev": sums.sums["dev"][slot],
            "dev_sq": sums.sums["dev_sq"][slot],
            "dev_cube": dev_cube,
            "dev_fourth": dev_fourth,
            "spieg_var": sums.sums["spieg_var"][slot],
        },
        weight_min=weight_min,
        score_min=np.where(np.isfinite(lo), lo, np.nan),
        score_max=np.where(np.isfinite(hi), hi, np.nan),
        mantissa_bits=m,
        eps=summary.eps,
    )
    del columns["group"]
    arrays = {
        name: np.asarray(v, dtype=_DTYPES.get(name, np.float64)) for name, v in columns.items()
    }
    # Built directly (not by ScoreSummary.from_columns, which copies every column three
    # times to sort and merge keys that are sorted and unique here).
    return ScoreSummary(
        mantissa_bits=m,
        bin_edges=summary.bin_edges,
        eps=summary.eps,
        score_column=summary.score_column,
        label_column=summary.label_column,
        weight_column=summary.weight_column,
        group_column=None,
        groups=(None,),
        group=np.zeros(n_rows.size, dtype=np.int32),
        weight_kind=summary.weight_kind,
        positive_label=summary.positive_label,
        **cast("dict[str, Any]", arrays),
    )


#: dtypes of the summary's non-float columns
_DTYPES: dict[str, type[np.generic]] = {
    "cell": np.int64,
    "bin": np.int32,
    "label": np.int8,
    "n_rows": np.int64,
    "n_rows_weighted": np.int64,
}
