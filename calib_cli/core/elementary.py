"""Exponentials, logarithms and powers of arrays in IEEE arithmetic only: the same bits everywhere.

NumPy computes ``np.exp``, ``np.log``, ``np.log1p`` and ``np.power`` with kernels it picks by
the processor's features when it starts: with AVX-512, without it, or with SSE only. They
differ in their last bits (of a million uniform arguments in [0, 1): ``log`` 3,503 values,
``exp`` of [-10, 10] 46,484, ``log1p`` 80,355; without AVX-512 against with), so before this module
``reliability``'s log loss and calibration slope, ``estimate-shift``'s ``em`` and ``pacc``,
``rerank-strata``'s scores and a summary file's log-loss sums differed in their last digits
between two machines (and on one machine under ``NPY_DISABLE_CPU_FEATURES``).

Here each function is a fixed sequence of the operations IEEE 754 rounds exactly the same way
everywhere (``+``, ``-``, ``*``, ``/``, ``rint``, ``frexp``, ``ldexp``), applied elementwise by
NumPy, so the result does not depend on the vector width, the CPU or NumPy's version:

- :func:`exp`: ``x = k ln 2 + r`` with ``|r| <= ln(2) / 2`` (``ln 2`` split in two so that
  ``k`` times its head is exact), the Taylor polynomial of ``exp(r)`` to degree 13 (truncation
  below ``4e-18`` relative) by Horner's rule, scaled by ``2**k``;
- :func:`log`: ``x = 2**e (1 + f)`` with ``sqrt(1/2) <= 1 + f < sqrt(2)``,
  ``log(1 + f) = f - s (f - R)`` with ``s = f / (2 + f)`` and
  ``R = sum_k 2 s**(2k) / (2k + 1)`` (a polynomial of degree 7 in ``s**2``, within ``1e-17``);
- :func:`log1p`: the same series with ``f = x`` for ``sqrt(1/2) - 1 <= x < sqrt(2) - 1``
  (so ``1 + x`` is never rounded there), elsewhere :func:`log` of ``u = 1 + x`` plus
  ``u``'s rounding error over ``u`` (the error exact by Knuth's two-sum);
- :func:`power`: products for whole powers, ``exp(p log x)`` for others.

Their error is within 1.2 (``exp``), 1.5 (``log``) and 1.6 (``log1p``) units in the last place
of the exact value (tested against 40-digit ``decimal`` values, near every switch point too,
and within 2 units of Python's ``math`` down to the subnormals); ``exp`` and ``log`` never
decrease from one double to the next. Each works through its array in blocks that stay in the
processor's cache, writing into the block's scratch arrays: about 4-7 nanoseconds a value, as
fast as the C library's scalar functions, 4-8 times as slow as NumPy's vector kernels.

>>> exp(np.array([0.0, 1.0])).tolist()  # e: one unit in the last place above the nearest double
[1.0, 2.7182818284590455]
>>> log(np.array([1.0, 8.0]))[1] == 3.0 * LN2
np.True_
"""

from __future__ import annotations

import math
from collections.abc import Callable
from decimal import Decimal, localcontext
from fractions import Fraction

import numpy as np
import numpy.typing as npt

from calib_cli.types import FloatArray

__all__ = ["LN2", "exp", "log", "log1p", "log_odds", "power", "sigmoid"]


def _ln2_parts() -> tuple[float, float, float]:
    """``ln 2`` as a double, and split as ``head + tail`` with ``head`` of 32 significant bits
    (so ``k * head`` is exact for ``|k| < 2**21``), from 40 decimal digits of ``ln 2``."""
    with localcontext() as context:
        context.prec = 40
        exact = Decimal(2).ln()
    head = math.ldexp(math.floor(math.ldexp(float(exact), 31)), -31)
    tail = float(Fraction(exact) - Fraction(head))
    return float(exact), head, tail


