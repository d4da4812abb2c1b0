"""The :class:`ScoreSummary` type: per group, bin, grid cell and class, weighted sums; its merge
and its file forms. See the package docstring for the format and the grid."""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, cast

import numpy as np
import numpy.typing as npt

from calib_cli.core.checks import (
    REFUSED_LABEL,
    UNLABELLED,
    check_labels,
    check_scores,
    check_weights,
    require_same_length,
)

if TYPE_CHECKING:  # the fits' module (SciPy): imported when fitting, not at start
    from calib_cli.core.cells import CellSums
from calib_cli.core import elementary as el
from calib_cli.errors import InputError
from calib_cli.summaries.grid import (
    DEFAULT_MANTISSA_BITS,
    bin_index,
    cell_index,
    check_bin_edges,
    check_mantissa_bits,
    half_cell,
)
from calib_cli.types import FloatArray, IntArray, WeightKind, choices

__all__ = [
    "COUNT_COLUMNS",
    "DEFAULT_BIN_EDGES",
    "DEFAULT_EPS",
    "GRID_KIND",
    "KEY_COLUMNS",
    "MAX_COLUMNS",
    "MIN_COLUMNS",
    "SCHEMA_VERSION",
    "SUMMARY_KIND",
    "SUM_COLUMNS",
    "ScoreSummary",
    "check_eps",
    "check_positive_label",
    "check_weight_kind",
    "clip_edge",
    "clipped_logs",
    "describe_positive_label",
    "group_ranks",
    "merge_summaries",
    "summarize_arrays",
]

SCHEMA_VERSION = 1
SUMMARY_KIND = "calib.score_summary"
GRID_KIND = "relative-tails"
DEFAULT_EPS = 1e-15
DEFAULT_BIN_EDGES: tuple[float, ...] = tuple(float(e) for e in np.linspace(0.0, 1.0, 11))

#: Key columns, in the canonical sort order of the rows.
KEY_COLUMNS = ("group", "cell", "bin", "label")
#: Row counts (int64): all rows, and rows with a positive weight.
COUNT_COLUMNS = ("n_rows", "n_rows_weighted")
#: Weighted sums (float64) over the rows of a key; ``p`` the score, ``w`` the weight,
#: ``y`` the label, ``q = clip(p, eps, 1 - eps)``.
SUM_COLUMNS = (
    "weight",  # w
    "weight_sq",  # w^2
    "score_sum",  # w p
    "score_sq_sum",  # w p^2
    "complement_sum",  # w (1 - p)
    "complement_sq_sum",  # w (1 - p)^2
    "log_loss_sum",  # -w log q (y = 1), -w log1p(-q) (y = 0)
    "logit_sum",  # w logit(q)
    "spiegelhalter_num",  # w (y - p)(1 - 2p)
    "spiegelhalter_var",  # w (1 - 2p)^2 p (1 - p)
)
#: Minima (float64, NaN when no row of the key has a positive weight).
MIN_COLUMNS = ("weight_min", "score_min")
#: Maxima (float64, NaN when no row of the key has a positive weight).
MAX_COLUMNS = ("score_max",)

_INT_DTYPES: dict[str, type[np.integer[Any]]] = {
    "bin": np.int32,
    "cell": np.int64,
    "label": np.int8,
    "n_rows": np.int64,
    "n_rows_weighted": np.int64,
}

GroupName = str | None


def _group_sort_key(name: GroupName) -> tuple[bool, str]:
    return (name is not None, "" if name is None else name)


