"""`kcsim replay` (controller.replay) through the public CLI, plus its reader and writer."""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from controller.config import Settings
from controller.events import BrokerStartup, Rejection
from controller.parse import parse_event
from controller.replay import command
from controller.replay import table_files as replay
from controller.replay.event_files import EventFileNameError, event_files, read_events, split_lines
from controller.replay.table_files import write_tables
from controller.simulator import BatchOutput, RawEvent, Simulator
from schemas import STATE_TABLES, TABLES
from streaming.cli import main

SCENARIO = [
    '{"type": "broker_startup", "broker": 1}',
    '{"type": "broker_startup", "broker": 2}',
    '{"type": "topic_creation", "topic": "orders", "assignment": {"0": [1, 2]}}',
    '{"type": "broker_startup", "broker": oops}',
    "",
]


def read_table(out: Path, table: str) -> list[dict[str, Any]]:
    lines = (out / f"{table}.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(text) for text in lines]


def write_scenario(tmp_path: Path, lines: list[str]) -> Path:
    path = tmp_path / "events.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_replay_writes_every_table_and_reports_the_bad_line(tmp_path: Path) -> None:
    events = write_scenario(tmp_path, SCENARIO)
    out = tmp_path / "out"

    status = main(["replay", str(events), "--out", str(out), "--quiet"])

    assert status == 1  # something was rejected
    assert sorted(p.name for p in out.iterdir()) == sorted(f"{t}.jsonl" for t in TABLES)
    for table in TABLES.values():
        for row in read_table(out, table.name):
            assert tuple(row) == table.column_names
    assert read_table(out, "rejected_events") == [
        {
            "cluster": None,
            "raw": SCENARIO[3],
            "reason": "not valid JSON: Expecting value at column 38",
            "source": f"{events.name}:4",  # the same name the Spark job gives
        }
    ]
    [partition] = read_table(out, "partition_state")
    assert (partition["topic"], partition["partition"], partition["state"]) == (
        "orders",
        0,
        "OnlinePartition",
    )
    assert (partition["leader"], partition["isr"], partition["leader_epoch"]) == (1, [1, 2], 0)
    assert sorted(row["broker"] for row in read_table(out, "brokers")) == [1, 2]


def test_results_do_not_depend_on_the_batch_size(tmp_path: Path) -> None:
    events = write_scenario(tmp_path, SCENARIO)
    outputs = []
    for flags in (["--batch-size", "1"], ["--batch-size", "2"], [], ["--batch-output", "1"]):
        out = tmp_path / f"out-{len(outputs)}"
        assert main(["replay", str(events), "--out", str(out), *flags, "--quiet"]) == 1
        outputs.append({t: (out / f"{t}.jsonl").read_text(encoding="utf-8") for t in TABLES})
    assert outputs[0] == outputs[1] == outputs[2] == outputs[3]


def test_exit_status_zero_without_rejections(tmp_path: Path, capsys: Any) -> None:
    events = write_scenario(tmp_path, SCENARIO[:3])
    out = tmp_path / "out"
    assert main(["replay", str(events), "--out", str(out)]) == 0
    assert read_table(out, "rejected_events") == []
    summary = capsys.readouterr().err
    assert "3 events, 0 rejected" in summary


def test_missing_input(tmp_path: Path, capsys: Any) -> None:
    assert main(["replay", str(tmp_path / "nope"), "--out", str(tmp_path / "out")]) == 2
    assert "no such file or directory" in capsys.readouterr().err


def test_out_is_a_file(tmp_path: Path, capsys: Any) -> None:
    events = tmp_path / "e.jsonl"
    events.write_text('{"type":"broker_startup","broker":1}\n')
    assert main(["replay", str(events), "--out", str(events)]) == 2
    assert "--out must be a directory" in capsys.readouterr().err


# ------------------------------------------------------------------- reader and writer


def test_read_events_lines_and_sources(tmp_path: Path) -> None:
    path = tmp_path / "e.jsonl"
    path.write_bytes(b'{"a": 1}\r\n\n   \t\n{"b": 2}  \n\xff{}\n{"c": 3}')
    assert list(read_events(path)) == [
        RawEvent('{"a": 1}', f"{path.name}:1"),
        RawEvent('{"b": 2}  ', f"{path.name}:4"),
        RawEvent("\udcff{}", f"{path.name}:5"),  # kept so the parser can name the byte
        RawEvent('{"c": 3}', f"{path.name}:6"),
    ]


def test_read_events_from_a_directory(tmp_path: Path) -> None:
    for name, text in [
        ("b.json", "2\n"),
        ("a.json", "1\n"),
        ("_SUCCESS", "x\n"),
        (".a.json.crc", "x\n"),
        ("_hidden", "x\n"),
        ("part-0.crc", "x\n"),
        ("c.json._COPYING_", "x\n"),
    ]:
        (tmp_path / name).write_text(text, encoding="utf-8")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "0.json").write_text("x\n", encoding="utf-8")
    assert [p.name for p in event_files(tmp_path)] == ["a.json", "b.json"]
    assert [e.raw for e in read_events(tmp_path)] == ["1", "2"]
    assert [e.source for e in read_events(tmp_path)] == [
        "a.json:1",
        "b.json:1",
    ]


