"""Pictures: reliability diagrams, label-shift estimates, re-ranked ROC curves, calibrator maps.

The only module that imports matplotlib, and only when a picture is asked for (``--plot``):
matplotlib is the optional extra ``calib-cli[plot]``. Every function here is pure: typed results
in, a :class:`matplotlib.figure.Figure` out (no pyplot, no global state), and
:func:`save_figure` writes it atomically, in the format its extension names, byte for byte the
same on every run (no dates, no random ids, a fixed resolution). Every figure draws its series
(score columns, strata, maps) in one sequence of looks (:func:`_series_style`), puts its
probability axes on their scale with one helper (:func:`_probability_axis`), and takes logits
with :mod:`calib_cli.core.elementary`, as the histograms' grid is built.

What each picture shows
-----------------------
:func:`reliability_figure`
    The diagonal; each score column's observed positive rate per bin at the bin's mean score,
    with the bin's Wilson interval (empty bins are left out, not drawn as zeros); beneath, a
    histogram of the scores on a log count axis, re-binned onto equal bars across the axis as
    shown (weighted when the figures are); one colour per column (then another marker and
    line style), a legend with ECE and log loss; one panel per group, all panels on shared
    axes. ``scale="logit"`` puts both axes on the logit scale so that 0.1% and 1% stay apart;
    a bin that saw no positives (or only positives) has no place on that scale and is drawn
    hollow at the end of its interval. What lies beyond the score axis (exact 0s and 1s on a
    logit axis, the last outliers) is drawn in a strip beyond that end, never dropped.
:func:`shift_figure`
    Each batch's estimated positive rate with its interval, and the reference rate as a line
    (on a time or number axis when every batch name reads as a date or a number; other names
    each under its batch when they fit, else every n-th, and the axis label says so).
:func:`mixture_figure`
    One batch's score histogram with the fitted label-shift mixture and its two components,
    :math:`(1-\\alpha) f_0` and :math:`\\alpha f_1`, as densities on the logit of the score.
:func:`roc_figure`, :func:`slopes_figure`
    The raw and re-ranked ROC curves of a labelled target (also at low false-positive rates,
    on a log axis); each stratum's ROC slope (the likelihood ratio) against its score.
:func:`calibrator_figure`
    A saved calibrator's (or sampling record's) map from score to probability.

Strata drawn as curves, like ``--by`` groups drawn as panels, are at most
:data:`MAX_PLOT_GROUPS`, the largest (:func:`_drawn`), and a title says so; a long legend
stands beside the axes (:func:`_legend`).
"""

from __future__ import annotations

import datetime as dt
import functools
import io as _bytes_io
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, ParamSpec

import numpy as np
import numpy.typing as npt

from calib_cli.core import elementary as el
from calib_cli.errors import UsageError
from calib_cli.io.pictures import PLOT_NEEDS, plot_format
from calib_cli.report.payloads import bins_phrase, weighting_phrase
from calib_cli.types import ALL_ROWS
from calib_cli.types import LOGIT_EDGE as LOGIT_EDGE  # within it of 0 or 1: off a logit axis
from calib_cli.types import PlotScale as PlotScale
from calib_cli.types import ScoreHistogram as ScoreHistogram

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure
    from matplotlib.ticker import Formatter, Locator

    from calib_cli.artifacts import Artifact
    from calib_cli.core.metrics import ReliabilitySummary
    from calib_cli.core.shift import ReferenceModel, ShiftEstimate, TargetCounts
    from calib_cli.core.strata import RankingComparison, StratumSlope
    from calib_cli.types import FloatArray
    from calib_cli.workflows.estimate_shift import EstimateShiftResult
    from calib_cli.workflows.reliability import ReliabilityResult
    from calib_cli.workflows.rerank_strata import RerankStrataResult

_P = ParamSpec("_P")

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


_SUPERSCRIPT = str.maketrans(
    "-0123456789", "\u207b\u2070\u00b9\u00b2\u00b3\u2074\u2075\u2076\u2077\u2078\u2079"
)


def _power_of_ten(value: float) -> str:
    """A power of ten as text, ``10`` with a superscript exponent.

    >>> _power_of_ten(1e-6), _power_of_ten(1e-12)
    ('10\u207b\u2076', '10\u207b\u00b9\u00b2')
    """
    return "10" + str(round(math.log10(value))).translate(_SUPERSCRIPT)


def _probability_label(p: float) -> str:
    """A tick label for a probability on a logit axis: powers of ten below 0.001, and their
    mirrors, one minus a power of ten, above 0.999 (a run of nines cannot be counted at a
    glance; ``1-1e-6`` reads as a subtraction of two numbers).

    >>> [_probability_label(p) for p in (1e-6, 0.001, 0.1, 0.5, 0.99, 0.999, 1 - 1e-5)]
    ['10\u207b\u2076', '0.001', '0.1', '0.5', '0.99', '0.999', '1\u221210\u207b\u2075']
    """
    if p >= 0.5:
        q = 1.0 - p
        if q < 1e-3 * 0.999:
            return "1\u2212" + _power_of_ten(q)
        return f"{p:.{max(1, round(-math.log10(q)))}f}"
    if p < 1e-3 * 0.999:
        return _power_of_ten(p)
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


def _logit_limits(values: FloatArray, *, edge: float = 0.0) -> tuple[float, float]:
    """Limits of a logit axis: the decade below the smallest value in (0, 1), and its mirror
    above the largest; at least [0.01, 0.5] so a diagram has room. Values within ``edge`` of 0
    or 1 take no part, and the limits stay within [edge, 1 - edge] (and [1e-12, 1 - 1e-12]).

    >>> _logit_limits(np.array([0.0, 0.0004, 0.2, 1.0]))
    (0.0001, 0.5)
    >>> _logit_limits(np.array([1e-9, 0.0004, 0.2, 1 - 1e-7]), edge=1e-6)
    (0.0001, 0.5)
    """
    inside = values[np.isfinite(values) & (values > edge) & (values < 1.0 - edge)]
    low = float(inside.min()) if inside.size else 0.01
    high = float(inside.max()) if inside.size else 0.5
    low_lim = min(0.01, 10.0 ** math.floor(math.log10(low) + 1e-9))
    high_lim = 0.5 if high <= 0.5 else 1.0 - 10.0 ** math.floor(math.log10(1.0 - high) + 1e-9)
    floor = max(edge, 1e-12)
    return max(low_lim, floor), min(high_lim, 1.0 - floor)


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


