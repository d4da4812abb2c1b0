"""Fixed-order dot products and small solves (calib_cli.core.dots) against NumPy's BLAS and
LAPACK: the same values to rounding, and errors where LAPACK raises."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from calib_cli.core.dots import (
    PAIRWISE_ROWS,
    cholesky_solve,
    column_svd,
    dot,
    gram,
    inverse,
    matmul,
    rows_dot,
    shifted_cholesky_solve,
    solve,
    symmetric_eigen,
    weighted_columns,
)

FINITE = st.floats(-1e3, 1e3, allow_nan=False, allow_infinity=False)


@settings(max_examples=60, deadline=None)
@given(
    st.integers(1, 300).flatmap(
        lambda n: st.tuples(arrays(float, n, elements=FINITE), arrays(float, n, elements=FINITE))
    )
)
def test_dot_is_blas_dot_to_rounding(pair: tuple[np.ndarray, np.ndarray]) -> None:
    a, b = pair
    bound = 4 * a.size * np.finfo(float).eps * float(np.abs(a) @ np.abs(b)) + 1e-300
    assert abs(dot(a, b) - float(a @ b)) <= bound


def test_products_match_blas_on_a_hand_worked_case() -> None:
    x = np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
    w = np.array([1.0, 0.5, 2.0])
    assert weighted_columns(w, x).tolist() == [12.5, 16.0]  # 1 + 1.5 + 10, 2 + 2 + 12
    assert gram(x, w).tolist() == [[55.5, 68.0], [68.0, 84.0]]  # 1 + 4.5 + 50, 2 + 6 + 60
    assert rows_dot(x, np.array([1.0, -1.0])).tolist() == [-1.0, -1.0, -1.0]
    np.testing.assert_allclose(matmul(x.T, x), x.T @ x, rtol=1e-15)


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 5), st.integers(0, 2**32 - 1))
def test_solve_and_inverse_match_lapack(n: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    a = rng.normal(size=(n, n)) + n * np.eye(n)  # well conditioned
    b = rng.normal(size=n)
    np.testing.assert_allclose(solve(a, b), np.linalg.solve(a, b), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(inverse(a), np.linalg.inv(a), rtol=1e-10, atol=1e-12)


def test_a_singular_system_is_refused_as_lapack_does() -> None:
    with pytest.raises(np.linalg.LinAlgError):
        solve(np.array([[1.0, 2.0], [2.0, 4.0]]), np.array([1.0, 1.0]))
    with pytest.raises(np.linalg.LinAlgError):
        inverse(np.zeros((2, 2)))


@pytest.mark.parametrize(
    ("rows", "columns"), [(5_000, 3), (3, 200), (PAIRWISE_ROWS + 7, 2), (10, 4)]
)
def test_both_ways_of_adding_match_blas_to_rounding(rows: int, columns: int) -> None:
    """Each helper adds in order or pairwise by the arrays' shapes (the cases take both ways
    of each: 2, 3 and 4 columns up to SHORT, 200 above it; 3 and 10 rows below
    PAIRWISE_ROWS, 5,000 and PAIRWISE_ROWS + 7 from it on); both agree with BLAS to the
    rounding bound n eps sum |a b|, and repeat bit for bit."""
    rng = np.random.default_rng(rows + columns)
    m = rng.normal(size=(rows, columns))
    w, v = rng.normal(size=rows), rng.normal(size=columns)
    eps = np.finfo(float).eps
    bound = rows * eps * (np.abs(w) @ np.abs(m)) + 1e-300
    assert np.all(np.abs(weighted_columns(w, m) - w @ m) <= bound)
    bound = columns * eps * (np.abs(m) @ np.abs(v)) + 1e-300
    assert np.all(np.abs(rows_dot(m, v) - m @ v) <= bound)
    assert rows_dot(m, v).tobytes() == rows_dot(m.copy(), v.copy()).tobytes()


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10_000), k=st.integers(1, 8), scale=st.sampled_from([1e-6, 1.0, 1e6]))
def test_jacobi_solvers_match_lapack(seed: int, k: int, scale: float) -> None:
    """Eigen- and singular values to a few ulps of the largest, leading vectors to 1e-9 where
    the leading gap is not tiny (LAPACK's are the reference; ours add in a fixed order)."""
    rng = np.random.default_rng(seed)
    x = scale * (rng.normal(size=(60, k)) @ rng.normal(size=(k, k)))
    values, right = column_svd(x)
    lapack = np.linalg.svd(x, full_matrices=False)
    np.testing.assert_allclose(values, lapack[1], rtol=0, atol=1e-13 * lapack[1][0])
    cov = x.T @ x
    cov = np.triu(cov) + np.triu(cov, 1).T
    eig, vectors = symmetric_eigen(cov)
    reference = np.linalg.eigvalsh(cov)[::-1]
    np.testing.assert_allclose(eig, reference, rtol=0, atol=1e-13 * reference[0])
    np.testing.assert_allclose(vectors.T @ vectors, np.eye(k), atol=1e-13)
    np.testing.assert_allclose(cov @ vectors, vectors * eig, atol=1e-12 * reference[0])
    if k > 1 and lapack[1][0] - lapack[1][1] > 1e-3 * lapack[1][0]:
        lead = lapack[2][0]
        for got in (right[:, 0], vectors[:, 0]):
            assert min(np.abs(got - lead).max(), np.abs(got + lead).max()) < 1e-9


def test_symmetric_eigen_refuses_a_matrix_that_is_not_symmetric() -> None:
    with pytest.raises(ValueError, match="symmetric"):
        symmetric_eigen(np.array([[1.0, 2.0], [0.0, 1.0]]))


def test_jacobi_solvers_neither_overflow_nor_underflow() -> None:
    values, vectors = symmetric_eigen(np.array([[1e160, 5e159], [5e159, 1e160]]))
    np.testing.assert_allclose(values, [1.5e160, 5e159], rtol=1e-15)
    assert abs(abs(vectors[0, 0]) - np.sqrt(0.5)) < 1e-15
    x = np.random.default_rng(4).normal(size=(50, 3))
    for scale in (1e-160, 1e160):
        got, _ = column_svd(x * scale)
        want = np.linalg.svd(x * scale, compute_uv=False)
        np.testing.assert_allclose(got, want, rtol=1e-13)


@settings(max_examples=80, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1), k=st.integers(1, 14), scale=st.sampled_from([1e-6, 1.0, 1e6])
)
def test_cholesky_solve_matches_lapack(seed: int, k: int, scale: float) -> None:
    # a positive-definite system (condition number up to about 1e4), against LAPACK's solve;
    # a forward error within the condition number times a few units of rounding
    rng = np.random.default_rng(seed)
    q, _ = np.linalg.qr(rng.normal(size=(k, k)))
    values = np.exp(rng.uniform(0.0, np.log(1e4), k))
    a = scale * (q * values) @ q.T
    a = (a + a.T) / 2.0
    b = rng.normal(size=k)
    x = cholesky_solve(a, b)
    assert x is not None
    exact = np.linalg.solve(a, b)
    cond = values.max() / values.min()
    np.testing.assert_allclose(x, exact, rtol=0, atol=64 * k * cond * 2.3e-16 * np.abs(exact).max())
    same = shifted_cholesky_solve(a, b)
    assert same is not None and same[1] == 0.0 and np.array_equal(same[0], x)


