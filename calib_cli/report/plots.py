"""Pictures: reliability diagrams, label-shift estimates, re-ranked ROC curves, calibrator maps.

The only module that imports matplotlib, and only when a picture is asked for (``--plot``):
matplotlib is the optional extra ``calib-cli[plot]``. Every function here is pure: typed results
in, a :class:`matplotlib.figure.Figure` out (no pyplot, no global state), and
:func:`save_figure` writes it atomically, in the format its extension names, byte for byte the
same on every run (no dates, no random ids, a fixed resolution).

What each picture shows
-----------------------
:func:`reliability_figure`
    The diagonal; each score column's observed positive rate per bin at the bin's mean score,
    with the bin's Wilson interval (empty bins are left out, not drawn as zeros); beneath, the
    rows per bin on a log axis (the bin table's own counts: the histogram has the bins of the
    diagram, weighted when the figures are); one colour per column, a legend with ECE and log
    loss; one panel per group, all panels on shared axes. ``scale="logit"`` puts both axes on
    the logit scale so that 0.1% and 1% stay apart; a bin that saw no positives (or only
    positives) has no place on that scale and is drawn hollow at the axis edge.
:func:`shift_figure`
    Each batch's estimated positive rate with its interval, and the reference rate as a line
    (on a time or number axis when every batch name reads as a date or a number).
:func:`mixture_figure`
    One batch's score histogram with the fitted label-shift mixture and its two components,
    :math:`(1-\\alpha) f_0` and :math:`\\alpha f_1`, as densities on the logit of the score.
:func:`roc_figure`, :func:`slopes_figure`
    The raw and re-ranked ROC curves of a labelled target (also at low false-positive rates,
    on a log axis); each stratum's ROC slope (the likelihood ratio) against its score.
:func:`calibrator_figure`
    A saved calibrator's (or sampling record's) map from score to probability.
"""

from __future__ import annotations

import datetime as dt
import functools
import io as _bytes_io
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ParamSpec

import numpy as np

from calib_cli.errors import UsageError
from calib_cli.types import PlotScale as PlotScale
from calib_cli.types import ScoreHistogram as ScoreHistogram

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

    from calib_cli.artifacts import Artifact
    from calib_cli.core.metrics import ReliabilitySummary
    from calib_cli.core.shift import ReferenceModel, ShiftEstimate, TargetCounts
    from calib_cli.core.strata import RankingComparison, StratumSlope
    from calib_cli.types import FloatArray
    from calib_cli.workflows.estimate_shift import EstimateShiftResult
    from calib_cli.workflows.reliability import ReliabilityResult
    from calib_cli.workflows.rerank_strata import RerankStrataResult

_P = ParamSpec("_P")

#: Picture formats, by file extension.
PLOT_FORMATS: Mapping[str, str] = {".png": "png", ".svg": "svg", ".pdf": "pdf"}
#: What to install when matplotlib is missing.
PLOT_NEEDS = "--plot needs matplotlib: pip install 'calib-cli[plot]'"
#: Resolution of PNG files (SVG and PDF are vector; their size is the figure's, in inches).
DPI = 150
#: Okabe-Ito: told apart by readers with any common colour-vision deficiency.
COLOURS = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000")
GREY = "#7f7f7f"
_RC = {
    "svg.hashsalt": "calib",  # ids in SVG files from a fixed salt, not a random one
    "svg.fonttype": "none",  # text stays text (searchable, small); DejaVu Sans is named
    "pdf.fonttype": 42,
    "font.family": "DejaVu Sans",
    "font.size": 9,
    "axes.titlesize": 9,
    "axes.labelsize": 9,
    "legend.fontsize": 7.5,
    "xtick.labelsize": 8,
    "ytick.labelsize": 8,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "path.simplify": True,
}
_METADATA: Mapping[str, Mapping[str, Any]] = {
    "png": {"Software": None},
    "svg": {"Date": None, "Creator": "calib"},
    "pdf": {"CreationDate": None, "ModDate": None, "Creator": "calib", "Producer": None},
}


def plot_format(path: str) -> str:
    """The picture format a path's extension names (``png``, ``svg`` or ``pdf``).

    >>> plot_format("out/reliability.SVG")
    'svg'
    """
    suffix = Path(path).suffix.lower()
    if suffix not in PLOT_FORMATS:
        shown = f"'{suffix}'" if suffix else "no extension"
        raise UsageError(f"--plot {path}: {shown} is not a picture format; use .png, .svg or .pdf")
    return PLOT_FORMATS[suffix]


def _matplotlib() -> Any:
    """matplotlib with the Agg backend, or a usage error saying what to install."""
    try:
        import matplotlib
    except ImportError:
        raise UsageError(PLOT_NEEDS) from None
    matplotlib.use("Agg")
    return matplotlib


def _figure(width: float, height: float) -> Figure:
    _matplotlib()
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), dpi=DPI, layout="constrained")


def _styled(function: Callable[_P, Figure]) -> Callable[_P, Figure]:
    """Run a figure builder inside calib's fixed rc settings (fonts, salt), leaving the
    caller's matplotlib settings as they were."""

    @functools.wraps(function)
    def wrapper(*args: _P.args, **kwargs: _P.kwargs) -> Figure:
        matplotlib = _matplotlib()
        with matplotlib.rc_context(_RC):
            return function(*args, **kwargs)

    return wrapper


def figure_bytes(figure: Figure, fmt: str) -> bytes:
    """The figure as ``png``, ``svg`` or ``pdf`` bytes, the same bytes on every run."""
    matplotlib = _matplotlib()
    buffer = _bytes_io.BytesIO()
    with matplotlib.rc_context(_RC):
        figure.savefig(buffer, format=fmt, dpi=DPI, metadata=dict(_METADATA[fmt]))
    return buffer.getvalue()


def save_figure(figure: Figure, path: str) -> None:
    """Write the figure atomically to ``path`` in the format its extension names."""
    from calib_cli import io

    io.write_bytes(path, figure_bytes(figure, plot_format(path)))


