"""Tests of calib_cli.core.pca: the first principal component and its strata (Algorithm 2),
standardised or centred only (the paper's variant), cut at quantiles or at the sign."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import numpy.typing as npt
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.decomposition import PCA
from sklearn.preprocessing import StandardScaler

import calib_cli.core.pca as pca_module
from calib_cli.core.pca import (
    assign_strata,
    first_principal_component,
    pca_strata,
    project_first_component,
    sign_strata,
    strata_from_edges,
    weak_first_component,
)
from calib_cli.errors import InputError, UsageError
from calib_cli.workflows.rerank_strata import RerankStrataRequest, run_rerank_strata
from tests.conftest import RunCalib

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


# ------------------------------------------------ the paper's variant: centred only, cut at 0


def _sign_fixed(vector: FloatArray) -> FloatArray:
    """calib's sign convention: the loading of largest magnitude is positive."""
    return vector if vector[np.argmax(np.abs(vector))] > 0 else -vector


def test_centred_component_hand_worked() -> None:
    # deviations (2, 1), (-2, -1), (1, 2), (-1, -2) around the means (10, 100): covariance
    # (divisor 4) [[2.5, 2], [2, 2.5]], eigenvalues 4.5 and 0.5, so v1 = (1, 1)/sqrt(2)
    # explains 4.5 / 5 = 0.9; component values (+-3)/sqrt(2); the sign cut puts rows 2 and 4
    # (negative) in the lower stratum
    x = np.array([[12.0, 101.0], [8.0, 99.0], [11.0, 102.0], [9.0, 98.0]])
    fit = first_principal_component(x, scaling="center")
    np.testing.assert_allclose(fit.loadings, [np.sqrt(0.5), np.sqrt(0.5)], atol=1e-12)
    assert fit.explained_variance_ratio == pytest.approx(0.9, abs=1e-12)
    np.testing.assert_allclose(fit.means, [10.0, 100.0], rtol=1e-15)
    assert fit.scales.tolist() == [1.0, 1.0] and fit.scaling == "center"
    values = project_first_component(fit, x)
    np.testing.assert_allclose(values, np.array([3.0, -3.0, 3.0, -3.0]) / np.sqrt(2), atol=1e-12)
    out = pca_strata(
        x[:2], x[2:], names=["a", "b"], reference_labels=[1, 0], scaling="center", cut="sign"
    )
    assert out.reference_strata.tolist() == ["pc2", "pc1"]
    assert out.target_strata.tolist() == ["pc2", "pc1"]
    assert out.cut_points.tolist() == [0.0] and out.n_strata == 2
    assert out.reference_label_rate == {"pc1": 0.0, "pc2": 1.0}
    assert (out.scaling, out.cut, out.weak_component) == ("center", "sign", False)


def test_centred_and_standardised_differ_on_uncorrelated_columns_hand_worked() -> None:
    # uncorrelated columns of variances 2 and 0.5: centred, v1 = (1, 0) explains 2 / 2.5 = 0.8;
    # standardised, both directions explain 1/2 (= 1/k: weak, under 1.5/k = 0.75)
    x = np.array([[-2.0, 0.0], [2.0, 0.0], [0.0, -1.0], [0.0, 1.0]])
    centred = first_principal_component(x, scaling="center")
    np.testing.assert_allclose(centred.loadings, [1.0, 0.0], atol=1e-12)
    assert centred.explained_variance_ratio == pytest.approx(0.8, abs=1e-12)
    standardised = first_principal_component(x)
    assert standardised.explained_variance_ratio == pytest.approx(0.5, abs=1e-12)
    # component values -2, 2, 0, 0: the rows at exactly 0 go to the lower stratum
    codes, edges = sign_strata(project_first_component(centred, x))
    assert codes.tolist() == [0, 1, 0, 0] and edges.tolist() == [0.0]


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("solver", ["svd", "covariance"])
def test_centred_component_matches_numpy_svd_of_the_centred_data(seed: int, solver: str) -> None:
    x = _features(seed)
    centred = x - x.mean(axis=0)
    _, singular, vt = np.linalg.svd(centred, full_matrices=False)
    leading = _sign_fixed(vt[0])
    fit = first_principal_component(x, solver=solver, scaling="center")  # type: ignore[arg-type]
    np.testing.assert_allclose(fit.loadings, leading, atol=1e-9)
    assert fit.explained_variance_ratio == pytest.approx(
        singular[0] ** 2 / np.sum(singular**2), abs=1e-10
    )
    np.testing.assert_allclose(fit.scales, np.ones(x.shape[1]))
    np.testing.assert_allclose(project_first_component(fit, x), centred @ leading, atol=1e-7)


