"""A ZooKeeper-mode Kafka controller's log lines (Kafka 2.4-3.9) → typed facts (pure).

`Layout` splits a log4j line into time, level, message and logger (Kafka's default layout
`[%d] %p %m (%c)%n`, or a custom conversion pattern). `parse_message` turns a controller's
message into a `Fact`: what happened (an event's start, a partition's state, ...), or
`KNOWN` for a line understood to carry nothing the events need, or None (not understood).

The message formats are those of KafkaController, ZkPartitionStateMachine,
ZkReplicaStateMachine, TopicDeletionManager and LeaderAndIsr's text forms; where versions
differ, both forms are accepted (README: "kcsim import zk-logs").
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache
from typing import NamedTuple

# ------------------------------------------------------------------ layout


class LogLine(NamedTuple):
    ts_ms: int
    level: str
    message: str
    logger: str


_DEFAULT_PATTERN = "[%d] %p %m (%c)%n"
_JAVA_DATE = {  # SimpleDateFormat letters → strptime
    "yyyy": "%Y",
    "MM": "%m",
    "dd": "%d",
    "HH": "%H",
    "mm": "%M",
    "ss": "%S",
}
_DEFAULT_DATE = "yyyy-MM-dd HH:mm:ss,SSS"  # log4j's ISO8601 date


class LayoutError(ValueError):
    """A --pattern this importer cannot read lines with."""


@dataclass(frozen=True, slots=True)
class Layout:
    regex: re.Pattern[str]
    date_format: str  # strptime format of the date without milliseconds
    millis_sep: str  # the text between seconds and milliseconds ("" if none)

    @classmethod
    def from_pattern(cls, pattern: str = _DEFAULT_PATTERN) -> Layout:
        """A log4j 1.x PatternLayout conversion pattern: %d{...}, %p, %m, %c, %t, %X{..}, %n
        (with optional width modifiers); the date must have seconds and milliseconds."""
        out, date, i = [], _DEFAULT_DATE, 0
        seen: set[str] = set()
        token = re.compile(r"%(-?\d+)?(?:\.\d+)?([a-zA-Z%])(\{[^}]*\})?")
        while i < len(pattern):
            m = token.match(pattern, i)
            if m is None:
                out.append(re.escape(pattern[i]))
                i += 1
                continue
            kind, arg = m.group(2), (m.group(3) or "")[1:-1]
            i = m.end()
            if kind == "d":
                date = {"ISO8601": _DEFAULT_DATE, "": _DEFAULT_DATE}.get(arg, arg)
                out.append(r"(?P<ts>.+?)")
            elif kind == "p":
                out.append(r"\s*(?P<level>[A-Z]+)\s*")
            elif kind == "m":
                out.append(r"(?P<message>.*)")
            elif kind == "c":
                out.append(r"(?P<logger>[^\s()]+)")
            elif kind == "n":
                continue
            elif kind == "%":
                out.append("%")
            else:  # thread, MDC, location...: any text without a line break
                out.append(r".*?")
            seen.add(kind)
        if not {"d", "m"} <= seen:
            raise LayoutError(f"pattern {pattern!r} needs %d and %m")
        fmt = date
        for java, py in _JAVA_DATE.items():
            fmt = fmt.replace(java, py)
        if "SSS" not in fmt or "%S" not in fmt:
            raise LayoutError(f"date format {date!r} needs seconds and milliseconds (ss, SSS)")
        head, _, tail = fmt.partition("SSS")
        if tail:
            raise LayoutError(f"date format {date!r} must end with milliseconds (SSS)")
        seconds_end = head.rindex("%S") + 2
        return cls(re.compile("^" + "".join(out) + "$"), head[:seconds_end], head[seconds_end:])

    def parse(self, line: str) -> LogLine | None:
        m = self.regex.match(line)
        if m is None:
            return None
        ts = _epoch_ms(m.group("ts"), self.date_format, self.millis_sep)
        if ts is None:
            return None
        groups = m.groupdict()
        return LogLine(
            ts, groups.get("level") or "INFO", m.group("message"), groups.get("logger") or ""
        )


def _epoch_ms(text: str, date_format: str, sep: str) -> int | None:
    seconds, found, millis = text.rpartition(sep) if sep else (text[:-3], True, text[-3:])
    if not found or len(millis) != 3 or not millis.isdigit():
        return None
    base = _seconds(seconds, date_format)
    return None if base is None else base * 1000 + int(millis)


@lru_cache(maxsize=4096)
def _seconds(text: str, date_format: str) -> int | None:
    # Log times are local wall-clock times without a zone: read as UTC, so the output's
    # `ts` shows the log's own clock.
    try:
        moment = datetime.strptime(text, date_format)
    except ValueError:
        return None
    return int((moment - _EPOCH).total_seconds())


_EPOCH = datetime(1970, 1, 1)


def is_continuation(line: str) -> bool:
    """A stack trace's lines under a WARN/ERROR record (part of that record)."""
    return (
        line.startswith(("\t", " ", "Caused by:", "...")) or _EXCEPTION_HEAD.match(line) is not None
    )


