"""JSON payloads: every key of every command's report, built from the typed results.

Nothing here prints. JSON is plain: NaN and infinities become ``null``, arrays become lists,
and the keys of the core's result dataclasses are their field names (documented in the
README). The keys each command adds around them are written here and only here.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Iterable, Mapping, Sequence
from json.encoder import encode_basestring_ascii as _json_string
from typing import TYPE_CHECKING

import numpy as np

from calib_cli.types import MISSING_GROUP, GroupValue, JsonObject, JsonValue

if TYPE_CHECKING:
    from calib_cli.io import InvalidRows
    from calib_cli.workflows.estimate_shift import (
        BacktestResult,
        BatchEstimate,
        EstimateShiftResult,
        HistoryResult,
    )
    from calib_cli.workflows.recalibrate import FileEffect, RecalibrateResult
    from calib_cli.workflows.reliability import ReliabilityEntry, ReliabilityResult
    from calib_cli.workflows.rerank_strata import RerankStrataResult
    from calib_cli.workflows.resample import ResampleResult
    from calib_cli.workflows.show import ShowResult
    from calib_cli.workflows.summarize import SummarizeResult


def to_jsonable(value: object) -> JsonValue:
    """Turn result objects into plain JSON values (NaN/inf -> None, arrays -> lists).

    >>> to_jsonable({"a": float("nan"), "b": np.array([1.0, np.inf]), "c": (1, 2)})
    {'a': None, 'b': [1.0, None], 'c': [1, 2]}
    """
    # The plain types first, by exact type: a report of thousands of groups has hundreds of
    # thousands of values, and the generic checks below cost far more than the conversion.
    if type(value) is float:
        return value if math.isfinite(value) else None
    if type(value) is str or type(value) is int or type(value) is bool or value is None:
        return value
    if type(value) is list or type(value) is tuple:
        return [to_jsonable(v) for v in value]
    if type(value) is dict:
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {name: to_jsonable(getattr(value, name)) for name in _field_names(type(value))}
    if isinstance(value, Mapping):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, np.ndarray):
        return [to_jsonable(v) for v in value.tolist()]
    if isinstance(value, (list, tuple)):
        return [to_jsonable(v) for v in value]
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        number = float(value)
        return number if math.isfinite(number) else None
    if value is None or isinstance(value, str):
        return value
    return str(value)


_FIELD_NAMES: dict[type, tuple[str, ...]] = {}


def _field_names(kind: type) -> tuple[str, ...]:
    """The public fields of a dataclass type (names not starting with ``_``), in order."""
    names = _FIELD_NAMES.get(kind)
    if names is None:
        names = tuple(f.name for f in dataclasses.fields(kind) if not f.name.startswith("_"))
        _FIELD_NAMES[kind] = names
    return names


def bins_phrase(used: Sequence[int], strategy: str) -> str:
    """The bins a reliability report used (its entries' ``n_bins``), not ``--bins``, for the
    titles of its tables and pictures: tied scores can leave fewer equal-mass bins.

    >>> bins_phrase([10], "uniform"), bins_phrase([1], "quantile"), bins_phrase([7, 10], "quantile")
    ('10 uniform bins', '1 quantile bin', '7 to 10 quantile bins')
    """
    fewest, most = min(used), max(used)
    count = f"{fewest}" if fewest == most else f"{fewest} to {most}"
    return f"{count} {strategy} bin{'' if most == 1 else 's'}"


def weighting_phrase(weight_col: str | None, kinds: Iterable[str]) -> str | None:
    """What the weights of a reliability report were, for the titles of its tables and
    pictures (weighted counts sit beside row counts), or None without weights.

    >>> weighting_phrase("w", ["frequency"]), weighting_phrase("iw", ["importance"])
    ("weighted by 'w'", "importance weights 'iw'")
    """
    if weight_col is None:
        return None
    kind = "importance weights" if "importance" in set(kinds) else "weighted by"
    return f"{kind} '{weight_col}'"


def to_json_object(value: object) -> JsonObject:
    """:func:`to_jsonable` of a dataclass or mapping: a JSON object."""
    converted = to_jsonable(value)
    if not isinstance(converted, dict):
        raise TypeError(f"expected an object, got {type(value).__name__}")
    return converted


def dumps(value: JsonValue) -> str:
    """Stable, plain JSON text (keys in a fixed order, no NaN), ending with a newline: exactly
    ``json.dumps(to_jsonable(value), indent=2)``, written by :func:`_indented`.

    >>> print(dumps({"a": [1, 0.5, None], "b": {}}), end="")
    {
      "a": [
        1,
        0.5,
        null
      ],
      "b": {}
    }
    """
    parts: list[str] = []
    _indented(to_jsonable(value), 0, parts)
    parts.append("\n")
    return "".join(parts)


def _indented(value: JsonValue, level: int, parts: list[str]) -> None:
    """Append the text of a plain JSON value as ``json.dumps(value, indent=2)`` writes it.

    The standard library writes indented JSON with a generator per container (its C encoder
    does not indent before Python 3.13); this plain recursion is about 1.5 times faster, which
    matters for the report of thousands of groups (8 MB for 2,000).
    """
    # exact types first (the common case, and faster than isinstance), subclasses after
    if type(value) is float or (isinstance(value, float) and not isinstance(value, bool)):
        if not math.isfinite(value):
            raise ValueError(f"JSON has no {value}: to_jsonable writes it as null")
        parts.append(float.__repr__(value))
    elif type(value) is str or isinstance(value, str):
        parts.append(_json_string(value))
    elif type(value) is dict or isinstance(value, dict):
        if not value:
            parts.append("{}")
            return
        inner = "\n" + "  " * (level + 1)
        separator = "{" + inner
        for key, item in value.items():
            parts.append(separator)
            parts.append(_json_string(key))
            parts.append(": ")
            _indented(item, level + 1, parts)
            separator = "," + inner
        parts.append("\n" + "  " * level + "}")
    elif type(value) is list or isinstance(value, list):
        if not value:
            parts.append("[]")
            return
        inner = "\n" + "  " * (level + 1)
        separator = "[" + inner
        for item in value:
            parts.append(separator)
            _indented(item, level + 1, parts)
            separator = "," + inner
        parts.append("\n" + "  " * level + "]")
    elif value is None:
        parts.append("null")
    elif isinstance(value, bool):
        parts.append("true" if value else "false")
    elif isinstance(value, int):
        parts.append(int.__repr__(value))
    else:  # pragma: no cover - to_jsonable leaves nothing else
        raise TypeError(f"not a plain JSON value: {type(value).__name__}")


# ------------------------------------------------------------------------------ reliability


def exact_record() -> JsonObject:
    """The ``exactness`` record of figures computed with every row in memory: the keys of
    :class:`~calib_cli.summaries.Exactness`, every figure exact (bounds 0), no grid (``null``
    bits)."""
    return dict(_exact_record())


@functools.cache
def _exact_record() -> JsonObject:
    from calib_cli.summaries import Exactness

    record: JsonObject = {}
    for field in dataclasses.fields(Exactness):
        if "mantissa_bits" in field.name:
            record[field.name] = None
        elif field.type in ("bool", bool):
            record[field.name] = True
        elif field.type in ("float", float):
            record[field.name] = 0.0
        else:
            record[field.name] = 0
    return record


def reliability_entry_payload(
    entry: ReliabilityEntry, *, by: str | None, seed: int, engine: str = "memory"
) -> JsonObject:
    """One column (and group): ``score_column``, ``seed``, ``by`` and ``group`` with --by, then
    the figures of :class:`~calib_cli.core.metrics.ReliabilitySummary`, then ``engine``
    (memory, streaming or summary) and ``exactness`` (the
    :class:`~calib_cli.summaries.Exactness` record; all exact in memory)."""
    payload: JsonObject = {"score_column": entry.score_column, "seed": seed}
    if by is not None:
        payload.update({"by": by, "group": entry.group})
    payload.update(to_json_object(entry.summary))
    payload["engine"] = engine
    payload["exactness"] = (
        exact_record() if entry.exactness is None else to_json_object(entry.exactness)
    )
    return payload


def invalid_rows_payload(invalid: InvalidRows) -> JsonObject:
    """``--on-invalid drop``: ``file``, ``rows_read``, ``dropped`` and ``by_reason`` (reason ->
    rows, each dropped row counted once, under its first problem) and, with ``--by``,
    ``by_group``: each group's ``group``, ``rows_read`` and ``dropped``, in the entries' order
    and with their group values."""
    payload: JsonObject = {
        "file": invalid.name,
        "rows_read": invalid.rows,
        "dropped": invalid.dropped,
        "by_reason": dict(invalid.by_reason),
    }
    if invalid.by_group:
        payload["by_group"] = _group_drop_entries(invalid.by_group)
    return payload


def _group_drop_entries(by_group: Sequence[tuple[GroupValue, int, int]]) -> JsonValue:
    """Each group's ``group`` (``(missing)`` for rows without one), ``rows_read``, ``dropped``."""
    return [
        {
            "group": to_jsonable(MISSING_GROUP if value is None else value),
            "rows_read": read,
            "dropped": lost,
        }
        for value, read, lost in by_group
    ]


def reliability_payload(result: ReliabilityResult) -> JsonValue:
    """One object for one column without --by, else a list of them; with ``--on-invalid
    drop`` each carries ``invalid_rows``."""
    payloads: list[JsonObject] = [
        reliability_entry_payload(entry, by=result.by, seed=result.seed, engine=result.engine)
        for entry in result.entries
    ]
    if result.invalid_rows is not None:
        for payload in payloads:
            payload["invalid_rows"] = invalid_rows_payload(result.invalid_rows)
    return payloads[0] if len(payloads) == 1 else list[JsonValue](payloads)


# -------------------------------------------------------------------------------- resample


def resample_payload(result: ResampleResult) -> JsonObject:
    """``record`` (its path), the record's params, then the counts before and after."""
    from calib_cli.artifacts import sampling_summary_json

    return to_json_object(
        {
            "record": result.record_path,
            **result.record.params,
            **sampling_summary_json(result.summary),
        }
    )


# ----------------------------------------------------------------------------- recalibrate


def effect_payload(effect: FileEffect) -> JsonObject:
    """``file`` and the before/after figures; the label figures (``positives``,
    ``base_rate``, ``before``, ``after``) are ``null`` for a file without labels."""
    block: JsonObject = {"file": effect.file, **to_json_object(effect.effect)}
    if not effect.has_labels:
        for key in ("positives", "base_rate", "before", "after"):
            block[key] = None
    return block


def recalibrate_payload(result: RecalibrateResult) -> JsonObject:
    """``method``, ``seed``, ``weight_kind`` (with --weight-col), ``auto`` (the comparison),
    ``fit``, ``cross_fit``, ``input``, ``steps``; each only when it applies."""
    payload: JsonObject = {"method": result.method, "seed": result.seed}
    if result.weight_kind is not None:
        payload["weight_kind"] = result.weight_kind
    if result.choice is not None:
        payload["auto"] = to_json_object(result.choice)
    if result.fit is not None:
        payload["fit"] = effect_payload(result.fit)
    if result.cross_fit is not None:
        payload["cross_fit"] = result.cross_fit
    if result.input is not None:
        payload["input"] = effect_payload(result.input)
    payload["steps"] = list(result.step_kinds)
    if result.invalid_rows:  # --on-invalid drop: the fit file's, then the input's
        payload["invalid_rows"] = [invalid_rows_payload(i) for i in result.invalid_rows]
    return payload


# --------------------------------------------------------------------------- rerank-strata

#: The figures of each stratum's estimate reported with --estimate-target-prevalence.
TARGET_PREVALENCE_KEYS = ("prevalence", "ci_low", "ci_high", "method", "reference_prevalence")


def rerank_strata_payload(result: RerankStrataResult) -> JsonObject:
    """``seed``, ``smoothing``, ``weight_kind`` (with --weight-col), ``pca`` (with
    --pca-features), ``target_prevalence`` (with --estimate-target-prevalence),
    ``odds_source``, ``strata``, ``comparison`` (``null`` unless the target has labels of both
    classes) and ``streaming`` (the streaming engine's bounds; ``null`` in memory)."""
    payload: JsonObject = {"seed": result.seed, "smoothing": result.smoothing}
    if result.weight_kind is not None:
        payload["weight_kind"] = result.weight_kind
    if result.pca is not None:
        pca = to_json_object(result.pca)
        for key in ("reference_strata", "target_strata"):
            pca.pop(key)
        payload["pca"] = pca
    if result.target_prevalence is not None:
        payload["target_prevalence"] = {
            stratum: {key: to_jsonable(getattr(e, key)) for key in TARGET_PREVALENCE_KEYS}
            for stratum, e in result.target_prevalence.items()
        }
    payload["odds_source"] = result.odds_source
    payload["strata"] = to_jsonable(result.strata)
    # keys that depend on the data (labels in the target; the engine --engine auto picks) are
    # always there, null where they do not apply
    payload["comparison"] = None
    if result.comparison is not None:
        # the labelled rows compared first: with late labels, fewer than the target's
        payload["comparison"] = {
            "rows": result.comparison_rows,
            **to_json_object(result.comparison),
        }
    payload["streaming"] = None
    if result.streaming is not None:
        payload["streaming"] = to_json_object(result.streaming)
    return payload


# -------------------------------------------------------------------------- estimate-shift


def batch_payload(batch: BatchEstimate, *, batch_col: str | None) -> JsonObject:
    """``batch`` (with --batch-col), the estimate's figures, ``true_prevalence`` and ``error``
    (always there: ``null`` without labels, or for a batch some of whose labels are missing),
    ``decision`` (with --costs)."""
    entry: JsonObject = {} if batch_col is None else {"batch": batch.batch}
    entry.update(to_json_object(batch.estimate))
    entry.update(true_prevalence=batch.true_prevalence, error=to_jsonable(batch.error))
    if batch.decision is not None:
        entry["decision"] = to_json_object(batch.decision)
    return entry


def estimate_shift_payload(result: EstimateShiftResult) -> JsonObject:
    """One batch's object without --batch-col, else ``batch_col`` and ``batches``; with
    ``--history``, ``history`` too (:func:`history_payload`); with --weight-col,
    ``weight_kind``; from summaries, ``summary_binning``."""
    payload: JsonObject
    if result.batch_col is None:
        payload = batch_payload(result.batches[0], batch_col=None)
    else:
        entries: list[JsonValue] = [
            batch_payload(batch, batch_col=result.batch_col) for batch in result.batches
        ]
        payload = {"batch_col": result.batch_col, "batches": entries}
    if result.history is not None:
        payload["history"] = history_payload(result.history, result.batches)
    if result.weight_kind is not None:
        payload["weight_kind"] = result.weight_kind
    if result.binning is not None:
        payload["summary_binning"] = to_json_object(result.binning)
    return payload


# ------------------------------------------------------------------------------- summarize


def summarize_payload(result: SummarizeResult) -> JsonObject:
    """``inputs``, ``rows`` (kept), ``dropped``, ``dropped_by_reason``, with ``--by`` and
    ``--on-invalid drop`` ``dropped_by_group`` (over every input, as reliability's
    ``invalid_rows.by_group``), and per summary written: ``score_column``, ``path``,
    ``n_keys`` (stored rows), ``groups`` (the ``--by`` values, ``null`` the rows without one)
    and the summary's ``metadata``."""
    payload: dict[str, object] = {
        "inputs": list(result.sources),
        "rows": result.rows,
        "dropped": result.dropped,
        "dropped_by_reason": result.dropped_by_reason,
    }
    if result.dropped_by_group:
        payload["dropped_by_group"] = _group_drop_entries(result.dropped_by_group)
    payload["summaries"] = [
        {
            "score_column": written.score_column,
            "path": written.path,
            "n_keys": written.summary.n_keys,
            "groups": list(written.summary.groups),
            "metadata": written.summary.metadata(),
        }
        for written in result.outputs
    ]
    return to_json_object(payload)


# ------------------------------------------------------------------------------------ show


def show_payload(result: ShowResult) -> JsonObject:
    """``calib show --json``: ``file``, ``kind``, ``schema_version``, ``calib_version``,
    ``steps`` (each ``kind`` and ``details``: its fitted numbers in short), ``fitted_on`` (the
    provenance: file, rows, positives, base rate, seed first) and ``params`` (in full)."""
    artifact = result.artifact
    return {
        "file": result.path,
        "kind": artifact.kind,
        "schema_version": artifact.schema_version,
        "calib_version": artifact.calib_version,
        "steps": [
            {"kind": step.kind, "details": to_json_object(step.details)} for step in result.steps
        ],
        "fitted_on": to_json_object(result.provenance),
        "params": to_json_object(artifact.params),
    }


# ------------------------------------------------------ estimate-shift --backtest, --history


def backtest_payload(result: BacktestResult) -> JsonObject:
    """``estimate-shift --backtest`` as one JSON object: ``batch_col``, ``label_delay``,
    ``reference_prevalence``, ``ci_level``, ``best_method`` (the lowest ``mae``), ``methods``
    (per method: ``method``, ``uses_labels``, ``mae``, ``max_abs_error``, ``coverage``
    (``null`` without intervals) and ``coverage_batches`` (the batches it counts)) and
    ``batches`` (per fully labelled batch in order, those with a label missing left out:
    ``batch``, ``rows``, ``true_prevalence``, ``n_history``
    (labelled batches the history blend learnt from),
    ``estimates`` (per method: ``prevalence``, ``ci_low``, ``ci_high``, ``error`` = estimate
    minus truth) and ``blend_weights`` (per candidate))."""
    batches: list[JsonValue] = []
    for t, value in enumerate(result.batches):
        truth = float(result.true_prevalence[t])
        estimates: JsonObject = {}
        for method in result.methods:
            estimate = float(method.prevalence[t])
            estimates[method.name] = {
                "prevalence": estimate,
                "ci_low": None if method.ci_low is None else float(method.ci_low[t]),
                "ci_high": None if method.ci_high is None else float(method.ci_high[t]),
                "error": estimate - truth,
            }
        batches.append(
            {
                "batch": to_jsonable(value),
                "rows": result.rows[t],
                "true_prevalence": truth,
                "n_history": int(result.n_history[t]),
                "estimates": estimates,
                "blend_weights": {
                    name: float(weight)
                    for name, weight in zip(result.candidates, result.blend_weights[t], strict=True)
                },
            }
        )
    methods: list[JsonValue] = [
        {
            "method": method.name,
            "uses_labels": method.uses_labels,
            "mae": method.mae,
            "max_abs_error": method.max_abs_error,
            "coverage": method.coverage,
            "coverage_batches": method.coverage_batches,
        }
        for method in result.methods
    ]
    payload: JsonObject = {
        "batch_col": result.batch_col,
        "label_delay": result.label_delay,
        "reference_prevalence": result.reference_prevalence,
        "ci_level": result.ci_level,
        "best_method": result.best_method,
        "methods": methods,
        "batches": batches,
    }
    return to_json_object(payload)  # NaN (no bootstrap) and infinities become null


def history_payload(history: HistoryResult, batches: Sequence[BatchEstimate]) -> JsonObject:
    """``history`` of estimate-shift's report with ``--history``: ``file``, ``label_delay``,
    ``past_batches``, ``past_rows`` (of the fully labelled past batches, the ones used),
    ``ci_level``, ``candidates`` (each candidate's ``mae``
    on the past batches, each estimated as it would have been then), ``blend_mae`` (the
    blend's, likewise) and ``batches`` (per target batch: ``batch``, ``prevalence``,
    ``ci_low``, ``ci_high``, ``change`` = blend minus the label-shift estimate,
    ``n_history`` and the candidates' ``weights``)."""
    entries: list[JsonValue] = [
        {
            "batch": to_jsonable(batch.batch),
            "prevalence": float(history.prevalence[i]),
            "ci_low": float(history.ci_low[i]),
            "ci_high": float(history.ci_high[i]),
            "change": float(history.prevalence[i]) - batch.estimate.prevalence,
            "n_history": int(history.n_history[i]),
            "weights": {
                name: float(weight)
                for name, weight in zip(history.candidates, history.weights[i], strict=True)
            },
        }
        for i, batch in enumerate(batches)
    ]
    return to_json_object(
        {
            "file": history.source,
            "label_delay": history.label_delay,
            "past_batches": len(history.history_batches),
            "past_rows": history.history_rows,
            "ci_level": history.ci_level,
            "candidates": {
                name: {"mae": float(mae)}
                for name, mae in zip(history.candidates, history.candidate_mae, strict=True)
            },
            "blend_mae": history.blend_mae,
            "batches": entries,
        }
    )
