"""Deterministic, portable class-wise sampling: the calib 64-bit hash rule (``calib-hash64-v2``).

A row is kept when a 64-bit hash of (seed, key) falls below ``rate`` times 2**64, where
``rate`` is the sampling rate of the row's class (and stratum). The rule needs no shuffle and no
state, so a file streams through it in any chunking, and any engine with 64-bit integers can
reproduce it exactly (``resample --emit-sql`` emits it as SQL).

The hash, exactly
-----------------
All arithmetic is on unsigned 64-bit integers modulo 2**64; ``>>`` is a logical shift and
``^`` is exclusive or.

``mix64(x)`` is the SplitMix64 output function (Steele, Lea & Flood 2014), i.e. the first
output of a SplitMix64 generator seeded with ``x``::

    z = x + 0x9E3779B97F4A7C15
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
    z = (z ^ (z >> 27)) * 0x94D049BB133111EB
    mix64(x) = z ^ (z >> 31)

``fnv1a64(bytes)`` is the 64-bit FNV-1a hash (Fowler, Noll & Vo)::

    h = 0xCBF29CE484222325
    for each byte b:  h = (h ^ b) * 0x00000100000001B3
    fnv1a64(bytes) = h

The key value ``k`` of a row depends on that row's key alone, never on the other keys of the
column (so one new id does not re-draw the sample of the others):

* an integer key (an integer column of any width, signed or unsigned): the value modulo
  2**64, i.e. the two's-complement bits of its int64 value (-1 becomes 0xFFFFFFFFFFFFFFFF),
  so Int32 and Int64 columns with the same values hash alike;
* a text key that is an *integer's text* (:func:`integer_of_text`: exactly how an integer in
  [-2**63, 2**64 - 1] is written, an optional ``-`` then digits without a leading zero; no
  ``+``, spaces, decimal point or exponent): that integer, as above. So ``"7"`` in a CSV, 7
  in a Parquet column and ``CAST(7 AS VARCHAR)`` in SQL are one key;
* any other text key: ``k = fnv1a64(UTF-8 bytes of the text)``, the text exactly as read
  (``"007"``, ``"+7"``, ``" 7"`` and ``"7.0"`` are four keys, none of them 7);
* no key column: ``k`` is the 0-based row number in the input (the first data row is 0);
* float, boolean or missing keys are refused.

Then, with ``seed`` an integer in [0, 2**64)::

    hash64(seed, k) = mix64(k ^ mix64(seed))

The rule, with ``T(rate) = min(2**64 - 1, floor(rate * 2**64))`` computed exactly from the
binary64 value of ``rate`` (:func:`rate_threshold`)::

    keep  if  rate == 1  or  hash64(seed, k) < T(rate)

(``T = 2**64 - 1`` arises only for ``rate == 1``: below 1 a binary64 rate is at most
1 - 2**-53.) Positives are compared with the threshold of ``positive_rate`` and negatives with
that of ``negative_rate``, per stratum when sampling is stratified. Rows that share a key are
kept or dropped together (sampling by user id keeps a user's rows together).

``calib-hash64-v1`` (calib 0.1.0 before this rule) took a text column's keys as integers only
when *every* key of the column was integer text (after stripping spaces, so ``"007"`` was 7),
else hashed every key by FNV-1a: one text id made every other key change its hash. The two
rules agree on integer columns, on text columns of integers' texts and on text keys that are
not integers' texts in columns holding no integer text; they differ on the rest.

Test vectors (``hash64`` as unsigned decimal)::

    mix64(0)                          = 16294208416658607535  (0xE220A8397B1DCDAF)
    fnv1a64(b"a")                     = 12638187200555641996  (0xAF63DC4C8601EC8C)
    seed 0,  integer key 0            = 12035550249420947055
    seed 0,  integer key 1            =   627405149472732430
    seed 0,  integer key -1           =  3303439293501059696
    seed 42, integer key 0            =  6332618229526065668
    seed 42, integer key 1234567890123 = 17925585971602962171
    seed 0,  text key "7" (integer 7) =  7259628554680249319
    seed 42, text key "123" (integer) =  2903658299465811674
    seed 0,  text key "007"           = 14999919752740809301
    seed 0,  text key " 7"            = 15104674414541228596
    seed 0,  text key ""              =  6566800829925814604
    seed 0,  text key "user-17"       =  6254185618136437278
    seed 42, text key "é"             = 12268101949040064450

References
----------
G. L. Steele, D. Lea, C. H. Flood, "Fast splittable pseudorandom number generators",
OOPSLA 2014 (SplitMix64; constants of S. Vigna's ``splitmix64.c``).
G. Fowler, L. C. Noll, K.-P. Vo, D. Eastlake, "The FNV Non-Cryptographic Hash Algorithm",
IETF draft-eastlake-fnv.
"""