@dataclass(frozen=True, eq=False)
class ScoreSummary:
    """Sufficient statistics of one score column: per (group, cell, bin, class), sums.

    Rows are sparse (only occupied keys) and in the canonical order of ``KEY_COLUMNS``
    (group index, cell, bin, label), each key once. Build one with :func:`summarize_arrays`
    (NumPy) or :func:`calib_cli.summaries.scan.summarize_lazy` (Polars streaming); combine
    them with :func:`merge_summaries`; save them with :meth:`to_json` or :meth:`to_columns`.

    Attributes
    ----------
    mantissa_bits : int
        The grid (:mod:`calib_cli.summaries.grid`): cells of relative width ``2**-m``.
    bin_edges : tuple of float
        The reliability bin edges the cells were split at (0 first, 1 last).
    eps : float
        Clipping of the scores in ``log_loss_sum`` and ``logit_sum``.
    score_column, label_column, weight_column, group_column : str or None
        Where the rows came from (no weight column: unit weights; no group column: one group).
    groups : tuple of (str or None)
        The distinct group values, sorted (``None``, the missing value, first).
    group : ndarray of int32
        Index into ``groups`` of each row.
    bin, cell, label : ndarray of int32, int64, int8
        The rest of the key.
    n_rows, n_rows_weighted : ndarray of int64
        Rows, and rows with a positive weight.
    weight ... spiegelhalter_var : ndarray of float64
        The sums of ``SUM_COLUMNS``.
    weight_min, score_min, score_max : ndarray of float64
        Over the rows with a positive weight; NaN when there are none.
    schema_version : int
        Version of this format (:data:`SCHEMA_VERSION`).
    weight_kind : {"frequency", "importance"}
        What the weights mean (``summarize --weight-kind``), recorded in the metadata so that
        ``reliability --from-summary`` uses the right variances; files written before the
        field existed read as ``frequency``. Summaries of different kinds do not merge.
    positive_label : str or None
        The rule that made the 0/1 ``label`` of the rows (``summarize --positive-label``): the
        label text counted as positive, trimmed; None for the default rule (1 or true is
        positive). Recorded so that summaries whose labels mean different things are never
        merged and a refinement query reads the labels alike; files written before the field
        existed read as None. Summaries of different rules do not merge.
    """

    mantissa_bits: int
    bin_edges: tuple[float, ...]
    eps: float
    score_column: str
    label_column: str
    weight_column: str | None
    group_column: str | None
    groups: tuple[GroupName, ...]
    group: npt.NDArray[np.int32]
    bin: npt.NDArray[np.int32]
    cell: IntArray
    label: npt.NDArray[np.int8]
    n_rows: IntArray
    n_rows_weighted: IntArray
    weight: FloatArray
    weight_sq: FloatArray
    score_sum: FloatArray
    score_sq_sum: FloatArray
    complement_sum: FloatArray
    complement_sq_sum: FloatArray
    log_loss_sum: FloatArray
    logit_sum: FloatArray
    spiegelhalter_num: FloatArray
    spiegelhalter_var: FloatArray
    weight_min: FloatArray
    score_min: FloatArray
    score_max: FloatArray
    schema_version: int = SCHEMA_VERSION
    weight_kind: WeightKind = "frequency"
    positive_label: str | None = None

    # ---------------------------------------------------------------- views

    @property
    def n_keys(self) -> int:
        """Number of stored (group, cell, bin, class) rows."""
        return int(self.cell.size)

    @property
    def nbytes(self) -> int:
        """Bytes held by the arrays (the in-memory size of the summary)."""
        return sum(int(self.column(name).nbytes) for name in _ARRAY_COLUMNS if name != "group")

    def column(self, name: str) -> npt.NDArray[Any]:
        """One array by its column name (``group`` is the index into :attr:`groups`)."""
        if name not in _ARRAY_COLUMNS:
            raise InputError(f"a summary has no column {name!r}")
        value: npt.NDArray[Any] = getattr(self, name)
        return value

    def metadata(self) -> dict[str, Any]:
        """Everything but the rows, as plain JSON values (the Parquet key-value metadata)."""
        return {
            "kind": SUMMARY_KIND,
            "schema_version": self.schema_version,
            "grid": {"kind": GRID_KIND, "mantissa_bits": self.mantissa_bits},
            "bin_edges": list(self.bin_edges),
            "eps": self.eps,
            "score_column": self.score_column,
            "label_column": self.label_column,
            "weight_column": self.weight_column,
            "group_column": self.group_column,
            "weight_kind": self.weight_kind,
            "positive_label": self.positive_label,
        }

    def select_group(self, name: GroupName) -> ScoreSummary:
        """The summary of one group (an InputError naming the group when it is absent)."""
        if name not in self.groups:
            shown = ", ".join(repr(g) for g in self.groups[:10])
            raise InputError(f"the summary has no group {name!r} (groups: {shown})")
        keep = self.group == self.groups.index(name)
        arrays = {c: self.column(c)[keep] for c in _ARRAY_COLUMNS}
        arrays["group"] = np.zeros(int(np.sum(keep)), dtype=np.int32)
        return replace(self, groups=(name,), **arrays)

    def cells(self) -> CellSums:
        """The (cell, class) sums a calibrator is fitted on
        (:class:`calib_cli.core.cells.CellSums`; every group's keys, as they are)."""
        from calib_cli.core.cells import CellSums  # the fits' module: imported when fitting

        return CellSums(
            cell=self.cell,
            label=self.label,
            weight=self.weight,
            score_sum=self.score_sum,
            logit_sum=self.logit_sum,
            score_min=self.score_min,
            score_max=self.score_max,
            rows=self.n_rows_weighted.astype(np.float64),
        )

    def pooled(self) -> ScoreSummary:
        """All groups as one (``group_column`` None): the summary of every row."""
        arrays = {c: self.column(c) for c in _ARRAY_COLUMNS}
        arrays["group"] = np.zeros(self.n_keys, dtype=np.int32)
        return _build(self._meta(group_column=None), (None,), arrays)

    def _meta(self, **changes: Any) -> dict[str, Any]:
        meta = {
            "mantissa_bits": self.mantissa_bits,
            "bin_edges": self.bin_edges,
            "eps": self.eps,
            "score_column": self.score_column,
            "label_column": self.label_column,
            "weight_column": self.weight_column,
            "group_column": self.group_column,
            "weight_kind": self.weight_kind,
            "positive_label": self.positive_label,
        }
        meta.update(changes)
        return meta

    # ---------------------------------------------------------------- merge

    def merge(self, other: ScoreSummary) -> ScoreSummary:
        """The summary of the rows of both (see :func:`merge_summaries`)."""
        return merge_summaries([self, other])

    # ---------------------------------------------------------------- file forms

    def to_columns(self) -> dict[str, npt.NDArray[Any]]:
        """The rows as named NumPy arrays (the Parquet columns; package docstring).

        ``group`` holds the group values (object array of str or None).
        """
        out: dict[str, npt.NDArray[Any]] = {}
        names = np.array([*list(self.groups), None], dtype=object)[:-1]
        out["group"] = names[self.group] if self.n_keys else np.array([], dtype=object)
        for name in _ARRAY_COLUMNS[1:]:
            out[name] = self.column(name).copy()
        return out

    @classmethod
    def from_group_codes(
        cls,
        columns: Mapping[str, npt.ArrayLike],
        groups: Sequence[GroupName],
        metadata: Mapping[str, Any],
    ) -> ScoreSummary:
        """:meth:`from_columns` with ``columns["group"]`` an index into ``groups`` (distinct
        values, any order) instead of the values themselves: no per-row work in Python."""
        meta = _check_metadata(metadata)
        missing = [c for c in _ARRAY_COLUMNS if c not in columns]
        if missing:
            raise InputError(f"the summary lacks the column(s) {', '.join(missing)}")
        for value in groups:
            if value is not None and not isinstance(value, str):
                raise InputError(f"summary group {value!r} is not a string or null")
        if len(set(groups)) != len(groups):
            raise InputError("the summary's groups repeat")
        names = sorted(groups, key=_group_sort_key)
        rank = group_ranks(groups)
        codes = np.asarray(columns["group"], dtype=np.int64)
        n = codes.size
        if n and (codes.min() < 0 or codes.max() >= len(groups)):
            raise InputError("summary column 'group' holds codes outside the groups")
        arrays: dict[str, npt.NDArray[Any]] = {"group": rank[codes] if n else codes}
        for name in _ARRAY_COLUMNS[1:]:
            arrays[name] = _checked_column(name, columns[name], n)
        _check_rows(arrays, meta)
        return _build(meta, tuple(names), arrays)

    @classmethod
    def from_columns(
        cls, columns: Mapping[str, npt.ArrayLike], metadata: Mapping[str, Any]
    ) -> ScoreSummary:
        """Validate and rebuild a summary from :meth:`to_columns` and :meth:`metadata`.

        Rows may come in any order and a key may repeat (its rows are merged), so the
        concatenation of the rows of several files with equal metadata is their merge.
        """
        meta = _check_metadata(metadata)
        missing = [c for c in _ARRAY_COLUMNS if c not in columns]
        if missing:
            raise InputError(f"the summary lacks the column(s) {', '.join(missing)}")
        raw_groups = list(np.asarray(columns["group"], dtype=object))
        n = len(raw_groups)
        for value in raw_groups:
            if value is not None and not isinstance(value, str):
                raise InputError(f"summary column 'group' holds {value!r}: not a string or null")
        names = sorted(set(raw_groups), key=_group_sort_key)
        index = {g: i for i, g in enumerate(names)}
        arrays: dict[str, npt.NDArray[Any]] = {
            "group": np.array([index[g] for g in raw_groups], dtype=np.int32)
        }
        for name in _ARRAY_COLUMNS[1:]:
            arrays[name] = _checked_column(name, columns[name], n)
        _check_rows(arrays, meta)
        return _build(meta, tuple(names), arrays)

    def to_json(self) -> str:
        """Plain JSON (no NaN: a missing minimum or maximum is ``null``)."""
        payload = self.metadata()
        cols = self.to_columns()
        payload["groups"] = list(self.groups)
        payload["columns"] = {
            name: [None if isinstance(v, float) and math.isnan(v) else v for v in arr.tolist()]
            for name, arr in cols.items()
        }
        return json.dumps(payload, allow_nan=False, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> ScoreSummary:
        """Read :meth:`to_json`'s form, validating every field.

        Examples
        --------
        >>> s = summarize_arrays([0, 1, 1], [0.2, 0.7, 0.7])
        >>> t = ScoreSummary.from_json(s.to_json())
        >>> t.n_keys, t.weight.tolist(), t.score_min.tolist()
        (2, [1.0, 2.0], [0.2, 0.7])
        """
        try:
            payload = json.loads(text)
        except json.JSONDecodeError as exc:
            raise InputError(f"the summary is not valid JSON: {exc}") from None
        if not isinstance(payload, dict) or not isinstance(payload.get("columns"), dict):
            raise InputError("the summary JSON must be an object with a 'columns' object")
        cols = payload.pop("columns")
        payload.pop("groups", None)
        floats = set(SUM_COLUMNS + MIN_COLUMNS + MAX_COLUMNS)
        converted: dict[str, npt.ArrayLike] = {}
        for name, values in cols.items():
            if not isinstance(values, list):
                raise InputError(f"summary column {name!r} must be a list")
            if name in floats:
                values = [math.nan if v is None else v for v in values]
            converted[name] = np.array(values, dtype=object) if name == "group" else values
        return cls.from_columns(converted, payload)


_ARRAY_COLUMNS: tuple[str, ...] = (
    KEY_COLUMNS + COUNT_COLUMNS + SUM_COLUMNS + MIN_COLUMNS + MAX_COLUMNS
)
_FLOAT_COLUMNS = SUM_COLUMNS + MIN_COLUMNS + MAX_COLUMNS
_META_FIELDS = (
    "mantissa_bits",
    "bin_edges",
    "eps",
    "score_column",
    "label_column",
    "weight_column",
    "group_column",
    "weight_kind",
    "positive_label",
)


def _checked_column(name: str, values: npt.ArrayLike, n: int) -> npt.NDArray[Any]:
    try:
        arr = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError):
        raise InputError(f"summary column {name!r} is not numeric") from None
    if arr.shape != (n,):
        raise InputError(f"summary column {name!r} has {arr.size} values for {n} rows")
    if name in _INT_DTYPES:
        if not np.all(np.isfinite(arr)) or np.any(arr != np.round(arr)):
            raise InputError(f"summary column {name!r} must hold integers")
        return np.asarray(values).astype(_INT_DTYPES[name])
    if name in SUM_COLUMNS and not np.all(np.isfinite(arr)):
        raise InputError(
            f"summary column {name!r} holds a missing or infinite value (a NaN score, "
            "weight or label in the rows an engine summarised? filter them first: WHERE "
            "score BETWEEN 0 AND 1 leaves NaN out)"
        )
    return arr


