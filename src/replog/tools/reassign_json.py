"""Kafka's JSON documents for ``replog reassign``, read strictly and written in Kafka's shape.

Topics to move (``--topics-to-move-json-file``)::

    {"version": 1, "topics": [{"topic": "orders"}, {"topic": "payments"}]}

A reassignment (``--reassignment-json-file``; what ``--generate`` proposes and what
``--execute`` prints for rollback); the first replica is the preferred leader and
``log_dirs``, optional, is one ``"any"`` per replica (replog picks the log dir itself)::

    {"version": 1, "partitions": [
        {"topic": "orders", "partition": 0, "replicas": [1, 2], "log_dirs": ["any", "any"]}]}

Pure: the caller reads the file; a malformed document raises ``ReassignmentFileError`` naming
what is wrong.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from replog.errors import ReplogError

__all__ = [
    "ReassignmentFileError",
    "parse_reassignment",
    "parse_topics_to_move",
    "reassignment_document",
]

_VERSION = 1


class ReassignmentFileError(ReplogError):
    """A topics-to-move or reassignment document that is not Kafka's format."""


def _load(text: str, what: str) -> dict[str, Any]:
    try:
        document = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ReassignmentFileError(f"{what} is not valid JSON: {exc}") from None
    if not isinstance(document, dict):
        raise ReassignmentFileError(f"{what} must be a JSON object")
    version = document.get("version", _VERSION)
    if version != _VERSION:
        raise ReassignmentFileError(f"{what}: unsupported version {version!r} (only 1)")
    return document


def _entries(document: dict[str, Any], key: str, what: str) -> list[dict[str, Any]]:
    entries = document.get(key)
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        raise ReassignmentFileError(f'{what} needs "{key}": a list of objects')
    return entries


def parse_topics_to_move(text: str) -> list[str]:
    """The topic names of a topics-to-move document, in order, each once."""
    what = "the topics-to-move file"
    topics: list[str] = []
    for entry in _entries(_load(text, what), "topics", what):
        topic = entry.get("topic")
        if not isinstance(topic, str) or not topic:
            raise ReassignmentFileError(f'{what}: every entry needs "topic": a name')
        if topic not in topics:
            topics.append(topic)
    if not topics:
        raise ReassignmentFileError(f"{what} names no topic")
    return topics


def _partition(entry: dict[str, Any], what: str) -> tuple[tuple[str, int], list[int]]:
    topic, partition, replicas = entry.get("topic"), entry.get("partition"), entry.get("replicas")
    if not isinstance(topic, str) or not topic:
        raise ReassignmentFileError(f'{what}: every entry needs "topic": a name')
    if not isinstance(partition, int) or isinstance(partition, bool) or partition < 0:
        raise ReassignmentFileError(f'{what}: {topic}: "partition" must be an integer >= 0')
    name = f"{topic}-{partition}"
    if (
        not isinstance(replicas, list)
        or not replicas
        or not all(isinstance(b, int) and not isinstance(b, bool) and b >= 0 for b in replicas)
    ):
        raise ReassignmentFileError(f'{what}: {name}: "replicas" must be a non-empty id list')
    if len(set(replicas)) != len(replicas):
        raise ReassignmentFileError(f"{what}: {name} names a broker twice: {replicas}")
    log_dirs = entry.get("log_dirs")
    if log_dirs is not None:
        if not isinstance(log_dirs, list) or len(log_dirs) != len(replicas):
            raise ReassignmentFileError(f'{what}: {name}: "log_dirs" needs one per replica')
        if any(d != "any" for d in log_dirs):
            raise ReassignmentFileError(
                f'{what}: {name}: replog chooses log dirs itself; "log_dirs" must be "any"'
            )
    return (topic, partition), replicas


def parse_reassignment(text: str) -> dict[tuple[str, int], list[int]]:
    """The target replicas per partition of a reassignment document (a partition listed twice,
    a broker listed twice for one partition or a log dir other than "any" is an error)."""
    what = "the reassignment file"
    targets: dict[tuple[str, int], list[int]] = {}
    for entry in _entries(_load(text, what), "partitions", what):
        tp, replicas = _partition(entry, what)
        if tp in targets:
            raise ReassignmentFileError(f"{what} lists {tp[0]}-{tp[1]} twice")
        targets[tp] = replicas
    if not targets:
        raise ReassignmentFileError(f"{what} names no partition")
    return targets


def reassignment_document(assignment: Mapping[tuple[str, int], Sequence[int]]) -> dict[str, Any]:
    """``assignment`` as Kafka's reassignment document, partitions sorted."""
    return {
        "version": _VERSION,
        "partitions": [
            {
                "topic": topic,
                "partition": partition,
                "replicas": list(replicas),
                "log_dirs": ["any"] * len(replicas),
            }
            for (topic, partition), replicas in sorted(assignment.items())
        ],
    }