from __future__ import annotations

import math
import operator
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from calib_cli.core.checks import check_labels
from calib_cli.errors import InputError, OptionError, UsageError
from calib_cli.types import BoolArray, FloatArray, IntArray, UInt64Array

HASH_SPEC: Final = "calib-hash64-v2"
"""Name of the rule above, recorded in sampling records; a changed rule gets a new name."""

UINT64_MAX: Final = (1 << 64) - 1
INT64_MIN: Final = -(1 << 63)

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MIX_1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX_2 = np.uint64(0x94D049BB133111EB)
_FNV_OFFSET = np.uint64(0xCBF29CE484222325)
_FNV_PRIME = np.uint64(0x00000100000001B3)
_S27, _S30, _S31 = np.uint64(27), np.uint64(30), np.uint64(31)


@dataclass(frozen=True)
class ClassRates:
    """Probabilities with which negative and positive rows are kept (one class-wise sample).

    Attributes
    ----------
    negative_rate : float
        Probability of keeping each negative row, in (0, 1].
    positive_rate : float
        Probability of keeping each positive row, in (0, 1].
    """

    negative_rate: float
    positive_rate: float = 1.0


# --------------------------------------------------------------------------------------------
# The hash
# --------------------------------------------------------------------------------------------


def _check_seed(seed: int) -> int:
    try:
        value = operator.index(seed)
    except TypeError:
        raise OptionError(f"--seed must be an integer, got {seed!r}") from None
    if not 0 <= value <= UINT64_MAX:
        raise OptionError(f"--seed must be an integer in [0, 2**64 - 1], got {value}")
    return value


def _mix64_int(x: int) -> int:
    """``mix64`` on one Python int (used for the seed)."""
    z = (x + 0x9E3779B97F4A7C15) & UINT64_MAX
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & UINT64_MAX
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & UINT64_MAX
    return z ^ (z >> 31)


def _mix64_inplace(z: UInt64Array) -> UInt64Array:
    """``mix64`` on a uint64 array, in place (wrapping arithmetic; arrays never warn)."""
    with np.errstate(over="ignore"):
        z += _GOLDEN
        z ^= z >> _S30
        z *= _MIX_1
        z ^= z >> _S27
        z *= _MIX_2
        z ^= z >> _S31
    return z


def _finish(k: UInt64Array, seed: int) -> UInt64Array:
    k ^= np.uint64(_mix64_int(_check_seed(seed)))
    return _mix64_inplace(k)


def hash_uint64_keys(keys: npt.ArrayLike, *, seed: int) -> UInt64Array:
    """``hash64(seed, k)`` of integer keys (vectorised).

    Parameters
    ----------
    keys : array_like of integers, shape (n,)
        Key values; signed integers are taken modulo 2**64 (two's complement), so an Int32
        and an Int64 column with the same values hash alike. Floats, booleans and strings
        are refused (use :func:`hash_string_keys` for strings).
    seed : int
        In [0, 2**64).

    Returns
    -------
    ndarray of uint64, shape (n,)
        ``mix64(k ^ mix64(seed))`` (module docstring); ``keys`` is not modified.

    Examples
    --------
    >>> hash_uint64_keys([0, 1, -1], seed=0).tolist()
    [12035550249420947055, 627405149472732430, 3303439293501059696]
    """
    arr = np.asarray(keys)
    if arr.ndim != 1:
        raise InputError(f"key column must be one-dimensional, got shape {arr.shape}")
    kind = arr.dtype.kind
    if kind == "i":
        k = arr.astype(np.int64).view(np.uint64)
    elif kind == "u":
        k = arr.astype(np.uint64)
    elif kind == "f" or kind == "c":
        raise InputError(
            "key column has floating-point values; use an integer or string key (--key-col)"
        )
    elif kind == "b":
        raise InputError("key column is boolean; use an integer or string key (--key-col)")
    elif arr.size == 0:
        k = np.zeros(0, dtype=np.uint64)
    else:
        raise InputError(
            f"key column has values of type {arr.dtype}; use an integer or string key (--key-col)"
        )
    # astype/view may share memory with the caller's array: hash a private copy.
    return _finish(np.array(k, dtype=np.uint64, copy=True), seed)


