"""``replog consumer-groups`` against a live 3-broker cluster. The groups are made by an
independent client (kafka-python: its consumers join, consume and commit), and every effect of
the tool is checked with kafka-python too: committed offsets read back, the offset a fresh
consumer of the group starts from, the groups the cluster lists."""

from __future__ import annotations

import datetime as dt
import json
import pathlib
import time
import uuid
import warnings
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import pytest

from replog import Cluster
from replog.cli import main
from replog.tools.offset_reset import (
    ResetRule,
    format_reset_plan,
    parse_datetime_ms,
    parse_duration_ms,
    parse_reset_plan,
    parse_topic_partitions,
    plan_reset,
)
from tests.waiting import wait_for

with warnings.catch_warnings():
    warnings.filterwarnings("ignore", ".*(read_text|open_text) is deprecated", DeprecationWarning)
    from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.structs import OffsetAndMetadata

pytestmark = [
    pytest.mark.system,
    pytest.mark.timeout(180),
    pytest.mark.filterwarnings("ignore:.*(read_text|open_text) is deprecated:DeprecationWarning"),
]

T = TypeVar("T")
RECORDS = 10


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    with Cluster.local(3) as c:
        yield c


def groups_cli(cluster: Cluster, *args: str) -> int:
    return main(["consumer-groups", "--bootstrap-server", cluster.bootstrap, *args])


def as_json(
    cluster: Cluster, capsys: pytest.CaptureFixture[str], *args: str, status: int = 0
) -> Any:
    capsys.readouterr()
    assert groups_cli(cluster, *args, "--output", "json") == status
    return json.loads(capsys.readouterr().out)


def fresh_topic(
    cluster: Cluster, partitions: int = 2, timestamps_ms: list[int] | None = None
) -> str:
    """A topic with ``RECORDS`` records in each partition, written by kafka-python."""
    name = f"t-{uuid.uuid4().hex[:8]}"
    create = ["--create", "--topic", name, "--partitions", str(partitions)]
    assert (
        main(
            [
                "topics",
                "--bootstrap-server",
                cluster.bootstrap,
                *create,
                "--replication-factor",
                "3",
            ]
        )
        == 0
    )
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap, acks="all")
    try:
        for partition in range(partitions):
            for i in range(RECORDS):
                stamp = None if timestamps_ms is None else timestamps_ms[i]
                producer.send(name, value=b"v%d" % i, partition=partition, timestamp_ms=stamp)
        producer.flush(timeout=30)
    finally:
        producer.close()
    return name


def kafka_consumer(cluster: Cluster, group: str, **options: Any) -> KafkaConsumer:
    return KafkaConsumer(
        bootstrap_servers=cluster.bootstrap,
        group_id=group,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        **options,
    )


def commit(cluster: Cluster, group: str, offsets: dict[tuple[str, int], int]) -> None:
    """Commit ``offsets`` for ``group`` with kafka-python, outside any generation."""
    consumer = kafka_consumer(cluster, group)
    try:
        consumer.assign([TopicPartition(t, p) for t, p in offsets])
        consumer.commit(
            {TopicPartition(t, p): OffsetAndMetadata(o, "", -1) for (t, p), o in offsets.items()}
        )
    finally:
        consumer.close()


def committed(cluster: Cluster, group: str, tp: tuple[str, int]) -> int | None:
    """The group's committed offset of ``tp`` as kafka-python reads it."""
    consumer = kafka_consumer(cluster, group)
    try:
        value = consumer.committed(TopicPartition(*tp))
        return None if value is None else int(value)
    finally:
        consumer.close()


def first_offset_read(cluster: Cluster, group: str, tp: tuple[str, int]) -> int:
    """The offset of the first record a fresh kafka-python consumer of ``group`` reads."""
    consumer = kafka_consumer(cluster, group)
    try:
        consumer.assign([TopicPartition(*tp)])
        batch: dict[Any, list[Any]] = wait_for(lambda: consumer.poll(timeout_ms=500), bool)
        return int(next(iter(batch.values()))[0].offset)
    finally:
        consumer.close()


