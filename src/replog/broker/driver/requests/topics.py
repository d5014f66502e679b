"""CreateTopics (key 19), DeleteTopics (key 20) and CreatePartitions (key 37): checked here,
then queued for the controller (``AwaitAdmin``), answered once it completes each one or the
request's timeout passes. Names and configs replog would not honour are refused per topic
(INVALID_TOPIC_EXCEPTION, INVALID_CONFIG) without reaching the controller; ``validate_only``
checks and queues nothing. A success carries no error message, as in Kafka."""

from __future__ import annotations

from replog.broker.config import BrokerConfig
from replog.broker.driver.requests.base import (
    AdminResult,
    Handler,
    Outcome,
    RequestContext,
    RequestServices,
)
from replog.broker.driver.requests.queueing import Checked, queue_checked
from replog.errors import ErrorCode, InvalidConfigError, InvalidTopicError
from replog.metadata.types import AddPartitions, CreateTopic, DeleteTopic
from replog.protocol import messages as m
from replog.protocol.schema import Message
from replog.topic_config import parse_topic_configs
from replog.topics import ZERO_TOPIC_ID, topic_uuid, validate_topic_name

__all__ = [
    "HANDLERS",
    "create_topic_payload",
    "handle_create_partitions",
    "handle_create_topics",
    "handle_delete_topics",
]


def create_topic_payload(config: BrokerConfig, topic: m.CreatableTopic) -> CreateTopic:
    """The controller's CreateTopic for one requested topic; ``InvalidTopicError`` for a bad
    name, ``InvalidConfigError`` / ``ValueError`` for configs replog would not honour."""
    validate_topic_name(topic.name)
    given = [(c.name, c.value) for c in topic.configs if c.value is not None]
    configs = dict(given)
    if len(configs) != len(given):
        raise InvalidConfigError(f"topic {topic.name!r}: a config is given twice")
    parse_topic_configs(configs)
    count = topic.num_partitions if topic.num_partitions > 0 else None
    factor = topic.replication_factor if topic.replication_factor > 0 else None
    assignment = tuple(
        tuple(a.broker_ids) for a in sorted(topic.assignments, key=lambda a: a.partition_index)
    )
    return CreateTopic(
        topic=topic.name,
        partition_count=count or len(assignment) or config.default_partition_count,
        replication_factor=factor
        or (len(assignment[0]) if assignment else config.default_replication_factor),
        replica_assignment=assignment,
        configs=configs,
    )


def handle_create_topics(
    ctx: RequestContext, body: m.CreateTopicsRequest, services: RequestServices
) -> Outcome:
    """See the module docstring."""
    checked: list[Checked[str]] = []
    for topic in body.topics:
        try:
            payload = create_topic_payload(services.config, topic)
        except InvalidTopicError as exc:
            refused = AdminResult(ErrorCode.INVALID_TOPIC_EXCEPTION, str(exc))
            checked.append((topic.name, None, refused))
        except (InvalidConfigError, ValueError) as exc:
            checked.append((topic.name, None, AdminResult(ErrorCode.INVALID_CONFIG, str(exc))))
        else:
            checked.append((topic.name, payload, AdminResult(ErrorCode.NONE)))

    def build(answers: list[tuple[str, AdminResult]]) -> Message:
        return m.CreateTopicsResponse(
            topics=[
                m.CreatableTopicResult(
                    name=name, error_code=int(r.error), error_message=r.message or None
                )
                for name, r in answers
            ]
        )

    return queue_checked(checked, body.timeout_ms, body.validate_only, build)


def handle_delete_topics(
    ctx: RequestContext, body: m.DeleteTopicsRequest, services: RequestServices
) -> Outcome:
    """Topics named in ``topic_names`` (v1-v5) or ``topics`` (v6; by name, or by topic ID)."""
    by_id = {topic_uuid(a.topic_id): name for name, a in services.topics.items()}
    ids = {name: topic_uuid(a.topic_id) for name, a in services.topics.items()}
    names: list[str | None] = list(body.topic_names)
    for t in body.topics:
        names.append(t.name if t.name is not None else by_id.get(t.topic_id))
    checked = [_deletion(name) for name in names]

    def build(answers: list[tuple[str | None, AdminResult]]) -> Message:
        return m.DeleteTopicsResponse(
            responses=[
                m.DeletableTopicResult(
                    name=name,
                    topic_id=ids.get(name or "", ZERO_TOPIC_ID),
                    error_code=int(r.error),
                    error_message=r.message or None,
                )
                for name, r in answers
            ]
        )

    return queue_checked(checked, body.timeout_ms, False, build)


def _deletion(name: str | None) -> Checked[str | None]:
    """One topic of a DeleteTopics: None is a topic ID nobody has (UNKNOWN_TOPIC_ID); a name no
    topic could have (such as the empty one) is refused here and answered under that same name,
    since before v6 an answer's name cannot be null."""
    if name is None:
        return name, None, AdminResult(ErrorCode.UNKNOWN_TOPIC_ID, "unknown topic ID")
    try:
        validate_topic_name(name)
    except InvalidTopicError as exc:
        return name, None, AdminResult(ErrorCode.INVALID_TOPIC_EXCEPTION, str(exc))
    return name, DeleteTopic(topic=name), AdminResult(ErrorCode.NONE)


def handle_create_partitions(
    ctx: RequestContext, body: m.CreatePartitionsRequest, services: RequestServices
) -> Outcome:
    """Grow topics to ``count`` partitions (the controller places them unless assigned)."""
    checked: list[Checked[str]] = []
    for topic in body.topics:
        assignment = tuple(tuple(a.broker_ids) for a in topic.assignments or ())
        payload = AddPartitions(
            topic=topic.name, partition_count=topic.count, replica_assignment=assignment
        )
        checked.append((topic.name, payload, AdminResult(ErrorCode.NONE)))

    def build(answers: list[tuple[str, AdminResult]]) -> Message:
        return m.CreatePartitionsResponse(
            throttle_time_ms=0,
            results=[
                m.CreatePartitionsTopicResult(
                    name=name, error_code=int(r.error), error_message=r.message or None
                )
                for name, r in answers
            ],
        )

    return queue_checked(checked, body.timeout_ms, body.validate_only, build)


HANDLERS: dict[type[Message], Handler] = {
    m.CreateTopicsRequest: handle_create_topics,
    m.DeleteTopicsRequest: handle_delete_topics,
    m.CreatePartitionsRequest: handle_create_partitions,
}
