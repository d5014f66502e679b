"""The coordination contract: what every metadata backend (memory, ZooKeeper, etcd, a third
party's) does, with the same semantics. ``replog.coord.testing.CoordinatorContract`` checks it.

Theory of operation
-------------------
A ``Coordinator`` is a synchronous, thread-safe handle on one metadata store. The broker runtime
calls it from a worker thread; every call is short and takes ``timeout_ms`` (None: the backend's
default request timeout), and raises ``replog.errors.RequestTimeoutError`` or
``CoordinatorUnavailableError`` (both retriable) rather than block longer.

One handle may hold the sessions of several brokers (an embedded cluster in one process); a
backend opens whatever it needs per broker (a ZooKeeper client and its session, an etcd lease, a
heartbeat record). Liveness is per broker incarnation: ``register_broker`` starts a session and
returns a ``BrokerInfo`` whose ``incarnation_epoch`` is greater than that of every earlier
registration of the same id. The session is CONNECTED, may become SUSPENDED (store unreachable,
session possibly alive) and back, and ends LOST (expired or unregistered). A LOST session's
registration and controller role are removed atomically with its expiry, and every later call
naming that incarnation raises ``SessionExpiredError``.

Metadata writes come from the active controller. ``elect_controller`` makes a live broker the
controller if the role is vacant, with a controller epoch one above the last; the role ends
with the broker's session or ``resign_controller``. Every controller write carries the
controller epoch and is refused unless it is the *active* controller's epoch: a zombie whose
session expired is fenced even before anyone else is elected. Partition states change only by
compare-and-set on the partition epoch.

Every accepted write appends records to an ordered change feed. ``seq`` never decreases;
records of one atomic write share a seq and are never split across batches. Records carry full
new values, so applying one twice is harmless. Followers read with ``changes_since(cursor)``
or are pushed batches by ``subscribe``; when history they need is gone they get
``MustResyncError`` (pull) or a ``resync_required`` batch (push), read ``snapshot()`` and follow
on from ``snapshot.seq``.

Admin requests are queued per target (a broker id or the controller role) and stay queued,
whatever happens to the target's sessions, until someone completes them: a queue is persistent
state of the store, not of a session, so what was addressed to a broker while it was away is
still there when it registers again.
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Mapping, Sequence
from types import TracebackType
from typing import Protocol, runtime_checkable

import attrs

from replog.coord.errors import InvalidPartitionStateError, InvalidReplicaAssignmentError
from replog.errors import ErrorCode
from replog.metadata.types import (
    NO_LEADER,
    PRODUCER_ID_BLOCK_SIZE,
    AdminPayload,
    AdminRequest,
    AlterPartitionResult,
    BrokerInfo,
    CasResult,
    ChangeBatch,
    ControllerInfo,
    LeaderRecoveryState,
    MetadataSnapshot,
    PartitionState,
    ProducerIdBlock,
    SessionEvent,
    SessionState,
    Subscription,
    TopicAssignment,
    TopicConfigs,
)

__all__ = [
    "ADMIN_QUEUE_LIMIT",
    "DEFAULT_TIMEOUT_MS",
    "MAX_CHANGES_PER_BATCH",
    "Coordinator",
    "SessionFaults",
    "new_partition_states",
    "same_state_ignoring_epoch",
    "validate_partition_state",
    "validate_replica_assignment",
]

DEFAULT_TIMEOUT_MS = 10_000
"""Default bound on one coordinator call."""

MAX_CHANGES_PER_BATCH = 1_000
"""Default ``max_changes`` of ``changes_since``."""

ADMIN_QUEUE_LIMIT = 10_000
"""Default bound on the pending admin requests of one target."""


class Coordinator(abc.ABC):
    """A metadata store handle. See the module docstring for the model; each method's
    docstring is the contract a backend meets. All methods are thread-safe."""

    # ---- lifecycle ----

    @abc.abstractmethod
    def close(self) -> None:
        """Release the handle: end the sessions it opened (as ``unregister_broker`` would, or
        by letting them expire), stop listeners. Idempotent. Later calls raise
        ``CoordinatorClosedError``."""

    def __enter__(self) -> Coordinator:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # ---- brokers and sessions ----

    @abc.abstractmethod
    def register_broker(
        self,
        broker_id: int,
        host: str,
        port: int,
        *,
        rack: str | None = None,
        session_timeout_ms: int,
        timeout_ms: int | None = None,
        clean_shutdown: bool = True,
        fenced: bool = False,
    ) -> BrokerInfo:
        """Start a session for ``broker_id`` and publish its registration (unfenced, not in
        controlled shutdown) with a fresh ``incarnation_epoch``, greater than any earlier one of
        this id. The session is CONNECTED. Feed: BrokerChanged(REGISTERED).
        ``clean_shutdown`` is stored as given in ``BrokerInfo.clean_shutdown`` (visible in
        ``get_broker``, ``live_brokers``, ``snapshot`` and the feed record) and never changes for
        the incarnation: False says the broker's previous run ended without a clean shutdown
        (some log dir had no clean-shutdown marker at start), so it may have lost an unflushed
        tail, and the controller removes it from every ISR and ELR (KIP-966). True (the
        default) for a clean shutdown, a brand-new broker, or a re-registration of a running
        process whose session was lost. The store only records it; it decides nothing.
        ``fenced`` registers the incarnation fenced until the controller admits it
        (``admit_broker``); the registration is ``admitted`` from the start when it is neither
        fenced nor unclean.
        Raises ``BrokerIdInUseError`` while another incarnation's session is not LOST (a
        restarted broker retries until the old one expires), ``ValueError`` for a negative id or
        a non-positive ``session_timeout_ms``."""

    @abc.abstractmethod
    def heartbeat(
        self, broker_id: int, incarnation_epoch: int, *, timeout_ms: int | None = None
    ) -> SessionState:
        """Keep the incarnation's session alive: the session stays live while heartbeats come
        less than ``session_timeout_ms`` apart (backends whose client pings by itself may only
        check). Returns the session state. Raises ``SessionExpiredError`` if the incarnation is
        not current or its session is LOST; ``CoordinatorUnavailableError`` while SUSPENDED
        (the heartbeat did not reach the store)."""

    @abc.abstractmethod
    def update_broker(
        self,
        broker_id: int,
        incarnation_epoch: int,
        *,
        fenced: bool | None = None,
        in_controlled_shutdown: bool | None = None,
        timeout_ms: int | None = None,
    ) -> BrokerInfo:
        """Set the registration's flags (None: unchanged) and return it. Feed:
        BrokerChanged(UPDATED), only if a flag changed. Raises ``SessionExpiredError`` if the
        incarnation is not current; ``CoordinatorUnavailableError`` while SUSPENDED."""

    @abc.abstractmethod
    def admit_broker(
        self,
        broker_id: int,
        incarnation_epoch: int,
        *,
        controller_epoch: int,
        timeout_ms: int | None = None,
    ) -> bool:
        """The controller has processed this incarnation's registration (moved leadership off
        its old incarnation, taken an unclean restart out of every ISR and ELR, KIP-966): it
        becomes ``admitted`` and unfenced, and no later controller repeats the processing.
        Fenced like every controller write (``FencedControllerError`` unless
        ``controller_epoch`` is the active one, checked atomically with the write). Returns
        False, writing nothing, when that incarnation is not the registered one (expired,
        replaced); True otherwise (also when already admitted). Feed: BrokerChanged(UPDATED),
        only if it changed. Works whatever handle registered the broker."""

    @abc.abstractmethod
    def unregister_broker(
        self, broker_id: int, incarnation_epoch: int, *, timeout_ms: int | None = None
    ) -> bool:
        """End the incarnation's session cleanly (controlled shutdown): the registration and any
        controller role go, the session becomes LOST. Returns False (and does nothing) if the
        incarnation is not current. Feed: BrokerChanged(UNREGISTERED), plus
        ControllerChanged(None) if it was the controller, in one atomic write. Raises
        ``CoordinatorUnavailableError`` while SUSPENDED (the session then simply expires)."""

    @abc.abstractmethod
    def get_broker(self, broker_id: int, *, timeout_ms: int | None = None) -> BrokerInfo | None:
        """The broker's current registration, or None if it has none."""

    @abc.abstractmethod
    def live_brokers(self, *, timeout_ms: int | None = None) -> dict[int, BrokerInfo]:
        """Every registration whose session is not LOST (SUSPENDED ones included: the store
        cannot tell them from live ones yet), by broker id. Fenced brokers are included; filter
        on ``BrokerInfo.fenced``."""

    @abc.abstractmethod
    def session_state(self, broker_id: int) -> SessionState:
        """This handle's view of the broker's current session, without blocking: LOST if the
        handle holds no session for it."""

    @abc.abstractmethod
    def add_session_listener(
        self, broker_id: int, callback: Callable[[SessionEvent], None]
    ) -> Subscription:
        """Call ``callback`` on every session transition of ``broker_id``'s incarnations held by
        this handle (CONNECTED on registration, SUSPENDED, CONNECTED again, LOST), in order,
        never concurrently for one listener. Callbacks run on a backend thread or the calling
        thread, after the store change is visible; they must be short and may call the
        coordinator."""

    # ---- controller ----

    @abc.abstractmethod
    def elect_controller(
        self, broker_id: int, incarnation_epoch: int, *, timeout_ms: int | None = None
    ) -> ControllerInfo:
        """Try once to make this broker incarnation the controller. If the role is vacant it
        wins with epoch = last controller epoch + 1 (the first is 1). Returns the active
        controller after the attempt: the caller won iff ``controller_id == broker_id`` and
        ``incarnation_epoch`` matches. Feed: ControllerChanged, if it won. Raises
        ``SessionExpiredError`` if the incarnation is not current,
        ``CoordinatorUnavailableError`` while its session is SUSPENDED."""

    @abc.abstractmethod
    def resign_controller(
        self, broker_id: int, controller_epoch: int, *, timeout_ms: int | None = None
    ) -> bool:
        """Give up the role if ``broker_id`` holds it at ``controller_epoch``; returns whether
        it did. The epoch is not reused. Feed: ControllerChanged(None). Raises
        ``CoordinatorUnavailableError`` while the controller's session is SUSPENDED."""

    @abc.abstractmethod
    def current_controller(self, *, timeout_ms: int | None = None) -> ControllerInfo | None:
        """The active controller, or None while the role is vacant."""

    # ---- topics and partitions ----

    @abc.abstractmethod
    def create_topic(
        self,
        topic: str,
        replica_assignment: Sequence[Sequence[int]],
        *,
        controller_epoch: int,
        initial_states: Sequence[PartitionState] | None = None,
        configs: Mapping[str, str] | None = None,
        timeout_ms: int | None = None,
    ) -> TopicAssignment:
        """Atomically create ``topic`` with partitions 0..n-1 (``replica_assignment[p]`` is p's
        replicas) and their states: ``initial_states[p]`` (its replicas must equal the
        assignment's) or ``PartitionState.initial``. Partition epochs start at 0; a fresh
        ``topic_id`` is assigned. ``configs`` (per-topic settings, normalised and bounded by
        ``types.topic_configs``; ``ValueError`` past the bounds) are stored with the topic and
        come back in every ``TopicAssignment`` of it (``get_topic``, ``snapshot``, the feed,
        ``add_partitions``). Either everything is written or nothing. Feed:
        TopicChanged(CREATED) and a PartitionChanged per partition, one atomic write.
        Raises ``InvalidTopicError`` (name, see ``replog.topics``), ``TopicExistsError``
        (exists or collides), ``InvalidReplicaAssignmentError``, ``InvalidPartitionStateError``,
        ``FencedControllerError`` (checked first)."""

    @abc.abstractmethod
    def delete_topic(
        self, topic: str, *, controller_epoch: int, timeout_ms: int | None = None
    ) -> TopicAssignment:
        """Atomically remove the topic and all its partition states; returns what was removed.
        Feed: TopicChanged(DELETED). Raises ``UnknownTopicError``, ``FencedControllerError``."""

    @abc.abstractmethod
    def add_partitions(
        self,
        topic: str,
        new_replica_assignment: Sequence[Sequence[int]],
        *,
        controller_epoch: int,
        initial_states: Sequence[PartitionState] | None = None,
        timeout_ms: int | None = None,
    ) -> TopicAssignment:
        """Atomically append partitions n..n+k-1 (n = current count) with the given replicas
        and states (as ``create_topic``); returns the whole new assignment. Feed:
        TopicChanged(PARTITIONS_ADDED) and a PartitionChanged per new partition. Raises
        ``UnknownTopicError``, ``InvalidReplicaAssignmentError`` (empty, malformed),
        ``InvalidPartitionStateError``, ``FencedControllerError``."""

    @abc.abstractmethod
    def list_topics(self, *, timeout_ms: int | None = None) -> list[str]:
        """Names of all topics, sorted."""

    @abc.abstractmethod
    def get_topic(self, topic: str, *, timeout_ms: int | None = None) -> TopicAssignment | None:
        """The topic's assignment, or None. ``replicas[p]`` is partition p's *current*
        ``PartitionState.replicas`` (reassignment changes them through CAS)."""

    @abc.abstractmethod
    def get_partition_state(
        self, topic: str, partition: int, *, timeout_ms: int | None = None
    ) -> PartitionState | None:
        """The partition's state (with its current ``partition_epoch``), or None."""

    @abc.abstractmethod
    def compare_and_set_partition_state(
        self,
        topic: str,
        partition: int,
        expected_partition_epoch: int,
        new_state: PartitionState,
        *,
        controller_epoch: int,
        timeout_ms: int | None = None,
    ) -> CasResult:
        """Replace the partition's state with ``new_state`` (stamped with partition epoch
        ``expected + 1``) iff ``controller_epoch`` is the active controller's and the current
        partition epoch equals ``expected_partition_epoch``. Checked in this order:
        ``new_state`` well-formed (``validate_partition_state``, else
        ``InvalidPartitionStateError``, raised), FENCED_CONTROLLER, UNKNOWN_PARTITION,
        VERSION_MISMATCH (returns the current state), the transition allowed against the
        current state (leader epoch never decreases, and grows when the leader changes; else
        ``InvalidPartitionStateError``), then OK with the new state and the write's feed seq.
        Feed: PartitionChanged. Two writers with the same expected epoch: exactly one wins.
        After a ``CoordinatorUnavailableError`` the outcome is unknown; a retry that gets
        VERSION_MISMATCH with a state ``same_state_ignoring_epoch`` as the proposal means the
        first attempt was applied."""

    # ---- dynamic configs ----
    #
    # Added after the first backends: the defaults below raise NotImplementedError, so a backend
    # written before them keeps working for everything else (and fails the contract suite's
    # config tests until it implements them). The three methods are the whole addition; the
    # controller is their only writer.

    def alter_topic_configs(
        self,
        topic: str,
        configs: Mapping[str, str],
        *,
        controller_epoch: int,
        timeout_ms: int | None = None,
    ) -> TopicAssignment:
        """Replace ``topic``'s configs with ``configs`` (all of them: a key left out is gone;
        normalised and bounded by ``types.topic_configs``, ``ValueError`` past the bounds) and
        return the whole new assignment. The store does not interpret them (the controller
        checked them). Partition states and the topic id are untouched. Feed:
        TopicChanged(CONFIGS_ALTERED) with the new assignment, written even when the configs
        do not change. Raises ``FencedControllerError`` (checked first),
        ``UnknownTopicError``."""
        raise NotImplementedError(f"{type(self).__name__} does not store topic config changes")

    def alter_broker_configs(
        self,
        broker_id: int,
        configs: Mapping[str, str],
        *,
        controller_epoch: int,
        timeout_ms: int | None = None,
    ) -> None:
        """Replace the dynamic configs of ``broker_id`` (``types.ALL_BROKERS``: the
        cluster-wide default) with ``configs`` (bounded as topic configs; empty removes the
        entry), whether or not that broker is registered; they outlive its sessions. They come
        back from ``broker_configs`` and ``snapshot().broker_configs``. Feed:
        BrokerConfigsChanged with the new configs. Raises ``FencedControllerError`` (checked
        first), ``ValueError`` for a broker id below ``ALL_BROKERS`` or configs past the
        bounds."""
        raise NotImplementedError(f"{type(self).__name__} does not store broker configs")

    def broker_configs(self, *, timeout_ms: int | None = None) -> dict[int, TopicConfigs]:
        """Every broker id (``ALL_BROKERS`` included) that has dynamic configs, with them,
        sorted by id."""
        raise NotImplementedError(f"{type(self).__name__} does not store broker configs")

    # ---- the change feed ----

    @abc.abstractmethod
    def changes_since(
        self,
        seq: int,
        *,
        max_changes: int = MAX_CHANGES_PER_BATCH,
        timeout_ms: int | None = None,
    ) -> ChangeBatch:
        """Feed records with seq >= ``seq`` in order, at most about ``max_changes`` (a group
        sharing one seq is never split, so a batch can exceed it), and ``next_seq`` to pass
        next (past the last returned record; ``seq`` itself when nothing is newer). ``seq`` 0
        is the beginning of time. Raises ``MustResyncError`` if records at or after ``seq``
        were trimmed."""

    @abc.abstractmethod
    def snapshot(self, *, timeout_ms: int | None = None) -> MetadataSnapshot:
        """A consistent image of brokers, topics, partition states, controller and dynamic
        broker configs, and the cursor ``seq`` to follow the feed from. Records with
        seq >= ``snapshot.seq`` may repeat what the image shows; they are idempotent."""

    def cluster_id(self, *, timeout_ms: int | None = None) -> str | None:
        """The store's identity (``MetadataSnapshot.cluster_id``) without reading the image:
        feed seqs are only meaningful within one store, so a reader holding a cursor from an
        earlier run checks it first (a recreated store restarts its seqs). None on a backend
        that keeps no identity (the default), or before the store has one."""
        return None

    @abc.abstractmethod
    def subscribe(
        self, callback: Callable[[ChangeBatch], None], *, from_seq: int | None = None
    ) -> Subscription:
        """Push feed batches to ``callback``: from ``from_seq`` (backlog first), or from now if
        None. Batches come in seq order, without duplicates or gaps, never concurrently for one
        subscription, after the write is visible. If the backend cannot guarantee continuity
        (history trimmed, reconnect), it pushes ``ChangeBatch((), next_seq, True)``: the
        subscriber reads ``snapshot()`` and ignores records below ``snapshot.seq``."""

    @abc.abstractmethod
    def trim_history(self, before_seq: int, *, timeout_ms: int | None = None) -> int:
        """Discard feed records with seq < ``before_seq`` (the store may also trim on its own
        retention policy) and return the oldest seq still readable without resync. Never
        affects current metadata or admin queues."""

    # ---- admin request queue ----

    @abc.abstractmethod
    def submit_admin_request(
        self, target: int, payload: AdminPayload, *, timeout_ms: int | None = None
    ) -> AdminRequest:
        """Queue ``payload`` for ``target`` (a broker id, or ``CONTROLLER_TARGET``), durably and
        whether or not the target is live. Feed: AdminRequestChanged(SUBMITTED). When the
        queue is at its limit, superseded requests are dropped first (START_REPLICA entries,
        and all but the newest CLOSE_REPLICA per partition: a later request makes them
        pointless); if still full, raises ``AdminQueueFullError``."""

    @abc.abstractmethod
    def pending_admin_requests(
        self, target: int, *, timeout_ms: int | None = None
    ) -> list[AdminRequest]:
        """The target's queued requests, oldest first."""

    @abc.abstractmethod
    def complete_admin_request(
        self,
        request_id: int,
        *,
        outcome: ErrorCode = ErrorCode.NONE,
        message: str = "",
        result: AlterPartitionResult | None = None,
        controller_epoch: int | None = None,
        timeout_ms: int | None = None,
    ) -> bool:
        """Remove a request from its queue, recording ``outcome``; returns False if it is not
        queued (already completed: completion is idempotent). The caller makes the request's
        effect durable *before* completing it. Feed: AdminRequestChanged(COMPLETED), carrying
        ``outcome``, ``message`` and the structured ``result`` as given (the controller's
        answer to an AlterPartition; None for requests answered by the outcome alone).

        The controller passes ``controller_epoch``: the completion is then fenced exactly like
        the other controller writes, checked first and atomically with the removal. If it is
        not the active controller's epoch, ``FencedControllerError`` is raised (even when the
        request is not queued) and nothing is written: the request stays queued and no feed
        record is appended. Without it (None, for callers that are not the controller, such as
        a broker completing its own requests) the completion is not fenced."""

    # ---- producer ids ----

    @abc.abstractmethod
    def allocate_producer_ids(
        self,
        broker_id: int,
        broker_epoch: int,
        *,
        count: int = PRODUCER_ID_BLOCK_SIZE,
        controller_epoch: int,
        timeout_ms: int | None = None,
    ) -> ProducerIdBlock:
        """The controller hands the next ``count`` producer ids to broker ``broker_id``
        (incarnation ``broker_epoch``; not checked here -- the controller checks it): the
        store keeps the next free id durably, so blocks never overlap, whoever the controller
        is and across restarts of the store's clients. The block becomes the broker's latest
        (``producer_id_block``). Ids start at 0. Fenced like every controller write: if
        ``controller_epoch`` is not the active controller's, ``FencedControllerError`` and
        nothing is allocated. No feed record. ``ValueError`` for ``count`` < 1."""

    @abc.abstractmethod
    def producer_id_block(
        self, broker_id: int, *, timeout_ms: int | None = None
    ) -> ProducerIdBlock | None:
        """The block last allocated to ``broker_id`` (None: none yet)."""