def offsets_read_by_kafka_python(cluster: Cluster, group: str) -> dict[tuple[str, int], int]:
    """Every committed offset of ``group``, as kafka-python's admin client lists them."""
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap)
    try:
        listed = admin.list_group_offsets({group: None})[group]
    finally:
        admin.close()
    return {(tp.topic, tp.partition): int(o.offset) for tp, o in listed.items()}


@pytest.fixture
def member(cluster: Cluster) -> Iterator[Callable[[str, str], KafkaConsumer]]:
    """Start kafka-python consumers that join a group and stay in it until the test ends."""
    started: list[KafkaConsumer] = []

    def start(group: str, topic: str) -> KafkaConsumer:
        consumer = kafka_consumer(cluster, group, client_id="cg-test-client")
        consumer.subscribe([topic])
        started.append(consumer)
        wait_for(lambda: (consumer.poll(timeout_ms=200), consumer.assignment())[1], bool)
        return consumer

    yield start
    for consumer in started:
        consumer.close()


def test_describe_shows_committed_offset_log_end_and_lag(
    cluster: Cluster, capsys: pytest.CaptureFixture[str]
) -> None:
    topic = fresh_topic(cluster)
    commit(cluster, "lagging", {(topic, 0): 4, (topic, 1): 10})
    (group,) = as_json(cluster, capsys, "--describe", "--group", "lagging")["groups"]
    rows = {row["partition"]: row for row in group["partitions"]}
    assert rows[0] == {
        "topic": topic,
        "partition": 0,
        "current_offset": 4,
        "log_end_offset": RECORDS,
        "lag": RECORDS - 4,
        "consumer_id": None,
        "host": None,
        "client_id": None,
    }
    assert rows[1]["lag"] == 0
    assert groups_cli(cluster, "--describe", "--group", "lagging") == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "Consumer group 'lagging' has no active members."
    assert lines[1].split() == [
        "GROUP",
        "TOPIC",
        "PARTITION",
        "CURRENT-OFFSET",
        "LOG-END-OFFSET",
        "LAG",
        "CONSUMER-ID",
        "HOST",
        "CLIENT-ID",
    ]
    assert lines[2].split() == ["lagging", topic, "0", "4", "10", "6", "-", "-", "-"]


def test_describe_members_and_state_of_an_active_group(
    cluster: Cluster,
    capsys: pytest.CaptureFixture[str],
    member: Callable[[str, str], KafkaConsumer],
) -> None:
    topic = fresh_topic(cluster, partitions=1)
    consumer = member("active", topic)
    member_id = consumer._coordinator._generation.member_id
    (group,) = as_json(cluster, capsys, "--describe", "--group", "active")["groups"]
    (row,) = group["partitions"]
    assert (row["consumer_id"], row["client_id"]) == (member_id, "cg-test-client")
    assert "127.0.0.1" in row["host"] and row["log_end_offset"] == RECORDS
    (group,) = as_json(cluster, capsys, "--describe", "--group", "active", "--members")["groups"]
    (described,) = group["members"]
    assert described["consumer_id"] == member_id
    assert described["assignment"] == [{"topic": topic, "partition": 0}]
    (state,) = as_json(cluster, capsys, "--describe", "--group", "active", "--state")["groups"]
    assert state["state"] == "Stable" and state["members"] == 1
    from confluent_kafka.admin import AdminClient

    confluent = AdminClient({"bootstrap.servers": cluster.bootstrap})
    theirs = confluent.describe_consumer_groups(["active"])["active"].result(timeout=20)
    assert state["coordinator"] == theirs.coordinator.id
    assert state["coordinator"] in {1, 2, 3}
    assert state["assignment_strategy"] in ("range", "roundrobin", "sticky", "cooperative-sticky")


def test_describe_of_a_missing_group_fails(
    cluster: Cluster, capsys: pytest.CaptureFixture[str]
) -> None:
    assert groups_cli(cluster, "--describe", "--group", "never-was") == 1
    assert "'never-was' do not exist" in capsys.readouterr().err