#: Per series (a score column, a stratum, a curve): colours first, then (past the seventh)
#: another line style and, where points are drawn, another marker.
_MARKERS = ("o", "s", "D", "P", "X", "*")
_LINE_STYLES: tuple[str | tuple[int, tuple[int, ...]], ...] = (
    "-",
    "--",
    ":",
    "-.",
    (0, (5, 1, 1, 1, 1, 1)),
    (0, (1, 1)),
)


@dataclass(frozen=True)
class _Style:
    colour: str
    marker: str
    line: str | tuple[int, tuple[int, ...]]


def _series_style(position: int) -> _Style:
    """The look of the ``position``-th series of a figure: its colour (the Okabe-Ito palette in
    order), and once the colours come round again a different line style and marker, so that
    42 score columns, strata or maps are told apart. Every figure draws its series in these
    looks: lines in the colour and line style, the reliability diagram's points in the marker
    too.

    >>> _series_style(0) == _Style("#0072B2", "o", "-"), _series_style(7).marker
    (True, 's')
    >>> _series_style(8).colour == _series_style(1).colour, _series_style(8).line
    (True, '--')
    """
    turn = (position // len(COLOURS)) % len(_MARKERS)
    return _Style(COLOURS[position % len(COLOURS)], _MARKERS[turn], _LINE_STYLES[turn])


#: Room beyond the data on each side of the reliability diagram's axes, as a share of the
#: span (a point at an end is never cut in half), and the width of a strip for what lies off
#: the scale.
_MARGIN = 0.03
_STRIP = 0.09
#: A probability is taken this close to 0 or 1 at most before its logit is (0 and 1 have no
#: finite place on a logit axis; a histogram's step that reaches them keeps a finite width).
_LOGIT_CLIP = 1e-15


@dataclass(frozen=True)
class _Frame:
    """A probability axis: its scale; the range of the data, ``low`` to ``high`` (the diagonal
    and the ticks); room beyond it, ``margin`` times its span on each side (the reliability
    diagram's :data:`_MARGIN`; none for a calibrator's map); and on a score axis a strip,
    :data:`_STRIP` of the span wide, beyond each end that holds what lies off the scale
    (``below``, ``above``: whether it is drawn). Distances are measured on the scale: in the
    logit on a logit axis, with :mod:`calib_cli.core.elementary`'s ``log_odds`` and ``sigmoid``,
    the functions the histograms' grid is built with
    (:func:`calib_cli.workflows.reliability.histogram_edges`).

    >>> frame = _Frame("logit", 0.01, 0.5, margin=_MARGIN, below=True)
    >>> [round(v, 5) for v in frame.limits()], round(frame.limits(strips=True)[0], 5)
    ([0.00872, 0.53441], 0.00579)
    >>> frame.strip_ticks() == {frame.strip("below")[1]: "<0.01"}
    True
    """

    scale: PlotScale
    low: float
    high: float
    margin: float = 0.0
    below: bool = False
    above: bool = False

    def to_axis(self, p: npt.ArrayLike) -> FloatArray:
        """Probabilities as distances on the scale (on a logit axis their logit, 0 and 1 taken
        :data:`_LOGIT_CLIP` from them)."""
        values = np.asarray(p, dtype=np.float64)
        if self.scale == "logit":
            return el.log_odds(np.clip(values, _LOGIT_CLIP, 1.0 - _LOGIT_CLIP))
        return values

    def to_probability(self, u: npt.ArrayLike) -> FloatArray:
        """Distances on the scale as probabilities (the inverse of :meth:`to_axis`)."""
        values = np.asarray(u, dtype=np.float64)
        return el.sigmoid(values) if self.scale == "logit" else values

    def _ends(self) -> tuple[float, float, float]:
        a, b = (float(v) for v in self.to_axis([self.low, self.high]))
        return a, b, b - a

    def limits(self, *, strips: bool = False) -> tuple[float, float]:
        """Limits of the axis: the data's range and the margin, and with ``strips`` (the score
        axis) the strips that are drawn. Without room beyond an end, that end is the data's
        own (no round trip through the logit)."""
        a, b, span = self._ends()
        room_below = self.margin + (_STRIP if strips and self.below else 0.0)
        room_above = self.margin + (_STRIP if strips and self.above else 0.0)
        low = float(self.to_probability(a - room_below * span)) if room_below else self.low
        high = float(self.to_probability(b + room_above * span)) if room_above else self.high
        return low, high

    def strip(self, side: str, *, share: float = 1.0) -> tuple[float, float, float]:
        """The (start, centre, end) of the middle ``share`` of the strip beyond the ``side``
        (``"below"`` or ``"above"``) end, as probabilities; a strip's bar takes its middle 70%."""
        a, b, span = self._ends()
        start = a - (self.margin + _STRIP) * span if side == "below" else b + self.margin * span
        centre = start + 0.5 * _STRIP * span
        half = 0.5 * share * _STRIP * span
        lower, middle, upper = (
            float(v) for v in self.to_probability([centre - half, centre, centre + half])
        )
        return lower, middle, upper

    def strip_label(self, side: str) -> str:
        """What a strip holds: the scores below the axis (``<0.001``) or above it."""
        end = self.low if side == "below" else self.high
        text = _probability_label(end) if self.scale == "logit" else f"{end:g}"
        return ("<" if side == "below" else ">") + text

    def strip_ticks(self) -> dict[float, str]:
        """Each drawn strip's middle and its label: the score axis's ticks beyond its ends."""
        sides = (("below", self.below), ("above", self.above))
        return {self.strip(side)[1]: self.strip_label(side) for side, drawn in sides if drawn}


_TickLocator = Callable[[Any, _Frame, Mapping[float, str]], "Locator"]
_TickFormatter = Callable[[_Frame, Mapping[float, str]], "Formatter"]


@functools.cache
def _tickers() -> tuple[_TickLocator, _TickFormatter]:
    """The tick locator and formatter classes of :func:`_probability_axis`, defined once, the
    first time an axis is drawn (they subclass matplotlib's, which is imported only then)."""
    from matplotlib.ticker import Formatter, Locator, ScalarFormatter

    class FrameLocator(Locator):
        """``base``'s ticks within the frame's data range, then each strip's middle (a tick at
        an end next to a strip is left out: its label would touch the strip's)."""

        def __init__(self, base: Any, frame: _Frame, strips: Mapping[float, str]) -> None:
            self.base, self.frame, self.strips = base, frame, strips

        def set_axis(self, axis: Any) -> None:
            super().set_axis(axis)
            self.base.set_axis(axis)

        def __call__(self) -> Any:
            return self.tick_values(self.frame.low, self.frame.high)

        def tick_values(self, vmin: float, vmax: float) -> Any:
            frame = self.frame
            tol = 1e-9 * max(abs(frame.high), 1e-12)
            ticks = [
                float(t)
                for t in self.base.tick_values(vmin, vmax)
                if frame.low - tol <= t <= frame.high + tol
            ]
            if any(t < frame.low for t in self.strips):
                ticks = [t for t in ticks if t > frame.low + tol]
            if any(t > frame.high for t in self.strips):
                ticks = [t for t in ticks if t < frame.high - tol]
            return np.array(sorted([*ticks, *self.strips]))

    class FrameFormatter(ScalarFormatter):
        """A strip's label at its tick, else the scale's own: probability labels on a logit
        axis, matplotlib's on a linear one (their digits from the scale's ticks alone)."""

        def __init__(self, frame: _Frame, strips: Mapping[float, str]) -> None:
            super().__init__()
            self.frame, self.strips = frame, strips

        def set_locs(self, locs: Any) -> None:
            scale_ticks = [v for v in locs if v not in self.strips]
            if self.frame.scale == "logit":
                Formatter.set_locs(self, scale_ticks)  # no offset or power of ten
            else:
                super().set_locs(scale_ticks)

        def __call__(self, x: float, pos: int | None = None) -> str:
            if x in self.strips:
                return self.strips[x]
            if self.frame.scale == "logit":
                return _probability_label(x)
            return str(super().__call__(x, pos))

    return FrameLocator, FrameFormatter


def _probability_axis(axes: Axes, frame: _Frame, *, x: bool, narrow: bool = False) -> None:
    """Put one probability axis (``x``: the score axis, else the y axis) on the frame, alike
    in every figure: its scale and limits (with the margin; on the score axis, the strips),
    ticks within the data's range (decades and their mirrors on a logit axis, without minor
    ticks; matplotlib's on a linear one, at most five when ``narrow``: a small multiple's
    labels such as 0.035 ran into each other), and on the score axis a tick at each strip
    labelled with what it holds (``<0.001``)."""
    from matplotlib.ticker import AutoLocator, FixedLocator, MaxNLocator, NullLocator

    axis = axes.xaxis if x else axes.yaxis
    base: Any
    if frame.scale == "logit":
        (axes.set_xscale if x else axes.set_yscale)("logit", nonpositive="clip")
        axis.set_minor_locator(NullLocator())
        base = FixedLocator(_logit_ticks(frame.low, frame.high))
    else:
        base = MaxNLocator(nbins=4, steps=[1, 2, 2.5, 5, 10]) if narrow else AutoLocator()
    (axes.set_xlim if x else axes.set_ylim)(*frame.limits(strips=x))
    strips = frame.strip_ticks() if x else {}
    locator, formatter = _tickers()
    axis.set_major_locator(locator(base, frame, strips))
    axis.set_major_formatter(formatter(frame, strips))


def _rate_label(value: float) -> str:
    """A tick on a log axis of rates, as the logit axes write them: 10\u207b\u2075, 0.001, 0.1, 1.

    >>> [_rate_label(v) for v in (1e-5, 1e-4, 0.001, 0.1, 1.0)]
    ['10\u207b\u2075', '10\u207b\u2074', '0.001', '0.1', '1']
    """
    if 0.0 < value < 1e-3 * 0.999:
        return _power_of_ten(value)
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


#: A legend of more entries than this would cover the curves of a 6-inch axes: it leaves them
#: for the right of the figure, in columns of at most :data:`_LEGEND_ROWS` entries (as many as
#: a 4.4-inch figure holds), and the figure grows wider by the legend's width, so the axes
#: keep their size whatever the number of entries.
_LEGEND_INSIDE = 6
_LEGEND_ROWS = 20


def _legend(figure: Figure, axes: Axes) -> None:
    """The legend of a one-axes figure's curves: in the axes' upper left corner when it is
    short, else beside the axes (see :data:`_LEGEND_INSIDE`)."""
    handles, labels = axes.get_legend_handles_labels()
    if len(handles) <= _LEGEND_INSIDE:
        axes.legend(loc="upper left", frameon=False)
        return
    legend = figure.legend(
        handles,
        labels,
        loc="outside right upper",  # the constrained layout makes room beside the axes
        ncols=math.ceil(len(handles) / _LEGEND_ROWS),
        frameon=False,
    )
    legend.set_gid("legend")
    width = legend.get_window_extent().width / figure.dpi  # the text's size, in inches
    # up to a tenth of an inch: a whole number of pixels at DPI
    figure.set_figwidth(math.ceil(10.0 * (figure.get_figwidth() + width)) / 10.0)


# -------------------------------------------------------------------------- reliability


@dataclass(frozen=True)
class ReliabilityCurve:
    """One score column in one panel: its legend label, its figures, and optionally a
    histogram of its scores (drawn beneath in place of the bins' counts). The picture re-bins
    it onto its own bars (see :func:`reliability_figure`); a histogram coarser than those
    bars is drawn on its own steps, so the finer it is, the better a zoomed linear axis."""

    label: str
    summary: ReliabilitySummary
    histogram: ScoreHistogram | None = None


#: One panel: its heading (None: no heading) and its curves.
ReliabilityPanel = tuple["str | None", Sequence[ReliabilityCurve]]

#: Bars of the histogram beneath a reliability diagram: this many equal steps across a linear
#: axis as shown (zoomed on rare events), or steps of :data:`LOGIT_BAR` in the logit.
HISTOGRAM_BARS = 50
LOGIT_BAR = 0.2


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
    source: str,
    summary: ReliabilitySummary,
    *,
    weighting: str,
    n_bins: Sequence[int],
    strategy: str,
) -> str:
    """The heading of a reliability picture, on two lines (one panel is 6.4 inches wide): the
    file; rows, base rate, weighting and bins (``n_bins``: the bins each column and group
    used, :func:`~calib_cli.report.payloads.bins_phrase`).

    >>> from calib_cli.core.metrics import reliability_summary
    >>> s = reliability_summary(np.array([0.0, 1.0]), np.array([0.2, 0.7]))
    >>> print(reliability_title("day.csv", s, weighting="unweighted", n_bins=[10],
    ...                         strategy="uniform"))
    Reliability of day.csv
    n = 2, base rate 0.5, unweighted; 10 uniform bins
    >>> reliability_title("d.csv", s, weighting="unweighted", n_bins=[1], strategy="quantile")[-16:]
    '; 1 quantile bin'
    """
    return (
        f"Reliability of {_shorten(source, 70)}\n"
        f"n = {summary.n:,}, base rate {_fmt(summary.base_rate)}, {weighting}; "
        f"{bins_phrase(n_bins, strategy)}"
    )


