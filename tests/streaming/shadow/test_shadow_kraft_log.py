"""`kcsim shadow --metadata-log` against crafted directories (SPEC-KRAFT §23.4, §23.5):
the committed real log of tests/data/kraft-4.1.1 (a 3-node Kafka 4.1.1 cluster's quorum
leader: a failover, fences, a controlled shutdown, reassignments, an election, a
deletion) cut and renamed into what a live node's directory goes through: a growing
segment with a partial batch at its end, a high watermark inside the log, segment rolls,
segments deleted after a snapshot, an uncommitted tail replaced after a quorum leader
change, a batch whose CRC fails, a restart. Each time the shadow must write exactly the
events of one read of the whole log: none twice, none skipped. Needs `java` and
`.kafka/libs` (the tail's JVM decodes with Kafka's own classes).
"""

from __future__ import annotations

import json
import shutil
import signal
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from controller.config import Settings
from streaming.cli import main
from streaming.importers.kraft_log_decoder import Decoded, log_files
from streaming.importers.kraft_log_model import KraftLogModel
from streaming.jars import metadata_log_tail_build
from streaming.shadow import kraft_shadow as shadow_module
from streaming.shadow.kraft_shadow import (
    KraftShadow,
    Quorum,
    check_release,
    expected_levels,
    node_of,
)
from streaming.shadow.metadata_log_tail import LogTail, TailError
from streaming.shadow.outputs import open_output
from tests.support.differential.shadow_process import kraft_shadow

ROOT = Path(__file__).resolve().parents[3]
LOG = ROOT / "tests/data/kraft-4.1.1/__cluster_metadata-0"
SEGMENT = LOG / "00000000000000000000.log"
SNAPSHOT = LOG / "00000000000000000138-0000000002.checkpoint"
ALL = 1 << 62
# byte positions of batches in SEGMENT (with their base offsets): the batch of offsets
# 47-52 (a fence with its partition changes), of 76-80, of 105-106
AT_47, AT_76, AT_105 = 4637, 6944, 9273


@pytest.fixture(scope="module")
def tail() -> Iterator[LogTail]:
    with LogTail() as reader:
        yield reader


def name(base: int) -> str:
    return f"{base:020d}.log"


def shadow(directory: Path, out: Path, tail: LogTail) -> KraftShadow:
    sink, state = open_output(f"file:{out}", "c")
    return KraftShadow(directory, tail, sink, state, "c", lambda text: None)


def written(out: Path) -> list[dict]:
    return [
        json.loads(line)
        for path in sorted(out.glob("shadow-*.jsonl"))
        for line in path.read_text().splitlines()
    ]


@pytest.fixture(scope="module")
def whole(tail: LogTail, tmp_path_factory: pytest.TempPathFactory) -> list[dict]:
    """The events of the segment read whole, in one poll."""
    directory = tmp_path_factory.mktemp("whole")
    shutil.copy(SEGMENT, directory)
    out = directory / "out"
    shadow(directory, out, tail).poll(ALL)
    return written(out)


def test_the_install_built_the_reader_beside_the_kafka_jars():
    """`scripts/install.sh` (`python -m streaming.jars`) compiled the reader, current with
    its source: neither a shadow's start nor this suite compiles it."""
    build = metadata_log_tail_build()
    assert build.is_current(), "run `python -m streaming.jars --only kafka`"
    assert build.classes == ROOT / ".metadata-log-tail" / "classes"
    assert build.jar_set.target == ROOT / ".kafka" / "libs"
    assert build.source_files() == [ROOT / "streaming/shadow/java/MetadataLogTail.java"]


def test_the_tail_decodes_as_kafkas_dump_tool(tail):
    """The same records, field for field, as `kafka-dump-log --cluster-metadata-decoder`
    (what `kcsim import kraft-log` reads), for a segment and a snapshot."""
    dumped = list(Decoded(log_files(LOG)))
    dumped_snapshot = list(Decoded(log_files(LOG, from_snapshot=True)))
    batches, end = tail.read(SEGMENT, 0)
    assert end.stop == "eof" and end.position == SEGMENT.stat().st_size
    snap_batches, snap_end = tail.read(SNAPSHOT, 0, snapshot_end=138)
    assert snap_end.stop == "eof"
    read = [r for b in batches for r in b.records]
    read_snapshot = [r for b in snap_batches for r in b.records]
    assert read == dumped
    assert read_snapshot == [r for r in dumped_snapshot if r.snapshot]
    assert len(read) == 150 and {r.type for r in read_snapshot} >= {"PARTITION_RECORD"}