def test_list_and_describe_all_groups_match_kafka_python(
    cluster: Cluster, capsys: pytest.CaptureFixture[str]
) -> None:
    topic = fresh_topic(cluster, partitions=1)
    commit(cluster, "listed-a", {(topic, 0): 1})
    commit(cluster, "listed-b", {(topic, 0): 2})
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap)
    try:
        theirs = {g[0] if isinstance(g, tuple) else g["group_id"] for g in admin.list_groups()}
    finally:
        admin.close()
    listed = as_json(cluster, capsys, "--list")["groups"]
    assert {g["group"] for g in listed} == theirs and {"listed-a", "listed-b"} <= theirs
    assert groups_cli(cluster, "--list") == 0
    assert set(capsys.readouterr().out.split()) == theirs
    described = as_json(cluster, capsys, "--describe", "--all-groups")["groups"]
    offsets = {
        g["group"]: r["current_offset"]
        for g in described
        for r in g["partitions"]
        if r["topic"] == topic
    }
    assert offsets == {"listed-a": 1, "listed-b": 2}


def test_reset_is_a_dry_run_unless_execute_and_the_group_then_starts_there(
    cluster: Cluster, capsys: pytest.CaptureFixture[str]
) -> None:
    topic = fresh_topic(cluster)
    commit(cluster, "resetting", {(topic, 0): 7, (topic, 1): 7})
    reset = ("--reset-offsets", "--group", "resetting", "--topic", f"{topic}:0", "--to-offset", "3")
    plan = as_json(cluster, capsys, *reset)
    assert plan["executed"] is False
    assert plan["partitions"] == [
        {"topic": topic, "partition": 0, "new_offset": 3, "previous_offset": 7}
    ]
    assert committed(cluster, "resetting", (topic, 0)) == 7  # the dry run changed nothing
    assert as_json(cluster, capsys, *reset, "--execute")["executed"] is True
    assert committed(cluster, "resetting", (topic, 0)) == 3
    assert committed(cluster, "resetting", (topic, 1)) == 7  # not named: untouched
    assert first_offset_read(cluster, "resetting", (topic, 0)) == 3
    assert groups_cli(cluster, *reset[:-2], "--to-earliest", "--execute") == 0
    assert "resetting " + topic in capsys.readouterr().out
    assert first_offset_read(cluster, "resetting", (topic, 0)) == 0


def test_reset_rules_shift_clamp_and_all_topics(
    cluster: Cluster, capsys: pytest.CaptureFixture[str]
) -> None:
    topic = fresh_topic(cluster)
    commit(cluster, "shifting", {(topic, 0): 5, (topic, 1): 8})
    base = ("--reset-offsets", "--group", "shifting", "--all-topics", "--execute")
    shifted = as_json(cluster, capsys, *base, "--shift-by", "3")["partitions"]
    assert [(r["partition"], r["new_offset"]) for r in shifted] == [(0, 8), (1, RECORDS)]
    assert committed(cluster, "shifting", (topic, 0)) == 8
    assert committed(cluster, "shifting", (topic, 1)) == RECORDS  # 11 clamped to the log end
    as_json(cluster, capsys, *base, "--shift-by", "-100")
    assert committed(cluster, "shifting", (topic, 1)) == 0
    as_json(cluster, capsys, *base, "--to-latest")
    assert committed(cluster, "shifting", (topic, 0)) == RECORDS


def test_reset_by_time(cluster: Cluster, capsys: pytest.CaptureFixture[str]) -> None:
    now_ms = int(time.time() * 1000)
    two_days_ms = 2 * 86_400_000
    stamps = [now_ms - two_days_ms + i * 1000 for i in range(5)] + [now_ms] * 5
    topic = fresh_topic(cluster, partitions=1, timestamps_ms=stamps)
    commit(cluster, "timely", {(topic, 0): 0})
    base = ("--reset-offsets", "--group", "timely", "--topic", topic, "--execute")
    as_json(cluster, capsys, *base, "--by-duration", "P1D")
    assert committed(cluster, "timely", (topic, 0)) == 5  # the first record of the last day
    moment = dt.datetime.fromtimestamp((stamps[2] - 500) / 1000, tz=dt.UTC).isoformat()
    as_json(cluster, capsys, *base, "--to-datetime", moment)
    assert committed(cluster, "timely", (topic, 0)) == 2
    as_json(cluster, capsys, *base, "--by-duration", "PT0S")  # nothing after now: the log end
    assert committed(cluster, "timely", (topic, 0)) == RECORDS


