"""Errors raised by coordination backends (all subclasses of ``replog.errors.ReplogError``).

Expected outcomes of optimistic concurrency (a stale partition epoch, a fenced controller on a
partition-state write) are *values* (``CasResult``), not exceptions: the controller branches on
them every day. Everything here is raised: bad input, a session that is gone, a store that cannot
be reached, a fenced controller on the rarer structural writes (topics, partitions).
"""

from __future__ import annotations

from replog.errors import ErrorCode, InvalidConfigError, ReplogError, RetriableError

__all__ = [
    "AdminQueueFullError",
    "BrokerIdInUseError",
    "CoordinatorClosedError",
    "CoordinatorError",
    "CoordinatorUnavailableError",
    "FencedControllerError",
    "InvalidPartitionStateError",
    "InvalidReplicaAssignmentError",
    "MustResyncError",
    "SessionExpiredError",
    "TopicExistsError",
    "UnknownBackendError",
    "UnknownTopicError",
]


class CoordinatorError(ReplogError):
    """Base of every error a coordination backend raises on purpose."""


class CoordinatorUnavailableError(CoordinatorError, RetriableError):
    """The store cannot be reached, or the session the call travels on is SUSPENDED.
    Nothing was changed, or the backend cannot tell (then the caller re-reads before retrying)."""

    code = ErrorCode.NETWORK_EXCEPTION


class CoordinatorClosedError(CoordinatorError):
    """The coordinator was closed; no further calls are accepted."""


class SessionExpiredError(CoordinatorError):
    """The broker's session is LOST, or the incarnation epoch given is not the current one.

    The broker must stop acting on metadata and register again (getting a new incarnation).
    """

    code = ErrorCode.STALE_BROKER_EPOCH

    def __init__(
        self, broker_id: int, incarnation_epoch: int, current_incarnation_epoch: int | None
    ) -> None:
        super().__init__(
            f"broker {broker_id} incarnation {incarnation_epoch} has no live session "
            f"(current incarnation: {current_incarnation_epoch})"
        )
        self.broker_id = broker_id
        self.incarnation_epoch = incarnation_epoch
        self.current_incarnation_epoch = current_incarnation_epoch


class BrokerIdInUseError(CoordinatorError, RetriableError):
    """Another live session holds this broker id. A restarted broker retries until the old
    session expires (ZooKeeper's NodeExists, KRaft's duplicate registration)."""

    code = ErrorCode.INVALID_REQUEST

    def __init__(self, broker_id: int, holder_incarnation_epoch: int) -> None:
        super().__init__(
            f"broker id {broker_id} is held by live incarnation {holder_incarnation_epoch}"
        )
        self.broker_id = broker_id
        self.holder_incarnation_epoch = holder_incarnation_epoch


class FencedControllerError(CoordinatorError):
    """A controller write carried an epoch that is not the active controller's (a zombie)."""

    code = ErrorCode.STALE_CONTROLLER_EPOCH

    def __init__(self, controller_epoch: int, active_controller_epoch: int | None) -> None:
        super().__init__(
            f"controller epoch {controller_epoch} is fenced "
            f"(active controller epoch: {active_controller_epoch})"
        )
        self.controller_epoch = controller_epoch
        self.active_controller_epoch = active_controller_epoch


class TopicExistsError(CoordinatorError):
    """The topic exists, or collides with an existing one ('.' and '_' are the same)."""

    code = ErrorCode.TOPIC_ALREADY_EXISTS

    def __init__(self, topic: str, existing: str) -> None:
        detail = "exists" if topic == existing else f"collides with existing topic {existing!r}"
        super().__init__(f"topic {topic!r} {detail}")
        self.topic = topic
        self.existing = existing


class UnknownTopicError(CoordinatorError):
    """The topic (or the partition of it) does not exist."""

    code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION

    def __init__(self, topic: str, partition: int | None = None) -> None:
        what = topic if partition is None else f"{topic}-{partition}"
        super().__init__(f"unknown topic or partition {what!r}")
        self.topic = topic
        self.partition = partition


class InvalidReplicaAssignmentError(CoordinatorError, ValueError):
    """A replica assignment is malformed: partitions not numbered 0..n-1 (or n..m for added
    ones), an empty or duplicated replica list, or a negative broker id."""

    code = ErrorCode.INVALID_REPLICA_ASSIGNMENT


class InvalidPartitionStateError(CoordinatorError, ValueError):
    """A proposed partition state breaks a structural rule (ISR not within the replicas, leader
    outside the ISR, leader epoch going backwards, ...). Nothing was written."""

    code = ErrorCode.INVALID_REQUEST


class MustResyncError(CoordinatorError):
    """The feed no longer holds the changes from ``requested_seq``: read a ``snapshot()`` and
    follow the feed from its ``seq``."""

    def __init__(self, requested_seq: int, oldest_seq: int) -> None:
        super().__init__(
            f"metadata changes from seq {requested_seq} are gone (history starts at "
            f"{oldest_seq}); resync from a snapshot"
        )
        self.requested_seq = requested_seq
        self.oldest_seq = oldest_seq


class AdminQueueFullError(CoordinatorError, RetriableError):
    """The target's admin request queue is at its limit even after compaction."""

    def __init__(self, target: int, limit: int) -> None:
        super().__init__(f"admin request queue for target {target} is full ({limit} requests)")
        self.target = target
        self.limit = limit


class UnknownBackendError(CoordinatorError, InvalidConfigError):
    """A coordinator URL names a scheme that no built-in or installed backend provides."""

    def __init__(self, url: str, scheme: str, known_schemes: list[str]) -> None:
        super().__init__(
            f"no coordination backend for scheme {scheme!r} in {url!r}; known schemes: "
            f"{', '.join(known_schemes) or '(none)'}. Third-party backends register an entry "
            f"point in the group 'replog.coordinators' named after their scheme."
        )
        self.url = url
        self.scheme = scheme
        self.known_schemes = known_schemes