# ------------------------------------------------------------------------------ helpers


def _gid(*parts: object) -> str:
    """An SVG id from free text (letters, digits, ``-`` and ``_`` only).

    >>> _gid("curve", "model a", "segment=B")
    'curve-model_a-segment_B'
    """
    return "-".join(re.sub(r"[^A-Za-z0-9_-]+", "_", str(part)) for part in parts)


def _probability_label(p: float) -> str:
    """A tick label for a probability on a logit axis.

    >>> [_probability_label(p) for p in (1e-6, 0.001, 0.1, 0.5, 0.99, 1 - 1e-5)]
    ['1e-6', '0.001', '0.1', '0.5', '0.99', '1-1e-5']
    """
    if p >= 0.5:
        q = 1.0 - p
        if q < 1e-3 * 0.999:
            return f"1-1e{round(math.log10(q))}"
        return f"{p:.{max(1, round(-math.log10(q)))}f}"
    if p < 1e-3 * 0.999:
        return f"1e{round(math.log10(p))}"
    return f"{p:g}"


def _logit_ticks(low: float, high: float) -> list[float]:
    """Decades below 0.5, 0.5, and their mirrors above, within [low, high]; thinned to at
    most nine.

    >>> _logit_ticks(1e-3, 0.5)
    [0.001, 0.01, 0.1, 0.5]
    """
    below = [10.0**k for k in range(-12, 0)]
    candidates = sorted({*below, 0.5, *(1.0 - b for b in below)})
    ticks = [t for t in candidates if low * (1 - 1e-9) <= t <= high * (1 + 1e-9)]
    while len(ticks) > 9:
        middle = ticks.index(0.5) if 0.5 in ticks else len(ticks) // 2
        ticks = [t for i, t in enumerate(ticks) if (i - middle) % 2 == 0]
    return ticks


def _logit_limits(values: FloatArray) -> tuple[float, float]:
    """Limits of a logit axis: the decade below the smallest value in (0, 1), and its mirror
    above the largest; at least [0.01, 0.5] so a diagram has room.

    >>> _logit_limits(np.array([0.0, 0.0004, 0.2, 1.0]))
    (0.0001, 0.5)
    """
    inside = values[np.isfinite(values) & (values > 0.0) & (values < 1.0)]
    low = float(inside.min()) if inside.size else 0.01
    high = float(inside.max()) if inside.size else 0.5
    low_lim = min(0.01, 10.0 ** math.floor(math.log10(low) + 1e-9))
    high_lim = 0.5 if high <= 0.5 else 1.0 - 10.0 ** math.floor(math.log10(1.0 - high) + 1e-9)
    return max(low_lim, 1e-12), min(high_lim, 1.0 - 1e-12)


def _linear_limit(values: FloatArray) -> float:
    """The top of a linear axis: a round number just above the data, at most 1.

    >>> _linear_limit(np.array([0.01, 0.034])), _linear_limit(np.array([0.2, 0.93]))
    (0.04, 1.0)
    >>> _linear_limit(np.array([0.137]))
    0.15
    """
    finite = values[np.isfinite(values)]
    top = float(finite.max()) if finite.size else 1.0
    if top <= 0.0:
        return 1.0
    step = 10.0 ** math.floor(math.log10(top))
    for multiple in (1.0, 1.2, 1.5, 2.0, 2.5, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0):
        if multiple * step >= top * 1.02:
            return float(min(1.0, round(multiple * step, 12)))
    return 1.0


def _probability_axes(axes: Axes, *, scale: PlotScale, low: float, high: float, x: bool) -> None:
    """Put one probability axis on ``scale`` with readable ticks (no minor logit ticks)."""
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

    set_scale = axes.set_xscale if x else axes.set_yscale
    set_lim = axes.set_xlim if x else axes.set_ylim
    axis = axes.xaxis if x else axes.yaxis
    if scale == "logit":
        set_scale("logit", nonpositive="clip")
        set_lim(low, high)
        axis.set_major_locator(FixedLocator(_logit_ticks(low, high)))
        axis.set_major_formatter(FuncFormatter(lambda p, _: _probability_label(p)))
        axis.set_minor_locator(NullLocator())
    else:
        set_lim(0.0, high)


def _rate_label(value: float) -> str:
    """A tick on a log axis of rates, as the logit axes write them: 1e-5, 0.001, 0.1, 1.

    >>> [_rate_label(v) for v in (1e-5, 1e-4, 0.001, 0.1, 1.0)]
    ['1e-5', '1e-4', '0.001', '0.1', '1']
    """
    if 0.0 < value < 1e-3 * 0.999:
        return f"1e{round(math.log10(value))}"
    return f"{value:g}"


def _count_label(value: float) -> str:
    """A count tick: 1, 10, 100, 1k, 10k, 1M.

    >>> [_count_label(v) for v in (1, 100, 1e3, 2.5e4, 1e7, 0.1)]
    ['1', '100', '1k', '25k', '10M', '0.1']
    """
    for limit, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if value >= limit:
            return f"{value / limit:g}{suffix}"
    return f"{value:g}"


def _shorten(text: str, limit: int = 40) -> str:
    """Text cut to ``limit`` characters with an ellipsis (a panel heading must fit its panel).

    >>> _shorten("segment=north"), _shorten("x" * 50, 10)
    ('segment=north', 'xxxxxxxxx\u2026')
    """
    return text if len(text) <= limit else text[: limit - 1] + "\u2026"


def _fmt(value: float, digits: int = 3) -> str:
    """A figure in a legend or title: three significant digits, ``n/a`` when undefined.

    >>> _fmt(0.012345), _fmt(float("nan")), _fmt(12345.0)
    ('0.0123', 'n/a', '1.23e+04')
    """
    if not math.isfinite(value):
        return "n/a"
    return f"{value:.{digits}g}"


# -------------------------------------------------------------------------- reliability