def test_export_a_plan_edit_it_and_execute_it_from_the_file(
    cluster: Cluster, capsys: pytest.CaptureFixture[str], tmp_path: pathlib.Path
) -> None:
    topic, other = fresh_topic(cluster), fresh_topic(cluster, partitions=1)
    commit(cluster, "planned", {(topic, 0): 7, (topic, 1): 7, (other, 0): 1})
    capsys.readouterr()
    export = ("--reset-offsets", "--group", "planned", "--topic", topic, "--to-offset", "2")
    assert groups_cli(cluster, *export, "--export") == 0
    csv = capsys.readouterr().out
    assert csv == f"{topic},0,2\n{topic},1,2\n"  # Kafka's single-group CSV, no header
    before = {(topic, 0): 7, (topic, 1): 7, (other, 0): 1}
    assert offsets_read_by_kafka_python(cluster, "planned") == before  # a dry run
    plan = tmp_path / "plan.csv"
    plan.write_text(csv.replace(f"{topic},1,2", f"{topic},1,99") + f"\n{other},0,3\n")
    from_file = ("--reset-offsets", "--group", "planned", "--from-file", str(plan))
    assert groups_cli(cluster, *from_file) == 0
    rows = [line.split() for line in capsys.readouterr().out.splitlines()]
    assert ["planned", topic, "0", "2"] in rows and ["planned", other, "0", "3"] in rows
    assert offsets_read_by_kafka_python(cluster, "planned") == before  # still a dry run
    assert groups_cli(cluster, *from_file, "--execute", "--export") == 0
    # 99 clamped to the log end, as Kafka does with a plan's offsets
    exported = sorted([f"{topic},0,2", f"{topic},1,{RECORDS}", f"{other},0,3"])
    assert capsys.readouterr().out == "".join(line + "\n" for line in exported)
    assert offsets_read_by_kafka_python(cluster, "planned") == {
        (topic, 0): 2,
        (topic, 1): RECORDS,
        (other, 0): 3,
    }
    assert first_offset_read(cluster, "planned", (other, 0)) == 3
    # Kafka's several-group form: only this group's lines count
    plan.write_text(f"elsewhere,{topic},0,9\nplanned,{topic},0,5\n")
    assert as_json(cluster, capsys, *from_file, "--execute")["partitions"] == [
        {"topic": topic, "partition": 0, "new_offset": 5, "previous_offset": 2}
    ]
    assert offsets_read_by_kafka_python(cluster, "planned")[(topic, 0)] == 5


def test_reset_to_current_keeps_committed_offsets_and_takes_the_log_end_elsewhere(
    cluster: Cluster, capsys: pytest.CaptureFixture[str]
) -> None:
    topic = fresh_topic(cluster)
    commit(cluster, "current", {(topic, 0): 6})
    reset = ("--reset-offsets", "--group", "current", "--topic", topic, "--to-current")
    planned = as_json(cluster, capsys, *reset)["partitions"]
    assert [(r["partition"], r["new_offset"], r["previous_offset"]) for r in planned] == [
        (0, 6, 6),
        (1, RECORDS, None),
    ]
    assert offsets_read_by_kafka_python(cluster, "current") == {(topic, 0): 6}
    as_json(cluster, capsys, *reset, "--execute")
    assert offsets_read_by_kafka_python(cluster, "current") == {(topic, 0): 6, (topic, 1): RECORDS}