@_styled
def reliability_figure(
    panels: Sequence[ReliabilityPanel],
    *,
    scale: PlotScale = "linear",
    title: str = "",
    weighted: bool = False,
) -> Figure:
    """Reliability diagrams: one panel per group, every score column overlaid in each.

    The axes reach over the bins' mean scores, rates and intervals and over the bulk of the
    scores (their 0.1% to 99.9% quantiles: :func:`_histogram_extent`), with a margin so that
    no point at an end is cut in half; on a logit axis, scores within :data:`LOGIT_EDGE` of 0
    or 1 take no part. What lies beyond the score axis (exact 0s and 1s on a logit axis, the
    last outliers) is not dropped: it is gathered in a strip beyond that end, labelled
    ``<low`` or ``>high``, with its rows in one bar and its bins' points at the strip's
    middle. The histograms are re-binned onto :data:`HISTOGRAM_BARS` equal bars across the
    axis as shown (steps of :data:`LOGIT_BAR` in the logit on a logit axis), or drawn on
    their own steps when those are coarser.

    Parameters
    ----------
    panels : sequence of (heading, [ReliabilityCurve, ...])
        The first panel is usually all rows (heading None), the others one group each; every
        panel holds the same columns in the same order (a column keeps its colour and style).
    scale : {"linear", "logit"}
        Both probability axes on this scale (logit: rare events stay readable).
    title : str
        The figure's heading (see :func:`reliability_title`).
    weighted : bool
        Whether the figures are weighted: the histograms count weighted rows (told by the
        command's --weight-col, not by the totals: weights that add up to the row count are
        still weights).

    The count axis (log) is shared by every panel: from a third of the smallest bar, or of
    one row when no row is weighted (a bar can hold part of a row), to twice the largest.
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
        + [_histogram_extent(c.histogram, scale=scale) for panel in arrays for c, _ in panel]
    )
    if scale == "logit":
        low, high = _logit_limits(everything, edge=LOGIT_EDGE)
    else:
        low, high = 0.0, _linear_limit(everything)
    frame = _Frame(scale, low, high, margin=_MARGIN)
    steps = [_histogram_steps(curves, frame=frame) for curves in arrays]
    means = np.concatenate([a.mean_score[a.count > 0] for panel in arrays for _, a in panel])
    frame = replace(
        frame,
        below=bool((means < low).any()) or any(s.below > 0 for p in steps for s in p),
        above=bool((means > high).any()) or any(s.above > 0 for p in steps for s in p),
    )
    n_panels = len(panels)
    n_cols = min(n_panels, 3 if n_panels <= 9 else 4)
    n_rows = math.ceil(n_panels / n_cols)
    figure = _figure(3.4 * n_cols + 0.6 if n_panels > 1 else 6.4, 4.6 * n_rows + 0.5)
    grid = figure.add_gridspec(2 * n_rows, n_cols, height_ratios=[3.2, 1.0] * n_rows)
    positive = np.concatenate(
        [np.array([*s.counts, s.below, s.above]) for panel in steps for s in panel]
    )
    positive = positive[positive > 0]
    # The count axis starts at a third of the smallest bar, in every layout. A bar can hold
    # part of a row (the bars share out a fine step that straddles their edge), so on rows
    # that are not weighted the smallest bar is taken as one row at least: the axis never
    # reaches below a third of a row (it went down to 0.01 rows) and its ticks are whole rows.
    smallest = float(positive.min()) if positive.size else 1.0
    floor = (smallest if weighted else max(smallest, 1.0)) / 3.0
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
        for axes in (curve_ax, hist_ax):
            _shade_strips(axes, frame)
        any_edge |= _draw_curves(curve_ax, curves, frame=frame)
        _draw_histogram(hist_ax, steps[index], frame=frame, floor=floor, top=top)
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
        _probability_axis(curve_ax, frame, x=True, narrow=n_panels > 1)
        _probability_axis(curve_ax, frame, x=False)
        curve_ax.tick_params(labelbottom=False)
        curve_ax.grid(True, color="#e5e5e5", linewidth=0.6)
        if heading:
            curve_ax.set_title(heading, loc="left")
        if col == 0:
            curve_ax.set_ylabel("observed positive rate")
            count_label = "weighted rows" if weighted else "rows"
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


def _histogram_extent(
    histogram: ScoreHistogram | None, *, scale: PlotScale = "linear", tail: float = 1e-3
) -> FloatArray:
    """Where a histogram's scores are: the centres of the bins that hold its ``tail`` and
    ``1 - tail`` quantiles (of the weight), so that the axes show where the scores are, not
    every last outlier (at 1e7 rows a handful of rows can reach far beyond the rest). On a
    logit axis the steps that reach within :data:`LOGIT_EDGE` of 0 or 1 are left out: exact
    0s and 1s, however many, have no place on that scale (they are drawn beyond its ends).

    >>> edges = np.linspace(0.0, 1.0, 11)
    >>> np.round(_histogram_extent((edges, np.array([1.0, 0, 5e3, 4e3, 0, 0, 0, 0, 0, 1.0]))), 6)
    array([0.25, 0.35])
    >>> u = np.arange(-70, 71) * 0.2  # a logit histogram, half of its rows exact 0s
    >>> counts = np.zeros(140); counts[[0, 60, 70]] = [1e4, 5e3, 5e3]
    >>> np.round(_histogram_extent((el.sigmoid(u), counts), scale="logit"), 3)
    array([0.131, 0.525])
    """
    if histogram is None:
        return np.empty(0)
    edges, counts = (np.asarray(v, dtype=np.float64) for v in histogram)
    if scale == "logit":
        counts = np.where((edges[:-1] > LOGIT_EDGE) & (edges[1:] < 1.0 - LOGIT_EDGE), counts, 0.0)
    total = float(counts.sum())
    if not total > 0.0:
        return np.empty(0)
    cumulative = np.cumsum(counts) / total
    first = int(np.searchsorted(cumulative, tail, side="right"))
    last = int(np.searchsorted(cumulative, 1.0 - tail, side="left"))
    last = min(max(last, first), counts.size - 1)
    centres = 0.5 * (edges[:-1] + edges[1:])
    ends: FloatArray = np.clip(centres[[first, last]], LOGIT_EDGE, 1.0 - LOGIT_EDGE)
    return ends


def _draw_curves(
    axes: Axes, curves: Sequence[tuple[ReliabilityCurve, _BinArrays]], *, frame: _Frame
) -> bool:
    """Diagonal, then each column's observed rates with Wilson intervals. A bin whose mean
    score lies beyond the score axis is drawn in the strip beyond that end. On a logit axis a
    bin whose observed rate is 0 (or 1) has no place: it is drawn as a hollow triangle at the
    top (bottom) of its interval, off the line. True when such a bin was drawn."""
    low, high = frame.low, frame.high
    diagonal = np.array([low, high])
    axes.plot(diagonal, diagonal, color=GREY, linestyle="--", linewidth=0.9, label="ideal")
    below = frame.strip("below")[1] if frame.below else low
    above = frame.strip("above")[1] if frame.above else high
    drew_bound = False
    for position, (curve, bins) in enumerate(curves):
        label, summary = curve.label, curve.summary
        style = _series_style(position)
        seen = bins.count > 0
        x, y = bins.mean_score[seen], bins.rate[seen]
        x = np.where(x < low, below, np.where(x > high, above, x))
        lo, hi = np.clip(bins.ci_low[seen], low, high), np.clip(bins.ci_high[seen], low, high)
        legend = f"{label}: ECE {_fmt(summary.ece)}, log loss {_fmt(summary.log_loss)}"
        none_positive = np.zeros(x.size, dtype=bool)
        none_negative = np.zeros(x.size, dtype=bool)
        if frame.scale == "logit":
            none_positive, none_negative = y <= 0.0, y >= 1.0
        y = np.clip(y, low, high)
        inside = ~(none_positive | none_negative)
        container = axes.errorbar(
            x[inside],
            y[inside],
            yerr=np.vstack([y - lo, hi - y])[:, inside].clip(min=0.0),
            color=style.colour,
            marker=style.marker,
            linestyle=style.line,
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
                    markeredgecolor=style.colour,
                    markeredgewidth=0.9,
                    zorder=4,
                )
                bounds.set_gid(_gid("bound", label))
    return drew_bound


@dataclass(frozen=True)
class _Steps:
    """One histogram beneath a panel: its bars (``edges``, ``counts``) and the weight that
    lies below and above them (drawn in the strips beyond the axis)."""

    label: str
    style: _Style
    edges: FloatArray
    counts: FloatArray
    below: float
    above: float


def _histogram_steps(
    curves: Sequence[tuple[ReliabilityCurve, _BinArrays]], *, frame: _Frame
) -> list[_Steps]:
    """Each curve's own histogram when it has one, else its bin table's (weighted) counts,
    re-binned onto the picture's bars (:func:`_rebinned`)."""
    steps: list[_Steps] = []
    for position, (curve, bins) in enumerate(curves):
        if curve.histogram is not None:
            edges = np.asarray(curve.histogram[0], dtype=np.float64)
            counts = np.asarray(curve.histogram[1], dtype=np.float64)
        else:
            edges = np.append(bins.lower, bins.upper[-1:])
            counts = bins.count
        bars, weights, below, above = _rebinned(edges, counts, frame=frame)
        steps.append(_Steps(curve.label, _series_style(position), bars, weights, below, above))
    return steps


