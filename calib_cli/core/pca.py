"""Strata from data: the first principal component, cut at quantiles or at its sign (Zuo 2021,
Algorithm 2).

The features of the pooled reference and target rows are centred, and with
``scaling="standardize"`` also scaled to unit variance,

.. math:: z_{ik} = (x_{ik} - \\mu_k) / \\sigma_k,

(weighted means, and standard deviations with divisor :math:`\\sum_i w_i`, as
``sklearn.preprocessing.StandardScaler``); with ``scaling="center"`` (Algorithm 2 as the paper
runs it: plain PCA) :math:`\\sigma_k = 1`. The first principal component is the leading right
singular vector :math:`v_1` of :math:`W^{1/2} Z = U \\Sigma V^\\top` (reference 004: the columns
of :math:`V` are the eigenvectors of :math:`Z^\\top W Z`), with explained variance ratio
:math:`\\sigma_1^2 / \\sum_k \\sigma_k^2`. Each row's component value is :math:`z_i^\\top v_1`.
The strata are cut at pooled quantiles of those values (:func:`assign_strata`), or at 0, the
sign of the centred component, as the paper's experiment does (:func:`sign_strata`).

Sign convention: :math:`v_1` is defined up to sign; calib makes the loading of largest
magnitude positive (the first of several tied within a relative 1e-9), so the strata are the
same on every run and for any row order, and the upper stratum leans to the side where that
feature is above its mean.

Which scaling: centring keeps the features' own variances, so :math:`v_1` follows the
columns of largest spread (right for features on one scale, such as the outputs of an
earlier PCA, where standardising makes every direction's variance about equal and :math:`v_1`
an arbitrary one); standardising is unit-free (right for columns in different units, where
the centred :math:`v_1` is little more than the column with the largest numbers). Either way
a first component whose direction the data do not fix (its standard error,
:func:`direction_error`, is large: uncorrelated features, each direction explaining about
:math:`1/k`) is close to arbitrary (:func:`weak_first_component`).

References
----------
C. Zuo, "Calibration for Stratified Classification Models", 2021 (reference 002), Algorithm 2
and Section 3.2 (two strata by the sign of the first component).
Reference 004, "Computing PCA with SVD".
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
import numpy.typing as npt

from calib_cli.core.checks import bad_values_message, check_weights
from calib_cli.core.dots import column_svd, dot, rows_dot, symmetric_eigen, weighted_columns
from calib_cli.errors import InputError
from calib_cli.types import FloatArray, IntArray, WeightKind

__all__ = [
    "CHUNK_ROWS",
    "DEFAULT_N_STRATA",
    "SVD_MAX_ROWS",
    "SVD_MAX_WORK",
    "WEAK_DIRECTION_ERROR",
    "PCACut",
    "PCAResult",
    "PCAScaling",
    "PCASolver",
    "PcaStrata",
    "assign_strata",
    "direction_error",
    "first_principal_component",
    "pca_strata",
    "project_first_component",
    "sign_strata",
    "strata_from_edges",
    "weak_first_component",
]

PCASolver = Literal["auto", "svd", "covariance"]
"""How the leading component is computed: thin SVD of the data, or the eigenvectors of the k x k
covariance (both by Jacobi rotations in a fixed order, :mod:`calib_cli.core.dots`)."""
PCAScaling = Literal["standardize", "center"]
"""How the features enter the component: centred and scaled to unit variance, or centred only
(Algorithm 2 as the paper runs it)."""
PCACut = Literal["quantiles", "sign"]
"""Where the component is cut: at pooled quantiles into ``n_strata`` strata, or at 0 (its sign)
into two, as the paper's experiment."""

DEFAULT_N_STRATA = 3
"""Strata cut at quantiles when ``n_strata`` is not given."""
WEAK_DIRECTION_ERROR = 0.25
"""A first component whose direction's standard error (:func:`direction_error`) is above this
many radians (14 degrees; two such estimates agree to ``|cos|`` of about 0.94) is weak."""

SVD_MAX_ROWS = 200_000
"""``solver="auto"`` uses the thin SVD up to this many rows, the covariance above it."""
SVD_MAX_WORK = 20_000_000
"""...and up to this many rows times features squared: a sweep of Jacobi rotations costs
about that many products, and the SVD takes 6-10 sweeps (0.2-0.6 s here at the limit: e.g.
200,000 rows of 10 features); the covariance costs one."""
COVARIANCE_ROWS = 1 << 16
"""Rows whose products the covariance adds at a time (a ``k x COVARIANCE_ROWS`` temporary)."""
CHUNK_ROWS = 1 << 20
"""Rows per chunk when accumulating means, scales and the covariance (bounded memory)."""

