"""Scatter-adds that let other threads run: :func:`numpy.add.at`'s sums, without the GIL.

``numpy.add.at(out, index, values)`` adds ``values[i]`` to ``out[index[i]]`` for ``i = 0, 1,
...`` in order, so each entry's sum is :math:`(\\dots((o + v_1) + v_2) + \\dots) + v_n` over its
rows in their order: the same bytes however the work is shared out. But it holds the GIL
throughout (two threads doing it together took 1.1x the time of one: measured with NumPy 2.4),
so worker threads that scatter serialise on it, and so does :func:`numpy.bincount`.

SciPy's compiled sparse kernels release the GIL. A matrix in coordinate form times a vector,
``coo_matvec(nnz, rows, cols, data, x, y)``, adds ``data[k] * x[cols[k]]`` to
``y[rows[k]]`` for ``k = 0, 1, ...`` in order, into the result given. With ``rows`` the
index, ``cols`` all 0 and ``x = [1]``, that is ``y[index[k]] += values[k] * 1``, and
``v * 1`` is ``v`` exactly (every float, ``-0.0`` and infinities alike; an integer
likewise), so the sums are :func:`numpy.add.at`'s, added in the same order: the same bytes
(tested on both paths), but for which NaN a sum keeps when it adds two (the sign and payload
of a NaN result may differ; a summary's terms are never NaN). Indices go as int32 where the
result has fewer than ``2**31`` entries: the kernel then reads 16 bytes a row (index, a zero,
the value), where the compressed-column product it replaced read 32 (0.68x the time alone,
2^18 rows into 175,616 entries).

The kernel is ``scipy.sparse._sparsetools.coo_matvec`` (private in name, in every SciPy since
0.x; the public ``coo_array @ vector`` calls it but returns a new array, where an add into a
running total is needed). If it is missing or refuses the arrays, :func:`numpy.add.at` does
the same sums, holding the GIL. The kernel checks no index: :func:`scatter_add` checks them
first (the smallest and largest), as :func:`numpy.add.at` would.
"""

from __future__ import annotations

import functools
import importlib
import sys
import threading
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import numpy.typing as npt

from calib_cli.types import FloatArray, IntArray

__all__ = ["gil_free", "import_in_background", "scatter_add", "scatter_columns", "scatter_sums"]

#: The index and value types the kernel takes (its result has the values' type).
_INDEX_TYPES = (np.dtype(np.int32), np.dtype(np.int64))
_VALUE_TYPES = (np.dtype(np.float64), np.dtype(np.int32), np.dtype(np.int64))


@functools.cache
def _kernel() -> Callable[..., Any] | None:
    """SciPy's coordinate-form matrix-vector product (None where it cannot be found)."""
    try:
        module = importlib.import_module("scipy.sparse._sparsetools")
    except ImportError:  # pragma: no cover - every supported SciPy has it
        return None
    kernel = getattr(module, "coo_matvec", None)
    return kernel if callable(kernel) else None


def import_in_background() -> None:
    """Start importing SciPy's kernel (about 0.1 s) in a daemon thread, unless it is imported:
    a pass starts it as it starts reading, and its first scatter waits for it if need be."""
    if "scipy.sparse._sparsetools" not in sys.modules:
        threading.Thread(target=_kernel, name="calib-import", daemon=True).start()


def gil_free() -> bool:
    """Whether :func:`scatter_add` releases the GIL here (SciPy's kernel was found)."""
    return _kernel() is not None


#: The longest runs of zeros and of ones made so far, per type: a call takes a view of their
#: start (calls differ in length: a block's found rows, its missed ones).
_RUNS: dict[tuple[str, np.dtype[Any]], npt.NDArray[Any]] = {}
_RUNS_LOCK = threading.Lock()
#: The largest result an int32 index can address.
_INT32_ENTRIES = 1 << 31


def _run(kind: str, n: int, dtype: np.dtype[Any]) -> npt.NDArray[Any]:
    """A read-only view of ``n`` zeros (``kind="zeros"``) or ones."""
    with _RUNS_LOCK:
        held = _RUNS.get((kind, dtype))
        if held is None or held.size < n:
            size = max(n, 2 * (0 if held is None else held.size))
            held = np.zeros(size, dtype) if kind == "zeros" else np.ones(size, dtype)
            held.flags.writeable = False
            _RUNS[kind, dtype] = held
    return held[:n]


