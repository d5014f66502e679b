"""Partition administration: DeleteRecords (key 21), DescribeLogDirs (key 35), ElectLeaders
(key 43), AlterPartitionReassignments (key 45) and ListPartitionReassignments (key 46).

- DeleteRecords, on each partition's leader: the log start moves up to the offset (-1: the
  high watermark; past it OFFSET_OUT_OF_RANGE) and is checkpointed; the answer waits (at most
  ``timeout_ms``, then REQUEST_TIMED_OUT) until the partition's low watermark -- the lowest log
  start of its live replicas, which followers move when their fetch answers carry the leader's
  -- has reached it, as Kafka's delayed DeleteRecords does. The wait is a bounded poll
  (``AwaitData``: woken by the partition's changes, and every ``LOW_WATERMARK_POLL_MS``).
- DescribeLogDirs: this broker's log dirs, their space and their logs' sizes.
- ElectLeaders: one ``ElectLeader`` per partition queued for the controller, each answered
  with its own outcome; null partitions means every partition that needs one (a preferred
  election where ``replicas[0]`` does not lead, an unclean one where nobody leads), and those
  already led as asked are left out of the answer, as in Kafka.
- AlterPartitionReassignments: one ``ReassignPartition`` per partition (null replicas
  cancels), answered once the controller has started (or cancelled) it; the controller moves
  the replicas afterwards. ListPartitionReassignments answers from the metadata image.
"""

from __future__ import annotations

from replog.broker.driver.requests.base import (
    AdminResult,
    AwaitData,
    Handler,
    Outcome,
    Reply,
    RequestContext,
    RequestServices,
)
from replog.broker.driver.requests.queueing import Checked, queue_checked
from replog.errors import ErrorCode
from replog.metadata.types import NO_LEADER, ElectLeader, ReassignPartition
from replog.protocol import messages as m
from replog.protocol.schema import Message
from replog.topics import TopicPartition

__all__ = [
    "HANDLERS",
    "LOW_WATERMARK_POLL_MS",
    "handle_alter_partition_reassignments",
    "handle_delete_records",
    "handle_describe_log_dirs",
    "handle_elect_leaders",
    "handle_list_partition_reassignments",
]

LOW_WATERMARK_POLL_MS = 50
"""How often a DeleteRecords waiting for its followers looks at the low watermark again."""


# ---- DeleteRecords ----


def handle_delete_records(
    ctx: RequestContext, body: m.DeleteRecordsRequest, services: RequestServices
) -> Outcome:
    """See the module docstring."""
    deadline_ms = ctx.now_ms + max(body.timeout_ms, 0)
    order: list[TopicPartition] = []
    errors: dict[TopicPartition, ErrorCode] = {}
    targets: dict[TopicPartition, int] = {}
    for topic in body.topics:
        for p in topic.partitions:
            tp = TopicPartition(topic.name, p.partition_index)
            order.append(tp)
            code, start = services.delete_records(tp[0], tp[1], p.offset, ctx.now_ms)
            errors[tp] = code
            if code is ErrorCode.NONE:
                targets[tp] = start

    def attempt(now_ms: int, final: bool) -> Outcome:
        waiting = [tp for tp, start in targets.items() if services.low_watermark(*tp) < start]
        if not waiting or now_ms >= deadline_ms:
            return Reply(_delete_records_answer(services, order, errors, set(waiting)))
        wake_ms = min(deadline_ms, now_ms + LOW_WATERMARK_POLL_MS)
        return AwaitData(frozenset(waiting), wake_ms, attempt)

    return attempt(ctx.now_ms, False)


def _delete_records_answer(
    services: RequestServices,
    order: list[TopicPartition],
    errors: dict[TopicPartition, ErrorCode],
    timed_out: set[TopicPartition],
) -> m.DeleteRecordsResponse:
    by_topic: dict[str, list[m.DeleteRecordsPartitionResult]] = {}
    for tp in order:
        code = ErrorCode.REQUEST_TIMED_OUT if tp in timed_out else errors[tp]
        low = services.low_watermark(*tp) if code is ErrorCode.NONE else -1
        by_topic.setdefault(tp[0], []).append(
            m.DeleteRecordsPartitionResult(
                partition_index=tp[1], low_watermark=low, error_code=int(code)
            )
        )
    return m.DeleteRecordsResponse(
        topics=[m.DeleteRecordsTopicResult(name=t, partitions=ps) for t, ps in by_topic.items()]
    )