def test_events_are_the_imports(whole, tmp_path):
    """One read of the whole log writes what `kcsim import kraft-log` writes."""
    shutil.copy(SEGMENT, tmp_path)
    imported = tmp_path / "imported.jsonl"
    assert main(["import", "kraft-log", str(tmp_path), "--out", str(imported), "--quiet",
                 "--cluster", "c"]) == 0  # fmt: skip
    assert whole == [json.loads(x) for x in imported.read_text().splitlines()]
    assert [e["seq"] for e in whole] == list(range(1, len(whole) + 1))
    assert len(whole) > 30


def test_start_from_the_newest_snapshot_replays_without_divergence(tail, tmp_path):
    """The start state is the newest snapshot and the segments after it (here the
    segments start at 0, the snapshot is at 138), and its first replay under the kraft
    engine gives no divergence."""
    out = tmp_path / "out"
    shadow(LOG, out, tail).poll(ALL)
    events = written(out)
    imported = tmp_path / "imported.jsonl"
    assert main(["import", "kraft-log", str(LOG), "--out", str(imported), "--quiet",
                 "--cluster", "c", "--from-snapshot"]) == 0  # fmt: skip
    assert events == [json.loads(x) for x in imported.read_text().splitlines()]
    assert events[0]["event_id"].startswith("c:kraft:snapshot-138")
    tables = tmp_path / "tables"
    assert main(["replay", str(out), "--out", str(tables), "--quiet",
                 "--set", "kcsim.engine=kraft"]) == 0  # fmt: skip
    assert (tables / "divergences.jsonl").read_text() == ""
    assert (tables / "rejected_events.jsonl").read_text() == ""


def test_a_growing_segment_and_a_partial_batch(whole, tail, tmp_path):
    """The segment written a piece at a time, cut inside batches: each poll reads the
    whole batches there are, and the next one goes on from the cut."""
    data = SEGMENT.read_bytes()
    target = tmp_path / name(0)
    out = tmp_path / "out"
    follower = None
    for cut in (50, 1500, AT_47 + 30, AT_47 + 268, 8000, 11000, len(data)):
        target.write_bytes(data[:cut])
        follower = follower or shadow(tmp_path, out, tail)
        follower.poll(ALL)
    assert written(out) == whole


def test_the_high_watermark_holds_records_back(whole, tail, tmp_path):
    """Below the high watermark only: a batch that reaches it waits, whole (50 is inside
    the batch of 47-52), and nothing past it is read even though the file holds it."""
    shutil.copy(SEGMENT, tmp_path)
    out = tmp_path / "out"
    follower = shadow(tmp_path, out, tail)
    follower.poll(47)
    before = written(out)
    follower.poll(50)
    assert written(out) == before  # the fence's batch is not committed whole
    assert follower.at.offset == 47
    for hw in (53, 77, 120, ALL):
        follower.poll(hw)
    assert written(out) == whole


def test_segment_rolls_and_old_segments_deleted(whole, tail, tmp_path):
    """The log rolls to new segments (named by their base offset) while the shadow
    reads; a segment it has passed is deleted (a snapshot covers it)."""
    data = SEGMENT.read_bytes()
    out = tmp_path / "out"
    (tmp_path / name(0)).write_bytes(data[:AT_47])
    follower = shadow(tmp_path, out, tail)
    follower.poll(ALL)
    (tmp_path / name(47)).write_bytes(data[AT_47 : AT_47 + 500])  # rolled, partly written
    follower.poll(ALL)
    (tmp_path / name(47)).write_bytes(data[AT_47:AT_105])
    (tmp_path / name(105)).write_bytes(data[AT_105:])
    (tmp_path / name(0)).unlink()
    follower.poll(ALL)
    assert written(out) == whole
    assert follower.at.segment == 105


