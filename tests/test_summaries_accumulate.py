"""The ordered batch accumulation behind the streaming summary: the same keys as the
in-memory summary, and the same bytes on every run whatever the batches."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import calib_cli.summaries.scan as scan
from calib_cli.errors import InputError
from calib_cli.summaries import bin_index, cell_index, summarize_arrays
from calib_cli.summaries.accumulate import GridSums, term_batch
from calib_cli.summaries.scan import summarize_lazy, summarize_lazy_many
from calib_cli.summaries.summary import ScoreSummary

EDGE_SCORES = [
    0.0,
    -0.0,
    5e-324,
    1e-310,
    2.2250738585072014e-308,
    1e-300,
    1e-16,
    0.1,
    0.30000000000000004,
    float(np.nextafter(0.5, 0.0)),
    0.5,
    float(np.nextafter(0.5, 1.0)),
    0.75,
    1.0 - 1e-16,
    float(np.nextafter(1.0, 0.0)),
    1.0,
]

EXACT = ("group", "cell", "bin", "label", "n_rows", "n_rows_weighted", "weight")
MIN_MAX = ("weight_min", "score_min", "score_max")
SUMS = (
    "weight_sq",
    "score_sum",
    "score_sq_sum",
    "complement_sum",
    "complement_sq_sum",
    "log_loss_sum",
    "logit_sum",
    "spiegelhalter_num",
    "spiegelhalter_var",
)


def _scores(seed: int, n: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    p = np.concatenate(
        [
            EDGE_SCORES,
            1.0 / (1.0 + np.exp(-rng.normal(-3.0, 2.0, n))),
            rng.random(n // 20) ** 40,
            1.0 - rng.random(n // 20) ** 40,
            np.full(n // 10, 0.1),  # ties on a bin edge
        ]
    )
    return p[rng.permutation(p.size)]


def _frame(seed: int, n: int) -> pl.DataFrame:
    rng = np.random.default_rng(seed)
    p = _scores(seed, n)
    w = rng.choice([0.0, 0.5, 1.0, 3.0], p.size)
    return pl.DataFrame(
        {
            "score": p,
            "label": (rng.random(p.size) < p).astype(np.int8),
            "w": w,
            "day": rng.choice(["mon", "tue", None], p.size).tolist(),
        }
    )


def _assert_same(got: ScoreSummary, want: ScoreSummary) -> None:
    assert got.n_keys == want.n_keys
    assert got.metadata() == want.metadata()
    assert got.groups == want.groups
    for name in EXACT:
        assert np.array_equal(got.column(name), want.column(name)), name
    for name in MIN_MAX:
        assert np.array_equal(got.column(name), want.column(name), equal_nan=True), name
    scale = np.abs(want.weight) + 1e-300
    for name in SUMS:
        gap = np.abs(got.column(name) - want.column(name))
        assert np.all(gap <= 1e-12 * scale * 40), name  # log terms reach about 35 a row


@pytest.mark.parametrize("bits", [1, 7, 12, 30, 52])
@pytest.mark.parametrize(
    "edges",
    [
        np.linspace(0.0, 1.0, 11),
        np.linspace(0.0, 1.0, 101),  # searched, not compared
        np.array([0.0, 0.1, 0.30000000000000004, 0.5, 1.0]),
        np.array([0.0, 1.0]),
    ],
)
def test_keys_are_cell_plus_bin_bit_for_bit(bits: int, edges: np.ndarray) -> None:
    p = _scores(bits, 5_000)
    batch = term_batch(np.zeros(p.size), p, bin_edges=edges, mantissa_bits=bits, eps=1e-15)
    want = cell_index(p, mantissa_bits=bits) + bin_index(p, edges)
    assert np.array_equal(batch.key, want)


def test_cell_plus_bin_never_collides() -> None:
    """Distinct (cell, bin) pairs give distinct keys, even with bins finer than cells."""
    p = np.sort(_scores(3, 20_000))
    edges = np.concatenate(([0.0], np.sort(np.unique(p[(p > 0.0) & (p < 1.0)]))[::97], [1.0]))
    edges = np.unique(edges)
    cell = cell_index(p, mantissa_bits=4)
    bins = bin_index(p, edges)
    pairs = np.unique(np.stack((cell, bins)), axis=1)
    assert np.unique(pairs[0] + pairs[1]).size == pairs.shape[1]


@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("grouped", [False, True])
def test_streaming_summary_equals_the_in_memory_one(weighted: bool, grouped: bool) -> None:
    frame = _frame(1, 30_000)
    got = summarize_lazy(
        frame.lazy(),
        weight_column="w" if weighted else None,
        group_column="day" if grouped else None,
    )
    want = summarize_arrays(
        frame["label"].to_numpy(),
        frame["score"].to_numpy(),
        sample_weight=frame["w"].to_numpy() if weighted else None,
        groups=frame["day"].to_list() if grouped else None,
        weight_column="w" if weighted else None,
        group_column="day" if grouped else None,
    )
    _assert_same(got, want)


def test_the_bytes_do_not_depend_on_the_batches_and_repeat() -> None:
    frame = _frame(2, 10_000)
    options = {"weight_column": "w", "group_column": "day"}
    one = summarize_lazy_many(frame.lazy(), ["score"], batch_rows=1 << 20, **options)
    small = summarize_lazy_many(frame.lazy(), ["score"], batch_rows=997, **options)
    again = summarize_lazy_many(frame.lazy(), ["score"], batch_rows=997, **options)
    assert one["score"].to_json() == small["score"].to_json() == again["score"].to_json()


@pytest.mark.parametrize("weighted", [False, True])
def test_blocks_give_the_same_bytes_whatever_the_reading_chunks(
    weighted: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One group: each key adds a block's rows from zero, then the blocks in order; the
    blocks' bounds are fixed, so the reading chunks never change the bytes."""
    monkeypatch.setattr(scan, "BLOCK_ROWS", 1500)
    frame = _frame(5, 12_000)
    options: dict[str, Any] = {"weight_column": "w" if weighted else None}
    runs = [
        summarize_lazy_many(frame.lazy(), ["score"], batch_rows=rows, **options)["score"]
        for rows in (1 << 20, 997, 1500, 997)
    ]
    assert len({run.to_json() for run in runs}) == 1
    want = summarize_arrays(
        frame["label"].to_numpy(),
        frame["score"].to_numpy(),
        sample_weight=frame["w"].to_numpy() if weighted else None,
        weight_column="w" if weighted else None,
    )
    _assert_same(runs[0], want)


