"""`RaftConfig`: one node's quorum settings, validated when built.

Defaults are Kafka's ``controller.quorum.*`` settings (KIP-595): election timeout 1000 ms,
fetch timeout 2000 ms, election backoff max 1000 ms, retry backoff 20 ms, request timeout
2000 ms. The voter set is static (no KIP-853 reconfiguration).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import attrs

from replog.errors import InvalidConfigError

__all__ = ["RaftConfig"]


def _positive(instance: object, attribute: attrs.Attribute[Any], value: int) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        raise InvalidConfigError(f"{attribute.name} must be a positive int, got {value!r}")


def _frozen(voters: Iterable[int]) -> frozenset[int]:
    return frozenset(voters)


def _node_ids(instance: object, attribute: attrs.Attribute[Any], value: frozenset[int]) -> None:
    if not value:
        raise InvalidConfigError("voters must not be empty")
    if any(not isinstance(v, int) or isinstance(v, bool) or v < 0 for v in value):
        raise InvalidConfigError(f"voter ids must be ints >= 0, got {sorted(value)}")


@attrs.frozen(kw_only=True)
class RaftConfig:
    """Settings of one node of the metadata quorum.

    ``fetch_backoff_ms`` is how long a follower waits before its next fetch after an empty
    answer (Kafka's leader holds the fetch instead, up to ``fetch.max.wait``; without a
    transport to hold requests on, the follower paces itself).
    """

    node_id: int = attrs.field()
    voters: frozenset[int] = attrs.field(converter=_frozen, validator=_node_ids)
    election_timeout_ms: int = attrs.field(default=1000, validator=_positive)
    fetch_timeout_ms: int = attrs.field(default=2000, validator=_positive)
    election_backoff_max_ms: int = attrs.field(default=1000, validator=_positive)
    retry_backoff_ms: int = attrs.field(default=20, validator=_positive)
    request_timeout_ms: int = attrs.field(default=2000, validator=_positive)
    fetch_backoff_ms: int = attrs.field(default=20, validator=_positive)
    fetch_max_bytes: int = attrs.field(default=8 * 1024 * 1024, validator=_positive)
    snapshot_chunk_bytes: int = attrs.field(default=1024 * 1024, validator=_positive)
    batch_bytes_max: int = attrs.field(default=1024 * 1024, validator=_positive)

    @node_id.validator
    def _check_node_id(self, attribute: attrs.Attribute[int], value: int) -> None:
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise InvalidConfigError(f"node_id must be an int >= 0, got {value!r}")

    @property
    def is_voter(self) -> bool:
        """Whether this node votes (otherwise it is an observer)."""
        return self.node_id in self.voters

    @property
    def majority(self) -> int:
        """How many voters make a majority."""
        return len(self.voters) // 2 + 1

    @property
    def check_quorum_timeout_ms(self) -> int:
        """A leader that has not heard fetches from a majority for this long resigns
        (1.5 x the fetch timeout, Kafka's factor)."""
        return self.fetch_timeout_ms * 3 // 2