def test_a_start_after_old_segments_were_deleted(tail, tmp_path):
    """Segments before the snapshot deleted: the start is the snapshot and the segment
    holding its end offset, read from the offset after the snapshot."""
    data = SEGMENT.read_bytes()
    (tmp_path / name(105)).write_bytes(data[AT_105:])
    shutil.copy(SNAPSHOT, tmp_path)
    out = tmp_path / "out"
    shadow(tmp_path, out, tail).poll(ALL)
    reference = tmp_path / "reference"
    shadow(LOG, reference, tail).poll(ALL)
    assert written(out) == written(reference)


def test_an_uncommitted_tail_replaced_after_a_leader_change(whole, tail, tmp_path):
    """Past the high watermark the file holds batches a new quorum leader then truncates
    and replaces: they were never read, so the replacement reads as if they never were."""
    data = SEGMENT.read_bytes()
    target = tmp_path / name(0)
    # batches of other offsets (and another epoch's bytes) after the committed 0-75
    target.write_bytes(data[:AT_76] + data[AT_105 : AT_105 + 302])
    out = tmp_path / "out"
    follower = shadow(tmp_path, out, tail)
    follower.poll(76)
    assert follower.at.offset == 76
    target.write_bytes(data)  # truncated at 76, the new leader's records appended
    follower.poll(ALL)
    assert written(out) == whole


def test_a_restart_resumes_exactly_once(whole, tail, tmp_path):
    """A shadow stopped cleanly saves where it is and a restarted one reads on from
    there; one stopped after writing but before saving (its state older than its output)
    writes nothing twice."""
    shutil.copy(SEGMENT, tmp_path)
    out = tmp_path / "out"
    first = shadow(tmp_path, out, tail)
    first.poll(60)
    first.close()
    state = out / ".shadow-state-c.json"
    older = state.read_bytes()
    second = shadow(tmp_path, out, tail)
    assert second.at.offset == 60
    second.poll(110)
    second.close()
    state.write_bytes(older)  # the save after the 60-110 write never happened
    again = shadow(tmp_path, out, tail)
    assert again.at.offset == 60
    again.poll(ALL)
    assert written(out) == whole


def test_a_killed_shadow_between_saves_writes_each_event_once(whole, tail, tmp_path, monkeypatch):
    """While events are written the state is saved at most every SAVE_EVENTS_EVERY_S: a
    shadow killed between saves (no clean stop) restarts from the last one, re-reads
    what came after it and skips the events the output holds (by `seq`)."""
    shutil.copy(SEGMENT, tmp_path)
    out = tmp_path / "out"
    state = out / ".shadow-state-c.json"
    monkeypatch.setattr(shadow_module, "SAVE_EVENTS_EVERY_S", 3600.0)
    killed = shadow(tmp_path, out, tail)
    for hw in (20, 60, 110):
        killed.poll(hw)
    assert json.loads(state.read_text())["at"]["offset"] == 0  # only the start was saved
    assert written(out) == [e for e in whole if e["seq"] <= killed.written_seq]
    monkeypatch.setattr(shadow_module, "SAVE_EVENTS_EVERY_S", 0.0)
    monkeypatch.setattr(shadow_module, "SAVE_SHARE", 0)
    restarted = shadow(tmp_path, out, tail)
    assert restarted.at.offset == 0
    restarted.poll(60)
    assert json.loads(state.read_text())["at"]["offset"] == 60  # due: saved after the poll
    restarted.poll(ALL)
    assert written(out) == whole


