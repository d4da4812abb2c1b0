"""The score grid of a summary: a cell index that is exact, monotone, and computable in SQL.

A summary needs a *fixed* grid (the same for every file, day and engine), or summaries could
not be merged; and it needs resolution where calibration matters most for rare events, near 0
and near 1. A uniform grid of ``1e5`` cells on [0, 1] puts every score below ``1e-5`` into one
cell, which is where a fraud or click model keeps most of its rows. This grid is *relative on
both tails*: the width of a cell is a fixed fraction ``2**-mantissa_bits`` of the distance of
its scores to the nearer end of [0, 1].

Definition (``m = mantissa_bits``, ``s = 52 - m``). For :math:`x \\in [0, 1/2]` let

.. math::

    f(x) = \\begin{cases} 0 & x = 0 \\\\
    (\\operatorname{bits}(x) \\gg s) + 1 & x > 0 \\end{cases}

where :math:`\\operatorname{bits}(x)` is the IEEE-754 float64 bit pattern of :math:`x` read as a
signed 64-bit integer (positive here), and :math:`H = f(1/2) = 1022 \\cdot 2^m + 1`. The cell of
a score :math:`p` is

.. math::

    \\operatorname{cell}(p) = \\begin{cases} f(p) & p \\le 1/2 \\\\
    2H - f(1 - p) & p > 1/2 \\end{cases}

:math:`1 - p` is exact for :math:`p \\ge 1/2` (Sterbenz), so the upper tail has the same
resolution as the lower one. Properties: cells run from 0 to :math:`2H`; ``cell(0) == 0`` and
``cell(1) == 2H`` are cells of their own; the index is non-decreasing in :math:`p` (the bit
pattern of a non-negative float is monotone in its value); a normal score :math:`p \\le 1/2` in
:math:`[2^e, 2^{e+1})` shares its cell only with scores within :math:`2^{e - m}` of it
(relative width at most :math:`2^{-m}`), and a score above 1/2 only with scores whose
:math:`1 - p` is within that relative distance. Subnormal scores (below ``2.2e-308``) share
cells of absolute width ``2**(s - 1074)``.

Arithmetic form, for engines that cannot reinterpret a double as an integer: for a normal
:math:`x = 2^e (1 + t)` with :math:`0 \\le t < 1`, :math:`\\operatorname{bits}(x) \\gg s =
(e + 1023)\\, 2^m + \\lfloor t\\, 2^m \\rfloor`, where :math:`e` and :math:`t` are what C's
``frexp`` returns (shifted by one) and :math:`t\\, 2^m` is exact; for a subnormal :math:`x`,
:math:`\\lfloor x\\, 2^{1074} / 2^s \\rfloor`. In Polars the bits are
``col.reinterpret(dtype=pl.Int64)``.

With the default ``m = 12`` (relative width :math:`2^{-12} \\approx 2.4 \\cdot 10^{-4}`) a
binade holds 4096 cells and scores between ``1e-8`` and ``1 - 1e-8`` occupy at most about
210 000 cells; real score distributions occupy far fewer (one per distinct score at most).

Bins (the reliability table's edges) split cells: a row's key is ``(bin, cell)`` with
``bin = searchsorted(edges[1:-1], p, side="left")``, the assignment of
``sklearn.calibration.calibration_curve`` and of :mod:`calib_cli.core.metrics`, in SQL the
number of inner edges strictly below ``p``.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from calib_cli.errors import InputError
from calib_cli.types import FloatArray, IntArray

__all__ = [
    "DEFAULT_MANTISSA_BITS",
    "MAX_MANTISSA_BITS",
    "bin_index",
    "cell_bounds",
    "cell_index",
    "check_bin_edges",
    "check_mantissa_bits",
    "half_cell",
    "parent_cell",
]

DEFAULT_MANTISSA_BITS = 12
#: At 52 bits a cell holds one double: every cell is a group of ties.
MAX_MANTISSA_BITS = 52


def check_mantissa_bits(mantissa_bits: int) -> int:
    """``mantissa_bits`` as an int in ``[1, 52]`` or an InputError naming it.

    >>> check_mantissa_bits(12)
    12
    """
    if (
        isinstance(mantissa_bits, bool)
        or not isinstance(mantissa_bits, int | np.integer)
        or not 1 <= mantissa_bits <= MAX_MANTISSA_BITS
    ):
        raise InputError(
            f"mantissa_bits must be an integer from 1 to {MAX_MANTISSA_BITS}, got {mantissa_bits!r}"
        )
    return int(mantissa_bits)


def half_cell(mantissa_bits: int) -> int:
    """:math:`H = f(1/2)`, the cell of the score 0.5; the last cell (score 1) is ``2 H``.

    >>> half_cell(12), 2 * half_cell(12)
    (4186113, 8372226)
    """
    m = check_mantissa_bits(mantissa_bits)
    return (1022 << m) + 1


def cell_index(y_prob: npt.ArrayLike, *, mantissa_bits: int) -> IntArray:
    """The grid cell of each score (module docstring), as int64.

    Parameters
    ----------
    y_prob : array of shape (n,)
        Scores in [0, 1] (not checked here; the summary builder checks them).
    mantissa_bits : int
        Mantissa bits kept, ``m``: cells have relative width ``2**-m`` on both tails.

    Returns
    -------
    ndarray of int64, shape (n,)

    Examples
    --------
    >>> cell_index([0.0, 1e-300, 0.25, 0.5, 0.75, 1.0], mantissa_bits=12).tolist()
    [0, 107887, 4182017, 4186113, 4190209, 8372226]
    """
    s = 52 - check_mantissa_bits(mantissa_bits)
    h = half_cell(mantissa_bits)
    p = np.asarray(y_prob, dtype=np.float64)
    low = p <= 0.5
    x = np.where(low, p, 1.0 - p)
    f = np.where(x == 0.0, 0, (x.view(np.int64) >> s) + 1)  # x == 0 also catches -0.0
    return np.where(low, f, 2 * h - f).astype(np.int64)


def parent_cell(cells: npt.ArrayLike, *, from_bits: int, to_bits: int) -> IntArray:
    """The cell at ``to_bits`` that holds each cell at ``from_bits >= to_bits`` (the grids nest).

    A finer grid is a bit-prefix refinement of a coarser one: with :math:`d` = ``from_bits -
    to_bits``, :math:`f_{\\text{coarse}} = ((f_{\\text{fine}} - 1) \\gg d) + 1` on each tail
    (0 stays 0), so every fine cell lies inside exactly one coarse cell.

    Examples
    --------
    >>> fine = cell_index([0.0, 1e-9, 0.3, 0.5, 0.7, 1.0], mantissa_bits=20)
    >>> coarse = cell_index([0.0, 1e-9, 0.3, 0.5, 0.7, 1.0], mantissa_bits=12)
    >>> bool(np.array_equal(parent_cell(fine, from_bits=20, to_bits=12), coarse))
    True
    """
    fine_bits, coarse_bits = check_mantissa_bits(from_bits), check_mantissa_bits(to_bits)
    if coarse_bits > fine_bits:
        raise InputError(f"to_bits ({to_bits}) must not exceed from_bits ({from_bits})")
    d = fine_bits - coarse_bits
    h_fine, h_coarse = half_cell(fine_bits), half_cell(coarse_bits)
    c = np.asarray(cells, dtype=np.int64)
    low = c <= h_fine
    f = np.where(low, c, 2 * h_fine - c)
    g = np.where(f > 0, ((f - 1) >> d) + 1, 0)
    return np.where(low, g, 2 * h_coarse - g).astype(np.int64)


def _from_bits(bits: IntArray) -> FloatArray:
    return np.ascontiguousarray(bits, dtype=np.int64).view(np.float64)


def _fold(cells: npt.ArrayLike, mantissa_bits: int) -> tuple[npt.NDArray[np.bool_], IntArray]:
    """Each cell's tail (lower: ``p <= 1/2``) and its index ``f`` in ``x = min(p, 1 - p)``."""
    h = half_cell(mantissa_bits)
    c = np.asarray(cells, dtype=np.int64)
    low = c <= h
    return low, np.where(low, c, 2 * h - c)