def check_eps(eps: float) -> float:
    """The clipping of the scores in the log loss and the logit: strictly between 0 and 1/2,
    and large enough that ``1 - eps`` is below 1 (else a score of 1 has an infinite log loss).

    >>> check_eps(1e-15)
    1e-15
    """
    if not 0.0 < eps < 0.5:
        raise InputError(f"eps must be strictly between 0 and 0.5, got {eps!r}")
    if 1.0 - eps == 1.0:
        raise InputError(
            f"eps must be at least 1.2e-16 (so that 1 - eps is below 1 in double precision), "
            f"got {eps!r}"
        )
    return float(eps)


def _check_rows(arrays: Mapping[str, npt.NDArray[Any]], meta: Mapping[str, Any]) -> None:
    refused = arrays["label"] == REFUSED_LABEL
    if np.any(refused):
        rows = int(np.sum(arrays["n_rows"][refused]))
        hint = ", or with --positive-label V" if meta["positive_label"] is None else ""
        raise InputError(
            f"the summary counts {rows:,} row{'' if rows == 1 else 's'} whose label calib "
            f"refuses (not 0 or 1, true or false, yes or no: 2, maybe, 0.5): an engine's query "
            f"cannot stop, so it counts them apart (label {REFUSED_LABEL}). Leave them out "
            f"with a WHERE on '{meta['label_column']}' in the engine and summarise again{hint}"
        )
    missing = arrays["label"] == UNLABELLED
    if np.any(missing):
        rows = int(np.sum(arrays["n_rows"][missing]))
        column = meta["label_column"]
        raise InputError(
            f"the summary counts {rows:,} row{'' if rows == 1 else 's'} without a label "
            f"(NULL, NaN or empty '{column}'): an engine's query counts them apart (label "
            f"{UNLABELLED}), as calib refuses them. For figures and fits, leave them out with "
            f"WHERE {column} IS NOT NULL and summarise again; for an estimate-shift target "
            f"whose labels have not all arrived, summarise every row with a constant label "
            f"(0 AS {column}: estimated, no true rate), as a summary of the labelled rows "
            "alone would estimate the wrong rate"
        )
    n_bins = len(meta["bin_edges"]) - 1
    last_cell = 2 * half_cell(meta["mantissa_bits"])
    checks = [
        ("bin", (arrays["bin"] < 0) | (arrays["bin"] >= n_bins), f"outside [0, {n_bins - 1}]"),
        ("cell", (arrays["cell"] < 0) | (arrays["cell"] > last_cell), f"outside [0, {last_cell}]"),
        ("label", (arrays["label"] != 0) & (arrays["label"] != 1), "not 0 or 1"),
        ("n_rows", arrays["n_rows"] < 0, "negative"),
        ("n_rows_weighted", arrays["n_rows_weighted"] > arrays["n_rows"], "above n_rows"),
        ("n_rows_weighted", arrays["n_rows_weighted"] < 0, "negative"),
        ("weight", arrays["weight"] < 0.0, "negative"),
        ("score_min", arrays["score_min"] > arrays["score_max"], "above score_max"),
        ("score_min", arrays["score_min"] < 0.0, "outside [0, 1]"),
        ("score_max", arrays["score_max"] > 1.0, "outside [0, 1]"),
    ]
    for column, bad, problem in checks:
        count = int(np.sum(bad))
        if count:
            first = int(np.flatnonzero(bad)[0]) + 1
            raise InputError(
                f"summary column {column!r} has {count} value(s) {problem} (first at row {first})"
            )