def test_write_tables_keeps_column_order(tmp_path: Path) -> None:
    row = {"source": "f:1", "raw": "r\udcff", "cluster": "c", "reason": "why"}
    write_tables(tmp_path, {"rejected_events": [row], "topics": []})
    text = (tmp_path / "rejected_events.jsonl").read_text(encoding="utf-8")
    assert text == '{"cluster":"c","raw":"r\\udcff","reason":"why","source":"f:1"}\n'
    assert (tmp_path / "topics.jsonl").read_text(encoding="utf-8") == ""


def test_a_row_with_a_long_list_is_written_as_one_json_line(tmp_path: Path) -> None:
    """A new broker's UpdateMetadata body names every partition: written a slice at a
    time, it reads back as the same single line the short rows get."""
    entry = {"topic": "t\u00e9", "partition": 0, "isr": [1, 2], "is_new": None}
    rows = [
        {"cluster": "c", "event_id": "e", "seq": 1, "payload": 0, "type": "UpdateMetadata",
         "partitions": [{**entry, "partition": p} for p in range(n)], "live_brokers": [1],
         "ts": None}
        for n in (0, 3, 25_001, 20_000, 2)
    ]  # fmt: skip
    write_tables(tmp_path, {"request_payloads": rows})
    lines = (tmp_path / "request_payloads.jsonl").read_text(encoding="utf-8").splitlines()
    columns = TABLES["request_payloads"].column_names
    assert [json.loads(line) for line in lines] == [{c: r[c] for c in columns} for r in rows]
    assert lines[2] == json.dumps(
        {c: rows[2][c] for c in columns}, ensure_ascii=False, separators=(",", ":")
    )


def test_long_rows_with_what_orjson_refuses_are_written_as_json_dumps_does(
    tmp_path: Path,
) -> None:
    """A long body's slices and a kept UpdateMetadata body's entries go through orjson;
    an entry it refuses (a lone surrogate from an undecodable input byte, an integer over
    64 bits) is written as `json.dumps` writes it, the surrogate as its escape, whether
    the body is encoded a slice at a time, kept, or compared with the kept one."""
    full = [_um_entry(p, 1, [], "t") for p in range(1_500)]
    full[7] = {**full[7], "topic": "s\u00fcr\udcff"}
    full[900] = {**full[900], "leader": 2**70}
    again = list(full)  # the next full body: two entries changed, one to what orjson refuses
    again[8] = {**again[8], "topic": "x\ud800y"}
    again[901] = {**again[901], "leader": -(2**65)}
    plain = [{"topic": "p\udcfe", "partition": p, "isr": [2**64]} for p in range(1_200)]
    rows = [
        {"cluster": "c", "event_id": "e", "seq": 1, "payload": n, "type": "UpdateMetadata",
         "partitions": body, "live_brokers": [1], "ts": None}
        for n, body in enumerate([full, again, plain, full])
    ]  # fmt: skip
    write_tables(tmp_path, {"request_payloads": rows}, compress=True)
    with replay.open_table(tmp_path / "request_payloads.jsonl.zst") as handle:
        lines = handle.read().splitlines()
    columns = TABLES["request_payloads"].column_names
    expected = [_compact({c: r[c] for c in columns}) for r in rows]
    assert lines == [line.encode("utf-8", "backslashreplace").decode("utf-8") for line in expected]
    assert '"topic":"s\u00fcr\\udcff"' in lines[0] and f'"leader":{2**70}' in lines[0]


class _FailingClose:
    """A file whose closing fails after it closed (a full disk at the last flush)."""

    def __init__(self, handle: Any) -> None:
        self._handle = handle

    def __enter__(self) -> Any:
        return self._handle.__enter__()

    def __exit__(self, *exc_info: object) -> None:
        self._handle.__exit__(*exc_info)
        raise OSError("no room")


@pytest.mark.parametrize("fails", ["opening", "closing"])
def test_every_append_file_opened_is_closed_whatever_fails(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fails: str
) -> None:
    """The append files are opened together and closed together: when one fails to open,
    or to close, every other one opened is still closed (a compressed file left open has
    no frame end, and reads as broken)."""
    from schemas import APPEND_TABLES

    opened: list[Any] = []
    open_table = replay._open_table
    failing = APPEND_TABLES[2].name

    def open_or_fail(out: Path, name: str, compress: bool) -> Any:
        if fails == "opening" and name == failing:
            raise OSError("no room")
        handle = open_table(out, name, compress)
        opened.append((name, handle))
        return _FailingClose(handle) if fails == "closing" and name == failing else handle

    monkeypatch.setattr(replay, "_open_table", open_or_fail)
    with (
        pytest.raises(OSError, match="no room"),
        replay.AppendFiles(tmp_path, APPEND_TABLES, compress=True),
    ):
        pass
    assert len(opened) == (2 if fails == "opening" else len(APPEND_TABLES))
    assert all(handle.closed for _, handle in opened)
    for name, _ in opened:  # each a whole (empty) Zstandard frame
        with replay.open_table(tmp_path / f"{name}.jsonl.zst") as handle:
            assert handle.read() == ""


