"""``--plot`` on reliability, estimate-shift and rerank-strata: the picture is refused before
any work, changes no figure of the report, is the same from every engine, and opens as what it
claims.

Most checks run in-process (the Typer-free workflow, then the figure function); one
``calib ... --plot`` command line per command checks the wiring: reliability's runs the installed
command in a subprocess (a fresh process imports matplotlib and picks its backend), the others
run in-process (``invoke_calib``: matplotlib costs a second a process).
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from calib_cli.errors import UsageError
from calib_cli.report import plots
from calib_cli.report.payloads import (
    dumps,
    estimate_shift_payload,
    reliability_payload,
    rerank_strata_payload,
)
from calib_cli.workflows.estimate_shift import EstimateShiftRequest, run_estimate_shift
from calib_cli.workflows.reliability import (
    ReliabilityRequest,
    run_reliability,
    score_histogram,
)
from calib_cli.workflows.rerank_strata import ROC_FPRS, RerankStrataRequest, run_rerank_strata
from calib_cli.workflows.summarize import SummarizeRequest, run_summarize
from tests.conftest import RunCalib
from tests.test_plots import SVG, _png

pytest.importorskip("matplotlib")


def _write_csv(path: Path, columns: dict[str, np.ndarray]) -> str:
    names = list(columns)
    lines = [",".join(names)]
    lines += [",".join(str(v) for v in row) for row in zip(*columns.values(), strict=True)]
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def _same_report(drawn: object, plain: object, *, exact: bool = True) -> None:
    """Two reports are the same: as text, or (``exact=False``) number for number to 1e-12."""
    if exact:
        assert dumps(drawn) == dumps(plain)  # type: ignore[arg-type]
    else:
        assert json.loads(dumps(drawn)) == _approx(json.loads(dumps(plain)))  # type: ignore[arg-type]


def _approx(value: object) -> object:
    if isinstance(value, float):
        return pytest.approx(value, rel=1e-12, abs=1e-15)
    if isinstance(value, dict):
        return {k: _approx(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_approx(v) for v in value]
    return value


def _svg_ids(figure: object, path: Path) -> tuple[set[str], str]:
    """The ids and the text of a figure saved as SVG (which must parse as SVG)."""
    plots.save_figure(figure, str(path))  # type: ignore[arg-type]
    root = ET.fromstring(path.read_bytes())
    assert root.tag == f"{SVG}svg"
    ids = {e.get("id") or "" for e in root.iter()}
    return ids, " ".join(t.text or "" for t in root.iter(f"{SVG}text"))


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """Small files for the three commands: scored rows with two models, a weight and a
    segment; a label-shift reference and a labelled target over four days; strata."""
    folder = tmp_path_factory.mktemp("plots")
    rng = np.random.default_rng(3)
    n = 3000
    z = rng.normal(-3.0, 1.5, n)
    y = (rng.random(n) < 1.0 / (1.0 + np.exp(-z))).astype(int)
    made = {
        "scored": _write_csv(
            folder / "scored.csv",
            {
                "a": np.round(1.0 / (1.0 + np.exp(-(z + rng.normal(0, 0.3, n)))), 8),
                "b": np.round(1.0 / (1.0 + np.exp(-(1.5 * z + 1.0))), 8),
                "label": y,
                "w": rng.integers(1, 4, n),
                "seg": np.where(rng.random(n) < 0.4, "x", "y"),
            },
        )
    }

    def shifted(size: int, rate: float) -> tuple[np.ndarray, np.ndarray]:
        labels = (rng.random(size) < rate).astype(int)
        scores = np.where(labels == 1, rng.beta(4, 3, size), rng.beta(1.2, 9, size))
        return np.round(scores, 8), labels

    ref_scores, ref_labels = shifted(4000, 0.05)
    made["reference"] = _write_csv(
        folder / "reference.csv", {"score": ref_scores, "label": ref_labels}
    )
    days = np.repeat([f"2024-01-0{d}" for d in range(1, 5)], 500)
    parts = [shifted(500, rate) for rate in (0.05, 0.08, 0.12, 0.2)]
    made["target"] = _write_csv(
        folder / "target.csv",
        {
            "day": days,
            "score": np.concatenate([s for s, _ in parts]),
            "label": np.concatenate([y for _, y in parts]),
        },
    )

    def strata(size: int) -> dict[str, np.ndarray]:
        names = np.where(rng.random(size) < 0.5, "A", "B")
        rate = np.where(names == "A", 0.02, 0.15)
        labels = (rng.random(size) < rate).astype(int)
        scale = np.where(names == "A", 1.0, 0.3)
        scores = np.clip(scale * (rng.beta(2, 6, size) + 0.35 * labels), 1e-4, 0.9999)
        return {"stratum": names, "score": np.round(scores, 8), "label": labels}

    made["strata_reference"] = _write_csv(folder / "strata_ref.csv", strata(3000))
    target = strata(3000)
    made["strata_target"] = _write_csv(folder / "strata_target.csv", target)
    del target["label"]
    made["strata_unlabelled"] = _write_csv(folder / "strata_unlabelled.csv", target)
    return made


# ---------------------------------------------------------------------------- reliability


def _reliability(data: dict[str, str], **options: object) -> ReliabilityRequest:
    fields: dict[str, object] = {
        "file": data["scored"],
        "score_cols": ("a", "b"),
        "weight_col": "w",
        "by": "seg",
        "n_bins": 8,
    }
    fields.update(options)
    return ReliabilityRequest(**fields)  # type: ignore[arg-type]


@pytest.mark.parametrize("scale", ["linear", "logit"])
def test_reliability_histograms_agree_on_every_engine_and_change_no_figure(
    data: dict[str, str], tmp_path: Path, scale: str
) -> None:
    picture = str(tmp_path / "r.svg")
    run_summarize(
        SummarizeRequest(
            files=(data["scored"],),
            output=str(tmp_path / "s.parquet"),
            score_cols=("a", "b"),
            weight_col="w",
            by="seg",
        )
    )
    summaries = (str(tmp_path / "s.a.parquet"), str(tmp_path / "s.b.parquet"))
    results = {}
    for engine in ("memory", "streaming", "summary"):
        options: dict[str, object] = (
            {"file": None, "from_summaries": summaries, "score_cols": (), "weight_col": None}
            if engine == "summary"
            else {"engine": engine}
        )
        plain = run_reliability(_reliability(data, **options))
        drawn = run_reliability(_reliability(data, plot=picture, plot_scale=scale, **options))
        # the streaming engine's sums vary in their last bits from run to run (Polars' order
        # of summation), picture or not: there the figures agree to 1e-12
        exact = engine != "streaming"
        _same_report(reliability_payload(drawn), reliability_payload(plain), exact=exact)
        assert all(e.histogram is None for e in plain.entries)
        assert drawn.weight_col == "w"
        results[engine] = drawn
    memory = results["memory"].entries
    assert len(memory) == 6  # two columns, all rows and two segments
    for other in ("streaming", "summary"):
        for mine, theirs in zip(memory, results[other].entries, strict=True):
            assert mine.histogram is not None and theirs.histogram is not None
            np.testing.assert_allclose(theirs.histogram[0], mine.histogram[0])
            counts, expected = theirs.histogram[1], mine.histogram[1]
            assert counts.sum() == pytest.approx(expected.sum())
            assert np.abs(counts - expected).sum() <= 0.01 * expected.sum()
    assert not Path(picture).exists()  # the workflow draws nothing: the CLI does


def test_the_reliability_picture_overlays_columns_with_groups_as_small_multiples(
    data: dict[str, str], tmp_path: Path
) -> None:
    result = run_reliability(_reliability(data, plot="r.svg", plot_scale="logit"))
    figure = plots.reliability_result_figure(result, scale="logit")
    ids, text = _svg_ids(figure, tmp_path / "r.svg")
    assert {"curve-a", "curve-b", "reliability-0", "reliability-1", "reliability-2"} <= ids
    assert {"histogram-a", "histogram-b"} <= ids
    assert "n = 3,000" in text and "weighted by 'w'" in text and "8 uniform bins" in text
    assert "seg=x" in text and "weighted rows" in text
    # the histograms beneath share one count axis (a later panel does not clip the first)
    hists = [a for a in figure.axes if (a.get_gid() or "").startswith("histogram-")]
    assert len({a.get_ylim() for a in hists}) == 1
    top = max(float(np.max(e.histogram[1])) for e in result.entries if e.histogram is not None)
    assert hists[0].get_ylim()[1] > top


def test_the_histogram_steps_are_equal_in_the_logit() -> None:
    """One grid, fine enough for the bars of a linear axis zoomed in on rare events (the
    picture gathers it into its bars) and for the logit axis; the scores within 1e-6 of 0 or
    1 (exact 0s and 1s) in end steps of their own, beyond any logit axis."""
    scores = np.array([0.0, 1e-9, 0.003, 0.5, 1.0])
    edges, counts = score_histogram(scores, np.array([1.0, 2.0, 1.0, 1.0, 3.0]))
    grid = edges[1:-1]
    assert float(np.max(np.diff(grid))) < 0.0051  # finer than 50 bars of a zoomed axis
    u = np.log(grid / (1.0 - grid))
    np.testing.assert_allclose(np.diff(u), 0.02, rtol=1e-6)
    assert u[0] == pytest.approx(-13.82, abs=1e-6) and u[-1] == pytest.approx(13.82, abs=1e-6)
    assert (edges[0], edges[-1]) == (0.0, 1.0)
    assert counts.sum() == 8.0 and counts[0] == 3.0 and counts[-1] == 3.0  # 0, 1e-9; 1


def _beyond(figure: object) -> dict[str, float]:
    """The weight each strip beyond the score axis holds, by gid (first panel)."""
    axes = next(a for a in figure.axes if a.get_gid() == "histogram-0")  # type: ignore[attr-defined]
    found = {}
    for patch in axes.patches:
        gid = patch.get_gid() or ""
        if gid.startswith(("histogram-below-", "histogram-above-")):
            found[gid] = float(np.nansum(patch.get_data()[0]))
    return found


def test_exact_zeros_and_ones_are_drawn_and_counted_alike_by_every_engine(
    data: dict[str, str], tmp_path: Path
) -> None:
    rng = np.random.default_rng(11)
    n = 3000
    scores = np.round(1.0 / (1.0 + np.exp(-rng.normal(-1.0, 1.2, n))), 8)
    scores[:300], scores[300:450] = 0.0, 1.0
    labels = (rng.random(n) < np.clip(scores, 0.02, 0.98)).astype(int)
    source = _write_csv(tmp_path / "zo.csv", {"score": scores, "label": labels})
    pictures = []
    for engine in ("memory", "streaming"):
        request = ReliabilityRequest(
            file=source,
            plot="zo.png",
            plot_scale="logit",
            engine=engine,  # type: ignore[arg-type]
        )
        figure = plots.reliability_result_figure(run_reliability(request), scale="logit")
        assert _beyond(figure) == {"histogram-below-score": 300.0, "histogram-above-score": 150.0}
        low, _ = figure.axes[0].get_xlim()
        assert low > 1e-5  # chosen from the scores between 0 and 1, not from the 0s
        pictures.append(plots.figure_bytes(figure, "png"))
    assert pictures[0] == pictures[1]


@pytest.mark.parametrize("engine", ["memory", "streaming"])
def test_zeros_go_to_the_strip_when_the_scores_reach_the_axis_floor(
    data: dict[str, str], tmp_path: Path, engine: str
) -> None:
    """Scores reaching 1e-7 put the logit axis at its floor of 1e-6: the exact 0s shared a
    step with the scores near it, and half of them were drawn inside the axis."""
    rng = np.random.default_rng(13)
    scores = np.concatenate([rng.beta(0.5, 8.0, 3000), np.zeros(500), np.ones(200)])
    scores[0] = 1e-7
    labels = (rng.random(scores.size) < scores).astype(int)
    source = _write_csv(tmp_path / "floor.csv", {"score": scores, "label": labels})
    request = ReliabilityRequest(
        file=source,
        plot="f.png",
        plot_scale="logit",
        engine=engine,  # type: ignore[arg-type]
    )
    figure = plots.reliability_result_figure(run_reliability(request), scale="logit")
    beyond = _beyond(figure)
    below_floor = int(np.sum(scores < 1e-6))
    assert beyond["histogram-below-score"] == pytest.approx(below_floor, abs=1e-9)
    assert beyond["histogram-above-score"] == pytest.approx(200.0, abs=1e-9)


# -------------------------------------------------------------------------- estimate-shift


def _shift(data: dict[str, str], **options: object) -> EstimateShiftRequest:
    fields: dict[str, object] = {
        "reference": data["reference"],
        "target": data["target"],
        "n_bootstrap": 20,
    }
    fields.update(options)
    return EstimateShiftRequest(**fields)  # type: ignore[arg-type]


def test_one_batch_draws_the_same_mixture_from_either_engine(
    data: dict[str, str], tmp_path: Path
) -> None:
    pictures = []
    for engine in ("memory", "streaming"):
        plain = run_estimate_shift(_shift(data, engine=engine))
        drawn = run_estimate_shift(_shift(data, engine=engine, plot=str(tmp_path / "m.svg")))
        assert dumps(estimate_shift_payload(drawn)) == dumps(estimate_shift_payload(plain))
        assert drawn.counts is not None and drawn.model is not None
        assert drawn.counts.size == 2000
        pictures.append(plots.figure_bytes(plots.shift_result_figure(drawn), "svg"))
    assert pictures[0] == pictures[1]
    root = ET.fromstring(pictures[0])
    ids = {e.get("id") for e in root.iter()}
    assert {"batch-histogram", "component-negative", "component-positive", "mixture"} <= ids
    assert b"labelled 0.1" in pictures[0]  # the target's labelled rate, in the heading


def test_batches_draw_their_rates_over_time(data: dict[str, str], tmp_path: Path) -> None:
    plain = run_estimate_shift(_shift(data, batch_col="day"))
    drawn = run_estimate_shift(_shift(data, batch_col="day", plot=str(tmp_path / "s.svg")))
    assert dumps(estimate_shift_payload(drawn)) == dumps(estimate_shift_payload(plain))
    assert drawn.counts is None  # one batch's counts only
    figure = plots.shift_result_figure(drawn)
    ids, text = _svg_ids(figure, tmp_path / "s.svg")
    assert "estimates" in ids and "labelled rate" in text and "2024-01-04" in text
    (axes,) = figure.axes
    crosses = next(line for line in axes.lines if line.get_marker() == "x")
    truth = [b.true_prevalence for b in drawn.batches]
    np.testing.assert_allclose(np.asarray(crosses.get_ydata(), dtype=float), truth)


# --------------------------------------------------------------------------- rerank-strata


def _rerank(data: dict[str, str], tmp_path: Path, **options: object) -> RerankStrataRequest:
    fields: dict[str, object] = {
        "reference": data["strata_reference"],
        "target": data["strata_target"],
        "strata_col": "stratum",
        "output": str(tmp_path / "out.csv"),
    }
    fields.update(options)
    return RerankStrataRequest(**fields)  # type: ignore[arg-type]


@pytest.mark.parametrize("engine", ["memory", "streaming"])
def test_a_labelled_target_draws_the_roc_curves_and_the_report_is_unchanged(
    data: dict[str, str], tmp_path: Path, engine: str
) -> None:
    plain = run_rerank_strata(_rerank(data, tmp_path, engine=engine))
    drawn = run_rerank_strata(_rerank(data, tmp_path, engine=engine, plot="r.svg"))
    assert dumps(rerank_strata_payload(drawn)) == dumps(rerank_strata_payload(plain))
    assert plain.roc is None and drawn.roc is not None and drawn.comparison is not None
    assert drawn.roc.fpr == ROC_FPRS
    assert drawn.roc.auc_reranked == drawn.comparison.auc_reranked
    for fpr, tpr in zip(drawn.comparison.fpr, drawn.comparison.tpr_reranked, strict=True):
        assert drawn.roc.tpr_reranked[ROC_FPRS.index(fpr)] == pytest.approx(tpr)
    if engine == "memory":
        ids, text = _svg_ids(plots.rerank_result_figure(drawn, scale="linear"), tmp_path / "r.svg")
        assert {"roc-raw", "roc-reranked", "roc-low-fpr"} <= ids and "AUC" in text


def test_an_unlabelled_target_draws_each_strata_slope(data: dict[str, str], tmp_path: Path) -> None:
    request = _rerank(data, tmp_path, target=data["strata_unlabelled"], plot="s.svg")
    result = run_rerank_strata(request)
    assert result.roc is None and result.slopes is not None
    figure = plots.rerank_result_figure(result, scale="logit")
    ids, text = _svg_ids(figure, tmp_path / "s.svg")
    assert {"slope-A", "slope-B"} <= ids and "odds" in text and "logit axis" in text


# -------------------------------------------------------------------------------- refusals

Run = Callable[[dict[str, str], Path, str], object]
_RUNS: dict[str, Run] = {
    "reliability": lambda d, t, p: run_reliability(
        _reliability(d, file=str(t / "missing.csv"), plot=p)
    ),
    "estimate-shift": lambda d, t, p: run_estimate_shift(
        _shift(d, target=str(t / "missing.csv"), plot=p)
    ),
    "rerank-strata": lambda d, t, p: run_rerank_strata(
        _rerank(d, t, target=str(t / "missing.csv"), plot=p)
    ),
}


@pytest.mark.parametrize("command", sorted(_RUNS))
def test_a_bad_picture_path_is_refused_before_any_work(
    data: dict[str, str], tmp_path: Path, command: str
) -> None:
    run = _RUNS[command]
    # a usage error, not the missing input: the picture is checked first
    with pytest.raises(UsageError, match=r"'\.gif' is not a picture format"):
        run(data, tmp_path, str(tmp_path / "x.gif"))
    with pytest.raises(UsageError, match="not standard output"):
        run(data, tmp_path, "-")
    assert not list(tmp_path.iterdir())


def test_the_picture_and_the_report_cannot_share_a_path(
    data: dict[str, str], tmp_path: Path
) -> None:
    both = str(tmp_path / "r.svg")
    with pytest.raises(UsageError):
        run_reliability(_reliability(data, report=both, plot=both))
    assert not list(tmp_path.iterdir())


# ------------------------------------------------------------------------------ end to end


def _loaded(text: bytes | str) -> object:
    return json.loads(text)


def test_calib_reliability_plot_writes_a_png_and_the_same_json(
    run_calib: RunCalib, data: dict[str, str], tmp_path: Path
) -> None:
    picture = tmp_path / "r.png"
    args = [data["scored"], "--score-col", "a", "--score-col", "b", "--by", "seg"]
    args += ["--weight-col", "w", "--bins", "8", "--plot", str(picture), "--plot-scale", "logit"]
    done = run_calib(["reliability", *args, "--json"])
    assert done.returncode == 0, done.stderr
    expected = dumps(reliability_payload(run_reliability(_reliability(data))))
    assert _loaded(done.stdout) == _loaded(expected)
    image = _png(picture)
    assert image.shape[1] > 1500 and image.shape[0] > 700  # three panels side by side
    assert image[..., :3].std() > 0.05 and (image[..., :3] < 0.5).mean() > 0.005


def test_calib_estimate_shift_plot_writes_a_pdf_and_the_same_report(
    invoke_calib: RunCalib, data: dict[str, str], tmp_path: Path
) -> None:
    picture, report = tmp_path / "s.pdf", tmp_path / "s.json"
    args = ["--reference", data["reference"], "--target", data["target"], "--batch-col", "day"]
    args += ["--bootstrap", "20", "--plot", str(picture), "--report", str(report), "-q"]
    done = invoke_calib(["estimate-shift", *args])
    assert done.returncode == 0, done.stderr
    expected = dumps(estimate_shift_payload(run_estimate_shift(_shift(data, batch_col="day"))))
    assert _loaded(report.read_text()) == _loaded(expected)
    pdf = picture.read_bytes()
    assert pdf.startswith(b"%PDF-") and pdf.rstrip().endswith(b"%%EOF")
    assert pdf.count(b"/Type /Page\n") + pdf.count(b"/Type /Page ") == 1
    assert b"CreationDate" not in pdf


def test_calib_rerank_strata_plot_writes_an_svg_and_the_same_report(
    invoke_calib: RunCalib, data: dict[str, str], tmp_path: Path
) -> None:
    picture, report = tmp_path / "r.svg", tmp_path / "r.json"
    args = ["--reference", data["strata_reference"], "--target", data["strata_target"]]
    args += ["--strata-col", "stratum", "-o", str(tmp_path / "out.csv"), "--report", str(report)]
    done = invoke_calib(["rerank-strata", *args, "--plot", str(picture), "-q"])
    assert done.returncode == 0, done.stderr
    again = _rerank(data, tmp_path, output=str(tmp_path / "again.csv"))
    expected = rerank_strata_payload(run_rerank_strata(again))
    assert _loaded(report.read_text()) == _loaded(dumps(expected))
    root = ET.fromstring(picture.read_bytes())
    assert {"roc-raw", "roc-reranked"} <= {e.get("id") for e in root.iter()}


def test_thirty_strata_draw_the_24_largest_with_the_legend_beside_them(
    invoke_calib: RunCalib, tmp_path: Path
) -> None:
    """``rerank-strata --plot`` on an unlabelled target and ``show --plot`` on a stratified
    sampling record, with 30 strata: 24 curves, a legend of its own beside the axes (it ran
    over the x axis and off the picture), and the title naming the strata drawn."""
    rng = np.random.default_rng(17)
    names = np.array([f"branch_{i:02d}" for i in range(30)])
    sizes = 120 + 4 * rng.permutation(30)  # the six smallest are left out

    def rows(labelled: bool) -> dict[str, np.ndarray]:
        stratum = np.repeat(names, sizes)
        y = (rng.random(stratum.size) < 0.2).astype(int)
        scores = np.clip(rng.beta(2, 6, stratum.size) + 0.3 * y, 1e-4, 0.9999)
        made = {"id": np.arange(stratum.size), "stratum": stratum, "score": np.round(scores, 8)}
        return {**made, "label": y} if labelled else made

    reference = _write_csv(tmp_path / "reference.csv", rows(True))
    target = _write_csv(tmp_path / "target.csv", rows(False))
    rates = tmp_path / "rates.csv"
    rates.write_text(
        "stratum,negative_rate\n" + "".join(f"{n},{0.05 + 0.03 * i}\n" for i, n in enumerate(names))
    )
    largest = set(names[np.argsort(-sizes, kind="stable")[:24]])
    slopes, maps = tmp_path / "slopes.svg", tmp_path / "maps.svg"
    args = ["--reference", reference, "--target", target, "--strata-col", "stratum"]
    args += ["-o", str(tmp_path / "out.csv"), "--plot", str(slopes), "-q"]
    assert invoke_calib(["rerank-strata", *args]).returncode == 0
    record = tmp_path / "sample.json"
    args = [reference, "-o", str(tmp_path / "sample.csv"), "--strata-col", "stratum"]
    args += ["--rates-file", str(rates), "--key-col", "id", "--record", str(record), "-q"]
    assert invoke_calib(["resample", *args]).returncode == 0
    assert invoke_calib(["show", str(record), "--plot", str(maps), "-q"]).returncode == 0
    for picture, prefix, note in (
        (slopes, "slope-", "the 24 largest of 30 strata by reference rows"),
        (maps, "map-", "the 24 largest of 30 strata by rows before sampling"),
    ):
        root = ET.fromstring(picture.read_bytes())
        ids = {e.get("id") or "" for e in root.iter()}
        assert {i.removeprefix(prefix) for i in ids if i.startswith(prefix)} == largest
        assert "legend" in ids
        assert note in " ".join(t.text or "" for t in root.iter(f"{SVG}text"))
