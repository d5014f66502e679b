"""Metadata names a partition's leader only when that broker is live (Kafka's metadata cache:
LEADER_NOT_AVAILABLE and leader -1 otherwise). Between a broker's death and the controller's
election the image still names the dead broker leader; a client given a leader that is not in
the broker list fails (kafka-python 3: UnknownBrokerIdError out of ``poll``)."""

from __future__ import annotations

import uuid
from types import SimpleNamespace
from typing import Any, cast

from replog.broker.driver.requests.base import RequestContext
from replog.broker.driver.requests.metadata import handle_metadata
from replog.errors import ErrorCode
from replog.metadata.types import BrokerInfo, PartitionState, TopicAssignment
from replog.protocol import RequestHeader
from replog.protocol import messages as m


def _partitions(live: dict[int, BrokerInfo]) -> list[m.MetadataResponsePartition]:
    topic = TopicAssignment(topic="t", topic_id=str(uuid.uuid4()), replicas=((2, 1), (1, 2)))
    states = {
        ("t", 0): PartitionState(replicas=(2, 1), leader=2, leader_epoch=4, isr=(2, 1)),
        ("t", 1): PartitionState(replicas=(1, 2), leader=1, leader_epoch=7, isr=(1, 2)),
    }
    services = SimpleNamespace(
        brokers=live, topics={"t": topic}, states=states, controller=None, cluster_id="c"
    )
    header = RequestHeader(api_key=3, api_version=12, correlation_id=1, client_id="c")
    ctx = RequestContext(header=header, now_ms=0)
    reply: Any = handle_metadata(ctx, m.MetadataRequest(topics=None), cast(Any, services))
    return list(reply.message.topics[0].partitions)


def test_a_leader_that_is_not_live_is_reported_as_no_leader() -> None:
    live = {1: BrokerInfo(broker_id=1, incarnation_epoch=1, host="h", port=1)}
    dead_leader, live_leader = _partitions(live)
    assert (dead_leader.error_code, dead_leader.leader_id) == (ErrorCode.LEADER_NOT_AVAILABLE, -1)
    assert dead_leader.leader_epoch == 4 and dead_leader.offline_replicas == [2]
    assert (live_leader.error_code, live_leader.leader_id) == (ErrorCode.NONE, 1)


def test_a_fenced_leader_is_reported_as_no_leader() -> None:
    live = {
        1: BrokerInfo(broker_id=1, incarnation_epoch=1, host="h", port=1),
        2: BrokerInfo(broker_id=2, incarnation_epoch=1, host="h", port=2, fenced=True),
    }
    dead_leader, live_leader = _partitions(live)
    assert (dead_leader.error_code, dead_leader.leader_id) == (ErrorCode.LEADER_NOT_AVAILABLE, -1)
    assert live_leader.leader_id == 1