@dataclass(frozen=True)
class ReliabilityCurve:
    """One score column in one panel: its legend label, its figures, and optionally a finer
    histogram of its scores than the bin table (drawn beneath in place of the bins' counts;
    give it equal steps on the picture's scale, e.g. 50 steps of 0.02 for ``linear``, steps
    of 0.2 in the logit for ``logit``)."""

    label: str
    summary: ReliabilitySummary
    histogram: ScoreHistogram | None = None


#: One panel: its heading (None: no heading) and its curves.
ReliabilityPanel = tuple["str | None", Sequence[ReliabilityCurve]]


@dataclass(frozen=True)
class _BinArrays:
    lower: FloatArray
    upper: FloatArray
    count: FloatArray
    mean_score: FloatArray
    rate: FloatArray
    ci_low: FloatArray
    ci_high: FloatArray

    @classmethod
    def of(cls, summary: ReliabilitySummary) -> _BinArrays:
        def column(name: str) -> FloatArray:
            return np.array([getattr(b, name) for b in summary.bins], dtype=np.float64)

        return cls(
            lower=column("lower"),
            upper=column("upper"),
            count=column("count"),
            mean_score=column("mean_score"),
            rate=column("observed_rate"),
            ci_low=column("observed_ci_low"),
            ci_high=column("observed_ci_high"),
        )


def reliability_title(
    source: str, summary: ReliabilitySummary, *, weighting: str, n_bins: int, strategy: str
) -> str:
    """The heading of a reliability picture, on two lines (one panel is 6.4 inches wide): the
    file; rows, base rate, weighting and bins.

    >>> from calib_cli.core.metrics import reliability_summary
    >>> s = reliability_summary(np.array([0.0, 1.0]), np.array([0.2, 0.7]))
    >>> print(reliability_title("day.csv", s, weighting="unweighted", n_bins=10,
    ...                         strategy="uniform"))
    Reliability of day.csv
    n = 2, base rate 0.5, unweighted; 10 uniform bins
    """
    return (
        f"Reliability of {_shorten(source, 70)}\n"
        f"n = {summary.n:,}, base rate {_fmt(summary.base_rate)}, {weighting}; "
        f"{n_bins} {strategy} bins"
    )


@_styled
def reliability_figure(
    panels: Sequence[ReliabilityPanel],
    *,
    scale: PlotScale = "linear",
    title: str = "",
    count_label: str = "rows",
) -> Figure:
    """Reliability diagrams: one panel per group, every score column overlaid in each.

    Parameters
    ----------
    panels : sequence of (heading, [ReliabilityCurve, ...])
        The first panel is usually all rows (heading None), the others one group each; every
        panel holds the same columns in the same order (a column keeps its colour).
    scale : {"linear", "logit"}
        Both probability axes on this scale (logit: rare events stay readable).
    title : str
        The figure's heading (see :func:`reliability_title`).
    count_label : str
        What the histograms count (``"weighted rows"`` when the figures are weighted).
    """
    if not panels or not any(curves for _, curves in panels):
        raise ValueError("a reliability picture needs at least one curve")
    arrays = [[(c, _BinArrays.of(c.summary)) for c in curves] for _, curves in panels]
    everything = np.concatenate(
        [
            np.concatenate([a.mean_score, a.rate, a.ci_low, a.ci_high])[
                np.concatenate([a.count > 0] * 4)
            ]
            for panel in arrays
            for _, a in panel
        ]
        + [_histogram_extent(c.histogram) for panel in arrays for c, _ in panel]
    )
    if scale == "logit":
        low, high = _logit_limits(everything)
    else:
        low, high = 0.0, _linear_limit(everything)
    n_panels = len(panels)
    n_cols = min(n_panels, 3 if n_panels <= 9 else 4)
    n_rows = math.ceil(n_panels / n_cols)
    figure = _figure(3.4 * n_cols + 0.6 if n_panels > 1 else 6.4, 4.6 * n_rows + 0.5)
    grid = figure.add_gridspec(2 * n_rows, n_cols, height_ratios=[3.2, 1.0] * n_rows)
    steps = [_histogram_steps(curves, scale=scale, low=low, high=high) for curves in arrays]
    positive = np.concatenate([c[c > 0] for panel in steps for _, _, _, c in panel])
    floor = float(positive.min()) / 3.0 if positive.size else 0.3
    top = float(positive.max()) * 2.0 if positive.size else 10.0
    fine = all(c.histogram is not None for curves in arrays for c, _ in curves)
    first_curve: Axes | None = None
    first_hist: Axes | None = None
    any_edge = False
    for index, ((heading, _), curves) in enumerate(zip(panels, arrays, strict=True)):
        row, col = divmod(index, n_cols)
        curve_ax = figure.add_subplot(grid[2 * row, col], sharex=first_curve, sharey=first_curve)
        hist_ax = figure.add_subplot(grid[2 * row + 1, col], sharex=curve_ax, sharey=first_hist)
        first_curve = first_curve or curve_ax
        first_hist = first_hist or hist_ax
        curve_ax.set_gid(_gid("reliability", index))
        hist_ax.set_gid(_gid("histogram", index))
        any_edge |= _draw_curves(curve_ax, curves, scale=scale, low=low, high=high)
        _draw_histogram(hist_ax, steps[index], floor=floor, top=top)
        handles, labels = curve_ax.get_legend_handles_labels()
        hist_ax.legend(
            handles,
            labels,
            loc="upper left",
            bbox_to_anchor=(0.0, -0.45),
            frameon=False,
            handlelength=1.6,
            borderaxespad=0.0,
        )
        _probability_axes(curve_ax, scale=scale, low=low, high=high, x=True)
        _probability_axes(curve_ax, scale=scale, low=low, high=high, x=False)
        curve_ax.set_aspect("auto")
        curve_ax.tick_params(labelbottom=False)
        curve_ax.grid(True, color="#e5e5e5", linewidth=0.6)
        if heading:
            curve_ax.set_title(heading, loc="left")
        if col == 0:
            curve_ax.set_ylabel("observed positive rate")
            hist_ax.set_ylabel(count_label if fine else f"{count_label} per bin")
        hist_ax.set_xlabel("score")
    note = ""
    if any_edge:
        note = (
            "\u25bd bin with no positives, at the top of its interval"
            " (\u25b3 no negatives, at the bottom)"
        )
    if title or note:
        figure.suptitle(title + (f"\n{note}" if note else ""), fontsize=9)
    return figure


