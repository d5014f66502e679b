"""What travels to the built-in quorum (``raft://``): the commands of the metadata log, the
queries of the metadata image, and the replies.

Every write of the coordination contract is one **command**, proposed by the quorum leader as
one data record of the metadata log (``__cluster_metadata-0``) and applied, in log order, by
the pure `MetadataMachine` (``quorum/machine.py``) on every voter. A command carries everything
its effect depends on -- the arguments of the call, and whatever the caller decided that is not
a function of the state (a new topic's ID, the broker whose session the leader's clock says has
expired) -- so applying the log gives the same state everywhere. What a command *does* is
decided when it is applied, against the state at that offset: a stale partition epoch, a fenced
controller or a broker id in use are outcomes of the apply, never of the proposal. The feed seq
of a command's records is its log offset (so a broker's incarnation epoch is the offset of its
registration, like KRaft's broker epoch).

Reads are **queries**, answered from the applied image of the leader after a read barrier
(``quorum/frontend.py``); ``Heartbeat`` and ``Watch`` are queries too (heartbeats are not logged,
as in KRaft: only the expiry the leader decides from missed heartbeats is).

The encoding (JSON, ``quorum/codec.py``) names these classes, so their names and field names are
the stored format of the metadata log and its snapshots.
"""

from __future__ import annotations

import attrs

from replog.errors import ErrorCode
from replog.metadata.types import (
    AdminPayload,
    AdminRequest,
    AlterPartitionResult,
    BrokerInfo,
    ControllerInfo,
    PartitionState,
    ProducerIdBlock,
    TopicConfigs,
)

__all__ = [
    "COMMANDS",
    "QUERIES",
    "AddPartitionsWrite",
    "AdmitBroker",
    "AlterBrokerConfigsWrite",
    "AlterTopicConfigsWrite",
    "Barrier",
    "CasPartitionState",
    "ChangesSince",
    "Command",
    "CompleteAdminRequest",
    "CreateTopicWrite",
    "CurrentController",
    "DeleteTopicWrite",
    "ElectController",
    "ExpireSession",
    "FeedHead",
    "GetBroker",
    "GetBrokerConfigs",
    "GetClusterId",
    "GetProducerIdBlock",
    "GetPartitionState",
    "GetSnapshot",
    "GetTopic",
    "Heartbeat",
    "InitCluster",
    "ListTopics",
    "LiveBrokers",
    "PendingAdminRequests",
    "Query",
    "RegisterBroker",
    "ResignController",
    "SnapshotAdmin",
    "SnapshotBroker",
    "SnapshotBrokerConfigs",
    "SnapshotMeta",
    "SnapshotTopic",
    "SubmitAdminRequest",
    "AllocateProducerIdsWrite",
    "TrimHistory",
    "UnregisterBroker",
    "UpdateBroker",
    "Watch",
]

# ---------------------------------------------------------------------------- commands


@attrs.frozen(kw_only=True)
class RegisterBroker:
    """``register_broker``: the incarnation epoch is the offset this command is applied at."""

    broker_id: int
    host: str
    port: int
    rack: str | None
    session_timeout_ms: int
    clean_shutdown: bool
    fenced: bool


@attrs.frozen(kw_only=True)
class UpdateBroker:
    """``update_broker`` (None: flag unchanged)."""

    broker_id: int
    incarnation_epoch: int
    fenced: bool | None
    in_controlled_shutdown: bool | None


@attrs.frozen(kw_only=True)
class AdmitBroker:
    """``admit_broker``, fenced by ``controller_epoch``."""

    broker_id: int
    incarnation_epoch: int
    controller_epoch: int


@attrs.frozen(kw_only=True)
class UnregisterBroker:
    """``unregister_broker``: a clean end of the incarnation's session."""

    broker_id: int
    incarnation_epoch: int


@attrs.frozen(kw_only=True)
class ExpireSession:
    """The leader's clock passed the session's deadline (KRaft's fencing of a broker that
    stopped heartbeating): the incarnation's registration and controller role end. None as
    ``incarnation_epoch`` expires whatever incarnation is registered (the ``SessionFaults``
    test hook)."""

    broker_id: int
    incarnation_epoch: int | None