def _check_metadata(metadata: Mapping[str, Any]) -> dict[str, Any]:
    if metadata.get("kind") != SUMMARY_KIND:
        raise InputError(f"kind must be {SUMMARY_KIND!r}, got {metadata.get('kind')!r}")
    version = metadata.get("schema_version")
    if version != SCHEMA_VERSION:
        raise InputError(
            f"schema_version {version!r} is not supported (this calib reads {SCHEMA_VERSION})"
        )
    grid = metadata.get("grid")
    if not isinstance(grid, dict) or grid.get("kind") != GRID_KIND:
        raise InputError(f"grid must be {{'kind': {GRID_KIND!r}, 'mantissa_bits': m}}")
    eps = metadata.get("eps")
    if not isinstance(eps, float | int) or not 0.0 < eps < 0.5:
        raise InputError(f"eps must be a number strictly between 0 and 0.5, got {eps!r}")
    meta: dict[str, Any] = {
        "mantissa_bits": check_mantissa_bits(grid.get("mantissa_bits")),  # type: ignore[arg-type]
        "bin_edges": tuple(float(e) for e in check_bin_edges(metadata.get("bin_edges", []))),
        "eps": float(eps),
    }
    for name in ("score_column", "label_column", "weight_column", "group_column"):
        value = metadata.get(name)
        optional = name in ("weight_column", "group_column")
        if not (isinstance(value, str) or (optional and value is None)):
            raise InputError(f"{name} must be a column name, got {value!r}")
        meta[name] = value
    meta["weight_kind"] = check_weight_kind(metadata.get("weight_kind", "frequency"))
    meta["positive_label"] = check_positive_label(metadata.get("positive_label"))
    return meta