def _batches(frame: pl.DataFrame, rows: int, *, weighted: bool, sub_bits: int) -> list[Any]:
    return [
        term_batch(
            part["label"].to_numpy(),
            part["score"].to_numpy(),
            sample_weight=part["w"].to_numpy() if weighted else None,
            bin_edges=np.linspace(0.0, 1.0, 11),
            mantissa_bits=12,
            eps=1e-15,
            sub_bits=sub_bits,
        )
        for part in frame.iter_slices(rows)
    ]


# one in `make test`, two in `make test-slow` (2 s each)
@pytest.mark.parametrize(
    ("weighted", "sub_bits"),
    [
        (False, 0),
        pytest.param(False, 4, marks=pytest.mark.slow),
        pytest.param(True, 2, marks=pytest.mark.slow),
    ],
)
def test_sums_ahead_give_the_same_bytes_whatever_the_timing(weighted: bool, sub_bits: int) -> None:
    """A worker sums a batch ahead against the pages allocated so far; the rows of pages
    not yet allocated are summed when the batch is added. However far ahead (every page
    found, none, some), each key gets the same sums: the bytes never depend on the threads."""
    frame = _frame(9, 20_000)
    edges = np.linspace(0.0, 1.0, 11)
    metadata = scan._metadata(
        score_column="score",
        label_column="label",
        weight_column="w" if weighted else None,
        group_column=None,
        bin_edges=edges.tolist(),
        mantissa_bits=12,
        eps=1e-15,
    )

    def run(ahead: int | None) -> tuple[str, Any]:
        sums = GridSums(mantissa_bits=12, n_bins=10, weighted=weighted, sub_bits=sub_bits)
        batches = _batches(frame, 1_700, weighted=weighted, sub_bits=sub_bits)
        if ahead is None:  # the old way: every row added one by one
            for batch in batches:
                sums.add(batch)
        else:
            ready = [sums.sums_ahead(b) for b in batches[:ahead]]
            for i in range(len(batches)):
                if i + ahead < len(batches):
                    ready.append(sums.sums_ahead(batches[i + ahead]))
                sums.add(ready[i])
        sub = sums.sub_cells([None], edges)
        return sums.summary([None], metadata).to_json(), sub

    base, base_sub = run(0)
    for ahead in (1, 3, len(range(0, 20_000, 1_700)) + 5):
        got, sub = run(ahead)
        assert got == base, ahead
        if sub_bits:
            assert sub is not None and base_sub is not None
            for name in ("cell", "label", "n_rows", "weight", "weight_sq"):
                assert getattr(sub, name).tobytes() == getattr(base_sub, name).tobytes()
    rows, _ = run(None)  # added one by one: the same keys and counts, sums to rounding
    _assert_same(ScoreSummary.from_json(base), ScoreSummary.from_json(rows))


