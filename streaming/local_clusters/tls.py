"""A self-signed certificate authority and a server certificate for the local clusters
(`kcsim kafka-local start --tls`), made with the JDK's keytool.

keytool comes with the JDK every local broker already needs, so TLS adds no dependency.
What it writes, in DIR (mode 0700):

    ca.pem            the CA's certificate (PEM): the truststore of every client, Java
                      (`ssl.truststore.type=PEM`) and Python (kafka-python `ssl_cafile`,
                      kazoo `ca`) alike; public
    server.p12        the server's key and certificate chain (PKCS12), for the JVMs
    store.password    server.p12's password (mode 0600); passed to keytool as a file
                      (`-storepass:file`), never on a command line

The server certificate names 127.0.0.1 and localhost (subject alternative names), so
clients verify the host as well as the chain. The CA's key lives only until it has signed
the server's certificate: nothing else can be issued by it afterwards.
"""

from __future__ import annotations

import os
import secrets
import subprocess
from dataclasses import dataclass
from pathlib import Path

from streaming.local_clusters.processes import LocalClusterError, java

VALIDITY_DAYS = "3650"
KEY = ("-keyalg", "EC", "-groupname", "secp256r1")  # fast to make, small handshakes
SERVER_NAMES = "SAN=ip:127.0.0.1,dns:localhost"


@dataclass(frozen=True, slots=True)
class TlsFiles:
    """Where a TLS directory's files are; the password is read only when a JVM needs it."""

    root: Path

    @property
    def ca(self) -> Path:
        return self.root / "ca.pem"

    @property
    def keystore(self) -> Path:
        return self.root / "server.p12"

    @property
    def password_file(self) -> Path:
        return self.root / "store.password"

    def complete(self) -> bool:
        return all(p.is_file() for p in (self.ca, self.keystore, self.password_file))

    def password(self) -> str:
        return self.password_file.read_text(encoding="utf-8").strip()


def keytool() -> str:
    """keytool next to the java kcsim runs the brokers with."""
    candidate = Path(java()).resolve().parent / "keytool"
    return str(candidate) if candidate.is_file() else "keytool"


def ensure_tls(root: Path) -> TlsFiles:
    """The directory's CA and server keystore, made on first use (kept across restarts,
    so clients' truststores stay valid)."""
    files = TlsFiles(root.resolve())
    if files.complete():
        return files
    root.mkdir(parents=True, exist_ok=True)
    os.chmod(root, 0o700)
    for path in root.iterdir():  # a half-made directory (an interrupted start)
        path.unlink()
    write_private(files.password_file, secrets.token_urlsafe(24) + "\n")
    ca_store = root / "ca.p12"
    request = root / "server.csr"
    signed = root / "server.pem"
    validity = ("-validity", VALIDITY_DAYS)
    # (keystore, keytool arguments) in order
    steps: tuple[tuple[Path, tuple[str, ...]], ...] = (
        (ca_store, ("-genkeypair", "-alias", "ca", *KEY, "-dname", "CN=kcsim local CA",
                    "-ext", "bc:c", *validity)),
        (ca_store, ("-exportcert", "-rfc", "-alias", "ca", "-file", str(files.ca))),
        (files.keystore, ("-genkeypair", "-alias", "server", *KEY, "-dname", "CN=127.0.0.1",
                          *validity)),
        (files.keystore, ("-certreq", "-alias", "server", "-file", str(request))),
        (ca_store, ("-gencert", "-alias", "ca", "-rfc", "-infile", str(request),
                    "-outfile", str(signed), *validity, "-ext", SERVER_NAMES,
                    "-ext", "eku=serverAuth,clientAuth")),
        # the chain: the CA (trusted) first, then the signed reply replaces the self-signed
        (files.keystore, ("-importcert", "-noprompt", "-alias", "ca", "-file", str(files.ca))),
        (files.keystore, ("-importcert", "-noprompt", "-alias", "server", "-file", str(signed))),
    )  # fmt: skip
    try:
        for keystore, args in steps:
            _keytool(*args, "-keystore", str(keystore), "-storetype", "PKCS12",
                     "-storepass:file", str(files.password_file))  # fmt: skip
    finally:
        for path in (ca_store, request, signed):
            path.unlink(missing_ok=True)
    os.chmod(files.keystore, 0o600)
    return files


def _keytool(*args: str) -> None:
    done = subprocess.run(
        [keytool(), "-J-Xmx64m", *args], capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        # keytool's messages name files and aliases, never the password (it reads a file)
        raise LocalClusterError(f"keytool {args[0]} failed: {(done.stdout + done.stderr).strip()}")


def write_private(path: Path, text: str) -> None:
    """Write a file only its owner can read (it holds a secret)."""
    path.unlink(missing_ok=True)
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
        handle.write(text)
