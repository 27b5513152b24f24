"""The data behind `kcsim report` and `kcsim whatif`, no plotting: the tables a report
reads (a replay's `DIR/<table>.jsonl` or a local Delta lake), each cluster's timeline cut
down to a bounded number of points with its spikes kept, and leaders per broker at chosen
moments.

Everything works on Arrow tables of only the columns it needs (pyarrow's JSON reader and
parquet reader are C++), and on numpy arrays per cluster: a 1M-event report reads and
reduces its tables without a Python loop over rows.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pa_json

from controller.replay.table_files import COMPRESSED_SUFFIX, GZIP_SUFFIX, table_file

_JSON_BLOCK = 8 << 20  # bytes a JSON-reader thread parses at once (pyarrow's default: 1 MiB)
MAX_POINTS = 2000  # points per plotted series at most (two per bucket: its min and max)
FIRST_ROWS = 20  # rows of divergences, violations and rejected events listed on the page
BROKER_COLUMNS = 400  # moments the per-broker view shows at most

HEALTH_METRICS = (
    "partitions",
    "offline",
    "under_replicated",
    "at_min_isr",
    "not_preferred",
    "max_broker_imbalance",
    "live_brokers",
    "unclean_elections",
    "leader_changes",
    "requests",
    "elr_elections",
    "last_known_leader_elections",
)
# the health counters kept "so far" (the others are per event, or a level)
RUNNING_TOTALS = ("unclean_elections", "elr_elections", "last_known_leader_elections")
ZK, KRAFT = "zk", "kraft"

_S, _L, _I, _B, _D = pa.string(), pa.int64(), pa.int32(), pa.bool_(), pa.float64()
# The columns each table is read with (CONTRACT §2 names), in the types used here.
COLUMNS: dict[str, tuple[tuple[str, pa.DataType], ...]] = {
    "health": (
        ("cluster", _S),
        ("event_id", _S),
        ("seq", _L),
        ("ts", _L),
        *((m, _D if m == "max_broker_imbalance" else _L) for m in HEALTH_METRICS),
    ),
    "state_changes": (
        ("cluster", _S),
        ("seq", _L),
        ("entity", _S),
        ("topic", _S),
        ("partition", _I),
        ("from_state", _S),
        ("to_state", _S),
        ("ok", _B),
        ("leader", _I),
        ("isr", pa.list_(_I)),
        ("unclean", _B),
    ),
    "controller_requests": (("cluster", _S), ("seq", _L), ("type", _S)),
    "metadata_records": (("cluster", _S), ("seq", _L), ("type", _S)),
    "clusters": (("cluster", _S), ("engine", _S)),
    "divergences": (
        ("cluster", _S),
        ("seq", _L),
        ("ts", _L),
        ("topic", _S),
        ("partition", _I),
        ("field", _S),
        ("observed", _S),
        ("simulated", _S),
    ),
    "violations": (
        ("cluster", _S),
        ("seq", _L),
        ("ts", _L),
        ("source", _S),
        ("invariant", _S),
        ("topic", _S),
        ("partition", _I),
        ("broker", _I),
        ("detail", _S),
    ),
    "partition_state": (
        ("cluster", _S),
        ("topic", _S),
        ("partition", _I),
        ("state", _S),
        ("leader", _I),
    ),
    "rejected_events": (("cluster", _S), ("source", _S), ("reason", _S), ("raw", _S)),
    # the new state an accepted AlterPartition (or election, reassignment) left: ISR
    # changes have no state_changes row
    "event_results": (
        ("cluster", _S),
        ("seq", _L),
        ("topic", _S),
        ("partition", _I),
        ("error", _S),
        ("leader", _I),
        ("isr", pa.list_(_I)),
    ),
}
REQUIRED = ("health", "state_changes", "partition_state")
ONLINE, OFFLINE = "OnlinePartition", "OfflinePartition"


class ReportInputError(ValueError):
    """A report's input is missing or unreadable (the command exits 2 with it)."""


def schema(name: str) -> pa.Schema:
    return pa.schema([pa.field(n, t) for n, t in COLUMNS[name]])


# ------------------------------------------------------------------------------ input