def test_centred_component_weights_equal_repetition() -> None:
    x = _features(5, n=80, k=4)
    reps = np.random.default_rng(5).integers(0, 4, size=80)
    weighted = first_principal_component(x, sample_weight=reps.astype(float), scaling="center")
    repeated = first_principal_component(np.repeat(x, reps, axis=0), scaling="center")
    np.testing.assert_allclose(weighted.loadings, repeated.loadings, atol=1e-10)
    assert weighted.explained_variance_ratio == pytest.approx(repeated.explained_variance_ratio)


def test_sign_cut() -> None:
    codes, edges = sign_strata([-1.5, 0.0, 2.0, 1e-300, -1e-300])
    assert codes.tolist() == [0, 0, 1, 1, 0] and edges.tolist() == [0.0]
    one_side, none = sign_strata([1.0, 2.0])  # no empty stratum: one stratum, no cut
    assert one_side.tolist() == [0, 0] and none.size == 0
    with pytest.raises(InputError, match="column 'component' has 1 value missing"):
        sign_strata([0.0, np.nan])
    # on data: the strata are the sign of the centred component, whatever its skew
    rng = np.random.default_rng(12)
    x = np.column_stack([rng.exponential(size=500), rng.normal(size=500)])
    x[:, 1] += 0.5 * x[:, 0]
    out = pca_strata(
        x[:300],
        x[300:],
        names=["a", "b"],
        reference_labels=np.zeros(300),
        cut="sign",
        scaling="center",
    )
    values = project_first_component(first_principal_component(x, scaling="center"), x)
    expected = np.where(values > 0, "pc2", "pc1")
    np.testing.assert_array_equal(
        np.concatenate([out.reference_strata, out.target_strata]), expected
    )
    assert 0.3 < float(np.mean(values > 0)) < 0.5  # not the median: a skewed component
    with pytest.raises(InputError, match="cut='sign' makes 2 strata; n_strata=3 does not apply"):
        pca_strata(x, x, n_strata=3, names=["a", "b"], reference_labels=np.zeros(500), cut="sign")
    with pytest.raises(InputError, match="scaling must be one of 'standardize', 'center'"):
        first_principal_component(x, scaling="none")  # type: ignore[arg-type]
    with pytest.raises(InputError, match="cut must be one of 'quantiles', 'sign'"):
        pca_strata(x, x, names=["a", "b"], reference_labels=np.zeros(500), cut="median")  # type: ignore[arg-type]


def test_defaults_are_standardised_quantiles() -> None:
    x = _features(13, n=400, k=3)
    y = np.zeros(200)
    default = pca_strata(x[:200], x[200:], names=["a", "b", "c"], reference_labels=y)
    explicit = pca_strata(
        x[:200],
        x[200:],
        n_strata=3,
        names=["a", "b", "c"],
        reference_labels=y,
        scaling="standardize",
        cut="quantiles",
    )
    np.testing.assert_array_equal(default.reference_strata, explicit.reference_strata)
    np.testing.assert_array_equal(default.target_strata, explicit.target_strata)
    np.testing.assert_array_equal(default.cut_points, explicit.cut_points)
    assert default.loadings == explicit.loadings
    assert (default.scaling, default.cut, default.n_strata) == ("standardize", "quantiles", 3)


def _uncorrelated(seed: int, n: int = 4000, k: int = 6) -> FloatArray:
    """Like the outputs of an earlier PCA: independent columns of falling variance."""
    return np.random.default_rng(seed).normal(size=(n, k)) * np.geomspace(3.0, 0.5, k)


def test_weak_component_rule() -> None:
    assert weak_first_component(0.26) and not weak_first_component(0.25)
    assert weak_first_component(math.inf) and not weak_first_component(0.0)  # one feature: 0
    x = _uncorrelated(14)
    names = [f"v{i}" for i in range(x.shape[1])]
    y = np.zeros(2000)
    standardised = pca_strata(x[:2000], x[2000:], names=names, reference_labels=y)
    assert standardised.weak_component  # about 1/k = 17% each way: no direction
    assert standardised.explained_variance_ratio < 0.2
    centred = pca_strata(x[:2000], x[2000:], names=names, reference_labels=y, scaling="center")
    assert not centred.weak_component and centred.explained_variance_ratio > 0.5
    assert centred.loadings["v0"] > 0.99  # it follows the widest column
    assert centred.direction_error < 0.05