def _histogram_extent(histogram: ScoreHistogram | None, *, tail: float = 1e-3) -> FloatArray:
    """Where a histogram's scores are: the centres of the bins that hold its ``tail`` and
    ``1 - tail`` quantiles (of the weight), kept within [1e-6, 1 - 1e-6], so that the axes
    show where the scores are, not every last outlier (at 1e7 rows a handful of rows can
    reach far beyond the rest).

    >>> edges = np.linspace(0.0, 1.0, 11)
    >>> np.round(_histogram_extent((edges, np.array([1.0, 0, 5e3, 4e3, 0, 0, 0, 0, 0, 1.0]))), 6)
    array([0.25, 0.35])
    """
    if histogram is None:
        return np.empty(0)
    edges, counts = (np.asarray(v, dtype=np.float64) for v in histogram)
    total = float(counts.sum())
    if not total > 0.0:
        return np.empty(0)
    cumulative = np.cumsum(counts) / total
    first = int(np.searchsorted(cumulative, tail, side="right"))
    last = int(np.searchsorted(cumulative, 1.0 - tail, side="left"))
    last = min(max(last, first), counts.size - 1)
    centres = 0.5 * (edges[:-1] + edges[1:])
    ends: FloatArray = np.clip(centres[[first, last]], 1e-6, 1.0 - 1e-6)
    return ends


def _draw_curves(
    axes: Axes,
    curves: Sequence[tuple[ReliabilityCurve, _BinArrays]],
    *,
    scale: PlotScale,
    low: float,
    high: float,
) -> bool:
    """Diagonal, then each column's observed rates with Wilson intervals. On a logit axis a
    bin whose observed rate is 0 (or 1) has no place: it is drawn as a hollow triangle at the
    top (bottom) of its interval, off the line. True when such a bin was drawn."""
    diagonal = np.array([low, high]) if scale == "logit" else np.array([0.0, high])
    axes.plot(diagonal, diagonal, color=GREY, linestyle="--", linewidth=0.9, label="ideal")
    drew_bound = False
    for position, (curve, bins) in enumerate(curves):
        label, summary = curve.label, curve.summary
        colour = COLOURS[position % len(COLOURS)]
        seen = bins.count > 0
        x, y = bins.mean_score[seen], bins.rate[seen]
        lo, hi = bins.ci_low[seen], bins.ci_high[seen]
        legend = f"{label}: ECE {_fmt(summary.ece)}, log loss {_fmt(summary.log_loss)}"
        none_positive = np.zeros(x.size, dtype=bool)
        none_negative = np.zeros(x.size, dtype=bool)
        if scale == "logit":
            x = np.clip(x, low, high)
            none_positive, none_negative = y <= 0.0, y >= 1.0
            lo, hi = np.clip(lo, low, high), np.clip(hi, low, high)
        inside = ~(none_positive | none_negative)
        container = axes.errorbar(
            x[inside],
            y[inside],
            yerr=np.vstack([y - lo, hi - y])[:, inside].clip(min=0.0),
            color=colour,
            marker="o",
            markersize=3.5,
            linewidth=1.3,
            elinewidth=0.9,
            capsize=0,
            label=legend,
        )
        container.lines[0].set_gid(_gid("curve", label))
        for where, bound, marker in ((none_positive, hi, "v"), (none_negative, lo, "^")):
            if where.any():
                drew_bound = True
                (bounds,) = axes.plot(
                    x[where],
                    bound[where],
                    linestyle="none",
                    marker=marker,
                    markersize=4.5,
                    markerfacecolor="white",
                    markeredgecolor=colour,
                    markeredgewidth=0.9,
                    zorder=4,
                )
                bounds.set_gid(_gid("bound", label))
    return drew_bound


#: One histogram beneath a panel: (label, colour, edges, counts).
_Steps = list[tuple[str, str, "FloatArray", "FloatArray"]]


def _histogram_steps(
    curves: Sequence[tuple[ReliabilityCurve, _BinArrays]],
    *,
    scale: PlotScale,
    low: float,
    high: float,
) -> _Steps:
    """Each curve's own histogram when it has one, else its bin table's (weighted) counts."""
    steps: _Steps = []
    for position, (curve, bins) in enumerate(curves):
        colour = COLOURS[position % len(COLOURS)]
        if curve.histogram is not None:
            edges = np.asarray(curve.histogram[0], dtype=np.float64)
            counts = np.asarray(curve.histogram[1], dtype=np.float64)
        else:
            edges = np.append(bins.lower, bins.upper[-1:])
            counts = bins.count
        if scale == "logit":
            edges = np.clip(edges, low, high)
        steps.append((curve.label, colour, edges, counts))
    return steps


