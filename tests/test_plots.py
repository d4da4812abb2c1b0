"""Pictures: each format is what it claims, reruns give the same bytes, drawing changes no figure,
and --plot is refused before any work when matplotlib is missing or the extension is unknown."""

from __future__ import annotations

import copy
import itertools
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest

from calib_cli.core.metrics import ReliabilitySummary, reliability_summary
from calib_cli.core.shift import count_target, estimate_prevalence, fit_reference
from calib_cli.core.strata import compare_rankings, fit_strata
from calib_cli.errors import UsageError
from calib_cli.report import plots
from calib_cli.workflows.common import check_plot
from calib_cli.workflows.rerank_strata import ROC_FPRS

pytest.importorskip("matplotlib")

SVG = "{http://www.w3.org/2000/svg}"


def _data(n: int = 3000, seed: int = 0) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    rng = np.random.default_rng(seed)
    z = rng.normal(-3.0, 1.5, n)
    y = (rng.random(n) < 1.0 / (1.0 + np.exp(-z))).astype(float)
    scores = {
        "model_a": 1.0 / (1.0 + np.exp(-(z + rng.normal(0, 0.3, n)))),
        "model_b": 1.0 / (1.0 + np.exp(-(1.5 * z + 1.0))),
    }
    return y, scores


def _panels(strategy: str = "quantile") -> list[plots.ReliabilityPanel]:
    y, scores = _data()
    entries = []
    for name, s in scores.items():
        entries.append((name, None, reliability_summary(y, s, strategy=strategy), None))
        for group in range(2):
            rows = np.arange(y.size) % 2 == group
            summary = reliability_summary(y[rows], s[rows], strategy=strategy)
            edges = np.linspace(0.0, 1.0, 51)
            entries.append((name, f"g{group}", summary, (edges, np.histogram(s[rows], edges)[0])))
    return plots.reliability_panels(entries, by="segment")


def _write(figure: object, path: Path) -> bytes:
    plots.save_figure(figure, str(path))  # type: ignore[arg-type]
    return path.read_bytes()


@pytest.mark.parametrize("scale", ["linear", "logit"])
def test_svg_is_xml_with_the_curves_and_the_histograms(tmp_path: Path, scale: str) -> None:
    figure = plots.reliability_figure(_panels(), scale=scale, title="t")  # type: ignore[arg-type]
    root = ET.fromstring(_write(figure, tmp_path / "r.svg"))
    assert root.tag == f"{SVG}svg"
    ids = {element.get("id") for element in root.iter()}
    assert {"curve-model_a", "curve-model_b", "reliability-0", "reliability-2"} <= ids
    assert any(i and i.startswith("histogram-model_a") for i in ids)
    texts = " ".join(t.text or "" for t in root.iter(f"{SVG}text"))
    assert "ECE" in texts and "segment=g1" in texts


def _png(path: Path) -> np.ndarray:
    import matplotlib.image

    image: np.ndarray = matplotlib.image.imread(str(path))
    return image


def test_png_has_the_figure_size_and_is_not_blank(tmp_path: Path) -> None:
    figure = plots.reliability_figure([(None, _panels()[0][1])], title="one panel")
    _write(figure, tmp_path / "r.png")
    image = _png(tmp_path / "r.png")
    width, height = figure.get_size_inches() * plots.DPI
    assert image.shape[:2] == (round(height), round(width))
    assert image[..., :3].std() > 0.05  # not a blank page
    assert (image[..., :3] < 0.5).mean() > 0.005  # some ink


def test_pdf_opens_with_one_page(tmp_path: Path) -> None:
    figure = plots.reliability_figure(_panels(), scale="logit")
    data = _write(figure, tmp_path / "r.pdf")
    assert data.startswith(b"%PDF-") and data.rstrip().endswith(b"%%EOF")
    assert data.count(b"/Type /Page\n") + data.count(b"/Type /Page ") == 1
    assert b"CreationDate" not in data


@pytest.mark.parametrize("suffix", [".png", ".svg", ".pdf"])
def test_the_same_inputs_give_the_same_bytes(tmp_path: Path, suffix: str) -> None:
    first = _write(plots.reliability_figure(_panels()), tmp_path / f"a{suffix}")
    second = _write(plots.reliability_figure(_panels()), tmp_path / f"b{suffix}")
    assert first == second


def test_drawing_changes_no_figure() -> None:
    panels = _panels()
    before = copy.deepcopy([[c.summary for c in curves] for _, curves in panels])
    plots.reliability_figure(panels, scale="logit")
    after = [[c.summary for c in curves] for _, curves in panels]
    assert repr(before) == repr(after)


def test_empty_bins_are_not_drawn_as_zeros(tmp_path: Path) -> None:
    y = np.array([0.0, 1.0, 0.0, 1.0])
    summary = reliability_summary(y, np.array([0.05, 0.06, 0.91, 0.92]), n_bins=10)
    assert sum(b.count == 0 for b in summary.bins) == 8
    figure = plots.reliability_figure([(None, [plots.ReliabilityCurve("m", summary)])])
    line = next(a for a in figure.axes[0].lines if a.get_gid() == "curve-m")
    assert len(line.get_xdata()) == 2  # type: ignore[arg-type]