def check_weight_kind(value: object) -> WeightKind:
    """A summary's ``weight_kind`` (absent in files written before it existed: frequency).

    >>> check_weight_kind("importance")
    'importance'
    """
    if value == "frequency":
        return "frequency"
    if value == "importance":
        return "importance"
    raise InputError(f"weight_kind must be one of {', '.join(choices(WeightKind))}, got {value!r}")


def check_positive_label(value: object) -> str | None:
    """A summary's ``positive_label``: the label text counted as positive, trimmed, or None
    for the default rule (absent in files written before it existed: None).

    >>> check_positive_label(" fraud "), check_positive_label(None)
    ('fraud', None)
    """
    if value is None or isinstance(value, str):
        return None if value is None else value.strip()
    raise InputError(f"positive_label must be a label's text or null, got {value!r}")


def describe_positive_label(positive_label: str | None) -> str:
    """A summary's label rule, for messages: its ``positive_label`` as the metadata writes it
    and what it means.

    >>> describe_positive_label(None)
    'null (the default rule: label 1 or true is positive)'
    >>> describe_positive_label("0")
    "'0' (label '0' is positive)"
    """
    if positive_label is None:
        return "null (the default rule: label 1 or true is positive)"
    return f"{positive_label!r} (label {positive_label!r} is positive)"