_SOLVERS = ("auto", "svd", "covariance")
_SCALINGS = ("standardize", "center")
_CUTS = ("quantiles", "sign")
_SIGN_TIE = 1e-9  # loadings within this relative distance of the largest count as tied


@dataclass(frozen=True)
class PCAResult:
    """The first principal component of centred (and possibly standardised) features.

    Attributes
    ----------
    loadings : ndarray of shape (k,)
        Unit vector :math:`v_1`; the sign makes the largest-magnitude loading positive (the
        first of several tied ones), so the result is deterministic.
    means, scales : ndarray of shape (k,)
        Weighted column means, and the divisors: standard deviations under ``"standardize"``
        (a constant column gets scale 1), all ones under ``"center"``.
    explained_variance_ratio : float
        Share of the total variance (of the scaled features) along :math:`v_1`.
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
    scaling: str = "standardize"
    direction_error: float = 0.0


def direction_error(variances: npt.ArrayLike, rows: float) -> float:
    """The standard error, in radians, of the first component's direction estimated from
    ``rows`` rows whose component variances are ``variances`` (largest first): Anderson's
    (1963) large-sample variance of a sample eigenvector,

    .. math:: \\operatorname{se}^2 = \\frac{1}{n} \\sum_{j \\ge 2}
              \\frac{\\lambda_1 \\lambda_j}{(\\lambda_1 - \\lambda_j)^2},

    exact for a covariance's eigenvector (``scaling="center"``) on normal rows as :math:`n`
    grows (tested against the spread over samples, within 20%), an approximation otherwise:
    on standardised features it overstates (two of them have the direction
    :math:`(1, \\pm 1)/\\sqrt 2` on every sample); ``inf`` when
    :math:`\\lambda_2 = \\lambda_1` (no direction to estimate), 0 with one feature. Two
    standardised features correlated 0.3 on 40,000 rows: 0.008; 28 uncorrelated features on
    200 rows: several radians, though the first explains 5.8% > 1.5/28 of the variance (the
    sample's leading variance is biased upwards).

    >>> round(direction_error([1.3, 0.7], 40_000), 4), direction_error([1.0, 1.0], 10**6)
    (0.0079, inf)
    """
    lam = np.asarray(variances, dtype=np.float64)
    if lam.size < 2:
        return 0.0
    gaps = lam[0] - lam[1:]
    if np.any(gaps <= 0.0) or rows <= 0.0:
        return math.inf
    return math.sqrt(float(np.sum(lam[0] * lam[1:] / (gaps * gaps))) / rows)


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


def _standardisation(x: FloatArray, w: FloatArray) -> tuple[FloatArray, FloatArray, FloatArray]:
    """Weighted means and (divisor sum of weights) standard deviations, in two chunked passes;
    and each column's largest distance from its mean (rows of positive weight)."""
    total = float(w.sum())
    k = x.shape[1]
    sums = np.zeros(k)
    low, high = np.full(k, np.inf), np.full(k, -np.inf)
    for start in _chunks(x.shape[0]):
        part, weights = x[start : start + CHUNK_ROWS], w[start : start + CHUNK_ROWS]
        sums += weighted_columns(weights, part)
        held = part[weights > 0.0]
        if held.size:
            low, high = np.minimum(low, held.min(axis=0)), np.maximum(high, held.max(axis=0))
    # A constant column (over the rows of positive weight) is centred on its value exactly, so
    # it is all zeros after centring (a mean of n equal values may round away from them) and
    # gets scale 1, as in StandardScaler: it does not affect the component.
    constant = low == high
    means = np.where(constant, low, sums / total)
    reach = np.nan_to_num(np.maximum(high - means, means - low), posinf=0.0, neginf=0.0)
    # each column's squares taken over a power of two near its reach (exact: the same bits
    # where nothing overflows), so columns of 1e200 do not square to inf nor 1e-200 to 0
    power = np.where(reach > 0.0, np.ldexp(1.0, np.frexp(reach)[1]), 1.0)
    squares = np.zeros(k)
    for start in _chunks(x.shape[0]):
        centred = (x[start : start + CHUNK_ROWS] - means) / power
        squares += weighted_columns(w[start : start + CHUNK_ROWS], centred * centred)
    scales = power * np.sqrt(squares / total)
    # also a column of rounding noise far below its magnitude (relative: a column of tiny
    # numbers spread as widely as they are large is no noise)
    tiny = scales <= 10.0 * np.finfo(np.float64).eps * np.abs(means)
    return means, np.where(constant | tiny, 1.0, scales), reach


def first_principal_component(
    features: npt.ArrayLike,
    *,
    sample_weight: npt.ArrayLike | None = None,
    solver: PCASolver = "auto",
    svd_max_rows: int = SVD_MAX_ROWS,
    names: Sequence[str] | None = None,
    scaling: PCAScaling = "standardize",
    weight_kind: WeightKind = "frequency",
) -> PCAResult:
    """The first principal component of centred, by default standardised, features
    (Algorithm 2, step 2).

    ``solver="svd"`` takes the thin SVD of :math:`W^{1/2} Z / \\sqrt{\\sum w}` (reference 004;
    the more stable choice for nearly collinear columns) by one-sided Jacobi rotations
    (:func:`~calib_cli.core.dots.column_svd`). ``"covariance"`` accumulates the k x k matrix
    :math:`Z^\\top W Z / \\sum w` in chunks of rows and takes its eigendecomposition by Jacobi
    rotations (:func:`~calib_cli.core.dots.symmetric_eigen`): memory O(k^2) beyond the input,
    for 10 million rows. Every product adds in a fixed order, so the component is the same
    bits whatever the BLAS (LAPACK's SVD was not). ``"auto"`` uses the SVD up to
    ``svd_max_rows`` rows (and :data:`SVD_MAX_WORK` rows times features squared: each of its
    sweeps costs that) and the covariance above.

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
    scaling : {"standardize", "center"}
        ``"standardize"``: centre and divide each column by its standard deviation (the
        component of the correlation matrix). ``"center"``: centre only (the component of the
        covariance matrix), as the paper's PCA.
    weight_kind : {"frequency", "importance"}
        What the weights mean for :attr:`PCAResult.direction_error`'s rows: frequency weights
        count as rows (weights below 1 on average as rows of their mean), importance weights
        as Kish's effective rows :math:`(\\sum w)^2 / \\sum w^2`. The component is the same.

    Returns
    -------
    PCAResult

    Examples
    --------
    >>> x = np.array([[1.0, 2.0], [2.0, 4.1], [3.0, 5.9], [4.0, 8.0]])
    >>> pca = first_principal_component(x)
    >>> pca.loadings.round(4).tolist(), round(pca.explained_variance_ratio, 4)
    ([0.7071, 0.7071], 0.9998)

    Centred only, the second column (twice the spread) weighs more:

    >>> pca = first_principal_component(x, scaling="center")
    >>> pca.loadings.round(4).tolist(), pca.scales.tolist()
    ([0.4506, 0.8927], [1.0, 1.0])
    """
    if solver not in _SOLVERS:
        options = ", ".join(repr(o) for o in _SOLVERS)
        raise InputError(f"solver must be one of {options}, got {solver!r}")
    if scaling not in _SCALINGS:
        options = ", ".join(repr(o) for o in _SCALINGS)
        raise InputError(f"scaling must be one of {options}, got {scaling!r}")
    x = _check_features(features, names)
    n, k = x.shape
    w = check_weights(sample_weight, n)
    total = float(w.sum())
    if total <= 0.0:
        raise InputError("sample_weight sums to zero: no rows to fit the component on")
    means, scales, reach = _standardisation(x, w)
    if scaling == "center":
        scales = np.ones(k)
    # the centred values times a power of two (exact) that brings the largest near 1: their
    # products neither overflow nor underflow, whatever the features' units
    largest = float(np.max(reach / scales)) if k else 0.0
    unit = math.ldexp(1.0, -math.frexp(largest)[1]) if 0.0 < largest < math.inf else 1.0
    inner = scales / unit  # exact (a power of two); the results keep ``scales``
    small = n <= svd_max_rows and n * k * k <= SVD_MAX_WORK
    used = solver if solver != "auto" else ("svd" if small else "covariance")
    # Every product below adds in a fixed order (calib_cli.core.dots), never a BLAS kernel's:
    # the loadings, variances and cut points are the same bits on every machine.
    if used == "svd":
        z = _flushed((x - means) / inner * np.sqrt(w / total)[:, None])
        singular, right = column_svd(z)
        variances = singular**2
        loadings = right[:, 0]
    else:
        cov = np.zeros((k, k))
        for start in range(0, n, COVARIANCE_ROWS):
            rows = slice(start, start + COVARIANCE_ROWS)
            zt = _flushed(np.array(((x[rows] - means) / inner).T, order="C"))  # a feature per row
            weighted = zt * w[rows]
            for i in range(k):  # each entry's products added pairwise along the rows
                cov[i, i:] += np.sum(weighted[i] * zt[i:], axis=1)
        cov /= total
        cov = np.triu(cov) + np.triu(cov, 1).T  # symmetric by construction
        eigenvalues, vectors = symmetric_eigen(cov)
        variances = np.maximum(eigenvalues, 0.0)  # a covariance's: rounding may dip below 0
        loadings = vectors[:, 0]
    total_variance = float(variances.sum())
    if total_variance <= 0.0:
        raise InputError("every feature column is constant: there is no principal component")
    loadings = loadings / math.sqrt(dot(loadings, loadings))
    ordered = np.sort(variances)[::-1]
    counted = float(np.count_nonzero(w > 0.0))
    if weight_kind == "importance":  # Kish's effective rows
        effective = total * total / float(np.sum(w * w))
    else:  # rows of weight 1 or more count as their weight, lighter ones as rows
        effective = counted if total < counted else total
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
        scaling=scaling,
        direction_error=direction_error(ordered, effective),
    )


