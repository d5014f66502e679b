"""The CreateTopics / DeleteTopics / CreatePartitions handlers on hostile input: every topic is
answered with the API's error code, and the answer encodes at the request's version."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, cast

import pytest

from replog.broker.driver.requests.base import AdminResult, AwaitAdmin, Reply, RequestContext
from replog.broker.driver.requests.topics import handle_delete_topics
from replog.errors import ErrorCode
from replog.metadata.types import DeleteTopic
from replog.protocol import RequestHeader
from replog.protocol import messages as m


def _context(version: int) -> RequestContext:
    header = RequestHeader(api_key=20, api_version=version, correlation_id=1, client_id="t")
    return RequestContext(header=header, now_ms=0)


@pytest.mark.parametrize("version", [1, 2, 3, 4, 5])
def test_delete_topics_with_an_empty_name_is_answered_invalid_topic(version: int) -> None:
    """Before, the empty name was answered as a null name, which v1-v5 cannot encode: the
    whole request failed as UNKNOWN_SERVER_ERROR."""
    services = cast(Any, SimpleNamespace(topics={}))
    body = m.DeleteTopicsRequest(topic_names=["", "t"], timeout_ms=1000)
    queued = handle_delete_topics(_context(version), body, services)
    assert isinstance(queued, AwaitAdmin)
    assert queued.payloads == (DeleteTopic(topic="t"),)

    reply = queued.finish([AdminResult(ErrorCode.NONE)])
    assert isinstance(reply, Reply)
    answer = reply.message
    assert isinstance(answer, m.DeleteTopicsResponse)
    assert [(r.name, r.error_code) for r in answer.responses] == [
        ("", ErrorCode.INVALID_TOPIC_EXCEPTION),
        ("t", ErrorCode.NONE),
    ]
    decoded = m.DeleteTopicsResponse.decode(answer.encode(version), version)
    assert [r.name for r in decoded.responses] == ["", "t"]