def test_the_model_saved_as_json_resumes_as_if_never_stopped(tail):
    """`KraftLogModel.to_json`/`from_json` between every two batches of the real log, as
    the shadow saves it (after `finish()`), for a read from offset 0 and for a snapshot
    start with the segment after it: the model read back is equal, and the events it goes
    on with are those of an uninterrupted read."""
    snapshot = [r for b in tail.read(SNAPSHOT, 0, snapshot_end=138)[0] for r in b.records]
    segment = [r for b in tail.read(SEGMENT, 0)[0] for r in b.records]
    saved: dict = {}
    for records in (segment, snapshot + [r for r in segment if r.offset >= 138]):
        reference = KraftLogModel("c")
        expected = [e for r in records for e in reference.feed(r)] + reference.finish()
        heads = [i for i, r in enumerate(records) if i and (r.path, r.position) != (
            records[i - 1].path, records[i - 1].position)]  # fmt: skip
        model = KraftLogModel("c")
        events: list[dict] = []
        at = 0
        for cut in [*heads, len(records)]:
            for record in records[at:cut]:
                events += model.feed(record)
            events += model.finish()
            saved = json.loads(json.dumps(model.to_json()))
            restored = KraftLogModel.from_json(saved)
            assert restored == model
            assert json.loads(json.dumps(restored.to_json())) == saved
            model, at = restored, cut
        assert len(heads) > 10  # cuts after the snapshot and after each batch
        assert events == expected
        assert model == reference
    with pytest.raises(ValueError, match="version 0, not 1"):
        KraftLogModel.from_json(saved | {"version": 0})
    inside = KraftLogModel("c")
    inside.feed(segment[0])
    with pytest.raises(ValueError, match="inside a batch"):
        inside.to_json()


def test_a_state_of_another_version_is_refused_naming_the_file(tail, tmp_path):
    shutil.copy(SEGMENT, tmp_path)
    out = tmp_path / "out"
    shadow(tmp_path, out, tail).poll(60)
    state = out / ".shadow-state-c.json"
    saved = json.loads(state.read_text())
    state.write_text(json.dumps(saved | {"version": 1, "model": "gASV..."}))
    with pytest.raises(TailError, match=rf"{state}: a KRaft shadow state of version 1, which"):
        shadow(tmp_path, out, tail)


@pytest.mark.parametrize("stop", ["clean", "killed between saves"])
def test_a_position_lost_to_retention_resyncs_from_the_newest_snapshot(
    whole, tail, tmp_path, monkeypatch, stop
):
    """SPEC-KRAFT §23.5: the shadow stopped at offset 47; meanwhile the log took a
    snapshot (138) and deleted the segments before 105, so 47-104 are gone. The restarted
    shadow says which offsets it lost, loads the snapshot and writes the resync: the
    topics created and deleted meanwhile as inputs, then a `controller_failover` observing
    the whole state (the reference start's own), then reads on from 138 as a shadow that
    started at the snapshot does. A replay compares the observed state with its own: what
    the lost records changed shows as divergences at the resync (SPEC-KRAFT §23.7). A
    shadow killed between saves restarts further back, from a segment also gone: the
    resync comes after the events already out, under new `seq`s."""
    data = SEGMENT.read_bytes()
    (tmp_path / name(0)).write_bytes(data[:AT_47])
    out = tmp_path / "out"
    if stop != "clean":  # the state stays the start's: the restart re-reads from 0
        monkeypatch.setattr(shadow_module, "SAVE_EVENTS_EVERY_S", 3600.0)
    first = shadow(tmp_path, out, tail)
    first.poll(ALL)
    if stop == "clean":
        first.close()
    before = written(out)
    assert before == whole[: len(before)] and before[-1]["event_id"].startswith("c:kraft:")
    (tmp_path / name(0)).unlink()
    (tmp_path / name(105)).write_bytes(data[AT_105:])
    shutil.copy(SNAPSHOT, tmp_path)
    said: list[str] = []
    lost = 47 if stop == "clean" else 0  # killed: the state saved is the start's
    sink, state = open_output(f"file:{out}", "c")
    restarted = KraftShadow(tmp_path, tail, sink, state, "c", said.append)
    restarted.poll(ALL)
    assert said == [
        f"warning: {name(0)} was deleted before the shadow read it: offsets {lost} to 104 are "
        "lost to it; resuming from snapshot 00000000000000000138-0000000002.checkpoint, "
        "whose whole state is written as observed (a replay shows what the lost records "
        "changed as divergences)"
    ]
    events = written(out)
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    resync = [e for e in events if e["event_id"].startswith("c:kraft:resync-138:")]
    assert resync == events[len(before) : len(before) + len(resync)]
    reference = tmp_path / "reference"
    shadow(LOG, reference, tail).poll(ALL)
    started = written(reference)
    start = [e for e in started if e["event_id"].startswith("c:kraft:snapshot-138:")]
    assert resync[-1]["type"] == "controller_failover"
    assert resync[-1]["observed"] == start[-1]["observed"]

    def bare(e: dict) -> dict:
        return {k: v for k, v in e.items() if k not in ("seq", "event_id")}

    after = events[len(before) + len(resync) :]
    assert [bare(e) for e in after] == [bare(e) for e in started[len(start) :]]
    if stop != "clean":
        # the restarted model knew none of the brokers and topics already out: the
        # resync registers and creates them again, which a replay rejects as repeats
        return
    known = {e["topic"] for e in before if e["type"] == "topic_creation"}
    now = {e["topic"] for e in start if e["type"] == "topic_creation"}
    assert [(e["type"], e.get("topic")) for e in resync[:-1]] == [
        *(("topic_deletion", t) for t in sorted(known - now)),
        *(("topic_creation", t) for t in sorted(now - known)),
    ]
    tables = tmp_path / "tables"
    assert main(["replay", str(out), "--out", str(tables), "--quiet",
                 "--set", "kcsim.engine=kraft"]) == 0  # fmt: skip
    assert (tables / "rejected_events.jsonl").read_text() == ""
    drift = [json.loads(x) for x in (tables / "divergences.jsonl").read_text().splitlines()]
    # the first divergences are the resync's: the lost records fenced broker 3 and moved
    # leaders, ISRs and replicas; the replay keeps its own state, so the later events on
    # those partitions diverge too
    at_resync = {(d["topic"], d["partition"], d["field"]) for d in drift
                 if d["event_id"] == resync[-1]["event_id"]}  # fmt: skip
    assert drift[0]["event_id"] == resync[-1]["event_id"]
    assert {("orders", 0, "replicas"), ("orders", 2, "leader"), (None, None, "broker")} <= at_resync
    assert {(t, p) for t, p, _ in at_resync} == {("orders", 0), ("orders", 1), ("orders", 2),
                                                 (None, None)}  # fmt: skip