def test_cholesky_solve_hand_worked() -> None:
    # [[4, 2], [2, 3]] = L L^T with L = [[2, 0], [1, sqrt 2]]; x solves it exactly
    x = cholesky_solve(np.array([[4.0, 2.0], [2.0, 3.0]]), np.array([2.0, 1.0]))
    assert x is not None and x.tolist() == [0.5, 0.0]
    one = cholesky_solve(np.array([[4.0]]), np.array([3.0]))  # (3 / 2) / 2
    assert one is not None and one.tolist() == [0.75]


@pytest.mark.parametrize(
    "a",
    [
        [[1.0, 2.0], [2.0, 1.0]],  # indefinite
        [[1.0, 1.0], [1.0, 1.0]],  # singular
        [[0.0, 0.0], [0.0, 0.0]],
        [[-1.0, 0.0], [0.0, 2.0]],
    ],
)
def test_cholesky_solve_refuses_what_is_not_positive_definite(a: list[list[float]]) -> None:
    assert cholesky_solve(np.array(a), np.array([1.0, 1.0])) is None


@settings(max_examples=80, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), k=st.integers(1, 12))
def test_shifted_cholesky_solve_is_a_descent_direction(seed: int, k: int) -> None:
    # symmetric matrices with eigenvalues of both signs: (a + tau I) is positive definite for
    # the tau returned, not for tau / 2 (when tau passed the first shift), and -x with b the
    # gradient is a descent direction
    rng = np.random.default_rng(seed)
    q, _ = np.linalg.qr(rng.normal(size=(k, k)))
    values = rng.normal(size=k) * np.exp(rng.uniform(-3, 3, k))
    a = (q * values) @ q.T
    a = (a + a.T) / 2.0
    g = rng.normal(size=k)
    solved = shifted_cholesky_solve(a, g)
    assert solved is not None
    x, tau = solved
    lowest = float(np.linalg.eigvalsh(a).min())
    if tau == 0.0:
        assert cholesky_solve(a, g) is not None
    else:
        assert lowest + tau > -1e-9 * np.abs(a).max()  # shifted past the lowest eigenvalue
        diag = np.diagonal(a)
        first = 1e-3 * np.abs(diag).max() - min(float(diag.min()), 0.0)
        if tau > first * 1.5:  # doubled at least once: half of it was not enough
            assert cholesky_solve(a + tau / 2.0 * np.eye(k), g) is None
        shifted = a + tau * np.eye(k)
        np.testing.assert_allclose(x, np.linalg.solve(shifted, g), rtol=1e-6, atol=1e-9)
    assert float(g @ x) > 0.0  # d = -x: g . d < 0


def test_shifted_cholesky_solve_refuses_what_is_not_finite() -> None:
    assert shifted_cholesky_solve(np.array([[np.nan]]), np.array([1.0])) is None
    assert shifted_cholesky_solve(np.eye(2), np.array([1.0, np.inf])) is None
    x, tau = shifted_cholesky_solve(np.zeros((2, 2)), np.array([1.0, -2.0]))  # type: ignore[misc]
    assert tau == 1.0 and x.tolist() == [1.0, -2.0]  # a zero diagonal: the shift starts at 1