def hash_row_numbers(n_rows: int, *, seed: int, start: int = 0) -> UInt64Array:
    """``hash64(seed, k)`` of the 0-based row numbers ``start, ..., start + n_rows - 1``.

    The key used when no key column is given; ``start`` lets a stream hash batch by batch.

    Examples
    --------
    >>> hash_row_numbers(2, seed=0).tolist()
    [12035550249420947055, 627405149472732430]
    """
    n = operator.index(n_rows)
    first = operator.index(start)
    if n < 0 or first < 0 or first + n > UINT64_MAX + 1:
        raise InputError(f"row numbers must lie in [0, 2**64), got start={first}, n_rows={n}")
    return _finish(np.arange(first, first + n, dtype=np.uint64), seed)


def hash_string_keys(
    offsets: npt.ArrayLike, data: npt.ArrayLike | bytes, *, seed: int
) -> UInt64Array:
    """``hash64(seed, fnv1a64(utf8))`` of strings held as Arrow-style buffers (vectorised).

    Row ``i`` is the UTF-8 byte string ``data[offsets[i]:offsets[i + 1]]``, as in an Arrow
    ``StringArray`` / ``LargeStringArray``. The loop runs over byte positions (the longest key
    length), each step vectorised across the rows still that long; fine for ids of tens of bytes.

    Parameters
    ----------
    offsets : array_like of integers, shape (n + 1,)
        Non-decreasing byte offsets into ``data``.
    data : array_like of uint8 or bytes
        The concatenated UTF-8 bytes.
    seed : int
        In [0, 2**64).

    Returns
    -------
    ndarray of uint64, shape (n,)

    Examples
    --------
    >>> hash_string_keys([0, 0, 7], b"user-17", seed=0).tolist()
    [6566800829925814604, 6254185618136437278]
    """
    off = np.asarray(offsets)
    if off.ndim != 1 or off.size == 0 or off.dtype.kind not in "iu":
        raise InputError("string key offsets must be a non-empty one-dimensional integer array")
    off = off.astype(np.int64)
    raw = (
        np.frombuffer(data, dtype=np.uint8)
        if isinstance(data, bytes | bytearray | memoryview)
        else np.asarray(data)
    )
    if raw.ndim != 1 or (raw.size and raw.dtype != np.uint8):
        raise InputError("string key data must be a one-dimensional uint8 buffer")
    lengths = np.diff(off)
    if off[0] < 0 or (lengths < 0).any() or off[-1] > raw.size:
        raise InputError("string key offsets must be non-decreasing and inside the data buffer")

    # Work in order of decreasing length: at byte position j the rows still active are a
    # prefix, so each step updates a contiguous slice (no gathers or scatters).
    order = np.argsort(-lengths, kind="stable")
    sorted_len = lengths[order]
    sorted_start = off[:-1][order]
    h = np.full(lengths.size, _FNV_OFFSET, dtype=np.uint64)
    max_len = int(sorted_len[0]) if sorted_len.size else 0
    neg_sorted_len = -sorted_len
    with np.errstate(over="ignore"):
        for j in range(max_len):
            n_active = int(np.searchsorted(neg_sorted_len, -j, side="left"))
            active = h[:n_active]
            active ^= raw[sorted_start[:n_active] + j].astype(np.uint64)
            active *= _FNV_PRIME
    k = np.empty_like(h)
    k[order] = h
    return _finish(k, seed)


_INTEGER_TEXT = re.compile(r"-?(?:0|[1-9][0-9]*)")


def integer_of_text(text: str) -> int | None:
    """The integer a text key stands for (module docstring), else None (hashed by FNV-1a).

    An integer's text is the one way the integer is written: an optional ``-``, then ASCII
    digits without a leading zero (``0`` itself), within [-2**63, 2**64 - 1].

    Examples
    --------
    >>> [integer_of_text(t) for t in ["7", "-3", "0", "18446744073709551615"]]
    [7, -3, 0, 18446744073709551615]
    >>> [integer_of_text(t) for t in ["007", "+7", " 7", "-0", "7.0", "1e3", "2" * 20]]
    [None, None, None, None, None, None, None]
    """
    if _INTEGER_TEXT.fullmatch(text) is None or text == "-0":
        return None
    value = int(text)
    return value if INT64_MIN <= value <= UINT64_MAX else None