@pytest.mark.parametrize(
    ("lines", "reason"),
    [
        ("{topic},0,1\nno-such-topic-x,0,1\n", "topic 'no-such-topic-x' does not exist"),
        ("{topic},0,1\n{topic},2,1\n", "has no partition 2"),
        ("{topic},0,1\n{topic},1,ten\n", "line 2: '{topic},1,ten': partition and offset must"),
        ("{topic},0\n", "line 1: '{topic},0' is not topic,partition,offset"),
        ("{topic},0,-1\n", "must be >= 0"),
        ("{topic},0,1\n{topic},0,2\n", "line 2: {topic}-0 is listed twice"),
        ("\n", "no reset plan for group '{group}'"),
        ("other-group,{topic},0,1\n", "no reset plan for group '{group}' (only lines of 1"),
    ],
)
def test_a_bad_plan_file_fails_clearly_and_resets_nothing(
    cluster: Cluster,
    capsys: pytest.CaptureFixture[str],
    tmp_path: pathlib.Path,
    lines: str,
    reason: str,
) -> None:
    topic, group = fresh_topic(cluster), f"filed-{uuid.uuid4().hex[:8]}"
    commit(cluster, group, {(topic, 0): 4})
    plan = tmp_path / "plan.csv"
    plan.write_text(lines.format(topic=topic))
    capsys.readouterr()
    args = ("--reset-offsets", "--group", group, "--from-file", str(plan), "--execute")
    assert groups_cli(cluster, *args) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"replog consumer-groups: --from-file {plan}: "), err
    assert reason.format(topic=topic, group=group) in err
    assert offsets_read_by_kafka_python(cluster, group) == {(topic, 0): 4}


def test_a_missing_plan_file_fails(cluster: Cluster, capsys: pytest.CaptureFixture[str]) -> None:
    args = ("--reset-offsets", "--group", "filed", "--from-file", "/nonexistent/plan.csv")
    assert groups_cli(cluster, *args) == 1
    assert "cannot read it" in capsys.readouterr().err


def test_reset_is_refused_while_the_group_has_members(
    cluster: Cluster,
    capsys: pytest.CaptureFixture[str],
    member: Callable[[str, str], KafkaConsumer],
) -> None:
    topic = fresh_topic(cluster, partitions=1)
    commit(cluster, "busy", {(topic, 0): 6})
    member("busy", topic)
    capsys.readouterr()
    args = ("--reset-offsets", "--group", "busy", "--topic", topic, "--to-earliest", "--execute")
    assert groups_cli(cluster, *args) == 1
    err = capsys.readouterr().err
    assert err.startswith("replog consumer-groups: ") and "inactive" in err and "Stable" in err
    assert committed(cluster, "busy", (topic, 0)) == 6


def test_delete_groups_and_offsets(
    cluster: Cluster,
    capsys: pytest.CaptureFixture[str],
    member: Callable[[str, str], KafkaConsumer],
) -> None:
    topic = fresh_topic(cluster)
    commit(cluster, "forgetful", {(topic, 0): 3, (topic, 1): 4})
    out = as_json(
        cluster, capsys, "--delete-offsets", "--group", "forgetful", "--topic", f"{topic}:0"
    )
    assert out["partitions"] == [{"topic": topic, "partition": 0, "status": "Successful"}]
    assert committed(cluster, "forgetful", (topic, 0)) is None
    assert committed(cluster, "forgetful", (topic, 1)) == 4

    commit(cluster, "doomed", {(topic, 0): 1})
    assert as_json(cluster, capsys, "--delete", "--group", "doomed") == {"deleted": ["doomed"]}
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap)
    try:
        groups = {g[0] if isinstance(g, tuple) else g["group_id"] for g in admin.list_groups()}
    finally:
        admin.close()
    assert "doomed" not in groups and "forgetful" in groups
    assert committed(cluster, "doomed", (topic, 0)) is None

    member("occupied", topic)
    capsys.readouterr()
    assert groups_cli(cluster, "--delete", "--group", "occupied") == 1
    assert "NON_EMPTY_GROUP" in capsys.readouterr().err


