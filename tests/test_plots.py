"""Pictures: each format is what it claims, reruns give the same bytes, drawing changes no figure,
and --plot is refused before any work when matplotlib is missing or the extension is unknown."""

from __future__ import annotations

import copy
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