def hash_keys(keys: Sequence[int | str], *, seed: int) -> UInt64Array:
    """``hash64(seed, k)`` of keys given as Python values, by the whole key rule: integers as
    integers, text by :func:`integer_of_text` (an integer's text as the integer, other text by
    FNV-1a of its UTF-8 bytes), each key on its own.

    The streaming readers apply the same rule to columns (:mod:`calib_cli.io.sampling`) with
    :func:`hash_uint64_keys` and :func:`hash_string_keys`; this is its statement on values.

    Examples
    --------
    >>> hash_keys([7, "7", "007"], seed=0).tolist()
    [7259628554680249319, 7259628554680249319, 14999919752740809301]
    """
    _check_seed(seed)
    out = np.empty(len(keys), dtype=np.uint64)
    integers: list[int] = []
    at_integers: list[int] = []
    texts: list[str] = []
    at_texts: list[int] = []
    for index, key in enumerate(keys):
        if isinstance(key, bool) or not isinstance(key, int | str):
            raise InputError(f"key {key!r} is {type(key).__name__}; keys are integers or text")
        value = integer_of_text(key) if isinstance(key, str) else key
        if value is None:
            texts.append(str(key))
            at_texts.append(index)
        elif INT64_MIN <= value <= UINT64_MAX:
            integers.append(value % (UINT64_MAX + 1))
            at_integers.append(index)
        else:
            raise InputError(f"integer key {value} is outside [-2**63, 2**64 - 1]")
    if integers:
        out[at_integers] = hash_uint64_keys(np.array(integers, dtype=np.uint64), seed=seed)
    if texts:
        offsets, data = string_buffers(np.array(texts, dtype=object))
        out[at_texts] = hash_string_keys(offsets, data, seed=seed)
    return out


def string_buffers(values: npt.ArrayLike) -> tuple[IntArray, npt.NDArray[np.uint8]]:
    """Arrow-style ``(offsets, data)`` buffers of a NumPy array of ``str`` (vectorised).

    A convenience for :func:`hash_string_keys` when the strings are not already in Arrow
    form; object arrays are converted with ``str`` (missing values are refused). NumPy's
    fixed-width strings drop trailing NUL characters, so a key ending in ``"\\x00"`` would
    hash as if it did not; Arrow buffers have no such limit.

    Examples
    --------
    >>> offsets, data = string_buffers(["", "user-17"])
    >>> offsets.tolist(), bytes(data)
    ([0, 0, 7], b'user-17')
    """
    arr = np.asarray(values)
    if arr.ndim != 1:
        raise InputError(f"key column must be one-dimensional, got shape {arr.shape}")
    if arr.dtype.kind == "O":
        missing = np.asarray(arr == None, dtype=np.bool_)  # noqa: E711 (elementwise)
        if missing.any():
            first = int(np.flatnonzero(missing)[0])
            raise InputError(
                f"key column has missing values: {int(missing.sum())} (first at row {first + 1})"
            )
        arr = arr.astype(str)
    elif arr.dtype.kind == "T":  # NumPy 2 StringDType
        arr = arr.astype(str)
    if arr.dtype.kind != "U":
        raise InputError(f"string key column must hold strings, got {arr.dtype}")
    try:
        encoded = np.char.encode(arr, "utf-8")
    except UnicodeEncodeError as exc:
        raise InputError(f"key column has a string that is not valid Unicode: {exc}") from None
    width = encoded.dtype.itemsize
    lengths = np.char.str_len(encoded).astype(np.int64)
    offsets = np.concatenate([np.zeros(1, dtype=np.int64), np.cumsum(lengths)])
    if width == 0 or arr.size == 0:
        return offsets, np.zeros(0, dtype=np.uint8)
    matrix = np.frombuffer(encoded.tobytes(), dtype=np.uint8).reshape(arr.size, width)
    within = np.arange(width)[None, :] < lengths[:, None]
    return offsets, np.ascontiguousarray(matrix[within])


# --------------------------------------------------------------------------------------------
# The rule
# --------------------------------------------------------------------------------------------


def rate_threshold(rate: float) -> int:
    """``T(rate) = min(2**64 - 1, floor(rate * 2**64))``, exact from the binary64 ``rate``.

    Rows are kept when ``hash64 < T``; ``T = 2**64 - 1`` (only ``rate == 1``) keeps every row
    (see :func:`keep_mask`).

    Examples
    --------
    >>> rate_threshold(0.5) == 2**63, rate_threshold(1.0) == 2**64 - 1, rate_threshold(0.0)
    (True, True, 0)
    """
    value = float(rate)
    if not (math.isfinite(value) and 0.0 <= value <= 1.0):
        raise InputError(f"a sampling rate must be in [0, 1], got {rate!r}")
    return min(UINT64_MAX, math.floor(Fraction(value) * (1 << 64)))