#: Scaled values below this (whose squares would be subnormal, 1e-154 of the largest) are 0.
_FLUSH = math.ldexp(1.0, -510)


def _flushed(z: FloatArray) -> FloatArray:
    """``z`` (the largest value near 1) with values below :data:`_FLUSH` set to 0: their share
    of any variance is below 1e-300, and subnormal products stalled the Jacobi rotations (a
    centred column of 1e-200 beside one of 1)."""
    z[np.abs(z) < _FLUSH] = 0.0
    return z


def weak_first_component(direction_error_radians: float) -> bool:
    """Whether the first component is close to an arbitrary direction: its direction's
    standard error (:func:`direction_error`) is above :data:`WEAK_DIRECTION_ERROR`.

    With :math:`k` features of equal variance and no correlation (say, standardised outputs
    of an earlier PCA) every direction explains about :math:`1/k`, the leading variances are
    as close as sampling makes them, and the sample's leading direction is noise: two
    independent samples give nearly orthogonal components. Measured on the direction, not on
    the share it explains: two standardised features correlated 0.3 share 65% each way (under
    1.5/k = 75%) but have one clear direction on 40,000 rows, and 28 noise features on 200 rows
    explain 5.8%, above 1.5/28, by sampling alone. One feature always has its direction.

    >>> weak_first_component(0.6), weak_first_component(0.01), weak_first_component(0.0)
    (True, False, False)
    """
    return float(direction_error_radians) > WEAK_DIRECTION_ERROR


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
        out[start : start + CHUNK_ROWS] = rows_dot((block - pca.means) / pca.scales, pca.loadings)
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