def _ascending_keys(cols: Mapping[str, npt.NDArray[Any]]) -> bool:
    """Whether the rows' keys (group, cell, bin, label) strictly ascend."""
    if cols["cell"].size < 2:
        return True
    after = np.zeros(cols["cell"].size - 1, dtype=bool)  # key i + 1 > key i, so far
    tied = np.ones(cols["cell"].size - 1, dtype=bool)  # equal on the columns so far
    for c in KEY_COLUMNS:
        v = cols[c]
        after |= tied & (v[1:] > v[:-1])
        tied &= v[1:] == v[:-1]
    return bool(np.all(after))


def group_ranks(groups: Sequence[GroupName]) -> npt.NDArray[np.int32]:
    """Each group's index among ``groups`` sorted as a summary sorts them (None first)."""
    names = sorted(groups, key=_group_sort_key)
    return np.array([names.index(g) for g in groups], dtype=np.int32)


def _build(
    meta: Mapping[str, Any], groups: tuple[GroupName, ...], arrays: Mapping[str, npt.ArrayLike]
) -> ScoreSummary:
    """Aggregate rows by key into the canonical form (sorted, each key once)."""
    cols = {c: np.asarray(arrays[c]) for c in _ARRAY_COLUMNS}
    if not _ascending_keys(cols):  # rows built in key order need no sorted copies
        order = np.lexsort((cols["label"], cols["bin"], cols["cell"], cols["group"]))
        cols = {c: v[order] for c, v in cols.items()}
    n = cols["cell"].size
    if n:
        change = np.zeros(n, dtype=bool)
        change[0] = True
        for c in KEY_COLUMNS:
            change[1:] |= cols[c][1:] != cols[c][:-1]
        starts = np.flatnonzero(change)
    else:
        starts = np.zeros(0, dtype=np.int64)
    out: dict[str, npt.NDArray[Any]] = {}
    unique = starts.size == n  # each key once already: nothing to add up
    for c in _ARRAY_COLUMNS:
        v = cols[c]
        if not n or unique:
            out[c] = v.astype(_dtype(c), copy=False)
        elif c in KEY_COLUMNS:
            out[c] = v[starts].astype(_dtype(c))
        elif c in COUNT_COLUMNS:
            out[c] = np.add.reduceat(v.astype(np.int64), starts)
        elif c in SUM_COLUMNS:
            out[c] = np.add.reduceat(v.astype(np.float64), starts)
        elif c in MIN_COLUMNS:
            out[c] = np.fmin.reduceat(v.astype(np.float64), starts)
        else:
            out[c] = np.fmax.reduceat(v.astype(np.float64), starts)
    # Groups nobody uses are dropped, so that equal rows give equal summaries.
    used = np.unique(out["group"]) if n else np.zeros(0, dtype=np.int32)
    remap = np.zeros(max(len(groups), 1), dtype=np.int32)
    remap[used] = np.arange(used.size, dtype=np.int32)
    out["group"] = remap[out["group"]].astype(np.int32)
    kept = tuple(groups[i] for i in used) if n else ()
    return ScoreSummary(
        mantissa_bits=int(meta["mantissa_bits"]),
        bin_edges=tuple(float(e) for e in meta["bin_edges"]),
        eps=float(meta["eps"]),
        score_column=str(meta["score_column"]),
        label_column=str(meta["label_column"]),
        weight_column=meta["weight_column"],
        group_column=meta["group_column"],
        weight_kind=check_weight_kind(meta.get("weight_kind", "frequency")),
        positive_label=check_positive_label(meta.get("positive_label")),
        groups=kept,
        **cast("dict[str, Any]", out),
    )


def _dtype(column: str) -> type[np.generic]:
    if column == "group":
        return np.int32
    return _INT_DTYPES.get(column, np.float64)