def _narrow(index: IntArray, entries: int) -> IntArray:
    """``index`` (checked to lie in ``[0, entries)``) as int32 when ``entries`` allows: half
    the bytes for the kernel to read."""
    if index.dtype == np.int64 and entries <= _INT32_ENTRIES:
        return index.astype(np.int32)
    return index


def scatter_add(out: npt.NDArray[Any], index: IntArray, values: npt.ArrayLike) -> None:
    """``numpy.add.at(out, index, values)``: the same sums, in the same order, in place;
    without the GIL where SciPy's kernel takes the arrays (``out`` contiguous, of float64,
    int32 or int64; ``index`` of int32 or int64; ``values`` one value or one per index).

    >>> out = np.zeros(3)
    >>> scatter_add(out, np.array([2, 0, 2]), np.array([1.0, 2.0, 3.0]))
    >>> out.tolist()
    [2.0, 0.0, 4.0]
    """
    _add(out, np.asarray(index), values, checked=False)


def _add(out: npt.NDArray[Any], index: IntArray, values: npt.ArrayLike, *, checked: bool) -> None:
    """:func:`scatter_add`; ``checked``: the caller has checked that ``index`` lies in
    ``[0, out.size)`` (the kernel itself checks nothing)."""
    n = index.size
    kernel = _kernel()
    vals = np.asarray(values)
    usable = (
        kernel is not None
        and n > 0
        and out.ndim == 1
        and out.flags.c_contiguous
        and out.flags.writeable
        and out.dtype in _VALUE_TYPES
        and index.ndim == 1
        and index.dtype in _INDEX_TYPES
    )
    if not usable:
        np.add.at(out, index, values)
        return
    if vals.ndim == 0:
        vals = np.full(n, vals, dtype=out.dtype) if vals != 1 else _run("ones", n, out.dtype)
    elif vals.shape != (n,):
        np.add.at(out, index, values)  # NumPy's broadcasting and its error
        return
    if vals.dtype != out.dtype:
        np.add.at(out, index, values)  # NumPy's casting rules
        return
    if not checked and (int(index.min()) < 0 or int(index.max()) >= out.size):
        np.add.at(out, index, values)  # NumPy's IndexError (or negative indices)
        return
    index = np.ascontiguousarray(_narrow(index, out.size))
    vals = np.ascontiguousarray(vals)
    one = _run("ones", 1, out.dtype)
    assert kernel is not None
    try:  # the kernel checks its arguments' types and sizes before it writes anything
        kernel(n, index, _run("zeros", n, index.dtype), vals, one, out)
    except (TypeError, ValueError, OverflowError):
        np.add.at(out, index, vals)


def scatter_columns(
    index: IntArray, columns: Mapping[str, FloatArray], size: int
) -> dict[str, FloatArray]:
    """:func:`scatter_sums` of each float64 column, the index checked once: ``index`` must
    lie in ``[0, size]`` (rows indexed ``size`` are cut off)."""
    index = np.asarray(index)
    if index.size and (int(index.min()) < 0 or int(index.max()) > size):
        raise IndexError(f"an index lies outside [0, {size}]")
    index = _narrow(index, size + 1)  # once for every column
    out = {}
    for name, values in columns.items():
        total = np.zeros(size + 1)
        _add(total, index, np.asarray(values, dtype=np.float64), checked=True)
        out[name] = total[:size]
    return out


def scatter_sums(index: IntArray, values: npt.ArrayLike, size: int) -> npt.NDArray[Any]:
    """Per entry below ``size``, its rows' ``values`` added in order from zero (rows indexed
    ``size`` or more are cut off: ``index`` must lie in ``[0, size]``); float64 unless
    ``values`` are integers."""
    vals = np.asarray(values)
    dtype = vals.dtype if vals.dtype in _VALUE_TYPES else np.dtype(np.float64)
    out = np.zeros(size + 1, dtype=dtype)
    scatter_add(out, index, vals.astype(dtype, copy=False))
    return out[:size]
