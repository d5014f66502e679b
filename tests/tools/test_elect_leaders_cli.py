"""``replog elect-leaders`` against live in-process clusters, each effect checked with an
independent Kafka client (kafka-python's ``KafkaAdminClient``): preferred elections after a
leader restart, an unclean election of a leaderless partition, and the error reports."""

from __future__ import annotations

import json
import pathlib
import warnings
from collections.abc import Iterator
from typing import Any, TypeVar

import pytest

from replog import Cluster
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
    # no automatic rebalance: only the tool moves leadership back
    with Cluster.local(3, auto_leader_rebalance_enable=False) as c:
        yield c


@pytest.fixture(scope="module")
def kafka_admin(cluster: Cluster) -> Iterator[KafkaAdminClient]:
    client = KafkaAdminClient(bootstrap_servers=cluster.bootstrap, request_timeout_ms=20_000)
    yield client
    client.close()


def elect(cluster: Cluster, *args: str) -> int:
    return main(["elect-leaders", "--bootstrap-server", cluster.bootstrap, *args])


def create(cluster: Cluster, name: str, assignment: str) -> None:
    args = ["--create", "--topic", name, "--replica-assignment", assignment]
    assert main(["topics", "--bootstrap-server", cluster.bootstrap, *args]) == 0


def kafka_partitions(kafka_admin: KafkaAdminClient, name: str) -> dict[int, dict[str, Any]]:
    """Partition -> kafka-python's description (leader_id, replica_nodes, isr_nodes)."""

    def read() -> dict[str, Any]:
        try:
            (topic,) = kafka_admin.describe_topics([name])
        except KafkaError:  # a restarted broker's connection: ask again
            return {"error_code": -1}
        return dict(topic)

    topic = wait_for(read, lambda t: t["error_code"] == 0)
    return {p["partition_index"]: p for p in topic["partitions"]}


def leaders(kafka_admin: KafkaAdminClient, name: str) -> dict[int, int]:
    return {p: d["leader_id"] for p, d in kafka_partitions(kafka_admin, name).items()}


def dirty_partition(cluster: Cluster) -> dict[str, Any]:
    """Partition 0 of "dirty" as a fresh kafka-python client sees it through broker 2 (the
    one never killed); {} while that client cannot get an answer."""
    client = KafkaAdminClient(bootstrap_servers=f"127.0.0.1:{cluster.brokers[2].port}")
    try:
        return kafka_partitions(client, "dirty")[0]
    except KafkaError:
        return {}
    finally:
        client.close()