def test_the_rule_reads_the_direction_not_the_share_it_explains() -> None:
    """Two standardised features correlated 0.3 explain 65% each way, under 1.5/k = 75%, yet
    their component is (0.707, 0.707) on every sample of 40,000 rows: not weak (the share
    rule warned). 28 noise features on 200 rows explain 5.8% by sampling alone, above 1.5/28:
    weak (the share rule missed it)."""
    rng = np.random.default_rng(21)
    a = rng.normal(size=40_000)
    b = 0.3 * a + math.sqrt(1.0 - 0.09) * rng.normal(size=40_000)
    correlated = first_principal_component(np.column_stack([a, b]))
    assert correlated.explained_variance_ratio < 0.75
    assert not weak_first_component(correlated.direction_error)
    noise = first_principal_component(rng.normal(size=(200, 28)))
    assert noise.explained_variance_ratio > 1.5 / 28
    assert weak_first_component(noise.direction_error)


@pytest.mark.parametrize(("rho", "n"), [(0.3, 2000), (0.1, 4000)])
def test_the_direction_error_matches_the_spread_over_samples(rho: float, n: int) -> None:
    """Anderson's large-sample error of a covariance's leading eigenvector (centred features
    of spreads 1.3 and 1) against the spread of its angle over 300 independent samples:
    within 20% (the spread's own sampling error is about 4%). Standardised, two features
    have the direction (1, 1)/sqrt(2) on every sample, and the error overstates it."""
    rng = np.random.default_rng(int(rho * 100) + n)
    angles, errors = [], []
    for _ in range(300):
        a = rng.normal(size=n)
        b = rho * a + math.sqrt(1.0 - rho * rho) * rng.normal(size=n)
        fit = first_principal_component(np.column_stack([1.3 * a, b]), scaling="center")
        angles.append(math.atan2(fit.loadings[1], fit.loadings[0]))
        errors.append(fit.direction_error)
    spread = float(np.std(angles))
    assert float(np.median(errors)) == pytest.approx(spread, rel=0.2)


def test_standardised_component_of_uncorrelated_features_is_noise_centred_is_not() -> None:
    fits = {
        scaling: [first_principal_component(_uncorrelated(s), scaling=scaling) for s in (0, 1)]
        for scaling in ("standardize", "center")
    }
    assert abs(fits["standardize"][0].loadings @ fits["standardize"][1].loadings) < 0.5
    assert abs(fits["center"][0].loadings @ fits["center"][1].loadings) > 0.999


@pytest.mark.parametrize("scaling", ["standardize", "center"])
@pytest.mark.parametrize("cut", ["quantiles", "sign"])
def test_same_strata_on_every_run_and_row_order(scaling: str, cut: str) -> None:
    x = _features(15, n=600, k=4)
    y = (np.random.default_rng(15).random(300) < 0.3).astype(float)
    options = {"names": ["a", "b", "c", "d"], "scaling": scaling, "cut": cut}
    first = pca_strata(x[:300], x[300:], reference_labels=y, **options)  # type: ignore[arg-type]
    again = pca_strata(x[:300], x[300:], reference_labels=y, **options)  # type: ignore[arg-type]
    np.testing.assert_array_equal(first.reference_strata, again.reference_strata)
    np.testing.assert_array_equal(first.target_strata, again.target_strata)
    assert first.loadings == again.loadings
    order = np.random.default_rng(16).permutation(300)
    shuffled = pca_strata(x[:300][order], x[300:], reference_labels=y[order], **options)  # type: ignore[arg-type]
    np.testing.assert_array_equal(shuffled.reference_strata, first.reference_strata[order])
    np.testing.assert_array_equal(shuffled.target_strata, first.target_strata)
    for name, value in first.loadings.items():
        assert shuffled.loadings[name] == pytest.approx(value, abs=1e-12)
    # the sign convention: the largest loading is positive, so negating every feature keeps
    # the loadings and swaps the sides of the cut
    lead = max(first.loadings, key=lambda k: abs(first.loadings[k]))
    assert first.loadings[lead] > 0
    if cut == "sign":
        negated = pca_strata(-x[:300], -x[300:], reference_labels=y, **options)  # type: ignore[arg-type]
        for name, value in first.loadings.items():
            assert negated.loadings[name] == pytest.approx(value, abs=1e-10)
        swapped = np.where(first.reference_strata == "pc1", "pc2", "pc1")
        np.testing.assert_array_equal(negated.reference_strata, swapped)


# ------------------------------------------------------------- the workflow and the command