LN2, _LN2_HEAD, _LN2_TAIL = _ln2_parts()
_INV_LN2 = float(1 / Fraction(Decimal(2).ln()))  # not used for accuracy, only to pick k
#: Taylor coefficients 1/k! for k = 13 down to 2 (exact fractions, each rounded once).
_EXP_TAYLOR = tuple(float(Fraction(1, math.factorial(k))) for k in range(13, 1, -1))
#: ``R(z) / z`` for ``R(z) = sum_k 2 z**k / (2k + 1)`` on ``0 <= z <= (3 - 2 sqrt 2)**2``, as the
#: polynomial of degree 6 that interpolates it at 7 Chebyshev nodes (solved in exact
#: arithmetic; ``tests/test_elementary.py`` derives them again). Its error in ``R`` is below
#: ``1e-17``, against ``2e-15`` for the first 7 terms of the series: 3 multiply-adds fewer than
#: the 10 terms the series needs. Lowest degree first.
_LOG_POLY = (
    0.666666666666667,
    0.39999999999899505,
    0.28571428625975487,
    0.2222221113479508,
    0.18182889125261723,
    0.15331721600556042,
    0.14616449685043406,
)
#: Beyond these, exp overflows to inf or underflows to 0 (as the exact value rounds).
_EXP_MAX = 709.782712893384
_EXP_MIN = -745.1332191019412
_SQRT_HALF = math.sqrt(0.5)
_SQRT_TWO = math.sqrt(2.0)


#: Values per block (256 KiB an array): a block's scratch arrays stay in the processor's cache,
#: and the Python-level loop runs once per block, never per value.
BLOCK = 32768


def _array(x: npt.ArrayLike) -> FloatArray:
    return np.asarray(x, dtype=np.float64)


class _Scratch:
    """Arrays of one block, reused from block to block: each step writes into one of them
    (``out=``), so a block allocates nothing."""

    def __init__(self, n: int) -> None:
        self.a, self.b, self.c, self.d, self.r = (np.empty(n) for _ in range(5))
        self.exponent = np.empty(n, dtype=np.int32)
        self.flag, self.flag2 = np.empty(n, dtype=np.bool_), np.empty(n, dtype=np.bool_)

    def cut(self, n: int) -> _Scratch:
        if n == self.a.size:
            return self
        part = object.__new__(_Scratch)
        for name in ("a", "b", "c", "d", "r", "exponent", "flag", "flag2"):
            setattr(part, name, getattr(self, name)[:n])
        return part


Kernel = Callable[[FloatArray, FloatArray, _Scratch], None]


def _blocked(kernel: Kernel, x: npt.ArrayLike) -> FloatArray:
    """``kernel(block, out, scratch)`` over ``x`` (flattened) in blocks of :data:`BLOCK`."""
    values = _array(x)
    flat = values.reshape(-1)
    out = np.empty_like(flat)
    scratch = _Scratch(min(flat.size, BLOCK))
    with np.errstate(all="ignore"):  # special values are set by each kernel
        for start in range(0, flat.size, BLOCK):
            block = flat[start : start + BLOCK]
            kernel(block, out[start : start + BLOCK], scratch.cut(block.size))
    return out.reshape(values.shape)


def _finite_within(x: FloatArray, low: float) -> bool:
    """Whether every value of ``x`` is finite and above ``low`` (a NaN makes the min NaN)."""
    return bool(x.min() > low and x.max() < np.inf)


def exp(x: npt.ArrayLike) -> FloatArray:
    """``e**x`` elementwise, the same bits on every machine (module docstring).

    >>> exp(np.array([-np.inf, 0.0, 710.0, np.nan])).tolist()
    [0.0, 1.0, inf, nan]
    """
    return _blocked(_exp_into, x)