# ---- DescribeLogDirs ----


def handle_describe_log_dirs(
    ctx: RequestContext, body: m.DescribeLogDirsRequest, services: RequestServices
) -> Outcome:
    """See the module docstring."""
    wanted = (
        None
        if body.topics is None
        else {TopicPartition(t.topic, p) for t in body.topics for p in t.partitions}
    )
    results = []
    for described in services.log_dirs(wanted):
        by_topic: dict[str, list[m.DescribeLogDirsPartition]] = {}
        for part in described.partitions:
            by_topic.setdefault(part.topic, []).append(
                m.DescribeLogDirsPartition(
                    partition_index=part.partition,
                    partition_size=part.size_bytes,
                    offset_lag=part.offset_lag,
                    is_future_key=False,
                )
            )
        results.append(
            m.DescribeLogDirsResult(
                error_code=int(described.error),
                log_dir=described.path,
                topics=[
                    m.DescribeLogDirsTopic(name=t, partitions=ps) for t, ps in by_topic.items()
                ],
                total_bytes=described.total_bytes,
                usable_bytes=described.usable_bytes,
            )
        )
    return Reply(m.DescribeLogDirsResponse(error_code=0, results=results))


# ---- ElectLeaders ----


def handle_elect_leaders(
    ctx: RequestContext, body: m.ElectLeadersRequest, services: RequestServices
) -> Outcome:
    """See the module docstring."""
    election = m.ELECTION_PREFERRED if ctx.version == 0 else body.election_type
    if election not in (m.ELECTION_PREFERRED, m.ELECTION_UNCLEAN):
        return Reply(_elect_answer(ctx, body, [], int(ErrorCode.INVALID_REQUEST), all_topics=()))
    unclean = election == m.ELECTION_UNCLEAN
    if body.topic_partitions is None:
        tps = [
            tp
            for tp, state in sorted(services.states.items())
            if (state.leader == NO_LEADER if unclean else state.leader != state.replicas[0])
        ]
    else:
        tps = list(
            dict.fromkeys(
                TopicPartition(t.topic, p) for t in body.topic_partitions for p in t.partitions
            )
        )
    checked: list[Checked[TopicPartition]] = []
    for tp in tps:
        if tp not in services.states:
            refused = AdminResult(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"unknown partition {tp}")
            checked.append((tp, None, refused))
        else:
            payload = ElectLeader(topic=tp[0], partition=tp[1], unclean=unclean)
            checked.append((tp, payload, AdminResult(ErrorCode.NONE)))
    all_topics = sorted(services.topics) if body.topic_partitions is None else ()
    return queue_checked(
        checked,
        body.timeout_ms,
        False,
        lambda answers: _elect_answer(ctx, body, answers, 0, all_topics=all_topics),
    )


def _elect_answer(
    ctx: RequestContext,
    body: m.ElectLeadersRequest,
    answers: list[tuple[TopicPartition, AdminResult]],
    top_level: int,
    *,
    all_topics: tuple[str, ...] | list[str],
) -> m.ElectLeadersResponse:
    by_topic: dict[str, list[m.ElectionPartitionResult]] = {t: [] for t in all_topics}
    for (topic, partition), result in answers:
        if all_topics and result.error is ErrorCode.ELECTION_NOT_NEEDED:
            by_topic.setdefault(topic, [])
            continue
        by_topic.setdefault(topic, []).append(
            m.ElectionPartitionResult(
                partition_id=partition,
                error_code=int(result.error),
                error_message=result.message or None,
            )
        )
    return m.ElectLeadersResponse(
        error_code=top_level if ctx.version >= 1 else 0,
        replica_election_results=[
            m.ReplicaElectionResult(topic=t, partition_result=ps) for t, ps in by_topic.items()
        ],
    )


# ---- AlterPartitionReassignments / ListPartitionReassignments ----