def _pca_like_files(tmp_path: Path, seed: int = 17) -> tuple[Path, Path]:
    """Reference and target rows with features like an earlier PCA's outputs (v0 widest and
    driving the labels), a score and a label."""
    rng = np.random.default_rng(seed)
    paths = []
    for name, n in (("ref.csv", 3000), ("tgt.csv", 2000)):
        x = _uncorrelated(int(rng.integers(1 << 30)), n=n, k=4)
        label = (rng.random(n) < 1 / (1 + np.exp(-(-2.0 + 0.8 * x[:, 0])))).astype(np.int64)
        score = 1 / (1 + np.exp(-(0.8 * x[:, 0] + rng.normal(size=n))))
        frame = pl.DataFrame({f"v{i}": x[:, i] for i in range(4)})
        frame = frame.with_columns(score=score, label=label)
        frame.write_csv(tmp_path / name)
        paths.append(tmp_path / name)
    return paths[0], paths[1]


def test_workflow_warns_on_a_weak_component(tmp_path: Path) -> None:
    reference, target = _pca_like_files(tmp_path)
    warnings: list[str] = []
    result = run_rerank_strata(
        RerankStrataRequest(
            reference=str(reference),
            target=str(target),
            pca_features="v0,v1,v2,v3",
            output=str(tmp_path / "o.csv"),
        ),
        warn=warnings.append,
    )
    assert result.pca is not None and result.pca.weak_component
    share, error = result.pca.explained_variance_ratio, result.pca.direction_error
    assert error > 0.25
    assert warnings == [
        "the first principal component (standardize) of 4 features is close to an arbitrary "
        f"direction: its direction's standard error is {error:.2f} rad, above 0.25 (it "
        f"explains {share:.1%} of the variance; uncorrelated features give about 1/k = "
        "25.0%), so the strata follow noise; if the features share one scale (e.g. outputs of "
        "an earlier PCA) try --pca-scaling center; else choose correlated features or "
        "--strata-col"
    ]
    warnings.clear()
    centred = run_rerank_strata(
        RerankStrataRequest(
            reference=str(reference),
            target=str(target),
            pca_features="v0,v1,v2,v3",
            pca_scaling="center",
            output=str(tmp_path / "o.csv"),
        ),
        warn=warnings.append,
    )
    assert warnings == [] and centred.pca is not None and not centred.pca.weak_component


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"strata_col": "v0", "pca_cut": "sign"}, "--pca-cut applies only with --pca-features"),
        ({"strata_col": "v0", "n_strata": 3}, "--n-strata applies only with --pca-features"),
        (
            {"strata_col": "v0", "pca_scaling": "center"},
            "--pca-scaling applies only with --pca-features",
        ),
        (
            {"pca_features": "v0,v1", "pca_cut": "sign", "n_strata": 3},
            "--pca-cut sign makes 2 strata (component <= 0 and > 0); --n-strata 3 needs "
            "--pca-cut quantiles",
        ),
    ],
)
def test_pca_option_usage_errors(tmp_path: Path, options: dict[str, object], message: str) -> None:
    reference, target = _pca_like_files(tmp_path)
    request = RerankStrataRequest(
        reference=str(reference),
        target=str(target),
        output=str(tmp_path / "o.csv"),
        **options,  # type: ignore[arg-type]
    )
    with pytest.raises(UsageError) as caught:
        run_rerank_strata(request)
    assert str(caught.value) == message
    assert not (tmp_path / "o.csv").exists()


def test_paper_variant_end_to_end(run_calib: RunCalib, tmp_path: Path) -> None:
    reference, target = _pca_like_files(tmp_path)
    out, report = tmp_path / "o.csv", tmp_path / "r.json"
    done = run_calib(
        [
            "rerank-strata",
            "--reference",
            str(reference),
            "--target",
            str(target),
            "--pca-features",
            "v0,v1,v2,v3",
            "--pca-scaling",
            "center",
            "--pca-cut",
            "sign",
            "-o",
            str(out),
            "--report",
            str(report),
        ]
    )
    assert done.returncode == 0, done.stderr
    assert "warning:" not in done.stderr.decode()
    pca = json.loads(report.read_text())["pca"]
    assert (pca["scaling"], pca["cut"], pca["n_strata"], pca["cut_points"]) == (
        "center",
        "sign",
        2,
        [0.0],
    )
    assert pca["weak_component"] is False and pca["loadings"]["v0"] > 0.99
    rates = pca["reference_label_rate"]
    assert rates["pc1"] < rates["pc2"]  # v0 drives the labels; pc2 is v0 above its mean
    # the target's strata are the sign of its centred component (pooled means)
    pooled = pl.concat([pl.read_csv(reference), pl.read_csv(target)])
    x = pooled.select([f"v{i}" for i in range(4)]).to_numpy()
    loadings = np.array([pca["loadings"][f"v{i}"] for i in range(4)])
    values = (x - x.mean(axis=0)) @ loadings
    expected = np.where(values[3000:] > 0, "pc2", "pc1")
    np.testing.assert_array_equal(pl.read_csv(out)["pca_stratum"].to_numpy(), expected)