def test_a_file_summarised_twice_gives_the_same_bytes(tmp_path: Path) -> None:
    path = tmp_path / "rows.parquet"
    _frame(4, 20_000).write_parquet(path, row_group_size=7_000)
    first = summarize_lazy(pl.scan_parquet(path), weight_column="w", group_column="day")
    second = summarize_lazy(pl.scan_parquet(path), weight_column="w", group_column="day")
    assert first.to_json() == second.to_json()


@settings(max_examples=40, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.floats(0.0, 1.0, allow_nan=False),
            st.integers(0, 1),
            st.sampled_from([0.0, 0.25, 1.0, 2.0]),
            st.integers(0, 3),
        ),
        min_size=1,
        max_size=60,
    ),
    st.integers(1, 7),
)
def test_any_rows_in_any_batches_give_the_in_memory_keys(
    rows: list[tuple[float, int, float, int]], cut: int
) -> None:
    p = np.array([r[0] for r in rows])
    y = np.array([r[1] for r in rows], dtype=np.int8)
    w = np.array([r[2] for r in rows])
    g = np.array([r[3] for r in rows], dtype=np.int32)
    edges = np.linspace(0.0, 1.0, 6)
    sums = GridSums(mantissa_bits=12, n_bins=5, weighted=True, page_bits=4)
    for start in range(0, p.size, cut):
        part = slice(start, start + cut)
        sums.add(
            term_batch(
                y[part],
                p[part],
                sample_weight=w[part],
                bin_edges=edges,
                mantissa_bits=12,
                eps=1e-15,
                group=g[part],
            )
        )
    names = ["a", "b", "c", None]
    meta = summarize_arrays([0], [0.5], bin_edges=edges, weight_column="w").metadata()
    meta["group_column"] = "g"
    got = sums.summary(names, meta)
    want = summarize_arrays(
        y,
        p,
        sample_weight=w,
        groups=[names[i] for i in g],
        bin_edges=edges,
        weight_column="w",
        group_column="g",
    )
    _assert_same(got, want)


def test_bad_rows_are_refused_naming_the_column() -> None:
    with pytest.raises(InputError, match="column 'label' has values that are not 0 or 1"):
        summarize_lazy(pl.LazyFrame({"score": [0.1, 0.2], "label": [0, 2]}))
    with pytest.raises(InputError, match="column 'score' has values that are NaN"):
        summarize_lazy(pl.LazyFrame({"score": [0.1, float("nan")], "label": [0, 1]}))
    with pytest.raises(InputError, match="column 'label' has missing values"):
        summarize_lazy(pl.LazyFrame({"score": [0.1, 0.2], "label": [0, None]}))
    with pytest.raises(InputError, match="weights"):
        GridSums(mantissa_bits=12, n_bins=1, weighted=True).add(
            term_batch([0], [0.5], bin_edges=[0.0, 1.0], mantissa_bits=12, eps=1e-15)
        )


