"""Partition administration through the Kafka API where brokers are down: a reassignment that
cannot finish (ListPartitionReassignments shows it running), and an unclean election of a
partition whose ISR is gone. ``Admin`` is made without ``coordinator_url``; every effect is
checked through kafka-python's ``KafkaAdminClient``.

The cluster is private (brokers are stopped and started); the partitions are placed with
``replica_assignment`` so which broker holds what is known.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import pytest

from replog import Admin, Cluster
from replog.client import PartitionReassignment, RetriableBrokerResponseError
from tests.waiting import wait_for

with warnings.catch_warnings():
    # kafka-python loads its schemas with the deprecated importlib.resources API
    warnings.filterwarnings("ignore", ".*(read_text|open_text) is deprecated", DeprecationWarning)
    from kafka import KafkaAdminClient, TopicPartition

pytestmark = [pytest.mark.system, pytest.mark.timeout(120)]

T = TypeVar("T")
PREFERRED_LEADER_NOT_AVAILABLE = 80


class KafkaView:
    """kafka-python's view, through a fresh ``KafkaAdminClient`` each time (kafka-python keeps
    the controller it first found, which these tests stop)."""

    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap

    def _ask(self, ask: Callable[[KafkaAdminClient], T]) -> T:
        client = KafkaAdminClient(bootstrap_servers=self.bootstrap, request_timeout_ms=10_000)
        try:
            return ask(client)
        finally:
            client.close()

    def partition(self, topic: str) -> dict[str, Any]:
        (described,) = self._ask(lambda c: c.describe_topics([topic]))
        return dict(described["partitions"][0])

    def brokers(self) -> set[int]:
        return {b["broker_id"] for b in self._ask(lambda c: c.describe_cluster())["brokers"]}

    def reassignments(self) -> dict[Any, Any]:
        return dict(self._ask(lambda c: c.list_partition_reassignments()))


@pytest.fixture
def cluster() -> Iterator[Cluster]:
    with Cluster.local(3) as c:
        yield c


def test_a_stuck_reassignment_is_listed_and_an_unclean_election_revives_a_partition(
    cluster: Cluster,
) -> None:
    kafka = KafkaView(cluster.bootstrap)
    with Admin(cluster.bootstrap) as admin:
        admin.create_topics("stuck", 1, 1, replica_assignment=[[1]])
        admin.create_topics("lost", 1, 2, replica_assignment=[[1, 2]])
        wait_for(lambda: kafka.partition("lost"), lambda p: sorted(p["isr_nodes"]) == [1, 2])
        cluster.stop(2)
        wait_for(lambda: kafka.partition("lost"), lambda p: p["isr_nodes"] == [1])
        cluster.stop(1)
        cluster.start(2)  # back, but not in the ISR: only an unclean election lets it lead
        wait_for(kafka.brokers, lambda brokers: brokers == {2, 3})
        assert kafka.partition("lost")["leader_id"] == -1
        assert kafka.partition("stuck")["leader_id"] == -1

        # A reassignment of a partition without a leader starts but cannot finish.
        admin.reassign_partition("stuck", 0, [3])
        running = PartitionReassignment(
            replicas=(3, 1), adding_replicas=(3,), removing_replicas=(1,)
        )
        assert admin.list_partition_reassignments() == {("stuck", 0): running}
        assert admin.list_partition_reassignments([("lost", 0)]) == {}
        assert kafka.reassignments() == {
            TopicPartition("stuck", 0): {
                "replicas": [3, 1], "adding_replicas": [3], "removing_replicas": [1]
            }
        }  # fmt: skip
        assert kafka.partition("stuck")["replica_nodes"] == [3, 1]

        # The preferred replica is down: a preferred election is refused; an unclean one
        # elects the live replica outside the ISR.
        with pytest.raises(RetriableBrokerResponseError) as error:
            admin.elect_preferred_leaders([("lost", 0)])
        assert error.value.code == PREFERRED_LEADER_NOT_AVAILABLE
        assert admin.elect_leaders([("lost", 0)], election_type="unclean") == {("lost", 0): True}
        revived = wait_for(lambda: kafka.partition("lost"), lambda p: p["leader_id"] == 2)
        assert revived["isr_nodes"] == [2]