# ------------------------------------------------ the plumbing, with a stand-in simulator


class FakeSimulator:
    """Rejects what the parser rejects, records the rest in applied_events, and keeps one
    brokers row per broker_startup — enough to check what replay does with the rows."""

    def __init__(self, settings: object) -> None:
        del settings
        self.brokers: dict[int, dict[str, Any]] = {}
        self.batch_sizes: list[int] = []

    def apply(self, events: Iterable[RawEvent], max_output: int | None = None) -> BatchOutput:
        batch = list(events)  # (takes them all, whatever max_output)
        self.batch_sizes.append(len(batch))
        output = BatchOutput(
            appends={"rejected_events": [], "applied_events": []}, events=len(batch)
        )
        for raw in batch:
            result = parse_event(raw.raw, raw.source)
            if isinstance(result, Rejection):
                output.appends["rejected_events"].append(
                    {
                        "cluster": result.cluster,
                        "raw": result.raw,
                        "reason": result.reason,
                        "source": result.source,
                    }
                )
                continue
            output.appends["applied_events"].append(
                {
                    "cluster": result.header.cluster,
                    "event_id": raw.source,
                    "seq": None,
                    "type": result.header.type,
                    "ts": result.header.ts,
                }
            )
            if isinstance(result.body, BrokerStartup):
                broker = result.body.broker
                self.brokers[broker] = {
                    "cluster": "default",
                    "broker": broker,
                    "rack": None,
                    "status": "live",
                    "broker_epoch": 1,
                }
        return output

    def table_rows(self, table: str) -> Iterator[dict[str, Any]]:
        return iter(self.brokers.values() if table == "brokers" else ())


def test_replay_plumbing(tmp_path: Path, monkeypatch: Any) -> None:
    made: list[FakeSimulator] = []

    def make(settings: object, state_rows: bool = True) -> FakeSimulator:
        assert not state_rows  # replay writes the state tables from table_rows, at the end
        made.append(FakeSimulator(settings))
        return made[-1]

    monkeypatch.setattr(command, "Simulator", make)
    events = write_scenario(tmp_path, SCENARIO)
    texts = []
    for size in ("1", "3"):
        out = tmp_path / f"out-{size}"
        assert (
            main(["replay", str(events), "--out", str(out), "--batch-size", size, "--quiet"]) == 1
        )
        # the last call finds no event left
        assert made[-1].batch_sizes == ([1, 1, 1, 1, 0] if size == "1" else [3, 1, 0])
        assert sorted(p.name for p in out.iterdir()) == sorted(f"{t}.jsonl" for t in TABLES)
        texts.append({t: (out / f"{t}.jsonl").read_text(encoding="utf-8") for t in TABLES})
    assert texts[0] == texts[1]
    out = tmp_path / "out-1"
    assert [r["source"] for r in read_table(out, "rejected_events")] == [f"{events.name}:4"]
    assert [r["type"] for r in read_table(out, "applied_events")] == [
        "broker_startup",
        "broker_startup",
        "topic_creation",
    ]
    assert [r["broker"] for r in read_table(out, "brokers")] == [1, 2]


# bytes that make UTF-8 go wrong around line ends: truncated and overlong sequences,
# surrogates, stray continuation bytes, CR
_AWKWARD_BYTES = st.sampled_from(
    [b"\n", b"\r", b"a", b" ", b"\xc3", b"\xa9", b"\xe2\x82", b"\xf0\x9f", b"\x98\x80", b"\xff",
     b"\x80", b"\xed\xa0\x80", b"\xc0\xaf", b"\xf4\x90\x80\x80"]
)  # fmt: skip


@given(st.lists(_AWKWARD_BYTES, max_size=20).map(b"".join))
def test_a_file_splits_into_the_lines_each_decoded_alone(content: bytes) -> None:
    """`split_lines` decodes a file at once; each line must read as if decoded by itself
    (undecodable bytes escaped one by one), so a bad byte never spills into a neighbour."""
    expected = []
    for number, data in enumerate(content.split(b"\n"), start=1):
        line = data.decode("utf-8", "surrogateescape").removesuffix("\r")
        if line.strip(" \t\r"):
            expected.append(RawEvent(line, f"f.jsonl:{number}"))
    assert list(split_lines(content, "f.jsonl")) == expected