def _rebinned(
    edges: FloatArray, counts: FloatArray, *, frame: _Frame
) -> tuple[FloatArray, FloatArray, float, float]:
    """A histogram on the picture's bars: (bar edges, within ``frame.low`` to ``frame.high``;
    their counts; the weight below the bars; the weight above them).

    The bars are :data:`HISTOGRAM_BARS` equal steps from 0 to the top of a linear axis, or the
    multiples of :data:`LOGIT_BAR` in the logit that cover a logit axis (the end bars cut at
    the axis's ends). A step of the histogram is spread over the bars it overlaps in
    proportion to the overlap, measured on the scale; a histogram coarser than the bars (a
    step with weight more than 1.5 bars wide) keeps its own steps, as nothing finer is known.
    No weight is lost: what lies beyond the bars is returned as ``below`` and ``above``.

    >>> frame = _Frame("linear", 0.0, 0.04)
    >>> edges = np.linspace(0.0, 0.1, 1001)  # steps of 1e-4
    >>> bars, counts, below, above = _rebinned(edges, np.ones(1000), frame=frame)
    >>> bars.size - 1, float(bars[1]), float(counts[0]), below, float(round(above, 9))
    (50, 0.0008, 8.0, 0.0, 600.0)
    >>> bars, counts, below, above = _rebinned(np.linspace(0, 1, 51), np.ones(50), frame=frame)
    >>> bars.tolist(), counts.tolist(), above  # steps of 0.02 are kept: nothing finer is known
    ([0.0, 0.02, 0.04], [1.0, 1.0], 48.0)
    """
    u = frame.to_axis(edges)
    a, b = (float(v) for v in frame.to_axis([frame.low, frame.high]))
    weights = np.asarray(counts, dtype=np.float64)
    step = LOGIT_BAR if frame.scale == "logit" else (b - a) / HISTOGRAM_BARS
    widths = np.diff(u)
    relevant = (weights > 0.0) & (u[1:] > a) & (u[:-1] < b)
    if relevant.any() and float(widths[relevant].max()) > 1.5 * step:
        first = max(int(np.searchsorted(u, a, side="right")) - 1, 0)
        last = min(int(np.searchsorted(u, b, side="left")), u.size - 1)
        bars: FloatArray = u[first : last + 1]
    elif frame.scale == "logit":
        k = np.arange(math.floor(a / step + 1e-9), math.ceil(b / step - 1e-9) + 1)
        bars = k.astype(np.float64) * step
    else:
        bars = np.linspace(a, b, HISTOGRAM_BARS + 1)
    # A bar's edge on a step's edge is that edge, drawn at the step's own probability, so that
    # a bar holds whole steps (whole rows) and shares their edges exactly. "On" up to rounding:
    # the grid's edges are el.sigmoid(j * step), and el.log_odds gives back j * step only to
    # within about 1e-10 near 1 - 1e-6 (the sigmoid's last bit, magnified in the logit by
    # 1 / (1 - p)); nor is k * LOGIT_BAR bit for bit (10 k) * 0.02.
    nearest = np.clip(np.searchsorted(u, bars), 1, u.size - 1)
    nearest = np.where(
        np.abs(u[nearest - 1] - bars) <= np.abs(u[nearest] - bars), nearest - 1, nearest
    )
    on_edge = np.abs(u[nearest] - bars) <= 1e-7 * step
    bars = np.where(on_edge, u[nearest], bars)
    drawn = np.where(on_edge, edges[nearest], frame.to_probability(bars))
    # the end bars stop at the axis's ends: what lies past them (exact 0s and 1s where the
    # scores reach the logit axis's floor of 1e-6) is the strips' ``below`` and ``above``
    bars[0], bars[-1] = max(float(bars[0]), a), min(float(bars[-1]), b)
    drawn = np.clip(drawn, frame.low, frame.high)
    cumulative = np.concatenate([[0.0], np.cumsum(weights)])
    at_bars = np.interp(bars, u, cumulative)
    bar_counts: FloatArray = np.maximum(np.diff(at_bars), 0.0)
    total = float(cumulative[-1])
    return drawn, bar_counts, float(at_bars[0]), max(total - float(at_bars[-1]), 0.0)


