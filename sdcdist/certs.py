"""A private CA and TLS certificates for a test Dask cluster (``sdcdist certs``).

Dask's TLS is mutual: the scheduler, the workers and every client present a
certificate signed by the cluster's CA, and refuse peers that do not. This
module makes such a set with the ``cryptography`` package (the ``tls``
extra). For production, use your organisation's CA (or cert-manager on
Kubernetes) and mount the files the same way.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import os
from collections.abc import Sequence
from pathlib import Path

from .errors import SdcInputError, param_error

__all__ = ["make_certs", "ROLES", "MAX_DAYS"]

ROLES = ("scheduler", "worker", "client")


def _require_cryptography():
    try:
        from cryptography import x509  # noqa: F401
    except ImportError:
        raise SdcInputError("creating certificates needs the cryptography package: "
                            "pip install 'sdcdist[tls]'") from None


def _write(path: Path, data: bytes, private: bool) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600 if private else 0o644)
    with os.fdopen(fd, "wb") as f:
        f.write(data)


#: Longest validity of the test certificates, in days (ten years): a test cluster's
#: certificates need no more, and dates past the year 9999 cannot be written at all
MAX_DAYS = 3650


def make_certs(out_dir: str | os.PathLike, *, hosts: Sequence[str] = ("localhost", "127.0.0.1"),
               roles: Sequence[str] = ROLES, days: int = 30, overwrite: bool = False,
               ca_name: str = "sdcdist test CA") -> dict[str, Path]:
    """Write ``ca.crt`` and ``<role>.crt`` / ``<role>.key`` for each role into ``out_dir``.

    Parameters
    ----------
    out_dir : path
        Created if missing. Private keys are written with mode 0600.
    hosts : sequence of str
        DNS names and IP addresses put in every certificate's SubjectAltName
        (Dask checks the CA signature, not host names, but other tools do).
    roles : sequence of str
        One key pair per role, each signed by the CA.
    days : int
        Validity from now, in days (1 to :data:`MAX_DAYS`).
    overwrite : bool
        Replace existing files.

    Returns
    -------
    dict
        ``{"ca": ca.crt, "<role>-cert": ..., "<role>-key": ...}`` paths. The CA's
        private key is not kept: make a new set to add a certificate.
    """
    _require_cryptography()
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    if not 1 <= days <= MAX_DAYS:
        raise param_error("days", "certs", f"an integer in [1, {MAX_DAYS}]", days)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    names = ["ca.crt"] + [f"{r}.{ext}" for r in roles for ext in ("crt", "key")]
    existing = [n for n in names if (out / n).exists()]
    if existing and not overwrite:
        raise SdcInputError(f"{str(out)!r} already has {', '.join(existing)}; pass --overwrite "
                            "to replace them, or choose another directory")
    now = dt.datetime.now(dt.timezone.utc) - dt.timedelta(minutes=5)
    until = now + dt.timedelta(days=days)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, ca_name)])
    ca_cert = (x509.CertificateBuilder().subject_name(ca_subject).issuer_name(ca_subject)
               .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
               .not_valid_before(now).not_valid_after(until)
               .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
               .add_extension(x509.KeyUsage(digital_signature=False, content_commitment=False,
                                            key_encipherment=False, data_encipherment=False,
                                            key_agreement=False, key_cert_sign=True,
                                            crl_sign=True, encipher_only=False,
                                            decipher_only=False), critical=True)
               .sign(ca_key, hashes.SHA256()))
    sans: list[x509.GeneralName] = []
    for h in hosts:
        try:
            sans.append(x509.IPAddress(ipaddress.ip_address(h)))
        except ValueError:
            sans.append(x509.DNSName(h))
    paths = {"ca": out / "ca.crt"}
    _write(paths["ca"], ca_cert.public_bytes(serialization.Encoding.PEM), private=False)
    for role in roles:
        key = ec.generate_private_key(ec.SECP256R1())
        cert = (x509.CertificateBuilder()
                .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME,
                                                            f"sdcdist-{role}")]))
                .issuer_name(ca_subject).public_key(key.public_key())
                .serial_number(x509.random_serial_number())
                .not_valid_before(now).not_valid_after(until)
                .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
                .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH,
                                                      ExtendedKeyUsageOID.CLIENT_AUTH]),
                               critical=False)
                .add_extension(x509.SubjectAlternativeName(sans), critical=False)
                .sign(ca_key, hashes.SHA256()))
        paths[f"{role}-cert"] = out / f"{role}.crt"
        paths[f"{role}-key"] = out / f"{role}.key"
        _write(paths[f"{role}-cert"], cert.public_bytes(serialization.Encoding.PEM), False)
        _write(paths[f"{role}-key"], key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption()), private=True)
    return paths
