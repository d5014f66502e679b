"""Hypothesis stateful test: one leader and two followers on real logs, messages delivered in
any order, dropped or duplicated, followers restarted with unsynced data lost, leaders changed.

Invariants after every step: a leader's HW never decreases within its epoch; every acks=all
record that was acknowledged is on every ISR replica at the same offset with the same bytes;
every replica's log below its HW equals the committed history; ISR is within AR.
"""

from __future__ import annotations

from hypothesis import HealthCheck, event, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)

from replog.isr import Acks, DurabilityMode, PartitionConfig

from .harness import Cluster, batches_below

REPLICAS = 3


class ReplicationMachine(RuleBasedStateMachine):
    """Drives a `Cluster` with hypothesis-chosen steps."""

    cluster: Cluster | None = None

    @initialize(
        durability=st.sampled_from(DurabilityMode),
        min_isr=st.integers(1, REPLICAS),
    )
    def start(self, durability: DurabilityMode, min_isr: int) -> None:
        config = PartitionConfig(
            min_insync_replicas=min_isr,
            durability=durability,
            replica_lag_ms_max=30_000,
            request_timeout_ms=40_000,
        )
        self.cluster = Cluster(REPLICAS, config)
        self.values = 0

    def teardown(self) -> None:
        if self.cluster is not None:
            event(f"acked acks=all records: {min(len(self.cluster.acked), 5)}+")
            event(f"produces: {min(self.values, 5)}+")
            event(f"leader epochs: {min(self.cluster.controller.leader_epoch, 3)}+")
            event(f"committed offsets: {min(len(self.cluster.committed), 5)}+")
            self.cluster.close()

    @property
    def c(self) -> Cluster:
        assert self.cluster is not None
        return self.cluster

    @rule(acks=st.sampled_from([Acks.ALL, Acks.ALL, Acks.LEADER, Acks.NONE]))
    def produce(self, acks: Acks) -> None:
        self.values += 1
        self.c.produce(acks, b"v%d" % self.values)

    @rule(broker=st.integers(0, REPLICAS - 1))
    def send_fetch(self, broker: int) -> None:
        self.c.send_fetch(broker)

    @precondition(lambda self: self.cluster is not None and self.cluster.network)
    @rule(index=st.integers(0, 1000), duplicate=st.booleans())
    def deliver(self, index: int, duplicate: bool) -> None:
        self.c.deliver(index % len(self.c.network), duplicate=duplicate and index % 4 == 0)

    @precondition(lambda self: self.cluster is not None and self.cluster.network)
    @rule(index=st.integers(0, 1000))
    def drop(self, index: int) -> None:
        self.c.network.pop(index % len(self.c.network))

    @rule(rounds=st.integers(1, 3))
    def settle(self, rounds: int) -> None:
        self.c.settle(rounds)

    @rule(acks=st.sampled_from([Acks.ALL, Acks.LEADER]), rounds=st.integers(1, 2))
    def produce_then_settle(self, acks: Acks, rounds: int) -> None:
        self.produce(acks)
        self.c.settle(rounds)

    @rule()
    def flush_leader(self) -> None:
        self.c.flush_leader()

    @rule(delta_ms=st.sampled_from([1, 100, 5_000, 20_000]))
    def advance(self, delta_ms: int) -> None:
        self.c.advance(delta_ms)

    @rule()
    def resend_alter_partition(self) -> None:
        self.c.resend_alter_partition()

    @rule(broker=st.integers(0, REPLICAS - 1))
    def restart_follower(self, broker: int) -> None:
        if broker != self.c.controller.leader:
            self.c.restart(broker)

    @rule(pick=st.integers(0, REPLICAS - 1))
    def change_leader(self, pick: int) -> None:
        ctrl = self.c.controller
        candidates = sorted(ctrl.isr - {ctrl.leader})
        if candidates:
            self.c.elect(candidates[pick % len(candidates)])

    @invariant()
    def isr_within_assignment(self) -> None:
        if self.cluster is None:
            return
        assigned = set(self.c.assigned)
        assert self.c.controller.isr <= assigned
        assert self.c.controller.leader in self.c.controller.isr
        for node in self.c.nodes.values():
            assert node.partition.isr <= assigned
            assert node.partition.maximal_isr <= assigned

    @invariant()
    def acked_records_on_every_isr_replica(self) -> None:
        if self.cluster is None:
            return
        for broker_id in self.c.controller.isr:
            log = self.c.nodes[broker_id].log
            held = dict(batches_below(log, log.log_end_offset))
            for offset, data in self.c.acked.items():
                assert held.get(offset) == data, f"acked offset {offset} missing on {broker_id}"

    @invariant()
    def logs_agree_below_high_watermark(self) -> None:
        if self.cluster is None:
            return
        for node in self.c.nodes.values():
            for offset, data in batches_below(node.log, node.log.high_watermark):
                assert self.c.committed.get(offset) == data, (
                    f"broker {node.broker_id} offset {offset} below HW differs from history"
                )


ReplicationMachine.TestCase.settings = settings(
    max_examples=50,
    stateful_step_count=50,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestReplication = ReplicationMachine.TestCase
