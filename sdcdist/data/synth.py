"""A seeded generator of realistic numeric microdata, like income and tax files.

Columns are skewed (log-normal incomes), correlated through shared latent
factors, have a share of exact zeros (people with no business income, no
dividends, ...) and a few extreme outliers. Records are generated in fixed
blocks of :data:`BLOCK` records, each from its own ``SeedSequence`` child, so the
file for a given seed is the same whatever chunk size it is written with, and
any slice can be generated without the rest.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from .. import integrity
from ..errors import SdcInputError, param_error
from .microdata import DEFAULT_CHUNK_ROWS, Microdata
from .staging import new_values_array, open_zarr_group, Staging

__all__ = ["COLUMNS", "generate", "generate_block", "write_synthetic", "BLOCK"]

BLOCK = 8192

#: (name, latent factor loadings (income, wealth, age), log-scale, log-sd, zero share)
_SPEC = [
    ("WAGES",     (0.9, 0.1, 0.2), 10.4, 0.8, 0.15),
    ("BUSINC",    (0.5, 0.4, 0.1), 9.6, 1.2, 0.80),
    ("INTINC",    (0.2, 0.8, 0.3), 6.0, 1.5, 0.45),
    ("DIVINC",    (0.2, 0.9, 0.2), 7.0, 1.6, 0.70),
    ("PENSION",   (0.1, 0.3, 0.9), 9.5, 0.7, 0.75),
    ("TAXINC",    (0.95, 0.3, 0.1), 10.2, 0.9, 0.10),
    ("FEDTAX",    (0.95, 0.35, 0.1), 8.2, 1.1, 0.20),
    ("STATETAX",  (0.9, 0.3, 0.1), 6.9, 1.1, 0.30),
    ("FICA",      (0.9, 0.0, -0.3), 8.0, 0.7, 0.18),
    ("PROPTAX",   (0.3, 0.8, 0.4), 7.5, 0.9, 0.40),
    ("CHARITY",   (0.4, 0.6, 0.3), 6.0, 1.3, 0.55),
    ("AGE",       None, 0.0, 0.0, 0.0),
    ("HOURS",     None, 0.0, 0.0, 0.0),
]
COLUMNS = tuple(s[0] for s in _SPEC)
OUTLIER_RATE = 2e-4


def generate_block(seed: int, block: int, rows: int, m: int) -> np.ndarray:
    """Records ``block*BLOCK .. block*BLOCK+rows-1`` of the file for ``seed`` (m columns)."""
    from scipy.special import ndtri   # here, not at import: keeps the command line's start fast
    rng = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(block,)))
    f = rng.standard_normal((rows, 3))          # latent income, wealth, age factors
    out = np.empty((rows, m))
    for j, (name, load, mu, sd, zero) in enumerate(_SPEC[:m]):
        eps = rng.standard_normal(rows)
        if name == "AGE":
            out[:, j] = np.clip(np.round(45 + 15 * (0.8 * f[:, 2] + 0.6 * eps)), 16, 99)
            continue
        if name == "HOURS":
            h = np.round(38 + 8 * (0.5 * f[:, 0] + 0.85 * eps))
            out[:, j] = np.where(rng.random(rows) < 0.12, 0.0, np.clip(h, 1, 99))
            continue
        load = np.asarray(load)
        w = (load / np.linalg.norm(load)) @ f.T    # unit-variance latent score
        z = 0.85 * w + np.sqrt(1 - 0.85**2) * eps
        v = np.exp(mu + sd * z)
        # zeros go mostly to records low on the column's latent score
        gate = 0.7 * w + np.sqrt(1 - 0.7**2) * rng.standard_normal(rows)
        v = np.where(gate < ndtri(zero) if zero > 0 else False, 0.0, v)
        out_mask = rng.random(rows) < OUTLIER_RATE
        v = np.where(out_mask, v * rng.uniform(20, 200, rows) + np.exp(mu + 3 * sd), v)
        out[:, j] = np.round(v)
    return out


def _check(n: int, m: int) -> None:
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 3:
        raise param_error("rows", "synth", "an integer >= 3", n)
    if isinstance(m, bool) or not isinstance(m, (int, np.integer)) or not 1 <= m <= len(COLUMNS):
        raise param_error("columns", "synth", f"an integer in [1, {len(COLUMNS)}]", m)


def iter_blocks(n: int, *, columns: int = 8, seed: int = 0) -> Iterator[np.ndarray]:
    """The file as consecutive blocks of at most :data:`BLOCK` records."""
    _check(n, columns)
    for b, start in enumerate(range(0, n, BLOCK)):
        yield generate_block(seed, b, min(BLOCK, n - start), columns)


def generate(n: int, *, columns: int = 8, seed: int = 0) -> Microdata:
    """A synthetic file of ``n`` records and the first ``columns`` of :data:`COLUMNS`.

    Returns
    -------
    Microdata
        values of shape (n, columns), float64 (integer-valued, non-negative).
    """
    values = np.concatenate(list(iter_blocks(n, columns=columns, seed=seed)))
    from .microdata import values_fingerprint
    return Microdata(values, COLUMNS[:columns], {}, values_fingerprint(values))


def write_synthetic(store: str, n: int, *, columns: int = 8, seed: int = 0,
                    chunk_rows: int = DEFAULT_CHUNK_ROWS, overwrite: bool = False,
                    progress: bool = False) -> str:
    """Write a synthetic file straight to a Zarr store, one chunk at a time.

    Memory stays at about one chunk, whatever ``n`` is.
    """
    _check(n, columns)
    if chunk_rows < 1:
        raise param_error("chunk_rows", "synth", "an integer >= 1", chunk_rows)
    import hashlib
    digest = hashlib.sha256(f"sdcdist-synth:{seed}:{n}:{columns}".encode()).hexdigest()
    with Staging(store, overwrite) as tmp:
        group = open_zarr_group(tmp, "w")
        arr = new_values_array(group, n, columns, chunk_rows)
        buf: list[np.ndarray] = []
        buffered = 0
        written = 0
        bar = _progress(n, progress)
        values_digest = integrity.ValuesDigest()
        for block in iter_blocks(n, columns=columns, seed=seed):
            buf.append(block)
            buffered += block.shape[0]
            while buffered >= chunk_rows or (written + buffered == n and buffered):
                cat = np.concatenate(buf)
                take = min(chunk_rows, cat.shape[0])
                arr[written:written + take] = cat[:take]
                values_digest.update(cat[:take])
                written += take
                buf = [cat[take:]] if take < cat.shape[0] else []
                buffered = cat.shape[0] - take
                bar(take)
        group.attrs.update({"columns": list(COLUMNS[:columns]), "roles": {}, "n_records": n,
                            "source": f"synthetic(seed={seed})", "sha256": digest})
        integrity.seal(group, values_sha256=values_digest.hexdigest())
    return store


def _progress(total: int, show: bool):
    if not show:
        return lambda k: None
    from tqdm import tqdm
    bar = tqdm(total=total, unit="rec", unit_scale=True, desc="synth")
    return bar.update