def read_replay(directory: Path) -> dict[str, pa.Table]:
    """The tables of a `kcsim replay --out DIR` (plain or `--compress`ed); an optional
    table's missing file is empty."""
    if not directory.is_dir():
        raise ReportInputError(f"no such directory: {directory}")
    tables = {}
    for name in COLUMNS:
        path = table_file(directory, name)
        if not path.exists():
            if name in REQUIRED:
                raise ReportInputError(f"{path} is missing (a `kcsim replay --out` directory?)")
            tables[name] = schema(name).empty_table()
            continue
        tables[name] = read_jsonl(path, schema(name))
    return tables


def read_jsonl(path: Path, table_schema: pa.Schema) -> pa.Table:
    """A JSON-lines table, Zstandard or gzip if its name ends so (pyarrow decompresses it
    by the name; the 128 MiB Zstandard window replay once wrote request bodies with is
    the largest its decoder takes), only `table_schema`'s columns (other fields are
    skipped)."""
    compressed = path.name.endswith((COMPRESSED_SUFFIX, GZIP_SUFFIX))
    if path.stat().st_size == 0 or (compressed and _no_data(path)):
        return table_schema.empty_table()
    options = pa_json.ParseOptions(explicit_schema=table_schema, unexpected_field_behavior="ignore")
    blocks = pa_json.ReadOptions(block_size=_JSON_BLOCK)
    try:
        return pa_json.read_json(path, read_options=blocks, parse_options=options).select(
            table_schema.names
        )
    except pa.ArrowInvalid as error:
        raise ReportInputError(f"{path}: {error}") from None


def _no_data(path: Path) -> bool:
    with pa.input_stream(str(path), compression="detect") as stream:
        return not stream.read(1)


def read_lake(root: str) -> dict[str, pa.Table]:
    """The tables of a local Delta lake, read without Spark (streaming.lake.local_reader)."""
    from streaming.lake.local_reader import LakeReader, NotNative

    reader = LakeReader(root)
    tables = {}
    for name, columns in COLUMNS.items():
        wanted = schema(name)
        try:
            data = reader.read(name, columns=[n for n, _ in columns])
        except ValueError as error:  # no Delta table there (NotNative is not one)
            if name in REQUIRED:
                raise ReportInputError(str(error)) from None
            data = wanted.empty_table()
        except (NotNative, KeyError) as error:
            raise ReportInputError(f"{name}: {error}") from None
        tables[name] = data.cast(wanted)
    return tables


# ------------------------------------------------------------------------ downsampling


@dataclass(frozen=True, slots=True)
class Series:
    """A plotted line: x (event seq) and y, at most MAX_POINTS points."""

    x: np.ndarray
    y: np.ndarray


