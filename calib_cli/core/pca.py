"""Strata from data: the first principal component, cut at quantiles (Zuo 2021, Algorithm 2).

The features of the pooled reference and target rows are standardised and centred,

.. math:: z_{ik} = (x_{ik} - \\mu_k) / \\sigma_k,

(weighted means, and standard deviations with divisor :math:`\\sum_i w_i`, as
``sklearn.preprocessing.StandardScaler``), and the first principal component is the leading
right singular vector :math:`v_1` of :math:`W^{1/2} Z = U \\Sigma V^\\top` (reference 004: the
columns of :math:`V` are the eigenvectors of :math:`Z^\\top W Z`), with explained variance
ratio :math:`\\sigma_1^2 / \\sum_k \\sigma_k^2`. Each row's component value is
:math:`z_i^\\top v_1`. The strata are cut at pooled quantiles of those values
(:func:`assign_strata`).

References
----------
C. Zuo, "Calibration for Stratified Classification Models", 2021 (reference 002), Algorithm 2.
Reference 004, "Computing PCA with SVD".
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
import numpy.typing as npt

from calib_cli.core.checks import bad_values_message, check_weights
from calib_cli.errors import InputError
from calib_cli.types import FloatArray, IntArray

__all__ = [
    "CHUNK_ROWS",
    "SVD_MAX_ROWS",
    "PCAResult",
    "PCASolver",
    "assign_strata",
    "first_principal_component",
    "project_first_component",
    "strata_from_edges",
]

PCASolver = Literal["auto", "svd", "covariance"]
"""How the leading component is computed: thin SVD of the data, or SVD of the k x k covariance."""

SVD_MAX_ROWS = 200_000
"""``solver="auto"`` uses the thin SVD up to this many rows, the covariance above it."""
CHUNK_ROWS = 1 << 20
"""Rows per chunk when accumulating means, scales and the covariance (bounded memory)."""

_SOLVERS = ("auto", "svd", "covariance")
_SIGN_TIE = 1e-9  # loadings within this relative distance of the largest count as tied


@dataclass(frozen=True)
class PCAResult:
    """The first principal component of standardised features.

    Attributes
    ----------
    loadings : ndarray of shape (k,)
        Unit vector :math:`v_1`; the sign makes the largest-magnitude loading positive (the
        first of several tied ones), so the result is deterministic.
    means, scales : ndarray of shape (k,)
        Weighted column means and standard deviations (a constant column gets scale 1).
    explained_variance_ratio : float
        Share of the total (standardised) variance along :math:`v_1`.
    solver : {"svd", "covariance"}
        The solver actually used.
    rows : int
        Rows the component was fitted on.
    """

    loadings: FloatArray
    means: FloatArray
    scales: FloatArray
    explained_variance_ratio: float
    solver: str
    rows: int


def _check_features(features: npt.ArrayLike, names: Sequence[str] | None) -> FloatArray:
    try:
        x = np.asarray(features, dtype=np.float64)
    except (TypeError, ValueError):
        raise InputError("features must be numeric") from None
    if x.ndim != 2:
        raise InputError(f"features must be a 2-D array (rows x columns), got shape {x.shape}")
    n, k = x.shape
    if n < 2 or k < 1:
        raise InputError(f"features need at least 2 rows and 1 column, got shape {x.shape}")
    if names is not None and len(names) != k:
        raise InputError(f"names has {len(names)} entries for {k} feature columns")
    bad = ~np.isfinite(x)
    if bad.any():
        column = int(np.flatnonzero(bad.any(axis=0))[0])
        label = names[column] if names is not None else f"feature {column}"
        raise InputError(
            bad_values_message(label, "missing or infinite", bad[:, column], x[:, column])
        )
    return x


def _chunks(n: int) -> range:
    return range(0, n, CHUNK_ROWS)


def _standardisation(x: FloatArray, w: FloatArray) -> tuple[FloatArray, FloatArray]:
    """Weighted means and (divisor sum of weights) standard deviations, in two chunked passes."""
    total = float(w.sum())
    sums = np.zeros(x.shape[1])
    for start in _chunks(x.shape[0]):
        sums += w[start : start + CHUNK_ROWS] @ x[start : start + CHUNK_ROWS]
    means = sums / total
    squares = np.zeros(x.shape[1])
    for start in _chunks(x.shape[0]):
        centred = x[start : start + CHUNK_ROWS] - means
        squares += w[start : start + CHUNK_ROWS] @ (centred * centred)
    scales = np.sqrt(squares / total)
    # a constant column (scale 0, or rounding noise far below its magnitude) gets scale 1,
    # as in StandardScaler; it is all zeros after centring and does not affect the component
    tiny = scales <= 10.0 * np.finfo(np.float64).eps * np.maximum(np.abs(means), 1.0)
    return means, np.where(tiny, 1.0, scales)


def first_principal_component(
    features: npt.ArrayLike,
    *,
    sample_weight: npt.ArrayLike | None = None,
    solver: PCASolver = "auto",
    svd_max_rows: int = SVD_MAX_ROWS,
    names: Sequence[str] | None = None,
) -> PCAResult:
    """The first principal component of standardised, centred features (Algorithm 2, step 2).

    ``solver="svd"`` takes the thin SVD ``np.linalg.svd(sqrt(w) * Z, full_matrices=False)``
    (reference 004; the more stable choice for nearly collinear columns). ``"covariance"``
    accumulates the k x k matrix :math:`Z^\\top W Z / \\sum w` in chunks of rows and takes its
    SVD (equal to its eigendecomposition, as it is symmetric positive semi-definite): memory
    O(k^2) beyond the input, for 10 million rows. ``"auto"`` uses the SVD up to
    ``svd_max_rows`` rows and the covariance above.

    Parameters
    ----------
    features : array-like of shape (n, k)
        Numeric features, finite.
    sample_weight : array-like of shape (n,), optional
        Row weights (a row of weight 2 counts as two rows).
    solver : {"auto", "svd", "covariance"}
    svd_max_rows : int
        Row limit for the thin SVD under ``solver="auto"``.
    names : sequence of str, optional
        Column names, used in error messages.

    Returns
    -------
    PCAResult

    Examples
    --------
    >>> x = np.array([[1.0, 2.0], [2.0, 4.1], [3.0, 5.9], [4.0, 8.0]])
    >>> pca = first_principal_component(x)
    >>> pca.loadings.round(4).tolist(), round(pca.explained_variance_ratio, 4)
    ([0.7071, 0.7071], 0.9998)
    """
    if solver not in _SOLVERS:
        options = ", ".join(repr(o) for o in _SOLVERS)
        raise InputError(f"solver must be one of {options}, got {solver!r}")
    x = _check_features(features, names)
    n, k = x.shape
    w = check_weights(sample_weight, n)
    total = float(w.sum())
    if total <= 0.0:
        raise InputError("sample_weight sums to zero: no rows to fit the component on")
    means, scales = _standardisation(x, w)
    used = solver if solver != "auto" else ("svd" if n <= svd_max_rows else "covariance")
    if used == "svd":
        z = (x - means) / scales * np.sqrt(w / total)[:, None]
        _, singular, vt = np.linalg.svd(z, full_matrices=False)
        variances = singular**2
        loadings = vt[0]
    else:
        cov = np.zeros((k, k))
        for start in _chunks(n):
            z = (x[start : start + CHUNK_ROWS] - means) / scales
            cov += (z * w[start : start + CHUNK_ROWS, None]).T @ z
        cov /= total
        cov = (cov + cov.T) / 2.0
        u, variances, _ = np.linalg.svd(cov)
        loadings = u[:, 0]
    total_variance = float(variances.sum())
    if total_variance <= 0.0:
        raise InputError("every feature column is constant: there is no principal component")
    loadings = loadings / np.linalg.norm(loadings)
    magnitude = np.abs(loadings)
    lead = int(np.flatnonzero(magnitude >= magnitude.max() * (1.0 - _SIGN_TIE))[0])
    if loadings[lead] < 0.0:
        loadings = -loadings
    return PCAResult(
        loadings=np.asarray(loadings, dtype=np.float64),
        means=means,
        scales=scales,
        explained_variance_ratio=float(variances[0]) / total_variance,
        solver=used,
        rows=n,
    )


def project_first_component(pca: PCAResult, features: npt.ArrayLike) -> FloatArray:
    """Each row's first-component value :math:`z_i^\\top v_1` (chunked; O(n) memory).

    >>> x = np.array([[1.0, 2.0], [2.0, 4.1], [3.0, 5.9], [4.0, 8.0]])
    >>> project_first_component(first_principal_component(x), x).round(3).tolist()
    [-1.907, -0.604, 0.604, 1.907]
    """
    x = _check_features(features, None)
    if x.shape[1] != pca.loadings.size:
        raise InputError(
            f"features have {x.shape[1]} columns but the component has {pca.loadings.size}"
        )
    out = np.empty(x.shape[0])
    for start in _chunks(x.shape[0]):
        block = x[start : start + CHUNK_ROWS]
        out[start : start + CHUNK_ROWS] = ((block - pca.means) / pca.scales) @ pca.loadings
    return out


def strata_from_edges(component_values: npt.ArrayLike, edges: npt.ArrayLike) -> IntArray:
    """Stratum codes for given cut points: stratum :math:`j` holds
    :math:`c_j < s \\le c_{j+1}` (with :math:`c_0 = -\\infty`, :math:`c_J = \\infty`).

    >>> strata_from_edges([0.5, 1.0, 1.5, 3.0], [1.0, 2.0]).tolist()
    [0, 0, 1, 2]
    """
    values = np.asarray(component_values, dtype=np.float64)
    cuts = np.asarray(edges, dtype=np.float64)
    if cuts.ndim != 1 or np.any(np.diff(cuts) <= 0.0):
        raise InputError("edges must be a strictly increasing 1-D array")
    return np.searchsorted(cuts, values, side="left").astype(np.int64)


def assign_strata(
    component_values: npt.ArrayLike,
    *,
    n_strata: int,
    sample_weight: npt.ArrayLike | None = None,
) -> tuple[IntArray, FloatArray]:
    """Cut component values into about ``n_strata`` strata at pooled quantiles (Algorithm 2,
    step 3).

    The cut points are the (weighted) quantiles at levels :math:`j / J`, :math:`j = 1 \\dots
    J - 1`, by the inverted empirical CDF (so each is a data value); stratum :math:`j` holds
    :math:`c_j < s \\le c_{j+1}`. Repeated cut points (heavy ties) and a cut at the maximum
    are dropped, so there may be fewer than ``n_strata`` strata but none is empty.

    Returns
    -------
    codes : ndarray of int64, shape (n,)
        Stratum of each row, ``0`` for the lowest values.
    edges : ndarray of shape (n_strata_used - 1,)
        The interior cut points, strictly increasing (use with :func:`strata_from_edges`).

    >>> codes, edges = assign_strata(np.arange(1.0, 11.0), n_strata=2)
    >>> codes.tolist(), edges.tolist()
    ([0, 0, 0, 0, 0, 1, 1, 1, 1, 1], [5.0])
    """
    if isinstance(n_strata, bool) or not isinstance(n_strata, int | np.integer) or n_strata < 1:
        raise InputError(f"n_strata must be a positive integer, got {n_strata!r}")
    values = np.asarray(component_values, dtype=np.float64)
    if values.ndim != 1 or values.size == 0:
        raise InputError("component_values must be a non-empty 1-D array")
    if not np.all(np.isfinite(values)):
        bad = ~np.isfinite(values)
        raise InputError(bad_values_message("component", "missing or infinite", bad, values))
    w = check_weights(sample_weight, values.size)
    if float(w.sum()) <= 0.0:
        raise InputError("sample_weight sums to zero: no rows to cut into strata")
    levels = np.arange(1, int(n_strata)) / int(n_strata)
    if levels.size == 0:
        edges = np.zeros(0)
    else:
        weights = None if sample_weight is None else w
        quantiles = np.quantile(values, levels, method="inverted_cdf", weights=weights)
        edges = np.unique(quantiles)
        edges = edges[edges < values[w > 0.0].max()]
    return strata_from_edges(values, edges), np.asarray(edges, dtype=np.float64)


@dataclass(frozen=True)
class PcaStrata:
    """Algorithm 2's strata for a reference and a target, and what the report shows.

    Strata are named ``pc1``, ``pc2``, ... in increasing order of the first component.
    """

    reference_strata: npt.NDArray[np.str_]
    target_strata: npt.NDArray[np.str_]
    features: tuple[str, ...]
    loadings: dict[str, float]
    explained_variance_ratio: float
    cut_points: FloatArray
    n_strata: int
    reference_label_rate: dict[str, float | None]


def pca_strata(
    reference_features: npt.ArrayLike,
    target_features: npt.ArrayLike,
    *,
    n_strata: int,
    names: Sequence[str],
    reference_labels: npt.ArrayLike,
    reference_weights: npt.ArrayLike | None = None,
) -> PcaStrata:
    """Zuo (2021), Algorithm 2: standardise and centre the pooled reference and target
    features, take their first principal component, cut it at pooled quantiles into
    ``n_strata`` strata, and give each stratum's (weighted) label rate in the reference.

    >>> x = np.array([[0.0, 0.1], [1.0, 0.9], [2.0, 2.2], [3.0, 2.9]])
    >>> out = pca_strata(x[:2], x[2:], n_strata=2, names=["a", "b"], reference_labels=[0, 1])
    >>> out.reference_strata.tolist(), out.target_strata.tolist()
    (['pc1', 'pc1'], ['pc2', 'pc2'])
    """
    ref = np.asarray(reference_features, dtype=np.float64)
    tgt = np.asarray(target_features, dtype=np.float64)
    pooled = np.vstack([ref, tgt])
    pca = first_principal_component(pooled, names=list(names))
    codes, edges = assign_strata(project_first_component(pca, pooled), n_strata=n_strata)
    labels = np.array([f"pc{code + 1}" for code in range(int(codes.max()) + 1)])
    ref_codes, tgt_codes = codes[: ref.shape[0]], codes[ref.shape[0] :]
    y = np.asarray(reference_labels, dtype=np.float64)
    w = (
        np.ones(ref.shape[0])
        if reference_weights is None
        else np.asarray(reference_weights, dtype=np.float64)
    )
    weight = np.bincount(ref_codes, weights=w, minlength=labels.size)
    positive = np.bincount(ref_codes, weights=w * y, minlength=labels.size)
    rates = {
        str(name): (float(positive[i] / weight[i]) if weight[i] > 0 else None)
        for i, name in enumerate(labels)
    }
    return PcaStrata(
        reference_strata=labels[ref_codes],
        target_strata=labels[tgt_codes],
        features=tuple(names),
        loadings=dict(zip(names, (float(v) for v in pca.loadings), strict=True)),
        explained_variance_ratio=float(pca.explained_variance_ratio),
        cut_points=edges,
        n_strata=int(labels.size),
        reference_label_rate=rates,
    )