@runtime_checkable
class SessionFaults(Protocol):
    """Fault hooks a backend offers to tests (memory: direct; ZooKeeper: twin-session close;
    etcd: lease revoke). The contract suite runs the session tests only against backends that
    implement it."""

    def expire_session(self, broker_id: int) -> None:
        """Expire the broker's session now, as the store would after its timeout."""

    def suspend_session(self, broker_id: int) -> None:
        """Cut the broker's session off from the store (SUSPENDED); its timeout keeps running."""

    def resume_session(self, broker_id: int) -> None:
        """Reconnect a SUSPENDED session: CONNECTED if it has not expired meanwhile, else LOST."""


def validate_replica_assignment(
    replica_assignment: Sequence[Sequence[int]],
) -> tuple[tuple[int, ...], ...]:
    """Check an assignment (at least one partition; each list non-empty, no duplicates, no
    negative broker id) and return it as tuples; else ``InvalidReplicaAssignmentError``."""
    if isinstance(replica_assignment, (str, bytes)) or len(replica_assignment) == 0:
        raise InvalidReplicaAssignmentError("a replica assignment needs at least one partition")
    result = []
    for partition, replicas in enumerate(replica_assignment):
        reps = tuple(int(r) for r in replicas)
        if not reps:
            raise InvalidReplicaAssignmentError(f"partition {partition} has no replicas")
        if len(set(reps)) != len(reps):
            raise InvalidReplicaAssignmentError(f"partition {partition} repeats a replica: {reps}")
        if min(reps) < 0:
            raise InvalidReplicaAssignmentError(f"partition {partition} has a negative id: {reps}")
        result.append(reps)
    return tuple(result)


