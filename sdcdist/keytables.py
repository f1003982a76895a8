"""Key-combination tables: the distinct combinations of categorical key codes and their counts.

Plain numpy, below both :mod:`sdcdist.metrics` (the frequency risk, the blocked
linkage's recoded keys) and :mod:`sdcdist.masking` (local suppression to
k-anonymity), which both read key combinations:

- :func:`combo_table`: the distinct combinations of one block with their record
  counts and weight sums; :func:`merge_tables` merges such tables (the
  ``combine`` of a record-chunk reduction). Weight sums are exact (below), so a
  merged table has the same bits whatever the chunking and the merge order;
- :func:`combo_frequencies`: ``f_k`` and ``F_k`` of each combination, a missing
  value matching every category of its key (sdcMicro's ``freqCalc``);
- :func:`apply_lookup`: codes mapped through a recoding lookup;
- :func:`unique_rows`: distinct rows in sorted order with the inverse index;
- :func:`key_rows`, :func:`check_codes`: key codes as table rows, and the check that
  a categorical column holds codes 0, 1, 2, ... (NaN missing);
- the chunk tasks the risk and loss measures share: :func:`key_table_chunk` (a chunk's
  combination table, weighted, through recoding lookups), :func:`recoding_pairs` with
  :func:`merge_recoding_pairs` and :func:`recoding_lookups` (whether a masked column is a
  global recoding of the original), :func:`pair_table` with :func:`merge_pairs` and
  :func:`merge_weighted_tables` (distinct (key combination, value) pairs: the attribute,
  household and model-based risks);
- :func:`distinct_float_rows`: distinct float rows (bit for bit, one NaN) and their counts
  (the DCR index, CategoricalCAP's tables).

A table row holds -1 for a missing value, so a categorical value is a code 0..L-1:
every reader makes them so (ingest gives each distinct value of a categorical column,
"-1" too, a code of its own in label order), and a negative or fractional "code" is
refused rather than counted as missing or merged with another category.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from .errors import SdcInputError

__all__ = ["combo_table", "with_weight", "merge_tables", "combo_frequencies", "apply_lookup", "unique_rows",
           "exact_group_sums", "exact_to_float", "key_rows", "check_codes", "weighted_chunk",
           "unpack_keys", "key_table_chunk", "recoding_pairs", "merge_recoding_pairs",
           "recoding_lookups", "pair_table", "merge_pairs", "merge_weighted_tables",
           "distinct_float_rows"]

_MAX_PACK = 2 ** 62


def _pack(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """Mixed-radix int64 key of each row of non-negative ints (missing = -1 shifted to 0),
    and the radices; None if the key space exceeds int64."""
    if rows.shape[1] == 0:
        return np.zeros(rows.shape[0], dtype=np.int64), np.zeros(0, dtype=np.int64)
    shifted = rows + 1
    radix = shifted.max(axis=0) + 1 if rows.shape[0] else np.ones(rows.shape[1], np.int64)
    total = 1
    for r in radix:
        total *= int(r)
        if total > _MAX_PACK:
            return None
    key = np.ravel_multi_index(tuple(shifted.T), radix).astype(np.int64, copy=False)
    return key, radix


def unpack_keys(key: np.ndarray, radix: np.ndarray) -> np.ndarray:
    """The rows (len(key), len(radix)) int64 of packed keys (:func:`_pack`)."""
    out = np.empty((key.size, radix.size), dtype=np.int64)
    rest = np.array(key, dtype=np.int64)
    for j in range(radix.size - 1, -1, -1):
        rest, digit = np.divmod(rest, int(radix[j]))
        out[:, j] = digit - 1
    return out


def _not_codes(codes: np.ndarray) -> np.ndarray:
    """Per column, how many values are neither NaN nor a code 0, 1, 2, ... (below 2**53)."""
    if codes.ndim != 2:
        codes = codes.reshape(codes.shape[0], -1)
    out = np.zeros(codes.shape[1], dtype=np.int64)
    if codes.shape[0] == 0:
        return out
    buf, tmp = np.empty(codes.shape[0]), np.empty(codes.shape[0])
    flag = np.empty(codes.shape[0], dtype=bool)
    with np.errstate(invalid="ignore"):
        for j in range(codes.shape[1]):
            np.copyto(buf, codes[:, j])                 # contiguous, buffers reused
            c = buf
            if np.fmin.reduce(c) >= 0 and np.fmax.reduce(c) < 2.0 ** 53:
                # in range (or all NaN): count the fractional values (NaN != its floor)
                np.not_equal(np.floor(c, out=tmp), c, out=flag)
                out[j] = np.count_nonzero(flag) - np.count_nonzero(np.isnan(c, out=flag))
            else:
                ok = np.isnan(c) | ((c >= 0) & (c < 2.0 ** 53) & (c == np.floor(c)))
                out[j] = c.size - np.count_nonzero(ok)
    return out


def check_codes(codes: np.ndarray, names: list[str], *, where: str = "the data") -> None:
    """Refuse a categorical column holding something other than codes 0, 1, 2, ... or NaN.

    Parameters
    ----------
    codes : ndarray, shape (n, q)
        The categorical columns.
    names : list of str, length q
    """
    bad = _not_codes(np.asarray(codes, dtype=np.float64).reshape(-1, len(names)))
    for name, k in zip(names, bad.tolist()):
        if k:
            raise SdcInputError(
                f"categorical column {name!r} of {where} has {k} values that are not codes "
                "0, 1, 2, ... (negative, fractional or infinite numbers); sdcdist keeps "
                "negative codes for missing values: read the file with load_microdata or "
                "ingest (each distinct value becomes a category with a code of its own), "
                "build it with from_array(categories=...), or recode the column to 0..L-1 "
                "with NaN for a missing value")


def key_rows(codes: np.ndarray) -> np.ndarray:
    """Table rows (int64, -1 missing) of key codes (NaN missing), refusing a value that is
    not a code 0, 1, 2, ... (it would be counted as missing, or merged with a category)."""
    codes = np.asarray(codes, dtype=np.float64)
    bad = int(_not_codes(codes).sum()) if codes.size else 0
    if bad:
        raise SdcInputError(
            f"{bad} categorical key values are not codes 0, 1, 2, ... (negative, fractional "
            "or infinite numbers); sdcdist keeps negative codes for missing values: read "
            "the file with load_microdata or ingest, or recode the keys to 0..L-1 with NaN "
            "for a missing value")
    return np.where(np.isnan(codes), -1, codes).astype(np.int64)


def weighted_chunk(X: Any, start: int, stop: int, keys: Any, w: int | None
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """Records ``start:stop`` of ``X`` as the weighted key tables read them.

    Returns the block (stop - start, p) float64, its key codes (the columns ``keys``), its
    weights (column ``w``; ones without one) and how many weights are not finite positive
    numbers (the caller refuses the file when any is).
    """
    block = np.asarray(X[start:stop], dtype=np.float64)
    if w is None:
        return block, block[:, list(keys)], np.ones(block.shape[0]), 0
    wv = block[:, w]
    return block, block[:, list(keys)], wv, int((~(np.isfinite(wv) & (wv > 0))).sum())


def unique_rows(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Distinct rows (sorted) and the inverse index.

    Rows are packed into one int64 key and the keys sorted, so the order never depends
    on the input's (plain numpy: no pandas import for a command that only counts keys).
    """
    packed = _pack(rows)
    if packed is None:
        u, inv = np.unique(rows, axis=0, return_inverse=True)
        return u, inv.reshape(-1)
    uk, inv = _factorise(*packed)
    return unpack_keys(uk, packed[1]), inv