def cell_floor(x: FloatArray, mantissa_bits: int | IntArray) -> FloatArray:
    """The lower edge of each ``x = min(p, 1 - p)``'s cell on the grid of ``mantissa_bits``
    (one, or each value's): ``x`` with all but its top mantissa bits cleared, 0 for 0, so
    ``x - cell_floor(x)`` is exact.

    >>> cell_floor(np.array([0.3, 0.0]), 2).tolist()
    [0.25, 0.0]
    """
    shift = 52 - np.asarray(mantissa_bits, dtype=np.int64)
    return _from_bits((x.view(np.int64) >> shift) << shift)


def cell_floors(cells: npt.ArrayLike, *, mantissa_bits: int) -> FloatArray:
    """:func:`cell_floor` of the scores of each cell (in ``x = min(p, 1 - p)``; 0 for the
    cells of 0 and 1).

    >>> cell_floors(cell_index([0.3, 0.7, 0.0], mantissa_bits=2), mantissa_bits=2).tolist()
    [0.25, 0.25, 0.0]
    """
    _, f = _fold(cells, mantissa_bits)
    return _from_bits(np.maximum(f - 1, 0) << (52 - mantissa_bits))


def cell_bounds(cells: npt.ArrayLike, *, mantissa_bits: int) -> tuple[FloatArray, FloatArray]:
    """The closed score interval ``[lower, upper]`` each cell can hold.

    Every score ``p`` with ``cell_index(p) == c`` satisfies ``lower[c] <= p <= upper[c]``, and
    both bounds are scores of the cell (the interval is tight).

    Examples
    --------
    >>> lo, hi = cell_bounds([0, 4186113, 8372226], mantissa_bits=12)
    >>> lo.tolist(), hi.tolist()
    ([0.0, 0.5, 1.0], [0.0, 0.5, 1.0])
    >>> lo, hi = cell_bounds([4186112], mantissa_bits=12)  # the cell just below 0.5
    >>> lo.tolist(), hi.tolist()
    ([0.49993896484375], [0.49999999999999994])
    """
    s = 52 - check_mantissa_bits(mantissa_bits)
    low, f = _fold(cells, mantissa_bits)
    # x in [from_bits((f - 1) << s), from_bits((f << s) - 1)] for f >= 1 (but x > 0, and the
    # cell of 0.5 is {0.5}); {0} for f == 0.
    first = _from_bits(np.where(f > 0, np.maximum((f - 1) << s, 1), 0))
    last = _from_bits(np.where(f > 0, (f << s) - 1, 0))
    last = np.where(f == (1022 << (52 - s)) + 1, 0.5, last)  # the cell of 0.5 ends at 0.5
    # Above 1/2 the cell holds the doubles p with first <= 1 - p <= last (1 - p is exact there):
    # round 1 - last up and 1 - first down to the nearest such double.
    up_lo = 1.0 - last
    up_lo = np.where(1.0 - up_lo > last, np.nextafter(up_lo, 2.0), up_lo)
    up_hi = 1.0 - first
    up_hi = np.where(1.0 - up_hi < first, np.nextafter(up_hi, 0.0), up_hi)
    lower = np.where(low, first, up_lo)
    upper = np.where(low, last, up_hi)
    return lower.astype(np.float64), upper.astype(np.float64)


