"""`RaftCoordinator`: the ``raft://host:port,host:port,...`` backend, a client of replog's own
metadata quorum (``replog controller`` processes, or ``LocalQuorum`` in-process).

Theory of operation. A broker's life cycle travels as Kafka's own RPCs to the active
controller (the quorum leader) through a `BrokerRpcChannel` (``quorum/broker_channel.py``):
``register_broker`` is a BrokerRegistration (its ``broker_epoch`` is the incarnation epoch) and
every heartbeat a BrokerHeartbeat. Every other contract call becomes one request to the quorum
leader through a `QuorumChannel`: a write is a command of the metadata log, acknowledged once
committed and applied; a read is answered by the leader after a read barrier
(``quorum/frontend.py``). The contract's rules are applied by the voters' `MetadataMachine`; this
handle checks the arguments first (so bad input raises before any round trip, as with the other
backends) and keeps what is per handle:

- **Sessions** it registered (a `SessionKeeper`, ``quorum/sessions.py``): a keep-alive
  thread heartbeats each one every third of its session timeout (capped at 2 s, as KRaft
  brokers heartbeat their controller), so a session lives while its handle does -- as a
  ZooKeeper client pings and an etcd client renews its lease. A heartbeat that cannot reach a
  leader makes the session SUSPENDED, the next that does CONNECTED again; one answered
  ``SessionExpiredError`` (the leader's clock passed the deadline and the expiry committed)
  makes it LOST. ``close()`` unregisters them.
- **Feed subscriptions** (``quorum/subscription.py``): a thread each, long-polling the leader
  (``Watch``) from its cursor, so a subscription survives leader changes without a gap; history
  that is gone is pushed as a ``resync_required`` batch, after which it follows on from the
  feed head.
- **SessionFaults** (the contract suite's hooks, carried out by the `SessionKeeper`):
  ``expire_session`` commits the expiry the leader would; ``suspend_session`` cuts the broker
  off in this handle (its calls raise ``CoordinatorUnavailableError``, heartbeats stop, the
  leader's deadline runs on), and ``resume_session`` heartbeats again: CONNECTED if it arrived
  in time, else LOST.
"""

from __future__ import annotations

import contextlib
import threading
import urllib.parse
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from replog.clock import SYSTEM_CLOCK, Clock
from replog.coord import rules
from replog.coord.admin import validate_admin_request
from replog.coord.contract import (
    DEFAULT_TIMEOUT_MS,
    MAX_CHANGES_PER_BATCH,
    Coordinator,
    validate_partition_state,
)
from replog.coord.errors import (
    CoordinatorClosedError,
    CoordinatorError,
    CoordinatorUnavailableError,
    SessionExpiredError,
)
from replog.errors import ErrorCode, InvalidConfigError
from replog.metadata.types import (
    PRODUCER_ID_BLOCK_SIZE,
    AdminPayload,
    AdminRequest,
    AlterPartitionResult,
    BrokerInfo,
    CasResult,
    ChangeBatch,
    ControllerInfo,
    MetadataSnapshot,
    PartitionState,
    ProducerIdBlock,
    SessionEvent,
    SessionState,
    Subscription,
    TopicAssignment,
    TopicConfigs,
    topic_configs,
)
from replog.quorum import commands as rc
from replog.quorum.broker_channel import BrokerRpcChannel, registration_request
from replog.quorum.channel import QuorumChannel, parse_addresses
from replog.quorum.sessions import SessionKeeper
from replog.quorum.subscription import FeedSubscription
from replog.topics import new_topic_id

__all__ = ["RaftCoordinator"]

_CLOSE_TIMEOUT_MS = 2_000


