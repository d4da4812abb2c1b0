"""Dot products and small linear algebra added in a fixed order: the same bits on every machine.

A BLAS adds a dot product in an order that depends on its kernel and its threads (OpenBLAS's
Haswell and Prescott kernels, one thread or two, gave ``reliability`` different last bits of
its AUC and calibration slope on the same file), and its kernels may fuse a multiply and an
add into one rounding. Here products are NumPy's elementwise multiplications (or Python's,
for short vectors) and sums are added in order or by NumPy's pairwise summation, chosen by
the arrays' lengths only; small systems are solved by Gaussian elimination with partial
pivoting in Python floats; a small symmetric matrix's eigenvectors and a tall matrix's right
singular vectors come from Jacobi rotations in a fixed order (the first principal component
of ``rerank-strata --pca-features``). Each product costs one temporary array; the arrays are
a summary's keys, a fit's atoms or a sample's rows. Small positive-definite systems (a Newton
step of a few coordinates) are solved by Cholesky factorisation in Python floats
(:func:`cholesky_solve`, :func:`shifted_cholesky_solve`), about 15 microseconds for ten
unknowns.

>>> dot(np.array([1.0, 2.0]), np.array([3.0, 4.0]))
11.0
>>> solve(np.array([[2.0, 1.0], [1.0, 3.0]]), np.array([3.0, 5.0])).tolist()
[0.8, 1.4]
"""

from __future__ import annotations

import math

import numpy as np

from calib_cli.types import FloatArray

__all__ = [
    "PAIRWISE_ROWS",
    "SHORT",
    "cholesky_solve",
    "column_svd",
    "dot",
    "gram",
    "inverse",
    "matmul",
    "rows_dot",
    "shifted_cholesky_solve",
    "solve",
    "symmetric_eigen",
    "weighted_columns",
]


#: Entries up to which :func:`dot` adds in Python floats, in order (NumPy's call costs more).
SHORT = 32


def dot(a: FloatArray, b: FloatArray) -> float:
    """:math:`\\sum_i a_i b_i` of two vectors: in order up to :data:`SHORT` entries, else
    NumPy's pairwise sum of the products."""
    left, right = np.asarray(a), np.asarray(b)
    if left.size <= SHORT:
        total = 0.0
        for x, y in zip(left.tolist(), right.tolist(), strict=True):
            total += x * y
        return total
    return float(np.add.reduce(np.multiply(left, right), axis=None))  # np.sum's pairwise sum


#: Rows from which :func:`weighted_columns` adds each column pairwise (fewer: in order).
PAIRWISE_ROWS = 4096


def weighted_columns(weights: FloatArray, matrix: FloatArray) -> FloatArray:
    """:math:`\\sum_i w_i M_{ij}` for each column ``j`` (``weights @ matrix``): the rows
    added in their order, or pairwise (each column made contiguous) from
    :data:`PAIRWISE_ROWS` rows on, where in order would lose digits."""
    products = np.asarray(matrix) * np.asarray(weights)[:, None]
    if products.shape[0] >= PAIRWISE_ROWS:
        out: FloatArray = np.sum(np.ascontiguousarray(products.T), axis=1)
        return out
    out = np.sum(products, axis=0)
    return out


def rows_dot(matrix: FloatArray, vector: FloatArray) -> FloatArray:
    """:math:`\\sum_j M_{ij} v_j` for each row ``i`` (``matrix @ vector``): with at most
    :data:`SHORT` columns (a fit's features, a density's nodes) column by column, in order;
    with more (bootstrap draws by a cell's rows) each row summed pairwise."""
    m = np.asarray(matrix, dtype=np.float64)
    k = m.shape[-1]
    if k > SHORT:
        wide: FloatArray = np.sum(np.multiply(m, vector), axis=-1)
        return wide
    out: FloatArray = np.zeros(m.shape[:-1])
    for j in range(k):
        out += m[..., j] * float(vector[j])
    return out


def gram(matrix: FloatArray, weights: FloatArray) -> FloatArray:
    """:math:`X^T \\operatorname{diag}(w) X` of an ``(n, k)`` matrix (``k`` small): each
    entry of the upper triangle a :func:`weighted_columns` sum, mirrored below."""
    x = np.asarray(matrix, dtype=np.float64)
    k = x.shape[1]
    upper_i, upper_j = np.triu_indices(k)
    sums = weighted_columns(np.asarray(weights, dtype=np.float64), x[:, upper_i] * x[:, upper_j])
    out = np.empty((k, k))
    out[upper_i, upper_j] = sums
    out[upper_j, upper_i] = sums
    return out