def test_compressed_output_is_the_same_lines_in_zstd_and_reads_as_the_plain(
    tmp_path: Path,
) -> None:
    """`--compress`: every table as `<table>.jsonl.zst` holding exactly the plain run's
    bytes; `open_table` and the report's reader read either form to the same lines and
    tables (empty ones too), and a run over a directory leaves no file of another form
    behind."""
    import zstandard

    from controller.replay.table_files import open_table, table_file
    from streaming.insight.report_data import read_replay

    events = Path(__file__).resolve().parents[3] / "examples" / "events"
    plain, packed = tmp_path / "plain", tmp_path / "packed"
    status = main(["replay", str(events), "--out", str(plain), "--quiet"])
    assert main(["replay", str(events), "--out", str(packed), "--quiet", "--compress"]) == status

    assert sorted(p.name for p in packed.iterdir()) == sorted(f"{t}.jsonl.zst" for t in TABLES)
    for table in TABLES:
        expected = (plain / f"{table}.jsonl").read_bytes()
        with (packed / f"{table}.jsonl.zst").open("rb") as handle:
            assert zstandard.ZstdDecompressor().stream_reader(handle).read() == expected
        with open_table(table_file(packed, table)) as lines:
            assert "".join(lines).encode() == expected
    assert any((plain / f"{t}.jsonl").stat().st_size == 0 for t in TABLES)  # an empty one
    plain_tables, packed_tables = read_replay(plain), read_replay(packed)
    assert plain_tables.keys() == packed_tables.keys()
    for name, table in plain_tables.items():
        assert packed_tables[name].equals(table), name
    assert plain_tables["state_changes"].num_rows > 0

    # the same directory written plain again: the .zst files go
    assert main(["replay", str(events), "--out", str(packed), "--quiet"]) == status
    assert sorted(p.name for p in packed.iterdir()) == sorted(f"{t}.jsonl" for t in TABLES)


def test_compressed_tables_take_an_8_mib_window_and_older_128_mib_ones_still_read(
    tmp_path: Path,
) -> None:
    """Every table is written with an 8 MiB window (the memory a writer and a reader
    hold for it); request bodies written with the 128 MiB window replay used before still
    read, through `open_table` and the report's pyarrow reader alike."""
    import pyarrow as pa
    import zstandard

    from controller.replay.table_files import open_table
    from streaming.insight.report_data import read_jsonl

    events = write_scenario(tmp_path, SCENARIO)
    out = tmp_path / "out"
    status = main(["replay", str(events), "--out", str(out), "--quiet", "--compress"])
    for table in TABLES:
        path = out / f"{table}.jsonl.zst"
        window = zstandard.get_frame_parameters(path.read_bytes()).window_size
        with open_table(path) as lines:
            empty = lines.read() == ""
        assert window == (0 if empty else 8 << 20), table  # (an empty frame declares none)

    old = tmp_path / "old"
    old.mkdir()
    plain = tmp_path / "plain"
    assert main(["replay", str(events), "--out", str(plain), "--quiet"]) == status
    text = (plain / "request_payloads.jsonl").read_bytes()
    parameters = zstandard.ZstdCompressionParameters.from_level(1, window_log=27)
    writer = zstandard.ZstdCompressor(compression_params=parameters)
    with writer.stream_writer((old / "request_payloads.jsonl.zst").open("wb")) as handle:
        handle.write(text)
    packed = (old / "request_payloads.jsonl.zst").read_bytes()
    assert zstandard.get_frame_parameters(packed).window_size == 1 << 27
    with open_table(old / "request_payloads.jsonl.zst") as lines:
        assert "".join(lines).encode() == text
    payloads = pa.schema(
        [("event_id", pa.string()), ("payload", pa.int64()), ("type", pa.string())]
    )
    table = read_jsonl(old / "request_payloads.jsonl.zst", payloads)
    assert table.num_rows > 0
    assert table.equals(read_jsonl(plain / "request_payloads.jsonl", payloads))


def test_an_earlier_gzipped_output_still_reads_and_a_new_run_replaces_it(
    tmp_path: Path,
) -> None:
    """`--compress` wrote `<table>.jsonl.gz` before it wrote Zstandard: such a directory
    still reads as the plain run, and a `--compress` run over it leaves only `.zst`."""
    import gzip

    from controller.replay.table_files import open_table, table_file
    from streaming.insight.report_data import read_replay

    events = Path(__file__).resolve().parents[3] / "examples" / "events"
    plain, old = tmp_path / "plain", tmp_path / "old"
    status = main(["replay", str(events), "--out", str(plain), "--quiet"])
    old.mkdir()
    for table in TABLES:
        content = (plain / f"{table}.jsonl").read_bytes()
        (old / f"{table}.jsonl.gz").write_bytes(gzip.compress(content, 1))
    for table in TABLES:
        with open_table(table_file(old, table)) as lines:
            assert "".join(lines).encode() == (plain / f"{table}.jsonl").read_bytes()
    plain_tables, old_tables = read_replay(plain), read_replay(old)
    for name, table in plain_tables.items():
        assert old_tables[name].equals(table), name

    assert main(["replay", str(events), "--out", str(old), "--quiet", "--compress"]) == status
    assert sorted(p.name for p in old.iterdir()) == sorted(f"{t}.jsonl.zst" for t in TABLES)