def keep_mask(hashes: npt.ArrayLike, thresholds: int | npt.ArrayLike) -> BoolArray:
    """Rows kept by the rule: ``hash < T``, and every row where ``T == 2**64 - 1`` (rate 1).

    Parameters
    ----------
    hashes : array_like of uint64, shape (n,)
        From :func:`hash_uint64_keys`, :func:`hash_string_keys` or :func:`hash_row_numbers`.
    thresholds : int or array_like of uint64, shape (n,)
        One threshold from :func:`rate_threshold`, or one per row (:func:`row_thresholds`).

    Examples
    --------
    >>> keep_mask(np.array([0, 2**63, 2**64 - 1], dtype=np.uint64), 2**63).tolist()
    [True, False, False]
    >>> keep_mask(np.array([2**64 - 1], dtype=np.uint64), rate_threshold(1.0)).tolist()
    [True]
    """
    h = np.asarray(hashes)
    if h.ndim != 1 or (h.size and h.dtype != np.uint64):
        raise InputError("hashes must be a one-dimensional uint64 array")
    if isinstance(thresholds, int | np.integer):
        t_int = int(thresholds)
        if not 0 <= t_int <= UINT64_MAX:
            raise InputError(f"a sampling threshold must be in [0, 2**64 - 1], got {t_int}")
        if t_int == UINT64_MAX:
            return np.ones(h.shape, dtype=np.bool_)
        return np.asarray(h < np.uint64(t_int), dtype=np.bool_)
    t = np.asarray(thresholds)
    if t.shape != h.shape or (t.size and t.dtype != np.uint64):
        raise InputError(f"thresholds must be one uint64 per row ({h.size}), got shape {t.shape}")
    return np.asarray((h < t) | (t == np.uint64(UINT64_MAX)), dtype=np.bool_)


def check_class_rates(
    rates: ClassRates,
    where: str = "",
    names: tuple[str, str] = ("--negative-rate", "--positive-rate"),
) -> ClassRates:
    """Refuse a rate outside (0, 1] (exit 65), naming it as ``names`` say: the options, or
    the columns of a rates file (``where`` the file and stratum).

    >>> check_class_rates(ClassRates(1.5), "r.csv: stratum 'B': ", ("column 'negative_rate'",
    ...                   "column 'positive_rate'"))
    Traceback (most recent call last):
    ...
    calib_cli.errors.InputError: r.csv: stratum 'B': column 'negative_rate' must be a rate in \
(0, 1], got 1.5
    """
    for name, value in zip(names, (rates.negative_rate, rates.positive_rate), strict=True):
        v = float(value)
        if not (math.isfinite(v) and 0.0 < v <= 1.0):
            raise InputError(f"{where}{name} must be a rate in (0, 1], got {value!r}")
    return rates


def _stratum_codes(stratum_index: npt.ArrayLike, n_rows: int, n_strata: int) -> IntArray:
    codes = np.asarray(stratum_index)
    if codes.shape != (n_rows,) or (codes.size and codes.dtype.kind not in "iu"):
        raise InputError(f"stratum_index must be {n_rows} integer codes, got shape {codes.shape}")
    codes = codes.astype(np.int64)
    bad = (codes < 0) | (codes >= n_strata)
    if bad.any():
        first = int(np.flatnonzero(bad)[0])
        raise InputError(
            f"stratum_index has codes outside [0, {n_strata}) "
            f"(first at row {first + 1}: {codes[first]})"
        )
    return codes


def _per_row(
    y_true: npt.ArrayLike,
    rates: ClassRates | Sequence[ClassRates],
    stratum_index: npt.ArrayLike | None,
    of_rate: Callable[[float], Any],
    dtype: type[np.generic],
) -> npt.NDArray[Any]:
    """``of_rate`` of each row's class rate (positive or negative), in its stratum's rates."""
    y = check_labels(y_true)
    if isinstance(rates, ClassRates):
        table, codes = [check_class_rates(rates)], np.zeros(y.size, dtype=np.int64)
    else:
        if stratum_index is None:
            raise InputError("stratum_index is required with one set of rates per stratum")
        table = [check_class_rates(r, f"stratum {i}: ") for i, r in enumerate(rates)]
        codes = _stratum_codes(stratum_index, y.size, len(table))
    neg = np.array([of_rate(r.negative_rate) for r in table], dtype=dtype)
    pos = np.array([of_rate(r.positive_rate) for r in table], dtype=dtype)
    return np.where(y == 1.0, pos[codes], neg[codes])