def _draw_histogram(axes: Axes, steps: _Steps, *, floor: float, top: float) -> None:
    """Counts per bin on a log axis from ``floor`` to ``top`` (the same for every panel);
    empty bins left out, not drawn as zeros. One filled histogram, or outlines when several
    columns share the panel."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullLocator

    single = len(steps) == 1
    for label, colour, edges, counts in steps:
        shown = np.where(counts > 0, counts, np.nan)
        patch = axes.stairs(
            shown,
            edges,
            baseline=floor,
            fill=single,
            color=colour,
            alpha=0.45 if single else 1.0,
            linewidth=1.0,
            label=label,
        )
        patch.set_gid(_gid("histogram", label))
    axes.set_yscale("log")
    axes.set_ylim(floor, top)
    axes.yaxis.set_major_locator(LogLocator(base=10.0, numticks=4))
    axes.yaxis.set_major_formatter(FuncFormatter(lambda v, _: _count_label(v)))
    axes.yaxis.set_minor_locator(NullLocator())


def reliability_panels(
    entries: Sequence[tuple[str, object, ReliabilitySummary, ScoreHistogram | None]],
    *,
    by: str | None,
) -> list[ReliabilityPanel]:
    """Group (column, group, summary, histogram) entries into panels: all rows first, then each
    group in the order met. ``group`` None means all rows."""
    order: list[tuple[str, object]] = []
    curves: dict[tuple[str, object], list[ReliabilityCurve]] = {}
    for column, group, summary, histogram in entries:
        key: tuple[str, object] = ("all", None) if group is None else ("group", group)
        if key not in curves:
            order.append(key)
            curves[key] = []
        curves[key].append(ReliabilityCurve(column, summary, histogram))
    panels: list[ReliabilityPanel] = []
    for key in order:
        first = curves[key][0].summary
        rows = f"n = {first.n:,}, base rate {_fmt(first.base_rate)}"
        # two lines: a panel is about 3.4 inches wide, too narrow for name and counts at 1e7
        heading = (
            (f"all rows\n{rows}" if by is not None else None)
            if key[0] == "all"
            else f"{_shorten(f'{by}={key[1]}')}\n{rows}"
        )
        panels.append((heading, curves[key]))
    return panels


#: At most this many ``--by`` groups get a panel (beside all rows): a picture of thousands of
#: panels takes minutes to draw and cannot be read; the report keeps every group.
MAX_PLOT_GROUPS = 24


def plotted_groups(result: ReliabilityResult) -> tuple[list[object], int]:
    """The ``--by`` groups that get a panel, in the report's order, and how many groups there
    are: all of them up to :data:`MAX_PLOT_GROUPS`, else the largest by (weighted) rows, ties
    to the group met first."""
    size: dict[object, float] = {}
    for entry in result.entries:
        if entry.group is not None and entry.group not in size:
            size[entry.group] = entry.summary.weight_total
    order = list(size)
    if len(order) <= MAX_PLOT_GROUPS:
        return order, len(order)
    rank = sorted(range(len(order)), key=lambda i: (-size[order[i]], i))[:MAX_PLOT_GROUPS]
    return [order[i] for i in sorted(rank)], len(order)


def reliability_result_figure(result: ReliabilityResult, *, scale: PlotScale) -> Figure:
    """The picture of a ``reliability`` run: every column overlaid, ``--by`` groups as small
    multiples (at most :data:`MAX_PLOT_GROUPS`, see :func:`plotted_groups`), each entry's fine
    histogram beneath, and a title with n, base rate, weighting."""
    shown, n_groups = plotted_groups(result)
    keep = set(shown)
    entries = [
        (e.score_column, e.group, e.summary, e.histogram)
        for e in result.entries
        if e.group is None or e.group in keep
    ]
    weighted = result.weight_col is not None
    weighting = f"weighted by '{result.weight_col}'" if weighted else "unweighted"
    title = reliability_title(
        Path(result.source).name,
        result.entries[0].summary,
        weighting=weighting,
        n_bins=result.n_bins,
        strategy=result.strategy,
    )
    if len(shown) < n_groups:
        rows = "weighted rows" if weighted else "rows"
        title += (
            f"\nthe {len(shown)} largest of {n_groups:,} groups by {rows}"
            " (the report has every group)"
        )
    return reliability_figure(
        reliability_panels(entries, by=result.by),
        scale=scale,
        title=title,
        count_label="weighted rows" if weighted else "rows",
    )


# ---------------------------------------------------------------------------- label shift


def _batch_axis(labels: Sequence[object]) -> tuple[str, list[Any]]:
    """How batch names sort: ``number`` or ``date`` (then the parsed values), else ``name``.

    >>> _batch_axis(["2024-01-02", "2024-01-01"])[0], _batch_axis([3, "10"])[0]
    ('date', 'number')
    >>> _batch_axis(["a", "b"])
    ('name', ['a', 'b'])
    """
    texts = [str(label) for label in labels]
    try:
        numbers = [float(text) for text in texts]
        if all(math.isfinite(n) for n in numbers):
            return "number", numbers
    except ValueError:
        pass
    try:
        return "date", [dt.datetime.fromisoformat(text) for text in texts]
    except ValueError:
        return "name", texts


@_styled
def shift_figure(
    batches: Sequence[tuple[object, ShiftEstimate]],
    *,
    batch_col: str,
    true_rates: Sequence[float | None] | None = None,
    title: str = "",
) -> Figure:
    """Each batch's estimated positive rate with its interval, and the reference rate.

    ``batches`` are (batch name, estimate) in the command's order; ``true_rates`` the batches'
    labelled rates when the target has labels (drawn as crosses).
    """
    if not batches:
        raise ValueError("a shift picture needs at least one batch")
    kind, positions = _batch_axis([name for name, _ in batches])
    order = sorted(range(len(batches)), key=lambda i: positions[i]) if kind != "name" else None
    index = order if order is not None else list(range(len(batches)))
    estimates = [batches[i][1] for i in index]
    x: list[Any] = [positions[i] for i in index] if kind != "name" else list(range(len(index)))
    rate = np.array([e.prevalence for e in estimates])
    low = np.array([e.ci_low for e in estimates])
    high = np.array([e.ci_high for e in estimates])
    reference = estimates[0].reference_prevalence
    width = min(11.0, max(6.4, 0.28 * len(batches) + 2.5))
    figure = _figure(width, 4.2)
    axes = figure.add_subplot()
    axes.set_gid("shift")
    axes.axhline(
        reference,
        color=GREY,
        linestyle="--",
        linewidth=1.0,
        label=f"reference rate {_fmt(reference)}",
    )
    with_interval = np.isfinite(low) & np.isfinite(high)
    yerr = np.vstack(
        [rate - np.where(with_interval, low, rate), np.where(with_interval, high, rate) - rate]
    )
    methods = {e.method for e in estimates}
    method = f", {methods.pop()}" if len(methods) == 1 else ""
    container = axes.errorbar(
        x,
        rate,
        yerr=yerr.clip(min=0.0),
        color=COLOURS[0],
        marker="o",
        markersize=4,
        linewidth=1.2 if kind != "name" else 0.0,
        elinewidth=1.0,
        capsize=2,
        label=f"estimated rate{method} ({estimates[0].ci_level:.0%} interval)",
    )
    container.lines[0].set_gid("estimates")
    if true_rates is not None and any(t is not None for t in true_rates):
        truth = np.array(
            [math.nan if true_rates[i] is None else float(true_rates[i] or 0.0) for i in index]
        )
        axes.plot(
            x,
            truth,
            linestyle="none",
            marker="x",
            markersize=5,
            color=COLOURS[1],
            label="labelled rate",
        )
    top = float(np.nanmax(np.concatenate([high[with_interval], rate, [reference]])))
    axes.set_ylim(0.0, _linear_limit(np.array([top * 1.08])))
    axes.set_ylabel("positive rate")
    axes.set_xlabel(batch_col)
    axes.grid(True, axis="y", color="#e5e5e5", linewidth=0.6)
    if kind == "date":
        from matplotlib.dates import AutoDateLocator, ConciseDateFormatter, DateFormatter

        plain_days = all(d.hour == d.minute == d.second == d.microsecond == 0 for d in x)
        if plain_days and len(x) <= 14:
            axes.set_xticks(x)
            axes.xaxis.set_major_formatter(DateFormatter("%Y-%m-%d"))  # type: ignore[no-untyped-call]
            if len(x) > 7:
                axes.tick_params(axis="x", labelrotation=45)
        else:
            locator = AutoDateLocator(maxticks=10)  # type: ignore[no-untyped-call]
            axes.xaxis.set_major_locator(locator)
            axes.xaxis.set_major_formatter(ConciseDateFormatter(locator))  # type: ignore[no-untyped-call]
    elif kind == "name":
        names = [str(batches[i][0]) for i in index]
        step = max(1, math.ceil(len(names) / 24))
        axes.set_xticks(
            x[::step],
            names[::step],
            rotation=45 if len(names) > 8 else 0,
            ha="right" if len(names) > 8 else "center",
        )
        axes.set_xlim(-0.6, len(names) - 0.4)
    axes.legend(loc="best", frameon=False)  # away from the batches (deterministic)
    if title:
        axes.set_title(title, loc="left")
    return figure


@_styled
def mixture_figure(
    model: ReferenceModel,
    estimate: ShiftEstimate,
    counts: TargetCounts,
    *,
    n_bars: int = 64,
    true_rate: float | None = None,
    title: str = "",
) -> Figure:
    """One batch's scores against the fitted mixture :math:`(1-\\alpha) f_0 + \\alpha f_1`.

    All densities are per unit of the score's logit ``u`` (the scale the estimate works on):
    the batch's histogram on ``n_bars`` steps of ``u`` over the reference's range, summed from
    the fine cells the estimate counted the batch in (``counts``, from
    :func:`~calib_cli.core.shift.count_target`: rows outside the range in the end cells, as
    the estimate counts them; the same picture from either engine), and the mixture and its
    components piecewise constant on the model's cells, scaled by the estimated rate.
    ``true_rate``: the batch's labelled positive rate, when it has labels (in the heading).
    """
    low, high = model.logit_low, model.logit_high
    fine_width = (high - low) / model.n_fine
    bounds = np.unique(np.round(np.linspace(0, model.n_fine, n_bars + 1)).astype(np.int64))
    edges = low + bounds.astype(np.float64) * fine_width
    weights = np.asarray(counts.weight, dtype=np.float64)
    bar_counts = np.add.reduceat(weights, bounds[:-1]) if weights.size else np.zeros(1)
    total = float(bar_counts.sum())
    bar_density = bar_counts / (total * np.diff(edges)) if total > 0 else bar_counts
    cell_edges = low + model.cell_bounds.astype(np.float64) * fine_width
    cell_width = np.diff(cell_edges)
    alpha = float(estimate.prevalence)
    negative = (1.0 - alpha) * model.mass_neg / cell_width
    positive = alpha * model.mass_pos / cell_width
    figure = _figure(6.4, 4.4)
    axes = figure.add_subplot()
    axes.set_gid("mixture")
    positive_values = np.concatenate(
        [bar_density[bar_density > 0], positive[positive > 0], negative[negative > 0]]
    )
    top = float(positive_values.max()) if positive_values.size else 1.0
    bottom = max(float(positive_values.min()) / 2.0, top * 1e-6) if positive_values.size else 1e-6
    bars = axes.stairs(
        np.where(bar_density > 0, bar_density, np.nan),  # empty bars left out, not zeros
        edges,
        baseline=bottom,
        fill=True,
        color="#d9d9d9",
        label=f"batch scores (n = {estimate.n:,})",
    )
    bars.set_gid("batch-histogram")
    for values, colour, label, gid, width in (
        (negative, COLOURS[0], f"negatives: (1 - {_fmt(alpha)}) f0", "component-negative", 1.2),
        (positive, COLOURS[1], f"positives: {_fmt(alpha)} f1", "component-positive", 1.2),
        (negative + positive, "#000000", "fitted mixture", "mixture", 1.6),
    ):
        step = axes.stairs(values, cell_edges, color=colour, linewidth=width, label=label)
        step.set_gid(gid)
    axes.set_yscale("log")
    axes.set_ylim(bottom, top * 2.5)
    axes.set_xlim(low, high)
    axes.set_ylabel("density per unit logit")
    if model.score_kind == "probability":
        from matplotlib.ticker import FixedLocator, FuncFormatter

        ticks = _logit_ticks(1.0 / (1.0 + math.exp(-low)), 1.0 / (1.0 + math.exp(-high)))
        axes.xaxis.set_major_locator(FixedLocator([math.log(t / (1.0 - t)) for t in ticks]))
        axes.xaxis.set_major_formatter(
            FuncFormatter(lambda v, _: _probability_label(1.0 / (1.0 + math.exp(-v))))
        )
        axes.set_xlabel("score (logit axis)")
    else:
        axes.set_xlabel(f"score ({model.score_kind})")
    interval = ""
    if math.isfinite(estimate.ci_low) and math.isfinite(estimate.ci_high):
        interval = f" [{_fmt(estimate.ci_low)}, {_fmt(estimate.ci_high)}]"
    heading = title or "Label shift"
    labelled = "" if true_rate is None else f"; labelled {_fmt(true_rate)}"
    axes.set_title(
        f"{heading}\nestimated rate {_fmt(alpha)}{interval} ({estimate.method}); "
        f"reference {_fmt(estimate.reference_prevalence)}{labelled}",
        loc="left",
    )
    axes.legend(loc="upper right", frameon=False)
    return figure


def shift_result_figure(result: EstimateShiftResult) -> Figure:
    """The picture of an ``estimate-shift`` run: with ``--batch-col`` each batch's estimated
    rate (and its labelled rate when the target has labels); else the batch's scores against
    the fitted mixture."""
    source = Path(result.source).name
    if result.batch_col is not None:
        return shift_figure(
            [(batch.batch, batch.estimate) for batch in result.batches],
            batch_col=result.batch_col,
            true_rates=[batch.true_prevalence for batch in result.batches],
            title=f"Positive rate of {source} by {result.batch_col}",
        )
    if result.model is None or result.counts is None:
        raise ValueError("a mixture picture needs the reference model and the batch's counts")
    batch = result.batches[0]
    return mixture_figure(
        result.model,
        batch.estimate,
        result.counts,
        true_rate=batch.true_prevalence,
        title=f"Label shift of {source}",
    )


# ---------------------------------------------------------------------------- rerank strata


def rerank_result_figure(result: RerankStrataResult, *, scale: PlotScale) -> Figure:
    """The picture of a ``rerank-strata`` run: the raw and re-ranked ROC curves on a labelled
    target, else each stratum's ROC slope against its score (``scale``: the score axis)."""
    if result.roc is not None:
        return roc_figure(result.roc, title="Raw and re-ranked ROC on the target")
    if result.slopes is None:
        raise ValueError("a re-ranking picture needs the strata's slopes or the ROC curves")
    odds = {s.stratum: s.stratum_odds for s in result.strata}
    return slopes_figure(
        result.slopes,
        stratum_odds=odds,
        scale=scale,
        title=f"ROC slope per stratum (odds from the {result.odds_source})",
    )