def check_bin_edges(bin_edges: npt.ArrayLike) -> FloatArray:
    """Bin edges as float64: finite, strictly increasing, from 0 to 1, at least one bin.

    >>> check_bin_edges(np.linspace(0, 1, 3)).tolist()
    [0.0, 0.5, 1.0]
    """
    edges = np.asarray(bin_edges, dtype=np.float64)
    if edges.ndim != 1 or edges.size < 2:
        raise InputError(f"bin_edges must list at least 2 edges, got {edges.tolist()!r}")
    if not (edges[0] == 0.0 and edges[-1] == 1.0 and np.all(np.diff(edges) > 0.0)):
        raise InputError(f"bin_edges must increase strictly from 0 to 1, got {edges.tolist()!r}")
    return edges


def bin_index(y_prob: npt.ArrayLike, bin_edges: npt.ArrayLike) -> IntArray:
    """The reliability bin of each score: the number of inner edges strictly below it.

    Examples
    --------
    >>> bin_index([0.0, 0.1, 0.10000000000000002, 1.0], np.linspace(0, 1, 11)).tolist()
    [0, 0, 1, 9]
    """
    edges = np.asarray(bin_edges, dtype=np.float64)
    p = np.asarray(y_prob, dtype=np.float64)
    return np.searchsorted(edges[1:-1], p, side="left").astype(np.int64)