def _grouped_sums(frame: pl.DataFrame, codes: np.ndarray, **options: Any) -> ScoreSummary:
    edges = np.linspace(0.0, 1.0, 11)
    sums = GridSums(mantissa_bits=12, n_bins=10, weighted=True, **options)
    for start in range(0, frame.height, 1_000):
        part = frame.slice(start, 1_000)
        sums.add(
            term_batch(
                part["label"].to_numpy(),
                part["score"].to_numpy(),
                sample_weight=part["w"].to_numpy(),
                bin_edges=edges,
                mantissa_bits=12,
                eps=1e-15,
                group=codes[start : start + 1_000],
            )
        )
    meta = summarize_arrays([0], [0.5], weight_column="w").metadata()
    meta["group_column"] = "many"
    return sums.summary([str(i) for i in range(200)], meta)


def test_many_groups_search_their_pages_and_give_the_same_bytes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Pages found in a table, in a search of the pages seen (past TABLE_ENTRIES table
    entries, or asked for), or one page per key: the same summary."""
    import calib_cli.summaries.accumulate as accumulate

    rng = np.random.default_rng(6)
    frame = _frame(6, 3_000)
    codes = rng.integers(0, 200, frame.height).astype(np.int32)
    tabled = _grouped_sums(frame, codes)
    searched = _grouped_sums(frame, codes, search=True)
    per_key = _grouped_sums(frame, codes, search=True, page_bits=0)
    monkeypatch.setattr(accumulate, "TABLE_ENTRIES", 1)
    switched = _grouped_sums(frame, codes)
    assert len(tabled.groups) == 200
    assert tabled.to_json() == searched.to_json() == per_key.to_json() == switched.to_json()
    want = summarize_arrays(
        frame["label"].to_numpy(),
        frame["score"].to_numpy(),
        sample_weight=frame["w"].to_numpy(),
        groups=[str(i) for i in codes],
        weight_column="w",
        group_column="many",
    )
    _assert_same(tabled, want)


@settings(max_examples=60, deadline=None)
@given(
    scores=st.lists(
        st.sampled_from([0.0, 1e-300, 0.25, 0.4999999999999999, 0.5, 0.5000000000000001, 0.75, 1.0])
        | st.floats(0.0, 1.0),
        min_size=1,
        max_size=60,
    ),
    seed=st.integers(0, 1000),
)
def test_spiegelhalter_numerator_from_the_keys_sums_holds_its_bound(
    scores: list[float], seed: int
) -> None:
    """The streaming summary derives each key's sum w (y - p)(1 - 2p) from its weight and its
    sums of x and x^2 (format_columns): within 4 eps W of the rows' terms added one by one."""
    rng = np.random.default_rng(seed)
    p = np.array(scores)
    y = rng.integers(0, 2, p.size)
    w = rng.choice([0.1, 1.0, 3.0, 1e6], p.size)
    frame = pl.DataFrame({"score": p, "label": y, "w": w})
    got = summarize_lazy(frame.lazy(), weight_column="w")
    cells = cell_index(p, mantissa_bits=12)
    bins = bin_index(p, np.linspace(0.0, 1.0, 11))
    for k in range(got.n_keys):
        rows = (cells == got.cell[k]) & (bins == got.bin[k]) & (y == got.label[k])
        terms = w[rows] * (y[rows] - p[rows]) * (1.0 - 2.0 * p[rows])
        exact = math.fsum(terms)
        bound = 4.0 * np.finfo(float).eps * got.weight[k] + 1e-15 * math.fsum(np.abs(terms))
        assert abs(got.spiegelhalter_num[k] - exact) <= bound


