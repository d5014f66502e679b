"""Metadata (key 3), ApiVersions (key 18) and DescribeCluster (key 60): what the cluster looks
like and what this broker speaks, answered from this broker's metadata image at once.

Automatic topic creation (Kafka's ``auto.create.topics.enable``, on by default): a Metadata
request naming a topic that does not exist -- when the request allows it (``allow_auto_topic_
creation``, v4+; always before v4) and the broker config does -- queues its creation with the
broker's ``num.partitions`` and ``default.replication.factor`` for the controller without
waiting, and answers LEADER_NOT_AVAILABLE (UNKNOWN_TOPIC_OR_PARTITION while one is in flight
already), so the client asks again and finds it. A name that could not be a topic is
INVALID_TOPIC_EXCEPTION. Produce does the same for the topics it names (``unknown_topic_error``).
"""

from __future__ import annotations

from replog.broker.driver.requests.base import (
    Handler,
    Outcome,
    Reply,
    RequestContext,
    RequestServices,
)
from replog.errors import ErrorCode, InvalidTopicError
from replog.groups import OFFSETS_TOPIC
from replog.metadata.types import CreateTopic
from replog.protocol import messages as m
from replog.protocol import supported_api_versions
from replog.protocol.schema import Message
from replog.topics import TopicPartition, topic_uuid, validate_topic_name

__all__ = [
    "CLUSTER_ID",
    "HANDLERS",
    "handle_api_versions",
    "handle_describe_cluster",
    "handle_metadata",
    "unknown_topic_error",
]

CLUSTER_ID = "replog"
"""The cluster id a broker reports (Metadata v2+, DescribeCluster) when its coordinator names
none: only the built-in quorum (``raft://``) keeps a store identity."""


def handle_api_versions(
    ctx: RequestContext, body: m.ApiVersionsRequest, services: RequestServices
) -> Outcome:
    """Every (api, versions) this broker serves."""
    return Reply(m.ApiVersionsResponse(error_code=0, api_keys=supported_api_versions()))


def unknown_topic_error(services: RequestServices, name: str, *, create: bool) -> ErrorCode:
    """The answer for ``name``, a topic the image does not have: INVALID_TOPIC_EXCEPTION for a
    name that could not be a topic; else, with ``create`` and auto-creation on, its creation
    is queued (module docstring) and the answer is retriable."""
    try:
        validate_topic_name(name)
    except InvalidTopicError:
        return ErrorCode.INVALID_TOPIC_EXCEPTION
    config = services.config
    if not (create and config.auto_create_topics_enable):
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    payload = CreateTopic(
        topic=name,
        partition_count=config.default_partition_count,
        replication_factor=config.default_replication_factor,
    )
    if services.create_topic_in_background(payload):
        return ErrorCode.LEADER_NOT_AVAILABLE
    return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def handle_metadata(
    ctx: RequestContext, body: m.MetadataRequest, services: RequestServices
) -> Outcome:
    """Live (unfenced) brokers, the controller, and the asked topics (all for None; by name,
    or by topic ID from v10) with each partition's leader, epoch, replicas and ISR; unknown
    named topics may be created (module docstring)."""
    brokers = [
        m.MetadataResponseBroker(node_id=b.broker_id, host=b.host, port=b.port, rack=b.rack)
        for b in sorted(services.brokers.values(), key=lambda b: b.broker_id)
        if not b.fenced
    ]
    topics = []
    if body.topics is None:
        topics = [_topic(services, name) for name in sorted(services.topics)]
    else:
        by_id = {topic_uuid(a.topic_id): name for name, a in services.topics.items()}
        for t in body.topics:
            name = t.name if t.name is not None else by_id.get(t.topic_id, "")
            if name in services.topics or t.name is None:
                topics.append(_topic(services, name))
                continue
            code = unknown_topic_error(services, name, create=body.allow_auto_topic_creation)
            topics.append(m.MetadataResponseTopic(error_code=int(code), name=name, partitions=[]))
    controller = services.controller
    return Reply(
        m.MetadataResponse(
            brokers=brokers,
            cluster_id=services.cluster_id,
            controller_id=-1 if controller is None else controller.controller_id,
            topics=topics,
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
        state = services.states.get(TopicPartition(name, index))
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


def handle_describe_cluster(
    ctx: RequestContext, body: m.DescribeClusterRequest, services: RequestServices
) -> Outcome:
    """The cluster id, the active controller (-1: none) and the live brokers (v2: fenced ones
    too when asked, flagged). Brokers are the only endpoints replog has: asking for
    controllers (v1+) is MISMATCHED_ENDPOINT_TYPE, another type UNSUPPORTED_ENDPOINT_TYPE, as
    Kafka answers."""
    if body.endpoint_type != m.ENDPOINT_TYPE_BROKERS:
        if body.endpoint_type == 2:
            code = ErrorCode.MISMATCHED_ENDPOINT_TYPE
        else:
            code = ErrorCode.UNSUPPORTED_ENDPOINT_TYPE
        return Reply(
            m.DescribeClusterResponse(
                error_code=int(code),
                error_message=f"replog brokers describe brokers, not endpoint type "
                f"{body.endpoint_type}",
                endpoint_type=body.endpoint_type,
            )
        )
    controller = services.controller
    brokers = [
        m.DescribeClusterBroker(
            broker_id=b.broker_id, host=b.host, port=b.port, rack=b.rack, is_fenced=b.fenced
        )
        for b in sorted(services.brokers.values(), key=lambda b: b.broker_id)
        if not b.fenced or body.include_fenced_brokers
    ]
    return Reply(
        m.DescribeClusterResponse(
            error_code=0,
            cluster_id=services.cluster_id,
            controller_id=-1 if controller is None else controller.controller_id,
            brokers=brokers,
        )
    )


HANDLERS: dict[type[Message], Handler] = {
    m.ApiVersionsRequest: handle_api_versions,
    m.MetadataRequest: handle_metadata,
    m.DescribeClusterRequest: handle_describe_cluster,
}
