"""Versioned JSON artifacts: sampling records and saved calibrators (DESIGN.md, "Artifacts").

Every artifact is plain JSON, never pickle::

    {"schema_version": 1, "kind": "...", "params": {...}, "fitted_on": {...},
     "calib_version": "..."}

Loading validates everything (version, kind, keys, array lengths, finite numbers, increasing
knots) and refuses a bad file with :class:`~calib_cli.errors.ArtifactError` (exit 65) and a
message that names the file and the field, e.g. ``model.json: params.y_knots[3] is not a
finite number``.
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from calib_cli import __version__
from calib_cli.errors import ArtifactError, MissingInputError

if TYPE_CHECKING:
    from calib_cli.core.resampling import ClassBalance, SamplingSummary

SCHEMA_VERSION = 1
CALIBRATOR_KINDS = ("platt", "isotonic", "beta", "histogram")
STEP_KINDS = ("prior", *CALIBRATOR_KINDS)
ARTIFACT_KINDS = ("sampling", "chain", *STEP_KINDS)


@dataclass(frozen=True)
class Artifact:
    """A loaded (validated) or about-to-be-saved artifact."""

    kind: str
    params: Mapping[str, Any]
    fitted_on: Mapping[str, Any] = field(default_factory=dict)
    calib_version: str = __version__
    schema_version: int = SCHEMA_VERSION

    def to_json(self) -> str:
        """Stable JSON text (fixed key order, no NaN), ending with a newline."""
        document = {
            "schema_version": self.schema_version,
            "kind": self.kind,
            "params": self.params,
            "fitted_on": self.fitted_on,
            "calib_version": self.calib_version,
        }
        try:
            return json.dumps(document, indent=2, allow_nan=False) + "\n"
        except ValueError as error:  # NaN or infinity in params: a bug, not user input
            raise ArtifactError(f"cannot save a {self.kind} artifact: {error}") from None


def save_artifact(path: str, artifact: Artifact) -> None:
    """Validate ``artifact`` as a load would, then write it atomically."""
    from calib_cli import io

    validate_document(json.loads(artifact.to_json()), name=path)
    io.write_text(path, artifact.to_json())


def load_artifact(path: str, *, kinds: Sequence[str] = ARTIFACT_KINDS) -> Artifact:
    """Read and validate an artifact (``-``: standard input); refuse a kind not in ``kinds``."""
    name = "stdin" if path == "-" else path
    try:
        if path == "-":  # read whole (the callers' check_paths let stdin be read once)
            text = sys.stdin.buffer.read().decode("utf-8")
        else:
            text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise MissingInputError(f"{path}: no such file{_missing_record_hint(kinds)}") from None
    except OSError as error:
        raise MissingInputError(f"{name}: cannot read ({error.strerror})") from None
    except UnicodeDecodeError:
        raise ArtifactError(f"{name}: not a calib artifact (not UTF-8 JSON)") from None
    try:
        document = json.loads(text, parse_constant=_nonfinite_constant)
    except ValueError as error:
        raise ArtifactError(f"{name}: not valid JSON ({error})") from None
    artifact = validate_document(document, name=name)
    if artifact.kind not in kinds:
        raise ArtifactError(
            f"{name}: kind is '{artifact.kind}', expected {' or '.join(repr(k) for k in kinds)}"
        )
    return artifact


def _missing_record_hint(kinds: Sequence[str]) -> str:
    """Why a sampling record may be missing: calib resample writes it only when the sample
    is complete, so a pipe from resample to recalibrate reads it too early."""
    if tuple(kinds) != ("sampling",):
        return ""
    return (
        " (calib resample writes its record only once the whole sample is written, so "
        "'calib resample -o - --record R | calib recalibrate - --sampling-record R' looks for "
        "it too early: write the sample to a file first, then recalibrate it)"
    )


def _nonfinite_constant(token: str) -> float:
    """NaN and Infinity (which Python's json writes) load as numbers, so that validation
    refuses them naming the field."""
    return {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}[token]


def validate_document(document: Any, *, name: str) -> Artifact:
    """Check the envelope and the kind's parameters; return the Artifact."""
    check = _Checker(name)
    if not isinstance(document, dict):
        check.fail("", "must be a JSON object")
    kind = document.get("kind")
    if kind not in ARTIFACT_KINDS:  # a report, a summary, ...: say so before its fields
        what = "no 'kind'" if kind is None else f"kind {_shown(kind)}"
        check.fail(
            "",
            f"is not a saved calibrator or sampling record ({what}: a JSON report or a "
            "summary?); give a file that --save-model or resample wrote",
        )
    check.only(document, ENVELOPE_KEYS)
    version = document.get("schema_version")
    if isinstance(version, bool) or version != SCHEMA_VERSION:
        check.fail(
            "schema_version",
            f"is {_shown(version)}; this calib ({__version__}) reads version {SCHEMA_VERSION}",
        )
    params = check.mapping(document, "params")
    fitted_on = document.get("fitted_on", {})
    if not isinstance(fitted_on, dict):
        check.fail("fitted_on", "must be an object")
    calib_version = document.get("calib_version", "")
    if not isinstance(calib_version, str):
        check.fail("calib_version", "must be a string")
    check.nested("params").only(params, PARAM_KEYS[kind])
    _VALIDATORS[kind](check.nested("params"), params)
    return Artifact(
        kind=kind,
        params=params,
        fitted_on=fitted_on,
        calib_version=calib_version,
        schema_version=SCHEMA_VERSION,
    )


def _shown(value: Any) -> str:
    """A value as the JSON the user wrote (null, true, "text"), not as Python's repr."""
    try:
        return json.dumps(value, allow_nan=True)
    except (TypeError, ValueError):
        return repr(value)


class _Checker:
    """Field checks whose failures name the file and the dotted field path."""

    def __init__(self, name: str, prefix: str = "") -> None:
        self.name = name
        self.prefix = prefix

    def nested(self, key: str) -> _Checker:
        return _Checker(self.name, f"{self.prefix}{key}.")

    def fail(self, key: str, problem: str) -> NoReturn:
        where = f"{self.prefix}{key}" if key else (self.prefix.rstrip(".") or "the document")
        raise ArtifactError(f"{self.name}: {where} {problem}")

    def only(self, params: Mapping[str, Any], allowed: Sequence[str]) -> None:
        """Refuse keys this version does not know (a typo must not be ignored silently)."""
        unknown = sorted(set(params) - set(allowed))
        if unknown:
            self.fail(unknown[0], f"is not a field of this artifact (known: {', '.join(allowed)})")

    def present(self, params: Mapping[str, Any], key: str) -> Any:
        if key not in params:
            self.fail(key, "is missing")
        return params[key]

    def mapping(self, params: Mapping[str, Any], key: str) -> dict[str, Any]:
        value = self.present(params, key)
        if not isinstance(value, dict):
            self.fail(key, "must be an object")
        return value

    def number(
        self,
        params: Mapping[str, Any],
        key: str,
        *,
        low: float | None = None,
        high: float | None = None,
        low_open: bool = False,
    ) -> float:
        value = self.present(params, key)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            self.fail(key, f"must be a number, not {_shown(value)}")
        number = float(value)
        if not math.isfinite(number):
            self.fail(key, "is not a finite number")
        if low is not None and (number < low or (low_open and number == low)):
            self.fail(key, f"is {number!r}; must be {'>' if low_open else '>='} {low!r}")
        if high is not None and number > high:
            self.fail(key, f"is {number!r}; must be <= {high!r}")
        return number

    def integer(self, params: Mapping[str, Any], key: str, *, low: int = 0) -> int:
        value = self.present(params, key)
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            self.fail(key, f"must be an integer >= {low}, not {_shown(value)}")
        return int(value)

    def boolean(self, params: Mapping[str, Any], key: str) -> bool:
        value = self.present(params, key)
        if not isinstance(value, bool):
            self.fail(key, f"must be true or false, not {_shown(value)}")
        return bool(value)

    def text(
        self, params: Mapping[str, Any], key: str, *, allowed: Sequence[str] | None = None
    ) -> str:
        value = self.present(params, key)
        if not isinstance(value, str):
            self.fail(key, f"must be a string, not {_shown(value)}")
        if allowed is not None and value not in allowed:
            self.fail(key, f"is {_shown(value)}; expected one of {', '.join(allowed)}")
        return str(value)

    def optional_text(self, params: Mapping[str, Any], key: str) -> str | None:
        if params.get(key) is None:
            return None
        return self.text(params, key)

    def numbers(
        self,
        params: Mapping[str, Any],
        key: str,
        *,
        min_length: int = 1,
        increasing: bool = False,
        strictly: bool = True,
        low: float | None = None,
        high: float | None = None,
    ) -> list[float]:
        values = self.present(params, key)
        if not isinstance(values, list):
            self.fail(key, "must be a list of numbers")
        if len(values) < min_length:
            self.fail(key, f"has {len(values)} values; needs at least {min_length}")
        out: list[float] = []
        for index, value in enumerate(values):
            where = f"{key}[{index}]"
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                self.fail(where, f"must be a number, not {_shown(value)}")
            number = float(value)
            if not math.isfinite(number):
                self.fail(where, "is not a finite number")
            if (low is not None and number < low) or (high is not None and number > high):
                self.fail(where, f"is {number!r}; must lie in [{low}, {high}]")
            if increasing and out and (number <= out[-1] if strictly else number < out[-1]):
                order = "strictly increasing" if strictly else "non-decreasing"
                self.fail(where, f"is {number!r} after {out[-1]!r}; values must be {order}")
            out.append(number)
        return out


# ------------------------------------------------------------------------ per-kind checks


def _validate_sampling(check: _Checker, params: Mapping[str, Any]) -> None:
    check.integer(params, "seed")
    check.optional_text(params, "key_col")
    check.text(params, "key_type", allowed=("row", "integer", "string"))
    check.text(params, "hash")
    check.text(params, "label_col")
    strata_col = check.optional_text(params, "strata_col")
    if strata_col is None:
        check.number(params, "negative_rate", low=0.0, high=1.0, low_open=True)
        check.number(params, "positive_rate", low=0.0, high=1.0, low_open=True)
        return
    strata = check.mapping(params, "strata")
    if not strata:
        check.fail("strata", "is empty although strata_col is set")
    for stratum, rates in strata.items():
        inner = check.nested(f"strata.{stratum}")
        if not isinstance(rates, dict):
            inner.fail("", "must be an object")
        inner.number(rates, "negative_rate", low=0.0, high=1.0, low_open=True)
        inner.number(rates, "positive_rate", low=0.0, high=1.0, low_open=True)


def _validate_prior(check: _Checker, params: Mapping[str, Any]) -> None:
    check.number(params, "log_odds_shift")
    strata_col = check.optional_text(params, "strata_col")
    shifts = params.get("stratum_shifts") or {}
    if not isinstance(shifts, dict):
        check.fail("stratum_shifts", "must be an object")
    if strata_col is not None and not shifts:
        check.fail("stratum_shifts", "is empty although strata_col is set")
    inner = check.nested("stratum_shifts")
    for stratum in shifts:
        inner.number(shifts, stratum)


def _fit_diagnostics(check: _Checker, params: Mapping[str, Any], *keys: str) -> None:
    """Optional fit diagnostics: checked when present (a hand-edited "no" is not True)."""
    for key in keys:
        if key in params:
            if key == "n_iter":
                check.integer(params, key)
            else:
                check.boolean(params, key)


def _validate_platt(check: _Checker, params: Mapping[str, Any]) -> None:
    check.number(params, "slope")
    check.number(params, "intercept")
    check.text(params, "score_kind", allowed=("probability", "logit", "raw"))
    _fit_diagnostics(check, params, "converged", "n_iter", "separable")


def _validate_isotonic(check: _Checker, params: Mapping[str, Any]) -> None:
    x_knots = check.numbers(params, "x_knots", increasing=True)
    y_knots = check.numbers(params, "y_knots", increasing=True, strictly=False, low=0.0, high=1.0)
    if len(x_knots) != len(y_knots):
        check.fail("y_knots", f"has {len(y_knots)} values for {len(x_knots)} x_knots")
    check.number(params, "eps", low=0.0, high=0.5)
    check.boolean(params, "strict")


def _validate_beta(check: _Checker, params: Mapping[str, Any]) -> None:
    check.number(params, "a", low=0.0)
    check.number(params, "b", low=0.0)
    check.number(params, "c")
    _fit_diagnostics(check, params, "converged", "n_iter", "separable")


def _validate_histogram(check: _Checker, params: Mapping[str, Any]) -> None:
    edges = check.numbers(params, "edges", min_length=2, increasing=True, low=0.0, high=1.0)
    rates = check.numbers(params, "rates", increasing=True, strictly=False, low=0.0, high=1.0)
    if len(rates) != len(edges) - 1:
        check.fail("rates", f"has {len(rates)} values for {len(edges) - 1} bins")
    if edges[0] != 0.0 or edges[-1] != 1.0:
        check.fail("edges", f"must run from 0 to 1, not from {edges[0]!r} to {edges[-1]!r}")


def _validate_chain(check: _Checker, params: Mapping[str, Any]) -> None:
    steps = check.present(params, "steps")
    if not isinstance(steps, list) or not steps:
        check.fail("steps", "must be a non-empty list")
    for index, step in enumerate(steps):
        inner = check.nested(f"steps[{index}]")
        if not isinstance(step, dict):
            inner.fail("", "must be an object")
        inner.only(step, ("kind", "params"))
        kind = inner.text(step, "kind", allowed=STEP_KINDS)
        step_params = inner.mapping(step, "params")
        inner.nested("params").only(step_params, PARAM_KEYS[kind])
        _VALIDATORS[kind](inner.nested("params"), step_params)


ENVELOPE_KEYS = ("schema_version", "kind", "params", "fitted_on", "calib_version")
PARAM_KEYS: dict[str, tuple[str, ...]] = {
    "sampling": (
        "hash",
        "seed",
        "key_col",
        "key_type",
        "label_col",
        "positive_label",
        "strata_col",
        "negative_rate",
        "positive_rate",
        "strata",
    ),
    "prior": ("log_odds_shift", "strata_col", "stratum_shifts"),
    "platt": ("slope", "intercept", "score_kind", "converged", "n_iter", "separable"),
    "isotonic": ("x_knots", "y_knots", "eps", "strict"),
    "beta": ("a", "b", "c", "converged", "n_iter", "separable"),
    "histogram": ("edges", "rates"),
    "chain": ("steps",),
}

_VALIDATORS = {
    "sampling": _validate_sampling,
    "prior": _validate_prior,
    "platt": _validate_platt,
    "isotonic": _validate_isotonic,
    "beta": _validate_beta,
    "histogram": _validate_histogram,
    "chain": _validate_chain,
}


def provenance(
    *,
    file: str,
    rows: int,
    positives: float | None = None,
    base_rate: float | None = None,
    columns: Mapping[str, str | None] | None = None,
    seed: int | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """The ``fitted_on`` block: where and on what an artifact was made."""
    block: dict[str, Any] = {"file": file, "rows": rows}
    if positives is not None:
        block["positives"] = positives
    if base_rate is not None:
        block["base_rate"] = base_rate
    if columns is not None:
        block["columns"] = dict(columns)
    if seed is not None:
        block["seed"] = seed
    block.update(extra)
    return block


# ----------------------------------------------------------- steps <-> artifact params


def step_params(step: Any) -> dict[str, Any]:
    """The JSON params of a calibration step (arrays as plain lists of floats)."""
    import dataclasses

    import numpy as np

    out: dict[str, Any] = {}
    for item in dataclasses.fields(step):
        value = getattr(step, item.name)
        if isinstance(value, np.ndarray):
            value = [float(v) for v in value.tolist()]
        elif isinstance(value, Mapping):
            value = {str(k): float(v) for k, v in value.items()}
        elif isinstance(value, (bool, np.bool_)):
            value = bool(value)
        elif isinstance(value, (int, np.integer)):
            value = int(value)
        elif isinstance(value, (float, np.floating)):
            value = float(value)
        out[item.name] = value
    return out


def step_from_params(kind: str, params: Mapping[str, Any]) -> Any:
    """Rebuild a (validated) step's dataclass from its JSON params."""
    import numpy as np

    from calib_cli.core.beta import BetaParams
    from calib_cli.core.chain import PriorParams
    from calib_cli.core.histogram import HistogramParams
    from calib_cli.core.isotonic import IsotonicParams
    from calib_cli.core.platt import PlattParams

    if kind == "prior":
        return PriorParams(
            log_odds_shift=float(params["log_odds_shift"]),
            strata_col=params.get("strata_col"),
            stratum_shifts={
                str(k): float(v) for k, v in (params.get("stratum_shifts") or {}).items()
            },
        )
    if kind == "platt":
        return PlattParams(
            slope=float(params["slope"]),
            intercept=float(params["intercept"]),
            score_kind=params["score_kind"],
            converged=bool(params.get("converged", True)),
            n_iter=int(params.get("n_iter", 0)),
            separable=bool(params.get("separable", False)),
        )
    if kind == "isotonic":
        return IsotonicParams(
            x_knots=np.asarray(params["x_knots"], dtype=np.float64),
            y_knots=np.asarray(params["y_knots"], dtype=np.float64),
            eps=float(params["eps"]),
            strict=bool(params["strict"]),
        )
    if kind == "beta":
        return BetaParams(
            a=float(params["a"]),
            b=float(params["b"]),
            c=float(params["c"]),
            converged=bool(params.get("converged", True)),
            n_iter=int(params.get("n_iter", 0)),
            separable=bool(params.get("separable", False)),
        )
    return HistogramParams(
        edges=np.asarray(params["edges"], dtype=np.float64),
        rates=np.asarray(params["rates"], dtype=np.float64),
    )


def steps_artifact(steps: Sequence[Any], fitted_on: Mapping[str, Any]) -> Artifact:
    """One step saves as its own kind; several as a ``chain``."""
    if len(steps) == 1:
        return Artifact(kind=steps[0].kind, params=step_params(steps[0]), fitted_on=fitted_on)
    return Artifact(
        kind="chain",
        params={"steps": [{"kind": s.kind, "params": step_params(s)} for s in steps]},
        fitted_on=fitted_on,
    )


def steps_of(artifact: Artifact) -> tuple[Any, ...]:
    """The calibration steps of a loaded calibrator or chain artifact, in order."""
    if artifact.kind == "chain":
        return tuple(step_from_params(s["kind"], s["params"]) for s in artifact.params["steps"])
    return (step_from_params(artifact.kind, artifact.params),)


def fitted_score_kind(artifact: Artifact) -> str:
    """The kind of score a calibrator's first step read when it was fitted: a Platt step's own,
    else ``fitted_on.score_kind`` as ``recalibrate --save-model`` records it (a prior fitted on
    logits), else probability."""
    first = steps_of(artifact)[0]
    if first.kind == "platt":
        return str(first.score_kind)
    recorded = artifact.fitted_on.get("score_kind")
    return recorded if recorded in ("probability", "logit", "raw") else "probability"


def prior_from_sampling(artifact: Artifact) -> Any:
    """The prior correction a sampling record implies: log w = log(negative_rate) -
    log(positive_rate), per stratum when the record has strata."""
    from calib_cli.core.chain import PriorParams
    from calib_cli.core.prior import prior_shift_log_odds

    params = artifact.params
    if params.get("strata_col") is None:
        shift = prior_shift_log_odds(
            negative_rate=params["negative_rate"], positive_rate=params["positive_rate"]
        )
        return PriorParams(log_odds_shift=shift)
    shifts = {
        str(stratum): prior_shift_log_odds(
            negative_rate=rates["negative_rate"], positive_rate=rates["positive_rate"]
        )
        for stratum, rates in params["strata"].items()
    }
    return PriorParams(log_odds_shift=0.0, strata_col=params["strata_col"], stratum_shifts=shifts)


# ------------------------------------------------------------------------ sampling records

#: The name of the sampling rule a record was made with (calib_cli.core.sampling).
HASH_NAME = "calib-hash64-v2"


def class_balance_json(counts: ClassBalance) -> dict[str, Any]:
    """``{"rows", "positives", "negatives", "base_rate"}`` of a table or stratum."""
    return {
        "rows": counts.rows,
        "positives": counts.positives,
        "negatives": counts.negatives,
        "base_rate": counts.base_rate,
    }


def sampling_summary_json(summary: SamplingSummary) -> dict[str, Any]:
    """Counts and base rates before and after, overall and per stratum (the record's
    ``fitted_on`` and the ``resample`` report share these keys)."""
    block: dict[str, Any] = {
        "before": class_balance_json(summary.before),
        "after": class_balance_json(summary.after),
    }
    if summary.stratified:
        block["strata"] = {
            s.stratum: {
                "negative_rate": s.rates.negative_rate,
                "positive_rate": s.rates.positive_rate,
                "before": class_balance_json(s.before),
                "after": class_balance_json(s.after),
            }
            for s in summary.strata
        }
    else:
        block.update(
            negative_rate=summary.rates.negative_rate, positive_rate=summary.rates.positive_rate
        )
    return block


def sampling_record(
    summary: SamplingSummary,
    *,
    seed: int,
    key_col: str | None,
    key_type: str,
    label_col: str,
    positive_label: str | None,
    strata_col: str | None,
    file: str,
    file_format: str,
    output: str,
) -> Artifact:
    """The ``sampling`` artifact of a ``resample`` run: the rule, its rates and what it kept."""
    params: dict[str, Any] = {
        "hash": HASH_NAME,
        "seed": seed,
        "key_col": key_col,
        "key_type": key_type,
        "label_col": label_col,
        "positive_label": positive_label,
        "strata_col": strata_col,
    }
    if strata_col is None:
        params.update(
            negative_rate=summary.rates.negative_rate, positive_rate=summary.rates.positive_rate
        )
    else:
        params["strata"] = {
            s.stratum: {
                "negative_rate": s.rates.negative_rate,
                "positive_rate": s.rates.positive_rate,
            }
            for s in summary.strata
        }
    return Artifact(
        kind="sampling",
        params=params,
        fitted_on={
            "file": file,
            "format": file_format,
            "output": output,
            **sampling_summary_json(summary),
        },
    )
