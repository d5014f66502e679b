"""Values exchanged with a coordination backend: brokers, topics, partition states, controller,
admin requests and the metadata change feed. All are ``attrs`` frozen classes, so a backend can
hand the same object to many readers, and all are plain data (ints, strs, tuples, enums), so a
backend can store them with ``replog.coord.codec``.

Epochs and sequence numbers are store-assigned ints. Only their order means anything: compare
them, never compute with them (a ZooKeeper zxid, an etcd revision and an in-memory counter all
qualify).
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from typing import ClassVar

import attrs

from replog.errors import ErrorCode
from replog.metadata.values import (
    TOPIC_CONFIGS_BYTES_MAX,
    TOPIC_CONFIGS_MAX,
    IsrMember,
    LeaderRecoveryState,
    SessionState,
    Subscription,
    TopicConfigs,
    int_tuple,
    isr_members,
    replica_lists,
    topic_configs,
)
from replog.topics import TopicPartition

__all__ = [
    "ALL_BROKERS",
    "CONTROLLER_TARGET",
    "NO_LEADER",
    "AddPartitions",
    "AdminPayload",
    "AdminRequest",
    "AdminRequestChangeReason",
    "AdminRequestChanged",
    "AdminRequestKind",
    "AllocateProducerIds",
    "AlterConfigs",
    "AlterPartition",
    "AlterPartitionResult",
    "BrokerChangeReason",
    "BrokerChanged",
    "BrokerConfigsChanged",
    "BrokerInfo",
    "CasResult",
    "CasStatus",
    "ChangeBatch",
    "CloseReplica",
    "ConfigChange",
    "ConfigOperation",
    "ConfigResourceType",
    "ControllerChanged",
    "ControllerInfo",
    "CreateTopic",
    "DamagedReplica",
    "DeleteTopic",
    "ElectLeader",
    "IsrMember",
    "LeaderRecoveryState",
    "MetadataChange",
    "MetadataSnapshot",
    "PartitionChanged",
    "PartitionState",
    "PRODUCER_ID_BLOCK_SIZE",
    "PreferredElection",
    "ProducerIdBlock",
    "ReassignPartition",
    "SessionEvent",
    "SessionState",
    "StartReplica",
    "TOPIC_CONFIGS_BYTES_MAX",
    "TOPIC_CONFIGS_MAX",
    "TopicConfigs",
    "topic_configs",
    "Subscription",
    "TopicAssignment",
    "TopicChangeReason",
    "TopicChanged",
]

NO_LEADER = -1
"""The leader id of a partition that has no leader (Kafka's -1)."""

CONTROLLER_TARGET = -1
"""The admin-queue target meaning "whichever broker is the active controller"."""

PRODUCER_ID_BLOCK_SIZE = 1000
"""Producer ids the controller hands a broker at a time (Kafka's ProducerIdsBlock size)."""
ALL_BROKERS = -1
"""The broker id under which dynamic broker configs hold the cluster-wide default (Kafka's
broker resource named "")."""


@attrs.frozen(kw_only=True)
class BrokerInfo:
    """A live broker registration. ``incarnation_epoch`` is store-assigned at registration and is
    greater than every earlier incarnation of the same ``broker_id`` (KIP-903: a restarted
    broker is distinguishable from its old self). ``clean_shutdown`` is what the broker said at
    registration: False when its previous run ended without a clean shutdown (it may have lost
    an unflushed log tail), so the controller removes it from every ISR and ELR (KIP-966).

    A broker may register ``fenced`` (the product's brokers do, as in KRaft): it leads nothing
    until the controller has processed the registration -- moved leadership off the broker's
    old incarnation, taken an unclean restart out of every ISR and ELR -- and admitted it
    (``Coordinator.admit_broker``), so a restarted broker never acts on leadership its old
    incarnation held. ``admitted`` records that processing (registrations that are neither
    fenced nor unclean need none and start admitted); a later controller never repeats it."""

    broker_id: int
    incarnation_epoch: int
    host: str
    port: int
    rack: str | None = None
    fenced: bool = False
    in_controlled_shutdown: bool = False
    clean_shutdown: bool = True
    admitted: bool = True

    @property
    def unclean_restart_pending(self) -> bool:
        """An unclean restart the controller has yet to handle (KIP-966)."""
        return not self.clean_shutdown and not self.admitted

    @property
    def awaiting_admission(self) -> bool:
        """The controller has yet to process this registration."""
        return not self.admitted


@attrs.frozen
class SessionEvent:
    """A session state transition of one broker incarnation, given to session listeners."""

    broker_id: int
    incarnation_epoch: int
    state: SessionState


@attrs.frozen(kw_only=True)
class TopicAssignment:
    """A topic and its replica assignment: ``replicas[p]`` is partition p's replica list, in
    preference order (``replicas[p][0]`` is the preferred leader). ``topic_id`` is
    store-assigned and differs between a topic and a later topic of the same name (KIP-516)."""

    topic: str
    topic_id: str
    replicas: tuple[tuple[int, ...], ...] = attrs.field(converter=replica_lists)
    #: per-topic settings given at creation (``min.insync.replicas``, ``retention.ms``, ...)
    configs: TopicConfigs = attrs.field(default=(), converter=topic_configs)

    @property
    def config_map(self) -> dict[str, str]:
        """``configs`` as a dict."""
        return dict(self.configs)

    @property
    def partition_count(self) -> int:
        """Number of partitions (ids 0..partition_count-1)."""
        return len(self.replicas)


@attrs.frozen(kw_only=True)
class PartitionState:
    """A partition's registration (KRaft's PartitionRegistration without directories).

    ``partition_epoch`` is the CAS token: 0 at creation and +1 on every accepted write; the
    store stamps it, so the value in a proposed state is ignored. ``leader_epoch`` changes only
    when the writer says so (the election rules live in ``replog.election``); the store only
    refuses to let it go backwards. ``replicas`` includes ``adding_replicas`` and
    ``removing_replicas`` while a reassignment runs (KIP-455).
    """

    replicas: tuple[int, ...] = attrs.field(converter=int_tuple)
    leader: int
    leader_epoch: int
    isr: tuple[int, ...] = attrs.field(converter=int_tuple)
    partition_epoch: int = 0
    elr: tuple[int, ...] = attrs.field(default=(), converter=int_tuple)
    last_known_elr: tuple[int, ...] = attrs.field(default=(), converter=int_tuple)
    leader_recovery_state: LeaderRecoveryState = LeaderRecoveryState.RECOVERED
    adding_replicas: tuple[int, ...] = attrs.field(default=(), converter=int_tuple)
    removing_replicas: tuple[int, ...] = attrs.field(default=(), converter=int_tuple)

    @classmethod
    def initial(cls, replicas: Iterable[int]) -> PartitionState:
        """The state of a new partition: every replica is in sync (all logs are empty), the
        preferred replica leads, both epochs are 0."""
        reps = int_tuple(replicas)
        return cls(replicas=reps, leader=reps[0] if reps else NO_LEADER, leader_epoch=0, isr=reps)


@attrs.frozen
class ControllerInfo:
    """The active controller: its broker id and incarnation, and the controller epoch that
    fences every controller write. Epochs start at 1 and grow by 1 per election, store-wide."""

    controller_id: int
    controller_epoch: int
    incarnation_epoch: int


# ---- admin requests (state changes queued, persistently, for the broker that acts on them) ----


class AdminRequestKind(enum.Enum):
    """What an admin request asks for."""

    CREATE_TOPIC = "create_topic"
    DELETE_TOPIC = "delete_topic"
    ADD_PARTITIONS = "add_partitions"
    REASSIGN_PARTITION = "reassign_partition"
    PREFERRED_ELECTION = "preferred_election"
    START_REPLICA = "start_replica"
    CLOSE_REPLICA = "close_replica"
    ALTER_PARTITION = "alter_partition"
    DAMAGED_REPLICA = "damaged_replica"
    ALLOCATE_PRODUCER_IDS = "allocate_producer_ids"
    ALTER_CONFIGS = "alter_configs"
    ELECT_LEADER = "elect_leader"


@attrs.frozen(kw_only=True)
class CreateTopic:
    """Create ``topic``; an empty ``replica_assignment`` lets the controller place replicas."""

    kind: ClassVar[AdminRequestKind] = AdminRequestKind.CREATE_TOPIC
    topic: str
    partition_count: int
    replication_factor: int
    replica_assignment: tuple[tuple[int, ...], ...] = attrs.field(
        default=(), converter=replica_lists
    )
    #: per-topic settings, stored with the topic (validated by the broker that took the request)
    configs: TopicConfigs = attrs.field(default=(), converter=topic_configs)


@attrs.frozen(kw_only=True)
class DeleteTopic:
    """Delete ``topic`` and every replica of it."""

    kind: ClassVar[AdminRequestKind] = AdminRequestKind.DELETE_TOPIC
    topic: str


@attrs.frozen(kw_only=True)
class AddPartitions:
    """Grow ``topic`` to ``partition_count`` partitions; empty assignment: controller places."""

    kind: ClassVar[AdminRequestKind] = AdminRequestKind.ADD_PARTITIONS
    topic: str
    partition_count: int
    replica_assignment: tuple[tuple[int, ...], ...] = attrs.field(
        default=(), converter=replica_lists
    )


@attrs.frozen(kw_only=True)
class ReassignPartition:
    """Move a partition to ``target_replicas``; ``None`` cancels a running reassignment."""

    kind: ClassVar[AdminRequestKind] = AdminRequestKind.REASSIGN_PARTITION
    topic: str
    partition: int
    target_replicas: tuple[int, ...] | None


@attrs.frozen(kw_only=True)
class PreferredElection:
    """Move leadership back to the preferred replica; empty ``partitions`` means all."""

    kind: ClassVar[AdminRequestKind] = AdminRequestKind.PREFERRED_ELECTION
    partitions: tuple[tuple[str, int], ...] = ()


@attrs.frozen(kw_only=True)
class StartReplica:
    """Seeds: a broker starts (creates or opens) its replica; ``leader_epoch`` -1 from admin."""

    kind: ClassVar[AdminRequestKind] = AdminRequestKind.START_REPLICA
    topic: str
    partition: int
    leader_epoch: int = -1


@attrs.frozen(kw_only=True)
class CloseReplica:
    """Seeds: a broker stops its replica, and deletes it when ``delete`` (topic deleted or the
    replica moved away). Acted on whatever its epoch, so a broker that was down still cleans up.
    ``topic_id`` names the topic incarnation (KIP-516; "" when unknown): a broker never deletes
    the log of a later topic of the same name because of it."""

    kind: ClassVar[AdminRequestKind] = AdminRequestKind.CLOSE_REPLICA
    topic: str
    partition: int
    leader_epoch: int = -1
    delete: bool = True
    topic_id: str = ""


@attrs.frozen(kw_only=True)
class AlterPartition:
    """A partition leader's ISR change proposal (KIP-497/903/704): the one AlterPartition
    request value. The leader's partition machine makes it (``replog.isr``), the broker queues
    it for ``CONTROLLER_TARGET``, and the controller validates it
    (``replog.election.handle_alter_partition``) and completes the admin request with an
    ``AlterPartitionResult``.

    It applies only if the stored partition epoch is still ``partition_epoch`` and the leader
    epoch still ``leader_epoch`` (a compare-and-set). ``new_isr`` lists the proposed members in
    assignment order, each with the broker epoch the leader saw (KIP-903).
    ``leader_broker_epoch`` is the sender's own incarnation (-1: unchecked)."""

    kind: ClassVar[AdminRequestKind] = AdminRequestKind.ALTER_PARTITION
    topic: str
    partition: int
    leader_id: int
    leader_epoch: int
    partition_epoch: int
    new_isr: tuple[IsrMember, ...] = attrs.field(converter=isr_members)
    leader_broker_epoch: int = -1
    leader_recovery_state: LeaderRecoveryState = LeaderRecoveryState.RECOVERED

    @property
    def topic_partition(self) -> TopicPartition:
        """The partition the proposal is for."""
        return TopicPartition(self.topic, self.partition)

    @property
    def isr_ids(self) -> tuple[int, ...]:
        """The proposed ISR as broker ids, in the order proposed."""
        return tuple(m.broker_id for m in self.new_isr)


@attrs.frozen
class AlterPartitionResult:
    """What a leader learns from a completed AlterPartition, carried by the completion
    (``AdminRequestChanged.result``): the error and the partition as the controller holds it
    afterwards (the new state on success, the current one on a rejection; ``NO_LEADER``, -1 and
    () when the partition is unknown or the request was never handled)."""

    error: ErrorCode
    leader: int = NO_LEADER
    leader_epoch: int = -1
    partition_epoch: int = -1
    isr: tuple[int, ...] = attrs.field(default=(), converter=int_tuple)


@attrs.frozen(kw_only=True)
class DamagedReplica:
    """A broker found a damaged batch in its replica of a partition (a CRC or framing error
    below what recovery checks), queued for ``CONTROLLER_TARGET``: the controller takes the
    replica out of the ISR and ELR and moves leadership to a healthy replica, as for an
    unclean restart of that one partition; the broker then truncates to ``first_offset`` and
    fetches the rest again. ``broker_epoch`` is the reporter's incarnation (a stale one's
    report is refused)."""

    kind: ClassVar[AdminRequestKind] = AdminRequestKind.DAMAGED_REPLICA
    topic: str
    partition: int
    broker_id: int
    broker_epoch: int
    first_offset: int


@attrs.frozen(kw_only=True)
class AllocateProducerIds:
    """A broker that has handed out its producer ids asks the controller for the next block
    (KIP-730's AllocateProducerIds), queued for ``CONTROLLER_TARGET``. The controller takes it
    with ``Coordinator.allocate_producer_ids`` (the store keeps the next free id, so no id is
    handed out twice, across controllers too) and completes the request; the broker then reads
    its block (``Coordinator.producer_id_block``). ``broker_epoch`` is the asking incarnation's
    (a stale one is refused)."""

    kind: ClassVar[AdminRequestKind] = AdminRequestKind.ALLOCATE_PRODUCER_IDS
    broker_id: int
    broker_epoch: int


@attrs.frozen(kw_only=True)
class ProducerIdBlock:
    """Producer ids ``first_id`` .. ``first_id + size - 1``, allocated to one broker
    incarnation: that broker hands them to idempotent producers (InitProducerId)."""

    broker_id: int
    broker_epoch: int
    first_id: int
    size: int

    @property
    def last_id(self) -> int:
        """The block's last producer id."""
        return self.first_id + self.size - 1


class ConfigResourceType(enum.IntEnum):
    """What an ``AlterConfigs`` changes (Kafka's ConfigResource.Type ids)."""

    TOPIC = 2
    BROKER = 4


class ConfigOperation(enum.IntEnum):
    """How a ``ConfigChange`` changes its key (Kafka's AlterConfigOp.OpType ids)."""

    SET = 0
    DELETE = 1
    APPEND = 2
    SUBTRACT = 3


@attrs.frozen(kw_only=True)
class ConfigChange:
    """One change to one key: SET to ``value``, DELETE (back to the default), or APPEND /
    SUBTRACT ``value``'s comma-separated items to / from a list-valued key."""

    operation: ConfigOperation = attrs.field(converter=ConfigOperation)
    key: str
    value: str | None = None


def _config_changes(values: Iterable[ConfigChange]) -> tuple[ConfigChange, ...]:
    return tuple(values)


@attrs.frozen(kw_only=True)
class AlterConfigs:
    """Change the configs of a topic (``resource_name`` the topic) or the dynamic configs of a
    broker (``resource_name`` its id in decimal, or "" for the cluster-wide default), queued for
    ``CONTROLLER_TARGET``. ``changes`` apply in order to the stored configs; with ``replace``
    (Kafka's AlterConfigs, not the incremental one) every key they do not SET goes back to its
    default. The controller checks the result (``replog.topic_config``), stores it and completes
    the request with INVALID_CONFIG naming a bad key, or UNKNOWN_TOPIC_OR_PARTITION."""

    kind: ClassVar[AdminRequestKind] = AdminRequestKind.ALTER_CONFIGS
    resource_type: ConfigResourceType = attrs.field(converter=ConfigResourceType)
    resource_name: str
    changes: tuple[ConfigChange, ...] = attrs.field(default=(), converter=_config_changes)
    replace: bool = False


@attrs.frozen(kw_only=True)
class ElectLeader:
    """Elect a leader for one partition, queued for ``CONTROLLER_TARGET``: the preferred replica
    (``unclean`` False), or any live replica when the partition has no leader (``unclean``). The
    request completes with the partition's own outcome: NONE, ELECTION_NOT_NEEDED,
    PREFERRED_LEADER_NOT_AVAILABLE, ELIGIBLE_LEADERS_NOT_AVAILABLE or
    UNKNOWN_TOPIC_OR_PARTITION (Kafka's ElectLeaders answers)."""

    kind: ClassVar[AdminRequestKind] = AdminRequestKind.ELECT_LEADER
    topic: str
    partition: int
    unclean: bool = False


AdminPayload = (
    CreateTopic
    | DeleteTopic
    | AddPartitions
    | ReassignPartition
    | PreferredElection
    | StartReplica
    | CloseReplica
    | AlterPartition
    | DamagedReplica
    | AllocateProducerIds
    | AlterConfigs
    | ElectLeader
)


@attrs.frozen(kw_only=True)
class AdminRequest:
    """A queued request. ``request_id`` is store-assigned and grows in submission order;
    ``target`` is a broker id or ``CONTROLLER_TARGET``; ``submitted_seq`` is the feed seq of the
    submission."""

    request_id: int
    target: int
    payload: AdminPayload
    submitted_seq: int

    @property
    def kind(self) -> AdminRequestKind:
        """The payload's kind."""
        return self.payload.kind


# ---- the metadata change feed ----


class BrokerChangeReason(enum.Enum):
    """Why a broker record changed."""

    REGISTERED = "registered"
    UPDATED = "updated"
    UNREGISTERED = "unregistered"
    EXPIRED = "expired"


class TopicChangeReason(enum.Enum):
    """Why a topic record changed."""

    CREATED = "created"
    PARTITIONS_ADDED = "partitions_added"
    DELETED = "deleted"
    CONFIGS_ALTERED = "configs_altered"


class AdminRequestChangeReason(enum.Enum):
    """Why an admin request record changed."""

    SUBMITTED = "submitted"
    COMPLETED = "completed"


@attrs.frozen(kw_only=True)
class BrokerChanged:
    """A broker registered, changed flags, or went away (``broker`` is None when gone)."""

    seq: int
    reason: BrokerChangeReason
    broker_id: int
    incarnation_epoch: int
    broker: BrokerInfo | None


@attrs.frozen(kw_only=True)
class TopicChanged:
    """A topic was created, grew, had its configs replaced, or was deleted (``assignment`` is
    the whole new assignment, configs included). For DELETED, ``assignment`` is the assignment
    that was removed, so a follower knows which replicas to drop."""

    seq: int
    reason: TopicChangeReason
    assignment: TopicAssignment


@attrs.frozen(kw_only=True)
class PartitionChanged:
    """A partition's full new state (never a delta, so applying it twice is harmless)."""

    seq: int
    topic: str
    partition: int
    state: PartitionState


@attrs.frozen(kw_only=True)
class ControllerChanged:
    """The controller role changed hands; ``controller`` is None while the role is vacant."""

    seq: int
    controller: ControllerInfo | None


@attrs.frozen(kw_only=True)
class AdminRequestChanged:
    """An admin request was queued, or completed with ``outcome``, a ``message`` for people
    and, for requests whose answer is more than an error code (AlterPartition), the structured
    ``result``."""

    seq: int
    reason: AdminRequestChangeReason
    request: AdminRequest
    outcome: ErrorCode = ErrorCode.NONE
    message: str = ""
    result: AlterPartitionResult | None = None


@attrs.frozen(kw_only=True)
class BrokerConfigsChanged:
    """The dynamic configs of ``broker_id`` (``ALL_BROKERS``: the cluster-wide default) are now
    ``configs`` (empty: it has none left)."""

    seq: int
    broker_id: int
    configs: TopicConfigs = attrs.field(default=(), converter=topic_configs)


MetadataChange = (
    BrokerChanged
    | TopicChanged
    | PartitionChanged
    | ControllerChanged
    | AdminRequestChanged
    | BrokerConfigsChanged
)


@attrs.frozen
class ChangeBatch:
    """Changes in feed order and the cursor to read from next. ``resync_required`` (only in
    pushed batches, with no changes) means the subscriber missed changes and must read a
    snapshot."""

    changes: tuple[MetadataChange, ...]
    next_seq: int
    resync_required: bool = False


@attrs.frozen(kw_only=True)
class MetadataSnapshot:
    """The whole metadata image at one point of the feed: every change with a seq below ``seq``
    is reflected; follow the feed from ``seq``."""

    seq: int
    brokers: Mapping[int, BrokerInfo]
    topics: Mapping[str, TopicAssignment]
    partitions: Mapping[tuple[str, int], PartitionState]
    controller: ControllerInfo | None
    controller_epoch: int
    #: dynamic broker configs by broker id (``ALL_BROKERS``: the cluster-wide default)
    broker_configs: Mapping[int, TopicConfigs] = attrs.field(factory=dict)
    #: the store's identity (Kafka's ``cluster.id``) where the backend keeps one (``raft://``);
    #: None where it does not, or before the quorum has committed one
    cluster_id: str | None = None


class CasStatus(enum.Enum):
    """Outcome of ``compare_and_set_partition_state``."""

    OK = "ok"
    VERSION_MISMATCH = "version_mismatch"
    FENCED_CONTROLLER = "fenced_controller"
    UNKNOWN_PARTITION = "unknown_partition"

    @property
    def error_code(self) -> ErrorCode:
        """The Kafka error code for this outcome."""
        return _CAS_CODES[self]


_CAS_CODES = {
    CasStatus.OK: ErrorCode.NONE,
    CasStatus.VERSION_MISMATCH: ErrorCode.INVALID_UPDATE_VERSION,
    CasStatus.FENCED_CONTROLLER: ErrorCode.STALE_CONTROLLER_EPOCH,
    CasStatus.UNKNOWN_PARTITION: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
}


@attrs.frozen(kw_only=True)
class CasResult:
    """Result of a partition-state CAS. ``state`` is the new state (OK), the current state
    (VERSION_MISMATCH, for the retry), else None. ``seq`` is the feed seq of the write (OK).
    ``active_controller_epoch`` is set for FENCED_CONTROLLER (None: no active controller)."""

    status: CasStatus
    state: PartitionState | None = None
    seq: int | None = None
    active_controller_epoch: int | None = None

    @property
    def ok(self) -> bool:
        """Whether the write was applied."""
        return self.status is CasStatus.OK