def merge_summaries(summaries: Iterable[ScoreSummary]) -> ScoreSummary:
    """The summary of the union of the rows of several summaries.

    Counts and sums add, minima and maxima combine, keys align; so merging is commutative
    and associative (exactly for the counts, minima and maxima; up to floating-point
    summation, about ``1e-16`` relative per addition, for the sums). Summaries must agree on
    the grid, the bin edges, ``eps``, the schema version, the column names, the weight kind
    and the label rule (``positive_label``); otherwise an
    :class:`~calib_cli.errors.InputError` names the first field that differs.

    Cost: sorting the concatenated keys, :math:`O(K \\log K)` for :math:`K` stored keys in
    all; independent of the rows summarised.

    Examples
    --------
    >>> a = summarize_arrays([0, 1], [0.2, 0.7])
    >>> b = summarize_arrays([1], [0.7])
    >>> merged = merge_summaries([a, b])
    >>> merged.weight.tolist(), merged.n_rows.tolist()
    ([1.0, 2.0], [1, 2])
    """
    items = list(summaries)
    if not items:
        raise InputError("merge_summaries needs at least one summary")
    first = items[0]
    for other in items[1:]:
        for name in ("schema_version", *_META_FIELDS):
            a, b = getattr(first, name), getattr(other, name)
            if a != b and name == "weight_kind":
                raise InputError(
                    f"cannot merge a summary of {a} weights with one of {b} weights: their "
                    "intervals need different variances (summarize them with the same "
                    "--weight-kind)"
                )
            if a != b and name == "positive_label":
                raise InputError(
                    f"cannot merge a summary whose positive_label is {describe_positive_label(a)} "
                    f"with one whose positive_label is {describe_positive_label(b)}: their labels "
                    "mean different things (summarize them with the same --positive-label)"
                )
            if a != b:
                raise InputError(f"cannot merge summaries with different {name}: {a!r} and {b!r}")
    names = sorted({g for s in items for g in s.groups}, key=_group_sort_key)
    index = {g: i for i, g in enumerate(names)}
    arrays: dict[str, npt.NDArray[Any]] = {}
    for c in _ARRAY_COLUMNS:
        if c == "group":
            parts = [np.array([index[g] for g in s.groups], dtype=np.int32)[s.group] for s in items]
        else:
            parts = [s.column(c) for s in items]
        arrays[c] = np.concatenate(parts) if parts else np.zeros(0)
    return _build(first._meta(), tuple(names), arrays)


def summarize_arrays(
    y_true: npt.ArrayLike,
    y_prob: npt.ArrayLike,
    *,
    sample_weight: npt.ArrayLike | None = None,
    groups: Sequence[object] | npt.ArrayLike | None = None,
    bin_edges: npt.ArrayLike = DEFAULT_BIN_EDGES,
    mantissa_bits: int = DEFAULT_MANTISSA_BITS,
    eps: float = DEFAULT_EPS,
    score_column: str = "score",
    label_column: str = "label",
    weight_column: str | None = None,
    group_column: str | None = None,
    weight_kind: WeightKind = "frequency",
    positive_label: str | None = None,
) -> ScoreSummary:
    """The summary of rows held in memory (the NumPy twin of the streaming summary).

    Parameters
    ----------
    y_true : array of shape (n,)
        Labels, 0/1 or booleans.
    y_prob : array of shape (n,)
        Probability scores in [0, 1].
    sample_weight : array of shape (n,), optional
        Non-negative frequency weights (default: ones).
    groups : array of shape (n,), optional
        Group of each row (strings; other values are converted with ``str``; ``None`` is
        the missing group). Default: one group, ``None``.
    bin_edges : array of shape (k + 1,)
        Reliability bin edges, increasing from 0 to 1 (default: 10 uniform bins).
    mantissa_bits : int
        The grid's resolution (:mod:`calib_cli.summaries.grid`).
    eps : float
        Score clipping for the log loss and the logit, as in :mod:`calib_cli.core.metrics`.
    score_column, label_column, weight_column, group_column : str or None
        Names recorded in the metadata.
    weight_kind : {"frequency", "importance"}
        What the weights mean, recorded in the metadata.
    positive_label : str or None
        The rule that made ``y_true`` 0/1 from the rows' labels (the label text counted as
        positive; None: the default rule), recorded in the metadata.

    Returns
    -------
    ScoreSummary

    Examples
    --------
    >>> s = summarize_arrays([0, 1, 1], [0.2, 0.7, 0.7], sample_weight=[1.0, 2.0, 0.5])
    >>> s.n_keys, s.bin.tolist(), s.label.tolist(), s.weight.tolist()
    (2, [1, 6], [0, 1], [1.0, 2.5])
    """
    y = check_labels(y_true, name=label_column)
    p = check_scores(y_prob, name=score_column)
    require_same_length([y, p], [label_column, score_column])
    w = check_weights(sample_weight, p.shape[0], name=weight_column or "sample_weight")
    check_eps(eps)
    edges = check_bin_edges(bin_edges)
    meta = {
        "mantissa_bits": check_mantissa_bits(mantissa_bits),
        "bin_edges": tuple(float(e) for e in edges),
        "eps": float(eps),
        "score_column": score_column,
        "label_column": label_column,
        "weight_column": weight_column,
        "group_column": group_column,
        "weight_kind": check_weight_kind(weight_kind),
        "positive_label": check_positive_label(positive_label),
    }
    n = p.shape[0]
    if groups is None:
        names: tuple[GroupName, ...] = (None,)
        group_index = np.zeros(n, dtype=np.int32)
    else:
        raw = [None if g is None else str(g) for g in np.asarray(groups, dtype=object).tolist()]
        require_same_length(
            [np.asarray(raw, dtype=object), p], [group_column or "groups", score_column]
        )
        names = tuple(sorted(set(raw), key=_group_sort_key))
        index = {g: i for i, g in enumerate(names)}
        group_index = np.array([index[g] for g in raw], dtype=np.int32)
    return _build(meta, names, _row_terms(y, p, w, group_index, edges, int(mantissa_bits), eps))


