"""Object storage: fsspec URLs for datasets and cubes, credentials never from a spec.

Datasets and cubes may be local paths or fsspec URLs (``s3://bucket/x.zarr``,
``gs://...``, ``file:///...``, ``memory://...``). The cloud libraries are the
optional extra ``sdcdist[cloud]`` (s3fs, gcsfs). Credentials come only from
where those libraries look by themselves: environment variables
(``AWS_ACCESS_KEY_ID``/``AWS_SECRET_ACCESS_KEY``, ``AWS_ENDPOINT_URL`` for
S3-compatible stores, ``GOOGLE_APPLICATION_CREDENTIALS`` pointing at a mounted
key file, fsspec's ``FSSPEC_<PROTOCOL>_<OPTION>`` variables) or instance and
workload identities. A spec holding something that looks like a credential,
or a URL with a password in it, is refused before anything is read.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from .errors import SdcInputError

__all__ = ["refuse_credentials", "check_url", "is_url", "local_path", "CREDENTIAL_KEY"]

#: Key names that hold secrets (matched case-insensitively anywhere in the key).
CREDENTIAL_KEY = re.compile(
    r"(secret|password|passwd|token|credential|private[_-]?key|access[_-]?key|api[_-]?key|"
    r"session[_-]?key|^auth$|authorization|account[_-]?key)", re.IGNORECASE)

_MISSING_LIBRARY = {"s3": "s3fs", "s3a": "s3fs", "gs": "gcsfs", "gcs": "gcsfs"}


def is_url(path: str) -> bool:
    return "://" in str(path)


def local_path(url: str) -> str:
    """``file:///a/b`` as the plain path ``/a/b`` (local writes then create folders); else as is."""
    url = str(url)
    if url.startswith("file://"):
        from urllib.request import url2pathname
        return url2pathname(urlsplit(url).path)
    return url


def check_url(url: str, *, what: str) -> str:
    """Refuse a URL that embeds a password or token; say which extra a scheme needs."""
    url = str(url)
    if not is_url(url):
        return url
    parts = urlsplit(url)
    if parts.password is not None or (parts.username and parts.scheme not in ("file",)):
        raise SdcInputError(
            f"{what} has credentials in its URL ({parts.scheme}://<user>...@{parts.hostname}); "
            "never put credentials in a URL or a spec: set them in the environment "
            "(e.g. AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY) or mount them from a secret")
    lib = _MISSING_LIBRARY.get(parts.scheme)
    if lib is not None:
        import importlib.util
        if importlib.util.find_spec(lib) is None:
            raise SdcInputError(f"{what} is a {parts.scheme}:// URL, which needs the {lib} "
                                "package: pip install 'sdcdist[cloud]'")
    return url


def refuse_credentials(doc: Any, where: str = "the spec") -> None:
    """Raise if any key of a (nested) spec looks like a credential, or a URL holds one.

    The message names the key's location but never repeats its value.
    """
    if isinstance(doc, Mapping):
        for k, v in doc.items():
            loc = f"{where}.{k}" if where != "the spec" else str(k)
            if isinstance(k, str) and CREDENTIAL_KEY.search(k):
                raise SdcInputError(
                    f"the spec has a credential-like key {loc!r}; credentials are never read "
                    "from a spec (it is stored in every cube). Remove it and provide the "
                    "credential through the environment or a mounted secret (AWS_* / "
                    "GOOGLE_APPLICATION_CREDENTIALS variables, FSSPEC_<PROTOCOL>_<OPTION>)")
            refuse_credentials(v, loc)
    elif isinstance(doc, (list, tuple)):
        for i, v in enumerate(doc):
            refuse_credentials(v, f"{where}[{i}]")
    elif isinstance(doc, str) and is_url(doc):
        check_url(doc, what=f"the value of {where!r}")
