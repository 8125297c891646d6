"""Throwaway credentials of ``fedcomp flower local``: a CA, a TLS certificate for the
loopback servers, and one SuperNode authentication key per node.

Everything is generated per run in the deployment's temporary home (a ``mkdtemp``
directory, mode 0700; private keys 0600) and removed with it. The CA signs one server
certificate (``127.0.0.1`` / ``localhost``) that the SuperLink serves on its one HTTP
port (Fleet, Control and Runtime APIs) and each SuperNode on its Runtime API; the
``flwr`` CLI and the SuperNodes trust that CA only. SuperNode keys are EC keys on a NIST
curve in OpenSSH format, what Flower's (1.41, 1.42) ``--auth-supernode-private-key`` and
``flwr supernode register`` read; the SuperLink runs with ``--enable-supernode-auth``, so
only the registered keys may join.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import os
from dataclasses import dataclass
from pathlib import Path

from .._extras import require

#: how long the throwaway certificates are valid (a run is bounded by --timeout anyway)
VALIDITY = dt.timedelta(days=2)


@dataclass(frozen=True)
class Credentials:
    """Paths of one deployment's credentials (see the module docstring)."""

    ca_cert: Path
    server_cert: Path
    server_key: Path
    node_keys: list[Path]  # private keys (OpenSSH); the public key is NAME.pub beside each

    def node_public(self, k: int) -> Path:
        return self.node_keys[k].with_suffix(".pub")


def _write_private(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)


def make_credentials(directory: Path, nodes: int, host: str = "127.0.0.1") -> Credentials:
    """Generate a CA, a server certificate for ``host`` and ``nodes`` SuperNode keys."""
    require("cryptography", "fedcomp flower local (TLS and SuperNode authentication)")
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    now = dt.datetime.now(dt.UTC)
    start, end = now - dt.timedelta(minutes=5), now + VALIDITY  # a little clock skew

    def name(common: str) -> x509.Name:
        return x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "fedcomp local"),
                          x509.NameAttribute(NameOID.COMMON_NAME, common)])

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = (x509.CertificateBuilder().subject_name(name("fedcomp throwaway CA"))
          .issuer_name(name("fedcomp throwaway CA")).public_key(ca_key.public_key())
          .serial_number(x509.random_serial_number()).not_valid_before(start)
          .not_valid_after(end)
          .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
          .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True,
                                       crl_sign=True, content_commitment=False,
                                       key_encipherment=False, data_encipherment=False,
                                       key_agreement=False, encipher_only=False,
                                       decipher_only=False), critical=True)
          .sign(ca_key, hashes.SHA256()))
    server_key = ec.generate_private_key(ec.SECP256R1())
    server = (x509.CertificateBuilder().subject_name(name(host)).issuer_name(ca.subject)
              .public_key(server_key.public_key()).serial_number(x509.random_serial_number())
              .not_valid_before(start).not_valid_after(end)
              .add_extension(x509.SubjectAlternativeName([
                  x509.IPAddress(ipaddress.ip_address(host)), x509.DNSName("localhost")]),
                  critical=False)
              .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
              .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]),
                             critical=False)
              .sign(ca_key, hashes.SHA256()))
    pem = serialization.Encoding.PEM
    creds = Credentials(ca_cert=directory / "ca.crt", server_cert=directory / "server.crt",
                        server_key=directory / "server.key",
                        node_keys=[directory / f"supernode{k}.key" for k in range(nodes)])
    creds.ca_cert.write_bytes(ca.public_bytes(pem))
    creds.server_cert.write_bytes(server.public_bytes(pem))
    _write_private(creds.server_key, server_key.private_bytes(
        pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    # the CA's key is not kept: nothing else can ever be signed by this CA
    for k, path in enumerate(creds.node_keys):
        key = ec.generate_private_key(ec.SECP384R1())
        _write_private(path, key.private_bytes(serialization.Encoding.PEM,
                                               serialization.PrivateFormat.OpenSSH,
                                               serialization.NoEncryption()))
        creds.node_public(k).write_bytes(key.public_key().public_bytes(
            serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH))
    return creds