def _row_terms(
    y: FloatArray,
    p: FloatArray,
    w: FloatArray,
    group_index: npt.NDArray[np.int32],
    edges: FloatArray,
    mantissa_bits: int,
    eps: float,
) -> dict[str, npt.NDArray[Any]]:
    """Each row's contribution to every column (the formulas of ``SUM_COLUMNS``)."""
    positive = w > 0.0
    complement = 1.0 - p
    centred = 1.0 - 2.0 * p
    low = p <= 0.5
    near, far = clipped_logs(p, np.minimum(p, complement), eps)
    log_q, log_1mq = np.where(low, near, far), np.where(low, far, near)
    return {
        "group": group_index,
        "cell": cell_index(p, mantissa_bits=mantissa_bits),
        "bin": bin_index(p, edges),
        "label": y.astype(np.int8),
        "n_rows": np.ones(p.shape[0], dtype=np.int64),
        "n_rows_weighted": positive.astype(np.int64),
        "weight": w,
        "weight_sq": w * w,
        "score_sum": w * p,
        "score_sq_sum": w * p * p,
        "complement_sum": w * complement,
        "complement_sq_sum": w * complement * complement,
        "log_loss_sum": w * np.where(y == 1.0, -log_q, -log_1mq),
        "logit_sum": w * (log_q - log_1mq),
        "spiegelhalter_num": w * ((y - p) * centred),
        "spiegelhalter_var": w * (centred * centred * p * complement),
        "weight_min": np.where(positive, w, np.nan),
        "score_min": np.where(positive, p, np.nan),
        "score_max": np.where(positive, p, np.nan),
    }


def clip_edge(eps: float) -> float:
    """Where the clipping of the scores ends, in ``x = min(p, 1 - p)``: ``eps`` below 1/2 and
    ``1 - (1 - eps)`` above (the same where ``1 - eps`` is exact). A cell whose lower edge is
    at or above it holds no clipped score.

    >>> clip_edge(0.25), clip_edge(1e-15), clip_edge(3e-16) == 1.0 - (1.0 - 3e-16)
    (0.25, 1e-15, True)
    """
    return max(eps, 1.0 - (1.0 - eps))


def clipped_logs(p: FloatArray, x: FloatArray, eps: float) -> tuple[FloatArray, FloatArray]:
    """``log`` of ``min(q, 1 - q)`` and of ``max(q, 1 - q)`` for the clipped scores
    ``q = clip(p, eps, 1 - eps)``, given ``x = min(p, 1 - p)`` (exact): ``log q`` and
    ``log(1 - q)`` of each row, the nearer end of [0, 1] first (the one its cell is on; at
    ``q = 1 - eps``, ``1 - q`` is ``1 - (1 - eps)``, not ``eps``). Each row's logarithms in
    the in-memory summary; in the streaming summary and the dense refinement only those of
    rows in cells that may hold clipped scores, or on grids under 11 bits (the other keys'
    sums follow from moments: :func:`~calib_cli.summaries.accumulate.log_sums`).
    :func:`~calib_cli.summaries.scan.summary_plan`, the Polars group-by kept as a reference for
    tests and benchmarks, takes Polars' own.

    >>> near, far = clipped_logs(np.array([0.0, 0.25, 1.0]), np.array([0.0, 0.25, 0.0]), 1e-15)
    >>> [round(v, 6) for v in near.tolist()], far[1] == el.log1p(np.array([-0.25]))[0]
    ([-34.538776, -1.386294, -34.539576], np.True_)
    """
    if x.size and not x.min() >= clip_edge(eps):
        x = np.where(p <= 0.5, np.maximum(x, eps), np.maximum(x, 1.0 - (1.0 - eps)))
    return el.log(x), el.log1p(-x)
