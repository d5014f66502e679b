"""The error response of a request: what a broker answers when handling the request failed.

Kafka never leaves a client waiting for an answer that will not come: when a handler throws, the
broker answers with the API's error response (``AbstractRequest.getErrorResponse``) -- the error
code on every topic, partition or resource the request named -- or, when the API has no answer
to give (a Produce with acks=0), closes the connection. ``error_response`` builds that answer for
each API replog serves, with Kafka's contents:

- the code is the exception's ``ReplogError.code`` (Kafka's ``Errors.forException``), else
  UNKNOWN_SERVER_ERROR; the message, where the API has one, is the exception's text except for
  UNKNOWN_SERVER_ERROR, whose text is withheld (it may describe internals) as in
  ``ApiError.fromThrowable``;
- offsets, timestamps, epochs and watermarks are -1 ("unknown"), records empty.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from replog.errors import ErrorCode, ReplogError
from replog.protocol import messages as m
from replog.protocol.schema import Request, Response

__all__ = ["error_code_for", "error_response"]

_R = TypeVar("_R", bound=Request)


def error_code_for(error: BaseException) -> tuple[ErrorCode, str | None]:
    """The Kafka error code and message that report ``error`` to a client."""
    code = error.code if isinstance(error, ReplogError) else ErrorCode.UNKNOWN_SERVER_ERROR
    if code is ErrorCode.UNKNOWN_SERVER_ERROR:
        return code, None
    return code, str(error) or None


def error_response(request: Request, error: BaseException) -> Response | None:
    """The answer to ``request`` when handling it raised ``error``; None when Kafka sends no
    answer and closes the connection instead (Produce with acks=0)."""
    build = _BUILDERS.get(type(request))
    if build is None:
        raise TypeError(f"no error response for {type(request).__name__}")
    code, message = error_code_for(error)
    return build(request, int(code), message)


def _produce(request: m.ProduceRequest, code: int, message: str | None) -> Response | None:
    if request.acks == 0:
        return None
    return m.ProduceResponse(
        responses=[
            m.TopicProduceResponse(
                name=topic.name,
                partition_responses=[
                    m.PartitionProduceResponse(
                        index=p.index,
                        error_code=code,
                        base_offset=-1,
                        log_start_offset=-1,
                        error_message=message,
                    )
                    for p in topic.partition_data
                ],
            )
            for topic in request.topic_data
        ]
    )


def _fetch(request: m.FetchRequest, code: int, message: str | None) -> Response:
    # Below v13 the code goes on every partition and at the top level (v7+) alike.
    return m.FetchResponse(
        error_code=code,
        session_id=request.session_id,
        responses=[
            m.FetchResponseTopic(
                topic=topic.topic,
                partitions=[
                    m.FetchResponsePartition(
                        partition_index=p.partition,
                        error_code=code,
                        high_watermark=-1,
                        records=b"",
                    )
                    for p in topic.partitions
                ],
            )
            for topic in request.topics
        ],
    )


def _list_offsets(request: m.ListOffsetsRequest, code: int, message: str | None) -> Response:
    return m.ListOffsetsResponse(
        topics=[
            m.ListOffsetsTopicResponse(
                name=topic.name,
                partitions=[
                    m.ListOffsetsPartitionResponse(
                        partition_index=p.partition_index, error_code=code
                    )
                    for p in topic.partitions
                ],
            )
            for topic in request.topics
        ]
    )


def _metadata(request: m.MetadataRequest, code: int, message: str | None) -> Response:
    # "All topics" (null) names no topic to put the code on: the answer lists none.
    return m.MetadataResponse(
        topics=[
            m.MetadataResponseTopic(
                error_code=code, name=topic.name or "", topic_id=topic.topic_id, partitions=[]
            )
            for topic in request.topics or ()
        ]
    )


def _api_versions(request: m.ApiVersionsRequest, code: int, message: str | None) -> Response:
    return m.ApiVersionsResponse(error_code=code, api_keys=[])


def _create_topics(request: m.CreateTopicsRequest, code: int, message: str | None) -> Response:
    return m.CreateTopicsResponse(
        topics=[
            m.CreatableTopicResult(name=topic.name, error_code=code, error_message=message)
            for topic in request.topics
        ]
    )


def _delete_topics(request: m.DeleteTopicsRequest, code: int, message: str | None) -> Response:
    named = [m.DeleteTopicState(name=name) for name in request.topic_names]
    return m.DeleteTopicsResponse(
        responses=[
            m.DeletableTopicResult(name=topic.name, topic_id=topic.topic_id, error_code=code)
            for topic in named + list(request.topics)
        ]
    )


def _offset_for_leader_epoch(
    request: m.OffsetForLeaderEpochRequest, code: int, message: str | None
) -> Response:
    return m.OffsetForLeaderEpochResponse(
        topics=[
            m.OffsetForLeaderTopicResult(
                topic=topic.topic,
                partitions=[
                    m.EpochEndOffsetResult(error_code=code, partition=p.partition)
                    for p in topic.partitions
                ],
            )
            for topic in request.topics
        ]
    )


def _create_partitions(
    request: m.CreatePartitionsRequest, code: int, message: str | None
) -> Response:
    return m.CreatePartitionsResponse(
        results=[
            m.CreatePartitionsTopicResult(name=topic.name, error_code=code, error_message=message)
            for topic in request.topics
        ]
    )


def _describe_configs(
    request: m.DescribeConfigsRequest, code: int, message: str | None
) -> Response:
    return m.DescribeConfigsResponse(
        results=[
            m.DescribeConfigsResult(
                error_code=code,
                error_message=message,
                resource_type=resource.resource_type,
                resource_name=resource.resource_name,
            )
            for resource in request.resources
        ]
    )


def _init_producer_id(request: m.InitProducerIdRequest, code: int, message: str | None) -> Response:
    return m.InitProducerIdResponse(error_code=code, producer_id=-1, producer_epoch=-1)


def _entry(
    request_type: type[_R], build: Callable[[_R, int, str | None], Response | None]
) -> tuple[type[Request], Callable[[Any, int, str | None], Response | None]]:
    return request_type, build


_BUILDERS: dict[type[Request], Callable[[Any, int, str | None], Response | None]] = dict(
    (
        _entry(m.ProduceRequest, _produce),
        _entry(m.FetchRequest, _fetch),
        _entry(m.ListOffsetsRequest, _list_offsets),
        _entry(m.MetadataRequest, _metadata),
        _entry(m.ApiVersionsRequest, _api_versions),
        _entry(m.CreateTopicsRequest, _create_topics),
        _entry(m.DeleteTopicsRequest, _delete_topics),
        _entry(m.OffsetForLeaderEpochRequest, _offset_for_leader_epoch),
        _entry(m.CreatePartitionsRequest, _create_partitions),
        _entry(m.DescribeConfigsRequest, _describe_configs),
        _entry(m.InitProducerIdRequest, _init_producer_id),
    )
)