def _reassignment(
    services: RequestServices, tp: TopicPartition, replicas: list[int] | None, allow_rf_change: bool
) -> Checked[TopicPartition]:
    state = services.states.get(tp)
    if state is None:
        return tp, None, AdminResult(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"unknown {tp}")
    if replicas is None:
        return tp, ReassignPartition(topic=tp[0], partition=tp[1], target_replicas=None), _OK
    target = tuple(replicas)
    if not target or len(set(target)) != len(target) or min(target) < 0:
        message = f"bad replicas {list(target)}"
        return tp, None, AdminResult(ErrorCode.INVALID_REPLICA_ASSIGNMENT, message)
    factor = len(state.replicas) - len(state.removing_replicas)
    if not allow_rf_change and len(target) != factor:
        message = f"{tp} has {factor} replicas; {len(target)} would change its replication factor"
        return tp, None, AdminResult(ErrorCode.INVALID_REPLICATION_FACTOR, message)
    return tp, ReassignPartition(topic=tp[0], partition=tp[1], target_replicas=target), _OK


_OK = AdminResult(ErrorCode.NONE)


def handle_alter_partition_reassignments(
    ctx: RequestContext, body: m.AlterPartitionReassignmentsRequest, services: RequestServices
) -> Outcome:
    """See the module docstring."""
    allow = body.allow_replication_factor_change or ctx.version < 1
    checked = [
        _reassignment(services, TopicPartition(topic.name, p.partition_index), p.replicas, allow)
        for topic in body.topics
        for p in topic.partitions
    ]

    def build(answers: list[tuple[TopicPartition, AdminResult]]) -> Message:
        by_topic: dict[str, list[m.ReassignablePartitionResponse]] = {}
        for (topic, partition), result in answers:
            by_topic.setdefault(topic, []).append(
                m.ReassignablePartitionResponse(
                    partition_index=partition,
                    error_code=int(result.error),
                    error_message=result.message or None,
                )
            )
        return m.AlterPartitionReassignmentsResponse(
            allow_replication_factor_change=allow,
            error_code=0,
            responses=[
                m.ReassignableTopicResponse(name=t, partitions=ps) for t, ps in by_topic.items()
            ],
        )

    return queue_checked(checked, body.timeout_ms, False, build)


def handle_list_partition_reassignments(
    ctx: RequestContext, body: m.ListPartitionReassignmentsRequest, services: RequestServices
) -> Outcome:
    """See the module docstring; a named topic that does not exist is a top-level
    UNKNOWN_TOPIC_OR_PARTITION."""
    if body.topics is None:
        tps = sorted(services.states)
    else:
        missing = [t.name for t in body.topics if t.name not in services.topics]
        if missing:
            return Reply(
                m.ListPartitionReassignmentsResponse(
                    error_code=int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
                    error_message=f"unknown topics {missing}",
                )
            )
        tps = [TopicPartition(t.name, p) for t in body.topics for p in t.partition_indexes]
    by_topic: dict[str, list[m.OngoingPartitionReassignment]] = {}
    for tp in tps:
        state = services.states.get(tp)
        if state is None or not (state.adding_replicas or state.removing_replicas):
            continue
        by_topic.setdefault(tp[0], []).append(
            m.OngoingPartitionReassignment(
                partition_index=tp[1],
                replicas=list(state.replicas),
                adding_replicas=list(state.adding_replicas),
                removing_replicas=list(state.removing_replicas),
            )
        )
    return Reply(
        m.ListPartitionReassignmentsResponse(
            error_code=0,
            topics=[
                m.OngoingTopicReassignment(name=t, partitions=ps) for t, ps in by_topic.items()
            ],
        )
    )


HANDLERS: dict[type[Message], Handler] = {
    m.DeleteRecordsRequest: handle_delete_records,
    m.DescribeLogDirsRequest: handle_describe_log_dirs,
    m.ElectLeadersRequest: handle_elect_leaders,
    m.AlterPartitionReassignmentsRequest: handle_alter_partition_reassignments,
    m.ListPartitionReassignmentsRequest: handle_list_partition_reassignments,
}