def _shade_strips(axes: Axes, frame: _Frame) -> None:
    """A light band behind each strip that holds what lies off the scale."""
    for side, drawn in (("below", frame.below), ("above", frame.above)):
        if drawn:
            start, _, end = frame.strip(side)
            band = axes.axvspan(start, end, color="#f2f2f2", linewidth=0, zorder=0)
            band.set_gid(_gid("beyond", side))


def _draw_histogram(
    axes: Axes, steps: Sequence[_Steps], *, frame: _Frame, floor: float, top: float
) -> None:
    """Counts per bar on a log axis from ``floor`` to ``top`` (the same for every panel);
    empty bars left out, not drawn as zeros; the weight beyond the axis as one bar in each
    strip. One filled histogram, or outlines when several columns share the panel."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullLocator

    single = len(steps) == 1
    for s in steps:
        look: dict[str, Any] = {
            "baseline": floor,
            "fill": single,
            "color": s.style.colour,
            "alpha": 0.45 if single else 1.0,
            "linewidth": 1.0,
            "linestyle": s.style.line,
        }
        shown = np.where(s.counts > 0, s.counts, np.nan)
        patch = axes.stairs(shown, s.edges, label=s.label, **look)
        patch.set_gid(_gid("histogram", s.label))
        for side, weight in (("below", s.below), ("above", s.above)):
            if weight > 0:
                start, _, end = frame.strip(side, share=0.7)
                edge = axes.stairs([weight], [start, end], **look)
                edge.set_gid(_gid("histogram", side, s.label))
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
            (f"{ALL_ROWS}\n{rows}" if by is not None else None)
            if key[0] == "all"
            else f"{_shorten(f'{by}={key[1]}')}\n{rows}"
        )
        panels.append((heading, curves[key]))
    return panels


#: At most this many series of a picture are drawn: ``--by`` groups get a panel (beside all
#: rows), strata a curve (the ROC slopes, a stratified sampling record's maps). A picture of
#: thousands of panels takes minutes to draw, and dozens of curves cannot be told apart; the
#: report keeps every group and stratum.
MAX_PLOT_GROUPS = 24


def _drawn(sizes: Sequence[float]) -> list[int]:
    """The positions of the series a picture draws, in their order: all of them up to
    :data:`MAX_PLOT_GROUPS`, else the largest, ties to the one met first (series of one size
    each: the first ones).

    >>> _drawn([5.0, 1.0, 3.0])
    [0, 1, 2]
    >>> _drawn([1.0] * 30)[-1], _drawn([float(i) for i in range(30)])[0]
    (23, 6)
    """
    if len(sizes) <= MAX_PLOT_GROUPS:
        return list(range(len(sizes)))
    rank = sorted(range(len(sizes)), key=lambda i: (-sizes[i], i))[:MAX_PLOT_GROUPS]
    return sorted(rank)


def _drawn_note(drawn: int, total: int, *, series: str, size: str, kept: str) -> str:
    """The line saying which series a picture draws when it cannot draw them all.

    >>> _drawn_note(24, 30, series="strata", size="reference rows", kept="the report has all")
    'the 24 largest of 30 strata by reference rows (the report has all)'
    """
    return f"the {drawn} largest of {total:,} {series} by {size} ({kept})"


def plotted_groups(result: ReliabilityResult) -> tuple[list[object], int]:
    """The ``--by`` groups that get a panel, in the report's order, and how many groups there
    are: all of them up to :data:`MAX_PLOT_GROUPS`, else the largest by (weighted) rows, ties
    to the group met first (:func:`_drawn`)."""
    size: dict[object, float] = {}
    for entry in result.entries:
        if entry.group is not None and entry.group not in size:
            size[entry.group] = entry.summary.weight_total
    order = list(size)
    return [order[i] for i in _drawn([size[g] for g in order])], len(order)


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
    phrase = weighting_phrase(result.weight_col, (e.summary.weight_kind for e in result.entries))
    weighting = phrase or "unweighted"
    title = reliability_title(
        Path(result.source).name,
        result.entries[0].summary,
        weighting=weighting,
        n_bins=[summary.n_bins for _, _, summary, _ in entries],  # used, not --bins
        strategy=result.strategy,
    )
    if len(shown) < n_groups:
        rows = "weighted rows" if weighted else "rows"
        title += "\n" + _drawn_note(
            len(shown), n_groups, series="groups", size=rows, kept="the report has every group"
        )
    return reliability_figure(
        reliability_panels(entries, by=result.by),
        scale=scale,
        title=title,
        weighted=weighted,
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


#: Room a batch name needs along the axis, in inches: a line of 8-point text (0.13 inches)
#: slanted at 45 degrees, or upright in 6.5 points; and the width of the figure left of the
#: axes (the rate's ticks and label).
_SLANTED_NAME = 0.2
_UPRIGHT_NAME = 0.125
_Y_AXIS_ROOM = 0.9
#: Width of a character of 8-point DejaVu Sans, in inches (a little above its average).
_NAME_CHAR = 0.065


@dataclass(frozen=True)
class _NameTicks:
    """How batch names are written on the axis: every ``step``-th named, at ``rotation``
    degrees, in ``fontsize`` points."""

    step: int
    rotation: int
    fontsize: float


def _name_ticks(names: Sequence[str], width: float) -> _NameTicks:
    """Every batch named when the names fit an axes ``width`` inches wide: across when the
    longest fits between two ticks, else slanted, else upright in a smaller font; beyond
    that, every ``step``-th batch (upright, small), the fewest steps that fit.

    >>> _name_ticks(["a", "b", "c"], 5.5)
    _NameTicks(step=1, rotation=0, fontsize=8.0)
    >>> _name_ticks([f"campaign_week_{i}" for i in range(30)], 10.0)
    _NameTicks(step=1, rotation=45, fontsize=8.0)
    >>> _name_ticks([f"w{i}" for i in range(60)], 10.0)
    _NameTicks(step=1, rotation=90, fontsize=6.5)
    >>> _name_ticks([f"w{i}" for i in range(200)], 10.0)
    _NameTicks(step=3, rotation=90, fontsize=6.5)
    """
    spacing = width / max(len(names), 1)
    longest = max((len(name) for name in names), default=0)
    if longest * _NAME_CHAR <= 0.9 * spacing:
        return _NameTicks(1, 0, 8.0)
    if spacing >= _SLANTED_NAME:
        return _NameTicks(1, 45, 8.0)
    return _NameTicks(math.ceil(_UPRIGHT_NAME / spacing - 1e-9), 90, 6.5)


def _ordinal(n: int) -> str:
    """``2nd``, ``3rd``, ``4th``, ``11th``, ``21st``.

    >>> [_ordinal(n) for n in (2, 3, 4, 11, 12, 21, 22, 103)]
    ['2nd', '3rd', '4th', '11th', '12th', '21st', '22nd', '103rd']
    """
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


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
        names = [_shorten(str(batches[i][0])) for i in index]
        ticks = _name_ticks(names, width - _Y_AXIS_ROOM)
        axes.set_xticks(
            x[:: ticks.step],
            names[:: ticks.step],
            rotation=ticks.rotation,
            ha="right" if ticks.rotation == 45 else "center",
            rotation_mode="anchor" if ticks.rotation == 45 else "default",
            fontsize=ticks.fontsize,
        )
        if ticks.step > 1:  # every batch keeps a tick; the note says which are named
            axes.set_xticks(x, minor=True)
            axes.set_xlabel(
                f"{batch_col} (every {_ordinal(ticks.step)} of {len(names):,} batches named)"
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
    components piecewise constant on the model's cells, scaled by the estimated rate. For
    probability scores they are drawn on a logit axis of the score, like every probability
    axis (:func:`_probability_axis`).
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
    probability = model.score_kind == "probability"
    if probability:  # the steps drawn at their probabilities, on a logit axis
        edges, cell_edges = el.sigmoid(edges), el.sigmoid(cell_edges)
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
    axes.set_ylabel("density per unit logit")
    if probability:
        p_low, p_high = (float(p) for p in el.sigmoid([low, high]))
        _probability_axis(axes, _Frame("logit", p_low, p_high), x=True)
        axes.set_xlabel("score (logit axis)")
    else:
        axes.set_xlim(low, high)
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
        ("raw score", np.asarray(comparison.tpr_raw), comparison.auc_raw, "roc-raw"),
        ("re-ranked", np.asarray(comparison.tpr_reranked), comparison.auc_reranked, "roc-reranked"),
    )
    figure = _figure(9.6, 4.4)
    whole, low_fpr = figure.add_subplot(1, 2, 1), figure.add_subplot(1, 2, 2)
    whole.set_gid("roc")
    low_fpr.set_gid("roc-low-fpr")
    for axes in (whole, low_fpr):
        chance = np.geomspace(1e-5, 1.0, 50)
        axes.plot(chance, chance, color=GREY, linestyle="--", linewidth=0.9, label="chance")
        for position, (label, tpr, auc, gid) in enumerate(curves):
            style = _series_style(position)
            (line,) = axes.plot(
                fpr,
                tpr,
                color=style.colour,
                linestyle=style.line,
                linewidth=1.4,
                label=f"{label}: AUC {_fmt(auc, 4)}",
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

    ``scale="logit"`` puts probability scores on a logit axis. At most
    :data:`MAX_PLOT_GROUPS` strata are drawn, the largest by reference rows (:func:`_drawn`),
    and the title then says so; a legend of many strata stands beside the axes
    (:func:`_legend`).
    """
    figure = _figure(6.4, 4.4)
    axes = figure.add_subplot()
    axes.set_gid("slopes")
    axes.axhline(1.0, color=GREY, linestyle="--", linewidth=0.9, label="likelihood ratio 1")
    xs: list[FloatArray] = []
    ordered = sorted(slopes.items())
    drawn = [ordered[i] for i in _drawn([float(slope.rows) for _, slope in ordered])]
    for position, (name, slope) in enumerate(drawn):
        label = _shorten(name, 30)
        if stratum_odds is not None and math.isfinite(stratum_odds.get(name, math.nan)):
            label = f"{label} (odds {_fmt(stratum_odds[name])})"
        style = _series_style(position)
        (line,) = axes.plot(
            slope.thresholds,
            slope.roc_slope,
            color=style.colour,
            linestyle=style.line,
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
        _probability_axis(axes, _Frame("logit", *_logit_limits(every)), x=True)
        axes.set_xlabel("score (logit axis)")
    else:
        axes.set_xlabel("score")
    axes.grid(True, color="#e5e5e5", linewidth=0.6)
    _legend(figure, axes)
    if len(drawn) < len(ordered):
        kept = "the report has every stratum"
        note = _drawn_note(
            len(drawn), len(ordered), series="strata", size="reference rows", kept=kept
        )
        title = f"{title}\n{note}" if title else note
    if title:
        axes.set_title(title, loc="left")
    return figure


# ------------------------------------------------------------------------------ calibrators


def _map_steps(artifact: Artifact) -> tuple[Any, ...]:
    """The steps a calibrator, chain or sampling record applies."""
    from calib_cli.artifacts import prior_from_sampling, steps_of

    if artifact.kind == "sampling":
        return (prior_from_sampling(artifact),)
    return steps_of(artifact)


def calibrator_strata(artifact: Artifact) -> list[str]:
    """The strata of a stratified prior among the map's steps, by name; none without one."""
    from calib_cli.core.chain import PriorParams

    for step in _map_steps(artifact):
        if isinstance(step, PriorParams) and step.strata_col is not None:
            return sorted(step.stratum_shifts)
    return []


def calibrator_curves(
    artifact: Artifact, *, n_points: int = 801, strata: Sequence[str] | None = None
) -> tuple[FloatArray, dict[str, FloatArray], str]:
    """The map a calibrator, chain or sampling record applies: (score grid, {label: calibrated
    probability}, score kind). A stratified prior gives one curve per stratum of ``strata``
    (default :func:`calibrator_strata`, all): each curve is a pass of the chain, so a picture
    of thousands of strata computes only those it draws."""
    from calib_cli.core.chain import apply_chain

    steps = _map_steps(artifact)
    kind = str(artifact.fitted_on.get("score_kind", "probability"))
    first = steps[0]
    if kind == "probability" and getattr(first, "score_kind", "probability") != "probability":
        kind = str(first.score_kind)
    if kind == "probability":
        u = np.linspace(-14.0, 14.0, n_points)
        grid = np.sort(np.concatenate([el.sigmoid(u), np.linspace(0.0, 1.0, 201)]))
    else:
        low, high = _raw_range(first)
        grid = np.linspace(low, high, n_points)
    chosen: list[str | None] = [*(calibrator_strata(artifact) if strata is None else strata)]
    curves: dict[str, FloatArray] = {}
    for stratum in chosen or [None]:
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
    """A saved calibrator's or sampling record's map from score to probability.

    A stratified map draws one curve per stratum, at most :data:`MAX_PLOT_GROUPS` of them:
    the largest by rows before sampling when the file gives them (a sampling record's
    ``fitted_on``), else the first by name (:func:`_drawn`); the title then says which. A
    legend of many strata stands beside the axes (:func:`_legend`).
    """
    names = calibrator_strata(artifact) or ["calibrated"]
    sizes = _stratum_rows(artifact, names) if len(names) > 1 else None
    drawn = [names[i] for i in _drawn(sizes or [1.0] * len(names))]
    grid, curves, kind = calibrator_curves(artifact, strata=drawn if len(names) > 1 else None)
    figure = _figure(6.0, 5.4)
    axes = figure.add_subplot()
    axes.set_gid("calibrator")
    probability = kind == "probability"
    if probability:
        if scale == "logit":
            # where the map changes (a step map is flat beyond its knots), from LOGIT_EDGE
            changing = np.zeros(grid.size, dtype=bool)
            for values in curves.values():
                moves = np.flatnonzero(np.diff(values) != 0.0)
                if moves.size:
                    changing[moves[0] : moves[-1] + 2] = True
            shown = [grid[changing], *(v[changing] for v in curves.values())]
            inside = np.concatenate(shown) if changing.any() else grid
            frame = _Frame(scale, *_logit_limits(inside, edge=LOGIT_EDGE))
        else:
            frame = _Frame(scale, 0.0, 1.0)
        diagonal = np.array([frame.low, frame.high])
        axes.plot(diagonal, diagonal, color=GREY, linestyle="--", linewidth=0.9, label="identity")
    for position, (label, values) in enumerate(curves.items()):
        style = _series_style(position)
        (line,) = axes.plot(
            grid,
            values,
            color=style.colour,
            linestyle=style.line,
            linewidth=1.5,
            label=_shorten(label, 30) if len(names) > 1 else "map",
        )
        line.set_gid(_gid("map", label))
    if probability:
        _probability_axis(axes, frame, x=True)
        _probability_axis(axes, frame, x=False)
        axes.set_xlabel("score" + (" (logit axis)" if scale == "logit" else ""))
    else:
        axes.set_ylim(0.0, 1.0)
        axes.set_xlabel(f"score ({kind})")
    axes.set_ylabel("calibrated probability")
    axes.grid(True, color="#e5e5e5", linewidth=0.6)
    _legend(figure, axes)
    fitted = artifact.fitted_on
    source = fitted.get("file")
    rows = fitted.get("rows") or (fitted.get("before") or {}).get("rows")
    heading = title or _describe_kind(artifact)
    if source:
        heading += f"\nfitted on {Path(str(source)).name}" + (
            f", {rows:,} rows" if isinstance(rows, int) else ""
        )
    if len(curves) < len(names):
        kept = "the file has every stratum"
        if sizes is None:
            heading += f"\nthe first {len(curves)} of {len(names):,} strata by name ({kept})"
        else:
            size = "rows before sampling"
            heading += "\n" + _drawn_note(
                len(curves), len(names), series="strata", size=size, kept=kept
            )
    axes.set_title(heading, loc="left")
    return figure


def _stratum_rows(artifact: Artifact, strata: Sequence[str]) -> list[float] | None:
    """Each stratum's rows before sampling, when the artifact's ``fitted_on`` gives them all
    (a sampling record's ``strata``, each with ``before.rows``), else None."""
    known = artifact.fitted_on.get("strata")
    if not isinstance(known, Mapping):
        return None
    rows: list[float] = []
    for stratum in strata:
        entry = known.get(stratum)
        before = entry.get("before") if isinstance(entry, Mapping) else None
        count = before.get("rows") if isinstance(before, Mapping) else None
        if not isinstance(count, int | float) or isinstance(count, bool):
            return None
        rows.append(float(count))
    return rows


def _describe_kind(artifact: Artifact) -> str:
    if artifact.kind == "chain":
        return "chain: " + " then ".join(str(s["kind"]) for s in artifact.params["steps"])
    if artifact.kind == "sampling":
        return "sampling record: its prior correction"
    return f"{artifact.kind} calibrator"
