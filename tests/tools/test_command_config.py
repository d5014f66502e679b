"""``--command-config FILE`` on every admin tool: its settings reach the cluster (the client id
each tool's requests carry, seen by the brokers' request tracking), and a bad file is a usage
error naming the problem."""

from __future__ import annotations

import pathlib
from collections.abc import Iterator

import pytest

from replog import Cluster
from replog.cli import main
from replog.testing.faults import ClusterFaults

pytestmark = [pytest.mark.system, pytest.mark.timeout(120)]

#: each admin tool, with arguments that make it talk to the cluster and succeed
TOOLS = {
    "topics": ["--list"],
    "get-offsets": ["--topic", "cc"],
    "configs": ["--describe", "--broker", "1"],
    "log-dirs": ["--describe"],
    "consumer-groups": ["--list"],
    "elect-leaders": ["--election-type", "preferred", "--all-topic-partitions"],
    "verify-replicas": ["--topic-white-list", "cc"],
    "reassign": ["--verify", "--reassignment-json-file", "PLAN"],
}


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    with Cluster.local(1, test_mode=True) as c:
        assert (
            main(
                [
                    "topics",
                    "--bootstrap-server",
                    c.bootstrap,
                    "--create",
                    "--topic",
                    "cc",
                    "--partitions",
                    "1",
                    "--replication-factor",
                    "1",
                ]
            )
            == 0
        )
        yield c


def _args(tool: str, tmp_path: pathlib.Path) -> list[str]:
    plan = tmp_path / "plan.json"
    plan.write_text(
        '{"version": 1, "partitions": [{"topic": "cc", "partition": 0, "replicas": [1]}]}'
    )
    return [a if a != "PLAN" else str(plan) for a in TOOLS[tool]]


@pytest.mark.parametrize("tool", sorted(TOOLS))
def test_the_settings_reach_the_cluster(
    cluster: Cluster, tool: str, tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "admin.properties"
    config.write_text(f"# Kafka's admin keys\nclient.id=ops-{tool}\nrequest.timeout.ms=20000\n")
    faults = ClusterFaults(cluster)
    tracked = faults.track_requests()
    try:
        status = main(
            [
                tool,
                "--bootstrap-server",
                cluster.bootstrap,
                *_args(tool, tmp_path),
                "--command-config",
                str(config),
            ]
        )
    finally:
        faults.heal()
    out, err = capsys.readouterr()
    assert status == 0, out + err
    assert f"ops-{tool}" in {r.client_id for r in tracked}


@pytest.mark.parametrize("tool", sorted(TOOLS))
def test_a_bad_file_is_a_usage_error(
    cluster: Cluster, tool: str, tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "bad.properties"
    config.write_text("client.id=x\nsasl.mechanism=PLAIN\n")
    with pytest.raises(SystemExit) as exit_:
        main(
            [
                tool,
                "--bootstrap-server",
                cluster.bootstrap,
                *_args(tool, tmp_path),
                "--command-config",
                str(config),
            ]
        )
    assert exit_.value.code == 2
    assert "PLAINTEXT only" in capsys.readouterr().err