def _check(condition: bool, message: str) -> None:
    if not condition:
        raise InvalidPartitionStateError(message)


def validate_partition_state(state: PartitionState, current: PartitionState | None = None) -> None:
    """Raise ``InvalidPartitionStateError`` unless ``state`` is well-formed and, given the
    ``current`` state, an allowed successor. Every backend calls this, so all refuse the same.

    Well-formed: replicas non-empty and distinct; ISR, ELR, last known ELR, adding and removing
    within the replicas; ELR disjoint from the ISR; adding disjoint from removing; the leader
    (unless NO_LEADER) a replica in the ISR; RECOVERING only with an ISR of at most one;
    epochs non-negative. Successor: the leader epoch does not decrease, and increases when the
    leader changes.
    """
    replicas = set(state.replicas)
    _check(len(state.replicas) > 0, "a partition needs at least one replica")
    _check(len(replicas) == len(state.replicas), f"replicas repeat: {state.replicas}")
    _check(min(state.replicas) >= 0, f"negative replica id: {state.replicas}")
    for name in ("isr", "elr", "last_known_elr", "adding_replicas", "removing_replicas"):
        members: tuple[int, ...] = getattr(state, name)
        _check(len(set(members)) == len(members), f"{name} repeats: {members}")
        _check(set(members) <= replicas, f"{name} {members} not within replicas {state.replicas}")
    _check(not set(state.elr) & set(state.isr), f"ELR {state.elr} overlaps ISR {state.isr}")
    _check(
        not set(state.adding_replicas) & set(state.removing_replicas),
        "a replica cannot be both adding and removing",
    )
    if state.leader != NO_LEADER:
        _check(state.leader in state.isr, f"leader {state.leader} not in ISR {state.isr}")
    if state.leader_recovery_state is LeaderRecoveryState.RECOVERING:
        _check(len(state.isr) <= 1, f"a RECOVERING partition has ISR {state.isr}, more than one")
    _check(state.leader_epoch >= 0, f"negative leader epoch {state.leader_epoch}")
    _check(state.partition_epoch >= 0, f"negative partition epoch {state.partition_epoch}")
    if current is None:
        return
    _check(
        state.leader_epoch >= current.leader_epoch,
        f"leader epoch {state.leader_epoch} is below the current {current.leader_epoch}",
    )
    if state.leader != current.leader:
        _check(
            state.leader_epoch > current.leader_epoch,
            f"leader changes {current.leader} -> {state.leader} without a leader epoch bump",
        )


def new_partition_states(
    assignment: Sequence[Sequence[int]], initial_states: Sequence[PartitionState] | None
) -> list[PartitionState]:
    """The states to store for new partitions (``create_topic``, ``add_partitions``): the given
    ones, checked against the assignment and with partition epoch 0, or
    ``PartitionState.initial`` for each."""
    if initial_states is None:
        return [PartitionState.initial(r) for r in assignment]
    if len(initial_states) != len(assignment):
        raise InvalidReplicaAssignmentError(
            f"{len(initial_states)} initial states for {len(assignment)} partitions"
        )
    states = []
    for p, (replicas, state) in enumerate(zip(assignment, initial_states, strict=True)):
        if state.replicas != tuple(replicas):
            raise InvalidPartitionStateError(
                f"partition {p}: state replicas {state.replicas} != assignment {tuple(replicas)}"
            )
        validate_partition_state(state)
        states.append(attrs.evolve(state, partition_epoch=0))
    return states


def same_state_ignoring_epoch(a: PartitionState, b: PartitionState) -> bool:
    """Whether two states are equal apart from ``partition_epoch`` (for retries after an
    unknown outcome)."""
    return attrs.evolve(b, partition_epoch=a.partition_epoch) == a