def row_thresholds(
    y_true: npt.ArrayLike,
    rates: ClassRates | Sequence[ClassRates],
    *,
    stratum_index: npt.ArrayLike | None = None,
) -> UInt64Array:
    """Each row's threshold: ``T(positive_rate)`` for positives, ``T(negative_rate)`` otherwise.

    Parameters
    ----------
    y_true : array_like of 0/1, shape (n,)
    rates : ClassRates or sequence of ClassRates
        One set of rates, or one per stratum (indexed by ``stratum_index``).
    stratum_index : array_like of int, shape (n,), optional
        Each row's stratum as a code into ``rates``; required when ``rates`` is a sequence.

    Examples
    --------
    >>> row_thresholds([0, 1], ClassRates(negative_rate=0.5)).tolist() == [2**63, 2**64 - 1]
    True
    """
    values = _per_row(y_true, rates, stratum_index, rate_threshold, np.uint64)
    return np.asarray(values, dtype=np.uint64)


def inverse_rate_weights(
    y_true: npt.ArrayLike,
    rates: ClassRates | Sequence[ClassRates],
    *,
    stratum_index: npt.ArrayLike | None = None,
) -> FloatArray:
    """Importance weights ``1 / rate`` of each row's class (and stratum), for kept rows.

    Weighting the kept rows by these makes weighted sums unbiased for the full data
    (Horvitz-Thompson): negatives get ``1 / negative_rate``, positives ``1 / positive_rate``.

    Examples
    --------
    >>> inverse_rate_weights([0, 1], ClassRates(negative_rate=0.1)).tolist()
    [10.0, 1.0]
    """
    values = _per_row(y_true, rates, stratum_index, lambda rate: 1.0 / rate, np.float64)
    return np.asarray(values, dtype=np.float64)


# --------------------------------------------------------------------------------------------
# Choosing the rates
# --------------------------------------------------------------------------------------------


def parse_target_ratio(text: str) -> tuple[float, float]:
    """``"POS:NEG"`` as two positive finite numbers (``--target-ratio``).

    Examples
    --------
    >>> parse_target_ratio("1:4")
    (1.0, 4.0)
    """
    parts = str(text).split(":")
    if len(parts) != 2:
        raise OptionError(f"--target-ratio must look like POS:NEG (e.g. 1:4), got {text!r}")
    try:
        pos, neg = float(parts[0]), float(parts[1])
    except ValueError:
        raise OptionError(
            f"--target-ratio must look like POS:NEG with numbers (e.g. 1:4), got {text!r}"
        ) from None
    if not (math.isfinite(pos) and math.isfinite(neg) and pos > 0.0 and neg > 0.0):
        raise OptionError(f"--target-ratio needs two positive numbers, got {text!r}")
    return pos, neg


def check_rate_options(
    *,
    negative_rate: float | None = None,
    target_positive_rate: float | None = None,
    target_ratio: tuple[float, float] | str | None = None,
    positive_rate: float = 1.0,
) -> None:
    """The checks of :func:`resolve_negative_rate` that need no class counts (exactly one form
    given, every value in range), so a caller can refuse bad options before reading any row.

    Examples
    --------
    >>> check_rate_options(target_positive_rate=1.5)
    Traceback (most recent call last):
    ...
    calib_cli.errors.OptionError: --target-positive-rate must be strictly between 0 and 1, got 1.5
    """
    given = [
        name
        for name, value in (
            ("--negative-rate", negative_rate),
            ("--target-positive-rate", target_positive_rate),
            ("--target-ratio", target_ratio),
        )
        if value is not None
    ]
    if len(given) != 1:
        detail = "none" if not given else " and ".join(given)
        raise UsageError(
            "give exactly one of --negative-rate, --target-positive-rate, --target-ratio "
            f"(got {detail})"
        )
    r_pos = float(positive_rate)
    if not (math.isfinite(r_pos) and 0.0 < r_pos <= 1.0):
        raise OptionError(f"--positive-rate must be a rate in (0, 1], got {positive_rate!r}")
    if negative_rate is not None:
        w = float(negative_rate)
        if not (math.isfinite(w) and 0.0 < w <= 1.0):
            raise OptionError(f"--negative-rate must be a rate in (0, 1], got {negative_rate!r}")
    if target_positive_rate is not None:
        target = float(target_positive_rate)
        if not (math.isfinite(target) and 0.0 < target < 1.0):
            raise OptionError(
                f"--target-positive-rate must be strictly between 0 and 1, got "
                f"{target_positive_rate!r}"
            )
    if isinstance(target_ratio, str):
        parse_target_ratio(target_ratio)


