"""`--kafka-config FILE`: a Kafka client properties file (as Kafka's tools take
`--command-config`), for the Spark source and for the kafka-python clients (the sink's
among them).

Spark's Kafka connector takes the properties as they are, each as a `kafka.`-prefixed
option. kafka-python has its own argument names, so the properties it understands are
translated (`kafka_python`); any other key is refused at start-up with its name (never
its value). A value is never part of a message, a repr or a log line: `KafkaClientConfig`
shows its keys only.
"""

from __future__ import annotations

import argparse
import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from controller.config import ConfigError, read_properties, shown_key

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
# The login module each mechanism's JAAS line must name (the part after the last dot).
LOGIN_MODULES = {
    "PLAIN": "PlainLoginModule",
    "SCRAM-SHA-256": "ScramLoginModule",
    "SCRAM-SHA-512": "ScramLoginModule",
}
SUPPORTED_KEYS = frozenset(
    {
        "security.protocol",
        "sasl.mechanism",
        "sasl.jaas.config",
        "ssl.truststore.location",
        "ssl.truststore.type",
        "ssl.keystore.location",
        "ssl.keystore.type",
        "ssl.key.password",
        "ssl.endpoint.identification.algorithm",
    }
)
# Bounds on what a kafka-python client waits for a broker that refuses it: a wrong
# password is an error within seconds, not endless reconnects.
BOOTSTRAP_TIMEOUT_MS = 15_000
RECONNECT_BACKOFF_MAX_MS = 2_000
# One JAAS option: name=value, the value quoted ("..." with \-escapes) or bare.
_JAAS_OPTION = re.compile(r'([A-Za-z_][\w.-]*)\s*=\s*("(?:[^"\\]|\\.)*"|[^\s;]+)')


class KafkaConfigError(ConfigError):
    """A client property kcsim cannot use; the message names the key, never its value."""


@dataclass(frozen=True, slots=True)
class KafkaClientConfig:
    """Kafka client properties; `repr` shows the keys only."""

    properties: Mapping[str, str] = field(default_factory=dict, repr=False)

    def __repr__(self) -> str:
        return f"KafkaClientConfig(keys={sorted(self.properties)})"

    @classmethod
    def load(cls, path: Path | None) -> KafkaClientConfig:
        """Read and check `path` (None: no properties, a plaintext connection)."""
        if path is None:
            return cls()
        try:
            text = path.read_bytes().decode("latin-1")
        except OSError as error:
            raise KafkaConfigError(f"cannot read --kafka-config {path}: {error.strerror}") from None
        config = cls(read_properties(text))
        config.kafka_python()  # every key and value checked now, not at first use
        return config

    def spark_options(self) -> dict[str, str]:
        """The properties as options of Spark's Kafka source."""
        return {f"kafka.{key}": value for key, value in self.properties.items()}

    def kafka_python(self) -> dict[str, Any]:
        """The properties as kafka-python client arguments, with bounded retries."""
        props = dict(self.properties)
        unknown = sorted(set(props) - SUPPORTED_KEYS)
        if unknown:
            shown = shown_key(unknown[0], SUPPORTED_KEYS)
            raise KafkaConfigError(
                f"--kafka-config: unsupported key {shown} (supported: "
                + ", ".join(sorted(SUPPORTED_KEYS))
                + ")"
            )
        protocol = props.get("security.protocol", "PLAINTEXT").strip().upper()
        if protocol not in PROTOCOLS:
            raise KafkaConfigError(
                f"--kafka-config: security.protocol must be one of {', '.join(PROTOCOLS)}"
            )
        out: dict[str, Any] = {
            "security_protocol": protocol,
            "bootstrap_timeout_ms": BOOTSTRAP_TIMEOUT_MS,
            "reconnect_backoff_max_ms": RECONNECT_BACKOFF_MAX_MS,
        }
        if protocol.startswith("SASL_"):
            out.update(_sasl(props))
        elif "sasl.mechanism" in props or "sasl.jaas.config" in props:
            raise KafkaConfigError(
                f"--kafka-config: sasl.* keys need security.protocol SASL_PLAINTEXT or "
                f"SASL_SSL, not {protocol}"
            )
        if protocol in ("SSL", "SASL_SSL"):
            out.update(_ssl(props))
        elif any(key.startswith("ssl.") for key in props):
            raise KafkaConfigError(
                f"--kafka-config: ssl.* keys need security.protocol SSL or SASL_SSL, not {protocol}"
            )
        return out


def _sasl(props: Mapping[str, str]) -> dict[str, Any]:
    mechanism = props.get("sasl.mechanism", "GSSAPI").strip().upper()
    if mechanism not in MECHANISMS:
        raise KafkaConfigError(
            f"--kafka-config: sasl.mechanism must be one of {', '.join(MECHANISMS)} "
            "(kcsim's Python clients support no other)"
        )
    jaas = props.get("sasl.jaas.config")
    if jaas is None:
        raise KafkaConfigError(f"--kafka-config: sasl.mechanism {mechanism} needs sasl.jaas.config")
    username, password = parse_jaas(jaas, LOGIN_MODULES[mechanism])
    return {
        "sasl_mechanism": mechanism,
        "sasl_plain_username": username,
        "sasl_plain_password": password,
    }


