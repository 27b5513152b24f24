"""`metadata_records.record` is the record's fields as compact JSON in field order
(CONTRACT §1.5 of the kraft engine's tables): the text must stay what
`json.dumps(fields, ensure_ascii=False, separators=(",", ":"))` writes, whichever encoder
writes it."""

from __future__ import annotations

import json
from typing import Any

from controller.kraft_runner import record_text
from tests.support.kraft.kraft_scenario import create, make


def _reference(fields: Any) -> str:
    return json.dumps(fields, ensure_ascii=False, separators=(",", ":"))


def test_every_record_of_a_varied_run_is_json_compact_text():
    """Registrations, topic and partition records, fences, ISR changes, a reassignment,
    configs, a topic name outside ASCII: every record's text is the reference text."""
    qc = make(4, min_isr=2, racks={1: "r1", 2: "r2", 3: "r1", 4: "r2"})
    outcomes = [
        create(qc, "t", [1, 2, 3], [2, 3, 4], configs={"min.insync.replicas": "2"}),
        create(qc, "tópico-ü", [3, 4, 1]),
        qc.apply({"type": "controlled_shutdown", "broker": 2}),
        qc.apply({"type": "broker_failure", "broker": 2}),
        qc.apply({"type": "broker_startup", "broker": 2, "rack": "r2"}),
        qc.apply({"type": "isr_change", "topic": "t", "partition": 0, "isr": [1, 3, 2]}),
        qc.apply(
            {"type": "partition_reassignment", "topic": "t", "partition": 1, "replicas": [4, 1]}
        ),
        qc.apply({"type": "topic_deletion", "topic": "tópico-ü"}),
    ]
    records = [record for outcome in outcomes for record in outcome.records]
    assert {r.type for r in records} >= {
        "TopicRecord",
        "PartitionRecord",
        "PartitionChangeRecord",
        "BrokerRegistrationChangeRecord",
        "RemoveTopicRecord",
    }
    for record in records:
        assert record_text(record.fields) == _reference(record.fields), record.type


def test_values_orjson_refuses_fall_back_to_the_same_text():
    """A key that is not a string, an int beyond 64 bits, a lone surrogate: json's text."""
    for fields in ({1: "a", "b": [1, 2]}, {"n": 2**70}, {"s": "\ud800"}, {"e": "é\u2028\x7f"}):
        assert record_text(fields) == _reference(fields)
