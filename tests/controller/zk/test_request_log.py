"""The batch's controller_requests and request_payloads as a RequestLog: the same rows
(CONTRACT §2) as one dict per request (one per body for the payloads), and the same Arrow
tables as those rows give."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from controller.zk.journal import Journal
from controller.zk.request_log import RECIPIENT_COLUMNS, REQUEST_COLUMNS, RequestLog, joined
from schemas import TABLES
from streaming.lake.spark_schemas import rows_to_arrow

PARTITION = {
    "topic": "t",
    "partition": 0,
    "controller_epoch": 1,
    "leader": 1,
    "leader_epoch": 0,
    "isr": [1, 2],
    "partition_epoch": 3,
    "replicas": [1, 2],
    "adding_replicas": None,
    "removing_replicas": None,
    "leader_recovery_state": None,
    "offline_replicas": [],
    "is_new": None,
    "delete_partition": None,
}


def journal_with_requests(cluster: str = "c", event_id: str = "c:7") -> Journal:
    journal = Journal(cluster)
    journal.begin(event_id, 7, 1_700_000_000_000)
    journal.request(2, "LeaderAndIsr", 1, True, [PARTITION], None)
    journal.fan_out(2, "UpdateMetadata", [1, 2, 3], {1, 3}.__contains__, [PARTITION], [1, 3])
    journal.request(2, "StopReplica", 4, False, [], None)
    return journal


def test_columns_are_the_tables():
    requests = TABLES["controller_requests"].column_names
    payloads = TABLES["request_payloads"].column_names
    assert sorted((*REQUEST_COLUMNS, *RECIPIENT_COLUMNS)) == sorted({*requests, *payloads})
    assert set(payloads) <= set(REQUEST_COLUMNS)


def test_rows_number_requests_and_name_each_recipient():
    log = journal_with_requests().requests
    base = {"cluster": "c", "controller_epoch": 2, "event_id": "c:7", "seq": 7}
    base["ts"] = 1_700_000_000_000
    um = {"type": "UpdateMetadata", "payload": 1}
    expected = [
        {**base, "request_seq": 1, "type": "LeaderAndIsr", "broker": 1, "delivered": True,
         "payload": 0},
        {**base, **um, "request_seq": 2, "broker": 1, "delivered": True},
        {**base, **um, "request_seq": 3, "broker": 2, "delivered": False},
        {**base, **um, "request_seq": 4, "broker": 3, "delivered": True},
        {**base, "request_seq": 5, "type": "StopReplica", "broker": 4, "delivered": False,
         "payload": 2},
    ]  # fmt: skip
    assert len(log) == 5
    assert list(log) == expected
    assert log == expected
    assert log[2] == expected[2] and log[-1] == expected[-1] and log[1:3] == expected[1:3]
    # every column in the table's order
    assert [tuple(row) for row in log] == [TABLES["controller_requests"].column_names] * 5


def test_each_body_is_one_payload_row():
    log = journal_with_requests().requests
    key = {"cluster": "c", "event_id": "c:7", "seq": 7}
    ts = {"ts": 1_700_000_000_000}
    expected = [
        {**key, "payload": 0, "type": "LeaderAndIsr", "partitions": [PARTITION],
         "live_brokers": None, **ts},
        {**key, "payload": 1, "type": "UpdateMetadata", "partitions": [PARTITION],
         "live_brokers": [1, 3], **ts},
        {**key, "payload": 2, "type": "StopReplica", "partitions": [], "live_brokers": None,
         **ts},
    ]  # fmt: skip
    payloads = log.payloads()
    assert len(payloads) == 3 and list(payloads) == expected and payloads == expected
    assert payloads[1] == expected[1] and payloads[-1] == expected[-1]
    assert payloads[:2] == expected[:2]
    assert [tuple(row) for row in payloads] == [TABLES["request_payloads"].column_names] * 3
    # joined back, the recipients of one body share it, as one request object would
    requests = joined(log, payloads)
    assert [r["live_brokers"] for r in requests] == [None, [1, 3], [1, 3], [1, 3], None]
    assert requests[1]["partitions"] is requests[3]["partitions"]


def test_a_payload_view_follows_its_log():
    log = RequestLog()
    payloads = log.payloads()
    log.extend(journal_with_requests().requests)
    assert len(payloads) == 3


def test_draining_payloads_gives_the_same_rows_and_lets_each_body_go():
    """replay writes a batch's payloads with `drain`: each body leaves the log as its row
    is taken, so its entries are freed once written, not all together after the batch."""
    log = journal_with_requests().requests
    expected = list(log.payloads())
    drained = log.payloads().drain()
    first = next(drained)
    assert first == expected[0]
    assert log._requests[0] is None and log._requests[1] is not None
    assert [first, *drained] == expected
    assert log._requests == [None] * 3


def test_payloads_number_on_within_an_event_and_start_over_with_the_next():
    journal = journal_with_requests()
    journal.request(2, "LeaderAndIsr", 5, True, [PARTITION], None)
    journal.begin("c:8", 8, None)
    journal.request(2, "LeaderAndIsr", 5, True, [PARTITION], None)
    payloads = journal.requests.payloads()
    assert [(p["event_id"], p["payload"]) for p in payloads] == [
        ("c:7", 0), ("c:7", 1), ("c:7", 2), ("c:7", 3), ("c:8", 0)
    ]  # fmt: skip


def test_extend_keeps_each_logs_rows_in_order():
    first, second = journal_with_requests("a", "a:7"), journal_with_requests("b", "b:7")
    merged = RequestLog()
    merged.extend(first.requests)
    merged.extend(second.requests)
    assert list(merged) == list(first.requests) + list(second.requests)
    assert [r["cluster"] for r in merged] == ["a"] * 5 + ["b"] * 5


def test_arrow_equals_the_rows_arrow():
    log = journal_with_requests().requests
    assert rows_to_arrow(log, "controller_requests").equals(
        rows_to_arrow(list(log), "controller_requests")
    )
    assert rows_to_arrow(log.payloads(), "request_payloads").equals(
        rows_to_arrow(list(log.payloads()), "request_payloads")
    )
    assert rows_to_arrow(RequestLog(), "controller_requests").num_rows == 0
    assert rows_to_arrow(RequestLog().payloads(), "request_payloads").num_rows == 0


def test_arrow_escapes_an_undecodable_byte_as_the_rows_do():
    # a byte that is not UTF-8 reaches the core as a surrogate escape (CONTRACT §1)
    log = journal_with_requests("c\udcff", "c\udcff:7").requests
    table = rows_to_arrow(log, "controller_requests")
    assert table.equals(rows_to_arrow(list(log), "controller_requests"))
    assert table.column("cluster").to_pylist() == ["c\\udcff"] * 5
    payloads = rows_to_arrow(log.payloads(), "request_payloads")
    assert payloads.equals(rows_to_arrow(list(log.payloads()), "request_payloads"))
    assert payloads.column("event_id").to_pylist() == ["c\\udcff:7"] * 3


# ----------------------------------------------------------------- random logs (hypothesis)

recipients = st.lists(st.integers(0, 7), unique=True, max_size=5).flatmap(
    lambda brokers: st.tuples(
        st.just(brokers), st.lists(st.booleans(), min_size=len(brokers), max_size=len(brokers))
    )
)
request = st.tuples(
    st.sampled_from(["a", "b\udcff"]),  # the second one as an undecodable byte leaves it
    st.integers(1, 3),
    st.sampled_from(["LeaderAndIsr", "UpdateMetadata", "StopReplica"]),
    recipients,
)


@given(st.lists(st.lists(request, max_size=6), max_size=4), st.data())
@settings(max_examples=150, deadline=None)
def test_any_log_reads_as_the_rows_it_stands_for(logs, data) -> None:
    merged, expected, expected_payloads = RequestLog(), [], []
    for requests in logs:
        log, rows, bodies, request_seq = RequestLog(), [], [], 1
        for payload, (cluster, epoch, request_type, (brokers, delivered)) in enumerate(requests):
            partitions = [PARTITION] if request_type != "StopReplica" else []
            live = list(brokers) if request_type == "UpdateMetadata" else None
            event_id = f"{cluster}:1"
            shared = (cluster, epoch, event_id, 1, request_type, payload, partitions, live, None)
            log.add(shared, request_seq, brokers, delivered)
            bodies.append(
                {"cluster": cluster, "event_id": event_id, "seq": 1, "payload": payload,
                 "type": request_type, "partitions": partitions, "live_brokers": live,
                 "ts": None}
            )  # fmt: skip
            for offset, (broker, sent) in enumerate(zip(brokers, delivered, strict=True)):
                rows.append(
                    {"cluster": cluster, "controller_epoch": epoch, "event_id": event_id,
                     "seq": 1, "request_seq": request_seq + offset, "type": request_type,
                     "broker": broker, "delivered": sent, "payload": payload, "ts": None}
                )  # fmt: skip
            request_seq += len(brokers)
        assert len(log) == len(rows) and list(log) == rows
        assert list(log.payloads()) == bodies
        assert rows_to_arrow(log, "controller_requests").equals(
            rows_to_arrow(rows, "controller_requests")
        )
        assert rows_to_arrow(log.payloads(), "request_payloads").equals(
            rows_to_arrow(bodies, "request_payloads")
        )
        merged.extend(log)
        expected.extend(rows)
        expected_payloads.extend(bodies)
        log.add(("late", 1, "late:1", 2, "StopReplica", 0, [], None, None), 99, [1], [True])
    assert list(merged) == expected
    assert list(merged.payloads()) == expected_payloads
    if expected:
        start = data.draw(st.integers(-len(expected), len(expected) - 1))
        assert merged[start] == expected[start]
        assert merged[start:] == expected[start:]