@attrs.frozen(kw_only=True)
class ElectController:
    """``elect_controller``: wins if the role is vacant."""

    broker_id: int
    incarnation_epoch: int


@attrs.frozen(kw_only=True)
class ResignController:
    """``resign_controller``."""

    broker_id: int
    controller_epoch: int


@attrs.frozen(kw_only=True)
class CreateTopicWrite:
    """``create_topic``; ``topic_id`` was drawn by the caller (a command is deterministic)."""

    topic: str
    topic_id: str
    replica_assignment: tuple[tuple[int, ...], ...]
    controller_epoch: int
    initial_states: tuple[PartitionState, ...] | None
    configs: TopicConfigs


@attrs.frozen(kw_only=True)
class DeleteTopicWrite:
    """``delete_topic``."""

    topic: str
    controller_epoch: int


@attrs.frozen(kw_only=True)
class AddPartitionsWrite:
    """``add_partitions``."""

    topic: str
    replica_assignment: tuple[tuple[int, ...], ...]
    controller_epoch: int
    initial_states: tuple[PartitionState, ...] | None


@attrs.frozen(kw_only=True)
class CasPartitionState:
    """``compare_and_set_partition_state``."""

    topic: str
    partition: int
    expected_partition_epoch: int
    new_state: PartitionState
    controller_epoch: int


@attrs.frozen(kw_only=True)
class TrimHistory:
    """``trim_history``: every voter drops the same feed records."""

    before_seq: int


@attrs.frozen(kw_only=True)
class AllocateProducerIdsWrite:
    """``allocate_producer_ids`` (fenced by ``controller_epoch``): the next ``count`` ids."""

    broker_id: int
    broker_epoch: int
    count: int
    controller_epoch: int


@attrs.frozen(kw_only=True)
class SubmitAdminRequest:
    """``submit_admin_request``; the request id is the offset this command is applied at."""

    target: int
    payload: AdminPayload


@attrs.frozen(kw_only=True)
class CompleteAdminRequest:
    """``complete_admin_request`` (fenced when ``controller_epoch`` is not None)."""

    request_id: int
    outcome: ErrorCode
    message: str
    controller_epoch: int | None
    result: AlterPartitionResult | None = None


@attrs.frozen(kw_only=True)
class AlterTopicConfigsWrite:
    """``alter_topic_configs``: the topic's whole new configs (already normalised)."""

    topic: str
    configs: TopicConfigs
    controller_epoch: int


@attrs.frozen(kw_only=True)
class AlterBrokerConfigsWrite:
    """``alter_broker_configs``: the broker's (``ALL_BROKERS``: the cluster-wide default) whole
    new dynamic configs (already normalised; empty removes them)."""

    broker_id: int
    configs: TopicConfigs
    controller_epoch: int


@attrs.frozen
class Barrier:
    """A record with no effect: the read barrier a leader commits when no write would
    (``quorum/frontend.py``)."""


@attrs.frozen(kw_only=True)
class InitCluster:
    """Names the store (Kafka's ``cluster.id``): a leader whose image has no cluster id
    proposes one it drew at random before any write of its epoch; the first such record
    applied decides it for good, later ones change nothing (``quorum/frontend.py``). Never
    sent by a client."""

    cluster_id: str


Command = (
    RegisterBroker
    | UpdateBroker
    | AdmitBroker
    | UnregisterBroker
    | ExpireSession
    | ElectController
    | ResignController
    | CreateTopicWrite
    | DeleteTopicWrite
    | AddPartitionsWrite
    | CasPartitionState
    | TrimHistory
    | AllocateProducerIdsWrite
    | SubmitAdminRequest
    | CompleteAdminRequest
    | AlterTopicConfigsWrite
    | AlterBrokerConfigsWrite
    | Barrier
    | InitCluster
)

COMMANDS: tuple[type[Command], ...] = (
    RegisterBroker,
    UpdateBroker,
    AdmitBroker,
    UnregisterBroker,
    ExpireSession,
    ElectController,
    ResignController,
    CreateTopicWrite,
    DeleteTopicWrite,
    AddPartitionsWrite,
    CasPartitionState,
    TrimHistory,
    AllocateProducerIdsWrite,
    SubmitAdminRequest,
    CompleteAdminRequest,
    AlterTopicConfigsWrite,
    AlterBrokerConfigsWrite,
    Barrier,
    InitCluster,
)

