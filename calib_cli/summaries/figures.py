"""Every figure of ``calib reliability`` from a :class:`ScoreSummary`, with its stated bound.

The figures are those of :func:`calib_cli.core.metrics.reliability_summary` (same fields, same
JSON keys, same formulas: this module feeds that module's helpers with sums), plus an
:class:`Exactness` record that says, per figure, whether it is exact and otherwise how far it
can be from the in-memory value on the same rows.

Atoms. The summary's rows of one group are grouped into *atoms*, one per ``(cell, bin)``
key, ordered by score: every score of an atom lies in ``[lo, hi]`` (the smallest and largest
score with a positive weight) and atoms do not overlap. An atom with ``lo == hi`` is a group
of tied scores, exactly what the in-memory code sees. A *resolved* atom (:class:`ResolvedCells`,
the rows of chosen cells brought back by a second pass) is replaced by one atom per distinct
score, so everything computed from it is exact.

Exact (to floating-point summation, about ``1e-15`` relative): ``n``, ``weight_total``,
``positives``, ``base_rate``, ``mean_score``, calibration in the large, ``log_loss``,
``brier``, Spiegelhalter's z; and, when no atom straddles a bin edge (always with the
summary's own ``bin_edges``; with other uniform edges when they fall on cell boundaries), the
bin table, ``ece``, ``mce``, the Brier decomposition and ``ece_debiased``.

Bounded:

* AUC: pairs in different atoms are ordered exactly; pairs within an atom count one half
  unless the atom is all ties (then that *is* exact) or its classes do not overlap (then they
  count 1 or 0, exactly). So :math:`|\\mathrm{AUC} - \\widehat{\\mathrm{AUC}}| \\le
  \\sum_a w^+_a w^-_a / (2 W^+ W^-)` over the remaining atoms, ``auc_bound`` (``gini_bound``
  is twice it). :func:`cells_to_resolve` lists the atoms to resolve, largest terms first,
  until the bound is below a tolerance (``1e-6`` by default).
* Average precision: an atom is one threshold (its rows tied); resolving it into its rows
  can only move the precision at which its positives are recalled within
  :math:`[T/(T + F + n^-_a),\\ (T + w^+_a)/(T + w^+_a + F)]` (:math:`T, F` the positive and
  negative weight of the atoms above it), so ``average_precision_bound`` is the sum over
  atoms that are not all ties of :math:`w^+_a / W^+` times that width.
* Other bin edges (another ``n_bins``, or ``quantile`` edges, and the 10 equal-mass
  Hosmer-Lemeshow groups): an atom on both sides of an edge is put in the bin of its mean
  score. Quantile edges are NumPy's ``linear`` weighted percentiles, exact when the two rows
  interpolated between are known (a tied atom, or the last row of one atom and the first of
  the next, which are its ``hi`` and the next atom's ``lo``); otherwise the edge is
  interpolated inside the atom and that atom straddles. ``straddle_weight`` is the weight of
  straddling atoms (0: exact); ``ece_bound`` is :math:`2 \\sum_a \\sum_{i \\in a} w_i |y_i -
  p_i| / W` over them (moving a row between bins moves two bins' gaps by at most its own).
  Resolving the straddling atoms (listed by :func:`cells_to_resolve`) makes these exact.
* Calibration intercept and slope: the logistic fits run on two points per atom, the
  positives and the negatives at their mean logit (``logit_sum / weight``). The score
  equations' linear terms are exact; :math:`\\sum w\\,\\mathrm{expit}(a + b x)` is replaced by
  its value at the mean, an error of order :math:`\\tfrac18 b^2 \\operatorname{Var}_a(x)`
  per unit weight, and an atom's logits span at most :math:`2^{-m+1}` (about ``5e-4`` for
  ``m = 12``): measured relative errors are below ``1e-7``. Exact for resolved atoms.
* DeLong's interval uses the atoms as tie groups (centred on the refined AUC); the ECE
  bootstrap is the Poisson bootstrap of :func:`~calib_cli.core.metrics.ece_bootstrap` over
  (bin, class) cells with the normal limit for every cell (``exact_limit=0``): the same
  draws, up to rounding, as that function with ``exact_limit=0`` on the rows, made into
  intervals by the same rule (``metrics._ece_intervals``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from calib_cli.core import elementary as el
from calib_cli.core.metrics import (
    NAN,
    NAN_PAIR,
    ReliabilitySummary,
    _average_precision,
    _BinStats,
    _calibration_fit,
    _citl,
    _debiased_sq,
    _debiased_sq_from_sums,
    _delong,
    _draw_importance_cells,
    _ece_from_sums,
    _ece_intervals,
    _frequency_replicates,
    _hosmer_lemeshow,
    _ImportanceCells,
    _lerp,
    _mce,
    _murphy,
    _replicate_figures,
    _sqrt_clipped,
    _Squares,
    _table,
    _z_value,
    count_unit_of,
)
from calib_cli.core.special import special
from calib_cli.errors import InputError
from calib_cli.summaries.grid import (
    MAX_MANTISSA_BITS,
    bin_index,
    cell_bounds,
    cell_index,
    parent_cell,
)
from calib_cli.summaries.subcells import SubCells
from calib_cli.summaries.summary import ScoreSummary, check_weight_kind, summarize_arrays
from calib_cli.types import BinStrategy, BoolArray, FloatArray, IntArray, WeightKind, choices

__all__ = [
    "DEFAULT_AUC_TOLERANCE",
    "DEFAULT_MAX_KEYS",
    "DEFAULT_MAX_LEVELS",
    "Exactness",
    "RefinementLevel",
    "RefinementPlan",
    "ResolvedCells",
    "SummaryReliability",
    "cells_to_resolve",
    "plan_refinement",
    "refine_arrays",
    "reliability_from_summary",
    "resolved_cells",
    "summarize_refinement",
]

DEFAULT_AUC_TOLERANCE = 1e-6


@dataclass(frozen=True)
class Exactness:
    """How far the figures from a summary can be from the in-memory figures on its rows.

    Attributes
    ----------
    mantissa_bits : int
        The grid (cells of relative width ``2**-mantissa_bits``).
    auc_bound, gini_bound, average_precision_bound : float
        Certified bounds on the absolute error of ``auc``, ``gini`` and
        ``average_precision`` (0: exact).
    bins_exact : bool
        Whether the bin table, ECE, MCE, Brier decomposition and debiased ECE are exact (no
        atom straddles a bin edge and every quantile edge is known).
    straddle_weight : float
        Weight of the rows whose bin is uncertain.
    ece_bound : float
        Certified bound on the absolute error of ``ece`` (0 when ``bins_exact``).
    hosmer_lemeshow_exact : bool
        Whether the Hosmer-Lemeshow groups are exact.
    calibration_fit_exact : bool
        Whether the intercept/slope fits ran on exact scores (every atom tied or resolved)
        rather than on per-atom mean logits.
    resolved_cells : int
        The summary's atoms replaced by their rows or by finer cells (later passes, or for the
        ranking figures the sub-cells of the same pass).
    unresolved_atoms : int
        Atoms with more than one distinct score left as they are.
    refinement_levels : int
        Refinement levels applied (:class:`RefinementLevel`), one per finer grid: several can
        come from one read of the rows (the dense pass fills every level in the same read).
    finest_mantissa_bits : int
        The finest grid among them and the sub-cells used (``mantissa_bits`` when none).
    """

    mantissa_bits: int
    auc_bound: float
    gini_bound: float
    average_precision_bound: float
    bins_exact: bool
    straddle_weight: float
    ece_bound: float
    hosmer_lemeshow_exact: bool
    calibration_fit_exact: bool
    resolved_cells: int
    unresolved_atoms: int
    refinement_levels: int = 0
    finest_mantissa_bits: int = 0


@dataclass(frozen=True)
class SummaryReliability:
    """The figures of ``calib reliability`` from a summary, and how exact each one is.

    The proposed JSON report is the keys of ``reliability`` plus ``"exactness"``: the fields
    of :class:`Exactness`.
    """

    reliability: ReliabilitySummary
    exactness: Exactness


@dataclass(frozen=True)
class ResolvedCells:
    """Rows of chosen atoms brought back by a second pass, grouped by distinct score and class.

    Each entry is one (bin, cell, score, label) with its total weight and number of rows;
    every atom named must be complete (all its rows). Build it with :func:`resolved_cells`
    from rows, or from the second streaming pass (:func:`calib_cli.summaries.scan.rows_in_cells`).
    """

    bin: IntArray
    cell: IntArray
    score: FloatArray
    label: npt.NDArray[np.int8]
    weight: FloatArray
    n_rows: IntArray


def resolved_cells(
    bins: npt.ArrayLike,
    cells: npt.ArrayLike,
    y_prob: npt.ArrayLike,
    y_true: npt.ArrayLike,
    *,
    sample_weight: npt.ArrayLike | None = None,
) -> ResolvedCells:
    """Group rows of resolved atoms by (bin, cell, score, label): the refinement input.

    Examples
    --------
    >>> r = resolved_cells([1, 1, 1], [7, 7, 7], [0.1, 0.1, 0.2], [0, 0, 1])
    >>> r.score.tolist(), r.weight.tolist(), r.n_rows.tolist()
    ([0.1, 0.2], [2.0, 1.0], [2, 1])
    """
    b = np.asarray(bins, dtype=np.int64)
    c = np.asarray(cells, dtype=np.int64)
    p = np.asarray(y_prob, dtype=np.float64)
    y = np.asarray(y_true).astype(np.int8)
    w = (
        np.ones(p.shape, dtype=np.float64)
        if sample_weight is None
        else np.asarray(sample_weight, dtype=np.float64)
    )
    order = np.lexsort((y, p, c, b))
    b, c, p, y, w = b[order], c[order], p[order], y[order], w[order]
    if p.size == 0:
        z = np.zeros(0)
        return ResolvedCells(
            z.astype(np.int64), z.astype(np.int64), z, z.astype(np.int8), z, z.astype(np.int64)
        )
    change = np.concatenate(
        ([True], (b[1:] != b[:-1]) | (c[1:] != c[:-1]) | (p[1:] != p[:-1]) | (y[1:] != y[:-1]))
    )
    starts = np.flatnonzero(change)
    return ResolvedCells(
        bin=b[starts],
        cell=c[starts],
        score=p[starts],
        label=y[starts],
        weight=np.add.reduceat(w, starts),
        n_rows=np.diff(np.append(starts, p.size)).astype(np.int64),
    )


# ---------------------------------------------------------------------------------------------
# Atoms
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Atoms:
    """Per atom (ascending score), per class: weight and sums; the score ranges."""

    cell: IntArray
    bin: IntArray
    lo: FloatArray
    hi: FloatArray
    lo_pos: FloatArray
    hi_pos: FloatArray
    lo_neg: FloatArray
    hi_neg: FloatArray
    pos: FloatArray
    neg: FloatArray
    n_rows: IntArray
    score_pos: FloatArray
    score_neg: FloatArray
    score_sq_pos: FloatArray
    score_sq_neg: FloatArray
    complement_pos: FloatArray
    complement_neg: FloatArray
    logit_pos: FloatArray
    logit_neg: FloatArray
    square_pos: FloatArray  # sums of squared weights (importance weights' variances)
    square_neg: FloatArray
    resolved: BoolArray
    bits: IntArray  # the grid the atom is a cell of (52 for a resolved score)
    own_cell: IntArray  # its cell on that grid (``cell`` is the cell on the summary's grid)

    @property
    def weight(self) -> FloatArray:
        return self.pos + self.neg

    @property
    def tied(self) -> BoolArray:
        """All rows of the atom share one score (or it carries no weight)."""
        return np.asarray(~(self.lo < self.hi))


_ATOM_FIELDS = tuple(_Atoms.__dataclass_fields__)


def _atoms_of(summary: ScoreSummary) -> _Atoms:
    """Pivot the rows of a one-group summary (sorted by cell, bin, label) into atoms."""
    n = summary.n_keys
    cell, b, label = summary.cell, summary.bin.astype(np.int64), summary.label
    change = np.ones(n, dtype=bool)
    change[1:] = (cell[1:] != cell[:-1]) | (b[1:] != b[:-1])
    atom = np.cumsum(change) - 1
    k = int(atom[-1]) + 1 if n else 0
    pos_rows, neg_rows = label == 1, label == 0

    def split(values: FloatArray, fill: float) -> tuple[FloatArray, FloatArray]:
        pos = np.full(k, fill)
        neg = np.full(k, fill)
        pos[atom[pos_rows]] = values[pos_rows]
        neg[atom[neg_rows]] = values[neg_rows]
        return pos, neg

    pos, neg = split(summary.weight, 0.0)
    lo_pos, lo_neg = split(summary.score_min, NAN)
    hi_pos, hi_neg = split(summary.score_max, NAN)
    score_pos, score_neg = split(summary.score_sum, 0.0)
    sq_pos, sq_neg = split(summary.score_sq_sum, 0.0)
    comp_pos, comp_neg = split(summary.complement_sum, 0.0)
    logit_pos, logit_neg = split(summary.logit_sum, 0.0)
    square_pos, square_neg = split(summary.weight_sq, 0.0)
    rows = np.zeros(k, dtype=np.int64)
    np.add.at(rows, atom, summary.n_rows)
    lo, hi = np.fmin(lo_pos, lo_neg), np.fmax(hi_pos, hi_neg)
    # Atoms of zero-weight rows only: place them at a score of their cell and bin, so that
    # their rows are counted in the right bin.
    empty = np.isnan(lo)
    if np.any(empty):
        edges = np.asarray(summary.bin_edges)
        first, last = cell_bounds(cell[change][empty], mantissa_bits=summary.mantissa_bits)
        b_empty = b[change][empty]
        anchor = np.clip(
            0.5 * (first + last), np.nextafter(edges[b_empty], 2.0), edges[b_empty + 1]
        )
        anchor = np.clip(anchor, first, last)
        lo[empty] = anchor
        hi[empty] = anchor
    return _Atoms(
        cell=cell[change],
        bin=b[change],
        lo=lo,
        hi=hi,
        lo_pos=lo_pos,
        hi_pos=hi_pos,
        lo_neg=lo_neg,
        hi_neg=hi_neg,
        pos=pos,
        neg=neg,
        n_rows=rows,
        score_pos=score_pos,
        score_neg=score_neg,
        score_sq_pos=sq_pos,
        score_sq_neg=sq_neg,
        complement_pos=comp_pos,
        complement_neg=comp_neg,
        logit_pos=logit_pos,
        logit_neg=logit_neg,
        square_pos=square_pos,
        square_neg=square_neg,
        resolved=np.zeros(k, dtype=bool),
        bits=np.full(k, summary.mantissa_bits, dtype=np.int64),
        own_cell=cell[change].copy(),
    )


def _resolve(atoms: _Atoms, resolved: ResolvedCells, summary: ScoreSummary) -> _Atoms:
    """Replace the atoms named in ``resolved`` by one atom per distinct score."""
    if resolved.score.size == 0:
        return atoms
    p = resolved.score
    if np.any(cell_index(p, mantissa_bits=summary.mantissa_bits) != resolved.cell) or np.any(
        bin_index(p, summary.bin_edges) != resolved.bin
    ):
        raise InputError("resolved rows lie outside the cells and bins they are listed under")
    key = resolved.cell * (len(summary.bin_edges) + 1) + resolved.bin
    atom_key = atoms.cell * (len(summary.bin_edges) + 1) + atoms.bin
    targets = np.unique(key)
    where = np.searchsorted(atom_key, targets)
    found = (where < atom_key.size) & (atom_key[np.minimum(where, atom_key.size - 1)] == targets)
    if not np.all(found):
        raise InputError("resolved rows name a cell the summary does not hold")
    # Every resolved atom must come back whole: its class weights must match the summary's.
    index = np.searchsorted(targets, key)
    y = resolved.label == 1
    got_pos = np.bincount(index, weights=np.where(y, resolved.weight, 0.0), minlength=targets.size)
    got_neg = np.bincount(index, weights=np.where(y, 0.0, resolved.weight), minlength=targets.size)
    want_pos, want_neg = atoms.pos[where], atoms.neg[where]
    tol = 1e-9 * (want_pos + want_neg) + 1e-300
    if np.any(np.abs(got_pos - want_pos) > tol) or np.any(np.abs(got_neg - want_neg) > tol):
        raise InputError("resolved rows do not add up to the summary's weights in their cells")
    # One atom per (cell, bin, score): the two classes of a score side by side.
    order = np.lexsort((p, key))
    sk, sp = key[order], p[order]
    change = np.concatenate(([True], (sk[1:] != sk[:-1]) | (sp[1:] != sp[:-1])))
    sub = np.cumsum(change) - 1
    k = int(sub[-1]) + 1
    w = resolved.weight[order]
    is_pos = y[order]
    pos = np.bincount(sub, weights=np.where(is_pos, w, 0.0), minlength=k).astype(np.float64)
    neg = np.bincount(sub, weights=np.where(is_pos, 0.0, w), minlength=k).astype(np.float64)
    # Resolved rows come back without their squared weights: each class of a resolved atom
    # keeps its summary's sum w^2 / sum w per unit of weight (exact when the weights are
    # equal within the atom's class, as after sampling at one rate per class).
    ratio_pos = np.divide(
        atoms.square_pos[where], want_pos, out=np.ones(want_pos.size), where=want_pos > 0.0
    )
    ratio_neg = np.divide(
        atoms.square_neg[where], want_neg, out=np.ones(want_neg.size), where=want_neg > 0.0
    )
    ratio = np.where(is_pos, ratio_pos[index[order]], ratio_neg[index[order]])
    sq = w * ratio
    sq_pos = np.bincount(sub, weights=np.where(is_pos, sq, 0.0), minlength=k).astype(np.float64)
    sq_neg = np.bincount(sub, weights=np.where(is_pos, 0.0, sq), minlength=k).astype(np.float64)
    rows = np.bincount(sub, weights=resolved.n_rows[order], minlength=k).astype(np.int64)
    v = sp[change]
    q = np.clip(v, summary.eps, 1.0 - summary.eps)
    new = _Atoms(
        cell=resolved.cell[order][change],
        bin=resolved.bin[order][change],
        lo=v,
        hi=v,
        lo_pos=np.where(pos > 0.0, v, NAN),
        hi_pos=np.where(pos > 0.0, v, NAN),
        lo_neg=np.where(neg > 0.0, v, NAN),
        hi_neg=np.where(neg > 0.0, v, NAN),
        pos=pos,
        neg=neg,
        n_rows=rows,
        score_pos=pos * v,
        score_neg=neg * v,
        score_sq_pos=pos * v * v,
        score_sq_neg=neg * v * v,
        complement_pos=pos * (1.0 - v),
        complement_neg=neg * (1.0 - v),
        logit_pos=pos * el.log_odds(q),
        logit_neg=neg * el.log_odds(q),
        square_pos=sq_pos,
        square_neg=sq_neg,
        resolved=np.ones(k, dtype=bool),
        bits=np.full(k, MAX_MANTISSA_BITS, dtype=np.int64),
        own_cell=cell_index(v, mantissa_bits=MAX_MANTISSA_BITS),
    )
    keep = np.ones(atom_key.size, dtype=bool)
    keep[where] = False
    merged = {f: np.concatenate((getattr(atoms, f)[keep], getattr(new, f))) for f in _ATOM_FIELDS}
    order = np.lexsort((merged["lo"], merged["bin"], merged["cell"]))
    return _Atoms(**{f: v[order] for f, v in merged.items()})


# ---------------------------------------------------------------------------------------------
# Refinement: finer grids over chosen cells
# ---------------------------------------------------------------------------------------------

#: Default cap on the keys (fine cell, bin, class) one refinement pass may produce.
DEFAULT_MAX_KEYS = 1 << 21
#: Default cap on the refinement passes.
DEFAULT_MAX_LEVELS = 6
#: Fewest bits a pass adds (a pass costs a scan; a few more keys per cell cost little).
MIN_STEP_BITS = 3


@dataclass(frozen=True)
class RefinementPlan:
    """What the next refinement pass summarises: the rows of ``parents``, on a finer grid.

    Attributes
    ----------
    mantissa_bits : int
        The grid of the pass, finer than every parent's (the grids nest,
        :func:`~calib_cli.summaries.grid.parent_cell`).
    parents : tuple of (int, ndarray of int64)
        ``(bits, cells)`` pairs: a row belongs to the pass when its cell on the ``bits`` grid
        is one of ``cells``, whatever its bin. The parents are disjoint score intervals.
    max_keys : int
        The most keys (fine cell, bin, class) the pass can produce,
        :math:`\\sum_a \\min(n_a, 2 \\cdot 2^{m' - b_a})` over the atoms ``a`` of the parents
        (:math:`n_a` rows, grid :math:`b_a`): the memory of the pass, never the rows'.
    auc_bound : float
        The AUC bound before the pass.
    """

    mantissa_bits: int
    parents: tuple[tuple[int, IntArray], ...]
    max_keys: int
    auc_bound: float


@dataclass(frozen=True)
class RefinementLevel:
    """One refinement pass: its plan and the summary, on the plan's grid, of its parents' rows.

    ``summary`` holds exactly the rows whose cell is a parent of ``plan`` (one group;
    :func:`summarize_refinement` in memory, :func:`calib_cli.summaries.scan.refine_dense_lazy`
    streaming); :func:`reliability_from_summary` checks that its weights and row counts add
    up to the parents' before using it.
    """

    plan: RefinementPlan
    summary: ScoreSummary


def _check_level(base: ScoreSummary, level: RefinementLevel) -> None:
    fine, plan = level.summary, level.plan
    for name in ("bin_edges", "eps", "score_column", "label_column", "weight_column"):
        a, b = getattr(base, name), getattr(fine, name)
        if a != b:
            raise InputError(f"the refinement has another {name} than the summary: {b!r}, {a!r}")
    if fine.mantissa_bits != plan.mantissa_bits:
        raise InputError(
            f"the refinement's grid has {fine.mantissa_bits} bits, its plan {plan.mantissa_bits}"
        )
    if len(fine.groups) > 1:
        raise InputError("a refinement summary must hold one group")
    for bits, _ in plan.parents:
        if not base.mantissa_bits <= bits < plan.mantissa_bits:
            raise InputError(
                f"a refinement parent on {bits} bits does not lie between the summary's grid "
                f"({base.mantissa_bits}) and the refinement's ({plan.mantissa_bits})"
            )


def _totals(cells: IntArray, keys: IntArray, *values: npt.ArrayLike) -> list[FloatArray]:
    index = np.searchsorted(keys, cells)
    return [
        np.bincount(index, weights=np.asarray(v, dtype=np.float64), minlength=keys.size).astype(
            np.float64
        )
        for v in values
    ]


def _apply_level(atoms: _Atoms, level: RefinementLevel, base: ScoreSummary) -> _Atoms:
    """Replace the atoms of the level's parent cells by the level's finer atoms."""
    _check_level(base, level)
    plan = level.plan
    fine = _atoms_of(level.summary)
    covered = np.zeros(atoms.pos.size, dtype=bool)
    owned = np.zeros(fine.pos.size, dtype=bool)
    for bits, parent_cells in plan.parents:
        keys = np.unique(np.asarray(parent_cells, dtype=np.int64))
        mine = (atoms.bits == bits) & np.isin(atoms.own_cell, keys)
        up = parent_cell(fine.own_cell, from_bits=plan.mantissa_bits, to_bits=bits)
        theirs = np.isin(up, keys)
        if np.any(owned & theirs):
            raise InputError("the refinement's parent cells overlap")
        owned |= theirs
        covered |= mine
        want = _totals(atoms.own_cell[mine], keys, atoms.pos[mine], atoms.neg[mine])
        got = _totals(up[theirs], keys, fine.pos[theirs], fine.neg[theirs])
        rows_want = _totals(atoms.own_cell[mine], keys, atoms.n_rows[mine])[0]
        rows_got = _totals(up[theirs], keys, fine.n_rows[theirs])[0]
        tol = 1e-9 * (want[0] + want[1]) + 1e-300
        if (
            np.any(np.abs(got[0] - want[0]) > tol)
            or np.any(np.abs(got[1] - want[1]) > tol)
            or np.any(rows_got != rows_want)
        ):
            raise InputError(
                "the refinement's rows do not add up to the summary's in the cells it refines"
            )
    if not np.all(owned):
        raise InputError("the refinement holds rows outside the cells it refines")
    base_cell = parent_cell(fine.own_cell, from_bits=plan.mantissa_bits, to_bits=base.mantissa_bits)
    keep = ~covered
    merged = {
        f: np.concatenate((getattr(atoms, f)[keep], base_cell if f == "cell" else getattr(fine, f)))
        for f in _ATOM_FIELDS
    }
    order = np.lexsort((merged["lo"], merged["bin"], merged["cell"]))
    return _Atoms(**{f: v[order] for f, v in merged.items()})


def _ranking_atoms(atoms: _Atoms, sub: SubCells, base: ScoreSummary) -> _Atoms:
    """The atoms with those whose pairs are ambiguous (:func:`_ambiguous`) replaced by their
    sub-cells (one atom per sub-cell and bin): for the ranking figures only (AUC, DeLong,
    average precision and their bounds). The new atoms carry weights, squared weights, rows
    and score ranges (the sub-cell's bounds within the atom's; one score: tied); their other
    sums are 0 (and ``resolved`` False)."""
    if sub.base_bits != base.mantissa_bits:
        raise InputError(
            f"the sub-cells refine a {sub.base_bits}-bit grid, the summary has "
            f"{base.mantissa_bits} bits"
        )
    if len(sub.groups) > 1:
        raise InputError("the sub-cells must hold one group, as the summary")
    need = _ambiguous(atoms) & (atoms.bits == base.mantissa_bits)
    if not np.any(need):
        return atoms
    stride = len(base.bin_edges) + 1
    targets = (atoms.cell * stride + atoms.bin)[need]  # ascending: atoms are in (cell, bin) order
    key = parent_cell(sub.cell, from_bits=sub.mantissa_bits, to_bits=base.mantissa_bits)
    key *= stride
    key += sub.bin
    at = np.minimum(np.searchsorted(targets, key), targets.size - 1)
    take = targets[at] == key
    del key
    every = bool(np.all(take))  # the usual case: no copies of the sub-cells

    def taken(values: npt.NDArray[Any]) -> npt.NDArray[Any]:
        return values if every else values[take]

    fine, fbin = taken(sub.cell), taken(sub.bin).astype(np.int64)
    owner = np.flatnonzero(need)[taken(at)]
    del at
    # one atom per (sub-cell, bin): the sub-cells are in (cell, bin, label) order already
    change = np.ones(fine.size, dtype=bool)
    change[1:] = (fine[1:] != fine[:-1]) | (fbin[1:] != fbin[:-1])
    slot = np.cumsum(change) - 1  # the atom, then its class: both in one bincount
    k = int(slot[-1]) + 1 if slot.size else 0
    slot <<= 1
    slot += taken(sub.label)

    def per_class(slot: IntArray, values: npt.NDArray[Any]) -> tuple[FloatArray, FloatArray]:
        sums = np.bincount(slot, weights=taken(values), minlength=2 * k)
        return np.array(sums[1::2], dtype=np.float64), np.array(sums[0::2], dtype=np.float64)

    pos, neg = per_class(slot, sub.weight)
    sq_pos, sq_neg = per_class(slot, sub.weight_sq)
    rows_pos, rows_neg = per_class(slot, sub.n_rows)
    n_rows = (rows_pos + rows_neg).astype(np.int64)
    del slot, rows_pos, rows_neg
    new_owner, a_fine, a_bin = owner[change], fine[change], fbin[change]
    # Only atoms whose sub-cells give back their weights and rows are replaced (a pooled
    # atom can hold both classes where no group's key did: its sub-cells were not kept).
    got = [np.bincount(new_owner, weights=v, minlength=atoms.pos.size) for v in (pos, neg)]
    got_rows = np.bincount(new_owner, weights=n_rows, minlength=atoms.pos.size)
    tol = 1e-9 * (atoms.pos + atoms.neg) + 1e-300
    need &= (
        (np.abs(got[0] - atoms.pos) <= tol)
        & (np.abs(got[1] - atoms.neg) <= tol)
        & (got_rows == atoms.n_rows)
    )
    if not np.any(need):
        return atoms
    mine = need[new_owner]
    if not np.all(mine):
        new_owner, a_fine, a_bin = new_owner[mine], a_fine[mine], a_bin[mine]
        pos, neg, sq_pos, sq_neg = pos[mine], neg[mine], sq_pos[mine], sq_neg[mine]
        n_rows = n_rows[mine]
        k = int(new_owner.size)
    if np.any(new_owner[1:] < new_owner[:-1]):
        raise InputError("the sub-cells are not in the order of their cells")
    first, last = cell_bounds(a_fine, mantissa_bits=sub.mantissa_bits)
    lo = np.maximum(first, atoms.lo[new_owner])
    hi = np.minimum(last, atoms.hi[new_owner])
    # In place of each replaced atom, its sub-cells in order (no sort): atom i takes
    # count[i] places from start[i].
    count = np.where(need, 0, 1)
    count[need] = np.bincount(new_owner, minlength=atoms.pos.size)[need]
    start = np.cumsum(count) - count
    total = int(np.sum(count))
    kept = np.flatnonzero(~need)
    place_kept = start[kept]
    # each new atom's place among its owner's (new_owner ascending: runs)
    run_start = np.flatnonzero(np.diff(new_owner, prepend=-1))
    rank_in_owner = np.arange(k) - np.repeat(run_start, np.diff(run_start, append=k))
    place_new = start[new_owner] + rank_in_owner

    def placed(old: npt.NDArray[Any], values: npt.NDArray[Any]) -> npt.NDArray[Any]:
        out = np.empty(total, dtype=np.result_type(old, values))
        out[place_kept] = old[kept]
        out[place_new] = values
        return out

    def side(old: FloatArray, present: BoolArray, values: FloatArray) -> FloatArray:
        return placed(old, np.where(present, values, NAN))

    zeros = np.zeros(total)  # the sums the ranking figures never read, shared
    return _Atoms(
        cell=placed(atoms.cell, atoms.cell[new_owner]),
        bin=placed(atoms.bin, a_bin),
        lo=placed(atoms.lo, lo),
        hi=placed(atoms.hi, hi),
        lo_pos=side(atoms.lo_pos, pos > 0.0, lo),
        hi_pos=side(atoms.hi_pos, pos > 0.0, hi),
        lo_neg=side(atoms.lo_neg, neg > 0.0, lo),
        hi_neg=side(atoms.hi_neg, neg > 0.0, hi),
        pos=placed(atoms.pos, pos),
        neg=placed(atoms.neg, neg),
        n_rows=placed(atoms.n_rows, n_rows),
        score_pos=zeros,
        score_neg=zeros,
        score_sq_pos=zeros,
        score_sq_neg=zeros,
        complement_pos=zeros,
        complement_neg=zeros,
        logit_pos=zeros,
        logit_neg=zeros,
        square_pos=placed(atoms.square_pos, sq_pos),
        square_neg=placed(atoms.square_neg, sq_neg),
        resolved=np.zeros(total, dtype=bool),
        bits=placed(atoms.bits, np.full(k, sub.mantissa_bits, dtype=np.int64)),
        own_cell=placed(atoms.own_cell, a_fine),
    )


def _whole_cells(atoms: _Atoms, need: BoolArray) -> BoolArray:
    """``need`` grown to every atom (every bin) of the cells it touches."""
    out = need.copy()
    for bits in np.unique(atoms.bits[need]):
        same = atoms.bits == bits
        out |= same & np.isin(atoms.own_cell, atoms.own_cell[need & same])
    return out


def _pass_bits(
    atoms: _Atoms, need: BoolArray, terms: FloatArray, goal: float, max_keys: int, max_bits: int
) -> tuple[int, int]:
    """The grid of the next pass and its key bound: the coarsest grid whose expected AUC
    terms (each halving per added bit) meet ``goal``, at least ``MIN_STEP_BITS`` finer, and
    within ``max_keys``."""
    b = atoms.bits[need]
    n = atoms.n_rows[need]
    t = terms[need]
    lowest = int(b.max()) + 1

    def keys(m: int) -> int:
        return int(np.sum(np.minimum(n, np.left_shift(2, np.maximum(m - b, 0)))))

    m = lowest
    while m < max_bits and float(np.sum(np.ldexp(t, b - m))) > goal:
        m += 1
    m = max(m, min(lowest + MIN_STEP_BITS - 1, max_bits))
    while m > lowest and keys(m) > max_keys:
        m -= 1
    return m, keys(m)


def _plan_start(
    summary: ScoreSummary,
    levels: Sequence[RefinementLevel],
    auc_tolerance: float,
    size_name: str,
    size: int,
    max_bits: int,
) -> tuple[_Atoms, BoolArray]:
    """The checks both planners share, then the atoms (``summary`` as refined by ``levels``)
    and which of them a finer grid can still split (weighted, not all ties, below
    ``max_bits``)."""
    if not auc_tolerance >= 0.0:
        raise InputError(f"auc_tolerance must be non-negative, got {auc_tolerance!r}")
    if isinstance(size, bool) or not isinstance(size, int) or size < 16:
        raise InputError(f"{size_name} must be an integer of at least 16, got {size!r}")
    if not summary.mantissa_bits < max_bits <= MAX_MANTISSA_BITS:
        raise InputError(
            f"max_bits must lie in ({summary.mantissa_bits}, {MAX_MANTISSA_BITS}], got {max_bits!r}"
        )
    atoms = _prepared(summary, None, levels)
    return atoms, (atoms.weight > 0.0) & ~atoms.tied & (atoms.bits < max_bits)


def plan_refinement(
    summary: ScoreSummary,
    levels: Sequence[RefinementLevel] = (),
    *,
    auc_tolerance: float = DEFAULT_AUC_TOLERANCE,
    average_precision_tolerance: float | None = None,
    ece_tolerance: float | None = None,
    n_bins: int | None = None,
    strategy: BinStrategy = "uniform",
    max_keys: int = DEFAULT_MAX_KEYS,
    max_bits: int = MAX_MANTISSA_BITS,
) -> RefinementPlan | None:
    """The next refinement pass, or None when the bounds meet their tolerances (or cannot move).

    The atoms (the summary's cells, as refined by ``levels``) whose AUC terms are largest are
    chosen until the terms left sum to at most half of ``auc_tolerance`` (likewise for
    average precision when ``average_precision_tolerance`` is given; and the atoms straddling
    a bin edge of ``n_bins``/``strategy`` or of the Hosmer-Lemeshow groups, always along with
    them, and on their own while the ECE bound exceeds ``ece_tolerance`` when given), grown to
    whole cells. The pass summarises their rows on a grid of ``m + d`` bits: a cell split into
    :math:`2^d` cells whose scores spread over it leaves about :math:`2^{-d}` of its term, so
    ``d`` is the least for which the chosen terms so shrunk meet the other half, at least
    ``MIN_STEP_BITS``, capped so that the pass has at most ``max_keys`` keys (a cell of ``n``
    rows yields at most ``min(n, 2^(d+1))``) and at ``max_bits`` (52: a cell is one double,
    all ties, exact). Atoms already on ``max_bits``, all ties, or of one class are exact and
    never chosen.

    Returns
    -------
    RefinementPlan or None

    Examples
    --------
    >>> from calib_cli.summaries.summary import summarize_arrays
    >>> s = summarize_arrays([0, 1, 0, 1], [0.30001, 0.30002, 0.30003, 0.9])
    >>> plan = plan_refinement(s)
    >>> plan.mantissa_bits, [(b, c.size) for b, c in plan.parents], plan.max_keys
    (31, [(12, 1)], 3)
    """
    summary = _one_group(summary)
    strategy = _check_options(n_bins, strategy)
    for name, value in (
        ("average_precision_tolerance", average_precision_tolerance),
        ("ece_tolerance", ece_tolerance),
    ):
        if value is not None and not value >= 0.0:
            raise InputError(f"{name} must be non-negative, got {value!r}")
    atoms, can = _plan_start(summary, levels, auc_tolerance, "max_keys", max_keys, max_bits)
    auc_terms = _auc_terms(atoms)
    bound = float(np.sum(auc_terms))
    need = np.zeros(atoms.pos.size, dtype=bool)
    goal = math.inf
    if bound > auc_tolerance:
        room = max(auc_tolerance - float(np.sum(auc_terms[~can])), 0.0)
        need |= _largest_terms(np.where(can, auc_terms, 0.0), room / 2.0)
        goal = room / 2.0
    if average_precision_tolerance is not None:
        ap_terms = _average_precision_terms(atoms)
        if float(np.sum(ap_terms)) > average_precision_tolerance:
            room = max(average_precision_tolerance - float(np.sum(ap_terms[~can])), 0.0)
            need |= _largest_terms(np.where(can, ap_terms, 0.0), room / 2.0)
    k, own = _own_edges(summary, n_bins)
    unit = _min_weight(summary)
    binning = _binning(atoms, k, strategy, unit, own)
    straddle = binning.straddle | _binning(atoms, 10, "quantile", unit, None).straddle
    total = float(np.sum(atoms.weight))
    ece_bound = 2.0 * _straddle_terms(atoms, binning)[1] / total
    if np.any(need & can) or (ece_tolerance is not None and ece_bound > ece_tolerance):
        need |= straddle
    need &= can
    if not np.any(need):
        return None
    need = _whole_cells(atoms, need)
    kept_terms = float(np.sum(auc_terms[need]))
    goal = max(goal - (bound - kept_terms), 0.0) if math.isfinite(goal) else goal
    m, n_keys = _pass_bits(atoms, need, auc_terms, goal, max_keys, max_bits)
    if n_keys > max_keys:  # even one bit more is too many keys: refine the largest terms only
        order = np.argsort(-auc_terms[need], kind="stable")
        b = atoms.bits[need][order]
        cost = np.minimum(atoms.n_rows[need][order], np.left_shift(2, np.maximum(m - b, 0)))
        chosen = np.flatnonzero(need)[order][np.cumsum(cost) <= max_keys]
        need = np.zeros(atoms.pos.size, dtype=bool)
        need[chosen] = True
        need = _whole_cells(atoms, need)  # the other bins of a chosen cell: a few keys more
        if not np.any(need):
            return None
        m, n_keys = _pass_bits(atoms, need, auc_terms, goal, max_keys, max_bits)
    parents = tuple(
        (int(bits), np.unique(atoms.own_cell[need & (atoms.bits == bits)]))
        for bits in np.unique(atoms.bits[need])
    )
    return RefinementPlan(mantissa_bits=m, parents=parents, max_keys=n_keys, auc_bound=bound)


#: Default cap on the dense slots (sub-cell, bin, class) of one dense refinement pass: at
#: about 12 float64 columns a slot, 2**22 slots are about 400 MB.
DEFAULT_MAX_SLOTS = 1 << 22


def _cell_bins(bits: IntArray, cells: IntArray, edges: FloatArray) -> tuple[IntArray, IntArray]:
    """The first bin and the number of bins each cell (on its ``bits`` grid) can hold."""
    first = np.zeros(cells.size, dtype=np.int64)
    span = np.ones(cells.size, dtype=np.int64)
    for b in np.unique(bits):
        at = bits == b
        lo, hi = cell_bounds(cells[at], mantissa_bits=int(b))
        first[at] = bin_index(lo, edges)
        span[at] = bin_index(hi, edges) - first[at] + 1
    return first, span


def plan_dense_refinement(
    summary: ScoreSummary,
    levels: Sequence[RefinementLevel] = (),
    *,
    auc_tolerance: float = DEFAULT_AUC_TOLERANCE,
    n_bins: int | None = None,
    strategy: BinStrategy = "uniform",
    max_slots: int = DEFAULT_MAX_SLOTS,
    max_bits: int = MAX_MANTISSA_BITS,
) -> tuple[RefinementPlan, ...]:
    """The refinement levels of one dense pass, each cell at its own depth; () when done.

    Where :func:`plan_refinement` gives every chosen cell the same finer grid (one level a
    pass), this plans one pass over the rows that refines each cell ``a`` (of the atoms of
    ``summary`` as refined by ``levels``) by its own :math:`d_a` bits, and returns one
    :class:`RefinementPlan` per resulting grid (levels whose parents are disjoint).

    A cell split into :math:`2^{d}` sub-cells whose scores spread over it leaves about
    :math:`t_a 2^{-d}` of its AUC term :math:`t_a`, and costs :math:`2^{d+1}` dense slots
    per bin it holds (both classes, every sub-cell, occupied or not). Minimising the slots
    under :math:`\\sum_a t_a 2^{-d_a} \\le g` gives :math:`4^{d_a} \\propto t_a`: ``d`` is
    :math:`\\tfrac12 \\log_2(\\mu t_a)` rounded, with :math:`\\mu` the least (found by
    bisection) that meets :math:`g`, half of what ``auc_tolerance`` leaves after the terms that
    cannot move, and the greatest that keeps the slots within ``max_slots``. Atoms that
    straddle a bin edge of ``n_bins``/``strategy`` or a Hosmer-Lemeshow group are refined
    along with them (at least ``MIN_STEP_BITS``), as in :func:`plan_refinement`. Atoms already
    on ``max_bits``, all ties, or of one class are exact and never chosen.

    Returns
    -------
    tuple of RefinementPlan
        In ascending ``mantissa_bits``; ``max_keys`` is each level's dense slot count.

    Examples
    --------
    >>> from calib_cli.summaries.summary import summarize_arrays
    >>> s = summarize_arrays([0, 1, 0, 1], [0.30001, 0.30002, 0.30003, 0.9])
    >>> [(p.mantissa_bits, [(b, c.size) for b, c in p.parents]) for p in plan_dense_refinement(s)]
    [(31, [(12, 1)])]
    """
    summary = _one_group(summary)
    strategy = _check_options(n_bins, strategy)
    atoms, can = _plan_start(summary, levels, auc_tolerance, "max_slots", max_slots, max_bits)
    terms = _auc_terms(atoms)
    bound = float(np.sum(terms))
    if not bound > auc_tolerance or not np.any(can & (terms > 0.0)):
        return ()
    goal = max(auc_tolerance - float(np.sum(terms[~can])), 0.0) / 2.0
    k, own = _own_edges(summary, n_bins)
    unit = _min_weight(summary)
    straddle = _binning(atoms, k, strategy, unit, own).straddle
    straddle |= _binning(atoms, 10, "quantile", unit, None).straddle
    straddle &= can
    # One parent per (grid, cell): its atoms (bins) share the depth, the largest any wants.
    cell_key = np.stack((atoms.bits, atoms.own_cell))
    cells, atom_cell = np.unique(cell_key, axis=1, return_inverse=True)
    atom_cell = atom_cell.reshape(-1)
    c_bits, c_cell = cells[0], cells[1]
    c_terms = np.bincount(atom_cell, weights=np.where(can, terms, 0.0), minlength=c_bits.size)
    c_straddle = np.bincount(atom_cell, weights=straddle, minlength=c_bits.size) > 0
    c_can = np.bincount(atom_cell, weights=can, minlength=c_bits.size) > 0
    _, c_span = _cell_bins(c_bits, c_cell, np.asarray(summary.bin_edges))
    room = np.where(c_can, max_bits - c_bits, 0)
    log_terms = el.log(np.where(c_terms > 0.0, c_terms, 1.0)) / el.LN2

    def depth(log_mu: float) -> IntArray:
        d = np.where(c_terms > 0.0, np.rint(0.5 * (log_mu + log_terms)), 0.0)
        d = np.clip(d, 0, room).astype(np.int64)
        return np.where(c_straddle & (d > 0), np.minimum(np.maximum(d, MIN_STEP_BITS), room), d)

    def left(d: IntArray) -> float:
        return float(np.sum(np.ldexp(c_terms, -d)))

    def slots(d: IntArray) -> int:
        return int(np.sum(np.where(d > 0, c_span << (d + 1), 0)))

    # log2(mu) by bisection: the least that meets the goal, or the most the slots allow.
    live = c_terms > 0.0
    none = -float(np.max(log_terms[live])) - 2.0  # every depth 0
    full = 2.0 * MAX_MANTISSA_BITS + 2.0 - float(np.min(log_terms[live]))  # every depth room

    def least(ok: Callable[[IntArray], bool], lo: float, hi: float) -> float:
        """The least log2(mu) in [lo, hi] with ok(depth) (ok monotone, true at hi)."""
        for _ in range(60):
            mid = 0.5 * (lo + hi)
            lo, hi = (lo, mid) if ok(depth(mid)) else (mid, hi)
        return hi

    log_mu = least(lambda d: left(d) <= goal, none, full)
    if slots(depth(log_mu)) > max_slots:  # the greatest within the slots (none has 0)
        lo, hi = none, log_mu
        for _ in range(60):
            mid = 0.5 * (lo + hi)
            lo, hi = (mid, hi) if slots(depth(mid)) <= max_slots else (lo, mid)
        log_mu = lo
    d = depth(log_mu)
    if slots(d) > max_slots or not np.any(d > 0):
        return ()
    plans: list[RefinementPlan] = []
    for m in np.unique((c_bits + d)[d > 0]):
        at = (d > 0) & (c_bits + d == m)
        parents = tuple(
            (int(b), np.sort(c_cell[at & (c_bits == b)])) for b in np.unique(c_bits[at])
        )
        plans.append(
            RefinementPlan(
                mantissa_bits=int(m),
                parents=parents,
                max_keys=slots(np.where(at, d, 0)),
                auc_bound=bound,
            )
        )
    return tuple(plans)


def summarize_refinement(
    summary: ScoreSummary,
    plan: RefinementPlan,
    y_true: npt.ArrayLike,
    y_prob: npt.ArrayLike,
    *,
    sample_weight: npt.ArrayLike | None = None,
) -> RefinementLevel:
    """The refinement pass over rows in memory (the rows of one group of ``summary``).

    Examples
    --------
    >>> from calib_cli.summaries.summary import summarize_arrays
    >>> y, p = [0, 1, 0, 1], [0.30001, 0.30002, 0.30003, 0.9]
    >>> s = summarize_arrays(y, p)
    >>> level = summarize_refinement(s, plan_refinement(s), y, p)
    >>> level.summary.n_keys, reliability_from_summary(s, refinement=[level]).exactness.auc_bound
    (3, 0.0)
    """
    p = np.asarray(y_prob, dtype=np.float64)
    keep = np.zeros(p.shape, dtype=bool)
    for bits, cells in plan.parents:
        keep |= np.isin(cell_index(p, mantissa_bits=bits), cells)
    fine = summarize_arrays(
        np.asarray(y_true)[keep],
        p[keep],
        sample_weight=None if sample_weight is None else np.asarray(sample_weight)[keep],
        bin_edges=summary.bin_edges,
        mantissa_bits=plan.mantissa_bits,
        eps=summary.eps,
        score_column=summary.score_column,
        label_column=summary.label_column,
        weight_column=summary.weight_column,
    )
    return RefinementLevel(plan=plan, summary=fine)


def refine_arrays(
    summary: ScoreSummary,
    y_true: npt.ArrayLike,
    y_prob: npt.ArrayLike,
    *,
    sample_weight: npt.ArrayLike | None = None,
    auc_tolerance: float = DEFAULT_AUC_TOLERANCE,
    average_precision_tolerance: float | None = None,
    ece_tolerance: float | None = None,
    n_bins: int | None = None,
    strategy: BinStrategy = "uniform",
    max_keys: int = DEFAULT_MAX_KEYS,
    max_levels: int = DEFAULT_MAX_LEVELS,
) -> tuple[RefinementLevel, ...]:
    """Refinement passes over rows in memory until the bounds meet their tolerances.

    The NumPy twin of :func:`calib_cli.summaries.scan.refine_dense_lazy` (options as in
    :func:`plan_refinement`; at most ``max_levels`` passes).
    """
    levels: list[RefinementLevel] = []
    for _ in range(max_levels):
        plan = plan_refinement(
            summary,
            levels,
            auc_tolerance=auc_tolerance,
            average_precision_tolerance=average_precision_tolerance,
            ece_tolerance=ece_tolerance,
            n_bins=n_bins,
            strategy=strategy,
            max_keys=max_keys,
        )
        if plan is None:
            break
        levels.append(
            summarize_refinement(summary, plan, y_true, y_prob, sample_weight=sample_weight)
        )
    return tuple(levels)


# ---------------------------------------------------------------------------------------------
# Discrimination
# ---------------------------------------------------------------------------------------------


def _ambiguous(atoms: _Atoms) -> BoolArray:
    """Atoms whose within-atom pairs are not known: both classes, overlapping, not tied."""
    both = (atoms.pos > 0.0) & (atoms.neg > 0.0)
    above = atoms.hi_neg < atoms.lo_pos  # every positive above every negative
    below = atoms.hi_pos < atoms.lo_neg
    return np.asarray(both & ~atoms.tied & ~above & ~below)


def _auc_terms(atoms: _Atoms) -> FloatArray:
    """Each atom's share of the AUC bound, :math:`w^+ w^- / (2 W^+ W^-)` (0 if known)."""
    n_pos, n_neg = float(np.sum(atoms.pos)), float(np.sum(atoms.neg))
    if not (n_pos > 0.0 and n_neg > 0.0):
        return np.zeros(atoms.pos.size)
    return np.where(_ambiguous(atoms), atoms.pos * atoms.neg / (2.0 * n_pos * n_neg), 0.0)


def _auc(
    atoms: _Atoms, squares: _Squares | None = None, unit: float = 1.0
) -> tuple[float, float, tuple[float, float]]:
    """AUC (within-atom pairs exact where known, else one half), its bound and DeLong CI
    (``squares``: importance weights, DeLong by linearisation with atoms as tie groups;
    ``unit``: the weight of a row for frequency weights, ``metrics.count_unit``)."""
    grid = _delong(atoms.pos, atoms.neg, 0.95, squares, unit)
    if math.isnan(grid.auc):
        return NAN, 0.0, NAN_PAIR
    n_pos, n_neg = float(np.sum(atoms.pos)), float(np.sum(atoms.neg))
    half = atoms.pos * atoms.neg / (2.0 * n_pos * n_neg)
    both = (atoms.pos > 0.0) & (atoms.neg > 0.0) & ~atoms.tied
    above = both & (atoms.hi_neg < atoms.lo_pos)
    below = both & (atoms.hi_pos < atoms.lo_neg)
    auc = grid.auc + float(np.sum(half[above])) - float(np.sum(half[below]))
    bound = float(np.sum(_auc_terms(atoms)))
    if math.isnan(grid.auc_se):
        return auc, bound, NAN_PAIR
    spread = _z_value(0.95) * grid.auc_se
    return auc, bound, (max(auc - spread, 0.0), min(auc + spread, 1.0))


def _average_precision_terms(atoms: _Atoms) -> FloatArray:
    """Each atom's share of the average-precision bound (0 for tied atoms)."""
    n_pos = float(np.sum(atoms.pos))
    if not n_pos > 0.0:
        return np.zeros(atoms.pos.size)
    # Weight above each atom (atoms ascend; precision looks from the top).
    pos_above = np.cumsum(atoms.pos[::-1])[::-1] - atoms.pos
    neg_above = np.cumsum(atoms.neg[::-1])[::-1] - atoms.neg
    den_lo = pos_above + neg_above + atoms.neg
    den_hi = pos_above + atoms.pos + neg_above
    p_min = np.divide(pos_above, den_lo, out=np.zeros_like(den_lo), where=den_lo > 0.0)
    p_max = np.divide(pos_above + atoms.pos, den_hi, out=np.ones_like(den_hi), where=den_hi > 0.0)
    loose = (atoms.pos > 0.0) & ~atoms.tied
    return np.where(loose, atoms.pos / n_pos * (p_max - p_min), 0.0)


# ---------------------------------------------------------------------------------------------
# Bins
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Binning:
    stats: _BinStats
    complement: FloatArray
    atom_bin: IntArray
    straddle: BoolArray


def _assign(
    atoms: _Atoms, edges: FloatArray, uncertain: BoolArray, importance: bool = False
) -> _Binning:
    """Bin of each atom; an atom on both sides of an edge (or ``uncertain``) straddles.
    ``importance``: the bins also carry their sums of squared weights per class."""
    weight = atoms.weight
    mean = np.divide(
        atoms.score_pos + atoms.score_neg, weight, out=np.full(weight.size, 0.5), where=weight > 0.0
    )
    lo = np.where(np.isnan(atoms.lo), mean, atoms.lo)
    hi = np.where(np.isnan(atoms.hi), mean, atoms.hi)
    b_lo, b_hi = bin_index(lo, edges), bin_index(hi, edges)
    straddle = ((b_lo != b_hi) | uncertain) & (weight > 0.0)
    atom_bin = np.where(straddle, bin_index(mean, edges), b_lo)
    k = edges.size - 1
    stats = _BinStats(
        edges=edges,
        bin_id=np.arange(k, dtype=np.int64),
        weight=np.bincount(atom_bin, weights=weight, minlength=k).astype(np.float64),
        score_sum=np.bincount(
            atom_bin, weights=atoms.score_pos + atoms.score_neg, minlength=k
        ).astype(np.float64),
        positive_sum=np.bincount(atom_bin, weights=atoms.pos, minlength=k).astype(np.float64),
        n_rows=np.bincount(atom_bin, weights=atoms.n_rows, minlength=k).astype(np.int64),
        square_pos=(
            np.bincount(atom_bin, weights=atoms.square_pos, minlength=k).astype(np.float64)
            if importance
            else None
        ),
        square_neg=(
            np.bincount(atom_bin, weights=atoms.square_neg, minlength=k).astype(np.float64)
            if importance
            else None
        ),
    )
    complement = np.bincount(
        atom_bin, weights=atoms.complement_pos + atoms.complement_neg, minlength=k
    ).astype(np.float64)
    return _Binning(stats, complement, atom_bin, straddle)


def _min_weight(summary: ScoreSummary) -> float:
    values = summary.weight_min[~np.isnan(summary.weight_min)]
    return float(np.min(values)) if values.size else 1.0


def _quantile_edges(atoms: _Atoms, n_bins: int, unit_weight: float) -> tuple[FloatArray, BoolArray]:
    """Weighted percentile edges (metrics' ``_edges``) and the atoms an edge falls inside."""
    weight = atoms.weight
    live = np.flatnonzero(weight > 0.0)
    w = weight[live]
    cum = np.cumsum(w / unit_weight) if unit_weight < 1.0 else np.cumsum(w)
    total = float(cum[-1])
    levels = np.true_divide(np.linspace(0.0, 1.0, n_bins + 1) * 100.0, 100.0)
    virtual = np.maximum((total - 1.0) * levels, 0.0)
    previous = np.floor(virtual)
    gamma = virtual - previous
    last = live.size - 1
    a = np.minimum(np.searchsorted(cum, previous, side="right"), last)
    b = np.minimum(np.searchsorted(cum, previous + 1.0, side="right"), last)
    lo, hi = atoms.lo[live], atoms.hi[live]
    tied = lo == hi
    same = a == b
    # Different atoms: the rows are the last of atom a and the first of atom b.
    lo_value = np.where(same, lo[a], hi[a])
    hi_value = lo[b]
    inside = same & ~tied[a]
    # Inside one untied atom: interpolate by position (an estimate; the atom straddles).
    start = np.where(a > 0, cum[np.maximum(a - 1, 0)], 0.0)
    span = cum[a] - start
    frac = np.clip((virtual - start) / np.where(span > 0.0, span, 1.0), 0.0, 1.0)
    guess = lo[a] + (hi[a] - lo[a]) * frac
    lo_value = np.where(inside, guess, lo_value)
    hi_value = np.where(inside, guess, hi_value)
    edges = np.maximum.accumulate(_lerp(lo_value, hi_value, gamma))
    keep = np.concatenate(([True], np.diff(edges) > 0.0))
    edges = edges[keep]
    if edges.size == 1:
        edges = np.array([edges[0], edges[0]])
    uncertain = np.zeros(weight.size, dtype=bool)
    uncertain[live[a[inside]]] = True
    return edges, uncertain


def _binning(
    atoms: _Atoms,
    n_bins: int,
    strategy: str,
    unit_weight: float,
    own: FloatArray | None,
    importance: bool = False,
) -> _Binning:
    if strategy == "quantile":
        edges, uncertain = _quantile_edges(atoms, n_bins, unit_weight)
    else:
        edges = np.linspace(0.0, 1.0, n_bins + 1) if own is None else own
        uncertain = np.zeros(atoms.pos.size, dtype=bool)
    return _assign(atoms, edges, uncertain, importance)


def _straddle_terms(atoms: _Atoms, binning: _Binning) -> tuple[float, float]:
    """Weight of straddling atoms, and their :math:`\\sum w |y - p|`."""
    s = binning.straddle
    weight = float(np.sum(atoms.weight[s]))
    gap = float(np.sum(atoms.complement_pos[s]) + np.sum(atoms.score_neg[s]))
    return weight, gap


def _bootstrap_importance(
    atoms: _Atoms, binning: _Binning, *, n_bootstrap: int, rng: np.random.Generator
) -> tuple[tuple[float, float], tuple[float, float]]:
    """metrics' bootstrap of rows for importance weights over (bin, class) cells, each drawn
    as Kish's effective rows (exact when weights are equal within a cell, else right in the
    replicate weight's mean and variance); scores from the normal limit."""
    n_cells = 2 * binning.stats.weight.size
    totals = {name: np.zeros(n_cells) for name in ("weight", "square", "rows", "sum", "sq")}
    for label, w, sq, s, q in (
        (0, atoms.neg, atoms.square_neg, atoms.score_neg, atoms.score_sq_neg),
        (1, atoms.pos, atoms.square_pos, atoms.score_pos, atoms.score_sq_pos),
    ):
        index = 2 * binning.atom_bin + label
        for name, values in (("weight", w), ("square", sq), ("sum", s), ("sq", q)):
            totals[name] += np.bincount(index, weights=values, minlength=n_cells)
    safe = np.where(totals["weight"] > 0.0, totals["weight"], 1.0)
    mean = totals["sum"] / safe
    cells = _ImportanceCells(
        weight=totals["weight"],
        square=totals["square"],
        rows=totals["rows"],
        mean=mean,
        var=np.clip(totals["sq"] / safe - mean * mean, 0.0, None),
    )
    weight, sums, squares, rows = _draw_importance_cells(cells, n_bootstrap, rng)
    stats = binning.stats
    reps = _replicate_figures(weight, sums, squares, rows)
    boot = _ece_intervals(stats, _debiased_sq(stats, 1.0), reps, 0.95)
    return boot.ece_ci, boot.ece_debiased_ci


def _bootstrap(
    atoms: _Atoms,
    binning: _Binning,
    *,
    unit: float,
    n_bootstrap: int,
    rng: np.random.Generator,
) -> tuple[tuple[float, float], tuple[float, float]]:
    """metrics' Poisson bootstrap over (bin, class) cells, normal limit everywhere, and its
    intervals (metrics' ``_ece_intervals``: the same rule as for importance weights)."""
    k = binning.stats.weight.size
    n_cells = 2 * k
    cell_weight = np.zeros(n_cells)
    cell_sum = np.zeros(n_cells)
    cell_sq = np.zeros(n_cells)
    for label, w, s, q in (
        (0, atoms.neg, atoms.score_neg, atoms.score_sq_neg),
        (1, atoms.pos, atoms.score_pos, atoms.score_sq_pos),
    ):
        index = 2 * binning.atom_bin + label
        cell_weight += np.bincount(index, weights=w / unit, minlength=n_cells)
        cell_sum += np.bincount(index, weights=s / unit, minlength=n_cells)
        cell_sq += np.bincount(index, weights=q / unit, minlength=n_cells)
    safe_weight = np.where(cell_weight > 0.0, cell_weight, 1.0)
    mean = cell_sum / safe_weight
    var = np.clip(cell_sq / safe_weight - mean * mean, 0.0, None)
    counts = rng.poisson(cell_weight, size=(n_bootstrap, n_cells)).astype(np.float64)
    noise = rng.standard_normal((n_bootstrap, n_cells))
    sums = np.clip(counts * mean + np.sqrt(counts * var) * noise, 0.0, counts)
    stats = binning.stats
    debiased_sq = float(
        _debiased_sq_from_sums(stats.weight, stats.positive_sum, stats.score_sum, unit)
    )
    boot = _ece_intervals(stats, debiased_sq, _frequency_replicates(counts, sums), 0.95)
    return boot.ece_ci, boot.ece_debiased_ci


# ---------------------------------------------------------------------------------------------
# Public API
# ---------------------------------------------------------------------------------------------


def _one_group(summary: ScoreSummary) -> ScoreSummary:
    if len(summary.groups) > 1:
        raise InputError(
            f"the summary holds {len(summary.groups)} groups of {summary.group_column!r}: "
            "choose one with select_group() or pool them with pooled()"
        )
    if summary.n_keys == 0:
        raise InputError("the summary holds no rows")
    return summary


def _check_options(n_bins: int | None, strategy: str) -> BinStrategy:
    if n_bins is not None and (
        isinstance(n_bins, bool) or not isinstance(n_bins, int | np.integer) or n_bins < 1
    ):
        raise InputError(f"n_bins must be a positive integer, got {n_bins!r}")
    if strategy == "uniform":
        return "uniform"
    if strategy == "quantile":
        return "quantile"
    raise InputError(f"strategy must be one of {', '.join(choices(BinStrategy))}, got {strategy!r}")


def _prepared(
    summary: ScoreSummary,
    resolved: ResolvedCells | None,
    levels: Sequence[RefinementLevel] = (),
) -> _Atoms:
    atoms = _atoms_of(summary)
    if resolved is not None and len(levels):
        raise InputError("give either resolved rows or a refinement, not both")
    for level in levels:
        atoms = _apply_level(atoms, level, summary)
    return atoms if resolved is None else _resolve(atoms, resolved, summary)


def _own_edges(summary: ScoreSummary, n_bins: int | None) -> tuple[int, FloatArray | None]:
    own = np.asarray(summary.bin_edges)
    if n_bins is None or (
        n_bins == own.size - 1 and np.array_equal(own, np.linspace(0.0, 1.0, n_bins + 1))
    ):
        return own.size - 1, own
    return n_bins, None


def _largest_terms(terms: FloatArray, tolerance: float) -> BoolArray:
    """The largest terms, until the ones left sum to at most ``tolerance``."""
    order = np.argsort(-terms, kind="stable")
    left = np.cumsum(terms[order][::-1])[::-1]  # the sum left if we stop before position i
    need = np.zeros(terms.size, dtype=bool)
    need[order[left > tolerance]] = True
    return need


def cells_to_resolve(
    summary: ScoreSummary,
    *,
    auc_tolerance: float = DEFAULT_AUC_TOLERANCE,
    average_precision_tolerance: float | None = None,
    n_bins: int | None = None,
    strategy: BinStrategy = "uniform",
) -> tuple[IntArray, IntArray]:
    """The (bin, cell) keys whose rows a second pass should bring back.

    The atoms whose AUC terms are largest, until the terms left sum to at most
    ``auc_tolerance`` (likewise for average precision when ``average_precision_tolerance``
    is given), and every atom that straddles a bin edge of ``n_bins``/``strategy``
    or one of the 10 Hosmer-Lemeshow groups. With those rows (:class:`ResolvedCells`),
    :func:`reliability_from_summary` gives the AUC within ``auc_tolerance``, and the bins,
    ECE and Hosmer-Lemeshow exactly.

    Returns
    -------
    bins, cells : ndarray of int64
        Keys in ascending order of cell.

    Examples
    --------
    >>> from calib_cli.summaries.summary import summarize_arrays
    >>> s = summarize_arrays([0, 1, 0, 1], [0.30001, 0.30002, 0.7, 0.9])
    >>> bins, cells = cells_to_resolve(s, auc_tolerance=0.0)
    >>> bins.tolist(), len(cells)
    ([3], 1)
    """
    summary = _one_group(summary)
    strategy = _check_options(n_bins, strategy)
    if not auc_tolerance >= 0.0:
        raise InputError(f"auc_tolerance must be non-negative, got {auc_tolerance!r}")
    atoms = _atoms_of(summary)
    need = _largest_terms(_auc_terms(atoms), auc_tolerance)
    if average_precision_tolerance is not None:
        if not average_precision_tolerance >= 0.0:
            raise InputError(
                "average_precision_tolerance must be non-negative, "
                f"got {average_precision_tolerance!r}"
            )
        need |= _largest_terms(_average_precision_terms(atoms), average_precision_tolerance)
    k, own = _own_edges(summary, n_bins)
    unit = _min_weight(summary)
    need |= _binning(atoms, k, strategy, unit, own).straddle
    need |= _binning(atoms, 10, "quantile", unit, None).straddle
    need &= atoms.weight > 0.0
    return atoms.bin[need], atoms.cell[need]


def reliability_from_summary(
    summary: ScoreSummary,
    *,
    n_bins: int | None = None,
    strategy: BinStrategy = "uniform",
    n_bootstrap: int = 0,
    rng: np.random.Generator | None = None,
    resolved: ResolvedCells | None = None,
    refinement: Sequence[RefinementLevel] = (),
    weight_kind: WeightKind | None = None,
    sub_cells: SubCells | None = None,
) -> SummaryReliability:
    """Every figure of :func:`~calib_cli.core.metrics.reliability_summary`, from a summary.

    Parameters
    ----------
    summary : ScoreSummary
        A summary of one group (see :meth:`ScoreSummary.select_group`, :meth:`ScoreSummary.pooled`).
    n_bins : int, optional
        Bins for the table and the ECEs; default: the summary's own ``bin_edges`` (exact).
    strategy : {"uniform", "quantile"}
        Equal-width or equal-mass bins.
    n_bootstrap : int
        Replicates of the ECE bootstrap (0: no intervals).
    rng : numpy.random.Generator, optional
        Required when ``n_bootstrap > 0``.
    resolved : ResolvedCells, optional
        Rows of the atoms :func:`cells_to_resolve` listed (a second pass): those atoms count
        exactly.
    refinement : sequence of RefinementLevel
        Finer summaries of chosen cells (:func:`refine_arrays`,
        :func:`calib_cli.summaries.scan.refine_dense_lazy`), applied in order: their finer atoms
        replace the cells they refine. Not together with ``resolved``.
    weight_kind : {"frequency", "importance"}, optional
        What the weights mean; default the summary's own ``weight_kind``. ``importance``
        gives the variances of :mod:`calib_cli.core.metrics` from the summary's sums of
        squared weights (``weight_sq``) per key: exact for Spiegelhalter's numerator, the bin
        intervals (Kish's rows per bin), the debiased ECE and the Hosmer-Lemeshow design
        effects when the bins are exact; DeLong's variance with the atoms as tie groups (as
        for frequency weights); the sandwich of the calibration fits on two points per atom;
        and, cell-level approximations exact when the weights are equal within each key (as
        after sampling at one rate per class): Spiegelhalter's variance
        (:math:`\\sum w^2 v \\approx (\\sum w^2 / \\sum w) \\sum w v` per key), the bootstrap
        (each (bin, class) cell drawn as Kish's effective rows) and the squared weights of
        resolved rows (their atom's mean).
    sub_cells : SubCells, optional
        The summary's keys on a finer grid (:mod:`calib_cli.summaries.subcells`, the same
        group): the ranking figures (AUC, its interval, average precision, their bounds) split
        the atoms whose pairs are ambiguous into them. Not together with ``resolved`` or
        ``refinement``.

    Returns
    -------
    SummaryReliability
        The figures and their :class:`Exactness` (module docstring).

    Examples
    --------
    >>> from calib_cli.summaries.summary import summarize_arrays
    >>> s = summarize_arrays([0, 0, 1, 1], [0.1, 0.4, 0.35, 0.8], bin_edges=[0.0, 0.5, 1.0])
    >>> r = reliability_from_summary(s)
    >>> r.reliability.auc, r.reliability.ece, r.exactness.auc_bound
    (0.75, 0.0875, 0.0)
    """
    summary = _one_group(summary)
    strategy = _check_options(n_bins, strategy)
    kind = check_weight_kind(summary.weight_kind if weight_kind is None else weight_kind)
    importance = kind == "importance"
    if isinstance(n_bootstrap, bool) or not isinstance(n_bootstrap, int) or n_bootstrap < 0:
        raise InputError(f"n_bootstrap must be a non-negative integer, got {n_bootstrap!r}")
    if n_bootstrap > 0 and not isinstance(rng, np.random.Generator):
        raise InputError("rng must be a numpy.random.Generator when n_bootstrap > 0")
    pos_rows = summary.label == 1
    total = float(np.sum(summary.weight))
    if not total > 0.0:
        raise InputError("every weight is 0: no row carries weight")
    positives = float(np.sum(summary.weight[pos_rows]))
    base_rate = positives / total
    mean_score = float(np.sum(summary.score_sum)) / total
    brier = (
        float(np.sum(summary.score_sq_sum[~pos_rows]))
        + float(np.sum(summary.complement_sq_sum[pos_rows]))
    ) / total
    n_weighted = int(np.sum(summary.n_rows_weighted))
    # frequency weights count in rows of weight `unit` in every interval and test (as
    # metrics.reliability_summary); importance weights have their own variances
    unit = 1.0 if importance else count_unit_of(total, float(n_weighted))

    atoms = _prepared(summary, resolved, refinement)
    rank = atoms
    if sub_cells is not None:
        if resolved is not None or len(refinement):
            raise InputError("give sub-cells without resolved rows or a refinement")
        rank = _ranking_atoms(atoms, sub_cells, summary)
    k, own = _own_edges(summary, n_bins)
    min_weight = _min_weight(summary)
    binning = _binning(atoms, k, strategy, min_weight, own, importance)
    stats = binning.stats
    straddle_weight, straddle_gap = _straddle_terms(atoms, binning)
    murphy = _murphy(stats)
    debiased = _debiased_sq(stats, unit)
    ece_ci: tuple[float, float] | None = None
    ece_debiased_ci: tuple[float, float] | None = None
    if n_bootstrap > 0 and rng is not None:
        if importance:
            ece_ci, ece_debiased_ci = _bootstrap_importance(
                atoms, binning, n_bootstrap=n_bootstrap, rng=rng
            )
        else:
            ece_ci, ece_debiased_ci = _bootstrap(
                atoms, binning, unit=unit, n_bootstrap=n_bootstrap, rng=rng
            )

    squares: _Squares | None = None
    if importance:
        live_rows = summary.n_rows_weighted
        squares = _Squares(
            square_pos=rank.square_pos,
            square_neg=rank.square_neg,
            rows_pos=float(np.sum(live_rows[pos_rows])),
            rows_neg=float(np.sum(live_rows[~pos_rows])),
        )
    auc, auc_bound, auc_ci = _auc(rank, squares, unit)
    ranked = rank.weight > 0.0
    ap = _average_precision(rank.pos[ranked], rank.neg[ranked])
    live = atoms.weight > 0.0
    fit = _fit(atoms, summary.eps, importance, unit)
    hl_binning = _binning(atoms, 10, "quantile", min_weight, None, importance)
    hl = _hosmer_lemeshow(
        hl_binning.stats, hl_binning.complement, np.zeros(hl_binning.complement.size), unit
    )
    spieg_num = float(np.sum(summary.spiegelhalter_num))
    if importance:  # sum w^2 v per key from sum w v: exact when a key's weights are equal
        per_weight = np.divide(
            summary.weight_sq,
            summary.weight,
            out=np.zeros(summary.weight.size),
            where=summary.weight > 0.0,
        )
        spieg_den = float(np.sum(summary.spiegelhalter_var * per_weight))
    else:
        spieg_den = float(np.sum(summary.spiegelhalter_var))
    if spieg_den > 0.0:
        z = spieg_num / math.sqrt(spieg_den) / math.sqrt(unit)
        spieg_z, spieg_p = z, float(2.0 * special().ndtr(-abs(z)))
    else:
        spieg_z, spieg_p = NAN, NAN
    citl = _citl(base_rate, mean_score)
    reliability = ReliabilitySummary(
        n=int(np.sum(summary.n_rows)),
        weight_total=total,
        weight_kind=kind,
        positives=positives,
        base_rate=base_rate,
        mean_score=mean_score,
        calibration_in_the_large=citl.calibration_in_the_large,
        observed_expected_ratio=citl.observed_expected_ratio,
        log_loss=float(np.sum(summary.log_loss_sum)) / total,
        brier=brier,
        brier_reliability=murphy.brier_reliability,
        brier_resolution=murphy.brier_resolution,
        brier_uncertainty=murphy.brier_uncertainty,
        ece=float(_ece_from_sums(stats.weight, stats.positive_sum, stats.score_sum)),
        ece_ci=ece_ci,
        mce=_mce(stats),
        ece_debiased=_sqrt_clipped(debiased),
        ece_debiased_ci=ece_debiased_ci,
        auc=auc,
        auc_ci=auc_ci,
        gini=2.0 * auc - 1.0,
        average_precision=ap,
        calibration_intercept=fit.calibration_intercept,
        calibration_intercept_ci=fit.calibration_intercept_ci,
        calibration_slope=fit.calibration_slope,
        calibration_slope_ci=fit.calibration_slope_ci,
        calibration_converged=fit.converged,
        hosmer_lemeshow=hl.hosmer_lemeshow,
        hosmer_lemeshow_pvalue=hl.hosmer_lemeshow_pvalue,
        hosmer_lemeshow_df=hl.df,
        spiegelhalter_z=spieg_z,
        spiegelhalter_pvalue=spieg_p,
        n_bins=int(stats.weight.size),
        strategy=strategy,
        bins=_table(stats, 0.95, unit),
    )
    untied = live & ~atoms.tied
    exactness = Exactness(
        mantissa_bits=summary.mantissa_bits,
        auc_bound=auc_bound,
        gini_bound=2.0 * auc_bound,
        average_precision_bound=float(np.sum(_average_precision_terms(rank))),
        bins_exact=straddle_weight == 0.0,
        straddle_weight=straddle_weight,
        ece_bound=2.0 * straddle_gap / total,
        hosmer_lemeshow_exact=not bool(np.any(hl_binning.straddle)),
        calibration_fit_exact=not bool(np.any(untied)),
        resolved_cells=_replaced_cells(rank, summary),
        unresolved_atoms=int(np.sum(untied)),
        refinement_levels=len(refinement),
        finest_mantissa_bits=max(
            [
                summary.mantissa_bits,
                *(level.plan.mantissa_bits for level in refinement),
                *([sub_cells.mantissa_bits] if rank is not atoms and sub_cells else []),
            ]
        ),
    )
    return SummaryReliability(reliability=reliability, exactness=exactness)


def _replaced_cells(atoms: _Atoms, summary: ScoreSummary) -> int:
    """The summary's atoms replaced by rows or finer cells."""
    finer = atoms.bits > summary.mantissa_bits
    if not np.any(finer):
        return 0
    key = atoms.cell[finer] * (len(summary.bin_edges) + 1) + atoms.bin[finer]
    return int(np.unique(key).size)


def _fit(atoms: _Atoms, eps: float, importance: bool = False, unit: float = 1.0) -> Any:
    """The recalibration fits on two points per atom: each class at its mean logit
    (``importance``: sandwich covariances from the atoms' squared weights; ``unit``: the
    weight of a row for frequency weights, in which the Wald intervals count)."""
    del eps  # the summary's logits are already clipped at eps
    w = np.concatenate((atoms.neg, atoms.pos))
    logits = np.concatenate((atoms.logit_neg, atoms.logit_pos))
    keep = w > 0.0
    x = logits[keep] / w[keep]
    wy = np.concatenate((np.zeros(atoms.neg.size), atoms.pos))[keep]
    none = np.zeros(atoms.neg.size)
    squares = (
        (
            np.concatenate((none, atoms.square_pos))[keep],
            np.concatenate((atoms.square_neg, none))[keep],
        )
        if importance
        else None
    )
    return _calibration_fit(
        x, w[keep] / unit, wy / unit, confidence=0.95, tol=1e-10, max_iter=50, squares=squares
    )
