"""Metadata (key 3) and ApiVersions (key 18): what the cluster looks like and what this
broker speaks. Both answer from this broker's metadata image at once."""

from __future__ import annotations

from replog.broker.requests.base import (
    Handler,
    Outcome,
    Reply,
    RequestContext,
    RequestServices,
)
from replog.errors import ErrorCode
from replog.groups import OFFSETS_TOPIC
from replog.protocol import messages as m
from replog.protocol import supported_api_versions
from replog.protocol.schema import Message
from replog.topics import topic_uuid

__all__ = ["HANDLERS", "handle_api_versions", "handle_metadata"]


def handle_api_versions(
    ctx: RequestContext, body: m.ApiVersionsRequest, services: RequestServices
) -> Outcome:
    """Every (api, versions) this broker serves."""
    return Reply(m.ApiVersionsResponse(error_code=0, api_keys=supported_api_versions()))


def handle_metadata(
    ctx: RequestContext, body: m.MetadataRequest, services: RequestServices
) -> Outcome:
    """Live (unfenced) brokers, the controller, and the asked topics (all for None; by name,
    or by topic ID from v10) with each partition's leader, epoch, replicas and ISR."""
    brokers = [
        m.MetadataResponseBroker(node_id=b.broker_id, host=b.host, port=b.port, rack=b.rack)
        for b in sorted(services.brokers.values(), key=lambda b: b.broker_id)
        if not b.fenced
    ]
    if body.topics is None:
        names = sorted(services.topics)
    else:
        by_id = {topic_uuid(a.topic_id): name for name, a in services.topics.items()}
        names = [t.name or by_id.get(t.topic_id, "") for t in body.topics]
    controller = services.controller
    return Reply(
        m.MetadataResponse(
            brokers=brokers,
            cluster_id="replog",
            controller_id=-1 if controller is None else controller.controller_id,
            topics=[_topic(services, name) for name in names],
        )
    )


def _topic(services: RequestServices, name: str) -> m.MetadataResponseTopic:
    assignment = services.topics.get(name)
    if assignment is None:
        unknown = int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        return m.MetadataResponseTopic(error_code=unknown, name=name, partitions=[])
    # A leader that is not a live, unfenced broker (dead, not yet replaced by the controller)
    # is no leader: LEADER_NOT_AVAILABLE and -1, as Kafka's metadata cache answers, so a client
    # is never sent to a broker missing from the broker list.
    live = {b.broker_id for b in services.brokers.values() if not b.fenced}
    partitions = []
    for index in range(assignment.partition_count):
        state = services.states.get((name, index))
        if state is None:
            continue
        leader = state.leader if state.leader in live else -1
        error = ErrorCode.NONE if leader >= 0 else ErrorCode.LEADER_NOT_AVAILABLE
        partitions.append(
            m.MetadataResponsePartition(
                error_code=int(error),
                partition_index=index,
                leader_id=leader,
                leader_epoch=state.leader_epoch,
                replica_nodes=list(state.replicas),
                isr_nodes=list(state.isr),
                offline_replicas=[r for r in state.replicas if r not in services.brokers],
            )
        )
    return m.MetadataResponseTopic(
        error_code=0,
        name=name,
        topic_id=topic_uuid(assignment.topic_id),
        is_internal=name == OFFSETS_TOPIC,  # clients leave it out of pattern subscriptions
        partitions=partitions,
    )


HANDLERS: dict[type[Message], Handler] = {
    m.ApiVersionsRequest: handle_api_versions,
    m.MetadataRequest: handle_metadata,
}