# a request entry as the core builds it: typed fields, a few partitions named again and again
_ENTRY = st.fixed_dictionaries(
    {
        # (a lone surrogate: an undecodable input byte, which orjson refuses)
        "topic": st.sampled_from(["a", "b", "ü", "s\udcff"]),
        "partition": st.integers(0, 2),
        "leader": st.integers(-1, 3),
        "leader_epoch": st.integers(0, 2),
        "isr": st.lists(st.integers(0, 3), max_size=3),
        "is_new": st.none() | st.booleans(),
        "offline_replicas": st.lists(st.integers(0, 3), max_size=2),
    }
)
_ITEM = (
    _ENTRY
    | _ENTRY.map(lambda e: dict(reversed(e.items())))
    | st.integers()
    | st.sampled_from([2**64, -(2**70)])  # (over 64 bits: orjson refuses them too)
    | st.none()
)


@given(st.lists(st.lists(_ITEM, max_size=12), max_size=8), st.integers(0, 4), st.integers(1, 5))
def test_entry_texts_encode_each_list_as_json_does(
    lists: list[list[Any]], room: int, slice_size: int
) -> None:
    """`EntryTexts` encodes each request body a slice at a time: each body must encode
    exactly as `json.dumps` would, whatever changed in between (a value, the key order, a
    non-entry item), whatever the slice size and with a body kept or not."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(replay, "_LONG_LIST", 0)  # (so that a short body may be kept)
        patch.setattr(replay, "_ENTRY_TEXTS", room)
        patch.setattr(replay, "_LIST_SLICE", slice_size)
        texts = replay.EntryTexts()
        for items in lists:
            expected = json.dumps(items, ensure_ascii=False, separators=(",", ":"))[1:-1]
            assert b"".join(texts.pieces(items)) == expected.encode("utf-8", "backslashreplace")


def _compact(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _um_entry(
    partition: int, leader: int, offline: list[int], topic: str = "t\u00e9"
) -> dict[str, Any]:
    return {
        "topic": topic,
        "partition": partition,
        "leader": leader,
        "offline_replicas": offline,
    }


@given(st.data())
def test_long_update_metadata_bodies_compared_with_the_kept_one_encode_as_json_does(
    data: st.DataObject,
) -> None:
    """A long UpdateMetadata body is compared with the last one kept, position by
    position, by identity: whatever stayed, changed, moved to another position or came
    back after a shorter body, each body's text is `json.dumps`'s (small bounds here, so
    that short lists take the long-body path)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(replay, "_LONG_LIST", 2)
        patch.setattr(replay, "_LIST_SLICE", 3)
        patch.setattr(replay, "_ENTRY_TEXTS", data.draw(st.sampled_from([0, 3, 7, 100])))
        texts = replay.EntryTexts()
        previous: list[dict[str, Any]] = []
        for _ in range(data.draw(st.integers(1, 8))):
            body = []
            for position in range(data.draw(st.sampled_from([1, 2, 3, 7, 7, 7, 8]))):
                how = data.draw(st.sampled_from(["same", "new", "moved"]))
                if previous and how == "moved":
                    body.append(data.draw(st.sampled_from(previous)))
                elif position < len(previous) and how == "same":
                    body.append(previous[position])
                else:
                    leader = data.draw(st.integers(-1, 3) | st.just(2**64))
                    offline = data.draw(st.lists(st.integers(0, 3)))
                    topic = data.draw(st.sampled_from(["t\u00e9", "s\udcff"]))
                    body.append(_um_entry(position, leader, offline, topic))
            expected = _compact(body)[1:-1].encode("utf-8", "backslashreplace")
            assert b"".join(texts.pieces(body)) == expected
            previous = body