def test_preferred_election_moves_leadership_back_after_a_restart(
    cluster: Cluster,
    kafka_admin: KafkaAdminClient,
    tmp_path: pathlib.Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    create(cluster, "pref", "1:2,1:3")
    assert wait_for(lambda: leaders(kafka_admin, "pref"), lambda ls: ls == {0: 1, 1: 1})
    cluster.restart(1)
    # broker 1 is back in both ISRs but leads nothing
    wait_for(
        lambda: kafka_partitions(kafka_admin, "pref"),
        lambda ps: all(1 in p["isr_nodes"] and p["leader_id"] not in (1, -1) for p in ps.values()),
    )
    capsys.readouterr()
    assert (
        elect(cluster, "--election-type", "preferred", "--topic", "pref", "--partition", "0") == 0
    )
    assert capsys.readouterr().out == (
        "Successfully completed leader election (PREFERRED) for partitions pref-0\n"
    )
    after = wait_for(lambda: leaders(kafka_admin, "pref"), lambda ls: ls[0] == 1)
    assert after[1] != 1  # only the partition asked for

    assert elect(cluster, "--election-type", "preferred", "--all-topic-partitions") == 0
    assert "pref-1" in capsys.readouterr().out
    assert wait_for(lambda: leaders(kafka_admin, "pref"), lambda ls: ls == {0: 1, 1: 1})

    path = tmp_path / "partitions.json"
    path.write_text(json.dumps({"partitions": [{"topic": "pref", "partition": p} for p in (0, 1)]}))
    args = ("--election-type", "preferred", "--path-to-json-file", str(path), "--output", "json")
    assert elect(cluster, *args) == 0
    assert json.loads(capsys.readouterr().out) == {
        "election_type": "preferred",
        "partitions": [
            {"topic": "pref", "partition": 0, "status": "not_needed"},
            {"topic": "pref", "partition": 1, "status": "not_needed"},
        ],
    }


def test_unclean_election_leads_a_leaderless_partition_from_outside_the_isr(
    tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with Cluster.local(3, base_dir=str(tmp_path / "cluster")) as cluster:
        create(cluster, "dirty", "3:1")
        wait_for(lambda: dirty_partition(cluster), lambda p: sorted(p["isr_nodes"]) == [1, 3])
        cluster.kill(1)
        wait_for(lambda: dirty_partition(cluster), lambda p: p.get("isr_nodes") == [3])
        cluster.kill(3)
        cluster.start(1)  # alive again, but out of the ISR: no clean leader
        wait_for(lambda: dirty_partition(cluster), lambda p: p.get("leader_id") == -1)
        capsys.readouterr()

        preferred = ("--election-type", "preferred", "--topic", "dirty", "--output", "json")
        assert elect(cluster, *preferred) == 1
        (failed,) = json.loads(capsys.readouterr().out)["partitions"]
        assert failed["status"] == "failed" and failed["error"] != "NONE"
        assert dirty_partition(cluster)["leader_id"] == -1

        assert elect(cluster, "--election-type", "unclean", "--topic", "dirty") == 0
        assert "Successfully completed leader election (UNCLEAN) for partitions dirty-0" in (
            capsys.readouterr().out
        )
        assert wait_for(lambda: dirty_partition(cluster), lambda p: p.get("leader_id") == 1)


def test_a_failed_election_is_reported_on_stderr_with_exit_1(
    cluster: Cluster, capsys: pytest.CaptureFixture[str]
) -> None:
    capsys.readouterr()
    args = ("--election-type", "preferred", "--topic", "no-such-topic", "--partition", "0")
    assert elect(cluster, *args) == 1
    assert capsys.readouterr().err == "replog elect-leaders: unknown topic 'no-such-topic'\n"


@pytest.mark.parametrize(
    ("document", "reason"),
    [
        ("{", "the partitions file is not valid JSON"),
        ({"partitions": []}, '"partitions": a non-empty list'),
        ({"partitions": [{"topic": "t"}]}, 'every entry needs "topic" and "partition" >= 0'),
        (
            {"partitions": [{"topic": "t", "partition": 0}, {"topic": "t", "partition": 0}]},
            "lists t-0 twice",
        ),
    ],
)
def test_a_bad_partitions_file_fails_with_exit_1(
    cluster: Cluster,
    tmp_path: pathlib.Path,
    capsys: pytest.CaptureFixture[str],
    document: Any,
    reason: str,
) -> None:
    path = tmp_path / "bad.json"
    path.write_text(document if isinstance(document, str) else json.dumps(document))
    capsys.readouterr()
    assert elect(cluster, "--election-type", "preferred", "--path-to-json-file", str(path)) == 1
    err = capsys.readouterr().err
    assert err.startswith("replog elect-leaders: ") and reason in err


@pytest.mark.parametrize(
    "args",
    [
        ["--all-topic-partitions"],  # no election type
        ["--election-type", "dirty", "--all-topic-partitions"],
        ["--election-type", "preferred"],  # no partitions
        ["--election-type", "preferred", "--all-topic-partitions", "--topic", "t"],
        ["--election-type", "preferred", "--all-topic-partitions", "--partition", "0"],
        ["--election-type", "preferred", "--topic", "t", "--partition", "-1"],
    ],
)
def test_usage_errors_exit_2_without_touching_the_cluster(
    args: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["elect-leaders", "--bootstrap-server", "127.0.0.1:1", *args])
    assert exit_.value.code == 2
    assert "usage: replog elect-leaders" in capsys.readouterr().err