def matmul(a: FloatArray, b: FloatArray) -> FloatArray:
    """``a @ b`` for small matrices, each entry's products added in order."""
    left, right = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    out: FloatArray = np.sum(left[:, :, None] * right[None, :, :], axis=1)
    return out


def solve(a: FloatArray, b: FloatArray) -> FloatArray:
    """The solution of ``a x = b`` for a small square ``a`` (``b`` a vector or a matrix of
    columns): Gaussian elimination with partial pivoting. Raises
    :class:`numpy.linalg.LinAlgError` when a pivot is zero (``a`` singular)."""
    m = [[float(v) for v in row] for row in np.asarray(a, dtype=np.float64)]
    rhs = np.asarray(b, dtype=np.float64)
    vector = rhs.ndim == 1
    r = [[float(v) for v in np.atleast_1d(row)] for row in (rhs[:, None] if vector else rhs)]
    n = len(m)
    for col in range(n):
        pivot = max(range(col, n), key=lambda i: abs(m[i][col]))
        if m[pivot][col] == 0.0 or not np.isfinite(m[pivot][col]):
            raise np.linalg.LinAlgError("Singular matrix")
        m[col], m[pivot] = m[pivot], m[col]
        r[col], r[pivot] = r[pivot], r[col]
        for i in range(col + 1, n):
            factor = m[i][col] / m[col][col]
            if factor != 0.0:
                m[i] = [x - factor * y for x, y in zip(m[i], m[col], strict=True)]
                r[i] = [x - factor * y for x, y in zip(r[i], r[col], strict=True)]
    x = [[0.0] * len(r[0]) for _ in range(n)]
    for i in range(n - 1, -1, -1):
        for c in range(len(r[0])):
            total = r[i][c] - sum(m[i][j] * x[j][c] for j in range(i + 1, n))
            x[i][c] = total / m[i][i]
    out = np.array(x, dtype=np.float64)
    return out[:, 0] if vector else out


def cholesky_solve(a: FloatArray, b: FloatArray) -> FloatArray | None:
    """The solution of ``a x = b`` for a small symmetric positive-definite ``a`` (its lower
    triangle is read), by Cholesky factorisation ``a = L L^T`` in Python floats, every sum in
    the order of its index; ``None`` when a pivot is not positive and finite (``a`` is not
    positive definite, as far as rounding can tell).

    >>> cholesky_solve(np.array([[4.0, 2.0], [2.0, 3.0]]), np.array([2.0, 1.0])).tolist()
    [0.5, 0.0]
    >>> cholesky_solve(np.array([[1.0, 2.0], [2.0, 1.0]]), np.array([1.0, 1.0])) is None
    True
    """
    rows = np.asarray(a, dtype=np.float64).tolist()
    return _cholesky_solve(rows, np.asarray(b, dtype=np.float64).tolist(), 0.0)


def _cholesky_solve(rows: list[list[float]], b: list[float], shift: float) -> FloatArray | None:
    """:func:`cholesky_solve` of ``rows + shift I`` (lists of Python floats): column by
    column, ``L[i][j] = (a_ij - sum_{t<j} L[i][t] L[j][t]) / L[j][j]``, each sum in the order
    of ``t``."""
    k = len(b)
    low: list[list[float]] = [[0.0] * k for _ in range(k)]
    for j in range(k):
        lj = low[j]
        pivot = rows[j][j] + shift
        for t in range(j):
            pivot -= lj[t] * lj[t]
        if not 0.0 < pivot < math.inf:
            return None
        root = math.sqrt(pivot)
        lj[j] = root
        for i in range(j + 1, k):
            li = low[i]
            total = rows[i][j]
            for t in range(j):
                total -= li[t] * lj[t]
            li[j] = total / root
    y = list(b)
    for i in range(k):  # L y = b
        li = low[i]
        total = y[i]
        for t in range(i):
            total -= li[t] * y[t]
        y[i] = total / li[i]
    for i in range(k - 1, -1, -1):  # L^T x = y
        total = y[i]
        for t in range(i + 1, k):
            total -= low[t][i] * y[t]
        y[i] = total / low[i][i]
    if not all(map(math.isfinite, y)):
        return None
    return np.array(y, dtype=np.float64)


#: :func:`shifted_cholesky_solve`'s first shift, relative to the largest diagonal entry.
SHIFT_START = 1e-3
#: Doublings of the shift after which :func:`shifted_cholesky_solve` gives up (from 1e-3 of the
#: largest diagonal entry, far past the spread of any finite matrix's eigenvalues).
SHIFT_DOUBLINGS = 1100


