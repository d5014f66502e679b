"""``reset``: empty a running cluster for the next test, through the Kafka protocol.

What ``Cluster.reset`` runs on the cluster's loop: every topic but the internal ones is deleted
(DeleteTopics to the controller's path, as a client would ask; the idempotent producers' state
lives in those partitions and goes with them) and every consumer group is deleted from the
broker that coordinates it (ListGroups, then DeleteGroups, to each running broker), so the
committed offsets go too. A group that still has members belongs to a consumer a test left
open: that is an error naming it (``ResetError``), never a silent leftover.
"""

from __future__ import annotations

from collections.abc import Sequence

from replog.broker.shell.links import BrokerLink
from replog.errors import ErrorCode, ReplogError, error_name
from replog.protocol import messages as m
from replog.protocol.schema import Message, Request

__all__ = ["ResetError", "reset"]

_TIMEOUT_S = 30.0
_METADATA_VERSION = 9
_DELETE_TOPICS_VERSION = 5
_LIST_GROUPS_VERSION = 4
_DELETE_GROUPS_VERSION = 2


class ResetError(ReplogError):
    """The cluster could not be emptied (what is left, and why, is in the message)."""


async def reset(brokers: Sequence[tuple[int, str, int]], frame_bytes_max: int) -> None:
    """Empty the cluster whose running brokers are ``(id, host, port)`` (module docstring)."""
    if not brokers:
        raise ResetError("no broker is running")
    links = {
        broker_id: BrokerLink(broker_id, "replog-reset", frame_bytes_max)
        for broker_id, *_ in brokers
    }
    try:
        problems = await _delete_groups(brokers, links)
        problems += await _delete_topics(brokers[0], links[brokers[0][0]])
    finally:
        for link in links.values():
            link.close()
    if problems:
        raise ResetError("reset left something behind: " + "; ".join(problems))


async def _ask(link: BrokerLink, host: str, port: int, version: int, body: Request) -> Message:
    return await link.request((host, port), body.API.api_key, version, body, _TIMEOUT_S)


async def _delete_topics(broker: tuple[int, str, int], link: BrokerLink) -> list[str]:
    _, host, port = broker
    metadata = await _ask(link, host, port, _METADATA_VERSION, m.MetadataRequest(topics=None))
    assert isinstance(metadata, m.MetadataResponse)
    names = sorted(t.name for t in metadata.topics if t.name is not None and not t.is_internal)
    if not names:
        return []
    request = m.DeleteTopicsRequest(topic_names=names, timeout_ms=int(_TIMEOUT_S * 1000))
    answer = await _ask(link, host, port, _DELETE_TOPICS_VERSION, request)
    assert isinstance(answer, m.DeleteTopicsResponse)
    return [
        f"topic {r.name}: {error_name(r.error_code)}"
        for r in answer.responses
        if r.error_code not in (ErrorCode.NONE, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    ]


async def _delete_groups(
    brokers: Sequence[tuple[int, str, int]], links: dict[int, BrokerLink]
) -> list[str]:
    problems: list[str] = []
    for broker_id, host, port in brokers:
        link = links[broker_id]
        listed = await _ask(link, host, port, _LIST_GROUPS_VERSION, m.ListGroupsRequest())
        assert isinstance(listed, m.ListGroupsResponse)
        if listed.error_code != ErrorCode.NONE:
            problems.append(
                f"listing the groups of broker {broker_id}: {error_name(listed.error_code)}"
            )
        groups = [g.group_id for g in listed.groups]
        if not groups:
            continue
        request = m.DeleteGroupsRequest(groups_names=groups)
        answer = await _ask(link, host, port, _DELETE_GROUPS_VERSION, request)
        assert isinstance(answer, m.DeleteGroupsResponse)
        for result in answer.results:
            if result.error_code == ErrorCode.NON_EMPTY_GROUP:
                problems.append(f"group {result.group_id} still has members (close its consumers)")
            elif result.error_code not in (ErrorCode.NONE, ErrorCode.GROUP_ID_NOT_FOUND):
                problems.append(f"group {result.group_id}: {error_name(result.error_code)}")
    return problems
