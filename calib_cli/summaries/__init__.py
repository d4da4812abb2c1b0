"""Summaries that merge: the sufficient statistics of many rows, for out-of-core reliability.

Every figure of ``calib reliability`` is a function of a small *summary* of the rows, built
once per file (or day, or partition) in memory bounded by the grid and the number of groups,
never by the rows; summaries of different files merge into the summary of their union. The
model is Apache DataSketches and t-digest: a documented, versioned state, an associative
merge, a stated error bound, tests of merge order.

The state (schema version 1)
----------------------------
One row per occupied key ``(group, cell, bin, label)`` of one score column:

=====================  =======  ======================================================
column                 type     meaning (sums over the rows of the key; p score, w weight,
                                y label, q = clip(p, eps, 1 - eps))
=====================  =======  ======================================================
``group``              string   value of the ``--by`` column (null: missing / no column)
``cell``               int64    grid cell of p (:mod:`calib_cli.summaries.grid`)
``bin``                int32    reliability bin of p for the summary's ``bin_edges``
``label``              int8     0 or 1
``n_rows``             int64    rows
``n_rows_weighted``    int64    rows with w > 0
``weight``             float64  sum w
``weight_sq``          float64  sum w^2 (for importance-weight variances)
``score_sum``          float64  sum w p
``score_sq_sum``       float64  sum w p^2
``complement_sum``     float64  sum w (1 - p)      (exact near 1, unlike W - sum w p)
``complement_sq_sum``  float64  sum w (1 - p)^2
``log_loss_sum``       float64  sum -w log q (y = 1), -w log1p(-q) (y = 0)
``logit_sum``          float64  sum w logit(q)
``spiegelhalter_num``  float64  sum w (y - p)(1 - 2p)
``spiegelhalter_var``  float64  sum w (1 - 2p)^2 p (1 - p)
``weight_min``         float64  min w over rows with w > 0 (null if none)
``score_min``          float64  min p over rows with w > 0 (null if none)
``score_max``          float64  max p over rows with w > 0 (null if none)
=====================  =======  ======================================================

Metadata (JSON; in a Parquet file the key-value metadata ``calib.summary``):
``kind = "calib.score_summary"``, ``schema_version = 1``, ``grid = {"kind":
"relative-tails", "mantissa_bits": m}``, ``bin_edges``, ``eps``, ``score_column``,
``label_column``, ``weight_column``, ``group_column``, ``weight_kind`` (``frequency`` or
``importance``) and ``positive_label`` (the label text counted as positive, trimmed; null for
the default rule, 1 or true). The last two were added within version 1: a file without them
reads as ``frequency`` and null. Summaries merge only when their metadata agree. A
file a SQL engine wrote from no rows (an empty table or partition) holds no metadata; readers
of several files leave it out. The JSON form is the metadata plus
``"groups"`` and ``"columns": {name: [values...]}`` (:meth:`ScoreSummary.to_json`). Rows may be
stored in any order and a key may repeat: readers merge repeated keys, so concatenating the
rows of summaries with equal metadata *is* their merge (a SQL ``UNION ALL`` then ``GROUP BY``).

Why these terms: the per-class sums are polynomials and logs of p evaluated per row, so the
log loss, Brier score, Spiegelhalter's z, the calibration in the large, and the bin table, ECE,
MCE, Brier decomposition and debiased ECE at the summary's bin edges are *exact* (to
floating-point summation). The Spiegelhalter and complement terms are stored as such, not
derived from power sums, which would cancel catastrophically near p = 1/2 and p = 1. Min and
max make a cell of ties (``score_min == score_max``) exact for AUC, and classes that do not
overlap inside a cell exact too; everything else that depends on the order of scores inside
a cell (AUC, average precision, quantile edges, the logistic fits) carries a stated bound
(:mod:`calib_cli.summaries.figures`) and can be made exact for chosen cells by a second pass
over their rows (:func:`cells_to_resolve`, :class:`ResolvedCells`).

The grid is fixed (the same everywhere), so summaries merge without re-binning, and relative
on both tails (``2**-m`` of the distance to 0 or 1), so rare-event scores near 0 keep their
resolution; ``m = 12`` by default. See :mod:`calib_cli.summaries.grid` for the bit-level and
arithmetic definitions (SQL engines compute the same key).

At 1e9 rows, on paper: the size is bounded by ``groups x occupied (cell, bin) keys x 2``
rows of 19 columns (about 140 bytes each): a continuous score between 1e-6 and 1 - 1e-6 fills
at most about 155 000 cells (2 x 19 binades x 4096), so at most about 310 000 rows or 42 MB
per group, whatever the number of rows; typical models fill far fewer. Merging P partition
summaries costs one sort of their stored keys, :math:`O(K \\log K)` with K the stored keys in
all, independent of the rows.

Layout: :mod:`~calib_cli.summaries.grid` (cell and bin keys), :mod:`~calib_cli.summaries.summary`
(the type, merge, file forms), :mod:`~calib_cli.summaries.figures` (the figures and their
bounds), :mod:`~calib_cli.summaries.scan` (the Polars streaming computation; the only module
here that imports Polars, imported only on demand).
"""

from __future__ import annotations

from calib_cli.summaries.figures import (
    Exactness,
    RefinementLevel,
    RefinementPlan,
    ResolvedCells,
    SummaryReliability,
    cells_to_resolve,
    plan_refinement,
    refine_arrays,
    reliability_from_summary,
    resolved_cells,
    summarize_refinement,
)
from calib_cli.summaries.grid import bin_index, cell_bounds, cell_index, parent_cell
from calib_cli.summaries.summary import (
    SCHEMA_VERSION,
    ScoreSummary,
    merge_summaries,
    summarize_arrays,
)

__all__ = [
    "SCHEMA_VERSION",
    "Exactness",
    "RefinementLevel",
    "RefinementPlan",
    "ResolvedCells",
    "ScoreSummary",
    "SummaryReliability",
    "bin_index",
    "cell_bounds",
    "cell_index",
    "cells_to_resolve",
    "merge_summaries",
    "parent_cell",
    "plan_refinement",
    "refine_arrays",
    "reliability_from_summary",
    "resolved_cells",
    "summarize_arrays",
    "summarize_refinement",
]