def shifted_cholesky_solve(a: FloatArray, b: FloatArray) -> tuple[FloatArray, float] | None:
    """The solution of ``(a + tau I) x = b`` for the smallest ``tau >= 0`` of the sequence
    0, ``tau_0``, ``2 tau_0``, ... that makes ``a + tau I`` positive definite, with ``tau``:
    Nocedal and Wright's Algorithm 3.3 (Cholesky with added multiple of the identity),
    ``tau_0 = beta - min_i a_ii`` when some diagonal entry is not positive, else ``beta``;
    ``beta`` is :data:`SHIFT_START` times the largest diagonal magnitude (1 for a zero
    diagonal). For a symmetric ``a`` that is not positive definite, ``x``
    with ``b`` the negative gradient is a descent direction whose length the shift bounds.
    ``None`` if ``a`` or ``b`` is not finite.

    >>> x, tau = shifted_cholesky_solve(np.array([[1.0, 0.0], [0.0, -1.0]]), np.array([1.0, 1.0]))
    >>> tau > 1.0, bool(x[0] > 0.0 and x[1] > 0.0)
    (True, True)
    """
    arr = np.asarray(a, dtype=np.float64)
    vec = np.asarray(b, dtype=np.float64)
    rows, rhs = arr.tolist(), vec.tolist()
    x = _cholesky_solve(rows, rhs, 0.0)  # a non-finite entry fails it
    if x is not None:
        return x, 0.0
    if not (np.isfinite(arr).all() and np.isfinite(vec).all()):
        return None
    diag = np.diagonal(arr)
    top = float(np.max(np.abs(diag))) if diag.size else 0.0
    beta = SHIFT_START * top if top > 0.0 else 1.0
    low = float(np.min(diag)) if diag.size else 0.0
    tau = beta - low if low <= 0.0 else beta
    for _ in range(SHIFT_DOUBLINGS):
        x = _cholesky_solve(rows, rhs, tau)
        if x is not None:
            return x, tau
        tau = 2.0 * tau
        if not math.isfinite(tau):
            break
    return None


def inverse(a: FloatArray) -> FloatArray:
    """The inverse of a small square matrix (:func:`solve` on the identity's columns)."""
    n = np.asarray(a).shape[0]
    return solve(a, np.eye(n))


#: Jacobi rotations stop when every off-diagonal entry (every pair of columns' cosine) is below
#: this, relative: a few units in the last place, where LAPACK's solvers also stop.
JACOBI_TOLERANCE = 4.0 * float(np.finfo(np.float64).eps)
#: Sweeps after which a Jacobi solver gives up (each sweep squares the error once close:
#: 6-10 are usual).
JACOBI_SWEEPS = 60


def _rotation(alpha: float, beta: float, gamma: float) -> tuple[float, float]:
    """The Jacobi rotation (cosine, sine) that zeroes ``gamma`` between two diagonal entries
    ``alpha`` and ``beta`` (Golub and Van Loan, Algorithm 8.5.1; the smaller angle)."""
    zeta = (beta - alpha) / (2.0 * gamma)
    t = math.copysign(1.0, zeta) / (abs(zeta) + math.hypot(1.0, zeta))  # hypot: no overflow
    c = 1.0 / math.sqrt(1.0 + t * t)
    return c, c * t


def _rotate(m: FloatArray, p: int, q: int, c: float, s: float) -> None:
    """Columns ``p`` and ``q`` of ``m`` rotated in place (each entry two products, one sum)."""
    mp, mq = m[:, p].copy(), m[:, q].copy()
    m[:, p] = c * mp - s * mq
    m[:, q] = s * mp + c * mq


def _negligible(gamma: float, alpha: float, beta: float) -> bool:
    """Whether ``gamma`` is below :data:`JACOBI_TOLERANCE` times the geometric mean of
    ``|alpha|`` and ``|beta|`` (square roots first: no overflow)."""
    return gamma == 0.0 or abs(gamma) <= JACOBI_TOLERANCE * (
        math.sqrt(abs(alpha)) * math.sqrt(abs(beta))
    )


def _power_of_two_scale(m: FloatArray) -> float:
    """A power of two bringing the largest entry of ``m`` near 1 (scaling by it is exact):
    the rotations' squares then neither overflow nor underflow."""
    largest = float(np.max(np.abs(m))) if m.size else 0.0
    if largest == 0.0 or not math.isfinite(largest):
        return 1.0
    return math.ldexp(1.0, max(-1000, min(1000, -math.frexp(largest)[1])))  # finite