def resolve_negative_rate(
    *,
    negative_rate: float | None = None,
    target_positive_rate: float | None = None,
    target_ratio: tuple[float, float] | str | None = None,
    positive_rate: float = 1.0,
    positives: float | None = None,
    negatives: float | None = None,
) -> float:
    """The negative sampling rate w from exactly one of three ways of asking for it.

    Parameters
    ----------
    negative_rate : float, optional
        ``--negative-rate W``: w itself, in (0, 1].
    target_positive_rate : float, optional
        ``--target-positive-rate B'``: the expected positive rate of the sample, in (0, 1).
        With input base rate :math:`b` and positives kept at rate :math:`r_+`,
        :math:`w = r_+ \\frac{b}{1 - b} \\frac{1 - B'}{B'}` (references/000).
    target_ratio : (float, float) or str, optional
        ``--target-ratio POS:NEG``: the expected positive:negative ratio of the sample,
        :math:`w = r_+ P \\cdot \\text{NEG} / (\\text{POS} \\cdot N)`.
    positive_rate : float, default 1.0
        ``--positive-rate``: :math:`r_+`, the probability of keeping each positive.
    positives, negatives : float, optional
        (Weighted) counts :math:`P` and :math:`N` of positive and negative rows in the input;
        required by the two target forms.

    Returns
    -------
    float
        w in (0, 1].

    Raises
    ------
    InputError
        A value out of range, or a target that would need w > 1 (keeping more negatives than
        there are): sample positives with ``--positive-rate`` instead.
    UsageError
        Not exactly one of the three forms.

    Examples
    --------
    >>> resolve_negative_rate(target_positive_rate=0.5, positives=10, negatives=990)
    0.010101010101010102
    >>> resolve_negative_rate(target_ratio="1:4", positives=10, negatives=990)
    0.04040404040404041
    """
    check_rate_options(
        negative_rate=negative_rate,
        target_positive_rate=target_positive_rate,
        target_ratio=target_ratio,
        positive_rate=positive_rate,
    )
    r_pos = float(positive_rate)
    if negative_rate is not None:
        return float(negative_rate)

    option = "--target-positive-rate" if target_positive_rate is not None else "--target-ratio"
    if positives is None or negatives is None:
        raise InputError(f"{option} needs the input's positive and negative counts")
    p, n = float(positives), float(negatives)
    if not (math.isfinite(p) and math.isfinite(n) and p >= 0.0 and n >= 0.0):
        raise InputError(f"class counts must be finite and non-negative, got {p!r} and {n!r}")
    if p <= 0.0:
        raise InputError(f"{option}: the input has no positive rows")
    if n <= 0.0:
        raise InputError(f"{option}: the input has no negative rows to sample")

    if target_positive_rate is not None:
        target = float(target_positive_rate)
        if not (math.isfinite(target) and 0.0 < target < 1.0):
            raise OptionError(
                f"--target-positive-rate must be strictly between 0 and 1, got "
                f"{target_positive_rate!r}"
            )
        # w = r+ * (P / N) * (1 - B') / B'  ==  r+ * b/(1-b) * (1-B')/B'
        w = r_pos * (p / n) * ((1.0 - target) / target)
        if w > 1.0:
            base = p / (p + n)
            raise InputError(
                f"--target-positive-rate {target:g} is below what keeping every negative gives "
                f"({r_pos * p / (r_pos * p + n):.6g}; the input's positive rate is {base:.6g}); "
                "sampling negatives can only raise it (lower --positive-rate to reach it)"
            )
        return w

    # Exactly one form was given and it is neither of the above, so it is the target ratio.
    ratio = parse_target_ratio(target_ratio) if isinstance(target_ratio, str) else target_ratio
    pos_part, neg_part = (float(x) for x in ratio or (math.nan, math.nan))
    if not (math.isfinite(pos_part) and math.isfinite(neg_part) and pos_part > 0 and neg_part > 0):
        raise OptionError(f"--target-ratio needs two positive numbers, got {ratio!r}")
    w = r_pos * p * neg_part / (pos_part * n)
    if w > 1.0:
        raise InputError(
            f"--target-ratio {pos_part:g}:{neg_part:g} needs more negatives than the input has "
            f"(it would keep each with probability {w:.6g} > 1; the input's ratio is "
            f"{p:g}:{n:g}); lower --positive-rate or ask for fewer negatives"
        )
    return w