def _exp_into(x: FloatArray, out: FloatArray, t: _Scratch) -> None:
    k, r, step = t.a, t.b, t.c
    np.clip(x, _EXP_MIN - 1.0, _EXP_MAX + 1.0, out=r)  # k stays small; NaN stays NaN
    np.multiply(r, _INV_LN2, out=k)
    np.rint(k, out=k)
    np.multiply(k, _LN2_HEAD, out=step)
    r -= step  # exact: k * head is exact and close to r
    np.multiply(k, _LN2_TAIL, out=step)
    r -= step
    # poly = sum_{j=2..13} r**(j-2) / j!, then exp(r) = 1 + r (1 + r poly)
    poly = step
    np.multiply(r, _EXP_TAYLOR[0], out=poly)
    for coefficient in _EXP_TAYLOR[1:-1]:
        poly += coefficient
        poly *= r
    poly += _EXP_TAYLOR[-1]
    poly *= r
    poly += 1.0
    poly *= r
    poly += 1.0
    np.copyto(t.exponent, k, casting="unsafe")  # NaN's k is garbage; ldexp(NaN, k) is NaN
    np.ldexp(poly, t.exponent, out=out)
    if not (x.min() >= _EXP_MIN and x.max() <= _EXP_MAX):  # also when x holds a NaN
        out[x > _EXP_MAX] = np.inf
        out[x < _EXP_MIN] = 0.0


def log(x: npt.ArrayLike) -> FloatArray:
    """Natural logarithm elementwise, the same bits on every machine (module docstring).

    >>> log(np.array([0.0, 1.0, np.inf, -1.0])).tolist()
    [-inf, 0.0, inf, nan]
    """
    return _blocked(_log_into, x)


def _log_into(x: FloatArray, out: FloatArray, t: _Scratch) -> None:
    f, e = t.a, t.b
    np.frexp(x, f, t.exponent)  # x = f * 2**exponent, f in [0.5, 1)
    _normalise(f, e, t)
    f -= 1.0  # exact: within a factor 2 of 1
    _log_kernel_into(f, out, t)
    _add_exponent(out, e, t.c)
    if not _finite_within(x, 0.0):
        _set_special(x, out, 0.0)


def _normalise(f: FloatArray, e: FloatArray, t: _Scratch) -> None:
    """``f`` in [0.5, 1) times 2 where below ``sqrt(1/2)``, and ``e = t.exponent`` less 1
    there. Selections by multiplying by a 0-1 flag (exact), several times faster than a
    masked copy."""
    low = np.less(f, _SQRT_HALF, out=t.flag)
    np.multiply(f, low, out=t.c)
    f += t.c
    np.subtract(t.exponent, low, out=e)


def _add_exponent(out: FloatArray, e: FloatArray, step: FloatArray) -> None:
    """``out += e ln 2``, the tail first (``e`` times the head of ``ln 2`` is exact)."""
    np.multiply(e, _LN2_TAIL, out=step)
    out += step
    np.multiply(e, _LN2_HEAD, out=step)
    out += step


def _set_special(x: FloatArray, out: FloatArray, pole: float) -> None:
    """-inf at ``x == pole``, inf at inf, NaN below the pole and at NaN."""
    special = ~(x > pole) | (x == np.inf)  # NaN fails x > pole
    v = x[special]
    out[special] = np.where(v == pole, -np.inf, np.where(v == np.inf, np.inf, np.nan))


def _log_kernel_into(f: FloatArray, out: FloatArray, t: _Scratch) -> None:
    """``out = log(1 + f)`` for ``sqrt(1/2) - 1 <= f < sqrt(2) - 1``; uses ``t.c``, ``t.d``."""
    s, series = t.c, t.d
    np.add(f, 2.0, out=s)
    np.divide(f, s, out=s)
    np.multiply(s, s, out=out)  # z = s**2, kept in out until the end
    np.multiply(out, _LOG_POLY[-1], out=series)
    for coefficient in _LOG_POLY[-2:0:-1]:
        series += coefficient
        series *= out
    series += _LOG_POLY[0]
    series *= out  # R(z)
    # log(1 + f) = 2s + s R = f - s (f - R), since 2s = f - s f
    np.subtract(f, series, out=series)
    series *= s
    np.subtract(f, series, out=out)


