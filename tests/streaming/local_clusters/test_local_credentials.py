"""The USER:PASSWORD files of `kcsim kafka-local start --sasl-scram FILE` and `--zk-sasl
FILE`: what they accept, and errors that name the option and never quote the secret."""

from __future__ import annotations

from pathlib import Path

import pytest

from streaming.local_clusters.kafka_local import ScramUser
from streaming.local_clusters.processes import LocalClusterError
from streaming.local_clusters.zk_cluster import SaslUser


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "credentials"
    path.write_text(text, encoding="utf-8")
    return path


SECRETS = ("pw9Xq", "pw7Zk")


@pytest.mark.parametrize("reader, option", [(ScramUser, "--sasl-scram"), (SaslUser, "--zk-sasl")])
def test_one_line_user_password_is_read_and_the_password_kept_out_of_repr(
    tmp_path: Path, reader: type[ScramUser] | type[SaslUser], option: str
) -> None:
    user = reader.read(write(tmp_path, "kcsim:s3cret-pw\n"))
    assert (user.username, user.password) == ("kcsim", "s3cret-pw")
    assert "s3cret-pw" not in repr(user)


@pytest.mark.parametrize("reader, option", [(ScramUser, "--sasl-scram"), (SaslUser, "--zk-sasl")])
@pytest.mark.parametrize("text", ["no-colon-pw9Xq", ":pw9Xq", "kcsim:", "a:pw9Xq\nc:pw7Zk"])
def test_a_malformed_file_is_refused_naming_the_option_not_the_secret(
    tmp_path: Path, reader: type[ScramUser] | type[SaslUser], option: str, text: str
) -> None:
    """Every would-be password in these files is one of SECRETS: none reaches the error."""
    with pytest.raises(
        LocalClusterError, match=f"^{option} .* must hold one line USER:PASSWORD$"
    ) as e:
        reader.read(write(tmp_path, text))
    message = str(e.value).replace(str(tmp_path), "")
    assert [secret for secret in SECRETS if secret in message] == []


@pytest.mark.parametrize("reader, option", [(ScramUser, "--sasl-scram"), (SaslUser, "--zk-sasl")])
def test_a_missing_file_is_an_error_naming_the_option(
    tmp_path: Path, reader: type[ScramUser] | type[SaslUser], option: str
) -> None:
    with pytest.raises(LocalClusterError, match=f"^cannot read {option} .*: No such file"):
        reader.read(tmp_path / "absent")


def test_each_reader_refuses_what_its_server_cannot_quote(tmp_path: Path) -> None:
    # kafka-storage's SCRAM syntax [name=..,password=..] cannot hold , [ ] = " or \
    with pytest.raises(LocalClusterError, match="may not hold"):
        ScramUser.read(write(tmp_path, "kcsim:pa,ss"))
    # ZooKeeper's JAAS file: one token each, no quotes, backslashes or semicolons
    with pytest.raises(LocalClusterError, match="may not hold"):
        SaslUser.read(write(tmp_path, "kcsim:pa ss"))
    assert SaslUser.read(write(tmp_path, "kcsim:pa,ss")).password == "pa,ss"
