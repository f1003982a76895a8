"""Checksummed Zarr chunks: a corrupted chunk is reported, never read as numbers.

Every array sdcdist writes (datasets and cubes) is encoded with Zstandard
followed by a CRC-32C checksum of the compressed bytes (the Zarr 3
``crc32c`` codec). Reading a chunk whose bytes changed on disk or in transit
then fails inside Zarr; :func:`read` turns that failure into a
:class:`CorruptChunkError` naming the store, the array and the chunk(s).
"""

from __future__ import annotations

import itertools
from typing import Any

from .errors import SdcInputError

__all__ = ["CorruptChunkError", "compressors", "read", "verify_group", "is_checksum_error"]

_CHECKSUM_MESSAGE = "checksum do not match"


class CorruptChunkError(SdcInputError):
    """A stored chunk failed its checksum: the store is damaged, not the user's input."""


def compressors() -> tuple[Any, ...]:
    """The bytes-to-bytes codecs of every sdcdist array: Zstandard, then CRC-32C."""
    from zarr.codecs import Crc32cCodec, ZstdCodec
    return (ZstdCodec(level=3), Crc32cCodec())


def is_checksum_error(exc: BaseException) -> bool:
    """Whether ``exc`` (or its cause) is Zarr's CRC-32C mismatch."""
    while exc is not None:
        if isinstance(exc, ValueError) and _CHECKSUM_MESSAGE in str(exc):
            return True
        exc = exc.__cause__ or exc.__context__  # type: ignore[assignment]
    return False


def _chunk_ranges(shape: tuple[int, ...], chunks: tuple[int, ...],
                  key: Any) -> list[tuple[int, ...]]:
    """Grid positions of the chunks a basic-slicing ``key`` touches (all when unsure)."""
    if not isinstance(key, tuple):
        key = (key,)
    key = key + (slice(None),) * (len(shape) - len(key))
    axes = []
    for k, n, c in zip(key, shape, chunks):
        nchunks = max(1, -(-n // c))
        if isinstance(k, slice) and (k.step in (None, 1)):
            start, stop, _ = k.indices(n)
            axes.append(range(start // c, max(start // c + 1, -(-stop // c))) if stop > start
                        else range(0))
        elif isinstance(k, int):
            axes.append(range((k % n) // c, (k % n) // c + 1))
        else:
            axes.append(range(nchunks))
    return list(itertools.product(*axes))


def _bad_chunks(array: Any, candidates: list[tuple[int, ...]]) -> list[tuple[int, ...]]:
    bad = []
    chunks = tuple(array.chunks)
    for pos in candidates:
        region = tuple(slice(i * c, min((i + 1) * c, n))
                       for i, c, n in zip(pos, chunks, array.shape))
        try:
            array[region]
        except Exception as exc:
            if is_checksum_error(exc):
                bad.append(pos)
            else:
                raise
    return bad


def corruption_error(store: str, name: str, chunks: list[tuple[int, ...]]) -> CorruptChunkError:
    where = ", ".join(".".join(str(i) for i in pos) for pos in chunks[:10])
    more = f" and {len(chunks) - 10} more" if len(chunks) > 10 else ""
    return CorruptChunkError(
        f"{store!r} is corrupted: chunk(s) {where}{more} of the array {name!r} failed the "
        "CRC-32C checksum (the stored bytes changed after they were written). Nothing was "
        "read from them; restore the store from a copy, or recreate it (sdcdist ingest / "
        "rerun the audit with --overwrite).")


def read(array: Any, key: Any = slice(None), *, store: str = "", name: str | None = None) -> Any:
    """``array[key]``, with a checksum failure reported as :class:`CorruptChunkError`."""
    try:
        return array[key]
    except Exception as exc:
        if not is_checksum_error(exc):
            raise
        name = name or str(getattr(array, "path", "") or getattr(array, "name", "?"))
        bad = _bad_chunks(array, _chunk_ranges(tuple(array.shape), tuple(array.chunks), key))
        raise corruption_error(store, name, bad or [("?",)]) from None


def verify_group(store: str) -> None:
    """Read every chunk of every array of a Zarr group; raise on the first corrupt array."""
    import zarr
    group = zarr.open_group(store, mode="r")
    for name, array in sorted(group.arrays()):
        read(array, store=store, name=name)