@pytest.mark.parametrize("weighted", [False, True])
def test_sub_cells_counted_ahead_in_several_threads_are_the_same_bytes(weighted: bool) -> None:
    """Worker threads count the found rows' sub-cells in their own int32 arrays, handed over
    at the end: with each batch summed ahead in a different thread, in any order of threads,
    the sub-cells and the summary are those of every batch added on one thread."""
    from concurrent.futures import ThreadPoolExecutor

    rng = np.random.default_rng(21)
    p = rng.beta(0.7, 3.0, 30_000)  # real scores: a few dozen pages
    frame = pl.DataFrame(
        {
            "score": p,
            "label": (rng.random(p.size) < p).astype(np.int8),
            "w": rng.choice([0.0, 0.5, 1.0, 3.0], p.size),
        }
    )
    edges = np.linspace(0.0, 1.0, 11)

    def run(threads: int) -> tuple[Any, Any]:
        sums = GridSums(
            mantissa_bits=12, n_bins=10, weighted=weighted, sub_bits=4, counting_threads=threads
        )
        batches = _batches(frame, 2_300, weighted=weighted, sub_bits=4)
        if not threads:
            for batch in batches:
                sums.add(batch)
        else:
            with ThreadPoolExecutor(max_workers=threads) as pool:
                for i in range(0, len(batches), 4):  # four ahead at a time, then added
                    ready = list(pool.map(sums.sums_ahead, batches[i : i + 4]))
                    assert all(b.block is not None and b.block.sub_counted for b in ready)
                    for batch in ready:
                        sums.add(batch)
            assert len(sums._sub_counts) > 1  # several threads counted
        sub = sums.sub_cells([None], edges)
        columns = sums.columns([None], edges, eps=1e-15)
        return sub, columns

    plain_sub, plain = run(0)
    sub, columns = run(3)
    assert sub is not None and plain_sub is not None and sub.n_keys > 100
    for name in ("cell", "bin", "label", "n_rows", "weight_sums", "square_sums"):
        a, b = getattr(sub, name), getattr(plain_sub, name)
        assert (a is None and b is None) or np.asarray(a).tobytes() == np.asarray(b).tobytes()
    for name in ("cell", "label", "n_rows", "n_rows_weighted"):
        assert np.asarray(columns[name]).tobytes() == np.asarray(plain[name]).tobytes(), name