def symmetric_eigen(a: FloatArray) -> tuple[FloatArray, FloatArray]:
    """Eigenvalues (descending) and unit eigenvectors (columns, in the same order) of a small
    symmetric matrix, by cyclic Jacobi rotations in a fixed order: the same bits on every
    machine (LAPACK's ``eigh`` goes through BLAS kernels). Converged when every off-diagonal
    entry is below :data:`JACOBI_TOLERANCE` times the geometric mean of its two diagonal
    entries (a relative criterion: accurate eigenvalues, small ones too); raises
    :class:`numpy.linalg.LinAlgError` if that takes more than :data:`JACOBI_SWEEPS` sweeps.

    >>> values, vectors = symmetric_eigen(np.array([[2.0, 1.0], [1.0, 2.0]]))
    >>> values.round(12).tolist(), np.abs(vectors[:, 0]).round(12).tolist()
    ([3.0, 1.0], [0.707106781187, 0.707106781187])
    """
    m = np.array(a, dtype=np.float64)
    k = m.shape[0]
    if m.shape != (k, k) or not np.array_equal(m, m.T):
        raise ValueError("symmetric_eigen needs a symmetric square matrix")
    scale = _power_of_two_scale(m)
    m *= scale
    vectors = np.eye(k)
    for _ in range(JACOBI_SWEEPS):
        rotated = False
        for p in range(k - 1):
            for q in range(p + 1, k):
                gamma = float(m[p, q])
                alpha, beta = float(m[p, p]), float(m[q, q])
                if _negligible(gamma, alpha, beta):
                    continue
                c, s = _rotation(alpha, beta, gamma)
                _rotate(m, p, q, c, s)  # columns, then rows: M <- J^T M J
                mp, mq = m[p].copy(), m[q].copy()
                m[p] = c * mp - s * mq
                m[q] = s * mp + c * mq
                m[p, q] = m[q, p] = 0.0  # zero by construction (rounding aside)
                _rotate(vectors, p, q, c, s)
                rotated = True
        if not rotated:
            values = np.diag(m) / scale
            order = np.argsort(-values, kind="stable")
            return values[order], vectors[:, order]
    raise np.linalg.LinAlgError(f"Jacobi rotations did not converge in {JACOBI_SWEEPS} sweeps")


def column_svd(matrix: FloatArray) -> tuple[FloatArray, FloatArray]:
    """Singular values (descending) and right singular vectors (columns, in the same order)
    of a tall ``(n, k)`` matrix, by one-sided Jacobi rotations of its columns (Hestenes) with
    every column product a fixed-order :func:`dot`: the same bits on every machine, and no
    squaring of the condition number (unlike the eigenvectors of :math:`X^T X`). Converged
    when every pair of columns has a cosine below :data:`JACOBI_TOLERANCE`; raises
    :class:`numpy.linalg.LinAlgError` after :data:`JACOBI_SWEEPS` sweeps. Each sweep costs
    :math:`k(k-1)/2` rotations of :math:`O(n)` each.

    >>> values, vectors = column_svd(np.array([[3.0, 0.0], [0.0, 4.0], [0.0, 0.0]]))
    >>> values.tolist(), np.abs(vectors).tolist()
    ([4.0, 3.0], [[0.0, 1.0], [1.0, 0.0]])
    """
    g = np.array(np.asarray(matrix, dtype=np.float64).T, order="C")  # columns as rows
    k = g.shape[0]
    scale = _power_of_two_scale(g)
    g *= scale
    vectors = np.eye(k)
    norms = [dot(g[j], g[j]) for j in range(k)]
    for _ in range(JACOBI_SWEEPS):
        rotated = False
        for p in range(k - 1):
            for q in range(p + 1, k):
                alpha, beta = norms[p], norms[q]
                gamma = dot(g[p], g[q])
                if _negligible(gamma, alpha, beta):
                    continue
                c, s = _rotation(alpha, beta, gamma)
                gp, gq = g[p].copy(), g[q]
                g[p] = c * gp - s * gq
                g[q] = s * gp + c * gq
                _rotate(vectors, p, q, c, s)
                norms[p], norms[q] = dot(g[p], g[p]), dot(g[q], g[q])
                rotated = True
        if not rotated:
            values = np.sqrt(np.asarray(norms, dtype=np.float64)) / scale
            order = np.argsort(-values, kind="stable")
            return values[order], vectors[:, order]
    raise np.linalg.LinAlgError(f"Jacobi rotations did not converge in {JACOBI_SWEEPS} sweeps")
