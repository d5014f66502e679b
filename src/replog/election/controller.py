"""The controller machine: metadata events and admin requests in, coordinator writes out.

Theory of operation. One ``ControllerMachine`` exists per controller term (controller epoch). It
is rebuilt from a coordinator snapshot when its broker wins the election (``from_snapshot``) and
then fed, in feed order, every metadata change (``on_change``), every pending admin request for
the controller (``on_admin_request``) and a periodic ``on_tick``. Each input returns a
``ControllerOutput``: the writes to make (``controller_writes``), each carrying the state-change
records it makes true. The machine never reads a clock or the store; ``now_ms`` comes with every
input and the replica-placement start comes from an injected ``placement_start(n)``.

The machine applies its own decisions to its view at once (optimistically), so a later decision
in the same poll builds on an earlier one; every partition write is a compare-and-set on the
partition epoch the view holds. If the store disagrees (VERSION_MISMATCH), the driver hands the
store's state to ``on_cas_conflict`` and the machine decides again from the write's cause. Its
own writes come back through the feed and are recognised by their partition epoch (not newer
than the view's: ignored).

Admission (KIP-966 and KRaft's fenced registrations), handled exactly once. A broker registers
fenced, or with ``clean_shutdown`` False (its previous run did not end cleanly, so it may have
lost an unflushed tail), or both; the controller then moves leadership and ISR membership off it
(a fenced registration: as for a fenced broker) or takes it out of every ISR and ELR (an unclean
one), and finally admits it in the store (``AdmitBrokerWrite``: unfenced, and no later
controller repeats any of this), written only if every write before it succeeded, and then
counted unfenced at once (``on_admitted``). The broker leads nothing while its registration is
fenced, so it never acts on leadership its previous incarnation held. A machine rebuilt from a
snapshot processes the registrations still awaiting admission (``admission_pending``, first
thing in ``on_become_controller``: the previous term may have died in between) and never the
admitted ones, so an incarnation that caught up and rejoined is not removed again by a later
controller (the failover that once left every partition leaderless). ``admitted_here`` holds the
incarnations processed in this term, so a rebuild within the term skips them; a write that
failed for good puts the incarnation back in ``admission_pending`` for the next tick
(``retry_admission``).

Admin requests are handled in ``controller_requests``. Decisions use the package's pure
functions only: ``broker_events`` for fence / unfence / controlled shutdown / unclean restart,
``handle_alter_partition`` for leaders' ISR proposals (reassignment completion switched off, so
the seed-001 steps stay separate), ``next_reassignment_step`` / ``cancel_reassignment``,
``create_partition`` and ``assign_replicas`` for new partitions, ``elect_leader`` and
``partitions_to_rebalance`` for preferred elections. ``reconcile_partition`` (used at failover
and after a conflict) is level-triggered: it removes inactive brokers from the ISR, elects a
leader where there is none, and takes one reassignment step.

Per-topic policy (min.insync.replicas, unclean leader election, ELR): ``ControllerConfig`` holds
the defaults (``default_topic_policy``, overridden per topic name by ``topic_policies``), and a
topic's stored configs (``TopicAssignment.configs``: ``min.insync.replicas``,
``unclean.leader.election.enable``, see ``replog.topic_config``) override both. The configs live
in the store with the topic, so a controller after failover applies the same policy.

Reassignments are recoverable from the store alone: the START step writes the merged assignment
with ``adding_replicas`` / ``removing_replicas``, and a reassigning partition's target is
``replicas - removing``; ``on_tick`` takes one step per reassigning partition until DONE.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

import attrs

from replog.config_layers import ConfigLayers, topic_settings
from replog.election import controller_requests
from replog.election.broker_events import (
    on_broker_fenced,
    on_broker_unclean_restart,
    on_broker_unfenced,
    on_controlled_shutdown,
)
from replog.election.controller_writes import (
    AdmitBrokerWrite,
    CasPartitionWrite,
    CompleteRequestWrite,
    ControllerOutput,
    ControllerWrite,
    SubmitRequestWrite,
    WriteCause,
    broker_registration,
    partition_state,
    registration_of,
)
from replog.election.decision import Decision
from replog.election.partition_change import (
    ElectionPolicy,
    LeaderElectionStrategy,
    PartitionChangeBuilder,
)
from replog.election.reassignment import (
    ReassignmentStep,
    next_reassignment_step,
)
from replog.election.rebalance import elect_leader, partitions_to_rebalance
from replog.election.state import (
    ClusterView,
    PartitionRegistration,
    TopicPartition,
)
from replog.election.state_change import Actor, StateChange
from replog.errors import ErrorCode
from replog.metadata import types as ct

__all__ = ["ControllerConfig", "ControllerMachine", "TopicPolicy", "fixed_placement_start"]


@attrs.frozen(kw_only=True)
class TopicPolicy:
    """A topic's election settings: min.insync.replicas (the ELR rules use it), unclean leader
    election (off, Kafka's default), Eligible Leader Replicas (KIP-966, on by default) and
    KIP-966's balanced recovery, which elects the last known leader once ISR and ELR are both
    empty (on by default, as Kafka's ``useLastKnownLeaderInBalancedRecovery``)."""

    min_insync_replicas: int = 1
    unclean_leader_election: bool = False
    eligible_leader_replicas: bool = True
    last_known_leader_recovery: bool = True

    def election_policy(self) -> ElectionPolicy:
        """The policy the election functions take."""
        return ElectionPolicy(
            min_isr=self.min_insync_replicas,
            elr_enabled=self.eligible_leader_replicas,
            unclean_allowed=self.unclean_leader_election,
            last_known_leader=self.last_known_leader_recovery,
        )


@attrs.frozen(kw_only=True)
class ControllerConfig:
    """Controller settings (Kafka's defaults): auto leader rebalance every 300 s when a broker's
    imbalance exceeds 10 %, and the per-topic policies (see the module docstring)."""

    default_topic_policy: TopicPolicy = TopicPolicy()
    topic_policies: Mapping[str, TopicPolicy] = attrs.field(factory=dict)
    auto_leader_rebalance: bool = True
    leader_imbalance_per_broker_percentage: int = 10
    leader_imbalance_check_interval_ms: int = 300_000

    def policy_for(
        self,
        topic: str,
        configs: ct.TopicConfigs = (),
        *,
        broker_configs: Mapping[str, str] | None = None,
        cluster_configs: Mapping[str, str] | None = None,
    ) -> ElectionPolicy:
        """The election policy of ``topic``: its stored ``configs`` over the dynamic configs of
        the controller's broker and the cluster-wide dynamic default (broker keys, see
        ``replog.config_layers``) over these defaults (configs were validated when they were
        stored; a value that no longer parses keeps the default rather than stopping
        elections)."""
        policy = self.topic_policies.get(topic, self.default_topic_policy)
        layers = ConfigLayers(
            topic=dict(configs), broker=broker_configs or {}, cluster=cluster_configs or {}
        )
        settings = topic_settings(layers)
        if settings.min_insync_replicas is not None:
            policy = attrs.evolve(policy, min_insync_replicas=settings.min_insync_replicas)
        if settings.unclean_leader_election is not None:
            policy = attrs.evolve(policy, unclean_leader_election=settings.unclean_leader_election)
        return policy.election_policy()


def fixed_placement_start(broker_count: int) -> tuple[int, int]:
    """A deterministic placement start: ``start_index`` 0, ``replica_shift`` 0."""
    return 0, 0


@attrs.define
class ControllerMachine:
    """The active controller's view and decisions (see the module docstring)."""

    controller_id: int
    controller_epoch: int
    config: ControllerConfig
    cluster: ClusterView
    topics: dict[str, ct.TopicAssignment]
    partitions: dict[TopicPartition, PartitionRegistration]
    next_rebalance_ms: int
    placement_start: Callable[[int], tuple[int, int]] = fixed_placement_start
    active: bool = True
    admission_pending: set[tuple[int, int]] = attrs.Factory(set)
    admitted_here: set[tuple[int, int]] = attrs.Factory(set)
    #: incarnations that registered after an unclean shutdown (KIP-966)
    unclean_registrations: set[tuple[int, int]] = attrs.Factory(set)
    #: dynamic broker configs by broker id (``ct.ALL_BROKERS``: the cluster-wide default)
    broker_configs: dict[int, ct.TopicConfigs] = attrs.Factory(dict)
    _next_group: int = 1

    @classmethod
    def from_snapshot(
        cls,
        snapshot: ct.MetadataSnapshot,
        *,
        controller_id: int,
        controller_epoch: int,
        now_ms: int,
        config: ControllerConfig | None = None,
        placement_start: Callable[[int], tuple[int, int]] = fixed_placement_start,
    ) -> ControllerMachine:
        """The machine of a controller that just won ``controller_epoch``, its view rebuilt
        from ``snapshot``. Call ``on_become_controller`` next."""
        config = config or ControllerConfig()
        partitions = {
            TopicPartition(t, p): registration_of(s) for (t, p), s in snapshot.partitions.items()
        }
        return cls(
            controller_id=controller_id,
            controller_epoch=controller_epoch,
            config=config,
            cluster=ClusterView(broker_registration(b) for b in snapshot.brokers.values()),
            topics=dict(snapshot.topics),
            partitions=partitions,
            next_rebalance_ms=now_ms + config.leader_imbalance_check_interval_ms,
            placement_start=placement_start,
            admission_pending={
                (b.broker_id, b.incarnation_epoch)
                for b in snapshot.brokers.values()
                if b.awaiting_admission
            },
            unclean_registrations={
                (b.broker_id, b.incarnation_epoch)
                for b in snapshot.brokers.values()
                if b.unclean_restart_pending
            },
            broker_configs=dict(snapshot.broker_configs),
        )

    # ---- helpers ----------------------------------------------------------------------

    @property
    def actor(self) -> Actor:
        """This controller as a state-change participant."""
        return Actor.controller(self.controller_id)

    def new_group(self) -> int:
        group = self._next_group
        self._next_group += 1
        return group

    def policy(self, tp: TopicPartition) -> ElectionPolicy:
        """``tp``'s election policy: its topic's configs over the dynamic broker configs (this
        controller's broker's, then the cluster default) over the controller's defaults."""
        known = self.topics.get(tp.topic)
        return self.config.policy_for(
            tp.topic,
            () if known is None else known.configs,
            broker_configs=dict(self.broker_configs.get(self.controller_id, ())),
            cluster_configs=dict(self.broker_configs.get(ct.ALL_BROKERS, ())),
        )

    def cas_writes(
        self, tp: TopicPartition, decision: Decision, cause: WriteCause, group: int | None = None
    ) -> list[ControllerWrite]:
        """The write for a partition decision (none when it changes nothing), applied to the
        view at once; replicas that leave the assignment get a queued CloseReplica."""
        current = self.partitions[tp]
        if not decision.changed(current):
            return []
        new = decision.registration
        self.partitions[tp] = new
        group = self.new_group() if group is None else group
        writes: list[ControllerWrite] = [
            CasPartitionWrite(
                group=group,
                cause=cause,
                topic_partition=tp,
                expected_partition_epoch=current.partition_epoch,
                state=partition_state(new),
                state_changes=tuple(decision.state_changes),
            )
        ]
        known = self.topics.get(tp.topic)
        for broker in (r for r in current.replicas if r not in new.replicas):
            close = ct.CloseReplica(
                topic=tp.topic,
                partition=tp.partition,
                leader_epoch=new.leader_epoch,
                topic_id="" if known is None else known.topic_id,
            )
            writes.append(
                SubmitRequestWrite(group=group, cause=cause, target=broker, payload=close)
            )
        return writes

    def _naming(self, broker_id: int) -> list[TopicPartition]:
        return [
            tp
            for tp, reg in sorted(self.partitions.items())
            if broker_id in reg.replicas or broker_id in reg.isr or broker_id in reg.elr
        ]

    # ---- failover and reconciliation ------------------------------------------------------

    def on_become_controller(self, now_ms: int) -> ControllerOutput:
        """Decisions owed after a failover: whatever happened while no controller acted
        (registrations awaiting admission first, then ``reconcile``)."""
        writes = self._pending_admissions(now_ms)
        writes.extend(self.reconcile(now_ms).writes)
        return ControllerOutput(tuple(writes))

    def _pending_admissions(self, now_ms: int) -> list[ControllerWrite]:
        """Process the registrations owed: from the snapshot, or whose admission was held."""
        writes: list[ControllerWrite] = []
        pending, self.admission_pending = self.admission_pending, set()
        for broker_id, epoch in sorted(pending - self.admitted_here):
            registration = self.cluster.broker(broker_id)
            unclean = (broker_id, epoch) in self.unclean_registrations
            if registration is not None and registration.broker_epoch == epoch:
                writes.extend(self._admit(broker_id, epoch, now_ms, unclean=unclean))
        return writes

    def reconcile(self, now_ms: int) -> ControllerOutput:
        """``reconcile_partition`` for every partition."""
        writes: list[ControllerWrite] = []
        for tp in sorted(self.partitions):
            writes.extend(self.reconcile_partition(tp, now_ms).writes)
        return ControllerOutput(tuple(writes))

    def reconcile_partition(self, tp: TopicPartition, now_ms: int) -> ControllerOutput:
        """Bring one partition in line with the brokers' liveness: inactive brokers leave the
        ISR (and lose leadership), a leaderless partition elects, else a reassignment takes its
        next step. At most one write."""
        current = self.partitions.get(tp)
        if current is None:
            return ControllerOutput()
        cause = WriteCause(topic_partition=tp)
        builder = PartitionChangeBuilder.for_partition(
            tp, current, self.cluster, self.policy(tp), self.actor
        )
        inactive = [b for b in current.isr if not self.cluster.is_acceptable_leader(b)]
        if inactive or not current.has_leader:
            kept = [b for b in current.isr if b not in inactive]
            decision = builder.with_target_isr(kept).build(now_ms)
            if decision.changed(current):
                return ControllerOutput(tuple(self.cas_writes(tp, decision, cause)))
        return ControllerOutput(tuple(self._reassignment_step(tp, now_ms)))

    # ---- the change feed ----------------------------------------------------------------

    def on_change(self, change: ct.MetadataChange, now_ms: int) -> ControllerOutput:
        """One feed record (our own writes come back too and change nothing)."""
        if isinstance(change, ct.BrokerChanged):
            if change.broker is None:
                return self.on_broker_unregistered(
                    change.broker_id, change.incarnation_epoch, now_ms
                )
            if change.reason is ct.BrokerChangeReason.REGISTERED:
                return self.on_broker_registered(change.broker, now_ms)
            return self.on_broker_updated(change.broker, now_ms)
        if isinstance(change, ct.TopicChanged):
            self.on_topic_changed(change)
        elif isinstance(change, ct.PartitionChanged):
            self.on_partition_state(change.topic, change.partition, change.state)
        elif isinstance(change, ct.ControllerChanged):
            self.on_controller_changed(change.controller)
        elif isinstance(change, ct.BrokerConfigsChanged):
            self.on_broker_configs(change.broker_id, change.configs)
        return ControllerOutput()

    def on_broker_configs(self, broker_id: int, configs: ct.TopicConfigs) -> None:
        """Adopt a broker's (or the cluster default's) new dynamic configs."""
        if configs:
            self.broker_configs[broker_id] = configs
        else:
            self.broker_configs.pop(broker_id, None)

    def on_controller_changed(self, controller: ct.ControllerInfo | None) -> None:
        """A later controller record that is not this term means the role is lost."""
        if controller is None or controller.controller_epoch > self.controller_epoch:
            self.active = False
        elif controller.controller_epoch == self.controller_epoch:
            self.active = controller.controller_id == self.controller_id

    def on_topic_changed(self, change: ct.TopicChanged) -> None:
        """Adopt a topic record; a deletion removes the topic only if it is the same topic id
        (a replayed deletion of an older topic of that name changes nothing)."""
        assignment = change.assignment
        known = self.topics.get(assignment.topic)
        if change.reason is ct.TopicChangeReason.DELETED:
            if known is not None and known.topic_id in (assignment.topic_id, ""):
                self._forget_topic(assignment.topic)
            return
        self.topics[assignment.topic] = assignment

    def on_partition_state(self, topic: str, partition: int, state: ct.PartitionState) -> None:
        """Adopt a stored partition state newer than the view's (older ones are echoes)."""
        tp = TopicPartition(topic, partition)
        known = self.partitions.get(tp)
        if topic not in self.topics:
            return
        if known is None or state.partition_epoch > known.partition_epoch:
            self.partitions[tp] = registration_of(state)

    def on_topic_written(self, assignment: ct.TopicAssignment) -> None:
        """The driver's report of a created or grown topic (learns the store's topic id)."""
        self.topics[assignment.topic] = assignment

    def _forget_topic(self, topic: str) -> None:
        self.topics.pop(topic, None)
        for tp in [tp for tp in self.partitions if tp.topic == topic]:
            del self.partitions[tp]

    # ---- brokers ------------------------------------------------------------------------

    def _each_partition(
        self, broker_id: int, decide: Callable[[TopicPartition, PartitionRegistration], Decision]
    ) -> list[ControllerWrite]:
        writes: list[ControllerWrite] = []
        for tp in self._naming(broker_id):
            decision = decide(tp, self.partitions[tp])
            writes.extend(self.cas_writes(tp, decision, WriteCause(topic_partition=tp)))
        return writes

    def on_broker_registered(self, info: ct.BrokerInfo, now_ms: int) -> ControllerOutput:
        """A broker incarnation registered. An older incarnation still in the view is handled
        as gone first. A registration awaiting admission is processed and admitted (the
        module docstring); an active one elects where the broker is now acceptable."""
        old = self.cluster.broker(info.broker_id)
        if old is not None and old.broker_epoch >= info.incarnation_epoch:
            return self.on_broker_updated(info, now_ms)
        writes: list[ControllerWrite] = []
        if old is not None:
            writes.extend(
                self.on_broker_unregistered(old.broker_id, old.broker_epoch, now_ms).writes
            )
        registration = broker_registration(info)
        self.cluster = self.cluster.with_registration(registration)
        incarnation = (info.broker_id, info.incarnation_epoch)
        if info.unclean_restart_pending:
            self.unclean_registrations.add(incarnation)
        if info.awaiting_admission and incarnation not in self.admitted_here:
            writes.extend(self._admit(*incarnation, now_ms, unclean=info.unclean_restart_pending))
        if registration.is_active:
            writes.extend(self._unfenced(info.broker_id, now_ms))
        return ControllerOutput(tuple(writes))

    def _admit(
        self, broker_id: int, epoch: int, now_ms: int, *, unclean: bool
    ) -> list[ControllerWrite]:
        """Process a registration awaiting admission: leadership and ISR membership move off
        it (fenced), or it leaves every ISR and ELR (unclean, KIP-966; with ELR off: handled
        as fenced); then the store admits it (the last write, its own group)."""
        self.admitted_here.add((broker_id, epoch))
        writes: list[ControllerWrite] = []
        for tp in self._naming(broker_id):
            writes.extend(self._admission_of(tp, (broker_id, epoch), now_ms, unclean=unclean))
        writes.append(
            AdmitBrokerWrite(
                group=self.new_group(),
                cause=WriteCause(admission=(broker_id, epoch)),
                broker_id=broker_id,
                incarnation_epoch=epoch,
            )
        )
        return writes

    def on_admitted(self, broker_id: int, epoch: int, now_ms: int) -> ControllerOutput:
        """The store admitted the incarnation: the view counts it unfenced now, not when the
        feed brings that back (the broker serves once it sees it, and a topic its clients ask
        for at once must be placed on it; KRaft's controller state holds what it decided)."""
        reg = self.cluster.broker(broker_id)
        if reg is None or reg.broker_epoch != epoch or not reg.fenced:
            return ControllerOutput()
        self.cluster = self.cluster.with_registration(attrs.evolve(reg, fenced=False))
        shutting_down = reg.in_controlled_shutdown  # elects nowhere
        return ControllerOutput(() if shutting_down else tuple(self._unfenced(broker_id, now_ms)))

    def retry_admission(self, broker_id: int, epoch: int) -> None:
        """A write of this admission did not happen (it failed for good): the registration is
        processed again at the next tick, and not admitted meanwhile."""
        self.admitted_here.discard((broker_id, epoch))
        self.admission_pending.add((broker_id, epoch))

    def _admission_of(
        self, tp: TopicPartition, incarnation: tuple[int, int], now_ms: int, *, unclean: bool
    ) -> list[ControllerWrite]:
        registration = self.cluster.broker(incarnation[0])
        current = self.partitions.get(tp)
        if registration is None or registration.broker_epoch != incarnation[1] or current is None:
            return []
        policy = self.policy(tp)
        if unclean:
            decision = on_broker_unclean_restart(
                tp, current, registration, self.cluster,
                policy=policy, now_ms=now_ms, requester=self.actor,
            )  # fmt: skip
        elif registration.fenced:
            decision = on_broker_fenced(
                tp, current, incarnation[0], self.cluster,
                policy=policy, now_ms=now_ms, requester=self.actor,
            )  # fmt: skip
        else:
            return []
        cause = WriteCause(topic_partition=tp, admission=incarnation)
        return self.cas_writes(tp, decision, cause)

    def on_broker_updated(self, info: ct.BrokerInfo, now_ms: int) -> ControllerOutput:
        """A registration's flags changed: fenced / unfenced / entering controlled shutdown."""
        old = self.cluster.broker(info.broker_id)
        if old is None or old.broker_epoch != info.incarnation_epoch:
            return self.on_broker_registered(info, now_ms)
        writes: list[ControllerWrite] = []
        if info.fenced and not old.fenced:
            writes.extend(self.on_broker_fenced(info.broker_id, now_ms).writes)
        elif info.in_controlled_shutdown and not old.in_controlled_shutdown:
            writes.extend(self.on_controlled_shutdown(info.broker_id, now_ms).writes)
        self.cluster = self.cluster.with_registration(broker_registration(info))
        if not info.fenced and not info.in_controlled_shutdown and not old.is_active:
            writes.extend(self._unfenced(info.broker_id, now_ms))
        return ControllerOutput(tuple(writes))

    def on_broker_fenced(self, broker_id: int, now_ms: int) -> ControllerOutput:
        """The broker is fenced: it leaves every ISR and leadership moves off it."""
        writes = self._each_partition(
            broker_id,
            lambda tp, reg: on_broker_fenced(
                tp, reg, broker_id, self.cluster,
                policy=self.policy(tp), now_ms=now_ms, requester=self.actor,
            ),
        )  # fmt: skip
        if self.cluster.broker(broker_id) is not None:
            self.cluster = self.cluster.with_fenced(broker_id)
        return ControllerOutput(tuple(writes))

    def on_controlled_shutdown(self, broker_id: int, now_ms: int) -> ControllerOutput:
        """The broker asked to shut down: leadership and ISR membership move off it."""
        writes = self._each_partition(
            broker_id,
            lambda tp, reg: on_controlled_shutdown(
                tp, reg, broker_id, self.cluster,
                policy=self.policy(tp), now_ms=now_ms, requester=self.actor,
            ),
        )  # fmt: skip
        if self.cluster.broker(broker_id) is not None:
            self.cluster = self.cluster.with_controlled_shutdown(broker_id)
        return ControllerOutput(tuple(writes))

    def on_broker_unfenced(self, broker_id: int, now_ms: int) -> ControllerOutput:
        """The broker is back: leaderless partitions naming it elect."""
        if self.cluster.broker(broker_id) is None:
            return ControllerOutput()
        self.cluster = self.cluster.with_unfenced(broker_id)
        return ControllerOutput(tuple(self._unfenced(broker_id, now_ms)))

    def _unfenced(self, broker_id: int, now_ms: int) -> list[ControllerWrite]:
        return self._each_partition(
            broker_id,
            lambda tp, reg: on_broker_unfenced(
                tp, reg, broker_id, self.cluster,
                policy=self.policy(tp), now_ms=now_ms, requester=self.actor,
            ),
        )  # fmt: skip

    def on_broker_unregistered(
        self, broker_id: int, incarnation_epoch: int, now_ms: int
    ) -> ControllerOutput:
        """The incarnation's session ended (expired or clean unregistration): handled as
        fenced, then the broker leaves the view (as in a snapshot taken afterwards)."""
        old = self.cluster.broker(broker_id)
        if old is None or old.broker_epoch != incarnation_epoch:
            return ControllerOutput()
        output = self.on_broker_fenced(broker_id, now_ms)
        self.cluster = ClusterView(
            reg for b, reg in sorted(self.cluster.brokers.items()) if b != broker_id
        )
        return output

    # ---- admin requests -----------------------------------------------------------------

    def on_admin_request(self, request: ct.AdminRequest, now_ms: int) -> ControllerOutput:
        """Handle one queued request for the controller; the output ends with its completion."""
        return ControllerOutput(tuple(controller_requests.handle(self, request, now_ms)))

    def reject_request(
        self, request: ct.AdminRequest, error: ErrorCode, message: str, now_ms: int
    ) -> ControllerOutput:
        """Complete ``request`` with ``error`` (e.g. after the store refused its write)."""
        return ControllerOutput(
            tuple(controller_requests.reject(self, request, error, message, now_ms))
        )

    def complete(
        self,
        request: ct.AdminRequest,
        group: int,
        error: ErrorCode,
        message: str,
        records: Iterable[StateChange] = (),
        *,
        result: ct.AlterPartitionResult | None = None,
    ) -> CompleteRequestWrite:
        """The completion write of ``request`` in ``group`` (with the structured ``result`` of
        an AlterPartition)."""
        return CompleteRequestWrite(
            group=group,
            cause=WriteCause(request=request),
            request_id=request.request_id,
            outcome=error,
            message=message,
            result=result,
            state_changes=tuple(records),
        )

    # ---- reassignment and balance ----------------------------------------------------------

    def _reassignment_step(self, tp: TopicPartition, now_ms: int) -> list[ControllerWrite]:
        current = self.partitions[tp]
        if not current.is_reassigning:
            return []
        progress = next_reassignment_step(
            tp, current, current.target_replicas, self.cluster, caught_up=(),
            policy=self.policy(tp), now_ms=now_ms, requester=self.actor,
        )  # fmt: skip
        if progress.step in (ReassignmentStep.WAIT, ReassignmentStep.DONE):
            return []
        return self.cas_writes(tp, progress.decision, WriteCause(topic_partition=tp))

    def preferred_election(
        self,
        tps: Iterable[TopicPartition],
        now_ms: int,
        *,
        requester: Actor,
        cause: WriteCause,
        group: int | None = None,
        keep_rejections: bool = True,
    ) -> tuple[list[ControllerWrite], dict[TopicPartition, ErrorCode], list[StateChange]]:
        """Preferred elections on ``tps``: the writes, each partition's result, and the records
        of the rejected ones (``keep_rejections``)."""
        writes: list[ControllerWrite] = []
        results: dict[TopicPartition, ErrorCode] = {}
        rejected: list[StateChange] = []
        for tp in tps:
            current = self.partitions.get(tp)
            if current is None:
                results[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                continue
            decision = elect_leader(
                tp, current, self.cluster, LeaderElectionStrategy.PREFERRED, policy=self.policy(tp),
                now_ms=now_ms, requester=requester, controller=self.actor,
            )  # fmt: skip
            results[tp] = decision.error
            if decision.ok:
                writes.extend(self.cas_writes(tp, decision, cause, group))
            elif keep_rejections:
                rejected.extend(decision.state_changes)
        return writes, results, rejected

    def on_tick(self, now_ms: int) -> ControllerOutput:
        """Periodic work: registrations whose admission did not happen, one step of every
        reassignment, and the auto leader rebalance when its interval has passed (ZK rule: a
        broker's imbalance above the percentage)."""
        writes = self._pending_admissions(now_ms)
        for tp in sorted(self.partitions):
            writes.extend(self._reassignment_step(tp, now_ms))
        if self.config.auto_leader_rebalance and now_ms >= self.next_rebalance_ms:
            self.next_rebalance_ms = now_ms + self.config.leader_imbalance_check_interval_ms
            settled = {tp: r for tp, r in self.partitions.items() if not r.is_reassigning}
            chosen = partitions_to_rebalance(
                settled,
                self.cluster,
                imbalance_percentage=self.config.leader_imbalance_per_broker_percentage,
            )
            for tp in chosen:
                more, _, _ = self.preferred_election(
                    [tp],
                    now_ms,
                    requester=self.actor,
                    cause=WriteCause(topic_partition=tp),
                    keep_rejections=False,
                )
                writes.extend(more)
        return ControllerOutput(tuple(writes))

    # ---- conflicts ----------------------------------------------------------------------

    def on_cas_conflict(
        self, write: CasPartitionWrite, current: ct.PartitionState | None, now_ms: int
    ) -> ControllerOutput:
        """The store refused ``write`` with VERSION_MISMATCH (``current``: its state) or
        UNKNOWN_PARTITION (None). Adopt the store's state and decide again from the cause."""
        tp = write.topic_partition
        if current is None:
            self.partitions.pop(tp, None)
        else:
            self.partitions[tp] = registration_of(current)
        if write.cause.request is not None:
            return self.on_admin_request(write.cause.request, now_ms)
        if write.cause.admission is not None:
            unclean = write.cause.admission in self.unclean_registrations
            writes = self._admission_of(tp, write.cause.admission, now_ms, unclean=unclean)
            if writes:
                return ControllerOutput(tuple(writes))
        return self.reconcile_partition(tp, now_ms)

    # ---- topics (used by controller_requests) -----------------------------------------------

    def forget_topic(self, topic: str) -> None:
        """Drop a topic from the view (it is being deleted)."""
        self._forget_topic(topic)