def test_a_constant_column_changes_nothing() -> None:
    """Centred on its value exactly (all zeros), scale 1: the component and its share of
    the variance are those of the other columns, at any row count."""
    rng = np.random.default_rng(8)
    for n in (1000, 5000):
        x = rng.normal(size=(n, 3)) @ rng.normal(size=(3, 3))
        fit = first_principal_component(np.column_stack([x, np.full(n, 0.3)]))
        plain = first_principal_component(x)
        assert fit.scales[-1] == 1.0 and fit.loadings[-1] == 0.0
        np.testing.assert_allclose(fit.loadings[:3], plain.loadings, atol=1e-12)
        assert fit.explained_variance_ratio == pytest.approx(plain.explained_variance_ratio)


@pytest.mark.parametrize("solver", ["svd", "covariance"])
@pytest.mark.parametrize("scale", [1e-160, 1e80])
def test_features_far_from_unit_scale(solver: str, scale: float) -> None:
    """Centred only, features of 1e80 or 1e-160 give the component of the same features at
    unit scale (the rotations work on an exactly rescaled copy: no overflow, no underflow)."""
    rng = np.random.default_rng(9)
    x = rng.normal(size=(500, 4)) @ rng.normal(size=(4, 4))
    unit = first_principal_component(x, scaling="center", solver=solver)  # type: ignore[arg-type]
    far = first_principal_component(x * scale, scaling="center", solver=solver)  # type: ignore[arg-type]
    np.testing.assert_allclose(far.loadings, unit.loadings, atol=1e-10)
    assert far.explained_variance_ratio == pytest.approx(unit.explained_variance_ratio)


@pytest.mark.parametrize("solver", ["svd", "covariance"])
@pytest.mark.parametrize("factor", [1e-200, 1e-150, 1e-20, 1e20, 1e200])
def test_standardising_is_unit_free_at_any_scale(solver: str, factor: float) -> None:
    """A column in other units gives the same standardised component: a spread under 2e-15
    was taken for rounding noise (loading 3e-21), and 1e200 squared to inf (loading 0)."""
    x = _features(31, n=500, k=3)
    plain = first_principal_component(x, solver=solver)  # type: ignore[arg-type]
    scaled = x.copy()
    scaled[:, 1] *= factor
    other = first_principal_component(scaled, solver=solver)  # type: ignore[arg-type]
    np.testing.assert_allclose(other.loadings, plain.loadings, rtol=1e-9, atol=1e-12)
    assert other.explained_variance_ratio == pytest.approx(plain.explained_variance_ratio)


@pytest.mark.parametrize("solver", ["svd", "covariance"])
@pytest.mark.parametrize("factor", [1e-200, 1e200])
def test_centring_columns_far_apart_in_size_converges(solver: str, factor: float) -> None:
    """Centred only, the column of the larger numbers is the component; a column 1e200 times
    smaller than another stalled the Jacobi rotations on subnormal products (exit 70)."""
    x = _features(32, n=500, k=2)
    x[:, 0] *= factor
    pca = first_principal_component(x, solver=solver, scaling="center")  # type: ignore[arg-type]
    big = 0 if factor > 1 else 1
    assert pca.loadings[big] == pytest.approx(1.0)
    assert abs(pca.loadings[1 - big]) < 1e-100


def test_importance_weights_count_as_kish_rows_in_the_direction_error() -> None:
    """Importance weights of 1/rate are no extra rows: scaling them changes nothing, where
    frequency weights of 100 count each row 100 times (an error 10 times smaller)."""
    x = _features(33, n=800, k=3)
    plain = first_principal_component(x, scaling="center")
    heavy = np.full(800, 100.0)
    importance = first_principal_component(
        x, sample_weight=heavy, scaling="center", weight_kind="importance"
    )
    frequency = first_principal_component(x, sample_weight=heavy, scaling="center")
    assert importance.direction_error == pytest.approx(plain.direction_error, rel=1e-9)
    assert frequency.direction_error == pytest.approx(plain.direction_error / 10.0, rel=1e-9)
    np.testing.assert_allclose(importance.loadings, plain.loadings, rtol=1e-12)