class RaftCoordinator(Coordinator):
    """A handle on the built-in quorum (see the module docstring). Open with `from_url` or
    with the voters' client addresses."""

    def __init__(
        self,
        addresses: Sequence[tuple[str, int]],
        *,
        default_timeout_ms: int = DEFAULT_TIMEOUT_MS,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        if default_timeout_ms <= 0:
            raise InvalidConfigError("default_timeout_ms must be positive")
        self.addresses = list(addresses)
        self._timeout_ms = default_timeout_ms
        self._channel = QuorumChannel(self.addresses, clock=clock)
        self._brokers = BrokerRpcChannel(
            self.addresses, leader_hint=lambda: self._channel.leader, clock=clock
        )
        self._lock = threading.Lock()
        self._closed = False
        self._sessions = SessionKeeper(
            clock,
            self._send_heartbeat,
            lambda broker_id, timeout_ms: self.get_broker(broker_id, timeout_ms=timeout_ms),
        )
        self._won: dict[int, int] = {}  # controller epoch -> broker id, won through this handle
        self._subscriptions: list[FeedSubscription] = []
        #: full images read (``snapshot``) through this handle; tests and operators see
        #: whether a broker resumed from its cached image instead
        self.snapshot_reads = 0

    @classmethod
    def from_url(cls, url: str, /, **options: Any) -> RaftCoordinator:
        """``raft://host:port,host:port,...`` (any voters; the leader is found). Options:
        ``default_timeout_ms``, ``clock``."""
        parts = urllib.parse.urlsplit(url)
        if parts.scheme != "raft" or parts.path not in ("", "/") or parts.query:
            raise InvalidConfigError(f"a quorum URL is raft://host:port,host:port,..., not {url!r}")
        try:
            addresses = parse_addresses(parts.netloc)
        except ValueError as exc:
            raise InvalidConfigError(f"bad quorum URL {url!r}: {exc}") from exc
        try:
            return cls(addresses, **options)
        except TypeError as exc:
            raise InvalidConfigError(f"bad option for the raft backend: {exc}") from exc

    # ------------------------------------------------------------------ plumbing

    def _call(self, request: Any, timeout_ms: int | None, *, read: bool) -> Any:
        if self._closed:
            raise CoordinatorClosedError("this raft coordinator is closed")
        timeout = self._timeout_ms if timeout_ms is None else timeout_ms
        return self._channel.call(request, timeout_ms=timeout, idempotent=read)

    def _read(self, query: Any, timeout_ms: int | None) -> Any:
        return self._call(query, timeout_ms, read=True)

    def _write(self, command: Any, timeout_ms: int | None) -> Any:
        return self._call(command, timeout_ms, read=False)

    def _check_controller(self, controller_epoch: int | None) -> None:
        """A controller this handle elected cannot write while its broker is cut off."""
        if controller_epoch is None:
            return
        with self._lock:
            broker_id = self._won.get(controller_epoch)
        if broker_id is not None:
            self._sessions.check_acting(broker_id)

    def _acting_call(self, broker_id: int, incarnation_epoch: int, command: Any, t: Any) -> Any:
        """A write acting as a broker; a ``SessionExpiredError`` also ends the held session."""
        self._sessions.check_acting(broker_id)
        try:
            return self._write(command, t)
        except SessionExpiredError:
            self._sessions.lose(broker_id, incarnation_epoch)
            raise

    # ------------------------------------------------------------------ lifecycle

    @property
    def closed(self) -> bool:
        """Whether ``close()`` was called."""
        return self._closed

    def close(self) -> None:
        """Stop listeners and threads, unregister the sessions this handle holds, close the
        connections. Idempotent."""
        with self._lock:
            if self._closed:
                return
            subscriptions, self._subscriptions = self._subscriptions, []
            sessions = self._sessions.stop()
        for subscription in subscriptions:
            subscription.close()
        for broker in sessions:
            with contextlib.suppress(CoordinatorError):
                command = rc.UnregisterBroker(
                    broker_id=broker.broker_id, incarnation_epoch=broker.incarnation_epoch
                )
                self._write(command, _CLOSE_TIMEOUT_MS)
        self._closed = True
        self._channel.close()
        self._brokers.close()
        self._sessions.join()

    # ------------------------------------------------------------------ brokers

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
        """See ``Coordinator.register_broker``."""
        rules.check_registration(broker_id, session_timeout_ms)
        request = registration_request(
            broker_id,
            host,
            port,
            rack,
            session_timeout_ms=session_timeout_ms,
            clean_shutdown=clean_shutdown,
            fenced=fenced,
        )
        if self._closed:
            raise CoordinatorClosedError("this raft coordinator is closed")
        timeout = self._timeout_ms if timeout_ms is None else timeout_ms
        broker = self._brokers.register(request, timeout_ms=timeout)
        self._sessions.hold(broker, session_timeout_ms)
        return broker

    def heartbeat(
        self, broker_id: int, incarnation_epoch: int, *, timeout_ms: int | None = None
    ) -> SessionState:
        """See ``Coordinator.heartbeat``."""
        return self._sessions.heartbeat(broker_id, incarnation_epoch, timeout_ms)

    def _send_heartbeat(
        self,
        broker_id: int,
        incarnation_epoch: int,
        timeout_ms: int | None,
        *,
        want_shut_down: bool = False,
    ) -> SessionState:
        """One BrokerHeartbeat: CONNECTED, or ``SessionExpiredError``."""
        if self._closed:
            raise CoordinatorClosedError("this raft coordinator is closed")
        timeout = self._timeout_ms if timeout_ms is None else timeout_ms
        return self._brokers.heartbeat(
            broker_id, incarnation_epoch, timeout_ms=timeout, want_shut_down=want_shut_down
        )

    def update_broker(
        self,
        broker_id: int,
        incarnation_epoch: int,
        *,
        fenced: bool | None = None,
        in_controlled_shutdown: bool | None = None,
        timeout_ms: int | None = None,
    ) -> BrokerInfo:
        """See ``Coordinator.update_broker``. Entering a controlled shutdown alone is asked
        for as Kafka's broker does, with BrokerHeartbeats that want to shut down
        (`SessionKeeper.negotiate_shutdown`)."""
        if in_controlled_shutdown and fenced is None:
            timeout = self._timeout_ms if timeout_ms is None else timeout_ms
            return self._sessions.negotiate_shutdown(broker_id, incarnation_epoch, timeout)
        command = rc.UpdateBroker(
            broker_id=broker_id,
            incarnation_epoch=incarnation_epoch,
            fenced=fenced,
            in_controlled_shutdown=in_controlled_shutdown,
        )
        broker: BrokerInfo = self._acting_call(broker_id, incarnation_epoch, command, timeout_ms)
        self._sessions.update_broker(incarnation_epoch, broker)
        return broker

    def admit_broker(
        self,
        broker_id: int,
        incarnation_epoch: int,
        *,
        controller_epoch: int,
        timeout_ms: int | None = None,
    ) -> bool:
        """See ``Coordinator.admit_broker``."""
        self._check_controller(controller_epoch)
        command = rc.AdmitBroker(
            broker_id=broker_id,
            incarnation_epoch=incarnation_epoch,
            controller_epoch=controller_epoch,
        )
        admitted: bool = self._write(command, timeout_ms)
        return admitted

    def unregister_broker(
        self, broker_id: int, incarnation_epoch: int, *, timeout_ms: int | None = None
    ) -> bool:
        """See ``Coordinator.unregister_broker``."""
        self._sessions.check_acting(broker_id)
        command = rc.UnregisterBroker(broker_id=broker_id, incarnation_epoch=incarnation_epoch)
        done: bool = self._write(command, timeout_ms)
        if done:
            self._sessions.lose(broker_id, incarnation_epoch)
        return done

    def get_broker(self, broker_id: int, *, timeout_ms: int | None = None) -> BrokerInfo | None:
        """See ``Coordinator.get_broker``."""
        broker: BrokerInfo | None = self._read(rc.GetBroker(broker_id), timeout_ms)
        return broker

    def live_brokers(self, *, timeout_ms: int | None = None) -> dict[int, BrokerInfo]:
        """See ``Coordinator.live_brokers``."""
        brokers: dict[int, BrokerInfo] = self._read(rc.LiveBrokers(), timeout_ms)
        return brokers

    def session_state(self, broker_id: int) -> SessionState:
        """See ``Coordinator.session_state`` (this handle's view; no round trip)."""
        return self._sessions.state(broker_id)

    def add_session_listener(
        self, broker_id: int, callback: Callable[[SessionEvent], None]
    ) -> Subscription:
        """See ``Coordinator.add_session_listener``."""
        if self._closed:
            raise CoordinatorClosedError("this raft coordinator is closed")
        return self._sessions.add_listener(broker_id, callback)

    # ------------------------------------------------------------------ SessionFaults

    def expire_session(self, broker_id: int) -> None:
        """Commit the expiry of the broker's session now, as the leader's clock would."""
        expired = self._write(rc.ExpireSession(broker_id=broker_id, incarnation_epoch=None), None)
        if isinstance(expired, int):
            self._sessions.lose(broker_id, expired)

    def suspend_session(self, broker_id: int) -> None:
        """Cut the broker off in this handle (SUSPENDED); the leader's deadline runs on."""
        self._sessions.suspend(broker_id)

    def resume_session(self, broker_id: int) -> None:
        """Reconnect: one heartbeat says CONNECTED (in time) or LOST (expired meanwhile)."""
        self._sessions.resume(broker_id)

    # ------------------------------------------------------------------ controller

    def elect_controller(
        self, broker_id: int, incarnation_epoch: int, *, timeout_ms: int | None = None
    ) -> ControllerInfo:
        """See ``Coordinator.elect_controller``."""
        command = rc.ElectController(broker_id=broker_id, incarnation_epoch=incarnation_epoch)
        active: ControllerInfo = self._acting_call(
            broker_id, incarnation_epoch, command, timeout_ms
        )
        if (active.controller_id, active.incarnation_epoch) == (broker_id, incarnation_epoch):
            with self._lock:
                self._won[active.controller_epoch] = broker_id
        return active

    def resign_controller(
        self, broker_id: int, controller_epoch: int, *, timeout_ms: int | None = None
    ) -> bool:
        """See ``Coordinator.resign_controller``."""
        self._check_controller(controller_epoch)
        command = rc.ResignController(broker_id=broker_id, controller_epoch=controller_epoch)
        resigned: bool = self._write(command, timeout_ms)
        return resigned

    def current_controller(self, *, timeout_ms: int | None = None) -> ControllerInfo | None:
        """See ``Coordinator.current_controller``."""
        active: ControllerInfo | None = self._read(rc.CurrentController(), timeout_ms)
        return active

    # ------------------------------------------------------------------ topics and partitions

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
        """See ``Coordinator.create_topic``."""
        assignment, _, stored = rules.new_topic(topic, replica_assignment, initial_states, configs)
        self._check_controller(controller_epoch)
        command = rc.CreateTopicWrite(
            topic=topic,
            topic_id=new_topic_id(),
            replica_assignment=assignment,
            controller_epoch=controller_epoch,
            initial_states=None if initial_states is None else tuple(initial_states),
            configs=stored,
        )
        created: TopicAssignment = self._write(command, timeout_ms)
        return created

    def delete_topic(
        self, topic: str, *, controller_epoch: int, timeout_ms: int | None = None
    ) -> TopicAssignment:
        """See ``Coordinator.delete_topic``."""
        self._check_controller(controller_epoch)
        command = rc.DeleteTopicWrite(topic=topic, controller_epoch=controller_epoch)
        removed: TopicAssignment = self._write(command, timeout_ms)
        return removed

    def add_partitions(
        self,
        topic: str,
        new_replica_assignment: Sequence[Sequence[int]],
        *,
        controller_epoch: int,
        initial_states: Sequence[PartitionState] | None = None,
        timeout_ms: int | None = None,
    ) -> TopicAssignment:
        """See ``Coordinator.add_partitions``."""
        assignment, _ = rules.new_partitions(new_replica_assignment, initial_states)
        self._check_controller(controller_epoch)
        command = rc.AddPartitionsWrite(
            topic=topic,
            replica_assignment=assignment,
            controller_epoch=controller_epoch,
            initial_states=None if initial_states is None else tuple(initial_states),
        )
        grown: TopicAssignment = self._write(command, timeout_ms)
        return grown

    def list_topics(self, *, timeout_ms: int | None = None) -> list[str]:
        """See ``Coordinator.list_topics``."""
        return list(self._read(rc.ListTopics(), timeout_ms))

    def get_topic(self, topic: str, *, timeout_ms: int | None = None) -> TopicAssignment | None:
        """See ``Coordinator.get_topic``."""
        found: TopicAssignment | None = self._read(rc.GetTopic(topic), timeout_ms)
        return found

    def get_partition_state(
        self, topic: str, partition: int, *, timeout_ms: int | None = None
    ) -> PartitionState | None:
        """See ``Coordinator.get_partition_state``."""
        state: PartitionState | None = self._read(
            rc.GetPartitionState(topic, partition), timeout_ms
        )
        return state

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
        """See ``Coordinator.compare_and_set_partition_state``."""
        validate_partition_state(new_state)
        self._check_controller(controller_epoch)
        command = rc.CasPartitionState(
            topic=topic,
            partition=partition,
            expected_partition_epoch=expected_partition_epoch,
            new_state=new_state,
            controller_epoch=controller_epoch,
        )
        result: CasResult = self._write(command, timeout_ms)
        return result

    # ------------------------------------------------------------------ the feed

    def changes_since(
        self,
        seq: int,
        *,
        max_changes: int = MAX_CHANGES_PER_BATCH,
        timeout_ms: int | None = None,
    ) -> ChangeBatch:
        """See ``Coordinator.changes_since``."""
        rules.check_feed_read(seq, max_changes)
        batch: ChangeBatch = self._read(rc.ChangesSince(seq, max_changes), timeout_ms)
        return batch

    def snapshot(self, *, timeout_ms: int | None = None) -> MetadataSnapshot:
        """See ``Coordinator.snapshot``."""
        self.snapshot_reads += 1
        image: MetadataSnapshot = self._read(rc.GetSnapshot(), timeout_ms)
        return image

    def cluster_id(self, *, timeout_ms: int | None = None) -> str | None:
        """See ``Coordinator.cluster_id``."""
        found: str | None = self._read(rc.GetClusterId(), timeout_ms)
        return found

    def subscribe(
        self, callback: Callable[[ChangeBatch], None], *, from_seq: int | None = None
    ) -> Subscription:
        """See ``Coordinator.subscribe``."""
        if self._closed:
            raise CoordinatorClosedError("this raft coordinator is closed")
        cursor = from_seq
        if cursor is None:
            with contextlib.suppress(CoordinatorUnavailableError):
                cursor = self._read(rc.FeedHead(), None)
        subscription = FeedSubscription(
            self._read, lambda: self._closed, self._timeout_ms, callback, cursor
        )
        with self._lock:
            self._subscriptions = [s for s in self._subscriptions if not s.handle.closed]
            self._subscriptions.append(subscription)
        subscription.start()
        return subscription.handle

    def trim_history(self, before_seq: int, *, timeout_ms: int | None = None) -> int:
        """See ``Coordinator.trim_history``."""
        oldest: int = self._write(rc.TrimHistory(before_seq=before_seq), timeout_ms)
        return oldest

    # ------------------------------------------------------------------ producer ids

    def allocate_producer_ids(
        self,
        broker_id: int,
        broker_epoch: int,
        *,
        count: int = PRODUCER_ID_BLOCK_SIZE,
        controller_epoch: int,
        timeout_ms: int | None = None,
    ) -> ProducerIdBlock:
        """See ``Coordinator.allocate_producer_ids``."""
        if count < 1:
            raise ValueError(f"a producer id block needs at least one id, not {count}")
        self._check_controller(controller_epoch)
        command = rc.AllocateProducerIdsWrite(
            broker_id=broker_id,
            broker_epoch=broker_epoch,
            count=count,
            controller_epoch=controller_epoch,
        )
        block: ProducerIdBlock = self._write(command, timeout_ms)
        return block

    def producer_id_block(
        self, broker_id: int, *, timeout_ms: int | None = None
    ) -> ProducerIdBlock | None:
        """See ``Coordinator.producer_id_block``."""
        block: ProducerIdBlock | None = self._read(rc.GetProducerIdBlock(broker_id), timeout_ms)
        return block

    # ------------------------------------------------------------------ admin queue

    def submit_admin_request(
        self, target: int, payload: AdminPayload, *, timeout_ms: int | None = None
    ) -> AdminRequest:
        """See ``Coordinator.submit_admin_request``."""
        validate_admin_request(target, payload)
        request: AdminRequest = self._write(
            rc.SubmitAdminRequest(target=target, payload=payload), timeout_ms
        )
        return request

    def pending_admin_requests(
        self, target: int, *, timeout_ms: int | None = None
    ) -> list[AdminRequest]:
        """See ``Coordinator.pending_admin_requests``."""
        return list(self._read(rc.PendingAdminRequests(target), timeout_ms))

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
        """See ``Coordinator.complete_admin_request``."""
        self._check_controller(controller_epoch)
        command = rc.CompleteAdminRequest(
            request_id=request_id,
            outcome=outcome,
            message=message,
            controller_epoch=controller_epoch,
            result=result,
        )
        done: bool = self._write(command, timeout_ms)
        return done

    # ------------------------------------------------------------------ dynamic configs

    def alter_topic_configs(
        self,
        topic: str,
        configs: Mapping[str, str],
        *,
        controller_epoch: int,
        timeout_ms: int | None = None,
    ) -> TopicAssignment:
        """See ``Coordinator.alter_topic_configs``."""
        stored = topic_configs(configs)
        self._check_controller(controller_epoch)
        command = rc.AlterTopicConfigsWrite(
            topic=topic, configs=stored, controller_epoch=controller_epoch
        )
        altered: TopicAssignment = self._write(command, timeout_ms)
        return altered

    def alter_broker_configs(
        self,
        broker_id: int,
        configs: Mapping[str, str],
        *,
        controller_epoch: int,
        timeout_ms: int | None = None,
    ) -> None:
        """See ``Coordinator.alter_broker_configs``."""
        stored = rules.broker_configs_to_store(broker_id, configs)
        self._check_controller(controller_epoch)
        command = rc.AlterBrokerConfigsWrite(
            broker_id=broker_id, configs=stored, controller_epoch=controller_epoch
        )
        self._write(command, timeout_ms)

    def broker_configs(self, *, timeout_ms: int | None = None) -> dict[int, TopicConfigs]:
        """See ``Coordinator.broker_configs``."""
        found: dict[int, TopicConfigs] = self._read(rc.GetBrokerConfigs(), timeout_ms)
        return found

    def __repr__(self) -> str:
        voters = ",".join(f"{h}:{p}" for h, p in self.addresses)
        return f"RaftCoordinator(raft://{voters}{', closed' if self._closed else ''})"