def test_rows_counted_ahead_stay_counted_when_the_sub_cells_are_given_up(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Batches whose sub-cells were counted ahead, then the sub-cells given up (their pages
    pass the memory cap) before those batches are added: every row is counted once."""
    import calib_cli.summaries.accumulate as accumulate

    rng = np.random.default_rng(5)
    narrow = 0.3 + 1e-3 * rng.random(4000)  # the first batches: one page
    first = pl.DataFrame({"score": narrow, "label": (rng.random(4000) < 0.3).astype(np.int8)})
    frame = pl.concat([first, _frame(6, 20_000).select("score", "label")])
    batches = _batches(frame, 1_000, weighted=False, sub_bits=4)
    plain = GridSums(mantissa_bits=12, n_bins=10, weighted=False)
    for batch in _batches(frame, 1_000, weighted=False, sub_bits=0):
        plain.add(batch)
    monkeypatch.setattr(accumulate, "SUB_MAX_BYTES", 600_000)  # four pages, not eight
    sums = GridSums(mantissa_bits=12, n_bins=10, weighted=False, sub_bits=4, counting_threads=3)
    sums.add(sums.sums_ahead(batches[0]))  # the first page allocated
    ahead = [sums.sums_ahead(b) for b in batches[1:]]  # all counted ahead, against one page
    assert ahead[0].block is not None and ahead[0].block.sub_counted
    for batch in ahead:  # the new pages pass the cap: given up midway
        sums.add(batch)
    assert sums.sub_dropped and sums.sub_cells([None], np.linspace(0, 1, 11)) is None
    edges = np.linspace(0.0, 1.0, 11)
    got, want = sums.columns([None], edges, eps=1e-15), plain.columns([None], edges, eps=1e-15)
    for name in ("cell", "label", "n_rows", "score_min", "score_max"):
        assert np.asarray(got[name]).tobytes() == np.asarray(want[name]).tobytes(), name
    assert int(np.sum(got["n_rows"])) == frame.height


def test_threads_stop_counting_ahead_when_their_counts_would_pass_the_cap(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Scores over many binades: with every thread's counts the sub-cells would pass the
    memory cap, without them not. The threads hand their counts over and stop; the
    sub-cells stay, the same bytes as counted on one thread."""
    import calib_cli.summaries.accumulate as accumulate

    frame = _frame(21, 30_000)
    edges = np.linspace(0.0, 1.0, 11)
    batches = _batches(frame, 2_300, weighted=False, sub_bits=4)
    plain = GridSums(mantissa_bits=12, n_bins=10, weighted=False, sub_bits=4)
    for batch in batches:
        plain.add(batch)
    need = plain.capacity * plain.slots_per_page * (4 << 4)  # one thread's int32 counts
    monkeypatch.setattr(accumulate, "SUB_MAX_BYTES", 2 * need)
    sums = GridSums(mantissa_bits=12, n_bins=10, weighted=False, sub_bits=4, counting_threads=3)
    ready = [sums.sums_ahead(b) for b in batches[:3]]
    assert all(b.block is not None and b.block.sub_counted for b in ready)
    for i in range(len(batches)):
        if i + 3 < len(batches):
            ready.append(sums.sums_ahead(batches[i + 3]))
        sums.add(ready[i])
    assert not sums.count_ahead and not sums.sub_dropped
    assert not ready[-1].block.sub_counted  # type: ignore[union-attr]
    got, want = sums.sub_cells([None], edges), plain.sub_cells([None], edges)
    assert got is not None and want is not None
    for name in ("cell", "label", "n_rows"):
        assert getattr(got, name).tobytes() == getattr(want, name).tobytes(), name


@pytest.mark.parametrize(
    ("label", "score", "bad"),
    [
        ([0, 1, 1], [0.0, 0.5, 1.0], None),
        ([0, -1], [0.1, 0.2], "label"),  # -1 seen as uint8 is 255
        ([0, 2], [0.1, 0.2], "label"),
        ([0, 1], [-0.1, 0.2], "score"),
        ([0, 1], [0.1, 1.5], "score"),
        ([0, 1], [0.1, float("nan")], "score"),
        ([], [], None),
    ],
)
def test_batch_checks_agree_with_their_definition(
    label: list[int], score: list[float], bad: str | None
) -> None:
    """The checks (one reduction each) refuse exactly what the definition does: labels other
    than 0 and 1, scores NaN or outside [0, 1]."""
    from calib_cli.summaries.accumulate import TermBatch, check_batch_values

    y, p = np.array(label, dtype=np.int8), np.array(score, dtype=np.float64)
    want = (
        "label"
        if np.any((y != 0) & (y != 1))
        else "score"
        if not np.all((p >= 0.0) & (p <= 1.0))
        else None
    )
    assert want == bad
    batch = TermBatch(key=np.zeros(y.size, np.int64), label=y, score=p, terms={})
    if bad is None:
        check_batch_values(batch, score_column="s", label_column="y")
    else:
        with pytest.raises(InputError, match=f"column '{'y' if bad == 'label' else 's'}'"):
            check_batch_values(batch, score_column="s", label_column="y")


@pytest.mark.parametrize("eps", [1e-15, 1e-3, 0.25])
def test_the_logarithms_are_those_of_the_clipped_score(eps: float) -> None:
    """``clipped_logs`` (the rows' own logarithms in a summary: of ``x = min(q, 1 - q)``)
    gives ``log q`` and ``log(1 - q)`` of ``q = clip(p, eps, 1 - eps)``, within 2 units in the
    last place of :func:`~calib_cli.core.elementary.log` and ``log1p`` on ``q`` itself, the
    clipped ends included (``1 - (1 - eps)`` above 1/2); the sides swap above 1/2."""
    from calib_cli.core import elementary as el
    from calib_cli.summaries.summary import clipped_logs

    rng = np.random.default_rng(21)
    p = np.concatenate(
        [np.array(EDGE_SCORES), rng.uniform(0.0, 1.0, 3000), 10 ** -rng.uniform(0, 18, 500)]
    )
    p = np.concatenate([p, 1.0 - p[-500:]])
    near, far = clipped_logs(p, np.minimum(p, 1.0 - p), eps)
    q = np.clip(p, eps, 1.0 - eps)
    low = p <= 0.5
    log_q, log_1mq = np.where(low, near, far), np.where(low, far, near)
    for got, want in ((log_q, el.log(q)), (log_1mq, el.log1p(-q))):
        assert np.all(np.abs(got - want) <= 2.0 * np.spacing(np.abs(want)))


def test_an_eps_too_small_for_one_minus_eps_is_refused_by_every_path() -> None:
    """Below about 1.1e-16, ``1 - eps`` rounds to 1 and a score of 1 would have an infinite
    log loss: the in-memory summary stored it, the streaming one refused the sum. Both, and
    the SQL summary, now refuse the eps itself, saying why."""
    from calib_cli.sql.summary import SummaryQuery, summary_sql

    rows = pl.DataFrame({"score": [1.0, 0.0, 0.3], "label": [0, 1, 1]})
    message = "1 - eps is below 1"
    with pytest.raises(InputError, match=message):
        summarize_arrays(rows["label"].to_numpy(), rows["score"].to_numpy(), eps=1e-17)
    with pytest.raises(InputError, match=message):
        summarize_lazy(rows.lazy(), eps=1e-17)
    with pytest.raises(InputError, match=message):
        summary_sql(SummaryQuery(table="t", eps=1e-17), dialect_name="duckdb")
    assert np.isfinite(summarize_arrays([0, 1], [1.0, 0.0], eps=2.0**-52).log_loss_sum).all()


def _exact_log_sums(
    p: np.ndarray, y: np.ndarray, w: np.ndarray, bits: int, eps: float
) -> pl.DataFrame:
    """Per key (cell, bin, label): math.fsum of each row's weighted log loss and logit terms
    (logarithms by elementary, within 2 units each), and the sums of their magnitudes."""
    from calib_cli.core import elementary as el

    q = np.clip(p, eps, 1.0 - eps)
    log_q, log_1mq = el.log(q), el.log1p(-q)
    frame = pl.DataFrame(
        {
            "cell": cell_index(p, mantissa_bits=bits),
            "bin": bin_index(p, np.linspace(0.0, 1.0, 11)),
            "label": y.astype(np.int8),
            "loss": w * np.where(y == 1, -log_q, -log_1mq),
            "logit": w * (log_q - log_1mq),
            "size": w * (np.abs(log_q) + np.abs(log_1mq)),
        }
    )
    keys = frame.group_by(["cell", "bin", "label"]).agg("loss", "logit", pl.col("size").sum())
    keys = keys.sort(["cell", "bin", "label"])
    return keys.with_columns(
        pl.Series("loss", [math.fsum(v) for v in keys["loss"].to_list()]),
        pl.Series("logit", [math.fsum(v) for v in keys["logit"].to_list()]),
    )


@pytest.mark.parametrize("bits", [8, 11, 12, 20])
@pytest.mark.parametrize("eps", [1e-15, 1e-3])
@pytest.mark.parametrize("weighted", [False, True])
def test_log_sums_from_moments_against_exact_sums(bits: int, eps: float, weighted: bool) -> None:
    """The streaming summary's log-loss and logit sums (from each key's moments about its
    cell's lower edge, or, below the clipping floor and on grids under 11 bits, from the rows'
    own logarithms) against exact per-key sums of the rows' logarithms: within 2e-15 of the
    sum of the terms' magnitudes where the moments serve (the series' truncation is below
    2**-55), within 1e-13 elsewhere (thousands of equal rows' logarithms, added in turn)."""
    from calib_cli.summaries.accumulate import MOMENT_MIN_BITS
    from calib_cli.summaries.grid import cell_floors
    from calib_cli.summaries.summary import clip_edge

    rng = np.random.default_rng(31)
    n = 20_000
    p = np.concatenate(
        [
            rng.random(n),
            10.0 ** -rng.uniform(0.0, 17.0, n // 4),
            1.0 - 10.0 ** -rng.uniform(0.0, 17.0, n // 4),
            np.full(4000, 0.123456789),
            np.full(1000, 0.5),
            0.3 + 1e-4 * rng.random(4000),
            [0.0, 1.0, 1e-16, 1.0 - 1e-16, np.nextafter(0.5, 0.0), np.nextafter(0.5, 1.0)],
        ]
    )
    p = np.clip(p, 0.0, 1.0)
    y = (rng.random(p.size) < p).astype(np.int64)
    w = rng.exponential(1.0, p.size) if weighted else np.ones(p.size)
    if weighted:
        w[::17] = 0.0
    rows = pl.DataFrame({"score": p, "label": y, "w": w}).lazy()
    got = summarize_lazy(rows, mantissa_bits=bits, eps=eps, weight_column="w" if weighted else None)
    want = _exact_log_sums(p, y, w, bits, eps)
    assert np.array_equal(got.cell, want["cell"].to_numpy())
    size = np.maximum(want["size"].to_numpy(), 1e-300)
    moments = (cell_floors(got.cell, mantissa_bits=bits) >= clip_edge(eps)) & (
        bits >= MOMENT_MIN_BITS
    )
    assert moments.any() == (bits >= MOMENT_MIN_BITS)
    for column, exact in (("log_loss_sum", "loss"), ("logit_sum", "logit")):
        error = np.abs(getattr(got, column) - want[exact].to_numpy()) / size
        assert np.max(error[moments], initial=0.0) <= 2e-15, column
        assert np.max(error) <= 1e-13, column


def test_every_term_of_the_series_counts_at_the_top_of_11_bit_cells() -> None:
    """One row a key, each at the very top of its 11-bit cell (``(x - c) / c`` just below
    2**-11, where the fourth terms are about 2**-46 of the sums), from 1e-12 to 1/2 and on
    both tails: each key's log sums within 4 units of the exact logarithms (40-digit
    ``decimal``). Leaving out any of the eight terms of ``log_sums`` breaks this."""
    from decimal import Decimal, localcontext

    bits = 11
    steps = np.arange(1, 2049, 97)[None, :]  # the next cell edge, 2**e (1 + k / 2**11)
    x = np.nextafter(np.ldexp(1.0 + steps / 2.0**bits, np.arange(-40, -1, 2)[:, None]), 0.0)
    x = x.ravel()
    x = x[(x > 1e-12) & (x < 0.5)]
    p = np.concatenate([x, 1.0 - x[x > 2.0**-20]])  # upper tail where 1 - x is exact enough
    p = p[np.minimum(p, 1.0 - p) > 1e-12]
    y = np.zeros(p.size, dtype=np.int64)
    got = summarize_lazy(pl.DataFrame({"score": p, "label": y}).lazy(), mantissa_bits=bits)
    assert got.n_keys == p.size  # one row a key
    order = np.argsort(cell_index(p, mantissa_bits=bits), kind="stable")
    with localcontext() as context:
        context.prec = 40
        for key, row in enumerate(order):
            q = Decimal(float(p[row]))
            exact_loss = -(1 - q).ln()  # label 0
            exact_logit = q.ln() - (1 - q).ln()
            loss, logit = got.log_loss_sum[key], got.logit_sum[key]
            assert abs(Decimal(float(loss)) - exact_loss) <= 4 * Decimal(np.spacing(loss)), p[row]
            size = abs(q.ln()) + abs((1 - q).ln())
            assert abs(Decimal(float(logit)) - exact_logit) <= 4 * Decimal(np.spacing(float(size)))