@_styled
def roc_figure(comparison: RankingComparison, *, title: str = "") -> Figure:
    """Raw and re-ranked ROC curves of a labelled target: whole, and at low false-positive
    rates on a log axis. ``comparison`` should be sampled densely (the ``rerank-strata``
    workflow's ``ROC_FPRS``: every 1%, and log steps down to 1e-5)."""
    fpr = np.asarray(comparison.fpr, dtype=np.float64)
    curves = (
        ("raw score", np.asarray(comparison.tpr_raw), comparison.auc_raw, COLOURS[0], "roc-raw"),
        (
            "re-ranked",
            np.asarray(comparison.tpr_reranked),
            comparison.auc_reranked,
            COLOURS[1],
            "roc-reranked",
        ),
    )
    figure = _figure(9.6, 4.4)
    whole, low_fpr = figure.add_subplot(1, 2, 1), figure.add_subplot(1, 2, 2)
    whole.set_gid("roc")
    low_fpr.set_gid("roc-low-fpr")
    for axes in (whole, low_fpr):
        chance = np.geomspace(1e-5, 1.0, 50)
        axes.plot(chance, chance, color=GREY, linestyle="--", linewidth=0.9, label="chance")
        for label, tpr, auc, colour, gid in curves:
            (line,) = axes.plot(
                fpr, tpr, color=colour, linewidth=1.4, label=f"{label}: AUC {_fmt(auc, 4)}"
            )
            line.set_gid(gid)
        axes.set_ylim(0.0, 1.0)
        axes.set_ylabel("true-positive rate")
        axes.grid(True, color="#e5e5e5", linewidth=0.6)
    whole.set_xlim(0.0, 1.0)
    whole.set_xlabel("false-positive rate")
    whole.legend(loc="lower right", frameon=False)
    # from the decade where either ranking first finds 1% of the positives
    found = fpr[(fpr > 0) & ((curves[0][1] >= 0.01) | (curves[1][1] >= 0.01))]
    start = float(found.min()) if found.size else 1e-3
    from matplotlib.ticker import FuncFormatter, LogLocator

    low_fpr.set_xscale("log")
    low_fpr.set_xlim(max(1e-5, 10.0 ** math.floor(math.log10(start) + 1e-9)), 1.0)
    low_fpr.xaxis.set_major_locator(LogLocator(base=10.0))
    low_fpr.xaxis.set_major_formatter(FuncFormatter(lambda v, _: _rate_label(v)))
    low_fpr.set_xlabel("false-positive rate (log axis)")
    low_fpr.set_title("at low false-positive rates", loc="left")
    if title:
        whole.set_title(title, loc="left")
    return figure


