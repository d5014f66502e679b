"""``replog reassign`` against live in-process clusters: plans generated, executed, verified and
cancelled through ``replog.cli.main``, each effect checked with an independent Kafka client
(kafka-python's ``KafkaAdminClient``), not with replog's own reads."""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys
import warnings
from collections import Counter
from collections.abc import Iterator
from typing import Any, TypeVar

import pytest

from replog import Cluster
from replog.broker.config import BrokerConfig
from replog.cli import main
from tests.waiting import wait_for

with warnings.catch_warnings():
    warnings.filterwarnings("ignore", ".*(read_text|open_text) is deprecated", DeprecationWarning)
    from kafka import KafkaAdminClient
    from kafka.errors import KafkaError

pytestmark = [
    pytest.mark.system,
    pytest.mark.timeout(180),
    pytest.mark.filterwarnings("ignore:.*(read_text|open_text) is deprecated:DeprecationWarning"),
]

T = TypeVar("T")


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    with Cluster.local(4) as c:
        yield c


@pytest.fixture(scope="module")
def kafka_admin(cluster: Cluster) -> Iterator[KafkaAdminClient]:
    client = KafkaAdminClient(bootstrap_servers=cluster.bootstrap, request_timeout_ms=20_000)
    yield client
    client.close()


def reassign(cluster: Cluster, *args: str) -> int:
    return main(["reassign", "--bootstrap-server", cluster.bootstrap, *args])


def create(cluster: Cluster, name: str, assignment: str) -> None:
    args = ["--create", "--topic", name, "--replica-assignment", assignment]
    assert main(["topics", "--bootstrap-server", cluster.bootstrap, *args]) == 0


def kafka_replicas(kafka_admin: KafkaAdminClient, name: str) -> dict[int, list[int]]:
    """Partition -> replicas as kafka-python describes them (waits for the topic)."""

    def read() -> dict[str, Any]:
        (topic,) = kafka_admin.describe_topics([name])
        return dict(topic)

    topic = wait_for(read, lambda t: t["error_code"] == 0)
    return {p["partition_index"]: list(p["replica_nodes"]) for p in topic["partitions"]}


def replicas_through(cluster: Cluster, broker_id: int, name: str) -> dict[int, list[int]]:
    """``kafka_replicas`` through a fresh kafka-python client bootstrapped at one live broker
    (kafka-python gives up on a dead broker the metadata still lists); {} when it fails."""
    client = KafkaAdminClient(bootstrap_servers=f"127.0.0.1:{cluster.brokers[broker_id].port}")
    try:
        return kafka_replicas(client, name)
    except KafkaError:
        return {}
    finally:
        client.close()


def write_json(tmp_path: pathlib.Path, name: str, document: Any) -> str:
    path = tmp_path / name
    path.write_text(json.dumps(document))
    return str(path)


def topics_file(tmp_path: pathlib.Path, *names: str) -> str:
    return write_json(
        tmp_path, "topics.json", {"version": 1, "topics": [{"topic": n} for n in names]}
    )


def generate_json(
    cluster: Cluster, capsys: pytest.CaptureFixture[str], *args: str
) -> dict[str, Any]:
    capsys.readouterr()
    assert reassign(cluster, "--generate", "--output", "json", *args) == 0
    document: dict[str, Any] = json.loads(capsys.readouterr().out)
    return document


def as_map(document: dict[str, Any]) -> dict[tuple[str, int], list[int]]:
    return {(e["topic"], e["partition"]): e["replicas"] for e in document["partitions"]}