def test_a_long_body_after_the_kept_one_encodes_only_the_entries_that_are_not_the_same(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A new broker's UpdateMetadata after another: the entry that changed in between is
    a new object and is encoded (a body reusing the kept text there would still name the
    old leader), so are the entries that moved to another position, the rest are the kept
    texts, and a shorter body sent in between (a controlled shutdown's) does not replace
    the kept one."""
    first = [_um_entry(p, 1, []) for p in range(4000)]
    texts = replay.EntryTexts()
    assert b"".join(texts.pieces(first)).decode() == _compact(first)[1:-1]
    shutdown = [_um_entry(p, 2, [1]) for p in range(4000, 5500)]  # other partitions
    assert b"".join(texts.pieces(shutdown)).decode() == _compact(shutdown)[1:-1]
    assert texts._body is not None and texts._body[0] is first  # still the one kept
    second = list(first)
    second[1234] = _um_entry(1234, 2, [1])  # its leader moved
    second[5], second[6] = first[6], first[5]
    encoded: list[object] = []
    encode = replay._encode
    monkeypatch.setattr(replay, "_encode", lambda value: encoded.append(value) or encode(value))
    text = b"".join(texts.pieces(second)).decode()
    assert text == _compact(second)[1:-1]
    assert '"partition":1234,"leader":2,"offline_replicas":[1]' in text
    # the positions holding another object than before, nothing else encoded
    assert encoded == [second[5], second[6], second[1234]]
    assert texts._body is not None and texts._body[0] is second


@pytest.mark.parametrize("small_chunks", [False, True])
def test_flat_rows_are_written_a_block_at_a_time_as_json_lines(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, small_chunks: bool
) -> None:
    """State changes are encoded _ENCODE_ROWS at a time: a row whose columns come in
    another order or miss one, odd strings and a long ISR in the middle of a block are
    written as each row's own `json.dumps` line, in the table's column order, whatever
    the block and chunk sizes. Only request entries are written in pieces: a list of
    brokers, however long, is encoded with its block."""
    if small_chunks:
        monkeypatch.setattr(replay, "_ENCODE_ROWS", 7)
        monkeypatch.setattr(replay, "_BYTES_PER_WRITE", 500)
        monkeypatch.setattr(replay, "_ROWS_PER_WRITE", 3)
    columns = TABLES["state_changes"].column_names
    rows: list[dict[str, Any]] = []
    # (a row's end in one block's text is '},{"': a string holding it must not split there)
    topics = ["t", 'q"uo\\te', "\u00e9\u2028\x01", "nl\n}\n{", '},{"cluster":']
    for seq in range(2_500):
        row = dict.fromkeys(columns)
        row.update(cluster="c", event_id=f"c:{seq // 7}", seq=seq, entity="partition")
        row.update(topic=topics[seq % len(topics)], partition=seq, ok=seq % 3 == 0)
        row.update(leader=seq % 5 - 1, isr=[1, 2] if seq % 2 else None, ts=None)
        rows.append(row)
    rows[3]["topic"] = "sur\udcff"  # a block orjson refuses: encoded row by row
    rows[10] = dict(reversed(rows[10].items()))
    del rows[11]["error"]
    rows[1_500]["isr"] = list(range(1_500))
    in_pieces: list[object] = []
    pieces = replay._json_pieces
    monkeypatch.setattr(
        replay,
        "_json_pieces",
        lambda c, row, t, dumps: in_pieces.append(row) or pieces(c, row, t, dumps),
    )
    write_tables(tmp_path, {"state_changes": rows})
    assert in_pieces == []
    expected = "".join(_compact({c: row.get(c) for c in columns}) + "\n" for row in rows)
    written = (tmp_path / "state_changes.jsonl").read_bytes()
    assert written == expected.encode("utf-8", "backslashreplace")


def test_appended_rows_are_released_a_block_at_a_time_and_written_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """replay hands a batch's row lists to the append files, which empty each block's
    places as they take it: the rows are freed once written, and every one is written."""
    monkeypatch.setattr(replay, "_ENCODE_ROWS", 4)
    columns = TABLES["event_results"].column_names
    rows = [{**dict.fromkeys(columns), "cluster": "c", "seq": seq} for seq in range(10)]
    expected = [dict(row) for row in rows]
    seen: list[list[Any]] = []
    lines = replay._json_lines
    monkeypatch.setattr(
        replay, "_json_lines", lambda block, e, f: seen.append(list(rows)) or lines(block, e, f)
    )
    with replay.AppendFiles(tmp_path, [TABLES["event_results"]]) as appends:
        appends.write("event_results", rows)
    # a block's places are emptied as it is taken: the list holds only the rows to come
    assert seen == [[None] * 4 + expected[4:], [None] * 8 + expected[8:], [None] * 10]
    assert rows == [None] * 10
    written = (tmp_path / "event_results.jsonl").read_text().splitlines()
    assert [json.loads(line) for line in written] == expected


def test_a_long_request_body_is_written_as_the_plain_json(tmp_path: Path) -> None:
    """Request bodies of more than 1,000 partitions go through `EntryTexts`: a rolling
    restart of a 3-broker, 2,000-partition cluster (each new broker's UpdateMetadata names
    every partition, SPEC §8.2, its entries changed by the restarts in between) writes
    the same bytes as with no text kept, every line `json.dumps` of its row."""
    import pytest

    events = tmp_path / "events.jsonl"
    lines = [{"type": "broker_startup", "broker": b} for b in range(3)]
    lines += [
        {"type": "topic_creation", "topic": t, "partitions": 1000, "replication_factor": 3}
        for t in ("t0", "t1")
    ]
    for broker in range(3):
        lines += [
            {"type": "controlled_shutdown", "broker": broker},
            {"type": "broker_failure", "broker": broker},
            {"type": "broker_startup", "broker": broker},
        ]
    events.write_text("".join(json.dumps(line) + "\n" for line in lines))
    out = tmp_path / "out"
    settings = ["--set", "kcsim.simulate.brokers=true", "--quiet"]
    assert main(["replay", str(events), "--out", str(out), *settings]) == 0
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(replay, "_ENTRY_TEXTS", 0)  # every entry encoded anew
        assert main(["replay", str(events), "--out", str(tmp_path / "anew"), *settings]) == 0
    for table in TABLES:
        expected = (tmp_path / "anew" / f"{table}.jsonl").read_bytes()
        assert (out / f"{table}.jsonl").read_bytes() == expected, table
    bodies = (out / "request_payloads.jsonl").read_text(encoding="utf-8").splitlines()
    long_bodies = [line for line in bodies if line.count('"topic":') > 1000]
    assert len(long_bodies) >= 6  # a new broker's and its restart's, each of 3
    entries = [json.loads(line)["partitions"] for line in long_bodies]
    assert any(a != b for a, b in pairwise(entries))  # they changed
    for line in bodies:
        assert json.dumps(json.loads(line), ensure_ascii=False, separators=(",", ":")) == line


def test_an_event_file_name_that_is_not_utf8_is_refused_by_both_engines(
    tmp_path: Path, capsys
) -> None:
    """Spark's file source does not list such a file: replay refuses it too (status 2, the
    name shown), and the job stops on it instead of reading the directory without it."""
    from streaming.job.command import query_failure
    from streaming.job.sources import FileSource

    events = tmp_path / "events"
    events.mkdir()
    (events / "a.jsonl").write_text(SCENARIO[0] + "\n", encoding="utf-8")
    (events / os.fsdecode(b"\xff-b.jsonl")).write_text(SCENARIO[1] + "\n", encoding="utf-8")
    out = tmp_path / "out"

    assert main(["replay", str(events), "--out", str(out), "--quiet"]) == 2
    error = capsys.readouterr().err
    assert "event file name b'\\xff-b.jsonl' is not UTF-8" in error
    assert not out.exists()
    with pytest.raises(EventFileNameError, match="is not UTF-8") as raised:
        FileSource(str(events)).check_names()
    # the job's last line names it, not the first line of Spark's wrapping text
    spark_text = (
        "[STREAM_FAILED] Query terminated with exception: [FOREACH_BATCH_USER_FUNCTION_ERROR]"
        f" ... Traceback (most recent call last):\n  ...\ncontroller.EventFileNameError:"
        f" {raised.value}\n"
    )
    assert query_failure(RuntimeError(spark_text)) == str(raised.value)
    (events / os.fsdecode(b"\xff-b.jsonl")).unlink()
    FileSource(str(events)).check_names()
    assert main(["replay", str(events), "--out", str(out), "--quiet"]) == 0


def test_files_neither_engine_reads_are_named_on_stderr_but_markers_are_not(
    tmp_path: Path, capsys
) -> None:
    """A hidden name or an unfinished copy may hold events that neither engine reads (as
    Spark's file source lists): replay says which, `--quiet` does not; Spark's own
    checksums and `_SUCCESS` markers are skipped without a word."""
    from streaming.job.sources import FileSource

    events = tmp_path / "events"
    events.mkdir()
    (events / "a.jsonl").write_text(SCENARIO[0] + "\n", encoding="utf-8")
    for name in ["_SUCCESS", ".a.jsonl.crc", "part-0.crc"]:
        (events / name).write_text("x\n", encoding="utf-8")
    out = tmp_path / "out"
    assert main(["replay", str(events), "--out", str(out)]) == 0
    assert "skipped" not in capsys.readouterr().err
    assert FileSource(str(events)).skipped_warning() is None

    for name in ["_b.jsonl", ".c.jsonl", "d.jsonl._COPYING_", *(f"_{n}" for n in range(5))]:
        (events / name).write_text(SCENARIO[1] + "\n", encoding="utf-8")
    assert main(["replay", str(events), "--out", str(out)]) == 0
    expected = (
        f"kcsim replay: skipped 8 file(s) in {events} that neither replay nor the Spark job "
        "reads (a name starting with '.' or '_', or a copy not finished): "
        ".c.jsonl, _0, _1, _2, _3, ...\n"
    )
    assert capsys.readouterr().err.startswith(expected)
    assert FileSource(str(events)).skipped_warning() == expected.removeprefix(
        "kcsim replay: "
    ).removesuffix("\n")
    # the job's source as a URI names the same files
    as_uri = FileSource(events.as_uri())
    assert as_uri.skipped_warning() == FileSource(str(events)).skipped_warning()
    # a.jsonl's event alone: broker 1's startup
    assert [row["broker"] for row in read_table(out, "brokers")] == [1]
    assert main(["replay", str(events), "--out", str(out), "--quiet"]) == 0
    assert capsys.readouterr().err == ""
    assert main(["replay", str(events / "a.jsonl"), "--out", str(out)]) == 0
    assert "skipped" not in capsys.readouterr().err

    # a hidden name that is not UTF-8 is named too, its odd byte shown as an escape
    odd = tmp_path / "odd\udcfd"  # (so is the directory's)
    odd.mkdir()
    (odd / "a.jsonl").write_text(SCENARIO[0] + "\n", encoding="utf-8")
    (odd / "_\udcfe.jsonl").write_text(SCENARIO[1] + "\n", encoding="utf-8")
    assert main(["replay", str(odd), "--out", str(out)]) == 0
    assert capsys.readouterr().err.startswith(
        f"kcsim replay: skipped 1 file(s) in {tmp_path}/odd\\xfd that neither replay nor the "
        "Spark job reads "
        "(a name starting with '.' or '_', or a copy not finished): _\\xfe.jsonl\n"
    )
    assert [row["broker"] for row in read_table(out, "brokers")] == [1]


def test_an_output_directory_that_cannot_be_written_is_status_2_not_a_traceback(
    tmp_path: Path, capsys
) -> None:
    events = write_scenario(tmp_path, SCENARIO[:1])
    blocked = tmp_path / "file"
    blocked.write_text("", encoding="utf-8")

    assert main(["replay", str(events), "--out", str(blocked / "out"), "--quiet"]) == 2
    error = capsys.readouterr().err
    assert error.startswith("kcsim replay: [Errno 20] Not a directory") and "Traceback" not in error


def test_a_simulator_without_state_rows_gives_the_same_appends_and_final_tables() -> None:
    """Replay's simulator leaves the state tables' upserts out of every batch (it writes
    them once at the end, from table_rows): its appended rows and its final tables are
    those of a simulator that makes them, and its batches hold no state rows."""
    corpus = Path(__file__).parents[2] / "data" / "corpus"
    settings = Settings()
    with_rows, without_rows = Simulator(settings), Simulator(settings, state_rows=False)
    lines = list(read_events(corpus))
    upserts = 0
    for start in range(0, len(lines), 5):
        batch = lines[start : start + 5]
        made, left_out = with_rows.apply(batch), without_rows.apply(batch)
        assert {t: list(rows) for t, rows in left_out.appends.items()} == {
            t: list(rows) for t, rows in made.appends.items()
        }
        assert not any(left_out.upserts.values()) and not any(left_out.deletes.values())
        upserts += sum(map(len, made.upserts.values()))
    assert upserts > 0  # (the comparison would prove nothing without them)
    for table in STATE_TABLES:
        assert list(without_rows.table_rows(table.name)) == list(with_rows.table_rows(table.name))


EXAMPLES = Path(__file__).resolve().parents[3] / "examples"


def test_the_readme_sequence_replay_then_report_runs_as_written(tmp_path: Path) -> None:
    """`kcsim replay examples/events --out X && kcsim report --replay X --out r.html`: the
    examples hold no bad line (those are in examples/bad), so the `&&` goes on."""
    out = tmp_path / "x"
    assert main(["replay", str(EXAMPLES / "events"), "--out", str(out), "--quiet"]) == 0
    assert read_table(out, "rejected_events") == []
    page = tmp_path / "r.html"
    assert main(["report", "--replay", str(out), "--out", str(page), "--quiet"]) == 0
    assert page.stat().st_size > 0


def test_status_1_comes_with_the_count_and_the_first_reasons(tmp_path: Path, capsys) -> None:
    out = tmp_path / "bad"
    assert main(["replay", str(EXAMPLES / "bad"), "--out", str(out)]) == 1
    error = capsys.readouterr().err.splitlines()
    assert error[1:] == [
        f"kcsim replay: 2 event(s) rejected, each a row of {out}/rejected_events.jsonl; the first:",
        "  001-bad-lines.jsonl:1: not valid JSON: Expecting value at column 1",
        "  001-bad-lines.jsonl:2: field 'broker' must be a non-negative 32-bit integer, got -7",
    ]
    many = write_scenario(
        tmp_path, [f'{{"type":"broker_startup","broker":-{n}}}' for n in range(1, 9)]
    )
    assert main(["replay", str(many), "--out", str(tmp_path / "many")]) == 1
    error = capsys.readouterr().err.splitlines()
    assert len(error) == 1 + 1 + 5 + 1 and error[-1] == "  ... and 3 more"
    assert (
        error[2] == "  events.jsonl:1: field 'broker' must be a non-negative 32-bit integer, got -1"
    )
