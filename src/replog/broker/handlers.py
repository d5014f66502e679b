"""Request handlers: one coroutine per served API, turning a decoded request into frame parts.

Handlers run on the broker's event loop and call the ``ReplicaManager`` synchronously; after
each input the broker drains the manager's outputs (``Broker.after_input``). Produce acks=all
waits on the partition's purgatory completion; Fetch long-polls by waiting for the manager's
``data_version`` to move; admin requests go to the controller through the coordinator's admin
queue and wait for their completion record on the feed.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from replog.broker.server import CloseConnection, Response, wait_event
from replog.coord.types import AddPartitions, AdminPayload, CreateTopic, DeleteTopic
from replog.errors import ErrorCode, InvalidConfigError, InvalidTopicError
from replog.isr import Acks, FetchRequest, ProduceResult
from replog.log.log import FetchSlice, Log
from replog.log.time_lookup import offset_for_timestamp, offset_of_max_timestamp
from replog.protocol import (
    RecordsRef,
    RequestHeader,
    encode_fetch_response_parts,
    encode_response_parts,
    supported_api_versions,
)
from replog.protocol import messages as m
from replog.protocol.schema import Message
from replog.topic_config import ConfigSource, effective_topic_configs, parse_topic_configs
from replog.topics import topic_uuid, validate_topic_name

if TYPE_CHECKING:
    from replog.broker.broker import Broker

__all__ = ["handle_request"]


def _code(value: ErrorCode | int) -> int:
    return int(value)


async def handle_request(broker: Broker, header: RequestHeader, body: Message) -> Response:
    """Dispatch one request; returns the response frame parts (None: send nothing)."""
    version, cid = header.api_version, header.correlation_id
    response: Message
    if isinstance(body, m.ProduceRequest):
        produced = await _produce(broker, body)
        if produced is None:
            return None
        response = produced
    elif isinstance(body, m.FetchRequest):
        fetched = await _fetch(broker, body)
        return encode_fetch_response_parts(cid, version, fetched)
    elif isinstance(body, m.ApiVersionsRequest):
        response = m.ApiVersionsResponse(error_code=0, api_keys=supported_api_versions())
    elif isinstance(body, m.MetadataRequest):
        response = _metadata(broker, body)
    elif isinstance(body, m.ListOffsetsRequest):
        response = _list_offsets(broker, body, version)
    elif isinstance(body, m.OffsetForLeaderEpochRequest):
        response = _offsets_for_leader_epoch(broker, body)
    elif isinstance(body, m.CreateTopicsRequest):
        response = await _create_topics(broker, body)
    elif isinstance(body, m.DeleteTopicsRequest):
        response = await _delete_topics(broker, body)
    elif isinstance(body, m.CreatePartitionsRequest):
        response = await _create_partitions(broker, body)
    elif isinstance(body, m.DescribeConfigsRequest):
        response = _describe_configs(broker, body)
    else:
        raise CloseConnection(f"no handler for {type(body).__name__}")
    return encode_response_parts(cid, version, response)


# ---------------------------------------------------------------------- produce


async def _produce(broker: Broker, body: m.ProduceRequest) -> m.ProduceResponse | None:
    rm, now_ms = broker.rm, broker.now_ms()
    waits: list[tuple[str, int, asyncio.Future[ProduceResult]]] = []
    done: dict[tuple[str, int], ProduceResult] = {}
    order: list[tuple[str, int]] = []
    timeout_ms = max(0, body.timeout_ms)
    for topic in body.topic_data:
        for data in topic.partition_data:
            tp = (topic.name, data.index)
            order.append(tp)
            records = b"" if data.records is None else data.records
            if isinstance(records, RecordsRef) or not records:
                done[tp] = ProduceResult(0, -1, ErrorCode.CORRUPT_MESSAGE)
                continue
            request_id, result = rm.produce(
                topic.name, data.index, bytes(records), body.acks, now_ms, timeout_ms=timeout_ms
            )
            if result is None:
                waits.append((topic.name, data.index, broker.produce_waiter(tp, request_id)))
            else:
                done[tp] = result
    broker.after_input()
    for topic_name, index, future in waits:
        done[(topic_name, index)] = await future
    if body.acks == Acks.NONE:
        if any(r.error_code is not ErrorCode.NONE for r in done.values()):
            raise CloseConnection("acks=0 produce failed")
        return None
    by_topic: dict[str, list[m.PartitionProduceResponse]] = {}
    for tp in order:
        result = done[tp]
        log = rm.log(*tp)
        by_topic.setdefault(tp[0], []).append(
            m.PartitionProduceResponse(
                index=tp[1],
                error_code=_code(result.error_code),
                base_offset=result.base_offset,
                log_start_offset=-1 if log is None else log.log_start_offset,
            )
        )
    return m.ProduceResponse(
        responses=[
            m.TopicProduceResponse(name=name, partition_responses=parts)
            for name, parts in by_topic.items()
        ]
    )


# ---------------------------------------------------------------------- fetch


def _read_all(broker: Broker, body: m.FetchRequest) -> tuple[list[m.FetchResponseTopic], int, bool]:
    rm, now_ms = broker.rm, broker.now_ms()
    budget = min(max(body.max_bytes, 1), broker.config.fetch_bytes_max)
    total, any_error = 0, False
    topics: list[m.FetchResponseTopic] = []
    for topic in body.topics:
        parts: list[m.FetchResponsePartition] = []
        for p in topic.partitions:
            request = FetchRequest(
                replica_id=body.replica_id,
                fetch_offset=p.fetch_offset,
                current_leader_epoch=p.current_leader_epoch,
                last_fetched_epoch=p.last_fetched_epoch,
                log_start_offset=p.log_start_offset,
                max_bytes=max(1, min(p.partition_max_bytes, budget - total)),
            )
            answer = rm.fetch(topic.topic, p.partition, request, now_ms)
            records: Any = b""
            if answer.records is not None and answer.records.size_bytes > 0:
                if budget - total <= 0 and total > 0:
                    records = b""
                else:
                    size = answer.records.size_bytes
                    total += size
                    if isinstance(answer.records, FetchSlice):
                        records = RecordsRef(size, answer.records)
                    else:
                        records = answer.records.to_bytes()
            any_error = any_error or answer.error_code is not ErrorCode.NONE
            diverging = None
            if answer.diverging_epoch is not None:
                any_error = True
                diverging = m.EpochEndOffset(
                    epoch=answer.diverging_epoch.epoch,
                    end_offset=answer.diverging_epoch.end_offset,
                )
            parts.append(
                m.FetchResponsePartition(
                    partition_index=p.partition,
                    error_code=_code(answer.error_code),
                    high_watermark=answer.high_watermark,
                    last_stable_offset=answer.high_watermark,
                    log_start_offset=answer.log_start_offset,
                    diverging_epoch=diverging,
                    current_leader=None,
                    snapshot_id=None,
                    aborted_transactions=None,
                    records=records,
                )
            )
        topics.append(m.FetchResponseTopic(topic=topic.topic, partitions=parts))
    broker.after_input()
    return topics, total, any_error


async def _fetch(broker: Broker, body: m.FetchRequest) -> m.FetchResponse:
    loop = asyncio.get_running_loop()
    wait_s = min(max(body.max_wait_ms, 0), broker.config.request_timeout_ms) / 1000
    deadline = loop.time() + wait_s
    while True:
        changed = broker.data_event
        topics, total, any_error = _read_all(broker, body)
        remaining = deadline - loop.time()
        if total >= body.min_bytes or any_error or remaining <= 0 or not body.topics:
            return m.FetchResponse(error_code=0, session_id=0, responses=topics)
        await wait_event(changed, remaining)


# ---------------------------------------------------------------------- metadata and offsets


def _metadata(broker: Broker, body: m.MetadataRequest) -> m.MetadataResponse:
    rm = broker.rm
    brokers = [
        m.MetadataResponseBroker(node_id=b.broker_id, host=b.host, port=b.port, rack=b.rack)
        for b in sorted(rm.brokers.values(), key=lambda b: b.broker_id)
        if not b.fenced
    ]
    if body.topics is None:
        names = sorted(rm.topics)
    else:
        by_id = {topic_uuid(a.topic_id): name for name, a in rm.topics.items()}
        names = [t.name or by_id.get(t.topic_id, "") for t in body.topics]
    topics = []
    for name in names:
        assignment = rm.topics.get(name)
        if assignment is None:
            topics.append(
                m.MetadataResponseTopic(
                    error_code=_code(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION), name=name, partitions=[]
                )
            )
            continue
        partitions = []
        for index in range(assignment.partition_count):
            state = rm.states.get((name, index))
            if state is None:
                continue
            partitions.append(
                m.MetadataResponsePartition(
                    error_code=_code(
                        ErrorCode.NONE if state.leader >= 0 else ErrorCode.LEADER_NOT_AVAILABLE
                    ),
                    partition_index=index,
                    leader_id=state.leader,
                    leader_epoch=state.leader_epoch,
                    replica_nodes=list(state.replicas),
                    isr_nodes=list(state.isr),
                    offline_replicas=[r for r in state.replicas if r not in rm.brokers],
                )
            )
        topics.append(
            m.MetadataResponseTopic(
                error_code=0,
                name=name,
                topic_id=topic_uuid(assignment.topic_id),
                partitions=partitions,
            )
        )
    controller = rm.controller
    return m.MetadataResponse(
        brokers=brokers,
        cluster_id="replog",
        controller_id=-1 if controller is None else controller.controller_id,
        topics=topics,
    )


def _leader_check(broker: Broker, topic: str, partition: int, epoch: int) -> ErrorCode:
    replica = broker.rm.partition(topic, partition)
    if replica is None:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    if not replica.is_leader:
        return ErrorCode.NOT_LEADER_OR_FOLLOWER
    if epoch >= 0 and epoch < replica.leader_epoch:
        return ErrorCode.FENCED_LEADER_EPOCH
    if epoch > replica.leader_epoch:
        return ErrorCode.UNKNOWN_LEADER_EPOCH
    return ErrorCode.NONE


def _list_offsets(
    broker: Broker, body: m.ListOffsetsRequest, version: int
) -> m.ListOffsetsResponse:
    """Offsets by time; the leader epoch only from v4, the first version that carries it (Kafka's
    schema does not let it be dropped)."""
    topics = []
    for topic in body.topics:
        parts = []
        for p in topic.partitions:
            code = _leader_check(broker, topic.name, p.partition_index, p.current_leader_epoch)
            offset, timestamp, epoch = -1, -1, -1
            log = broker.rm.log(topic.name, p.partition_index)
            if code is ErrorCode.NONE and log is not None:
                code, timestamp, offset = _offset_at(log, p.timestamp, body.replica_id >= 0)
                replica = broker.rm.partition(topic.name, p.partition_index)
                if body.replica_id < 0 and replica is not None and not replica.hw_is_current:
                    code, offset = ErrorCode.OFFSET_NOT_AVAILABLE, -1  # see Partition.hw_is_current
                epoch = -1 if replica is None or version < 4 else replica.leader_epoch
            parts.append(
                m.ListOffsetsPartitionResponse(
                    partition_index=p.partition_index,
                    error_code=_code(code),
                    timestamp=timestamp,
                    offset=offset,
                    leader_epoch=epoch,
                )
            )
        topics.append(m.ListOffsetsTopicResponse(name=topic.name, partitions=parts))
    return m.ListOffsetsResponse(topics=topics)


def _offset_at(log: Log, timestamp: int, from_replica: bool) -> tuple[ErrorCode, int, int]:
    """(error, timestamp, offset) answering one ListOffsets partition. A consumer sees only
    offsets below the HW; a replica asking for the latest offset gets the LEO."""
    visible_end = log.log_end_offset if from_replica else log.high_watermark
    if timestamp == m.EARLIEST_TIMESTAMP:
        return ErrorCode.NONE, -1, log.log_start_offset
    if timestamp == m.LATEST_TIMESTAMP:
        return ErrorCode.NONE, -1, visible_end
    if timestamp == m.MAX_TIMESTAMP:
        found = offset_of_max_timestamp(log, visible_end)
    elif timestamp >= 0:
        found = offset_for_timestamp(log, timestamp, visible_end)
    else:
        return ErrorCode.INVALID_REQUEST, -1, -1
    return (ErrorCode.NONE, -1, -1) if found is None else (ErrorCode.NONE, *found)


def _offsets_for_leader_epoch(
    broker: Broker, body: m.OffsetForLeaderEpochRequest
) -> m.OffsetForLeaderEpochResponse:
    topics = []
    for topic in body.topics:
        parts = []
        for p in topic.partitions:
            code = _leader_check(broker, topic.topic, p.partition, p.current_leader_epoch)
            epoch, end_offset = -1, -1
            log = broker.rm.log(topic.topic, p.partition)
            if code is ErrorCode.NONE and log is not None:
                epoch, end_offset = log.end_offset_for_epoch(p.leader_epoch)
            parts.append(
                m.EpochEndOffsetResult(
                    error_code=_code(code),
                    partition=p.partition,
                    leader_epoch=epoch,
                    end_offset=end_offset,
                )
            )
        topics.append(m.OffsetForLeaderTopicResult(topic=topic.topic, partitions=parts))
    return m.OffsetForLeaderEpochResponse(topics=topics)


# ---------------------------------------------------------------------- admin


async def _admin(broker: Broker, payload: AdminPayload, timeout_ms: int) -> tuple[int, str]:
    """(error code, error message); a success carries no message, as in Kafka."""
    code, message = await broker.submit_admin(payload, timeout_ms)
    return _code(code), message if code != ErrorCode.NONE else ""


async def _create_topics(broker: Broker, body: m.CreateTopicsRequest) -> m.CreateTopicsResponse:
    results = []
    for topic in body.topics:
        try:
            payload = _create_topic_payload(broker, topic)
        except InvalidTopicError as exc:
            code, message = _code(ErrorCode.INVALID_TOPIC_EXCEPTION), str(exc)
        except (InvalidConfigError, ValueError) as exc:
            code, message = _code(ErrorCode.INVALID_CONFIG), str(exc)
        else:
            if body.validate_only:
                code, message = 0, ""
            else:
                code, message = await _admin(broker, payload, body.timeout_ms)
        results.append(
            m.CreatableTopicResult(name=topic.name, error_code=code, error_message=message or None)
        )
    return m.CreateTopicsResponse(topics=results)


def _create_topic_payload(broker: Broker, topic: m.CreatableTopic) -> CreateTopic:
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
    config = broker.config
    return CreateTopic(
        topic=topic.name,
        partition_count=count or len(assignment) or config.default_partition_count,
        replication_factor=factor
        or (len(assignment[0]) if assignment else config.default_replication_factor),
        replica_assignment=assignment,
        configs=configs,
    )


async def _delete_topics(broker: Broker, body: m.DeleteTopicsRequest) -> m.DeleteTopicsResponse:
    names = list(body.topic_names) + [t.name for t in body.topics if t.name is not None]
    results = []
    for name in names:
        code, message = await _admin(broker, DeleteTopic(topic=name), body.timeout_ms)
        results.append(
            m.DeletableTopicResult(name=name, error_code=code, error_message=message or None)
        )
    return m.DeleteTopicsResponse(responses=results)


async def _create_partitions(
    broker: Broker, body: m.CreatePartitionsRequest
) -> m.CreatePartitionsResponse:
    results = []
    for topic in body.topics:
        assignment = tuple(tuple(a.broker_ids) for a in topic.assignments or ())
        payload = AddPartitions(
            topic=topic.name, partition_count=topic.count, replica_assignment=assignment
        )
        if body.validate_only:
            code, message = 0, ""
        else:
            code, message = await _admin(broker, payload, body.timeout_ms)
        results.append(
            m.CreatePartitionsTopicResult(
                name=topic.name, error_code=code, error_message=message or None
            )
        )
    return m.CreatePartitionsResponse(throttle_time_ms=0, results=results)


# ---------------------------------------------------------------------- configs


_WIRE_CONFIG_SOURCE = {
    ConfigSource.TOPIC: m.CONFIG_SOURCE_TOPIC,
    ConfigSource.BROKER: m.CONFIG_SOURCE_STATIC_BROKER,
    ConfigSource.DEFAULT: m.CONFIG_SOURCE_DEFAULT,
}


def _describe_configs(broker: Broker, body: m.DescribeConfigsRequest) -> m.DescribeConfigsResponse:
    """Topic configs as they apply: the topic's own (config_source TOPIC) over this broker's
    defaults (STATIC_BROKER for its config file's settings, DEFAULT for built-in ones)."""
    results = []
    for resource in body.resources:
        name = resource.resource_name
        if resource.resource_type != m.RESOURCE_TOPIC:
            results.append(
                m.DescribeConfigsResult(
                    error_code=_code(ErrorCode.INVALID_REQUEST),
                    error_message="replog describes topic configs only",
                    resource_type=resource.resource_type,
                    resource_name=name,
                )
            )
            continue
        assignment = broker.rm.topics.get(name)
        if assignment is None:
            results.append(
                m.DescribeConfigsResult(
                    error_code=_code(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
                    error_message=f"unknown topic {name!r}",
                    resource_type=resource.resource_type,
                    resource_name=name,
                )
            )
            continue
        wanted = None if resource.configuration_keys is None else set(resource.configuration_keys)
        configs = []
        for entry in effective_topic_configs(
            assignment.config_map,
            log_defaults=broker.config.log,
            min_insync_replicas=broker.config.default_min_insync_replicas,
            unclean_leader_election=broker.config.unclean_leader_election_enable,
        ):
            if wanted is not None and entry.name not in wanted:
                continue
            source = _WIRE_CONFIG_SOURCE[entry.source]
            synonyms = (
                [m.DescribeConfigsSynonym(name=entry.name, value=entry.value, source=source)]
                if body.include_synonyms
                else []
            )
            configs.append(
                m.DescribeConfigsResourceResult(
                    name=entry.name,
                    value=entry.value,
                    read_only=False,
                    config_source=source,
                    is_sensitive=False,
                    synonyms=synonyms,
                    config_type=entry.config_type,
                )
            )
        results.append(
            m.DescribeConfigsResult(
                error_code=0,
                resource_type=resource.resource_type,
                resource_name=name,
                configs=configs,
            )
        )
    return m.DescribeConfigsResponse(results=results)