def test_a_corrupt_committed_batch_is_an_error_naming_it(tail, tmp_path):
    """A CRC failure below the high watermark stops the shadow with the file and the
    batch's byte position; the same bytes past the high watermark are not read yet."""
    data = bytearray(SEGMENT.read_bytes())
    data[AT_76 + 100] ^= 0xFF
    target = tmp_path / name(0)
    target.write_bytes(bytes(data))
    follower = shadow(tmp_path, tmp_path / "out", tail)
    follower.poll(76)  # the damaged batch (76-80) is not committed: nothing to see
    why = rf"{target}: position {AT_76}: batch at offset 76: Record is corrupt .*computed crc"
    with pytest.raises(TailError, match=why):
        follower.poll(ALL)


@pytest.mark.parametrize("kind", ["missing", "file", "empty"])
def test_a_directory_that_is_not_a_metadata_log(tmp_path, capsys, kind):
    directory = tmp_path / "metadata"
    if kind == "file":
        directory.write_text("x")
    elif kind == "empty":
        directory.mkdir()
        (directory / "quorum-state").write_text("{}")
    code = main(["shadow", "--metadata-log", str(directory), "--bootstrap-server",
                 "127.0.0.1:9", "--out", f"file:{tmp_path / 'out'}"])  # fmt: skip
    assert code == 2
    error = capsys.readouterr().err
    assert str(directory) in error
    assert {"missing": "no such directory", "file": "not a directory",
            "empty": "not a KRaft __cluster_metadata"}[kind] in error  # fmt: skip
    assert not (tmp_path / "out").exists()


def test_bootstrap_server_goes_with_metadata_log(tmp_path, capsys):
    code = main(["shadow", "--metadata-log", str(LOG), "--out", f"file:{tmp_path}"])
    assert code == 2
    assert "--bootstrap-server" in capsys.readouterr().err


