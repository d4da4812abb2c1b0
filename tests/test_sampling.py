"""The calib-hash64-v2 sampling rule: test vectors, an independent implementation, statistics."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from calib_cli.core.sampling import (
    HASH_SPEC,
    UINT64_MAX,
    ClassRates,
    hash_keys,
    hash_row_numbers,
    hash_string_keys,
    hash_uint64_keys,
    integer_of_text,
    inverse_rate_weights,
    keep_mask,
    parse_target_ratio,
    rate_threshold,
    resolve_negative_rate,
    resolve_stratum_rates,
    row_thresholds,
    string_buffers,
)
from calib_cli.errors import InputError, UsageError

# --------------------------------------------------------------------------------------------
# An independent, pure-Python implementation of the spec (Python ints, no NumPy)
# --------------------------------------------------------------------------------------------

MOD = 2**64


def ref_mix64(x: int) -> int:
    z = (x + 0x9E3779B97F4A7C15) % MOD
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) % MOD
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) % MOD
    return z ^ (z >> 31)


def ref_fnv1a64(data: bytes) -> int:
    h = 0xCBF29CE484222325
    for byte in data:
        h = ((h ^ byte) * 0x100000001B3) % MOD
    return h


def ref_hash_int(key: int, seed: int) -> int:
    return ref_mix64((key % MOD) ^ ref_mix64(seed))


def ref_hash_str(key: str, seed: int) -> int:
    return ref_mix64(ref_fnv1a64(key.encode("utf-8")) ^ ref_mix64(seed))


def ref_integer_of_text(text: str) -> int | None:
    """The spec's "integer's text", stated another way: the text Python writes for the
    integer it parses to is the text itself (so no sign but '-', no leading zero, no spaces,
    underscores or other digits), and the integer is a signed or unsigned 64-bit one."""
    try:
        value = int(text, 10)
    except ValueError:
        return None
    if str(value) != text or not -(2**63) <= value < 2**64:
        return None
    return value


def ref_hash_key(key: int | str, seed: int) -> int:
    """hash64 of one key by the spec: integers and integers' texts as integers (mod 2**64),
    any other text by FNV-1a of its UTF-8 bytes. The key alone decides."""
    if isinstance(key, str):
        value = ref_integer_of_text(key)
        if value is None:
            return ref_hash_str(key, seed)
        key = value
    return ref_hash_int(key, seed)


def ref_keep(hash_value: int, rate: float) -> bool:
    return rate == 1.0 or Fraction(hash_value) < Fraction(rate) * MOD


def arrow_buffers(keys: list[str]) -> tuple[np.ndarray, np.ndarray]:
    encoded = [k.encode("utf-8") for k in keys]
    offsets = np.concatenate([[0], np.cumsum([len(e) for e in encoded])]).astype(np.int64)
    return offsets, np.frombuffer(b"".join(encoded), dtype=np.uint8)


# --------------------------------------------------------------------------------------------
# Published reference values and the documented test vectors
# --------------------------------------------------------------------------------------------


def test_reference_implementation_matches_published_values() -> None:
    # SplitMix64 seeded with 0 (Vigna's splitmix64.c): its outputs are mix64(i * golden).
    golden = 0x9E3779B97F4A7C15
    assert [ref_mix64(i * golden % MOD) for i in range(3)] == [
        0xE220A8397B1DCDAF,
        0x6E789E6AA1B965F4,
        0x06C45D188009454F,
    ]
    # FNV-1a 64 test vectors from the FNV reference test suite.
    assert ref_fnv1a64(b"") == 0xCBF29CE484222325
    assert ref_fnv1a64(b"a") == 0xAF63DC4C8601EC8C
    assert ref_fnv1a64(b"foobar") == 0x85944171F73967E8


INTEGER_VECTORS = [
    (0, 0, 12035550249420947055),
    (0, 1, 627405149472732430),
    (0, 2, 15549969042648332857),
    (0, -1, 3303439293501059696),
    (0, 2**63 - 1, 14389535693014737104),
    (42, 0, 6332618229526065668),
    (42, 1, 17532488217563185893),
    (42, -1, 14714397866638982195),
    (42, 1234567890123, 17925585971602962171),
]
STRING_VECTORS = [
    (0, "", 6566800829925814604),
    (0, "a", 6223453292557176174),
    (0, "user-17", 6254185618136437278),
    (0, "é", 10342779598314088178),
    (0, "123", 5348934943373800035),
    (42, "", 16429173747930903682),
    (42, "a", 6586899981409005653),
    (42, "user-17", 15274671837007789239),
    (42, "é", 12268101949040064450),
    (42, "123", 3397756804375207957),
]


@pytest.mark.parametrize(("seed", "key", "expected"), INTEGER_VECTORS)
def test_integer_vectors(seed: int, key: int, expected: int) -> None:
    assert ref_hash_int(key, seed) == expected
    assert hash_uint64_keys(np.array([key], dtype=np.int64), seed=seed).tolist() == [expected]


@pytest.mark.parametrize(("seed", "key", "expected"), STRING_VECTORS)
def test_string_vectors(seed: int, key: str, expected: int) -> None:
    assert ref_hash_str(key, seed) == expected
    offsets, data = arrow_buffers([key])
    assert hash_string_keys(offsets, data, seed=seed).tolist() == [expected]


#: hash64 of keys by the whole key rule (v2): an integer's text is that integer, any other
#: text is hashed by FNV-1a, whatever else the column holds.
KEY_VECTORS = [
    (0, 7, 7259628554680249319),
    (0, "7", 7259628554680249319),  # the integer's text: the integer
    (0, "007", 14999919752740809301),  # not an integer's text: FNV-1a of "007"
    (0, " 7", 15104674414541228596),
    (0, "+7", 12381207086716662668),
    (0, "-0", 6668785520911860738),
    (0, "7.0", 7563116138216980594),
    (0, "-1", 3303439293501059696),
    (0, "18446744073709551615", 3303439293501059696),  # 2**64 - 1: the bits of -1
    (42, "123", 2903658299465811674),
    (42, 123, 2903658299465811674),
    (0, "user-17", 6254185618136437278),
    (0, "", 6566800829925814604),
    (42, "é", 12268101949040064450),
]


@pytest.mark.parametrize(("seed", "key", "expected"), KEY_VECTORS)
def test_key_vectors(seed: int, key: int | str, expected: int) -> None:
    assert ref_hash_key(key, seed) == expected
    assert hash_keys([key], seed=seed).tolist() == [expected]


def test_docstring_lists_the_vectors() -> None:
    import calib_cli.core.sampling as module

    doc = module.__doc__ or ""
    for value in [
        12035550249420947055,
        17925585971602962171,
        7259628554680249319,
        2903658299465811674,
        14999919752740809301,
        15104674414541228596,
        12268101949040064450,
    ]:
        assert f"{value}" in doc
    for constant in ["0x9E3779B97F4A7C15", "0xBF58476D1CE4E5B9", "0x94D049BB133111EB"]:
        assert constant in doc
    assert "0xCBF29CE484222325" in doc
    assert HASH_SPEC == "calib-hash64-v2"
    assert HASH_SPEC in doc


#: Texts around the edges of "an integer's text".
EDGE_TEXTS = [
    "0", "-0", "00", "7", "07", "-7", "+7", " 7", "7 ", "7.0", "1e3", "7_0", "٧", "0x7",
    str(2**63 - 1), str(2**63), str(-(2**63)), str(-(2**63) - 1), str(2**64 - 1), str(2**64),
    "", "-", "x7", "7x",
]  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(
    text=st.one_of(
        st.sampled_from(EDGE_TEXTS),
        st.integers(-(2**65), 2**65).map(str),
        st.from_regex(r"[-+ 0]{0,2}[0-9]{1,21}[ .]?", fullmatch=True),
        st.text(max_size=6),
    )
)
def test_integer_of_text_is_the_specification(text: str) -> None:
    assert integer_of_text(text) == ref_integer_of_text(text)


@settings(max_examples=100, deadline=None)
@given(
    keys=st.lists(
        st.one_of(
            st.integers(-(2**63), 2**64 - 1),
            st.integers(-(2**63), 2**64 - 1).map(str),
            st.sampled_from(EDGE_TEXTS),
            st.text(max_size=8),
        ),
        max_size=30,
    ),
    seed=st.integers(0, 2**64 - 1),
)
def test_each_key_hashes_on_its_own(keys: list[int | str], seed: int) -> None:
    """hash_keys is the spec key by key: a key's hash does not depend on the other keys
    (one text id among integers changes no integer's hash), and 7 and "7" are one key."""
    got = hash_keys(keys, seed=seed).tolist()
    assert got == [ref_hash_key(k, seed) for k in keys]
    assert got == [hash_keys([k], seed=seed)[0] for k in keys]


def test_keys_that_are_no_integer_or_text_are_refused() -> None:
    for bad in (1.5, True, None, 2**64, -(2**63) - 1):
        with pytest.raises(InputError, match="key"):
            hash_keys([bad], seed=0)  # type: ignore[list-item]


# --------------------------------------------------------------------------------------------
# Vectorised hashing against the reference
# --------------------------------------------------------------------------------------------


def test_integer_hash_matches_reference_on_random_keys() -> None:
    rng = np.random.default_rng(0)
    keys = np.concatenate(
        [
            rng.integers(-(2**63), 2**63 - 1, size=300, dtype=np.int64),
            np.array([-(2**63), -1, 0, 1, 2**63 - 1], dtype=np.int64),
        ]
    )
    for seed in [0, 1, 42, 2**64 - 1]:
        got = hash_uint64_keys(keys, seed=seed).tolist()
        assert got == [ref_hash_int(int(k), seed) for k in keys]


def test_unsigned_keys_above_int64_range() -> None:
    keys = np.array([2**63, 2**64 - 1], dtype=np.uint64)
    assert hash_uint64_keys(keys, seed=7).tolist() == [
        ref_hash_int(2**63, 7),
        ref_hash_int(2**64 - 1, 7),
    ]
    # 2**64 - 1 as uint64 and -1 as int64 are the same 64 bits.
    assert hash_uint64_keys(keys[1:], seed=7).tolist() == hash_uint64_keys([-1], seed=7).tolist()


def test_integer_widths_hash_alike() -> None:
    values = [-5, 0, 3, 100, 127]
    expected = hash_uint64_keys(np.array(values, dtype=np.int64), seed=3)
    for dtype in [np.int8, np.int16, np.int32]:
        got = hash_uint64_keys(np.array(values, dtype=dtype), seed=3)
        assert np.array_equal(got, expected)
    assert np.array_equal(
        hash_uint64_keys(np.array([0, 3, 255], dtype=np.uint8), seed=3),
        hash_uint64_keys(np.array([0, 3, 255], dtype=np.int64), seed=3),
    )


def test_row_numbers_are_zero_based_and_chunkable() -> None:
    whole = hash_row_numbers(1000, seed=9)
    assert np.array_equal(whole, hash_uint64_keys(np.arange(1000), seed=9))
    chunks = np.concatenate(
        [hash_row_numbers(300, seed=9), hash_row_numbers(700, seed=9, start=300)]
    )
    assert np.array_equal(chunks, whole)
    assert hash_row_numbers(0, seed=9).size == 0


@settings(max_examples=100, deadline=None)
@given(keys=st.lists(st.text(max_size=12), max_size=30), seed=st.integers(0, 2**64 - 1))
def test_string_hash_matches_reference(keys: list[str], seed: int) -> None:
    offsets, data = arrow_buffers(keys)
    got = hash_string_keys(offsets, data, seed=seed).tolist()
    assert got == [ref_hash_str(k, seed) for k in keys]


@settings(max_examples=100, deadline=None)
@given(
    keys=st.lists(
        st.text(
            alphabet=st.characters(codec="utf-8", exclude_characters="\x00"),
            max_size=12,
        )
    )
)
def test_string_buffers_match_arrow_layout(keys: list[str]) -> None:
    offsets, data = string_buffers(np.array(keys, dtype=str))
    expected_offsets, expected_data = arrow_buffers(keys)
    assert offsets.tolist() == expected_offsets.tolist()
    assert bytes(data) == bytes(expected_data)


def test_string_hash_accepts_int32_offsets_and_bytes() -> None:
    keys = ["a", "bb", "", "ccc"]
    offsets, data = arrow_buffers(keys)
    expected = [ref_hash_str(k, 5) for k in keys]
    assert hash_string_keys(offsets.astype(np.int32), bytes(data), seed=5).tolist() == expected
    # A slice of a larger buffer (Arrow arrays with a non-zero first offset).
    padded = np.concatenate([np.frombuffer(b"xyz", dtype=np.uint8), data])
    assert hash_string_keys(offsets + 3, padded, seed=5).tolist() == expected


def test_string_buffers_from_object_arrays() -> None:
    offsets, data = string_buffers(np.array(["é", "user-17"], dtype=object))
    assert hash_string_keys(offsets, data, seed=42).tolist() == [
        12268101949040064450,
        15274671837007789239,
    ]
    with pytest.raises(InputError, match=r"missing values: 1 \(first at row 2\)"):
        string_buffers(np.array(["a", None], dtype=object))
    with pytest.raises(InputError, match="not valid Unicode"):
        string_buffers(np.array(["a", "\ud800"]))


def test_inputs_not_mutated() -> None:
    keys = np.arange(10, dtype=np.int64)
    unsigned = np.arange(10, dtype=np.uint64)
    offsets, data = arrow_buffers(["ab", "c"])
    before = (keys.copy(), unsigned.copy(), offsets.copy(), data.copy())
    hash_uint64_keys(keys, seed=1)
    hash_uint64_keys(unsigned, seed=1)
    hash_string_keys(offsets, data, seed=1)
    for now, then in zip((keys, unsigned, offsets, data), before, strict=True):
        assert np.array_equal(now, then)


@pytest.mark.parametrize(
    ("keys", "needle"),
    [
        (np.array([1.0, 2.0]), "floating-point values; use an integer or string key"),
        (np.array([True, False]), "boolean; use an integer or string key"),
        (np.array(["a", "b"]), "use an integer or string key"),
        (np.zeros((2, 2), dtype=np.int64), "one-dimensional"),
    ],
)
def test_bad_keys_refused(keys: np.ndarray, needle: str) -> None:
    with pytest.raises(InputError) as info:
        hash_uint64_keys(keys, seed=0)
    assert needle in str(info.value)


@pytest.mark.parametrize("seed", [-1, 2**64, 1.5, "7"])
def test_bad_seeds_refused(seed: object) -> None:
    with pytest.raises(InputError, match="--seed"):
        hash_uint64_keys([1], seed=seed)  # type: ignore[arg-type]


def test_bad_string_buffers_refused() -> None:
    with pytest.raises(InputError, match="non-decreasing"):
        hash_string_keys([0, 3, 2], b"abc", seed=0)
    with pytest.raises(InputError, match="inside the data buffer"):
        hash_string_keys([0, 4], b"abc", seed=0)
    with pytest.raises(InputError, match="uint8"):
        hash_string_keys([0, 1], np.array([1.0]), seed=0)


# --------------------------------------------------------------------------------------------
# Threshold arithmetic and the keep rule
# --------------------------------------------------------------------------------------------


def test_threshold_arithmetic() -> None:
    assert rate_threshold(0.0) == 0
    assert rate_threshold(1.0) == 2**64 - 1
    assert rate_threshold(0.5) == 2**63
    assert rate_threshold(1e-12) == math.floor(Fraction(1e-12) * 2**64) == 18446744
    assert rate_threshold(0.1) == math.floor(Fraction(0.1) * 2**64)
    assert rate_threshold(1.0 - 2**-53) == 2**64 - 2**11  # the largest rate below 1
    assert rate_threshold(5e-324) == 0  # the smallest positive double keeps nothing


@pytest.mark.parametrize("rate", [-0.1, 1.0000000000000002, math.nan, math.inf])
def test_bad_rates_refused(rate: float) -> None:
    with pytest.raises(InputError, match="sampling rate must be in"):
        rate_threshold(rate)


def test_keep_rule_at_the_boundary() -> None:
    t = rate_threshold(0.5)
    hashes = np.array([0, t - 1, t, t + 1, UINT64_MAX], dtype=np.uint64)
    assert keep_mask(hashes, t).tolist() == [True, True, False, False, False]
    assert keep_mask(hashes, rate_threshold(1.0)).all()  # rate 1 keeps every row
    assert not keep_mask(hashes, rate_threshold(0.0)).any()  # rate 0 keeps none
    per_row = np.array([0, t, t, UINT64_MAX, UINT64_MAX], dtype=np.uint64)
    assert keep_mask(hashes, per_row).tolist() == [False, True, False, True, True]


def test_keep_rule_matches_reference() -> None:
    hashes = hash_row_numbers(2000, seed=11)
    for rate in [0.0, 1e-3, 0.1, 0.5, 0.9, 1.0]:
        expected = [ref_keep(int(h), rate) for h in hashes]
        assert keep_mask(hashes, rate_threshold(rate)).tolist() == expected


def test_keep_mask_refuses_bad_arguments() -> None:
    hashes = np.zeros(3, dtype=np.uint64)
    with pytest.raises(InputError, match="uint64"):
        keep_mask(np.zeros(3), 5)
    with pytest.raises(InputError, match="threshold must be in"):
        keep_mask(hashes, 2**64)
    with pytest.raises(InputError, match="one uint64 per row"):
        keep_mask(hashes, np.zeros(2, dtype=np.uint64))


# --------------------------------------------------------------------------------------------
# Statistics of the sample
# --------------------------------------------------------------------------------------------

N_ROWS = 200_000


def labels(n: int, base_rate: float, seed: int) -> np.ndarray:
    return (np.random.default_rng(seed).random(n) < base_rate).astype(np.int64)


@pytest.mark.parametrize("w", [0.01, 0.1, 0.37])
@pytest.mark.parametrize("keyed", ["rows", "strings"])
def test_positives_kept_and_negative_count_binomial(w: float, keyed: str) -> None:
    y = labels(N_ROWS, 0.03, seed=1)
    if keyed == "rows":
        hashes = hash_row_numbers(N_ROWS, seed=42)
    else:
        ids = np.char.add("txn-", np.arange(N_ROWS).astype(str))
        hashes = hash_string_keys(*string_buffers(ids), seed=42)
    keep = keep_mask(hashes, row_thresholds(y, ClassRates(negative_rate=w)))
    assert keep[y == 1].all()
    n_neg = int((y == 0).sum())
    kept = int(keep[y == 0].sum())
    assert abs(kept - w * n_neg) <= 4.0 * math.sqrt(n_neg * w * (1 - w))


def test_positive_sampling_rate_too() -> None:
    y = labels(N_ROWS, 0.2, seed=2)
    keep = keep_mask(
        hash_row_numbers(N_ROWS, seed=3),
        row_thresholds(y, ClassRates(negative_rate=0.1, positive_rate=0.5)),
    )
    for cls, rate in [(0, 0.1), (1, 0.5)]:
        n = int((y == cls).sum())
        assert abs(int(keep[y == cls].sum()) - rate * n) <= 4.0 * math.sqrt(n * rate * (1 - rate))


def test_hashes_look_uniform() -> None:
    for hashes in [
        hash_row_numbers(N_ROWS, seed=0),
        hash_uint64_keys(np.arange(N_ROWS) * 1000, seed=5),
        hash_string_keys(*string_buffers(np.arange(N_ROWS).astype(str)), seed=0),
    ]:
        u = (hashes >> np.uint64(11)).astype(np.float64) / 2.0**53
        assert stats.kstest(u, "uniform").pvalue > 1e-4
        # Low bits too (a bad mixer leaves them patterned).
        counts = np.bincount((hashes & np.uint64(0xFF)).astype(np.int64), minlength=256)
        assert stats.chisquare(counts).pvalue > 1e-4


def test_same_seed_same_rows_other_seed_other_rows() -> None:
    y = np.zeros(N_ROWS, dtype=np.int64)
    w = 0.1
    rates = row_thresholds(y, ClassRates(negative_rate=w))
    first = keep_mask(hash_row_numbers(N_ROWS, seed=42), rates)
    again = keep_mask(hash_row_numbers(N_ROWS, seed=42), rates)
    assert np.array_equal(first, again)
    for other_seed in [43, 41, 0, 2**63]:  # neighbouring seeds too
        other = keep_mask(hash_row_numbers(N_ROWS, seed=other_seed), rates)
        assert not np.array_equal(first, other)
        # Independent samples overlap in about w**2 n rows.
        overlap = int((first & other).sum())
        p = w * w
        assert abs(overlap - p * N_ROWS) <= 4.0 * math.sqrt(N_ROWS * p * (1 - p))


def test_rows_sharing_a_key_are_kept_together() -> None:
    keys = np.repeat(np.arange(5000), 3)
    keep = keep_mask(hash_uint64_keys(keys, seed=1), rate_threshold(0.3))
    per_key = keep.reshape(-1, 3)
    assert (per_key.all(axis=1) | ~per_key.any(axis=1)).all()


def test_nested_rates_give_nested_samples() -> None:
    hashes = hash_row_numbers(50_000, seed=8)
    small = keep_mask(hashes, rate_threshold(0.05))
    large = keep_mask(hashes, rate_threshold(0.2))
    assert not (small & ~large).any()


# --------------------------------------------------------------------------------------------
# Per-row thresholds, strata and weights
# --------------------------------------------------------------------------------------------


def test_row_thresholds_by_stratum() -> None:
    y = np.array([0, 1, 0, 1, 0])
    codes = np.array([0, 0, 1, 1, 2])
    rates = [ClassRates(0.5), ClassRates(0.25, 0.5), ClassRates(1.0)]
    got = row_thresholds(y, rates, stratum_index=codes).tolist()
    assert got == [2**63, 2**64 - 1, 2**62, 2**63, 2**64 - 1]
    weights = inverse_rate_weights(y, rates, stratum_index=codes).tolist()
    assert weights == [2.0, 1.0, 4.0, 2.0, 1.0]
    with pytest.raises(InputError, match="stratum_index is required"):
        row_thresholds(y, rates)
    with pytest.raises(InputError, match=r"outside \[0, 3\) \(first at row 5: 3\)"):
        row_thresholds(y, rates, stratum_index=[0, 0, 1, 1, 3])
    with pytest.raises(InputError, match="stratum 1: --negative-rate must be a rate"):
        row_thresholds(y, [ClassRates(0.5), ClassRates(0.0)], stratum_index=codes)


def test_inverse_rate_weights_make_counts_unbiased() -> None:
    # Horvitz-Thompson: the weighted count of kept negatives estimates the full count.
    y = labels(N_ROWS, 0.05, seed=4)
    rates = ClassRates(negative_rate=0.2)
    keep = keep_mask(hash_row_numbers(N_ROWS, seed=4), row_thresholds(y, rates))
    weights = inverse_rate_weights(y, rates)[keep]
    n_neg = (y == 0).sum()
    assert abs(weights[y[keep] == 0].sum() - n_neg) <= 4 * math.sqrt(n_neg * 0.8 / 0.2)
    assert weights[y[keep] == 1].sum() == (y == 1).sum()


def test_row_thresholds_refuse_bad_labels() -> None:
    with pytest.raises(InputError, match="not 0 or 1"):
        row_thresholds([0, 2], ClassRates(0.5))


# --------------------------------------------------------------------------------------------
# Choosing the rates
# --------------------------------------------------------------------------------------------


def test_resolve_negative_rate_forms() -> None:
    assert resolve_negative_rate(negative_rate=0.1) == 0.1
    # Hand-worked (reference 000): b = 0.1 to b' = 0.5 needs w = 1/9.
    assert resolve_negative_rate(
        target_positive_rate=0.5, positives=100, negatives=900
    ) == pytest.approx(1 / 9, rel=1e-15)
    b, target = 0.025, 0.2
    expected = b / (1 - b) * (1 - target) / target
    assert resolve_negative_rate(
        target_positive_rate=target, positives=25, negatives=975
    ) == pytest.approx(expected, rel=1e-15)
    # POS:NEG = 1:4 with P = 25, N = 975: keep 100 negatives.
    assert resolve_negative_rate(target_ratio="1:4", positives=25, negatives=975) == (
        pytest.approx(100 / 975, rel=1e-15)
    )
    assert resolve_negative_rate(target_ratio=(1.0, 4.0), positives=25, negatives=975) == (
        pytest.approx(100 / 975, rel=1e-15)
    )
    # Sampling positives too: the same targets with half the positives.
    assert resolve_negative_rate(
        target_ratio="1:4", positive_rate=0.5, positives=25, negatives=975
    ) == pytest.approx(50 / 975, rel=1e-15)
    # Target equal to the input's rate keeps every negative.
    assert resolve_negative_rate(
        target_positive_rate=0.25, positives=1, negatives=3
    ) == pytest.approx(1.0)


def test_resolved_rate_reaches_the_target_positive_rate() -> None:
    y = labels(N_ROWS, 0.025, seed=6)
    target = 0.08
    w = resolve_negative_rate(
        target_positive_rate=target, positives=float(y.sum()), negatives=float((1 - y).sum())
    )
    keep = keep_mask(hash_row_numbers(N_ROWS, seed=6), row_thresholds(y, ClassRates(w)))
    assert y[keep].mean() == pytest.approx(target, abs=0.004)


def test_weighted_counts_equal_repeated_rows() -> None:
    # Counts are (weighted) sums: a row of weight 2 counts as two rows.
    y = np.array([1, 0, 0, 0, 1, 0])
    weight = np.array([2.0, 1.0, 3.0, 1.0, 1.0, 2.0])
    repeated = np.repeat(y, weight.astype(int))
    by_weight = resolve_negative_rate(
        target_positive_rate=0.5,
        positives=float(weight[y == 1].sum()),
        negatives=float(weight[y == 0].sum()),
    )
    by_rows = resolve_negative_rate(
        target_positive_rate=0.5,
        positives=float((repeated == 1).sum()),
        negatives=float((repeated == 0).sum()),
    )
    assert by_weight == by_rows


@pytest.mark.parametrize(
    ("kwargs", "error", "needle"),
    [
        ({}, UsageError, "got none"),
        (
            {"negative_rate": 0.1, "target_ratio": "1:1"},
            UsageError,
            "--negative-rate and --target-ratio",
        ),
        ({"negative_rate": 0.0}, InputError, "--negative-rate must be a rate in (0, 1]"),
        ({"negative_rate": 0.1, "positive_rate": 2.0}, InputError, "--positive-rate must be"),
        ({"target_positive_rate": 0.5}, InputError, "needs the input's positive and negative"),
        (
            {"target_positive_rate": 1.0, "positives": 1, "negatives": 9},
            InputError,
            "strictly between 0 and 1",
        ),
        (
            {"target_positive_rate": 0.05, "positives": 1, "negatives": 9},
            InputError,
            "--target-positive-rate 0.05 is below what keeping every negative gives (0.1",
        ),
        (
            {"target_ratio": "1:20", "positives": 1, "negatives": 9},
            InputError,
            "--target-ratio 1:20 needs more negatives than the input has",
        ),
        (
            {"target_positive_rate": 0.5, "positives": 0, "negatives": 9},
            InputError,
            "no positive rows",
        ),
        (
            {"target_positive_rate": 0.5, "positives": 3, "negatives": 0},
            InputError,
            "no negative rows",
        ),
    ],
)
def test_resolve_negative_rate_errors(
    kwargs: dict[str, object], error: type[Exception], needle: str
) -> None:
    with pytest.raises(error) as info:
        resolve_negative_rate(**kwargs)  # type: ignore[arg-type]
    assert needle in str(info.value)


@pytest.mark.parametrize("text", ["1", "1:2:3", "a:b", "0:1", "1:-2", "1:inf"])
def test_parse_target_ratio_errors(text: str) -> None:
    with pytest.raises(InputError, match="--target-ratio"):
        parse_target_ratio(text)


def test_resolve_stratum_rates() -> None:
    counts = {"web": (30.0, 970.0), "app": (10.0, 90.0), "pos": (5.0, 995.0)}
    out = resolve_stratum_rates(counts, target_positive_rate=0.2)
    assert list(out) == ["web", "app", "pos"]
    for stratum, (p, n) in counts.items():
        w = out[stratum].negative_rate
        assert p / (p + w * n) == pytest.approx(0.2, rel=1e-14)
        assert out[stratum].positive_rate == 1.0
    same = resolve_stratum_rates(counts, negative_rate=0.3)
    assert {r.negative_rate for r in same.values()} == {0.3}

    table = {"web": ClassRates(0.1), "app": ClassRates(0.5, 0.5), "pos": ClassRates(0.01)}
    assert resolve_stratum_rates(counts, rates=table) == table
    with pytest.raises(InputError) as missing:
        resolve_stratum_rates(counts, rates={"web": ClassRates(0.1), "app": ClassRates(0.5)})
    assert (
        str(missing.value) == "the rates table has no rates for stratum 'pos' (1000 rows to sample)"
    )
    with pytest.raises(InputError) as missing:
        resolve_stratum_rates(counts, rates={"web": ClassRates(0.1)}, rates_name="r.csv")
    assert str(missing.value) == (
        "r.csv has no rates for strata 'app' (100 rows to sample), 'pos' (1000 rows to sample)"
    )
    with pytest.raises(InputError, match="stratum 'app': --negative-rate must be a rate"):
        resolve_stratum_rates(counts, rates={**table, "app": ClassRates(1.5)})
    with pytest.raises(UsageError, match="not both"):
        resolve_stratum_rates(counts, rates=table, negative_rate=0.1)
    # app's base rate (0.1) is above a 5% target: named in the message.
    with pytest.raises(InputError, match=r"stratum 'app': --target-positive-rate 0\.05"):
        resolve_stratum_rates(counts, target_positive_rate=0.05)
    # Unstratified data is the single group "": its messages carry no stratum prefix.
    with pytest.raises(InputError, match=r"^--target-positive-rate 0\.05"):
        resolve_stratum_rates({"": (10.0, 90.0)}, target_positive_rate=0.05)
    assert resolve_stratum_rates({"": (10.0, 90.0)}, negative_rate=0.5) == {"": ClassRates(0.5)}