def test_shift_mixture_and_rerank_pictures(tmp_path: Path) -> None:
    rng = np.random.default_rng(1)
    y = (rng.random(4000) < 0.1).astype(float)
    scores = np.clip(rng.beta(2, 8, 4000) + 0.4 * y, 0.001, 0.999)
    model = fit_reference(scores, y)
    batches = [
        (f"2024-01-0{day}", estimate_prevalence(model, scores[day::5], n_bootstrap=20))
        for day in range(1, 5)
    ]
    svg = _write(plots.shift_figure(batches, batch_col="day"), tmp_path / "s.svg")
    assert b'id="estimates"' in svg
    estimate = estimate_prevalence(model, scores, n_bootstrap=20)
    (counts,) = count_target(model, scores)
    svg = _write(plots.mixture_figure(model, estimate, counts), tmp_path / "m.svg")
    assert b'id="component-positive"' in svg and b'id="mixture"' in svg
    strata = np.where(np.arange(4000) % 2 == 0, "A", "B")
    comparison = compare_rankings(y, scores, scores * (1 + (strata == "A")), fprs=ROC_FPRS)
    svg = _write(plots.roc_figure(comparison), tmp_path / "roc.svg")
    assert b'id="roc-reranked"' in svg
    svg = _write(plots.slopes_figure(fit_strata(scores, y, strata)), tmp_path / "sl.svg")
    assert b'id="slope-A"' in svg and b'id="slope-B"' in svg


def test_an_unknown_extension_or_stdout_is_refused() -> None:
    with pytest.raises(UsageError, match=r"'\.jpg' is not a picture format"):
        check_plot("out.jpg")
    with pytest.raises(UsageError, match="not standard output"):
        check_plot("-")


def _without_matplotlib(tmp_path: Path) -> subprocess.CompletedProcess[str]:
    """``calib show MISSING.json --plot m.png`` where importing matplotlib fails."""
    code = (
        "import sys; sys.modules['matplotlib'] = None\n"
        "sys.argv = ['calib', 'show', sys.argv[1], '--plot', sys.argv[2]]\n"
        "from calib_cli.cli.app import main\n"
        "main()\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "missing.json"), str(tmp_path / "m.png")],
        capture_output=True,
        text=True,
        check=False,
    )
    return done


def test_a_missing_matplotlib_is_refused_before_any_work(tmp_path: Path) -> None:
    done = _without_matplotlib(tmp_path)
    assert done.returncode == 2  # a usage error, before the (missing) artifact is read
    assert done.stderr.startswith("error: --plot needs matplotlib: pip install 'calib-cli")
    assert len(done.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "m.png").exists()


def test_the_missing_matplotlib_message_names_the_extra(tmp_path: Path) -> None:
    done = _without_matplotlib(tmp_path)
    assert done.stderr.strip() == "error: --plot needs matplotlib: pip install 'calib-cli[plot]'"


def test_the_helpers() -> None:
    assert plots._logit_ticks(1e-7, 1 - 1e-7).count(0.5) == 1
    assert len(plots._logit_ticks(1e-12, 1 - 1e-12)) <= 9
    assert isinstance(_panels()[0][1][0].summary, ReliabilitySummary)