@_styled
def slopes_figure(
    slopes: Mapping[str, StratumSlope],
    *,
    stratum_odds: Mapping[str, float] | None = None,
    scale: PlotScale = "linear",
    title: str = "",
) -> Figure:
    """Each stratum's fitted ROC slope (the likelihood ratio) against its score, log axis.

    ``scale="logit"`` puts probability scores on a logit axis.
    """
    figure = _figure(6.4, 4.4)
    axes = figure.add_subplot()
    axes.set_gid("slopes")
    axes.axhline(1.0, color=GREY, linestyle="--", linewidth=0.9, label="likelihood ratio 1")
    xs: list[FloatArray] = []
    for position, (name, slope) in enumerate(sorted(slopes.items())):
        label = name
        if stratum_odds is not None and math.isfinite(stratum_odds.get(name, math.nan)):
            label = f"{name} (odds {_fmt(stratum_odds[name])})"
        (line,) = axes.plot(
            slope.thresholds,
            slope.roc_slope,
            color=COLOURS[position % len(COLOURS)],
            linewidth=1.4,
            drawstyle="steps-post" if slope.smoothing == "hull" else "default",
            label=label,
        )
        line.set_gid(_gid("slope", name))
        xs.append(np.asarray(slope.thresholds, dtype=np.float64))
    axes.set_yscale("log")
    axes.set_ylabel("ROC slope (likelihood ratio)")
    every = np.concatenate(xs) if xs else np.array([0.5])
    in_unit = bool(every.size) and float(every.min()) >= 0.0 and float(every.max()) <= 1.0
    if scale == "logit" and in_unit:
        low, high = _logit_limits(every)
        _probability_axes(axes, scale="logit", low=low, high=high, x=True)
        axes.set_xlabel("score (logit axis)")
    else:
        axes.set_xlabel("score")
    axes.grid(True, color="#e5e5e5", linewidth=0.6)
    axes.legend(loc="upper left", frameon=False)
    if title:
        axes.set_title(title, loc="left")
    return figure