@pytest.mark.parametrize(
    "args",
    [
        ["--describe"],  # no group
        ["--reset-offsets", "--group", "g", "--topic", "t"],  # no rule
        ["--reset-offsets", "--group", "g", "--to-earliest"],  # no topic
        ["--reset-offsets", "--group", "g", "--topic", "t", "--all-topics", "--to-latest"],
        ["--reset-offsets", "--all-groups", "--topic", "t", "--to-latest"],
        ["--reset-offsets", "--group", "g", "--topic", "t:x", "--to-latest"],
        ["--reset-offsets", "--group", "g", "--topic", "t", "--by-duration", "1 day"],
        ["--reset-offsets", "--group", "g", "--topic", "t", "--to-datetime", "yesterday"],
        ["--reset-offsets", "--group", "g", "--topic", "t", "--to-latest", "--to-earliest"],
        ["--describe", "--group", "g", "--execute"],
        ["--describe", "--group", "g", "--members", "--state"],
        ["--list", "--members"],
        ["--delete-offsets", "--group", "g"],  # no topic
        ["--list", "--delete"],
        ["--reset-offsets", "--group", "g", "--from-file", "f", "--topic", "t"],
        ["--reset-offsets", "--group", "g", "--from-file", "f", "--to-current"],
        ["--reset-offsets", "--group", "g", "--topic", "t", "--to-current", "--to-latest"],
        [
            "--reset-offsets",
            "--group",
            "g",
            "--all-topics",
            "--to-latest",
            "--export",
            "--output",
            "json",
        ],
        ["--describe", "--group", "g", "--export"],
    ],
)
def test_usage_errors_exit_2(args: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["consumer-groups", "--bootstrap-server", "127.0.0.1:1", *args])
    assert exit_.value.code == 2
    assert "usage: replog consumer-groups" in capsys.readouterr().err


def test_the_offset_arithmetic() -> None:
    assert parse_topic_partitions("t") == ("t", None)
    assert parse_topic_partitions("t:2,0") == ("t", (0, 2))
    assert parse_duration_ms("P1DT2H3M4.5S") == ((24 + 2) * 3600 + 3 * 60 + 4.5) * 1000
    assert parse_duration_ms("PT15M") == 15 * 60_000
    assert parse_datetime_ms("1970-01-01T00:00:01.5+00:00") == 1500
    tp = ("t", 0)
    bounds = {"committed": {tp: 5}, "earliest": {tp: 2}, "latest": {tp: 9}}
    assert plan_reset(ResetRule("to-offset", 100), [tp], **bounds) == {tp: 9}
    assert plan_reset(ResetRule("to-offset", 0), [tp], **bounds) == {tp: 2}
    assert plan_reset(ResetRule("shift-by", -2), [tp], **bounds) == {tp: 3}
    assert plan_reset(ResetRule("to-datetime", 7), [tp], **bounds, at_time={tp: -1}) == {tp: 9}
    assert plan_reset(ResetRule("to-current"), [tp], **bounds) == {tp: 5}
    beyond = {"committed": {tp: 12}, "earliest": {tp: 2}, "latest": {tp: 9}}
    assert plan_reset(ResetRule("to-current"), [tp], **beyond) == {tp: 12}  # kept, as Kafka
    assert plan_reset(ResetRule("to-current"), [tp], **{**bounds, "committed": {}}) == {tp: 9}
    file_plan = {tp: 1, ("t", 1): 4}
    assert parse_reset_plan(format_reset_plan(file_plan), "g") == file_plan
    assert format_reset_plan(file_plan) == "t,0,1\nt,1,4\n"
    assert parse_reset_plan("g,t,0,3\nh,t,0,8\n\n", "g") == {tp: 3}
    requested = {"requested": {tp: 1}}
    assert plan_reset(ResetRule("from-file"), [tp], **bounds, **requested) == {tp: 2}
    with pytest.raises(ValueError, match="no committed offset"):
        plan_reset(ResetRule("shift-by", 1), [tp], committed={}, earliest={tp: 0}, latest={tp: 1})