_EXCEPTION_HEAD = re.compile(r"^[\w$]+(\.[\w$]+)+(Exception|Error|Throwable)\b")


# ------------------------------------------------------------------ facts


class State(NamedTuple):
    """A partition's leadership as a state line gives it (partition_epoch None: the line
    does not say, as in 2.4-3.0's "(Leader:..)" form)."""

    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    partition_epoch: int | None
    controller_epoch: int
    leader_recovery_state: str


class Fact(NamedTuple):
    kind: str
    controller: int  # the logging controller's id
    epoch: int | None = None  # the controller epoch, when the line gives it
    topic: str | None = None
    partition: int | None = None
    brokers: tuple[int, ...] = ()
    value: object = None


KNOWN = "known"  # a Fact kind: understood, nothing for the events

_CONTROLLER = re.compile(r"^\[Controller id=(\d+)\] (.*)$")
_STATE_PREFIX = re.compile(r"^\[Controller id=(\d+) epoch=(\d+)\] (.*)$")
_DELETION = re.compile(r"^\[Topic Deletion Manager (\d+)\] (.*)$")
_OTHER_COMPONENT = re.compile(
    r"^\[(Broker id=\d+|ControllerEventThread controllerId=\d+|RequestSendThread "
    r"controllerId=\d+|ReplicaStateMachine controllerId=\d+|PartitionStateMachine "
    r"controllerId=\d+|Controller-\d+-to-broker-\d+-send-thread|Channel manager on controller "
    r"\d+)\]"
)

_ASSIGNMENT = re.compile(
    r"([A-Za-z0-9._-]+?)-(\d+) -> ReplicaAssignment\(replicas=([\d,]*), addingReplicas=([\d,]*), "
    r"removingReplicas=([\d,]*)\)"
)
_NAMES = re.compile(r"^\w*\((.*)\)$")

_CONTROLLER_EVENTS: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (kind, re.compile(regex))
    for kind, regex in (
        ("elected", r"^(\d+) successfully elected as the controller\. Epoch incremented to (\d+)"),
        ("active_brokers", r"^Currently active brokers in the cluster: \w*\(([\d, ]*)\)$"),
        ("broker_epochs", r"^(?:Initialized|Updated) broker epochs cache: \w*\((.*)\)$"),
        ("topics_to_delete", r"^List of topics to be deleted: (.*)$"),
        (
            "broker_change",
            r"^Newly added brokers: ([\d,]*), deleted brokers: ([\d,]*), bounced brokers: "
            r"([\d,]*), all live brokers: ([\d,]*)$",
        ),
        ("controlled_shutdown", r"^Shutting down broker (\d+)$"),
        (
            "topic_change",
            r"^New topics: \[(.*)\], deleted topics: \[(.*)\], new partition replica "
            r"assignment \[(.*)\]$",
        ),
        ("new_partitions", r"^New partitions to be added (.*)$"),
        ("deletion_start", r"^Starting topic deletion for topics (.*)$"),
        (
            "election",
            r"^Starting replica leader election \((PREFERRED|UNCLEAN)\) for partitions (.*) "
            r"triggered by (\w+)$",
        ),
        ("auto_rebalance", r"^Processing automatic preferred replica leader election$"),
        ("unclean_config", r"^Unclean leader election has been enabled for topic (.+)$"),
        (
            "assignment_updated",
            r"^Successfully updated assignment of partition (.+)-(\d+) to ReplicaAssignment\("
            r"replicas=([\d,]*), addingReplicas=([\d,]*), removingReplicas=([\d,]*)\)$",
        ),
        (
            "leader_epoch_bump",
            r"^Updated leader epoch for partition (.+)-(\d+) to (\d+)(?:, zkVersion=(\d+))?$",
        ),
        (
            "caught_up",
            r"^Target replicas \w*\(([\d, ]*)\) have all caught up with the leader for "
            r"reassigning partition (.+)-(\d+)$",
        ),
        ("resigned", r"^Resigned$"),
    )
)