def bucket_size(events: int, max_points: int = MAX_POINTS) -> int:
    """Events per bucket so that two points a bucket stay within `max_points` (1: every
    event is a point)."""
    if events <= max_points:
        return 1
    return -(-events // (max_points // 2))


def downsample(x: np.ndarray, y: np.ndarray, max_points: int = MAX_POINTS) -> Series:
    """The series cut to at most `max_points` points: consecutive events in buckets of
    `bucket_size`, each bucket kept as its minimum and its maximum, at the events where
    they occur and in their order. A one-event spike is its bucket's maximum, so it stays,
    at its own x."""
    size = bucket_size(len(y), max_points)
    if size == 1:
        return Series(x, y)
    buckets = -(-len(y) // size)
    pad = buckets * size - len(y)
    values = y.astype(np.float64)
    low = np.pad(values, (0, pad), constant_values=np.inf).reshape(buckets, size)
    high = np.pad(values, (0, pad), constant_values=-np.inf).reshape(buckets, size)
    starts = np.arange(buckets) * size
    first = starts + low.argmin(axis=1)
    second = starts + high.argmax(axis=1)
    picked = np.stack([np.minimum(first, second), np.maximum(first, second)], axis=1).ravel()
    keep = np.ones(len(picked), dtype=bool)
    keep[1::2] = picked[1::2] != picked[0::2]  # a flat bucket: one point
    picked = picked[keep]
    return Series(x[picked], y[picked])


def bucket_sums(counts: np.ndarray, size: int) -> np.ndarray:
    """`counts` summed over buckets of `size` consecutive events."""
    buckets = -(-len(counts) // size)
    padded = np.pad(counts, (0, buckets * size - len(counts)))
    return padded.reshape(buckets, size).sum(axis=1)


# -------------------------------------------------------------------------- per cluster


@dataclass(frozen=True, slots=True)
class Marks:
    """Events flagged on the timeline: x (the seq of the event, or of a bucket's first
    event) and how many rows fell there."""

    x: np.ndarray
    count: np.ndarray

    @property
    def total(self) -> int:
        return int(self.count.sum())


@dataclass(frozen=True, slots=True)
class Moment:
    """Leaders per broker after an event: online partitions each broker leads, and the
    partitions offline then."""

    name: str
    seq: int | None
    why: str
    leaders: Mapping[int, int]
    offline: int


@dataclass(frozen=True, slots=True)
class Summary:
    cluster: str
    events: int
    first_seq: int
    last_seq: int
    first_ts: int | None
    last_ts: int | None
    partitions: int  # at the end
    live_brokers: int  # at the end
    peak_offline: int
    peak_offline_seq: int
    peak_under_replicated: int
    peak_at_min_isr: int
    offline_partition_events: int  # sum of `offline` over events
    unclean_elections: int  # under kraft, last-known-leader elections included
    leader_changes: int
    requests: int
    divergences: int
    violations: int
    rejected: int
    engine: str = ZK  # the controller the cluster ran under (its clusters row)
    records: int = 0  # metadata records written (kraft)
    elr_elections: int = 0  # kraft: leaders elected from the ELR
    last_known_leader_elections: int = 0  # kraft: leaders restored from last_known_elr

    @property
    def output(self) -> int:
        """What the controller sent or wrote: requests (zk), metadata records (kraft)."""
        return self.records if self.engine == KRAFT else self.requests


@dataclass(frozen=True, slots=True)
class ClusterReport:
    cluster: str
    summary: Summary
    bucket: int  # events per bucket (1: every event plotted)
    # health metric -> its line; "output": requests (zk) or metadata records (kraft)
    timeline: Mapping[str, Series]
    # the controller's output per event, by type: requests (zk) or metadata records (kraft)
    requests: Mapping[str, Series]
    unclean: Marks  # kraft: unclean elections other than last-known-leader ones
    divergences: Marks
    violations: Marks
    moments: tuple[Moment, ...]
    # kraft: events that elected leaders from the ELR, or restored a last known leader
    elr_elections: Marks = Marks(np.zeros(0, np.int64), np.zeros(0, np.int64))
    last_known_leader_elections: Marks = Marks(np.zeros(0, np.int64), np.zeros(0, np.int64))
    # every event's seq, and its `ts` (epoch ms) when every event has one (else None): the
    # page plots against time then
    seqs: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    times: np.ndarray | None = None
    # the first rows of divergences, violations and rejected_events (by seq; rejected
    # lines, which have none, in the order written)
    first_rows: Mapping[str, pa.Table] = field(default_factory=dict)
    brokers: BrokerView | None = None

    @property
    def kraft(self) -> bool:
        return self.summary.engine == KRAFT

    def x(self, seqs: np.ndarray) -> np.ndarray:
        """Where events `seqs` go on the page's x axis: their time (datetime64[ms]) when the
        events have times, else the seqs themselves."""
        if self.times is None:
            return seqs
        return self.times[_event_index(np.asarray(seqs), self.seqs)].astype("datetime64[ms]")


def clusters(tables: Mapping[str, pa.Table]) -> list[str]:
    return sorted(set(tables["health"].column("cluster").to_pylist()))


def of_cluster(table: pa.Table, cluster: str) -> pa.Table:
    names = table.column("cluster")
    if table.num_rows and pc.all(pc.equal(names, cluster)).as_py():
        return table  # the only cluster (the usual case): no copy
    return table.filter(pc.equal(names, cluster))


def cluster_report(
    tables: Mapping[str, pa.Table], cluster: str, max_points: int = MAX_POINTS
) -> ClusterReport:
    health = _by_seq(of_cluster(tables["health"], cluster))
    if health.num_rows == 0:
        raise ReportInputError(f"no health rows for cluster {cluster!r}")
    seqs = health.column("seq").to_numpy()
    # (counters a lake written before they existed holds as null: none then)
    metrics = {m: _filled(health.column(m)) for m in HEALTH_METRICS}
    size = bucket_size(len(seqs), max_points)
    changes = _by_seq(of_cluster(tables["state_changes"], cluster))
    engine = engine_of(tables, cluster)
    if engine == KRAFT:
        # the KRaft controller's output stream is its metadata log
        requests = of_cluster(_table(tables, "metadata_records"), cluster)
        # health's counters say which elections of an event were which (state_changes's
        # `unclean` holds last-known-leader elections too)
        lkl = np.diff(metrics["last_known_leader_elections"], prepend=0)
        elections = {
            "unclean": np.diff(metrics["unclean_elections"], prepend=0) - lkl,
            "elr": np.diff(metrics["elr_elections"], prepend=0),
            "lkl": lkl,
        }
        unclean_marks = counted_marks(elections["unclean"], seqs, size)
        elr_marks = counted_marks(elections["elr"], seqs, size)
        lkl_marks = counted_marks(elections["lkl"], seqs, size)
    else:
        requests = of_cluster(tables["controller_requests"], cluster)
        unclean = changes.filter(pc.fill_null(changes.column("unclean"), False))
        unclean_marks = marks(unclean.column("seq").to_numpy(), seqs, size)
        elr_marks = lkl_marks = counted_marks(np.zeros(0, np.int64), seqs, size)
    divergences = of_cluster(tables["divergences"], cluster)
    violations = of_cluster(tables["violations"], cluster)
    rejected = of_cluster(tables["rejected_events"], cluster)
    ts = health.column("ts")
    times = None if ts.null_count else ts.to_numpy()
    summary = Summary(
        cluster=cluster,
        events=len(seqs),
        first_seq=int(seqs[0]),
        last_seq=int(seqs[-1]),
        first_ts=ts[0].as_py(),
        last_ts=ts[-1].as_py(),
        partitions=int(metrics["partitions"][-1]),
        live_brokers=int(metrics["live_brokers"][-1]),
        peak_offline=int(metrics["offline"].max()),
        peak_offline_seq=int(seqs[metrics["offline"].argmax()]),
        peak_under_replicated=int(metrics["under_replicated"].max()),
        peak_at_min_isr=int(metrics["at_min_isr"].max()),
        offline_partition_events=int(metrics["offline"].sum()),
        unclean_elections=int(metrics["unclean_elections"][-1]),
        leader_changes=int(metrics["leader_changes"].sum()),
        requests=int(metrics["requests"].sum()),
        divergences=divergences.num_rows,
        violations=violations.num_rows,
        rejected=rejected.num_rows,
        engine=engine,
        records=requests.num_rows if engine == KRAFT else 0,
        elr_elections=int(metrics["elr_elections"][-1]),
        last_known_leader_elections=int(metrics["last_known_leader_elections"][-1]),
    )
    # the controller's whole output per event, requests or records: what two engines'
    # runs of the same events compare on (the health table counts requests only)
    output = np.bincount(_event_index(requests.column("seq").to_numpy(), seqs), minlength=len(seqs))
    timeline = {m: downsample(seqs, v, max_points) for m, v in metrics.items()}
    timeline["output"] = downsample(seqs, output, max_points)
    return ClusterReport(
        cluster=cluster,
        summary=summary,
        bucket=size,
        timeline=timeline,
        requests=requests_per_event(requests, seqs, max_points),
        unclean=unclean_marks,
        divergences=marks(divergences.column("seq").to_numpy(), seqs, size),
        violations=marks(violations.column("seq").to_numpy(), seqs, size),
        moments=moments(changes, of_cluster(tables["partition_state"], cluster), health),
        elr_elections=elr_marks,
        last_known_leader_elections=lkl_marks,
        seqs=seqs,
        times=times,
        first_rows={
            "divergences": _by_seq(divergences).slice(0, FIRST_ROWS),
            "violations": _by_seq(violations).slice(0, FIRST_ROWS),
            "rejected_events": rejected.slice(0, FIRST_ROWS),
        },
        brokers=broker_view(changes, seqs, of_cluster(_table(tables, "event_results"), cluster)),
    )


def engine_of(tables: Mapping[str, pa.Table], cluster: str) -> str:
    """The cluster's engine, from its clusters row (none, or no engine: zk, as a lake
    written before engines were named)."""
    rows = of_cluster(_table(tables, "clusters"), cluster)
    engines = [e for e in rows.column("engine").to_pylist() if e]
    return engines[-1] if engines else ZK


def _table(tables: Mapping[str, pa.Table], name: str) -> pa.Table:
    """An optional table (tables built by hand may leave it out): empty when absent."""
    found = tables.get(name)
    return found if found is not None else schema(name).empty_table()


def _filled(column: pa.ChunkedArray) -> np.ndarray:
    if column.null_count:
        column = pc.fill_null(column, 0)
    return column.to_numpy(zero_copy_only=False)


def counted_marks(counts: np.ndarray, seqs: np.ndarray, size: int) -> Marks:
    """Marks of per-event counts (`counts[i]` for the event `seqs[i]`; empty: none)."""
    if not counts.any():
        return Marks(np.zeros(0, np.int64), np.zeros(0, np.int64))
    if size > 1:
        counts = bucket_sums(counts, size)
        seqs = seqs[::size]
    flagged = counts > 0
    return Marks(seqs[flagged], counts[flagged].astype(np.int64))


def _by_seq(table: pa.Table) -> pa.Table:
    seqs = table.column("seq").to_numpy()
    if np.all(seqs[1:] >= seqs[:-1]):
        return table  # as the engines write a cluster's rows: no copy
    # a stable sort: rows of one event keep their order (the order transitions happened)
    return table.take(pc.sort_indices(table, [("seq", "ascending")]))


def _event_index(row_seqs: np.ndarray, seqs: np.ndarray) -> np.ndarray:
    """Each row's event, as an index into the cluster's sorted health seqs (every applied
    event has a health row; a row of no known event goes to the nearest later one)."""
    return np.minimum(np.searchsorted(seqs, row_seqs), len(seqs) - 1)


def requests_per_event(
    requests: pa.Table, seqs: np.ndarray, max_points: int = MAX_POINTS
) -> dict[str, Series]:
    """Requests per event of each type (every event a value, 0 included), downsampled."""
    out = {}
    types = requests.column("type")
    for kind in sorted(set(pc.unique(types).to_pylist()) - {None}):
        rows = requests.filter(pc.equal(types, kind)).column("seq").to_numpy()
        counts = np.bincount(_event_index(rows, seqs), minlength=len(seqs))
        out[kind] = downsample(seqs, counts, max_points)
    return out


def marks(row_seqs: np.ndarray, seqs: np.ndarray, size: int) -> Marks:
    """Rows counted per event (or per bucket of `size` events, at its first event's seq);
    only events with rows."""
    if len(row_seqs) == 0:
        return Marks(np.zeros(0, np.int64), np.zeros(0, np.int64))
    counts = np.bincount(_event_index(row_seqs, seqs), minlength=len(seqs))
    if size > 1:
        counts = bucket_sums(counts, size)
        seqs = seqs[::size]
    flagged = counts > 0
    return Marks(seqs[flagged], counts[flagged])


# --------------------------------------------------------------------- leaders per broker


def moments(changes: pa.Table, partition_state: pa.Table, health: pa.Table) -> tuple[Moment, ...]:
    """Leaders per broker at the start, at the worst moment and at the end.

    start: after the last event before the first one that changed an online partition
    (a `state_changes` partition row from OnlinePartition: a failure, shutdown, election,
    reassignment or deletion), i.e. the cluster as set up; with no such event, the last.
    worst: after the first event with the most offline partitions (none ever offline: the
    most under-replicated). end: the `partition_state` table (what the cluster holds,
    including partitions a snapshot loaded, which have no `state_changes` rows)."""
    seqs = health.column("seq").to_numpy()
    moved = changes.filter(
        pc.and_(
            pc.and_(pc.equal(changes.column("entity"), "partition"), _true(changes, "ok")),
            pc.equal(changes.column("from_state"), ONLINE),
        )
    )
    if moved.num_rows:
        first_move = int(pc.min(moved.column("seq")).as_py())
        before = seqs[seqs < first_move]
        start_seq = int(before[-1]) if len(before) else int(seqs[0])
        why = f"before seq {first_move}, the first event that changed an online partition"
    else:
        start_seq, why = int(seqs[-1]), "no event changed an online partition"
    offline = health.column("offline").to_numpy()
    if offline.max() > 0:
        worst = int(offline.argmax())
        worst_why = f"most offline partitions ({int(offline[worst])})"
    else:
        under = health.column("under_replicated").to_numpy()
        worst = int(under.argmax())
        worst_why = f"never offline; most under-replicated ({int(under[worst])})"
    end = _count_leaders(partition_state.column("state"), partition_state.column("leader"))
    return (
        Moment("start", start_seq, why, *leaders_at(changes, start_seq)),
        Moment("worst", int(seqs[worst]), worst_why, *leaders_at(changes, int(seqs[worst]))),
        Moment("end", int(seqs[-1]), "partition_state at the end", *end),
    )


def _true(table: pa.Table, column: str) -> pa.ChunkedArray:
    return pc.fill_null(table.column(column), False)


def leaders_at(changes: pa.Table, seq: int) -> tuple[dict[int, int], int]:
    """(partitions each broker leads, partitions offline) after event `seq`, from the
    `state_changes` rows up to it (one cluster, in order): a partition's state is its last
    partition row's `to_state`, its leader the last `leader` any row carried (partition and
    replica rows carry the leadership after the transition). A partition counts for its
    leader when online, as offline when offline; New and NonExistent ones not at all."""
    upto = changes.filter(pc.and_(pc.less_equal(changes.column("seq"), seq), _true(changes, "ok")))
    key = ["topic", "partition"]
    states = (
        upto.filter(pc.equal(upto.column("entity"), "partition"))
        .select([*key, "to_state"])
        .group_by(key, use_threads=False)
        .aggregate([("to_state", "last")])
    )
    leaders = (
        upto.filter(pc.is_valid(upto.column("leader")))
        .select([*key, "leader"])
        .group_by(key, use_threads=False)
        .aggregate([("leader", "last")])
    )
    # A partition a snapshot loaded (a creation carrying its stored state) has no partition
    # row until it changes; the rows that carry its leader (the failover's replica rows)
    # say it exists: online when it has a leader, offline when not
    joined = states.join(leaders, key, join_type="full outer")
    loaded = pc.if_else(pc.greater_equal(joined.column("leader_last"), 0), ONLINE, OFFLINE)
    state = pc.coalesce(joined.column("to_state_last"), loaded)
    return _count_leaders(state, joined.column("leader_last"))


def _count_leaders(states: pa.ChunkedArray, leaders: pa.ChunkedArray) -> tuple[dict[int, int], int]:
    online = pc.fill_null(pc.and_(pc.equal(states, ONLINE), pc.greater_equal(leaders, 0)), False)
    counts = pc.value_counts(leaders.filter(online).combine_chunks())
    by_broker = {
        int(v): int(c)
        for v, c in zip(
            counts.field("values").to_pylist(), counts.field("counts").to_pylist(), strict=True
        )
    }
    offline = pc.sum(pc.fill_null(pc.equal(states, OFFLINE), False).cast(pa.int64())).as_py()
    return dict(sorted(by_broker.items())), offline or 0  # (the sum of nothing is null)


# --------------------------------------------------------------- per broker over time


@dataclass(frozen=True, slots=True)
class BrokerView:
    """Per broker over time: online partitions it leads and ISRs it is in, after the events
    `x` (every event, or the last of each bucket of consecutive events)."""

    x: np.ndarray  # event seqs
    brokers: tuple[int, ...]
    leaders: np.ndarray  # brokers x len(x)
    isr: np.ndarray  # brokers x len(x)


def broker_view(
    changes: pa.Table,
    seqs: np.ndarray,
    results: pa.Table | None = None,
    columns: int = BROKER_COLUMNS,
) -> BrokerView:
    """From `state_changes` (one cluster, by seq): every row carries its partition's
    leader and ISR after the transition, and partition rows its state. An accepted
    AlterPartition changes an ISR with no such row: its `event_results` row (no error)
    carries the new leader and ISR, taken after the event's `state_changes` rows. A
    partition counts for its leader while online, for its ISR's members until it is
    deleted; one a snapshot loaded (no partition row yet) is online when it has a leader.
    One pass over the rows."""
    size = -(-len(seqs) // columns) if len(seqs) > columns else 1
    ends = seqs[size - 1 :: size]
    if len(ends) == 0 or ends[-1] != seqs[-1]:
        ends = np.append(ends, seqs[-1])
    ok = changes.filter(_true(changes, "ok"))
    names = ["seq", "entity", "topic", "partition", "to_state", "leader", "isr"]
    ok = ok.select(names).append_column("order", pa.array(np.zeros(ok.num_rows, np.int8)))
    if results is not None and results.num_rows:
        answered = results.filter(
            pc.and_(pc.is_null(results.column("error")), pc.is_valid(results.column("isr")))
        )
        n = answered.num_rows
        answered = pa.table(
            {
                "seq": answered.column("seq"),
                "entity": pa.nulls(n, pa.string()),
                "topic": answered.column("topic"),
                "partition": answered.column("partition"),
                "to_state": pa.nulls(n, pa.string()),
                "leader": answered.column("leader"),
                "isr": answered.column("isr"),
                "order": pa.array(np.ones(n, np.int8)),
            },
            schema=ok.schema,
        )
        ok = pa.concat_tables([ok, answered])
        # stable: each table's rows of one event keep their order
        ok = ok.take(pc.sort_indices(ok, [("seq", "ascending"), ("order", "ascending")]))
    rows = zip(
        ok.column("seq").to_pylist(),
        ok.column("entity").to_pylist(),
        ok.column("topic").to_pylist(),
        ok.column("partition").to_pylist(),
        ok.column("to_state").to_pylist(),
        ok.column("leader").to_pylist(),
        ok.column("isr").to_pylist(),
        strict=True,
    )
    states: dict[tuple[str, int], str] = {}
    held: dict[tuple[str, int], tuple[int, tuple[int, ...]]] = {}  # what each one counts for
    lead: dict[int, int] = {}
    member: dict[int, int] = {}
    samples: list[tuple[dict[int, int], dict[int, int]]] = []
    end = 0

    def count(key: tuple[str, int], sign: int) -> None:
        leader, isr = held[key]
        if leader >= 0 and states.get(key, ONLINE) == ONLINE:
            lead[leader] = lead.get(leader, 0) + sign
        for broker in isr:
            member[broker] = member.get(broker, 0) + sign

    for seq, entity, topic, partition, to_state, leader, isr in rows:
        while end < len(ends) and seq > ends[end]:
            samples.append((dict(lead), dict(member)))
            end += 1
        key = (topic, partition)
        if key in held:
            count(key, -1)
        if entity == "partition":
            states[key] = to_state
        if to_state == "NonExistentPartition":
            held.pop(key, None)
            continue
        before = held.get(key, (-1, ()))
        held[key] = (
            before[0] if leader is None else leader,
            before[1] if isr is None else tuple(isr),
        )
        count(key, +1)
    while end < len(ends):
        samples.append((dict(lead), dict(member)))
        end += 1
    brokers = tuple(sorted({b for a, m in samples for b in (*a, *m) if b >= 0}))
    leaders = np.array([[a.get(b, 0) for a, _ in samples] for b in brokers], np.int64)
    isr_counts = np.array([[m.get(b, 0) for _, m in samples] for b in brokers], np.int64)
    empty = np.zeros((0, len(ends)), np.int64)
    return BrokerView(
        ends,
        brokers,
        leaders if brokers else empty,
        isr_counts if brokers else empty,
    )
