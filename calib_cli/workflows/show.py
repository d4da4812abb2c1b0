"""``calib show``: what a saved calibrator or sampling record is, and where it came from."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from calib_cli.artifacts import Artifact, load_artifact
from calib_cli.types import Warn
from calib_cli.workflows.common import check_paths, check_plot, ignore


@dataclass(frozen=True)
class ShowRequest:
    """The options of a ``show`` run."""

    artifact: str
    plot: str | None = None
    #: ``--plot-scale`` (None: not given, linear)
    plot_scale: str | None = None


@dataclass(frozen=True)
class StepSummary:
    """One step of a calibrator (or the prior correction a sampling record implies), its
    fitted numbers in short (``details``: name -> value, in a fixed order)."""

    kind: str
    details: Mapping[str, Any]


@dataclass(frozen=True)
class ShowResult:
    """The artifact as loaded (validated), its steps in short, and its provenance."""

    path: str
    artifact: Artifact
    steps: tuple[StepSummary, ...]

    @property
    def provenance(self) -> dict[str, Any]:
        """file, rows, positives, base rate, seed and date (when recorded), then the rest."""
        fitted = dict(self.artifact.fitted_on)
        if self.artifact.kind == "sampling":
            before = fitted.get("before") or {}
            fitted.setdefault("rows", before.get("rows"))
            fitted.setdefault("positives", before.get("positives"))
            fitted.setdefault("base_rate", before.get("base_rate"))
            fitted.setdefault("seed", self.artifact.params.get("seed"))
        first = ("file", "rows", "positives", "base_rate", "seed", "date")
        ordered = {key: fitted[key] for key in first if fitted.get(key) is not None}
        ordered.update({k: v for k, v in fitted.items() if k not in ordered and v is not None})
        return ordered


def run_show(request: ShowRequest, *, warn: Warn = ignore) -> ShowResult:
    """Check the picture's path, load and validate the artifact, summarise its steps."""
    check_plot(request.plot, request.plot_scale)
    check_paths(inputs=[request.artifact], files=[request.plot])
    artifact = load_artifact(request.artifact)
    return ShowResult(path=request.artifact, artifact=artifact, steps=summarise_steps(artifact))


def summarise_steps(artifact: Artifact) -> tuple[StepSummary, ...]:
    """Each step's fitted numbers in short; a sampling record as its rates.

    >>> a = Artifact(kind="platt", params={"slope": 0.5, "intercept": -1.0,
    ...     "score_kind": "probability"})
    >>> summarise_steps(a)[0].details["slope"]
    0.5
    """
    if artifact.kind == "chain":
        return tuple(_step(s["kind"], s["params"]) for s in artifact.params["steps"])
    return (_step(artifact.kind, artifact.params),)


def _step(kind: str, params: Mapping[str, Any]) -> StepSummary:
    details: dict[str, Any]
    if kind == "platt":
        details = {
            "slope": params["slope"],
            "intercept": params["intercept"],
            "score_kind": params["score_kind"],
            "converged": params.get("converged"),
        }
    elif kind == "beta":
        details = {k: params[k] for k in ("a", "b", "c")}
        details["converged"] = params.get("converged")
    elif kind == "isotonic":
        x, y = params["x_knots"], params["y_knots"]
        details = {
            "knots": len(x),
            "score_range": [x[0], x[-1]],
            "probability_range": _output_range(kind, params),
            "steps": len({float(v) for v in y}),
        }
    elif kind == "histogram":
        rates = params["rates"]
        details = {"bins": len(rates), "probability_range": _output_range(kind, params)}
    elif kind == "prior":
        shift = float(params["log_odds_shift"])
        details = {"log_odds_shift": shift, "odds_factor": math.exp(shift)}
        if params.get("strata_col") is not None:
            details = {
                "strata_col": params["strata_col"],
                "stratum_shifts": dict(params.get("stratum_shifts") or {}),
            }
    else:  # sampling
        details = {"key_col": params.get("key_col"), "seed": params.get("seed")}
        if params.get("strata_col") is None:
            details["negative_rate"] = params["negative_rate"]
            details["positive_rate"] = params["positive_rate"]
        else:
            details["strata_col"] = params["strata_col"]
            details["strata"] = dict(params["strata"])
    return StepSummary(kind=kind, details={k: v for k, v in details.items() if v is not None})


def _output_range(kind: str, params: Mapping[str, Any]) -> list[float]:
    """The lowest and highest probability a step outputs, as ``recalibrate`` applies it.

    Not its first and last knots: an isotonic map's outputs are clipped to
    ``[eps, 1 - eps]``, which its knots (0.0 for a block of negatives) are not. Isotonic and
    histogram maps are non-decreasing and constant beyond their ends, so their outputs at
    scores 0 and 1 are the extremes.

    >>> _output_range("isotonic", {"x_knots": [0.2, 0.8], "y_knots": [0.0, 1.0],
    ...                            "eps": 0.01, "strict": False})
    [0.01, 0.99]
    """
    from calib_cli.artifacts import step_from_params
    from calib_cli.core.selection import apply_calibrator

    low, high = apply_calibrator(step_from_params(kind, params), [0.0, 1.0])
    return [float(low), float(high)]


def artifact_name(path: str) -> str:
    """The file name shown in headings.

    >>> artifact_name("/tmp/models/platt.json")
    'platt.json'
    """
    return Path(path).name