# KafkaController's other INFO messages (2.4-3.9): understood, no event of their own.
_CONTROLLER_INFO = re.compile(
    r"^(Registering handlers|Deleting (log dir event|isr change) notifications|Initializing "
    r"controller context|Fetching topic deletions in progress|Initializing topic deletion "
    r"manager|Sending update metadata request|Ready to serve as the new controller|Starting the "
    r"controller scheduler|starting the token expiry check scheduler|(Creating|Updating) "
    r"FeatureZNode|Currently shutting brokers in the cluster|Current list of topics in the "
    r"cluster|List of topics ineligible for deletion|Partitions undergoing preferred replica "
    r"election|Partitions that completed preferred replica election|Skipping preferred replica "
    r"election|Resuming preferred replica election|New broker startup callback|Broker failure "
    r"callback|Removed \S+ from list of shutting down brokers|Broker info update callback|New "
    r"partition creation callback|Updated broker metadata|Partition \S+ completed preferred "
    r"replica leader election|Leader -?\d+ for partition \S+ being reassigned|Removing "
    r"partitions|No more partitions need to be reassigned|Skipping reassignment|Failed "
    r"completing reassignment|Handling log directory failure|Some replicas|Restoring the "
    r"partition replica assignment|Skipping adding partitions|Ignoring partition change|Ignoring "
    r"request to delete|Removing .* since delete topic is disabled|Unclean leader election has "
    r"been enabled by default|Received controlled shutdown request|Ignoring AlterPartition|"
    r"Rejecting AlterPartition|Failed to update ISR|Skipping replica leader election|Error "
    r"completing replica leader election|Ignoring (registration|AllocateProducerIds)|Controller "
    r"moved to another broker|Resigning|Skipping|Shutting down|Shutdown completed|Stopped|"
    r"Starting|Failed reassignment through zk)"
)

_CHANGED_ONLINE = re.compile(
    r"^Changed partition (.+)-(\d+) from (\w+) to OnlinePartition with state "
    r"LeaderAndIsr\(leader=(-?\d+), leaderEpoch=(\d+), (?:isr=\w*\(([\d, ]*)\)|"
    r"isrWithBrokerEpoch=\w*\(((?:BrokerState\(brokerId=\d+, brokerEpoch=-?\d+\)(?:, )?)*)\))"
    r"(?:, leaderRecoveryState=(\w+))?, (?:zkVersion|partitionEpoch)=(-?\d+)\)$"
)
_ISR_REMOVED = re.compile(
    r"^Partition (.+)-(\d+) state changed to \(Leader:(-?\d+),ISR:([\d,]*)"
    r"(?:,LeaderRecoveryState:(\w+))?,LeaderEpoch:(\d+)(?:,ZkVersion:(-?\d+))?,"
    r"ControllerEpoch:(\d+)\) after removing replica (\d+) from the ISR as part of transition "
    r"to OfflineReplica$"
)
_NEW_PARTITION = re.compile(
    r"^Changed partition (.+)-(\d+) state from NonExistentPartition to NewPartition with "
    r"assigned replicas ([\d,]*)$"
)
_STATE_INFO = re.compile(
    r"^(Sending|Sent|Mark replicas|Received error|Failed to send|Controller \d+ epoch \d+ "
    r"(failed|initiated)|Changed partition \S+ state from|Changed state of replica)"
)
_DELETION_DONE = re.compile(r"^Deletion of topic (.+) successfully completed$")
_BROKER_STATE = re.compile(r"brokerId=(\d+)")


def ints(text: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.split(r"[,\s]+", text.strip()) if x)


def names(text: str) -> tuple[str, ...]:
    """A Scala collection's text (`Set(a, b)`, `HashSet()`) or a comma list → names."""
    m = _NAMES.match(text.strip())
    inner = m.group(1) if m else text
    return tuple(x for x in re.split(r",\s*", inner.strip()) if x)


def topic_partitions(text: str) -> tuple[tuple[str, int], ...]:
    out = []
    for item in names(text):
        topic, _, p = item.rpartition("-")
        if topic and p.isdigit():
            out.append((topic, int(p)))
    return tuple(out)


def assignments(text: str) -> dict[tuple[str, int], tuple[tuple[int, ...], tuple[int, ...]]]:
    """`T-0 -> ReplicaAssignment(replicas=.., addingReplicas=.., removingReplicas=..)` items
    → {(topic, partition): (replicas, removing)}."""
    return {
        (m.group(1), int(m.group(2))): (ints(m.group(3)), ints(m.group(5)))
        for m in _ASSIGNMENT.finditer(text)
    }