def test_generate_execute_verify_moves_a_topic_off_a_broker(
    cluster: Cluster,
    kafka_admin: KafkaAdminClient,
    tmp_path: pathlib.Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    create(cluster, "moving", "1:2,2:3,3:1,3:2")
    before = kafka_replicas(kafka_admin, "moving")
    topics = topics_file(tmp_path, "moving")
    plan = generate_json(
        cluster, capsys, "--topics-to-move-json-file", topics, "--broker-list", "1,2,4"
    )
    proposed = as_map(plan["proposed"])
    assert as_map(plan["current"]) == {tp: before[tp[1]] for tp in proposed}
    assert all(3 not in replicas for replicas in proposed.values())
    assert {p for p, r in before.items() if 3 in r} <= {p for _, p in proposed}
    for (_, p), replicas in proposed.items():  # only what is on 3 moves (and leaders reorder)
        assert replicas != before[p] and set(before[p]) - {3} <= set(replicas)
    plan_file = write_json(tmp_path, "plan.json", plan["proposed"])

    assert reassign(cluster, "--execute", "--reassignment-json-file", plan_file, "--wait") == 0
    out = capsys.readouterr().out
    rollback = out.split("Current partition replica assignment\n\n", 1)[1].split("\n", 1)[0]
    assert as_map(json.loads(rollback)) == as_map(plan["current"])
    assert "Successfully started partition reassignments for " in out
    assert f"Reassignment: {len(proposed)}/{len(proposed)} partitions complete" in out

    after = wait_for(
        lambda: kafka_replicas(kafka_admin, "moving"),
        lambda r: all(r[p] == proposed[("moving", p)] for _, p in proposed),
    )
    assert all(3 not in replicas for replicas in after.values())

    assert reassign(cluster, "--verify", "--reassignment-json-file", plan_file) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "Status of partition reassignment:"
    assert lines[1:] == [f"Reassignment of partition moving-{p} is complete." for _, p in proposed]


def test_add_brokers_moves_a_fair_share_onto_the_new_broker(
    cluster: Cluster,
    kafka_admin: KafkaAdminClient,
    tmp_path: pathlib.Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    create(cluster, "growing", "1:2,2:3,3:1,1:2,2:3,3:1")  # 12 replicas, none on broker 4
    before = kafka_replicas(kafka_admin, "growing")
    topics = topics_file(tmp_path, "growing")
    plan = generate_json(
        cluster, capsys, "--topics-to-move-json-file", topics, "--add-brokers", "4"
    )
    plan_file = write_json(tmp_path, "grow.json", plan["proposed"])
    assert reassign(cluster, "--execute", "--reassignment-json-file", plan_file, "--wait") == 0
    proposed = as_map(plan["proposed"])
    after = wait_for(
        lambda: kafka_replicas(kafka_admin, "growing"),
        lambda r: all(r[p] == proposed[("growing", p)] for _, p in proposed),
    )
    counts = Counter(b for replicas in after.values() for b in replicas)
    assert counts[4] == 3  # 12 replicas over 4 brokers
    assert sorted(counts.values()) == [3, 3, 3, 3]
    # only the replicas that went to broker 4 moved; each replaced one in place
    for p, replicas in after.items():
        assert [b for b in replicas if b != 4] == [b for b in before[p] if b in replicas]
        assert sum(b not in before[p] for b in replicas) == (4 in replicas)


def test_remove_brokers_leaves_nothing_on_the_broker(
    tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with Cluster.local(3, base_dir=str(tmp_path / "cluster")) as cluster:
        create(cluster, "first", "1:3,3:2,2:1")
        create(cluster, "second", "3:1,3:2")
        plan = generate_json(cluster, capsys, "--remove-brokers", "3")  # every topic
        proposed = as_map(plan["proposed"])
        assert {t for t, _ in proposed} == {"first", "second"}
        plan_file = write_json(tmp_path, "off.json", plan["proposed"])
        assert reassign(cluster, "--execute", "--reassignment-json-file", plan_file, "--wait") == 0
        kafka_admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap)
        try:
            for name in ("first", "second"):
                replicas = wait_for(
                    lambda n=name: kafka_replicas(kafka_admin, n),  # type: ignore[misc]
                    lambda r: all(3 not in b for b in r.values()),
                )
                assert all(len(set(b)) == 2 and set(b) <= {1, 2} for b in replicas.values())
        finally:
            kafka_admin.close()


def test_a_stalled_reassignment_is_in_progress_times_out_and_cancels(
    tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # broker 3 is killed just before the reassignment adds it: still registered for the long
    # session, so the reassignment starts, but its new replica can never catch up
    with Cluster.local(3, base_dir=str(tmp_path / "cluster"), session_timeout_ms=8_000) as cluster:
        create(cluster, "stalled", "2")
        plan = {
            "version": 1,
            "partitions": [{"topic": "stalled", "partition": 0, "replicas": [2, 3]}],
        }
        plan_file = write_json(tmp_path, "stall.json", plan)
        cluster.kill(3)
        execute = ("--execute", "--reassignment-json-file", plan_file)
        assert reassign(cluster, *execute, "--wait", "--wait-timeout-ms", "1000") == 1
        captured = capsys.readouterr()
        assert "Reassignment: 0/1 partitions complete" in captured.out
        assert captured.err == "replog reassign: not complete after 1000 ms\n"
        stalled = wait_for(lambda: replicas_through(cluster, 2, "stalled"), bool)
        assert stalled == {0: [2, 3]}  # adding 3
        assert reassign(cluster, *execute) == 1  # already running
        err = capsys.readouterr().err
        assert "reassignments are already running for stalled-0" in err and "--additional" in err
        assert reassign(cluster, *execute, "--additional", "--output", "json") == 0
        assert json.loads(capsys.readouterr().out)["started"] == [
            {"topic": "stalled", "partition": 0}
        ]
        verify = ("--verify", "--reassignment-json-file", plan_file, "--output", "json")
        assert reassign(cluster, *verify) == 0
        (state,) = json.loads(capsys.readouterr().out)["partitions"]
        assert state["status"] == "in_progress"

        assert reassign(cluster, "--cancel", "--reassignment-json-file", plan_file) == 0
        out = capsys.readouterr().out
        assert out == "Successfully cancelled partition reassignments for: stalled-0\n"
        wait_for(lambda: replicas_through(cluster, 2, "stalled"), lambda r: r == {0: [2]})
        assert reassign(cluster, "--verify", "--reassignment-json-file", plan_file) == 1
        out = capsys.readouterr().out
        assert "Reassignment of partition stalled-0 failed: " in out
        assert "its replicas are [2], not [2, 3]" in out
        assert reassign(cluster, "--cancel", "--reassignment-json-file", plan_file) == 0
        assert capsys.readouterr().out == "No reassignment is running for: stalled-0\n"


def test_generate_text_output_is_kafkas(
    cluster: Cluster, tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    create(cluster, "texty", "1:2")
    topics = topics_file(tmp_path, "texty")
    capsys.readouterr()
    args = ("--generate", "--topics-to-move-json-file", topics, "--broker-list", "3,4")
    assert reassign(cluster, *args) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "Current partition replica assignment"
    assert json.loads(lines[1])["partitions"] == [
        {"topic": "texty", "partition": 0, "replicas": [1, 2], "log_dirs": ["any", "any"]}
    ]
    assert lines[2:4] == ["", "Proposed partition reassignment configuration"]
    (entry,) = json.loads(lines[4])["partitions"]
    assert sorted(entry["replicas"]) == [3, 4] and json.loads(lines[4])["version"] == 1


@pytest.mark.parametrize(
    ("document", "reason"),
    [
        ("not json", "the reassignment file is not valid JSON"),
        ({"version": 1}, 'the reassignment file needs "partitions"'),
        ({"version": 2, "partitions": []}, "unsupported version 2"),
        (
            {"partitions": [{"topic": "known", "partition": 0, "replicas": [1, 1]}]},
            "known-0 names a broker twice: [1, 1]",
        ),
        (
            {"partitions": [{"topic": "known", "partition": 0, "replicas": [1, 9]}]},
            "known-0: brokers [9] are not in the cluster (brokers: 1,2,3,4)",
        ),
        (
            {"partitions": [{"topic": "nowhere", "partition": 0, "replicas": [1]}]},
            "unknown topics: nowhere",
        ),
        (
            {"partitions": [{"topic": "known", "partition": 5, "replicas": [1]}]},
            "unknown partitions: known-5",
        ),
        (
            {"partitions": [{"topic": "known", "partition": 0, "replicas": []}]},
            '"replicas" must be a non-empty id list',
        ),
        (
            {
                "partitions": [
                    {"topic": "known", "partition": 0, "replicas": [1], "log_dirs": ["/d"]}
                ]
            },
            'replog chooses log dirs itself; "log_dirs" must be "any"',
        ),
    ],
)
def test_a_bad_reassignment_file_fails_with_exit_1_and_moves_nothing(
    cluster: Cluster,
    kafka_admin: KafkaAdminClient,
    tmp_path: pathlib.Path,
    capsys: pytest.CaptureFixture[str],
    document: Any,
    reason: str,
) -> None:
    if "known" not in kafka_admin.list_topics():
        create(cluster, "known", "1:2")
    path = tmp_path / "bad.json"
    path.write_text(document if isinstance(document, str) else json.dumps(document))
    capsys.readouterr()
    assert reassign(cluster, "--execute", "--reassignment-json-file", str(path)) == 1
    captured = capsys.readouterr()
    assert captured.err.startswith("replog reassign: ") and reason in captured.err
    assert captured.out == ""
    assert kafka_replicas(kafka_admin, "known") == {0: [1, 2]}


def test_generate_errors_name_the_bad_input(
    cluster: Cluster, tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    capsys.readouterr()
    topics = topics_file(tmp_path, "no-such-topic")
    assert (
        reassign(cluster, "--generate", "--topics-to-move-json-file", topics, "--broker-list", "1")
        == 1
    )
    assert "unknown topics: no-such-topic" in capsys.readouterr().err
    assert reassign(cluster, "--generate", "--remove-brokers", "7") == 1
    assert "--remove-brokers: brokers [7] are not in the cluster" in capsys.readouterr().err
    create(cluster, "wide", "1:2:3")
    topics = topics_file(tmp_path, "wide")
    assert (
        reassign(
            cluster, "--generate", "--topics-to-move-json-file", topics, "--broker-list", "1,2"
        )
        == 1
    )
    assert "wide-0 has 3 replicas but only 2 brokers remain" in capsys.readouterr().err


@pytest.mark.parametrize(
    "args",
    [
        [],  # no action
        ["--generate"],  # no broker list
        ["--generate", "--broker-list", "1,2"],  # no topics file
        ["--generate", "--broker-list", "1,x", "--topics-to-move-json-file", "t"],
        ["--generate", "--broker-list", "1,1", "--topics-to-move-json-file", "t"],
        ["--generate", "--add-brokers", "4", "--remove-brokers", "3"],
        ["--execute"],  # no reassignment file
        ["--verify", "--reassignment-json-file", "f", "--throttle", "10"],
        ["--verify", "--reassignment-json-file", "f", "--additional"],
        ["--execute", "--reassignment-json-file", "f", "--throttle", "-1"],
        ["--execute", "--generate"],
        ["--cancel", "--reassignment-json-file", "f", "--broker-list", "1"],
    ],
)
def test_usage_errors_exit_2_without_touching_the_cluster(
    args: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["reassign", "--bootstrap-server", "127.0.0.1:1", *args])
    assert exit_.value.code == 2
    assert "usage: replog reassign" in capsys.readouterr().err


def test_generate_spreads_partitions_over_the_racks_metadata_reports(
    tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    racks = {1: "east", 2: "east", 3: "west", 4: "west"}
    configs = [
        BrokerConfig(
            broker_id=i,
            log_dirs=(str(tmp_path / f"broker-{i}"),),
            coordinator="memory://reassign-racks",
            rack=rack,
            session_timeout_ms=2_000,
            heartbeat_interval_ms=200,
        )
        for i, rack in racks.items()
    ]
    with Cluster(configs, base_dir=str(tmp_path), owns_base_dir=False) as cluster:
        for broker_id in racks:
            cluster.start(broker_id)
        create(cluster, "racked", "1:2,3:4")  # balanced, but each partition in one rack
        kafka_admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap)
        try:
            seen = {b["broker_id"]: b["rack"] for b in kafka_admin.describe_cluster()["brokers"]}
        finally:
            kafka_admin.close()
        assert seen == racks
        topics = topics_file(tmp_path, "racked")
        onto = ("--topics-to-move-json-file", topics, "--broker-list", "1,2,3,4")
        proposed = as_map(generate_json(cluster, capsys, *onto)["proposed"])
        assert len(proposed) == 2
        for replicas in proposed.values():
            assert {racks[b] for b in replicas} == {"east", "west"}
        assert Counter(b for r in proposed.values() for b in r) == Counter([1, 2, 3, 4])
        ignoring = generate_json(cluster, capsys, *onto, "--disable-rack-aware")["proposed"]
        assert ignoring["partitions"] == []  # balanced already: nothing to move


def test_the_installed_script_executes_with_plain_progress_lines_in_a_pipe(
    cluster: Cluster, kafka_admin: KafkaAdminClient, tmp_path: pathlib.Path
) -> None:
    create(cluster, "piped", "1:2")
    plan = {"version": 1, "partitions": [{"topic": "piped", "partition": 0, "replicas": [4, 1]}]}
    plan_file = write_json(tmp_path, "piped.json", plan)
    script = str(pathlib.Path(sys.executable).parent / "replog")
    execute = ["--execute", "--reassignment-json-file", plan_file, "--wait"]
    done = subprocess.run(
        [script, "reassign", "--bootstrap-server", cluster.bootstrap, *execute],
        capture_output=True,
        text=True,
        timeout=90,
        check=False,
    )
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout.splitlines()[-1] == "Reassignment: 1/1 partitions complete"
    assert "\x1b[" not in done.stdout  # no terminal control codes in a pipe
    assert kafka_replicas(kafka_admin, "piped") == {0: [4, 1]}
    usage = subprocess.run(
        [script, "elect-leaders", "--bootstrap-server", cluster.bootstrap],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert usage.returncode == 2 and "usage: replog elect-leaders" in usage.stderr