def test_thousands_of_groups_draw_the_largest_with_a_note_and_keep_the_report_order(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from calib_cli.workflows.reliability import ReliabilityEntry, ReliabilityResult

    assert plots.MAX_PLOT_GROUPS == 24
    monkeypatch.setattr(plots, "MAX_PLOT_GROUPS", 4)  # the same rule, fewer panels to draw
    rng = np.random.default_rng(3)
    sizes = rng.permutation(np.arange(40, 40 + 3 * (plots.MAX_PLOT_GROUPS + 6), 3))
    entries = []
    for index, size in enumerate(sizes):
        y = (np.arange(size) % 4 == 0).astype(float)
        s = rng.uniform(0.05, 0.6, size)
        entries.append(ReliabilityEntry("score", f"g{index}", "score", reliability_summary(y, s)))
    all_rows = ReliabilityEntry(
        "score", None, "score", reliability_summary(np.array([0.0, 1.0]), np.array([0.2, 0.7]))
    )
    result = ReliabilityResult(
        source="many.parquet",
        by="segment",
        n_bins=10,
        strategy="uniform",
        seed=0,
        entries=(all_rows, *entries),
        gate_failures=(),
    )
    shown, total = plots.plotted_groups(result)
    assert total == sizes.size and len(shown) == plots.MAX_PLOT_GROUPS
    # the largest groups, in the order of the report
    largest = set(np.argsort(-sizes, kind="stable")[: plots.MAX_PLOT_GROUPS])
    assert shown == [f"g{i}" for i in sorted(largest)]
    figure = plots.reliability_result_figure(result, scale="linear")
    panels = [a for a in figure.axes if str(a.get_gid()).startswith("reliability")]
    assert len(panels) == plots.MAX_PLOT_GROUPS + 1
    assert (
        figure.texts[0]
        .get_text()
        .endswith(
            f"the {plots.MAX_PLOT_GROUPS} largest of {sizes.size} groups by rows "
            "(the report has every group)"
        )
    )
    # at or below the cap: every group, no note
    few = ReliabilityResult(
        source="few.parquet",
        by="segment",
        n_bins=10,
        strategy="uniform",
        seed=0,
        entries=(all_rows, *entries[:3]),
        gate_failures=(),
    )
    assert plots.plotted_groups(few) == (["g0", "g1", "g2"], 3)
    assert "largest" not in plots.reliability_result_figure(few, scale="linear").texts[0].get_text()


# ------------------------------------------------- reliability: ends, zoom, titles, styles


def _stairs(figure: object, axes_gid: str) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """The histogram bars of one histogram axes, by gid: (counts, edges)."""
    axes = next(a for a in figure.axes if a.get_gid() == axes_gid)  # type: ignore[attr-defined]
    found = {}
    for patch in axes.patches:
        gid = patch.get_gid() or ""
        if gid.startswith("histogram-"):
            values, edges, _ = patch.get_data()
            found[gid] = (np.nan_to_num(np.asarray(values, dtype=float)), np.asarray(edges))
    return found


def _inside(axes: object, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Points in axes coordinates (0 to 1 inside the axes)."""
    points = axes.transData.transform(np.column_stack([x, y]))  # type: ignore[attr-defined]
    inside: np.ndarray = axes.transAxes.inverted().transform(points)  # type: ignore[attr-defined]
    return inside


def _zeros_and_ones(n: int = 4000, seed: int = 5) -> tuple[np.ndarray, np.ndarray]:
    """Scores with 10% exact 0s and 10% exact 1s, the rest between 0.003 and 0.85."""
    rng = np.random.default_rng(seed)
    scores = np.clip(1.0 / (1.0 + np.exp(-rng.normal(-1.0, 1.0, n))), 0.003, 0.85)
    scores[: n // 10] = 0.0
    scores[n // 10 : n // 5] = 1.0
    y = (rng.random(n) < np.clip(scores, 0.02, 0.98)).astype(float)
    return y, scores


def _logit_curve(label: str, y: np.ndarray, scores: np.ndarray) -> plots.ReliabilityCurve:
    from calib_cli.workflows.reliability import score_histogram

    histogram = score_histogram(scores, np.ones(scores.size))
    return plots.ReliabilityCurve(label, reliability_summary(y, scores), histogram)


def test_exact_zeros_and_ones_on_a_logit_axis_are_drawn_beyond_its_ends_and_counted() -> None:
    y, scores = _zeros_and_ones()
    figure = plots.reliability_figure([(None, [_logit_curve("m", y, scores)])], scale="logit")
    curve_ax = figure.axes[0]
    bars = _stairs(figure, "histogram-0")
    # every row is in a bar of positive width inside the axes: the 0s and 1s in the strips
    assert bars["histogram-below-m"][0].tolist() == [400.0]
    assert bars["histogram-above-m"][0].tolist() == [400.0]
    assert sum(float(counts.sum()) for counts, _ in bars.values()) == pytest.approx(4000.0)
    low, high = curve_ax.get_xlim()
    for counts, edges in bars.values():
        held = counts > 0
        assert (np.diff(edges)[held] > 0).all()
        assert (edges[:-1][held] >= low).all() and (edges[1:][held] <= high).all()
    # the axis is chosen from the scores between 0 and 1 (0.003 to 0.85), not stretched to 1e-6
    assert 1e-4 <= low < 0.003 and 0.85 < high <= 0.9999
    figure.draw_without_rendering()  # tick labels are set when drawn
    labels = [t.get_text() for t in figure.axes[1].get_xticklabels()]
    assert labels[0].startswith("<") and labels[-1].startswith(">")
    # the bin of the 1s (mean score 1) is drawn whole, inside the axes, in the strip
    line = next(a for a in curve_ax.lines if a.get_gid() == "curve-m")
    x, rate = (np.asarray(v, dtype=float) for v in line.get_data())
    where = _inside(curve_ax, x, rate)
    assert ((where > 0.01) & (where < 0.99)).all()
    assert x.max() == curve_ax.xaxis.get_majorticklocs()[-1]  # at the strip's tick, ">..."


def test_all_scores_zero_on_a_logit_axis_draw_one_bar_and_a_whole_point() -> None:
    rng = np.random.default_rng(2)
    y = (rng.random(1000) < 0.1).astype(float)
    figure = plots.reliability_figure(
        [(None, [_logit_curve("m", y, np.zeros(1000))])], scale="logit"
    )
    bars = _stairs(figure, "histogram-0")
    assert bars["histogram-below-m"][0].tolist() == [1000.0]
    assert float(bars["histogram-m"][0].sum()) == 0.0
    curve_ax = figure.axes[0]
    line = next(a for a in curve_ax.lines if a.get_gid() == "curve-m")
    x, rate = (np.asarray(v, dtype=float) for v in line.get_data())
    assert (
        x.size == 1
        and ((_inside(curve_ax, x, rate) > 0.01) & (_inside(curve_ax, x, rate) < 0.99)).all()
    )
    # with its interval, not cut off at the edge
    bars_of_interval = [c for c in curve_ax.collections if c.get_segments()]
    assert any(float(np.ptp(s[:, 1])) > 0 for c in bars_of_interval for s in c.get_segments())


def test_bins_of_only_zeros_and_only_ones_are_drawn_whole_on_a_logit_axis() -> None:
    y = np.repeat([0.0, 1.0], 1000)
    scores = y.copy()  # perfect: every 0 scored 0, every 1 scored 1
    figure = plots.reliability_figure([(None, [_logit_curve("m", y, scores)])], scale="logit")
    curve_ax = figure.axes[0]
    bounds = [a for a in curve_ax.lines if a.get_gid() == "bound-m"]
    assert {b.get_marker() for b in bounds} == {"v", "^"}
    for bound in bounds:
        x, rate = (np.asarray(v, dtype=float) for v in bound.get_data())
        where = _inside(curve_ax, x, rate)
        assert ((where > 0.01) & (where < 0.99)).all(), where
    bars = _stairs(figure, "histogram-0")
    assert bars["histogram-below-m"][0].tolist() == [1000.0]
    assert bars["histogram-above-m"][0].tolist() == [1000.0]


def test_one_columns_zeros_and_ones_do_not_stretch_the_shared_logit_axes() -> None:
    y, scores = _zeros_and_ones()
    rng = np.random.default_rng(8)
    inner = np.clip(scores + rng.normal(0, 0.01, scores.size), 0.003, 0.85)
    alone = plots.reliability_figure([(None, [_logit_curve("a", y, inner)])], scale="logit")
    both = plots.reliability_figure(
        [(None, [_logit_curve("a", y, inner), _logit_curve("b", y, scores)])], scale="logit"
    )
    # the axes span the scores between 0 and 1 (and the bins), not 1e-6 to 1 - 1e-6
    ticks = [f.axes[0].yaxis.get_majorticklocs() for f in (alone, both)]
    assert ticks[0][0] == ticks[1][0] == 0.001
    low, high = both.axes[0].get_ylim()
    assert 1e-4 < low < 0.003 and 0.85 < high < 1 - 1e-4


def test_the_linear_histogram_follows_the_zoom() -> None:
    rng = np.random.default_rng(4)
    scores = rng.beta(0.6, 400.0, 20000)  # a rare-event model: the axis zooms to a few %
    y = (rng.random(scores.size) < scores).astype(float)
    edges = np.linspace(0.0, 1.0, 20001)  # a histogram far finer than the picture's bars
    histogram = (edges, np.histogram(scores, edges)[0].astype(float))
    curve = plots.ReliabilityCurve("m", reliability_summary(y, scores), histogram)
    figure = plots.reliability_figure([(None, [curve])])
    top = figure.axes[0].get_ylim()[1]
    assert top < 0.1
    counts, bars = _stairs(figure, "histogram-0")["histogram-m"]
    assert bars.size == 51 and bars[0] == 0.0
    np.testing.assert_allclose(np.diff(bars), bars[-1] / 50)
    assert bars[-1] < top  # 50 bars across the axis as shown
    # each bar holds the rows whose scores fall in it (the raw scores, an independent count)
    np.testing.assert_allclose(counts, np.histogram(scores, bars)[0], atol=1e-6)
    beyond = _stairs(figure, "histogram-0").get("histogram-above-m", (np.zeros(1), None))[0]
    assert float(counts.sum() + beyond.sum()) == pytest.approx(scores.size)


def test_a_coarse_histogram_keeps_its_steps_and_counts_what_lies_beyond_the_zoom() -> None:
    rng = np.random.default_rng(4)
    scores = rng.beta(0.6, 400.0, 20000)
    y = (rng.random(scores.size) < scores).astype(float)
    edges = np.linspace(0.0, 1.0, 51)  # steps of 0.02: nothing finer is known
    histogram = (edges, np.histogram(scores, edges)[0].astype(float))
    curve = plots.ReliabilityCurve("m", reliability_summary(y, scores), histogram)
    figure = plots.reliability_figure([(None, [curve])])
    bars = _stairs(figure, "histogram-0")
    counts, steps = bars["histogram-m"]
    assert set(np.round(np.diff(steps), 12)) <= {0.02} | {round(float(steps[-1] - steps[-2]), 12)}
    assert steps[-1] <= figure.axes[0].get_ylim()[1]
    beyond = bars.get("histogram-above-m", (np.zeros(1), None))[0]
    assert float(counts.sum() + beyond.sum()) == pytest.approx(scores.size)


def _result(summaries: list[ReliabilitySummary], *, n_bins: int = 10) -> object:
    from calib_cli.workflows.reliability import ReliabilityEntry, ReliabilityResult

    entries = tuple(ReliabilityEntry(f"m{i}", None, f"m{i}", s) for i, s in enumerate(summaries))
    return ReliabilityResult(
        source="s.csv",
        by=None,
        n_bins=n_bins,
        strategy="quantile",
        seed=0,
        entries=entries,
        gate_failures=(),
    )


def test_the_title_gives_the_bins_used_not_the_bins_asked_for() -> None:
    rng = np.random.default_rng(6)
    y = (rng.random(500) < 0.3).astype(float)
    constant = reliability_summary(y, np.full(500, 0.3), n_bins=10, strategy="quantile")
    ties = reliability_summary(y, rng.integers(0, 7, 500) / 10, n_bins=10, strategy="quantile")
    spread = reliability_summary(y, rng.random(500), n_bins=10, strategy="quantile")
    assert constant.n_bins == 1 and 1 < ties.n_bins < 10 and spread.n_bins == 10

    def title(summaries: list[ReliabilitySummary]) -> str:
        result = _result(summaries)
        text: str = plots.reliability_result_figure(result, scale="linear").texts[0].get_text()  # type: ignore[arg-type]
        return text.splitlines()[1]

    assert title([constant]).endswith("; 1 quantile bin")
    assert title([ties]).endswith(f"; {ties.n_bins} quantile bins")
    assert title([ties, spread]).endswith(f"; {ties.n_bins} to 10 quantile bins")


def test_every_column_of_many_is_told_apart_and_keeps_its_look() -> None:
    y, scores = _data()
    base = scores["model_a"]
    curves = [
        plots.ReliabilityCurve(f"m{i}", reliability_summary(y, np.clip(base * (1 + i / 20), 0, 1)))
        for i in range(10)
    ]
    figure = plots.reliability_figure([(None, curves)])
    lines = {a.get_gid(): a for a in figure.axes[0].lines}
    looks = [
        (
            lines[f"curve-m{i}"].get_color(),
            lines[f"curve-m{i}"].get_marker(),
            str(lines[f"curve-m{i}"].get_linestyle()),
        )
        for i in range(10)
    ]
    assert len(set(looks)) == 10
    # the first seven as before: the palette in order, round markers, solid lines
    assert [look[0] for look in looks[:7]] == list(plots.COLOURS)
    assert {look[1:] for look in looks[:7]} == {("o", "-")}
    # a column keeps its look in every panel
    again = plots.reliability_figure([(None, curves), ("g", curves)])
    second = {a.get_gid(): a for a in again.axes[2].lines}
    assert second["curve-m8"].get_marker() == looks[8][1]


def test_logit_tick_labels_mirror_the_low_ones() -> None:
    assert plots._probability_label(1e-6) == "10\u207b\u2076"
    assert plots._probability_label(1 - 1e-6) == "1\u221210\u207b\u2076"
    assert plots._probability_label(1 - 1e-4) == "1\u221210\u207b\u2074"
    assert plots._probability_label(0.999) == "0.999"
    rng = np.random.default_rng(9)
    scores = np.clip(1.0 / (1.0 + np.exp(-rng.normal(0.0, 4.0, 5000))), 1e-5, 1 - 1e-5)
    y = (rng.random(scores.size) < scores).astype(float)
    figure = plots.reliability_figure([(None, [_logit_curve("m", y, scores)])], scale="logit")
    figure.draw_without_rendering()
    texts = [t.get_text() for t in figure.axes[0].get_yticklabels()]
    assert not any("1-1e" in t or "e-" in t for t in texts)
    assert "10\u207b\u2074" in texts and "1\u221210\u207b\u2074" in texts


# ----------------------------- one logit, one axis helper, one look per series in every figure


def test_logit_bars_fall_on_the_grids_edges_and_count_every_row_exactly() -> None:
    """The bars of a logit axis gather whole steps of the histogram's grid: every bar edge
    inside the axis is one of the grid's edges, bit for bit; each bar holds whole rows; bars
    and strips together hold every row, exactly. The picture's logit is the grid's own
    (calib_cli.core.elementary); still the logit of el.sigmoid(j * 0.02) comes back as
    j * 0.02 only to about 1e-10, which is why a bar is matched to the grid's nearest edge
    rather than computed and compared bit for bit."""
    from calib_cli.core import elementary as el
    from calib_cli.workflows.reliability import LOGIT_STEP, score_histogram

    rng = np.random.default_rng(21)
    scores = el.sigmoid(rng.normal(-1.0, 3.0, 20000))
    scores[:500], scores[500:800] = 0.0, 1.0  # the grid then spans 1e-6 to 1 - 1e-6
    weights = rng.integers(1, 5, scores.size).astype(float)
    y = (rng.random(scores.size) < scores).astype(float)
    histogram = score_histogram(scores, weights)
    summary = reliability_summary(y, scores, sample_weight=weights)
    curve = plots.ReliabilityCurve("m", summary, histogram)
    figure = plots.reliability_figure([(None, [curve])], scale="logit")
    bars = _stairs(figure, "histogram-0")
    counts, edges = bars["histogram-m"]
    assert counts.size > 40
    assert np.isin(edges[1:-1], histogram[0]).all()  # the end edges: the axis's ends
    np.testing.assert_allclose(np.diff(el.log_odds(edges[1:-1])), plots.LOGIT_BAR, rtol=1e-9)
    assert (counts == np.round(counts)).all()
    # each bar holds the weight of the rows whose scores fall in it: the raw scores counted
    # on the drawn edges, independently of the grid and of the gathering
    np.testing.assert_array_equal(counts, np.histogram(scores, edges, weights=weights)[0])
    below, above = bars["histogram-below-m"][0][0], bars["histogram-above-m"][0][0]
    assert below + float(counts.sum()) + above == float(weights.sum())
    # the grid's logits are not bit for bit multiples of its step: the matching is needed
    u = el.log_odds(histogram[0][1:-1])
    assert not np.array_equal(u, np.round(u / LOGIT_STEP) * LOGIT_STEP)
    assert float(np.max(np.abs(u - np.round(u / LOGIT_STEP) * LOGIT_STEP))) < 1e-9


def _looks(axes: object, prefix: str) -> list[tuple[str, str]]:
    """(colour, line style) of each line of ``axes`` whose gid starts with ``prefix``."""
    return [
        (str(line.get_color()), str(line.get_linestyle()))
        for line in axes.lines  # type: ignore[attr-defined]
        if str(line.get_gid()).startswith(prefix)
    ]


def test_strata_and_maps_past_seven_are_told_apart_as_the_columns_are() -> None:
    """The slopes (one per stratum), a calibrator's maps (one per stratum) and the ROC curves
    take the reliability diagram's looks: the palette in order, then other line styles."""
    from calib_cli.artifacts import steps_artifact
    from calib_cli.core.chain import PriorParams

    expected = [(s.colour, s.line) for s in map(plots._series_style, range(9))]
    assert len(set(expected)) == 9 and expected[7] == (plots.COLOURS[0], "--")
    rng = np.random.default_rng(22)
    strata = np.repeat([f"s{i}" for i in range(9)], 400)
    y = (rng.random(strata.size) < 0.2).astype(float)
    scores = np.clip(rng.beta(2, 6, strata.size) + 0.3 * y, 1e-4, 0.9999)
    slopes = plots.slopes_figure(fit_strata(scores, y, strata))
    assert _looks(slopes.axes[0], "slope-") == expected
    shifts = {f"s{i}": -0.3 * i for i in range(9)}
    record = steps_artifact([PriorParams(0.0, "stratum", shifts)], {})
    for scale in ("linear", "logit"):
        maps = plots.calibrator_figure(record, scale=scale)  # type: ignore[arg-type]
        assert _looks(maps.axes[0], "map-") == expected
    comparison = compare_rankings(y, scores, scores * (1 + (strata == "s1")), fprs=ROC_FPRS)
    roc = plots.roc_figure(comparison)
    assert _looks(roc.axes[0], "roc-") == expected[:2]


def test_every_probability_axis_is_set_by_one_helper() -> None:
    """The reliability diagram, the slopes, a calibrator's map and the mixture put their
    probability axes on a logit scale alike: the same locator and formatter (defined once),
    decades and their mirrors as ticks, labelled as probabilities, no minor ticks; only the
    reliability diagram has room beyond the data (a point at an end is never cut in half)."""
    from calib_cli.artifacts import steps_artifact
    from calib_cli.core.chain import PriorParams

    y, scores = _data()
    reliability = plots.reliability_figure(_panels(), scale="logit")
    rng = np.random.default_rng(23)
    strata = np.where(np.arange(y.size) % 2 == 0, "A", "B")
    slopes = plots.slopes_figure(fit_strata(scores["model_a"], y, strata), scale="logit")
    prior = steps_artifact([PriorParams(-0.5)], {})
    calibrator = plots.calibrator_figure(prior, scale="logit")
    shift_scores = np.clip(rng.beta(2, 8, 2000), 0.001, 0.999)
    model = fit_reference(shift_scores, (rng.random(2000) < shift_scores).astype(float))
    estimate = estimate_prevalence(model, shift_scores, n_bootstrap=0)
    (counts,) = count_target(model, shift_scores)
    mixture = plots.mixture_figure(model, estimate, counts)
    axes = [
        reliability.axes[1].xaxis,  # the histogram's, shared with the diagram above it
        reliability.axes[0].yaxis,
        slopes.axes[0].xaxis,
        calibrator.axes[0].xaxis,
        calibrator.axes[0].yaxis,
        mixture.axes[0].xaxis,
    ]
    locator, formatter = plots._tickers()
    for figure in (reliability, slopes, calibrator, mixture):
        figure.draw_without_rendering()
    for axis in axes:
        assert axis.get_scale() == "logit"
        assert type(axis.get_major_locator()) is locator
        assert type(axis.get_major_formatter()) is formatter
        assert len(axis.get_minorticklocs()) == 0
        ticks = axis.get_majorticklocs()
        labels = [t.get_text() for t in axis.get_ticklabels()]
        assert len(labels) == len(ticks) >= 3
        for label, tick in zip(labels, ticks, strict=True):  # or a strip's '<0.001'
            assert label == plots._probability_label(tick) or label[0] in "<>"
    for axis in (calibrator.axes[0].xaxis, calibrator.axes[0].yaxis):  # no room beyond
        ticks = axis.get_majorticklocs()
        assert tuple(axis.get_view_interval()) == (ticks[0], ticks[-1])
    low, high = reliability.axes[0].get_ylim()
    ticks = reliability.axes[0].yaxis.get_majorticklocs()
    assert low < ticks[0] and ticks[-1] < high  # the reliability diagram's 3% margin


# ------------------------------------------- many strata, many batch names, the count axis


def _boxes_in_inches(figure: object, artist: object) -> tuple[float, float, float, float]:
    """An artist's drawn extent, in inches from the figure's lower left corner."""
    box = artist.get_window_extent()  # type: ignore[attr-defined]
    dpi = figure.dpi  # type: ignore[attr-defined]
    return box.x0 / dpi, box.y0 / dpi, box.x1 / dpi, box.y1 / dpi


def _legend_beside_the_axes(figure: object) -> object:
    """The figure's legend, drawn inside the figure and clear of its axes; the axes keep the
    size of a picture with a short legend."""
    figure.draw_without_rendering()  # type: ignore[attr-defined]
    (legend,) = figure.legends  # type: ignore[attr-defined]
    (axes,) = figure.axes  # type: ignore[attr-defined]
    width, height = figure.get_size_inches()  # type: ignore[attr-defined]
    x0, y0, x1, y1 = _boxes_in_inches(figure, legend)
    assert min(x0, y0) >= 0.0 and x1 <= width and y1 <= height
    assert x0 >= _boxes_in_inches(figure, axes)[2]  # right of the axes, not over the curves
    assert axes.get_legend() is None
    return legend


def _strata_slopes(sizes: list[int], seed: int = 31) -> dict[str, object]:
    rng = np.random.default_rng(seed)
    strata = np.repeat([f"branch_{i:02d}" for i in range(len(sizes))], sizes)
    y = (rng.random(strata.size) < 0.2).astype(float)
    scores = np.clip(rng.beta(2, 6, strata.size) + 0.3 * y, 1e-4, 0.9999)
    return fit_strata(scores, y, strata)  # type: ignore[return-value]


def test_a_legend_of_many_strata_stands_beside_the_axes_and_at_most_24_are_drawn(
    tmp_path: Path,
) -> None:
    """12 strata: every one drawn, the legend (13 entries) beside the axes, which keep their
    size. 30 strata: the 24 largest by reference rows, in two columns, and the title says so;
    the same bytes on every run. Two strata: the short legend stays in the axes."""
    few = plots.slopes_figure(_strata_slopes([150] * 2))
    assert few.axes[0].get_legend() is not None and not few.legends
    twelve = plots.slopes_figure(_strata_slopes([150] * 12))
    legend = _legend_beside_the_axes(twelve)
    assert len(legend.get_texts()) == 13  # type: ignore[attr-defined]
    assert "largest" not in twelve.axes[0].get_title(loc="left")
    few.draw_without_rendering()
    widths = [f.axes[0].get_position().width * f.get_figwidth() for f in (few, twelve)]
    assert widths[1] == pytest.approx(widths[0], rel=0.05)

    sizes = [150 + 5 * ((7 * i) % 30) for i in range(30)]  # distinct sizes, in no order
    slopes = _strata_slopes(sizes)
    many = plots.slopes_figure(slopes, title="ROC slope per stratum")
    legend = _legend_beside_the_axes(many)
    labels = [t.get_text() for t in legend.get_texts()]  # type: ignore[attr-defined]
    assert len(labels) == plots.MAX_PLOT_GROUPS + 1 and labels[0] == "likelihood ratio 1"
    largest = sorted(np.argsort(sizes)[-plots.MAX_PLOT_GROUPS :])
    assert labels[1:] == [f"branch_{i:02d}" for i in largest]  # the largest, in name order
    assert legend._ncols == 2  # type: ignore[attr-defined]
    assert many.axes[0].get_title(loc="left") == (
        "ROC slope per stratum\n"
        "the 24 largest of 30 strata by reference rows (the report has every stratum)"
    )
    drawn = [str(line.get_gid()) for line in many.axes[0].lines if line.get_gid()]
    assert drawn == [f"slope-branch_{i:02d}" for i in largest]
    _write(many, tmp_path / "a.png")
    image = _png(tmp_path / "a.png")
    width, height = many.get_size_inches() * plots.DPI
    assert image.shape[:2] == (round(height), round(width))
    again = plots.slopes_figure(slopes, title="ROC slope per stratum")
    assert _write(again, tmp_path / "b.png") == (tmp_path / "a.png").read_bytes()


def test_a_stratified_maps_legend_stands_beside_it_and_names_the_strata_drawn() -> None:
    """A sampling record's (or a prior's) maps: the 24 largest strata by rows before sampling
    when the file gives them, else the first 24 by name; the legend beside the axes."""
    from calib_cli.artifacts import steps_artifact
    from calib_cli.core.chain import PriorParams

    names = [f"s{i:02d}" for i in range(30)]
    shifts = {name: -0.1 * i for i, name in enumerate(names)}
    rows = {name: 1000 + (11 * i) % 30 for i, name in enumerate(names)}
    fitted_on = {"file": "ref.csv", "strata": {n: {"before": {"rows": rows[n]}} for n in names}}
    sized = steps_artifact([PriorParams(0.0, "stratum", shifts)], fitted_on)
    figure = plots.calibrator_figure(sized)
    legend = _legend_beside_the_axes(figure)
    labels = [t.get_text() for t in legend.get_texts()]  # type: ignore[attr-defined]
    largest = sorted(names, key=lambda n: -rows[n])[: plots.MAX_PLOT_GROUPS]
    assert labels == ["identity", *sorted(largest)]
    title = figure.axes[0].get_title(loc="left")
    assert title.endswith(
        "\nthe 24 largest of 30 strata by rows before sampling (the file has every stratum)"
    )
    unsized = steps_artifact([PriorParams(0.0, "stratum", shifts)], {})
    figure = plots.calibrator_figure(unsized, scale="logit")
    labels = [t.get_text() for t in _legend_beside_the_axes(figure).get_texts()]  # type: ignore[attr-defined]
    assert labels == ["identity", *names[: plots.MAX_PLOT_GROUPS]]
    assert (
        figure.axes[0]
        .get_title(loc="left")
        .endswith("the first 24 of 30 strata by name (the file has every stratum)")
    )


def _visible_ticks(axis: object) -> list[str]:
    """The labels of an axis's major ticks within its view."""
    low, high = sorted(axis.get_view_interval())  # type: ignore[attr-defined]
    formatter = axis.get_major_formatter()  # type: ignore[attr-defined]
    ticks = [t for t in axis.get_majorticklocs() if low <= t <= high]  # type: ignore[attr-defined]
    formatter.set_locs(ticks)
    return [formatter(t) for t in ticks]


def test_the_count_axis_of_rows_starts_at_a_third_of_a_row_in_every_layout() -> None:
    """The histograms' bars share out the fine steps that straddle their edges, so a bar can
    hold part of a row: on rows that are not weighted the count axis starts at a third of
    the smallest bar, taken as one row at least, in one panel as in many, and its ticks are
    whole rows (it went down to 0.01 rows); weighted rows keep their fractions."""
    from calib_cli.workflows.reliability import score_histogram

    rng = np.random.default_rng(41)

    def entries(weight: float) -> list[tuple[str, object, ReliabilitySummary, object]]:
        made = []
        for group, size in (("big", 20000), ("small", 60)):
            scores = rng.beta(1.2, 3.0, size)
            y = (rng.random(size) < scores).astype(float)
            weights = np.full(size, weight)
            summary = reliability_summary(y, scores, sample_weight=weights)
            made.append(("score", group, summary, score_histogram(scores, weights)))
        return made

    panels = plots.reliability_panels(entries(1.0), by="g")
    frame = plots._Frame("linear", 0.0, 1.0)
    small = panels[1][1][0].histogram
    assert small is not None
    bars = plots._rebinned(*small, frame=frame)[1]
    assert 0.0 < bars[bars > 0].min() < 1.0  # a bar holding part of a row
    for layout in (panels, panels[1:]):  # many panels, one
        figure = plots.reliability_figure(layout)
        figure.draw_without_rendering()
        hist = next(a for a in figure.axes if a.get_gid() == "histogram-0")
        assert hist.get_ylim()[0] == pytest.approx(1.0 / 3.0)  # the smallest bar: a row
        labels = _visible_ticks(hist.yaxis)
        assert labels and all(float(label.rstrip("kMG")) >= 1 for label in labels), labels
    single = plots.reliability_figure(panels[:1])  # all bars of more than a few rows
    smallest = float(
        min(
            s.counts[s.counts > 0].min()
            for s in plots._histogram_steps(
                [(c, plots._BinArrays.of(c.summary)) for c in panels[0][1]], frame=frame
            )
        )
    )
    assert smallest > 1.0
    assert single.axes[1].get_ylim()[0] == pytest.approx(smallest / 3.0)
    weighted = plots.reliability_panels(entries(0.01), by="g")
    figure = plots.reliability_figure(weighted, weighted=True)
    assert figure.axes[1].get_ylim()[0] < 0.01 / 3.0
    # weights that add up to the row count are still weights: the axis reaches their bars
    # below a row (read from the totals, they were taken for rows and cut off)
    scaled = plots.reliability_figure(panels, weighted=True)
    hist = next(a for a in scaled.axes if a.get_gid() == "histogram-0")
    assert hist.get_ylim()[0] == pytest.approx(float(bars[bars > 0].min()) / 3.0)


def _shift_batches(names: list[str]) -> list[tuple[object, object]]:
    rng = np.random.default_rng(2)
    y = (rng.random(3000) < 0.1).astype(float)
    scores = np.clip(rng.beta(2, 8, 3000) + 0.4 * y, 0.001, 0.999)
    estimate = estimate_prevalence(fit_reference(scores, y), scores[::3], n_bootstrap=0)
    return [(name, estimate) for name in names]


def _no_overlap(figure: object, labels: list[object]) -> None:
    """Tick labels drawn inside the figure, none over its neighbour."""
    width, height = figure.get_size_inches()  # type: ignore[attr-defined]
    boxes = [_boxes_in_inches(figure, label) for label in labels]
    for x0, y0, x1, y1 in boxes:
        assert min(x0, y0) >= -0.01 and x1 <= width + 0.01 and y1 <= height + 0.01
    for (_, _, right, _), (left, _, _, _) in itertools.pairwise(boxes):
        assert right <= left + 1e-6


@pytest.mark.parametrize("count", [5, 30, 60])
def test_every_batch_is_named_when_the_names_fit(count: int) -> None:
    """Text batch names: each batch's name under its point; across, slanted or upright in a
    smaller font as the names need, never running into each other nor off the picture."""
    names = [f"campaign_week_{i}" for i in range(1, count + 1)]
    figure = plots.shift_figure(_shift_batches(names), batch_col="week")  # type: ignore[arg-type]
    figure.draw_without_rendering()
    (axes,) = figure.axes
    labels = [t for t in axes.get_xticklabels() if t.get_text()]
    assert [t.get_text() for t in labels] == names  # in the command's order
    assert list(axes.get_xticks()) == list(range(count))
    assert axes.get_xlabel() == "week"
    if labels[0].get_rotation() == 45:  # slanted: a line of text apart along the axis
        spacing = _boxes_in_inches(figure, labels[1])[2] - _boxes_in_inches(figure, labels[0])[2]
        line = labels[0].get_fontsize() * 1.2 / 72
        assert spacing >= line * 2**0.5
        for label in labels:  # inside the picture: the first name reaches left of the axes
            x0, y0, _, _ = _boxes_in_inches(figure, label)
            assert min(x0, y0) >= -0.01
    else:
        _no_overlap(figure, labels)


def test_too_many_batch_names_name_every_nth_and_say_so() -> None:
    names = [f"store_{i:03d}" for i in range(200)]
    figure = plots.shift_figure(_shift_batches(names), batch_col="store")  # type: ignore[arg-type]
    figure.draw_without_rendering()
    (axes,) = figure.axes
    labels = [t for t in axes.get_xticklabels() if t.get_text()]
    assert [t.get_text() for t in labels] == names[::3]
    ticks = {*axes.get_xticks(), *axes.get_xticks(minor=True)}  # a tick at every batch
    assert sorted(ticks) == list(range(200))
    assert axes.get_xlabel() == "store (every 3rd of 200 batches named)"
    _no_overlap(figure, labels)