def _code_keys(codes: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """The packed key (:func:`_pack`) of each row of key codes (NaN missing) read column by
    column from the float codes (a view will do: each column is copied once, into one
    buffer reused), without the (n, q) integer rows of :func:`key_rows`; refuses what
    :func:`key_rows` refuses, with its message. None when the key space exceeds int64
    (the caller then packs :func:`key_rows`' rows)."""
    n, q = codes.shape
    if n == 0 or q == 0:
        return None
    buf, tmp = np.empty(n), np.empty(n)
    flag = np.empty(n, dtype=bool)
    shifted = np.empty(n, dtype=np.int64)
    key = np.zeros(n, dtype=np.int64)
    radix = []
    total = 1
    with np.errstate(invalid="ignore"):
        for j in range(q):
            np.copyto(buf, codes[:, j])
            lo, hi = np.fmin.reduce(buf), np.fmax.reduce(buf)
            if lo >= 0 and hi < 2.0 ** 53:          # in range: fractions only
                np.not_equal(np.floor(buf, out=tmp), buf, out=flag)
                bad = int(np.count_nonzero(flag)) - \
                    int(np.count_nonzero(np.isnan(buf, out=flag)))
            else:                                   # out of range, or all missing
                bad = int(_not_codes(buf.reshape(-1, 1))[0])
            if bad:
                key_rows(codes)                     # raises its message
            r = int(hi) + 2 if hi == hi else 1      # codes 0..hi, and missing
            total *= r
            if total > _MAX_PACK:
                return None
            radix.append(r)
            # shifted code: missing (NaN) -> 0, code k -> k + 1 (exact below 2**53)
            np.fmax(np.add(buf, 1.0, out=buf), 0.0, out=buf)
            np.copyto(shifted, buf, casting="unsafe")  # whole numbers: exact
            if r != 1:
                key *= r
            key += shifted
    return key, np.array(radix, dtype=np.int64)


def _factorise(key: np.ndarray, radix: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Distinct packed keys (sorted) and the inverse index (:func:`unique_rows`' core)."""
    total = math.prod(int(r) for r in radix)
    if total <= max(4 * key.size, 1 << 16):
        # a small key space: mark the keys present, number them in order (linear time)
        present = np.zeros(total, dtype=bool)
        present[key] = True
        uk = np.flatnonzero(present)
        rank = np.cumsum(present, dtype=np.int64)
        inv = rank[key] - 1
    else:
        uk, inv = np.unique(key, return_inverse=True)
    return uk.astype(np.int64, copy=False), np.asarray(inv, dtype=np.int64).reshape(-1)


def combo_table(codes: np.ndarray, weights: np.ndarray | None = None, *,
                rounded: bool = True) -> dict[str, Any]:
    """The distinct key combinations of a block and their counts.

    Parameters
    ----------
    codes : ndarray, shape (n, q)
        Key codes (NaN: missing).
    weights : ndarray, shape (n,), optional

    Returns
    -------
    dict
        ``rows`` (U, q) int64 (-1: missing), ``count`` (U,) int64, ``weight`` (U,)
        float64 (the correctly rounded exact weight sums; the counts when unweighted),
        ``inverse`` (n,) the row of each record; weighted, ``exact`` the exact sums
        (for :func:`merge_tables` and :func:`combo_frequencies`). With ``rounded``
        False a weighted table has no ``weight`` (a chunk's table that
        :func:`merge_tables` merges: it rounds the merged sums; :func:`with_weight` adds
        them to a table that is not merged).
    """
    codes = np.asarray(codes, dtype=np.float64)
    packed = _code_keys(codes) if codes.ndim == 2 else None
    if packed is not None:
        uk, inv = _factorise(*packed)
        u = unpack_keys(uk, packed[1])
    else:
        u, inv = unique_rows(key_rows(codes))
    count = np.bincount(inv, minlength=u.shape[0]).astype(np.int64)
    out = {"rows": u, "count": count, "weight": count.astype(np.float64), "inverse": inv}
    if weights is not None:
        out["exact"] = exact_group_sums(np.asarray(weights, dtype=np.float64), inv, u.shape[0],
                                        normalise=rounded)
        if rounded:
            out["weight"] = exact_to_float(out["exact"])
        else:
            del out["weight"]
    return out


def with_weight(table: dict[str, Any]) -> dict[str, Any]:
    """The table with its ``weight``: the correctly rounded exact sums (a table built
    with ``rounded=False`` has none)."""
    if "weight" not in table:
        ex = _exact_of(table)
        table = {**table, "exact": ex, "weight": exact_to_float(ex)}
    return table


def merge_tables(*tables: dict[str, Any]) -> dict[str, Any]:
    """``combine``: merge combination tables, adding counts and weights exactly."""
    rows = np.concatenate([t["rows"] for t in tables])
    u, inv = unique_rows(rows)
    count = np.bincount(inv, weights=np.concatenate([t["count"] for t in tables]),
                        minlength=u.shape[0]).astype(np.int64)
    out = {"rows": u, "count": count, "weight": count.astype(np.float64),
           "bad_weights": sum(int(t.get("bad_weights", 0)) for t in tables)}
    if any("exact" in t for t in tables):
        # raw digit sums (chunk tables) add exactly as they are while the records behind
        # them number at most 2**29 (every digit sum stays below 2**53); else normalised
        raw_ok = int(count.sum()) <= 2 ** 29
        out["exact"] = _merge_exact([t["exact"] if raw_ok and "exact" in t and
                                     t["exact"].get("raw") else _exact_of(t) for t in tables],
                                    inv, u.shape[0])
        out["weight"] = exact_to_float(out["exact"])
    return out


def combo_frequencies(table: dict[str, Any]) -> tuple[np.ndarray, np.ndarray]:
    """``f_k`` and ``F_k`` of each distinct combination, missing values matching all.

    Without missing values these are the table's counts and weights. Otherwise,
    for each pair of missingness patterns (S of u, T of v), the records of
    combinations v that agree with u on the keys outside S and T are added.
    """
    rows, count, weight = table["rows"], table["count"], table["weight"]
    miss = rows < 0
    if not miss.any():
        return count.astype(np.float64), weight.astype(np.float64)
    ex = _exact_of(table)
    lo, (digits,) = _align([ex])
    special = ex["special"]
    pats, pat_of = np.unique(miss, axis=0, return_inverse=True)
    pat_of = pat_of.reshape(-1)
    fk = np.zeros(rows.shape[0])
    Fd = np.zeros(digits.shape)          # digit sums below 2**53: exact in any order
    Fs = None if special is None else np.zeros(rows.shape[0])
    for s in range(pats.shape[0]):
        us = np.flatnonzero(pat_of == s)
        for t in range(pats.shape[0]):
            vs = np.flatnonzero(pat_of == t)
            cols = np.flatnonzero(~pats[s] & ~pats[t])
            both = np.concatenate([rows[np.ix_(vs, cols)], rows[np.ix_(us, cols)]])
            _, inv = unique_rows(both)
            iv, iu = inv[:vs.size], inv[vs.size:]
            m = int(inv.max()) + 1 if inv.size else 0
            c = np.bincount(iv, weights=count[vs].astype(np.float64), minlength=m)
            fk[us] += c[iu]
            for k in range(digits.shape[1]):
                Fd[us, k] += np.bincount(iv, weights=digits[vs, k], minlength=m)[iu]
            if Fs is not None:
                Fs[us] += np.bincount(iv, weights=special[vs], minlength=m)[iu]
    Fk = exact_to_float(_normalise({"lo": lo, "digits": Fd, "special": Fs}))
    return fk, Fk


def apply_lookup(codes: np.ndarray, lookup: np.ndarray | None) -> np.ndarray:
    """Original codes mapped through a recoding lookup (NaN where it has no image)."""
    if lookup is None:
        return codes
    out = np.full(codes.shape, np.nan)
    ok = ~np.isnan(codes) & (codes >= 0) & (codes < lookup.size)
    out[ok] = lookup[codes[ok].astype(np.int64)]
    return out


# -- exact weight sums ------------------------------------------------------------------------
#
# A float sum rounded at every step depends on the order of its terms, so a combination's
# weight sum would depend on which chunk each record fell in. Each weight is split exactly
# into 24-bit digits on one fixed grid of bit positions (limb k holds the bits 24k..24k+23,
# k from -45 to 43 covers every finite float64), and digits are added per combination and
# limb as floats: a digit is below 2**24, so a sum of up to 2**29 of them is an integer
# below 2**53, exact whatever the order. Carries are then propagated ("normalised"), so the
# digits of a table are the exact sum's unique expansion, and the float is its correct
# rounding. Non-finite weights (refused by the metrics, but a table may hold them) are
# summed apart: NaN, +inf or -inf whatever the order.

_LIMB = 24
_RADIX = float(2 ** _LIMB)


def _add_digits(bits: np.ndarray, inv: np.ndarray, lo: int, out: np.ndarray) -> None:
    """Add the signed 24-bit digits of each finite value (``bits``: the int64 view of
    float64 values) into ``out[group, limb - lo]``; a value with biased exponent E and
    53-bit mantissa M is M * 2**(max(E, 1) - 1075).

    Plain numpy (one ``bincount`` per limb a value spans, at most four): every digit and
    every partial sum is an integer below 2**53, so the sums are exact in any order and
    equal, bit for bit, to adding the digits one value at a time."""
    e = (bits >> 52) & 0x7FF
    m = bits & 0xFFFFFFFFFFFFF
    m = np.where(e == 0, m, m | 0x10000000000000)
    use = (e != 0x7FF) & (m != 0)
    if not use.all():
        bits, e, m, inv = bits[use], e[use], m[use], inv[use]
    if m.size == 0:
        return
    p = np.maximum(e, 1) - 1075
    k = p // 24                              # floor division: the limb of the lowest bit
    r = p - 24 * k
    sgn = np.where(bits < 0, -1.0, 1.0)
    G, L = out.shape
    flat = inv.astype(np.int64) * L + (k - lo)
    acc = np.bincount(flat, weights=sgn * ((m & ((1 << (24 - r)) - 1)) << r), minlength=G * L)
    m = m >> (24 - r)
    while True:
        nz = np.flatnonzero(m)
        if nz.size == 0:
            break
        if nz.size < m.size:
            m, flat, sgn = m[nz], flat[nz], sgn[nz]
        flat = flat + 1
        acc += np.bincount(flat, weights=sgn * (m & 0xFFFFFF), minlength=G * L)
        m = m >> 24
    out += acc.reshape(G, L)


def _biased_exponent(x: float) -> int:
    return int((np.array(x, dtype=np.float64).view(np.int64) >> 52) & 0x7FF)


#: the limbs :func:`_add_rounded_digits` handles: their rounding constants and scale
#: factors are normal floats
_ROUNDED_LIMBS = (-40, 40)


def _add_rounded_digits(w: np.ndarray, inv: np.ndarray, lo: int, out: np.ndarray) -> bool:
    """Add each finite value's signed digits on the limbs of ``out`` (``out[group, limb -
    lo]``), the digits taken by rounding from the top limb down: at limb k, q = (r + C) -
    C with C = 1.5 * 2**(24k + 52) is the remainder r rounded to a multiple of 2**(24k)
    (exactly, for |r| <= 2**(24k + 51)), the digit is q / 2**(24k) and r - q, exact, is
    left for the lower limbs. Each digit has magnitude at most 2**24 (2**23 below the top
    limb), so the sums stay exact integers in any order as those of :func:`_add_digits`,
    and their normalised expansion is the same. Four float operations and one
    ``bincount`` per limb, against a dozen integer passes.

    False (``out`` untouched) when the limbs lie outside :data:`_ROUNDED_LIMBS` or a
    remainder is left (not expected): the caller then uses :func:`_add_digits`."""
    G, L = out.shape
    if lo < _ROUNDED_LIMBS[0] or lo + L - 1 > _ROUNDED_LIMBS[1]:
        return False
    r = np.array(w, dtype=np.float64)
    q = np.empty_like(r)
    cols = []
    for k in range(lo + L - 1, lo - 1, -1):
        c = 1.5 * 2.0 ** (_LIMB * k + 52)
        np.add(r, c, out=q)
        q -= c
        r -= q
        q *= 2.0 ** (-_LIMB * k)
        cols.append((k - lo, np.bincount(inv, weights=q, minlength=G)))
    if r.any():
        return False
    for j, col in cols:
        out[:, j] += col
    return True


def exact_group_sums(weights: np.ndarray, inv: np.ndarray, groups: int, *,
                     normalise: bool = True) -> dict[str, Any]:
    """The exact sums of ``weights`` (n,) per group ``inv`` (n,), 0..groups-1: ``lo`` the
    lowest limb, ``digits`` (groups, L), ``special`` the non-finite sums (or None).

    ``normalise`` False leaves the digit sums as added (each below n * 2**24 in magnitude,
    exact), marked ``raw``: :func:`merge_tables` normalises the merged sums once."""
    w = np.ascontiguousarray(weights, dtype=np.float64)
    inv = np.ascontiguousarray(inv, dtype=np.int64)
    special = None
    finite = w
    if not np.isfinite(w).all():
        bad = ~np.isfinite(w)
        special = np.bincount(inv[bad], weights=w[bad], minlength=groups)
        finite = np.where(bad, 0.0, w)
    aw = np.abs(finite)
    top = float(aw.max()) if aw.size else 0.0
    if top == 0.0:
        return {"lo": 0, "digits": np.zeros((groups, 0)), "special": special}
    least = float(np.min(aw, where=aw > 0.0, initial=np.inf))
    del aw
    # the limbs of the lowest mantissa bit of the smallest value and of the highest bit of
    # the largest (a value of biased exponent E has its lowest bit at max(E, 1) - 1075)
    lo = (max(_biased_exponent(least), 1) - 1075) // _LIMB
    L = (max(_biased_exponent(top), 1) - 1075 + 52) // _LIMB - lo + 1
    digits = np.zeros((groups, L))
    if w.size > 2 ** 29:                  # digit sums must stay below 2**53
        raise ValueError("exact group sums take at most 2**29 values at a time")
    if not _add_rounded_digits(finite, inv, lo, digits):
        digits[:] = 0.0
        _add_digits(w.view(np.int64), inv, lo, digits)
    if not normalise:
        return {"lo": lo, "digits": digits, "special": special, "raw": True}
    return _normalise({"lo": lo, "digits": digits, "special": special})


def _carry_rows(d: np.ndarray, out: np.ndarray) -> None:
    """Each row's unique expansion: digits in [0, 2**24) of the magnitude, carrying the
    row's sign (``out`` has three more limbs than ``d``; |d| < 2**53). Vectorised over the
    rows: the positive carry pass first, the negative one for the rows whose sum is
    negative (a carry left after the last limb)."""
    U, L = d.shape
    di = np.ascontiguousarray(d.T).astype(np.int64)       # limb by limb
    c = np.zeros(U, dtype=np.int64)
    for k in range(L + 3):
        v = c + di[k] if k < L else c
        out[:, k] = v & 0xFFFFFF                           # floor mod and floor division
        c = v >> 24
    rows = np.flatnonzero(c)                               # these sums are negative
    if rows.size:
        dn = di[:, rows]
        c = np.zeros(rows.size, dtype=np.int64)
        for k in range(L + 3):
            v = c - dn[k] if k < L else c
            out[rows, k] = -(v & 0xFFFFFF)
            c = v >> 24


def _normalise(ex: dict[str, Any]) -> dict[str, Any]:
    """The unique expansion of each sum: digits of magnitude below 2**24, all of the sum's
    sign; all-zero limbs at both ends dropped."""
    raw = np.ascontiguousarray(ex["digits"], dtype=np.float64)
    if raw.shape[1] == 0:
        return ex
    d = np.empty((raw.shape[0], raw.shape[1] + 3))
    _carry_rows(raw, d)
    nz = np.flatnonzero(d.any(axis=0))
    if nz.size == 0:
        return {"lo": 0, "digits": d[:, :0], "special": ex["special"]}
    return {"lo": ex["lo"] + int(nz[0]), "digits": d[:, nz[0]:nz[-1] + 1],
            "special": ex["special"]}


def _exact_of(table: dict[str, Any]) -> dict[str, Any]:
    """A table's exact weight sums (its float weights, exactly, when it has none), as the
    unique expansion (a ``raw`` one normalised)."""
    if "exact" in table:
        ex = table["exact"]
        if ex.get("raw"):
            ex = _normalise({k: v for k, v in ex.items() if k != "raw"})
        return ex
    w = table["weight"]
    return exact_group_sums(w, np.arange(w.size), w.size)


def _align(parts: list[dict[str, Any]]) -> tuple[int, list[np.ndarray]]:
    """The digits of several sums on one common range of limbs."""
    have = [p for p in parts if p["digits"].shape[1]]
    if not have:
        return 0, [np.zeros((p["digits"].shape[0], 0)) for p in parts]
    lo = min(p["lo"] for p in have)
    hi = max(p["lo"] + p["digits"].shape[1] for p in have)
    out = []
    for p in parts:
        d = np.zeros((p["digits"].shape[0], hi - lo))
        if p["digits"].shape[1]:
            d[:, p["lo"] - lo:p["lo"] - lo + p["digits"].shape[1]] = p["digits"]
        out.append(d)
    return lo, out


def _group_sum(lo: int, digits: np.ndarray, special: np.ndarray | None, inv: np.ndarray,
               groups: int) -> dict[str, Any]:
    """Exact sums of aligned digit rows per group (each limb's digits add exactly)."""
    d = np.zeros((groups, digits.shape[1]))
    for k in range(digits.shape[1]):
        d[:, k] = np.bincount(inv, weights=digits[:, k], minlength=groups)
    sp = None if special is None else np.bincount(inv, weights=special, minlength=groups)
    return _normalise({"lo": lo, "digits": d, "special": sp})


def _merge_exact(parts: list[dict[str, Any]], inv: np.ndarray, groups: int) -> dict[str, Any]:
    lo, digits = _align(parts)
    sp = None
    if any(p["special"] is not None for p in parts):
        sp = np.concatenate([p["special"] if p["special"] is not None
                             else np.zeros(p["digits"].shape[0]) for p in parts])
    return _group_sum(lo, np.concatenate(digits), sp, inv, groups)


def _round_rows(d: np.ndarray, lo: int, out: np.ndarray) -> None:
    """The correctly rounded float of each row's expansion (digits of one sign).

    Python's fsum ending on a non-overlapping expansion, vectorised over the rows: add
    from the top limb until an addition is inexact; a tie rounded down with a positive
    tail below goes up."""
    U, L = d.shape
    sgn = np.where((d < 0).any(axis=1), -1.0, 1.0)
    with np.errstate(over="ignore", invalid="ignore"):
        v = np.ldexp(sgn[:, None] * d, (24 * (lo + np.arange(L))).astype(np.int32)[None, :])
        hi = np.zeros(U)
        done = np.zeros(U, dtype=bool)
        for k in range(L - 1, -1, -1):
            x = hi
            h2 = x + v[:, k]
            err = v[:, k] - (h2 - x)
            hi = np.where(done, hi, h2)
            stop = np.flatnonzero(~done & (err != 0.0))
            if stop.size:
                e = err[stop]
                up = (e > 0.0) & (v[stop, :k] != 0.0).any(axis=1)
                if up.any():
                    i = stop[up]
                    y = 2.0 * e[up]
                    xx = hi[i] + y
                    ok = xx - hi[i] == y
                    hi[i[ok]] = xx[ok]
                done[stop] = True
                if done.all():
                    break
    out[:] = sgn * hi


def exact_to_float(ex: dict[str, Any]) -> np.ndarray:
    """The correctly rounded float64 of each exact sum (round half to even)."""
    d = np.ascontiguousarray(ex["digits"], dtype=np.float64)
    out = np.zeros(d.shape[0])
    if d.shape[1]:
        _round_rows(d, int(ex["lo"]), out)
    if ex["special"] is not None:
        out = out + ex["special"]
    return out


# -- chunk tables of the metrics -------------------------------------------------------------

def key_table_chunk(start: int, stop: int, X: Any, keys: Sequence[int], w: int | None,
                    lookups: Sequence[np.ndarray | None] | None = None) -> dict[str, Any]:
    """Chunk task: the combination table (:func:`combo_table`) of records ``start:stop`` of
    ``X`` on the columns ``keys`` (each mapped through its recoding lookup when given),
    weighted by column ``w``, and ``bad_weights``: how many weights are not finite positive
    numbers (the caller refuses the file when any is). Merged by :func:`merge_tables`, which
    rounds the merged weight sums once (the chunk's stay exact and unrounded: the caller
    adds ``weight`` to the result with :func:`with_weight`)."""
    block = np.asarray(X[start:stop], dtype=np.float64)
    if lookups is not None:
        block = block.copy()
        for j, lk in zip(keys, lookups):
            block[:, j] = apply_lookup(block[:, j], lk)
    weights = None
    bad = 0
    if w is not None:
        weights = np.ascontiguousarray(block[:, w])     # one strided read of the column
        ok = np.isfinite(weights) & (weights > 0)
        bad = int((~ok).sum())
    keys = list(keys)
    # a slice when the keys are consecutive columns: a view, not a copy
    codes = block[:, keys[0]:keys[-1] + 1] if keys and \
        keys == list(range(keys[0], keys[-1] + 1)) else block[:, keys]
    t = combo_table(codes, weights, rounded=False)
    t.pop("inverse")
    t["bad_weights"] = bad
    return t


def recoding_pairs(start: int, stop: int, A: Any, B: Any, ja: Sequence[int],
                   jb: Sequence[int]) -> dict[str, Any]:
    """Chunk task: per column pair (``ja[i]`` of ``A``, ``jb[i]`` of ``B``), the distinct
    (original code, masked code) pairs of records ``start:stop`` (both known), sorted.
    Merged by :func:`merge_recoding_pairs`, read by :func:`recoding_lookups`."""
    a = np.asarray(A[start:stop], dtype=np.float64)[:, list(ja)]
    b = np.asarray(B[start:stop], dtype=np.float64)[:, list(jb)]
    pairs = []
    for j in range(a.shape[1]):
        ok = ~np.isnan(a[:, j]) & ~np.isnan(b[:, j])
        pairs.append(np.unique(np.column_stack([a[ok, j], b[ok, j]]).astype(np.int64), axis=0)
                     if ok.any() else np.zeros((0, 2), np.int64))
    return {"pairs": pairs}


def merge_recoding_pairs(*parts: dict[str, Any]) -> dict[str, Any]:
    """``combine`` of :func:`recoding_pairs`: the union of each column's pairs, sorted."""
    return {"pairs": [np.unique(np.concatenate(ps), axis=0)
                      for ps in zip(*[p["pairs"] for p in parts])]}


def recoding_lookups(pairs: Sequence[np.ndarray]) -> list[np.ndarray | None]:
    """For each column's (original, masked) code pairs, the lookup original code -> masked
    code when the masked column is a global recoding of the original (every original code
    went to one masked code, and some changed), else None."""
    out: list[np.ndarray | None] = []
    for pr in pairs:
        a, b = pr[:, 0], pr[:, 1]
        if a.size == 0 or np.unique(a).size != a.size or np.array_equal(a, b):
            out.append(None)
            continue
        lk = np.full(int(a.max()) + 1, np.nan)
        lk[a] = b
        out.append(lk)
    return out


# -- (key combination, value) pair tables ------------------------------------------------------

def _empty_pairs(q: int) -> dict[str, Any]:
    return {"rows": np.zeros((0, q), np.int64), "value": np.zeros(0), "count":
            np.zeros(0, np.int64), "missing": np.int64(0)}


def pair_table(keys: np.ndarray, values: np.ndarray) -> dict[str, Any]:
    """Distinct (key combination, value) pairs of a block and their counts (the
    attribute-disclosure tables of a confidential column; the household and model-based
    risks' tables of a household id or a weight).

    Parameters
    ----------
    keys : ndarray, shape (n, q)
        Key codes (NaN: missing, a category of its own).
    values : ndarray, shape (n,)
        Values (NaN: missing, left out and counted).

    Returns
    -------
    dict
        ``rows`` (U, q) int64 (-1: missing), ``value`` (U,) float64, ``count`` (U,)
        int64, sorted by key combination then value; ``missing`` the number of
        records whose value is missing.
    """
    keys = np.asarray(keys, dtype=np.float64)
    values = np.asarray(values, dtype=np.float64)
    known = ~np.isnan(values)
    rows = key_rows(keys[known])
    t = _group_pairs(rows, values[known] + 0.0, np.ones(int(known.sum()), np.int64))
    t["missing"] = np.int64((~known).sum())
    return t


def _group_pairs(rows: np.ndarray, value: np.ndarray, count: np.ndarray) -> dict[str, Any]:
    """Sum ``count`` over equal (row, value) pairs; sorted by row then value."""
    if rows.shape[0] == 0:
        return _empty_pairs(rows.shape[1])
    urows, cls = unique_rows(rows)
    uval, vid = np.unique(value, return_inverse=True)
    key = cls * np.int64(uval.size) + vid.reshape(-1)
    ukey, inv = np.unique(key, return_inverse=True)
    cnt = np.bincount(inv.reshape(-1), weights=count, minlength=ukey.size)
    return {"rows": urows[ukey // uval.size], "value": uval[ukey % uval.size],
            "count": np.rint(cnt).astype(np.int64)}


def merge_pairs(*tables: dict[str, Any]) -> dict[str, Any]:
    """``combine``: merge per-column pair tables (dicts ``{column: table}``), adding counts."""
    out = {}
    for col in tables[0]:
        ts = [t[col] for t in tables]
        m = _group_pairs(np.concatenate([t["rows"] for t in ts]),
                         np.concatenate([t["value"] for t in ts]),
                         np.concatenate([t["count"] for t in ts]))
        m["missing"] = np.int64(sum(int(t["missing"]) for t in ts))
        out[col] = m
    return out


def merge_weighted_tables(*parts: dict[str, Any]) -> dict[str, Any]:
    """``combine`` of the weighted chunk results (household and model-based risk).

    Each part is ``{"tables": {name: pair table}, "bad_weights": int}`` (the tables of
    :func:`pair_table` over the key codes of :func:`weighted_chunk`, the count of its bad
    weights); the tables are merged by :func:`merge_pairs` and the bad weights added.
    """
    return {"tables": merge_pairs(*[p["tables"] for p in parts]),
            "bad_weights": sum(int(p["bad_weights"]) for p in parts)}


# -- distinct float rows ---------------------------------------------------------------------

def distinct_float_rows(R: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Distinct rows (bit for bit, one NaN) of float rows, and their counts.

    The rows come sorted lexicographically by their 64-bit patterns (as signed
    integers), the order of ``np.unique(..., axis=0)``. Each column is first
    replaced by the rank of its value among the column's distinct values (which keeps
    that order), so the rows pack into one integer key and factorise in linear time
    instead of sorting structured rows.
    """
    R = np.where(np.isnan(R), np.nan, R) + 0.0                   # one NaN, no -0.0
    bits = np.ascontiguousarray(R).view(np.int64)
    if bits.shape[0] == 0 or bits.shape[1] == 0:
        u, inv = unique_rows(bits)
        return np.ascontiguousarray(u).view(np.float64), np.bincount(inv, minlength=u.shape[0])
    import pandas as pd
    ranks = np.empty(bits.shape, np.int64)
    values = []
    for j in range(bits.shape[1]):
        r, v = pd.factorize(bits[:, j], sort=True)
        ranks[:, j] = r
        values.append(np.asarray(v, dtype=np.int64))
    u, inv = unique_rows(ranks)
    rows = np.empty(u.shape, np.int64)
    for j in range(u.shape[1]):
        rows[:, j] = values[j][u[:, j]]
    return rows.view(np.float64), np.bincount(inv, minlength=u.shape[0])