def parse_message(message: str) -> Fact | None:
    """The fact a controller/state-change log message states; None: not understood."""
    if m := _STATE_PREFIX.match(message):
        return _state_fact(int(m.group(1)), int(m.group(2)), m.group(3))
    if m := _CONTROLLER.match(message):
        return _controller_fact(int(m.group(1)), m.group(2))
    if m := _DELETION.match(message):
        controller, body = int(m.group(1)), m.group(2)
        if done := _DELETION_DONE.match(body):
            return Fact("deletion_done", controller, topic=done.group(1))
        return Fact(KNOWN, controller)
    if _OTHER_COMPONENT.match(message):
        return Fact(KNOWN, -1)
    return None


# Lines of the controller's logger about work that is no controller event (the producer
# id blocks it hands out for idempotent and transactional producers, through
# ZkProducerIdManager): understood, counted by kind, no event. Any cluster with producers
# logs them.
BENIGN: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (kind, re.compile(regex))
    for kind, regex in (
        (
            "producer id block",
            r"^(Acquired new producerId block|Read current producerId block|There is no "
            r"producerId block yet)",
        ),
    )
)


def _controller_fact(controller: int, body: str) -> Fact | None:
    for kind, regex in _CONTROLLER_EVENTS:
        if m := regex.match(body):
            return _event_fact(kind, controller, m)
    if _CONTROLLER_INFO.match(body):
        return Fact(KNOWN, controller)
    for kind, regex in BENIGN:
        if regex.match(body):
            return Fact(KNOWN, controller, value=kind)
    return None


def _event_fact(kind: str, controller: int, m: re.Match[str]) -> Fact:
    g = m.groups()
    if kind == "elected":
        return Fact(kind, int(g[0]), epoch=int(g[1]))
    if kind == "active_brokers":
        return Fact(kind, controller, brokers=ints(g[0]))
    if kind == "broker_epochs":
        pairs = re.findall(r"(\d+) -> (\d+)", g[0])
        return Fact(kind, controller, value={int(b): int(e) for b, e in pairs})
    if kind == "topics_to_delete":
        return Fact(kind, controller, value=names(g[0]))
    if kind == "broker_change":
        return Fact(
            kind, controller, brokers=ints(g[3]), value=(ints(g[0]), ints(g[1]), ints(g[2]))
        )
    if kind == "controlled_shutdown":
        return Fact(kind, controller, brokers=(int(g[0]),))
    if kind == "topic_change":
        return Fact(kind, controller, value=(names(g[0]), assignments(g[2])))
    if kind == "new_partitions":
        return Fact(kind, controller, value=assignments(g[0]))
    if kind == "deletion_start":
        return Fact(kind, controller, value=names(g[0]))
    if kind == "election":
        return Fact(kind, controller, value=(g[0].lower(), topic_partitions(g[1]), g[2]))
    if kind == "unclean_config":
        return Fact(kind, controller, topic=g[0])
    if kind == "assignment_updated":
        target = (ints(g[2]), ints(g[3]), ints(g[4]))
        return Fact(kind, controller, topic=g[0], partition=int(g[1]), value=target)
    if kind == "leader_epoch_bump":
        version = int(g[3]) if g[3] is not None else None
        return Fact(kind, controller, topic=g[0], partition=int(g[1]), value=(int(g[2]), version))
    if kind == "caught_up":
        return Fact(kind, controller, topic=g[1], partition=int(g[2]), brokers=ints(g[0]))
    return Fact(kind, controller)  # auto_rebalance, resigned


def _state_fact(controller: int, epoch: int, body: str) -> Fact | None:
    if m := _CHANGED_ONLINE.match(body):
        g = m.groups()
        isr = ints(g[5]) if g[5] is not None else tuple(int(b) for b in _BROKER_STATE.findall(g[6]))
        state = State(int(g[3]), int(g[4]), isr, int(g[8]), epoch, g[7] or "RECOVERED")
        return Fact("state", controller, epoch, g[0], int(g[1]), value=state)
    if m := _ISR_REMOVED.match(body):
        g = m.groups()
        version = int(g[6]) if g[6] is not None else None
        state = State(int(g[2]), int(g[5]), ints(g[3]), version, int(g[7]), g[4] or "RECOVERED")
        return Fact("state", controller, epoch, g[0], int(g[1]), (int(g[8]),), state)
    if m := _NEW_PARTITION.match(body):
        return Fact(
            "new_partition", controller, epoch, m.group(1), int(m.group(2)), value=ints(m.group(3))
        )
    if _STATE_INFO.match(body):
        return Fact(KNOWN, controller, epoch)
    return None
