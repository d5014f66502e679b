"""The consumer-group APIs: FindCoordinator (key 10), and JoinGroup (11), Heartbeat (12),
LeaveGroup (13), SyncGroup (14), OffsetCommit (8), OffsetFetch (9), OffsetDelete (47),
DescribeGroups (15), ListGroups (16) and DeleteGroups (42), which the group coordinator this
broker hosts answers (``replog.broker.driver.group_host``).

FindCoordinator answers from the metadata image: a group's coordinator is the live leader of
its ``__consumer_offsets`` partition (``replog.groups.partition_for``), every key of a v4 batch
(KIP-699) on its own. While the topic does not exist the first lookup asks the controller to
create it and every key gets COORDINATOR_NOT_AVAILABLE (the client retries), as in Kafka. The
other APIs go to the coordinator, which answers at once or parks the request (``AwaitReply``);
a group it does not host gets NOT_COORDINATOR, one still loading COORDINATOR_LOAD_IN_PROGRESS.
"""

from __future__ import annotations

from replog.broker.driver.requests.base import (
    Handler,
    Outcome,
    Reply,
    RequestContext,
    RequestServices,
)
from replog.groups import OFFSETS_TOPIC, Endpoint, find_coordinator
from replog.protocol import messages as m
from replog.protocol.schema import Message
from replog.topics import TopicPartition

__all__ = ["HANDLERS", "handle_find_coordinator", "handle_group_request"]


def handle_find_coordinator(
    ctx: RequestContext, body: m.FindCoordinatorRequest, services: RequestServices
) -> Outcome:
    """See the module docstring."""
    exists = services.groups.ensure_offsets_topic(ctx.now_ms)

    def coordinator_of(partition: int) -> Endpoint | None:
        state = services.states.get(TopicPartition(OFFSETS_TOPIC, partition))
        if not exists or state is None or state.leader < 0:
            return None
        broker = services.brokers.get(state.leader)
        if broker is None or broker.fenced:
            return None
        return Endpoint(broker.broker_id, broker.host, broker.port)

    partitions = services.config.groups.offsets_topic_partitions
    return Reply(
        find_coordinator(
            body, ctx.version, partition_count=partitions, coordinator_of=coordinator_of
        )
    )


def handle_group_request(ctx: RequestContext, body: Message, services: RequestServices) -> Outcome:
    """A request for the hosted group coordinator."""
    return services.groups.handle(ctx, body)


HANDLERS: dict[type[Message], Handler] = {
    m.FindCoordinatorRequest: handle_find_coordinator,
    **{
        request: handle_group_request
        for request in (
            m.JoinGroupRequest,
            m.SyncGroupRequest,
            m.HeartbeatRequest,
            m.LeaveGroupRequest,
            m.OffsetCommitRequest,
            m.OffsetFetchRequest,
            m.OffsetDeleteRequest,
            m.ListGroupsRequest,
            m.DescribeGroupsRequest,
            m.DeleteGroupsRequest,
        )
    },
}