# ------------------------------------------------------------------------------ calibrators


def calibrator_curves(
    artifact: Artifact, *, n_points: int = 801
) -> tuple[FloatArray, dict[str, FloatArray], str]:
    """The map a calibrator, chain or sampling record applies: (score grid, {label: calibrated
    probability}, score kind). A stratified prior gives one curve per stratum."""
    from calib_cli.artifacts import prior_from_sampling, steps_of
    from calib_cli.core.chain import PriorParams, apply_chain

    if artifact.kind == "sampling":
        steps: tuple[Any, ...] = (prior_from_sampling(artifact),)
    else:
        steps = steps_of(artifact)
    kind = str(artifact.fitted_on.get("score_kind", "probability"))
    first = steps[0]
    if kind == "probability" and getattr(first, "score_kind", "probability") != "probability":
        kind = str(first.score_kind)
    if kind == "probability":
        u = np.linspace(-14.0, 14.0, n_points)
        grid = np.sort(np.concatenate([1.0 / (1.0 + np.exp(-u)), np.linspace(0.0, 1.0, 201)]))
    else:
        low, high = _raw_range(first)
        grid = np.linspace(low, high, n_points)
    strata: list[str | None] = [None]
    priors = [s for s in steps if isinstance(s, PriorParams) and s.strata_col is not None]
    if priors:
        strata = list(sorted(priors[0].stratum_shifts))
    curves: dict[str, FloatArray] = {}
    for stratum in strata:
        codes = np.zeros(grid.size, dtype=np.int64)
        mapped = apply_chain(
            steps,
            grid,
            score_kind=kind,  # type: ignore[arg-type]
            strata=None if stratum is None else ([stratum], codes),
        )
        curves["calibrated" if stratum is None else str(stratum)] = mapped
    return grid, curves, kind


def _raw_range(step: Any) -> tuple[float, float]:
    """Scores from where a Platt map gives 0.001 to where it gives 0.999 (raw or logit
    scores have no fixed range)."""
    slope = float(getattr(step, "slope", 1.0)) or 1.0
    intercept = float(getattr(step, "intercept", 0.0))
    ends = sorted(((-6.9 - intercept) / slope, (6.9 - intercept) / slope))
    return ends[0], ends[1]


@_styled
def calibrator_figure(
    artifact: Artifact, *, scale: PlotScale = "linear", title: str = ""
) -> Figure:
    """A saved calibrator's or sampling record's map from score to probability."""
    grid, curves, kind = calibrator_curves(artifact)
    figure = _figure(6.0, 5.4)
    axes = figure.add_subplot()
    axes.set_gid("calibrator")
    probability = kind == "probability"
    if probability:
        if scale == "logit":
            # where the map changes (a step map is flat beyond its knots), within 1e-6
            changing = np.zeros(grid.size, dtype=bool)
            for values in curves.values():
                moves = np.flatnonzero(np.diff(values) != 0.0)
                if moves.size:
                    changing[moves[0] : moves[-1] + 2] = True
            shown = [grid[changing], *(v[changing] for v in curves.values())]
            inside = np.concatenate(shown) if changing.any() else grid
            low, high = _logit_limits(inside[(inside >= 1e-6) & (inside <= 1 - 1e-6)])
        else:
            low, high = 0.0, 1.0
        diagonal = np.array([low, high])
        axes.plot(diagonal, diagonal, color=GREY, linestyle="--", linewidth=0.9, label="identity")
    for position, (label, values) in enumerate(curves.items()):
        (line,) = axes.plot(
            grid,
            values,
            color=COLOURS[position % len(COLOURS)],
            linewidth=1.5,
            label=label if len(curves) > 1 else "map",
        )
        line.set_gid(_gid("map", label))
    if probability:
        _probability_axes(axes, scale=scale, low=low, high=high, x=True)
        _probability_axes(axes, scale=scale, low=low, high=high, x=False)
        axes.set_xlabel("score" + (" (logit axis)" if scale == "logit" else ""))
    else:
        axes.set_ylim(0.0, 1.0)
        axes.set_xlabel(f"score ({kind})")
    axes.set_ylabel("calibrated probability")
    axes.grid(True, color="#e5e5e5", linewidth=0.6)
    axes.legend(loc="upper left", frameon=False)
    fitted = artifact.fitted_on
    source = fitted.get("file")
    rows = fitted.get("rows") or (fitted.get("before") or {}).get("rows")
    heading = title or _describe_kind(artifact)
    if source:
        heading += f"\nfitted on {Path(str(source)).name}" + (
            f", {rows:,} rows" if isinstance(rows, int) else ""
        )
    axes.set_title(heading, loc="left")
    return figure


def _describe_kind(artifact: Artifact) -> str:
    if artifact.kind == "chain":
        return "chain: " + " then ".join(str(s["kind"]) for s in artifact.params["steps"])
    if artifact.kind == "sampling":
        return "sampling record: its prior correction"
    return f"{artifact.kind} calibrator"