def log1p(x: npt.ArrayLike) -> FloatArray:
    """``log(1 + x)`` elementwise, accurate for small ``x``, the same bits on every machine.

    >>> log1p(np.array([-1.0, 0.0, 1e-20, np.inf])).tolist()
    [-inf, 0.0, 1e-20, inf]
    """
    return _blocked(_log1p_into, x)


def _log1p_into(x: FloatArray, out: FloatArray, t: _Scratch) -> None:
    # As :func:`_log_into` on u = 1 + x, except that near 0 the kernel takes x itself (u
    # would round there), and elsewhere u's rounding error (exact, by Knuth's two-sum) is
    # added back to first order: log(1 + x) = log(u) + err / u.
    f, e, err = t.a, t.b, t.r
    np.add(x, 1.0, out=f)
    np.subtract(f, 1.0, out=t.c)  # two-sum of 1 and x: err = (1 - (u - b)) + (x - b)
    np.subtract(f, t.c, out=err)
    np.subtract(1.0, err, out=err)
    np.subtract(x, t.c, out=t.d)
    err += t.d
    err /= f
    np.frexp(f, f, t.exponent)
    _normalise(f, e, t)
    f -= 1.0
    near = np.greater_equal(x, _SQRT_HALF - 1.0, out=t.flag)
    near &= np.less(x, _SQRT_TWO - 1.0, out=t.flag2)
    far = np.logical_not(near, out=t.flag2)
    f *= far  # f = x where near, else f: products by 0 and 1 and a sum with 0 are exact
    np.multiply(x, near, out=t.c)
    f += t.c
    e *= far
    err *= far
    _log_kernel_into(f, out, t)
    out += err
    _add_exponent(out, e, t.c)
    if not _finite_within(x, -1.0):
        _set_special(x, out, -1.0)
    if not x.all():  # log1p(-0.0) is -0.0 (the selections above add +0.0 to it)
        zero = x == 0.0
        out[zero] = x[zero]


def power(x: npt.ArrayLike, p: float) -> FloatArray:
    """``x**p`` elementwise for ``x >= 0``, the same bits on every machine: a whole ``p``
    (up to 64) by products (binary powering: ``x * x`` for 2, ``x`` itself for 1), any other
    by ``exp(p log x)`` (within ``2 |p log x| + 2`` units in the last place), 0 at ``x = 0``
    for ``p > 0``.

    >>> power(np.array([0.0, 2.0, 9.0]), 2.0).tolist(), power(np.array([4.0]), 0.5).tolist()
    ([0.0, 4.0, 81.0], [2.0])
    """
    base = _array(x)
    if p == int(p) and 0 <= p <= 64:
        whole, out, square = int(p), np.ones_like(base), base
        while whole:  # out starts at 1: its first product is exact
            if whole & 1:
                out = out * square
            whole >>= 1
            if whole:
                square = square * square
        return out
    with np.errstate(divide="ignore"):
        return exp(p * log(base))


def sigmoid(x: npt.ArrayLike) -> FloatArray:
    """``1 / (1 + exp(-x))`` elementwise, non-decreasing, the same bits on every machine.

    Below -709 it is 0 (the exact value is below 1e-308).

    >>> sigmoid(np.array([-800.0, 0.0, 800.0])).tolist()
    [0.0, 0.5, 1.0]
    """
    with np.errstate(over="ignore"):
        out: FloatArray = 1.0 / (1.0 + exp(-_array(x)))
    return out


def log_odds(p: npt.ArrayLike) -> FloatArray:
    """``log(p / (1 - p))`` elementwise (``-inf`` at 0, ``inf`` at 1), every machine alike.

    One logarithm of the odds: its two roundings (``1 - p`` and the quotient) move it by
    about 3e-16 at most where it is near 0, and it is within 2.5 units in its last place
    elsewhere; non-decreasing, and half the work of ``log(p) - log1p(-p)``.

    >>> log_odds(np.array([0.0, 0.5, 1.0])).tolist()
    [-inf, 0.0, inf]
    """
    p = _array(p)
    with np.errstate(divide="ignore", invalid="ignore"):
        out: FloatArray = log(p / (1.0 - p))
    return out