# ---------------------------------------------------------------------------- queries


@attrs.frozen
class GetBroker:
    """``get_broker``."""

    broker_id: int


@attrs.frozen
class LiveBrokers:
    """``live_brokers``."""


@attrs.frozen
class CurrentController:
    """``current_controller``."""


@attrs.frozen
class ListTopics:
    """``list_topics``."""


@attrs.frozen
class GetTopic:
    """``get_topic``."""

    topic: str


@attrs.frozen
class GetPartitionState:
    """``get_partition_state``."""

    topic: str
    partition: int


@attrs.frozen
class ChangesSince:
    """``changes_since``."""

    seq: int
    max_changes: int


@attrs.frozen
class GetSnapshot:
    """``snapshot``."""


@attrs.frozen
class PendingAdminRequests:
    """``pending_admin_requests``."""

    target: int


@attrs.frozen
class FeedHead:
    """The seq the next feed record will have at least (``subscribe`` from now)."""


@attrs.frozen
class Heartbeat:
    """``heartbeat``: checked against the image; the leader then renews the deadline."""

    broker_id: int
    incarnation_epoch: int


@attrs.frozen
class Watch:
    """A long poll of the feed (``subscribe``): answered with ``changes_since(seq)`` once
    there is a record at or after ``seq`` (or the history from ``seq`` is gone), or empty
    after ``wait_ms``. No read barrier: it only ever returns committed records."""

    seq: int
    max_changes: int
    wait_ms: int


@attrs.frozen
class GetProducerIdBlock:
    """``producer_id_block``."""

    broker_id: int


@attrs.frozen
class GetBrokerConfigs:
    """``broker_configs``."""


@attrs.frozen
class GetClusterId:
    """``cluster_id``: the store's id (`InitCluster`), None before one is applied."""


Query = (
    GetBroker
    | LiveBrokers
    | CurrentController
    | ListTopics
    | GetTopic
    | GetPartitionState
    | ChangesSince
    | GetSnapshot
    | PendingAdminRequests
    | FeedHead
    | Heartbeat
    | Watch
    | GetProducerIdBlock
    | GetBrokerConfigs
    | GetClusterId
)

QUERIES: tuple[type[Query], ...] = (
    GetBroker,
    LiveBrokers,
    CurrentController,
    ListTopics,
    GetTopic,
    GetPartitionState,
    ChangesSince,
    GetSnapshot,
    PendingAdminRequests,
    FeedHead,
    Heartbeat,
    Watch,
    GetProducerIdBlock,
    GetBrokerConfigs,
    GetClusterId,
)

# ---------------------------------------------------------------------------- snapshot records


@attrs.frozen(kw_only=True)
class SnapshotMeta:
    """The first record of a state-machine snapshot: the controller role and the feed head
    (the seq the next feed record gets at least; history below it is not in the snapshot)."""

    controller: ControllerInfo | None
    controller_epoch: int
    feed_next_seq: int
    #: each broker's latest producer-id block (the next free id is past all of them)
    producer_id_blocks: tuple[ProducerIdBlock, ...] = ()
    #: the store's id (`InitCluster`), None until one is committed
    cluster_id: str | None = None


@attrs.frozen(kw_only=True)
class SnapshotBroker:
    """A live registration and its session timeout."""

    broker: BrokerInfo
    session_timeout_ms: int


@attrs.frozen(kw_only=True)
class SnapshotBrokerConfigs:
    """The dynamic configs of one broker id (``ALL_BROKERS``: the cluster-wide default)."""

    broker_id: int
    configs: TopicConfigs


@attrs.frozen(kw_only=True)
class SnapshotTopic:
    """A topic with its partitions' states (partition p is ``states[p]``)."""

    topic: str
    topic_id: str
    configs: TopicConfigs
    states: tuple[PartitionState, ...]


@attrs.frozen(kw_only=True)
class SnapshotAdmin:
    """A queued admin request."""

    request: AdminRequest
