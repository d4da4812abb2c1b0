"""`recalibrate --cross-fit K`: every fold's fit, made on the other K - 1 folds, meets the
minimum rows of each class a whole fit needs (README, "Degenerate fit data are refused").

Only the whole file was checked, so 12 positives passed platt's 10 while each fold's map was
fitted on 9 or 10 of them. The folds are stratified: the rows are shuffled, grouped by label
(negatives first) and dealt round robin, so the ``j``-th row of a class starting at position
``s`` of that order goes to fold ``(s + j) % K`` whatever the shuffle. The counts below are
worked by hand from that rule; the core's weighted counts are checked against the folds drawn.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pytest

from calib_cli.core import selection
from calib_cli.core.selection import FoldSupportError, _stratified_folds, cross_fit
from calib_cli.errors import InputError
from calib_cli.workflows.recalibrate import RecalibrateRequest, run_recalibrate
from tests.conftest import RunCalib

ENOUGH = "the fewest folds that leave every fit enough"


def _labelled(
    path: Path, positives: int, negatives: int, *, weight: float | None = None, seed: int = 0
) -> Path:
    """Scores that rank the classes apart, but not perfectly; an optional constant weight."""
    rng = np.random.default_rng(seed)
    labels = np.r_[np.ones(positives, dtype=np.int64), np.zeros(negatives, dtype=np.int64)]
    scores = np.clip(rng.normal(0.3 + 0.3 * labels, 0.15), 0.01, 0.99)
    columns: dict[str, object] = {"score": scores, "label": labels}
    if weight is not None:
        columns["w"] = np.full(labels.shape[0], weight)
    pl.DataFrame(columns).write_csv(path)
    return path


def _refusal(path: Path, **options: object) -> str:
    out = path.with_suffix(".out.csv")
    with pytest.raises(InputError) as error:
        run_recalibrate(RecalibrateRequest(file=str(path), output=str(out), **options))  # type: ignore[arg-type]
    assert error.value.exit_code == 65
    assert not out.exists()
    return str(error.value)


def test_platt_on_12_positives_in_5_folds_is_refused_naming_the_fold_and_6_folds(
    invoke_calib: RunCalib, tmp_path: Path
) -> None:
    # 388 negatives take positions 0-387; the 12 positives 388-399, folds 388 % 5 = 3, 4, 0,
    # 1, 2, 3, 4, 0, 1, 2, 3, 4: folds 3 and 4 (4 and 5 counted from 1) hold 3 each, so their
    # maps are fitted on 9. In 6 folds (388 % 6 = 4) every fold holds 2 and every fit has 10.
    source = _labelled(tmp_path / "p12.csv", 12, 388)
    out = tmp_path / "out.csv"
    done = invoke_calib(
        ["recalibrate", str(source), "--cross-fit", "5", "--method", "platt", "-o", str(out)]
    )
    assert done.returncode == 65
    assert done.stderr.decode() == (
        f"error: {source}: --cross-fit 5: fold 4's map would be fitted on the other 4 folds, "
        "which hold 9 positive rows; platt needs at least 10 rows of each class in every fit: "
        f"use --cross-fit 6 ({ENOUGH})\n"
    )
    assert not out.exists()
    done = invoke_calib(
        ["recalibrate", str(source), "--cross-fit", "6", "--method", "platt", "-o", str(out)]
    )
    assert done.returncode == 0, done.stderr


def test_histogram_bins_above_a_folds_negatives_are_refused_at_the_boundary(
    invoke_calib: RunCalib, tmp_path: Path
) -> None:
    # 89 negatives at positions 0-88 in 5 folds: folds 0-3 hold 18, fold 4 holds 17, so fold
    # 1's map is fitted on 71 (the whole file's 89 meet --bins 80). In 9 folds a fold holds up
    # to 10 (79 left); in 10 folds up to 9 (80 left), and the 111 positives (positions
    # 89-199) at most 12 (99 left).
    source = _labelled(tmp_path / "bal200.csv", 111, 89)
    out = tmp_path / "out.csv"
    args = ["recalibrate", str(source), "--method", "histogram", "-o", str(out)]
    done = invoke_calib([*args, "--cross-fit", "5", "--bins", "80"])
    assert done.returncode == 65
    assert done.stderr.decode() == (
        f"error: {source}: --cross-fit 5: fold 1's map would be fitted on the other 4 folds, "
        "which hold 71 negative rows; histogram needs at least 80 rows of each class in every "
        f"fit: use --cross-fit 10 ({ENOUGH}), or --bins 71 or fewer, or another --method "
        "(platt, isotonic or beta)\n"
    )
    assert not out.exists()
    assert "fold 1's map would be fitted on the other 8 folds, which hold 79 negative rows" in (
        _refusal(source, method="histogram", cross_fit_folds=9, bins=80)
    )
    for folds, bins in ((10, 80), (5, 71)):
        done = invoke_calib([*args, "--cross-fit", str(folds), "--bins", str(bins)])
        assert done.returncode == 0, done.stderr


@pytest.mark.parametrize(("positives", "short"), [(12, True), (13, False)])
def test_the_boundary_is_the_folds_count_not_the_files(
    tmp_path: Path, positives: int, short: bool
) -> None:
    # 13 positives at positions 388-400 in 5 folds: folds 3, 4 and 0 hold 3, folds 1 and 2
    # hold 2: every fit has 10 or 11. 12 positives leave folds 3 and 4's fits 9 (above). Both
    # files pass the whole-file minimum of 10, by 2 and by 3.
    source = _labelled(tmp_path / "f.csv", positives, 388, seed=positives)
    if short:
        assert "fold 4's map would be fitted on the other 4 folds, which hold 9 positive" in (
            _refusal(source, method="platt", cross_fit_folds=5)
        )
        return
    out = tmp_path / "out.csv"
    run_recalibrate(
        RecalibrateRequest(file=str(source), method="platt", cross_fit_folds=5, output=str(out))
    )
    frame = pl.read_csv(source)
    expected = cross_fit(
        "platt",
        frame["score"].to_numpy(),
        frame["label"].to_numpy(),
        n_folds=5,
        rng=np.random.default_rng(0),
    )
    assert pl.read_csv(out)["calibrated"].to_list() == expected.tolist()


def test_a_k_that_passes_gives_the_out_of_fold_scores_it_gave_before(tmp_path: Path) -> None:
    # cross_fit without required_rows is the unchecked computation the command ran before
    source = _labelled(tmp_path / "p12.csv", 12, 388)
    out = tmp_path / "out.csv"
    run_recalibrate(
        RecalibrateRequest(
            file=str(source), method="platt", cross_fit_folds=6, output=str(out), seed=4
        )
    )
    frame = pl.read_csv(source)
    expected = cross_fit(
        "platt",
        frame["score"].to_numpy(),
        frame["label"].to_numpy(),
        n_folds=6,
        rng=np.random.default_rng(4),
    )
    assert pl.read_csv(out)["calibrated"].to_list() == expected.tolist()


def test_weights_count_per_fold_as_they_count_for_the_whole_fit(tmp_path: Path) -> None:
    # weight 2 on every row: 6 positive rows count 12 (the whole passes platt), and a fold
    # holding 2 of them (positions 388-393 in 5 folds: folds 3 and 4 hold 2) leaves 8. Six
    # folds hold one each: 10 left.
    doubled = _labelled(tmp_path / "doubled.csv", 6, 388, weight=2.0)
    assert _refusal(doubled, method="platt", cross_fit_folds=5, weight_col="w") == (
        f"{doubled}: --cross-fit 5: fold 4's map would be fitted on the other 4 folds, which "
        "hold 8 positive rows; platt needs at least 10 rows of each class in every fit: use "
        f"--cross-fit 6 ({ENOUGH})"
    )
    # weights below 1 on average count in units of their mean, per fold as for the whole
    halved = _labelled(tmp_path / "halved.csv", 12, 388, weight=0.5)
    plain = _refusal(halved, method="platt", cross_fit_folds=5)
    assert _refusal(halved, method="platt", cross_fit_folds=5, weight_col="w") == plain


def test_no_number_of_folds_passes_when_the_file_just_meets_the_minimum(tmp_path: Path) -> None:
    # 20 positives just meet beta's 20: every fold holds out at least one of them
    source = _labelled(tmp_path / "twenty.csv", 20, 300)
    assert _refusal(source, method="beta", cross_fit_folds=5) == (
        f"{source}: --cross-fit 5: fold 1's map would be fitted on the other 4 folds, which "
        "hold 16 positive rows; beta needs at least 20 rows of each class in every fit: no "
        "number of folds leaves every fit enough; use another --method (platt, isotonic or "
        "histogram)"
    )
    ten = _labelled(tmp_path / "ten.csv", 10, 300)
    assert _refusal(ten, method="platt", cross_fit_folds=2).endswith(
        "no number of folds leaves every fit enough; fit a map on another labelled file "
        "(--fit FILE)"
    )


def test_auto_checks_the_folds_of_the_method_it_chose(tmp_path: Path) -> None:
    source = _labelled(tmp_path / "p12.csv", 12, 388)
    # the same seed chooses the same method on the same rows (the comparison's folds come first)
    fitted = run_recalibrate(
        RecalibrateRequest(fit=str(source), save_model=str(tmp_path / "m.json"))
    )
    assert fitted.choice is not None
    chosen = fitted.choice.chosen
    assert _refusal(source, cross_fit_folds=5) == (
        f"{source}: --cross-fit 5: fold 4's map would be fitted on the other 4 folds, which "
        f"hold 9 positive rows; {chosen}, which --method auto chose, needs at least 10 rows "
        f"of each class in every fit: use --cross-fit 6 ({ENOUGH})"
    )


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_core_counts_the_folds_it_draws(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    # weighted rows: the shortfall against sums over the folds _stratified_folds deals from
    # the same generator, and fewest_folds against cross_fit tried at every K in turn
    rng = np.random.default_rng(seed)
    y = np.r_[np.ones(30), np.zeros(200)]
    w = rng.uniform(0.5, 3.0, y.shape[0])
    scores = np.clip(rng.normal(0.3 + 0.3 * y, 0.15), 0.01, 0.99)
    needed = int(np.floor(w[y == 1].sum() * 0.72))  # beyond 3 folds' 2/3, within all but one
    folds = _stratified_folds(y, 3, np.random.default_rng(seed))
    rest = [w[(y == 1) & (folds != k)].sum() for k in range(3)]
    with pytest.raises(FoldSupportError) as error:
        cross_fit(
            "platt",
            scores,
            y,
            sample_weight=w,
            n_folds=3,
            rng=np.random.default_rng(seed),
            required_rows=needed,
        )
    short = error.value.shortfall
    assert short is not None
    assert (short.fold, short.label, short.needed) == (int(np.argmin(rest)) + 1, "positive", needed)
    assert short.rows == pytest.approx(min(rest), rel=1e-12)
    fewest = None
    for k in range(4, 31):
        try:
            cross_fit(
                "platt",
                scores,
                y,
                sample_weight=w,
                n_folds=k,
                rng=np.random.default_rng(seed),
                required_rows=needed,
            )
        except FoldSupportError:
            continue
        fewest = k
        break
    assert fewest is not None and short.fewest_folds == fewest

    def no_fit(*args: object, **kwargs: object) -> None:
        raise AssertionError("a fold was fitted before the check")

    monkeypatch.setattr(selection, "fit_calibrator", no_fit)
    with pytest.raises(FoldSupportError):
        cross_fit(
            "platt",
            scores,
            y,
            sample_weight=w,
            n_folds=3,
            rng=np.random.default_rng(seed),
            required_rows=needed,
        )