def parse_jaas(jaas: str, module: str) -> tuple[str, str]:
    """The username and password of a JAAS line `<...>.<module> required username="..."
    password="...";`. Errors say what is wrong with the line, never what it holds."""
    head, _, options_text = jaas.strip().partition(" ")
    if head.rsplit(".", 1)[-1] != module:
        raise KafkaConfigError(f"--kafka-config: sasl.jaas.config must use {module}")
    options: dict[str, str] = {}
    for name, raw in _JAAS_OPTION.findall(options_text):
        value = raw
        if raw.startswith('"'):
            value = re.sub(r"\\(.)", r"\1", raw[1:-1])
        options[name] = value
    missing = [name for name in ("username", "password") if not options.get(name)]
    if missing:
        raise KafkaConfigError(
            f"--kafka-config: sasl.jaas.config has no {' and no '.join(missing)}"
        )
    return options["username"], options["password"]


# What to give instead of a Java store, and how to get it from one.
_PEM_INSTEAD = {
    "truststore": "the CA certificates in one PEM file "
    "(`keytool -exportcert -rfc -alias ALIAS -keystore STORE` prints one)",
    "keystore": "the private key (PKCS#8) and certificate chain in one PEM file "
    "(`openssl pkcs12 -in STORE.p12 -out KEY.pem` makes one)",
}


def _ssl(props: Mapping[str, str]) -> dict[str, Any]:
    """PEM files only: kafka-python reads certificates through Python's ssl module."""
    out: dict[str, Any] = {}
    for kind in ("truststore", "keystore"):
        kind_key = f"ssl.{kind}.type"
        if f"ssl.{kind}.location" in props and props.get(kind_key, "").strip().upper() != "PEM":
            raise KafkaConfigError(
                f"--kafka-config: {kind_key} must be PEM for kcsim's Python clients (they "
                f"cannot read JKS or PKCS12 stores): give ssl.{kind}.type=PEM and, as "
                f"ssl.{kind}.location, {_PEM_INSTEAD[kind]}; Spark's Java client reads the "
                "same PEM file"
            )
    if "ssl.truststore.location" in props:
        out["ssl_cafile"] = props["ssl.truststore.location"]
    if "ssl.keystore.location" in props:
        # a PEM keystore holds the private key and the certificate chain in one file
        out["ssl_certfile"] = props["ssl.keystore.location"]
        out["ssl_keyfile"] = props["ssl.keystore.location"]
    if "ssl.key.password" in props:
        out["ssl_password"] = props["ssl.key.password"]
    algorithm = props.get("ssl.endpoint.identification.algorithm", "https").strip()
    out["ssl_check_hostname"] = algorithm.lower() == "https"
    return out


class ClientFailures(logging.Handler):
    """What kafka-python logs about refused connections while a client is in use, to say
    why it timed out: a bootstrap that never succeeds only says "Unable to bootstrap".
    A broker refusing SASL credentials answers with an authentication error, or (after
    the first refusal) just closes the connection: with SASL configured, connections
    closed by the broker are read as refused credentials."""

    def __init__(self, client: KafkaClientConfig | None = None) -> None:
        super().__init__(logging.DEBUG)
        protocol = (client or KafkaClientConfig()).properties.get("security.protocol", "")
        self.sasl = protocol.strip().upper().startswith("SASL_")
        self.authentication_failed = False
        self.handshake_failed = False
        self.certificate_refused = False
        self.disconnected = False

    def emit(self, record: logging.LogRecord) -> None:
        text = record.getMessage()
        if "AuthenticationFailed" in text or "Authentication failed" in text:
            self.authentication_failed = True
        elif "Handshake failed" in text:
            self.handshake_failed = True
            self.certificate_refused |= "CERTIFICATE_VERIFY_FAILED" in text
        elif "socket disconnected" in text:
            self.disconnected = True

    def __enter__(self) -> ClientFailures:
        logging.getLogger("kafka").addHandler(self)
        return self

    def __exit__(self, *exc: object) -> None:
        logging.getLogger("kafka").removeHandler(self)

    def explain(self, error: Exception) -> str:
        """`error` (a kafka-python error), with the refusal behind it if one was seen."""
        if self.authentication_failed or (self.sasl and self.disconnected):
            return (
                "the broker refused the SASL credentials (authentication failed, or every "
                "connection closed during it: check the user, password and sasl.mechanism "
                "of --kafka-config)"
            )
        if self.certificate_refused:
            return (
                "the TLS handshake failed: the broker's certificate was not verified (not "
                "signed by a CA in --kafka-config's ssl.truststore.location, or not issued "
                "for this host)"
            )
        if self.handshake_failed:
            return "the TLS handshake failed (check --kafka-config's ssl.* settings)"
        text, name = str(error), type(error).__name__
        return text if text.startswith(name) else f"{name}: {text}"


def add_command_config(
    parser: argparse.ArgumentParser, used_for: str = "", after: str = ""
) -> None:
    """`--command-config FILE`, the name Kafka's own tools give the client properties file
    (`--kafka-config` too), read by `KafkaClientConfig.load`. The help reads "Kafka client
    properties{used_for} (security.protocol, sasl.*, ssl.*){after}"."""
    parser.add_argument(
        "--command-config",
        "--kafka-config",
        dest="kafka_config",
        type=Path,
        metavar="FILE",
        help=f"Kafka client properties{used_for} (security.protocol, sasl.*, ssl.*){after}",
    )
