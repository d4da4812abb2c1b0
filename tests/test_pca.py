"""Tests of calib_cli.core.pca: the first principal component and quantile strata (Algorithm 2)."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.decomposition import PCA
from sklearn.preprocessing import StandardScaler

import calib_cli.core.pca as pca_module
from calib_cli.core.pca import (
    assign_strata,
    first_principal_component,
    project_first_component,
    strata_from_edges,
)
from calib_cli.errors import InputError

FloatArray = npt.NDArray[np.float64]


def _features(seed: int, n: int = 300, k: int = 5) -> FloatArray:
    rng = np.random.default_rng(seed)
    mixing = rng.normal(size=(k, k))
    x = rng.normal(size=(n, k)) @ mixing
    return x * rng.uniform(0.1, 100.0, size=k) + rng.normal(0.0, 50.0, size=k)


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("solver", ["svd", "covariance"])
def test_matches_sklearn_pca(seed: int, solver: str) -> None:
    x = _features(seed)
    fit = first_principal_component(x, solver=solver)  # type: ignore[arg-type]
    scaler = StandardScaler().fit(x)
    z = scaler.transform(x)
    reference = PCA(n_components=1, svd_solver="full").fit(z)
    component = reference.components_[0]
    sign = np.sign(component @ fit.loadings)
    np.testing.assert_allclose(fit.loadings, sign * component, atol=1e-8)
    np.testing.assert_allclose(fit.means, scaler.mean_, rtol=1e-12)
    np.testing.assert_allclose(fit.scales, scaler.scale_, rtol=1e-12)
    assert fit.explained_variance_ratio == pytest.approx(
        reference.explained_variance_ratio_[0], abs=1e-10
    )
    np.testing.assert_allclose(
        project_first_component(fit, x), sign * reference.transform(z)[:, 0], atol=1e-8
    )
    assert fit.solver == solver and fit.rows == x.shape[0]


def test_matches_numpy_eigendecomposition() -> None:
    x = _features(11, n=200, k=4)
    z = (x - x.mean(axis=0)) / x.std(axis=0)
    eigenvalues, eigenvectors = np.linalg.eigh(np.cov(z, rowvar=False, bias=True))
    leading = eigenvectors[:, -1]
    fit = first_principal_component(x)
    np.testing.assert_allclose(np.abs(fit.loadings), np.abs(leading), atol=1e-10)
    assert fit.explained_variance_ratio == pytest.approx(eigenvalues[-1] / eigenvalues.sum())


def test_sign_is_fixed_by_the_largest_loading() -> None:
    for seed in range(5):
        fit = first_principal_component(_features(seed))
        assert fit.loadings[np.argmax(np.abs(fit.loadings))] > 0
        flipped = first_principal_component(-_features(seed))  # same axis, same sign rule
        np.testing.assert_allclose(flipped.loadings, fit.loadings, atol=1e-10)
    # two standardised columns: loadings of equal size; the first one is made positive
    x = np.array([[1.0, 4.0], [2.0, 3.1], [3.0, 2.2], [4.0, 0.9]])
    fit = first_principal_component(x)
    np.testing.assert_allclose(fit.loadings, [np.sqrt(0.5), -np.sqrt(0.5)], atol=1e-12)


def test_solvers_agree_and_chunking_is_exact(monkeypatch: pytest.MonkeyPatch) -> None:
    x = _features(3, n=1000, k=6)
    w = np.random.default_rng(3).uniform(0.0, 2.0, size=1000)
    svd = first_principal_component(x, sample_weight=w, solver="svd")
    monkeypatch.setattr(pca_module, "CHUNK_ROWS", 97)
    cov = first_principal_component(x, sample_weight=w, solver="covariance")
    np.testing.assert_allclose(cov.loadings, svd.loadings, atol=1e-10)
    np.testing.assert_allclose(cov.means, svd.means, rtol=1e-12)
    np.testing.assert_allclose(cov.scales, svd.scales, rtol=1e-12)
    assert cov.explained_variance_ratio == pytest.approx(svd.explained_variance_ratio)
    values = project_first_component(cov, x)
    np.testing.assert_allclose(values, ((x - cov.means) / cov.scales) @ cov.loadings)


def test_auto_solver_switches_on_rows() -> None:
    x = _features(4, n=50)
    assert first_principal_component(x).solver == "svd"
    assert first_principal_component(x, svd_max_rows=49).solver == "covariance"


@pytest.mark.parametrize("solver", ["svd", "covariance"])
def test_weights_equal_repetition(solver: str) -> None:
    x = _features(5, n=80, k=4)
    reps = np.random.default_rng(5).integers(0, 4, size=80)
    weighted = first_principal_component(x, sample_weight=reps.astype(float), solver=solver)  # type: ignore[arg-type]
    repeated = first_principal_component(np.repeat(x, reps, axis=0), solver=solver)  # type: ignore[arg-type]
    np.testing.assert_allclose(weighted.loadings, repeated.loadings, atol=1e-10)
    np.testing.assert_allclose(weighted.means, repeated.means, rtol=1e-12)
    np.testing.assert_allclose(weighted.scales, repeated.scales, rtol=1e-12)


def test_permutation_invariance_and_input_not_mutated() -> None:
    x = _features(6)
    copy = x.copy()
    fit = first_principal_component(x)
    np.testing.assert_array_equal(x, copy)
    permuted = first_principal_component(x[np.random.default_rng(6).permutation(x.shape[0])])
    np.testing.assert_allclose(permuted.loadings, fit.loadings, atol=1e-12)


def test_constant_column_gets_scale_one() -> None:
    x = _features(7, k=3)
    x = np.column_stack([x, np.full(x.shape[0], 3.5)])
    fit = first_principal_component(x)
    assert fit.scales[-1] == 1.0 and fit.loadings[-1] == pytest.approx(0.0, abs=1e-12)
    reference = first_principal_component(x[:, :3])
    np.testing.assert_allclose(fit.loadings[:3], reference.loadings, atol=1e-10)


def test_feature_errors_name_the_column() -> None:
    x = _features(8, n=10, k=3)
    x[6, 1] = np.nan
    with pytest.raises(InputError) as info:
        first_principal_component(x, names=["a", "b", "c"])
    assert str(info.value) == "column 'b' has 1 value missing or infinite (first at row 7: nan)"
    with pytest.raises(InputError, match="every feature column is constant"):
        first_principal_component(np.ones((5, 2)))
    with pytest.raises(InputError, match="2-D array"):
        first_principal_component(np.ones(5))
    with pytest.raises(InputError, match="solver must be one of"):
        first_principal_component(_features(8), solver="qr")  # type: ignore[arg-type]


def test_assign_strata_at_quantiles() -> None:
    values = np.random.default_rng(9).normal(size=10_000)
    codes, edges = assign_strata(values, n_strata=4)
    np.testing.assert_allclose(edges, np.quantile(values, [0.25, 0.5, 0.75], method="inverted_cdf"))
    assert np.bincount(codes).tolist() == [2500, 2500, 2500, 2500]
    np.testing.assert_array_equal(codes, strata_from_edges(values, edges))
    one, no_edges = assign_strata(values, n_strata=1)
    assert no_edges.size == 0 and np.all(one == 0)


def test_assign_strata_with_heavy_ties_leaves_no_stratum_empty() -> None:
    values = np.array([0.0] * 70 + [1.0] * 25 + [2.0] * 5)
    codes, edges = assign_strata(values, n_strata=4)
    assert edges.tolist() == [0.0, 1.0]
    assert np.bincount(codes).tolist() == [70, 25, 5]


def test_assign_strata_weights_equal_repetition() -> None:
    rng = np.random.default_rng(10)
    values = np.round(rng.normal(size=300), 1)
    reps = rng.integers(0, 4, size=300)
    codes, edges = assign_strata(values, n_strata=5, sample_weight=reps.astype(float))
    codes_rep, edges_rep = assign_strata(np.repeat(values, reps), n_strata=5)
    np.testing.assert_array_equal(edges, edges_rep)
    np.testing.assert_array_equal(np.repeat(codes, reps), codes_rep)


def test_assign_strata_errors() -> None:
    with pytest.raises(InputError, match="n_strata must be a positive integer, got 0"):
        assign_strata([1.0, 2.0], n_strata=0)
    with pytest.raises(InputError, match="column 'component' has 1 value missing or infinite"):
        assign_strata([1.0, np.inf], n_strata=2)


@settings(max_examples=80, deadline=None)
@given(
    values=st.lists(st.integers(-20, 20), min_size=1, max_size=200),
    n_strata=st.integers(1, 8),
)
def test_strata_are_ordered_and_non_empty(values: list[int], n_strata: int) -> None:
    v = np.array(values, dtype=float)
    codes, edges = assign_strata(v, n_strata=n_strata)
    used = edges.size + 1
    assert used <= n_strata
    assert np.all(np.bincount(codes, minlength=used) > 0)
    order = np.argsort(v, kind="stable")
    assert np.all(np.diff(codes[order]) >= 0)  # codes are monotone in the values