def sign_strata(component_values: npt.ArrayLike) -> tuple[IntArray, FloatArray]:
    """Cut centred component values at 0 into two strata, by their sign (Zuo 2021,
    Section 3.2).

    Stratum 0 holds :math:`s \\le 0`, stratum 1 :math:`s > 0` (the rule of
    :func:`strata_from_edges` with the one cut point 0; Algorithm 2 writes half-open
    intervals the other way round, which differs only for a row exactly at 0). When every
    value lies on one side there is one stratum and no cut point.

    Returns
    -------
    codes : ndarray of int64, shape (n,)
    edges : ndarray of shape (1,) or (0,)
        ``[0.0]``, or empty when one side is empty.

    >>> codes, edges = sign_strata([-1.5, 0.0, 2.0, 0.5])
    >>> codes.tolist(), edges.tolist()
    ([0, 0, 1, 1], [0.0])
    """
    values = np.asarray(component_values, dtype=np.float64)
    if values.ndim != 1 or values.size == 0:
        raise InputError("component_values must be a non-empty 1-D array")
    if not np.all(np.isfinite(values)):
        bad = ~np.isfinite(values)
        raise InputError(bad_values_message("component", "missing or infinite", bad, values))
    both_sides = bool(np.any(values <= 0.0)) and bool(np.any(values > 0.0))
    edges = np.zeros(1 if both_sides else 0)
    return strata_from_edges(values, edges), edges


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
    ``scaling`` and ``cut`` are the variant used; ``weak_component`` applies
    :func:`weak_first_component`.
    """

    reference_strata: npt.NDArray[np.str_]
    target_strata: npt.NDArray[np.str_]
    features: tuple[str, ...]
    loadings: dict[str, float]
    explained_variance_ratio: float
    cut_points: FloatArray
    n_strata: int
    reference_label_rate: dict[str, float | None]
    scaling: str = "standardize"
    cut: str = "quantiles"
    weak_component: bool = False
    direction_error: float = 0.0


def pca_strata(
    reference_features: npt.ArrayLike,
    target_features: npt.ArrayLike,
    *,
    n_strata: int | None = None,
    names: Sequence[str],
    reference_labels: npt.ArrayLike,
    reference_weights: npt.ArrayLike | None = None,
    target_weights: npt.ArrayLike | None = None,
    scaling: PCAScaling = "standardize",
    cut: PCACut = "quantiles",
    weight_kind: WeightKind = "frequency",
) -> PcaStrata:
    """Zuo (2021), Algorithm 2: centre (by default also standardise) the pooled reference and
    target features, take their first principal component, cut it into strata, and give each
    stratum's (weighted) label rate in the reference.

    ``cut="quantiles"`` makes ``n_strata`` strata (default :data:`DEFAULT_N_STRATA`) at pooled
    quantiles (:func:`assign_strata`); ``cut="sign"`` makes two, component :math:`\\le 0` and
    :math:`> 0` (:func:`sign_strata`; ``n_strata``, if given, must be 2). The paper's variant
    is ``scaling="center", cut="sign"``. The weights (each side's, 1 where not given) weigh
    the pooled rows everywhere: in the means, the scales, the component and the quantiles, so
    a row of weight 2 counts as two rows (the reference of ``resample --weight-col-out``).

    >>> x = np.array([[0.0, 0.1], [1.0, 0.9], [2.0, 2.2], [3.0, 2.9]])
    >>> out = pca_strata(x[:2], x[2:], n_strata=2, names=["a", "b"], reference_labels=[0, 1])
    >>> out.reference_strata.tolist(), out.target_strata.tolist()
    (['pc1', 'pc1'], ['pc2', 'pc2'])
    >>> paper = pca_strata(
    ...     x[:2], x[2:], names=["a", "b"], reference_labels=[0, 1], scaling="center", cut="sign"
    ... )
    >>> paper.reference_strata.tolist(), paper.target_strata.tolist(), paper.cut_points.tolist()
    (['pc1', 'pc1'], ['pc2', 'pc2'], [0.0])
    """
    if cut not in _CUTS:
        options = ", ".join(repr(o) for o in _CUTS)
        raise InputError(f"cut must be one of {options}, got {cut!r}")
    if cut == "sign" and n_strata is not None and n_strata != 2:
        raise InputError(f"cut='sign' makes 2 strata; n_strata={n_strata!r} does not apply")
    ref = np.asarray(reference_features, dtype=np.float64)
    tgt = np.asarray(target_features, dtype=np.float64)
    pooled = np.vstack([ref, tgt])
    weighted = reference_weights is not None or target_weights is not None
    pooled_weights = (
        np.concatenate(
            [
                check_weights(reference_weights, ref.shape[0]),
                check_weights(target_weights, tgt.shape[0]),
            ]
        )
        if weighted
        else None
    )
    pca = first_principal_component(
        pooled,
        sample_weight=pooled_weights,
        names=list(names),
        scaling=scaling,
        weight_kind=weight_kind,
    )
    values = project_first_component(pca, pooled)
    if cut == "sign":
        codes, edges = sign_strata(values)
    else:
        wanted = DEFAULT_N_STRATA if n_strata is None else n_strata
        codes, edges = assign_strata(values, n_strata=wanted, sample_weight=pooled_weights)
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
        scaling=pca.scaling,
        cut=cut,
        weak_component=weak_first_component(pca.direction_error),
        direction_error=pca.direction_error,
    )