def _rows_text(rows: float) -> str:
    """A stratum's rows in a message: ``1 row to sample``, ``100 rows to sample`` (the noun
    agrees with the number shown: a weighted 0.1 * 10 shows as 1).

    >>> _rows_text(1.0), _rows_text(sum([0.1] * 10)), _rows_text(2.5)
    ('1 row to sample', '1 row to sample', '2.5 rows to sample')
    """
    shown = str(int(rows)) if float(rows).is_integer() else f"{rows:.6g}"
    return f"{shown} {'row' if shown == '1' else 'rows'} to sample"


def resolve_stratum_rates(
    counts: Mapping[str, tuple[float, float]],
    *,
    rates: Mapping[str, ClassRates] | None = None,
    negative_rate: float | None = None,
    target_positive_rate: float | None = None,
    target_ratio: tuple[float, float] | str | None = None,
    positive_rate: float = 1.0,
    rates_name: str = "the rates table",
) -> dict[str, ClassRates]:
    """Class rates for each stratum: from a rates table, or one target applied per stratum.

    Parameters
    ----------
    counts : mapping of stratum -> (positives, negatives)
        (Weighted) class counts of each stratum in the input, in the order of the output.
        Unstratified data is one group; name it ``""`` and its errors carry no stratum prefix.
    rates : mapping of stratum -> ClassRates, optional
        Explicit rates (``--rates-file``); every stratum in ``counts`` must have an entry.
        Exclusive with the other forms.
    negative_rate, target_positive_rate, target_ratio, positive_rate
        As in :func:`resolve_negative_rate`, applied to each stratum's own counts (so with
        ``target_positive_rate`` every stratum's sample is brought to the same positive rate).
    rates_name : str, default "the rates table"
        What the message of a stratum missing from ``rates`` calls the table (its file's
        name), beside the stratum's rows (positives plus negatives): the user learns which
        file to complete and how much data the stratum holds.

    Returns
    -------
    dict of stratum -> ClassRates, in the order of ``counts``.

    Examples
    --------
    >>> out = resolve_stratum_rates({"a": (10, 90), "b": (1, 99)}, target_positive_rate=0.5)
    >>> {k: round(v.negative_rate, 6) for k, v in out.items()}
    {'a': 0.111111, 'b': 0.010101}
    >>> try:
    ...     resolve_stratum_rates({"a": (10, 90), "b": (1, 99)}, rates={"a": ClassRates(0.5)},
    ...                           rates_name="rates.csv")
    ... except InputError as error:
    ...     print(error)
    rates.csv has no rates for stratum 'b' (100 rows to sample)
    """
    if rates is not None:
        others = (negative_rate, target_positive_rate, target_ratio)
        if any(v is not None for v in others):
            raise UsageError(
                "give per-stratum rates (--rates-file) or one of --negative-rate, "
                "--target-positive-rate, --target-ratio, not both"
            )
        missing = [s for s in counts if s not in rates]
        if missing:
            shown = ", ".join(f"{str(s)!r} ({_rows_text(sum(counts[s]))})" for s in missing[:5])
            more = f" and {len(missing) - 5} more" if len(missing) > 5 else ""
            noun = "stratum" if len(missing) == 1 else "strata"
            raise InputError(f"{rates_name} has no rates for {noun} {shown}{more}")
        return {s: check_class_rates(rates[s], f"stratum {s!r}: ") for s in counts}

    out: dict[str, ClassRates] = {}
    for stratum, (p, n) in counts.items():
        try:
            w = resolve_negative_rate(
                negative_rate=negative_rate,
                target_positive_rate=target_positive_rate,
                target_ratio=target_ratio,
                positive_rate=positive_rate,
                positives=p,
                negatives=n,
            )
        except InputError as exc:
            if stratum == "":  # the single unstratified group
                raise
            raise InputError(f"stratum {stratum!r}: {exc}") from None
        out[stratum] = ClassRates(negative_rate=w, positive_rate=float(positive_rate))
    return out