def test_a_bootstrap_that_does_not_answer_is_said_and_retried(tmp_path):
    """No DescribeMetadataQuorum answer: the shadow says so, waits and tries again,
    backing off; a SIGTERM stops it cleanly."""
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    process = kraft_shadow(LOG, f"127.0.0.1:{port}", tmp_path / "out")
    assert process.stderr is not None
    try:
        said = [process.stderr.readline() for _ in range(4)]
        # what it follows, where it writes and its state file, said first
        assert f"following the KRaft metadata log {LOG} of 127.0.0.1:{port}" in said[0]
        assert f"writing to file:{tmp_path / 'out'}; state in " in said[0]
        assert "warning: no meta.properties beside" in said[1]  # a copied log
        lines = said[2:]
    finally:
        process.send_signal(signal.SIGTERM)
        process.communicate(timeout=60)
    assert all(f"DescribeMetadataQuorum at 127.0.0.1:{port} did not answer" in x for x in lines)
    assert ["retrying in 1 s" in lines[0], "retrying in 2 s" in lines[1]] == [True, True]
    assert process.returncode == 0


def test_versions_other_than_the_engines_are_said(tail, tmp_path):
    """The recorded cluster runs the kraft engine's defaults (4.1-IV1, ELR 1): nothing is
    said. Another metadata.version or ELR level, or another Kafka release, is said with
    what a replay needs."""
    said: list[str] = []
    matching = Settings.load(None, ["metadata.version=4.0-IV3"])
    assert expected_levels(matching) == {
        "metadata.version": 25, "eligible.leader.replicas.version": 0}  # fmt: skip
    sink, state = open_output(f"file:{tmp_path / 'out'}", "c")
    follower = KraftShadow(LOG, tail, sink, state, "c", said.append)
    follower.poll(ALL)
    levels = follower.features
    assert (levels["metadata.version"], levels["eligible.leader.replicas.version"]) == (27, 1)
    assert said == []
    follower.features |= {"metadata.version": 25, "eligible.leader.replicas.version": 0}
    follower.poll(ALL)
    assert said == [
        "warning: the cluster's metadata.version is 4.0-IV3, not the settings' 4.1-IV1: "
        "replay its events with --set metadata.version=4.0-IV3",
        "warning: the cluster's eligible.leader.replicas.version is 0, not the settings' 1: "
        "replay its events with --set eligible.leader.replicas.version=0",
    ]
    follower.poll(ALL)
    assert len(said) == 2  # once per level seen
    check_release((4, 1, 1), said.append)
    assert len(said) == 2
    check_release((4, 0), said.append)
    assert "the cluster runs Kafka 4.0, not 4.1.x" in said[-1]


def test_changes_no_event_explains_are_said(tail, tmp_path):
    """The real log holds none; a count that grows (a change of a partition the model does
    not know, say) is said once, with the offset reached, never dropped unsaid, followed
    by what the model described of them (the rest counted)."""
    said: list[str] = []
    sink, state = open_output(f"file:{tmp_path / 'out'}", "c")
    follower = KraftShadow(LOG, tail, sink, state, "c", said.append)
    follower.poll(ALL)
    assert said == []
    follower.model.counts.unexplained += 2
    follower.model.unexplained_notes.append("offset 7: PartitionChangeRecord of t-0 {...}")
    follower.poll(ALL)
    assert len(said) == 3
    assert said[0].startswith("2 partition changes no event explains (up to offset ")
    assert said[0].endswith("; 2 in all): they are not in the output")
    assert said[1:] == [
        "  offset 7: PartitionChangeRecord of t-0 {...}",
        "  (1 more not described)",
    ]
    assert follower.model.unexplained_notes == []
    follower.poll(ALL)
    assert len(said) == 3


def test_a_node_cut_off_from_the_quorum_is_not_read_past_what_it_fetched(tmp_path):
    """SPEC-KRAFT §23.4: an old quorum leader's log may hold records the new leader never
    kept, at offsets it has since committed others at. The node's log is read only below
    both the high watermark and its log end offset as the leader knows it (-1 until it
    fetches); the node is the `node.id` of the `meta.properties` beside the log."""
    log = tmp_path / "__cluster_metadata-0"
    log.mkdir()
    assert node_of(log) is None
    (tmp_path / "meta.properties").write_text("version=1\nnode.id=3\ncluster.id=x\n")
    assert node_of(log) == 3
    quorum = Quorum(high_watermark=120, leader=1, epoch=4, ends={1: 125, 2: 118, 3: -1})
    assert [quorum.readable(n) for n in (1, 2, 3, 4, None)] == [120, 118, -1, -1, 120]
