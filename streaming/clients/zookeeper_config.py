"""`kcsim shadow --zookeeper-config FILE`: how the shadow authenticates to ZooKeeper.

A Java properties file with these keys, each mapped onto kazoo's client arguments:

    digest=USER:PASSWORD          digest auth (kazoo auth_data ("digest", ...)), as a
                                  cluster whose znodes carry digest ACLs needs
    sasl.mechanism=DIGEST-MD5     SASL (kazoo sasl_options): DIGEST-MD5 or GSSAPI, with
    sasl.username, sasl.password  (DIGEST-MD5) or sasl.service, sasl.principal (GSSAPI)
    ssl=true                      TLS (kazoo use_ssl), with PEM files:
    ssl.ca, ssl.certfile, ssl.keyfile, ssl.keyfile.password,
    ssl.verify=true|false         (verify_certs; default true),
    ssl.check.hostname=true|false (check_hostname; default false, as kazoo)

A chroot stays part of the address (`--zookeeper HOST:PORT/chroot`). Values are never
shown: the repr holds the keys only, errors name keys.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from controller.config import ConfigError, read_properties, shown_key

SASL_MECHANISMS = ("DIGEST-MD5", "GSSAPI")
KEYS = frozenset(
    {
        "digest",
        "sasl.mechanism",
        "sasl.username",
        "sasl.password",
        "sasl.service",
        "sasl.principal",
        "ssl",
        "ssl.ca",
        "ssl.certfile",
        "ssl.keyfile",
        "ssl.keyfile.password",
        "ssl.verify",
        "ssl.check.hostname",
    }
)


class ZooKeeperConfigError(ConfigError):
    """A --zookeeper-config entry kcsim cannot use; names the key, never the value."""


@dataclass(frozen=True, slots=True)
class ZooKeeperClientConfig:
    properties: Mapping[str, str] = field(default_factory=dict, repr=False)

    def __repr__(self) -> str:
        return f"ZooKeeperClientConfig(keys={sorted(self.properties)})"

    @classmethod
    def load(cls, path: Path | None) -> ZooKeeperClientConfig:
        if path is None:
            return cls()
        try:
            text = path.read_bytes().decode("latin-1")
        except OSError as error:
            raise ZooKeeperConfigError(
                f"cannot read --zookeeper-config {path}: {error.strerror}"
            ) from None
        config = cls(read_properties(text))
        config.kazoo_args()  # checked now, not at connection time
        return config

    @property
    def authenticated(self) -> bool:
        return "digest" in self.properties or "sasl.mechanism" in self.properties

    def kazoo_args(self) -> dict[str, Any]:
        """KazooClient keyword arguments."""
        props = self.properties
        unknown = sorted(set(props) - KEYS)
        if unknown:
            raise ZooKeeperConfigError(
                f"--zookeeper-config: unsupported key {shown_key(unknown[0], KEYS)} (supported: "
                + ", ".join(sorted(KEYS))
                + ")"
            )
        out: dict[str, Any] = {}
        if "digest" in props:
            user, sep, password = props["digest"].partition(":")
            if not sep or not user or not password:
                raise ZooKeeperConfigError("--zookeeper-config: digest must be USER:PASSWORD")
            out["auth_data"] = [("digest", props["digest"])]
        out.update(_sasl(props))
        out.update(_ssl(props))
        return out


def _flag(props: Mapping[str, str], key: str, default: bool) -> bool:
    value = props.get(key)
    if value is None:
        return default
    if value.strip().lower() not in ("true", "false"):
        raise ZooKeeperConfigError(f"--zookeeper-config: {key} must be true or false")
    return value.strip().lower() == "true"


def _sasl(props: Mapping[str, str]) -> dict[str, Any]:
    sasl_keys = sorted(k for k in props if k.startswith("sasl."))
    if not sasl_keys:
        return {}
    mechanism = props.get("sasl.mechanism", "").strip().upper()
    if mechanism not in SASL_MECHANISMS:
        raise ZooKeeperConfigError(
            f"--zookeeper-config: {sasl_keys[0]} needs sasl.mechanism, one of "
            + ", ".join(SASL_MECHANISMS)
        )
    options: dict[str, str] = {"mechanism": mechanism}
    needed = ("sasl.username", "sasl.password") if mechanism == "DIGEST-MD5" else ()
    for key in needed:
        if not props.get(key):
            raise ZooKeeperConfigError(
                f"--zookeeper-config: sasl.mechanism {mechanism} needs {key}"
            )
    for key in ("sasl.username", "sasl.password", "sasl.service", "sasl.principal"):
        if key in props:
            options[key.removeprefix("sasl.")] = props[key]
    return {"sasl_options": options}


def _ssl(props: Mapping[str, str]) -> dict[str, Any]:
    enabled = _flag(props, "ssl", False)
    ssl_keys = sorted(k for k in props if k.startswith("ssl."))
    if not enabled:
        if ssl_keys:
            raise ZooKeeperConfigError(f"--zookeeper-config: {ssl_keys[0]} needs ssl=true")
        return {}
    out: dict[str, Any] = {
        "use_ssl": True,
        "verify_certs": _flag(props, "ssl.verify", True),
        "check_hostname": _flag(props, "ssl.check.hostname", False),
    }
    for key, argument in (
        ("ssl.ca", "ca"),
        ("ssl.certfile", "certfile"),
        ("ssl.keyfile", "keyfile"),
        ("ssl.keyfile.password", "keyfile_password"),
    ):
        if key in props:
            out[argument] = props[key]
    return out
