"""Broker failure through the ControllerService: re-election in assignment order, the last ISR
member lost with and without ELR / unclean election, KIP-966's last replica standing, and
failures that happen while no controller is active."""

from __future__ import annotations

import time

import pytest

from replog.controller import ControllerConfig, TopicPolicy
from replog.coord.contract import Coordinator
from replog.election.state_change import StateChangeKind
from replog.errors import ErrorCode
from replog.metadata.types import NO_LEADER, CreateTopic, LeaderRecoveryState

from ._harness import Cluster

CONTROLLER = 100


def _topic(cluster: Cluster, name: str, replicas: list[int]) -> None:
    cluster.submit(
        CreateTopic(topic=name, partition_count=1, replication_factor=len(replicas),
                    replica_assignment=[replicas])
    )  # fmt: skip


def test_clean_election_follows_assignment_order(coordinator: Coordinator) -> None:
    """AR [3,1,2], ISR {1,2}, leader 1; 1 is fenced -> leader 2, ISR {2}."""
    cluster = Cluster(coordinator)
    cluster.register(1, 2, 3, CONTROLLER)
    controller = cluster.controller(CONTROLLER)
    _topic(cluster, "s12", [3, 1, 2])
    cluster.poll(controller)
    assert (cluster.state("s12").leader, set(cluster.state("s12").isr)) == (3, {1, 2, 3})
    cluster.fence(3)
    cluster.poll(controller)
    cluster.fence(3, fenced=False)  # back, but not in the ISR
    cluster.poll(controller)
    before = cluster.state("s12")
    assert (before.leader, set(before.isr)) == (1, {1, 2})

    cluster.fence(1)
    changes = cluster.poll(controller)
    after = cluster.state("s12")
    assert (after.leader, after.isr) == (2, (2,))
    assert after.leader_epoch == before.leader_epoch + 1
    assert after.partition_epoch == before.partition_epoch + 1
    leaders = [
        c.target.broker_id for c in changes if c.kind is StateChangeKind.BECOME_LEADER and c.target
    ]
    assert leaders == [2]
    assert all(c.leader_epoch == after.leader_epoch for c in changes)


@pytest.mark.parametrize("unclean", [False, True])
def test_last_isr_member_fenced_without_elr(coordinator: Coordinator, unclean: bool) -> None:
    """The last ISR member lost (legacy, ELR off): ISR stays {1} and the partition goes offline
    until 1 returns; with unclean election, 2 leads RECOVERING and may not grow its ISR until
    RECOVERED."""
    policy = TopicPolicy(eligible_leader_replicas=False, unclean_leader_election=unclean)
    cluster = Cluster(coordinator, ControllerConfig(topic_policies={"s13": policy}))
    cluster.register(1, 2, 3, CONTROLLER)
    controller = cluster.controller(CONTROLLER)
    _topic(cluster, "s13", [1, 2, 3])
    cluster.poll(controller)
    cluster.propose_isr("s13", 0, [1])  # the leader shrank its ISR to itself
    cluster.poll(controller)
    assert cluster.state("s13").isr == (1,)

    cluster.fence(1)
    cluster.poll(controller)
    state = cluster.state("s13")
    if not unclean:
        assert (state.leader, state.isr) == (NO_LEADER, (1,))
        cluster.fence(1, fenced=False)
        cluster.poll(controller)
        assert (cluster.state("s13").leader, cluster.state("s13").isr) == (1, (1,))
        return
    assert (state.leader, state.isr) == (2, (2,))
    assert state.leader_recovery_state is LeaderRecoveryState.RECOVERING
    early = cluster.propose_isr("s13", 0, [2, 3], recovery=LeaderRecoveryState.RECOVERING)
    cluster.poll(controller)
    assert cluster.outcome(early) is ErrorCode.INVALID_REQUEST
    recovered = cluster.propose_isr("s13", 0, [2])
    cluster.poll(controller)
    assert cluster.outcome(recovered) is ErrorCode.NONE
    assert cluster.state("s13").leader_recovery_state is LeaderRecoveryState.RECOVERED
    grow = cluster.propose_isr("s13", 0, [2, 3])
    cluster.poll(controller)
    assert cluster.outcome(grow) is ErrorCode.NONE and set(cluster.state("s13").isr) == {2, 3}


def test_last_replica_standing_with_elr(coordinator: Coordinator) -> None:
    """The last replica standing (KIP-966, ELR on by default): ISR {0,1,2}, min ISR 2."""
    policy = TopicPolicy(min_insync_replicas=2)
    cluster = Cluster(coordinator, ControllerConfig(topic_policies={"s15": policy}))
    cluster.register(0, 1, 2, CONTROLLER)
    controller = cluster.controller(CONTROLLER)
    _topic(cluster, "s15", [0, 1, 2])
    cluster.poll(controller)

    cluster.fence(0)
    cluster.poll(controller)
    state = cluster.state("s15")
    assert (set(state.isr), state.elr) == ({1, 2}, ())  # ISR still >= min ISR
    cluster.fence(1)
    cluster.poll(controller)
    state = cluster.state("s15")
    assert (state.leader, state.isr, state.elr) == (2, (2,), (1,))
    cluster.fence(2)
    cluster.poll(controller)
    state = cluster.state("s15")
    assert (state.leader, state.isr, set(state.elr)) == (NO_LEADER, (), {1, 2})

    cluster.fence(1, fenced=False)
    cluster.poll(controller)
    state = cluster.state("s15")
    assert (state.leader, state.isr, state.elr) == (1, (1,), (2,))


@pytest.mark.parametrize("via_snapshot", [False, True])
def test_unclean_restart_of_last_replica_standing(
    coordinator: Coordinator, via_snapshot: bool
) -> None:
    """The last replica standing, last step: 2 (ISR {2}, ELR {1}) crashes uncleanly and
    re-registers: it leaves ISR and ELR, is not elected while 1 is down, and 1 is elected when
    it returns. With ``via_snapshot`` the controller dies before the registration and its
    successor only sees it in its snapshot."""
    policy = TopicPolicy(min_insync_replicas=2)
    cluster = Cluster(coordinator, ControllerConfig(topic_policies={"s15": policy}))
    cluster.register(0, 1, 2, CONTROLLER, CONTROLLER + 1)
    controller = cluster.controller(CONTROLLER)
    _topic(cluster, "s15", [0, 1, 2])
    cluster.poll(controller)
    cluster.fence(0)
    cluster.poll(controller)
    cluster.fence(1)
    cluster.poll(controller)
    state = cluster.state("s15")
    assert (state.leader, state.isr, state.elr) == (2, (2,), (1,))

    old_epoch = cluster.brokers[2].incarnation_epoch
    cluster.expire(2)  # the crash: its session ends (real stores record it a little later)
    deadline = time.monotonic() + 10
    while cluster.state("s15").leader != NO_LEADER and time.monotonic() < deadline:
        cluster.poll(controller)
        time.sleep(0.02)
    state = cluster.state("s15")
    assert (state.leader, state.isr, set(state.elr)) == (NO_LEADER, (), {1, 2})
    if via_snapshot:
        cluster.expire(CONTROLLER)
    cluster.register(2, clean_shutdown=False)  # no clean-shutdown marker: a new incarnation
    assert cluster.brokers[2].incarnation_epoch > old_epoch
    assert not cluster.brokers[2].clean_shutdown
    if via_snapshot:
        controller = cluster.controller(CONTROLLER + 1)
    cluster.poll(controller)
    state = cluster.state("s15")
    assert (state.leader, state.isr, state.elr) == (NO_LEADER, (), (1,))  # 2 is not elected

    cluster.fence(1, fenced=False)
    cluster.poll(controller)
    state = cluster.state("s15")
    assert (state.leader, state.isr, state.elr) == (1, (1,), ())


def test_clean_restart_keeps_the_elr_member(coordinator: Coordinator) -> None:
    """The same restart after a clean shutdown: 2 stays in the ELR and is elected."""
    policy = TopicPolicy(min_insync_replicas=2)
    cluster = Cluster(coordinator, ControllerConfig(topic_policies={"s15": policy}))
    cluster.register(0, 1, 2, CONTROLLER)
    controller = cluster.controller(CONTROLLER)
    _topic(cluster, "s15", [0, 1, 2])
    cluster.poll(controller)
    cluster.fence(0)
    cluster.fence(1)
    cluster.poll(controller)
    cluster.expire(2)
    deadline = time.monotonic() + 10
    while cluster.state("s15").leader != NO_LEADER and time.monotonic() < deadline:
        cluster.poll(controller)
        time.sleep(0.02)
    cluster.register(2)
    cluster.poll(controller)
    state = cluster.state("s15")
    assert state.leader == 2 and 2 in state.isr


def test_broker_lost_while_no_controller_is_handled_at_failover(coordinator: Coordinator) -> None:
    cluster = Cluster(coordinator)
    cluster.register(1, 2, 3, CONTROLLER, CONTROLLER + 1)
    old = cluster.controller(CONTROLLER)
    _topic(cluster, "t", [1, 2, 3])
    cluster.poll(old)
    cluster.expire(CONTROLLER)
    cluster.expire(1)  # the leader dies while nobody controls
    new = cluster.controller(CONTROLLER + 1)
    cluster.poll(new)
    state = cluster.state("t")
    assert (state.leader, set(state.isr)) == (2, {2, 3})
    assert state.leader_epoch == 1


def test_controlled_shutdown_moves_leadership(coordinator: Coordinator) -> None:
    cluster = Cluster(coordinator)
    cluster.register(1, 2, 3, CONTROLLER)
    controller = cluster.controller(CONTROLLER)
    _topic(cluster, "t", [1, 2, 3])
    cluster.poll(controller)
    coordinator.update_broker(1, cluster.brokers[1].incarnation_epoch, in_controlled_shutdown=True)
    cluster.poll(controller)
    state = cluster.state("t")
    assert (state.leader, set(state.isr)) == (2, {2, 3})


def _unclean_restart_and_rejoin(cluster: Cluster, controller: object, broker_id: int) -> None:
    """``broker_id`` crashes, re-registers without a clean shutdown (leaving the ISR), catches
    up and is added back by its leader's AlterPartition."""
    from replog.controller import ControllerService

    assert isinstance(controller, ControllerService)
    cluster.expire(broker_id)
    cluster.settle(controller)
    cluster.register(broker_id, clean_shutdown=False)
    cluster.settle(controller)
    assert broker_id not in cluster.state("t").isr
    epochs = {b: info.incarnation_epoch for b, info in cluster.brokers.items()}
    isr = [*cluster.state("t").isr, broker_id]
    request = cluster.propose_isr("t", 0, isr, broker_epochs=epochs)
    cluster.settle(controller)
    assert cluster.outcome(request) is ErrorCode.NONE
    assert broker_id in cluster.state("t").isr


@pytest.mark.parametrize("crash_before_mark", [False, True])
def test_unclean_restart_is_handled_once_across_failover(
    coordinator: Coordinator, crash_before_mark: bool
) -> None:
    """The black-box failover that wedged every partition: 2 and 3 each restart uncleanly,
    leave the ISR, catch up and rejoin; then the controller fails over. The new controller must
    not remove them again (it did, from the snapshot's clean_shutdown=False); once the leader
    dies too, a leader is elected from {2, 3}. With ``crash_before_mark`` the old controller
    dies between removing 3 and recording that it did: its successor finishes the job (3 has
    not rejoined yet, so removing it again loses nothing) and 3 rejoins afterwards."""
    from replog.metadata.types import BrokerChanged

    policy = TopicPolicy(min_insync_replicas=2)
    cluster = Cluster(coordinator, ControllerConfig(topic_policies={"t": policy}))
    cluster.register(1, 2, 3, CONTROLLER, CONTROLLER + 1)
    controller = cluster.controller(CONTROLLER)
    _topic(cluster, "t", [1, 2, 3])
    cluster.settle(controller)
    _unclean_restart_and_rejoin(cluster, controller, 2)
    if crash_before_mark:
        cluster.expire(3)
        cluster.settle(controller)
        cluster.register(3, clean_shutdown=False)
        controller.coordinator = _NoMark(controller.coordinator)  # type: ignore[assignment]
        cluster.poll(controller)
        assert 3 not in cluster.state("t").isr
        assert not cluster.coord.get_broker(3).admitted  # type: ignore[union-attr]
    else:
        _unclean_restart_and_rejoin(cluster, controller, 3)
    assert set(cluster.state("t").isr) == ({1, 2} if crash_before_mark else {1, 2, 3})
    marked = [
        c.broker.broker_id
        for c in cluster.feed()
        if isinstance(c, BrokerChanged) and c.broker is not None
        and c.broker.admitted
    ]  # fmt: skip
    assert 2 in marked

    cluster.expire(CONTROLLER)
    successor = cluster.controller(CONTROLLER + 1)
    cluster.settle(successor)
    assert {1, 2} <= set(cluster.state("t").isr)  # 2 was not removed a second time
    assert cluster.coord.get_broker(3).admitted  # type: ignore[union-attr]
    if crash_before_mark:
        epochs = {b: info.incarnation_epoch for b, info in cluster.brokers.items()}
        request = cluster.propose_isr("t", 0, [1, 2, 3], broker_epochs=epochs)
        cluster.settle(successor)
        assert cluster.outcome(request) is ErrorCode.NONE
    assert set(cluster.state("t").isr) == {1, 2, 3}

    cluster.expire(1)  # the leader dies: 2 and 3 hold every committed record
    deadline = time.monotonic() + 10  # real stores record the expiry a little later
    while cluster.state("t").leader == 1 and time.monotonic() < deadline:
        cluster.poll(successor)
        time.sleep(0.02)
    state = cluster.state("t")
    assert state.leader in (2, 3) and set(state.isr) == {2, 3}


class _NoMark:
    """A coordinator proxy on which the controller 'crashes' right before it admits a
    registration: the admission is not written and the controller stops acting."""

    def __init__(self, inner: Coordinator) -> None:
        self._inner = inner

    def __getattr__(self, name: str) -> object:
        if name == "admit_broker":
            from replog.coord.errors import SessionExpiredError

            def crash(*args: object, **kwargs: object) -> bool:
                raise SessionExpiredError(CONTROLLER, -1, None)

            return crash
        return getattr(self._inner, name)


def test_a_damaged_replica_leaves_the_isr_and_leadership_moves(coordinator: Coordinator) -> None:
    """A broker reports a damaged batch in its replica: the controller takes it out of the ISR
    (and ELR) and elects a healthy replica; a report from a stale incarnation is refused."""
    from replog.metadata.types import DamagedReplica

    cluster = Cluster(coordinator)
    cluster.register(1, 2, 3, CONTROLLER)
    controller = cluster.controller(CONTROLLER)
    _topic(cluster, "t", [1, 2, 3])
    cluster.settle(controller)
    stale = cluster.submit(
        DamagedReplica(topic="t", partition=0, broker_id=1,
                       broker_epoch=cluster.brokers[1].incarnation_epoch - 1, first_offset=5)
    )  # fmt: skip
    cluster.settle(controller)
    assert cluster.outcome(stale) is ErrorCode.STALE_BROKER_EPOCH
    assert cluster.state("t").leader == 1
    report = cluster.submit(
        DamagedReplica(topic="t", partition=0, broker_id=1,
                       broker_epoch=cluster.brokers[1].incarnation_epoch, first_offset=5)
    )  # fmt: skip
    cluster.settle(controller)
    assert cluster.outcome(report) is ErrorCode.NONE
    state = cluster.state("t")
    assert state.leader == 2 and set(state.isr) == {2, 3} and 1 not in state.elr


def test_a_fenced_registration_never_inherits_its_old_leadership(coordinator: Coordinator) -> None:
    """A broker restarts (a new incarnation, registered fenced as the product's brokers do)
    before any controller processed its old incarnation's end: the stored state still names
    it leader at the old epoch. Admission moves that leadership (here: nobody else is in the
    ISR, so the partition is leaderless at a new epoch), admits the broker, and then elects it
    again at a newer epoch -- the new incarnation never leads on the old incarnation's epoch."""
    cluster = Cluster(coordinator)
    cluster.register(1, 2, CONTROLLER)
    controller = cluster.controller(CONTROLLER)
    _topic(cluster, "t", [1, 2])
    cluster.settle(controller)
    cluster.fence(2)
    cluster.settle(controller)
    before = cluster.state("t")
    assert (before.leader, before.isr) == (1, (1,))
    old_epoch = cluster.brokers[1].incarnation_epoch
    cluster.expire(1)
    cluster.expire(CONTROLLER)  # nobody processes the end of broker 1's old incarnation
    deadline = time.monotonic() + 10
    while True:
        try:
            cluster.brokers[1] = cluster.coord.register_broker(
                1, "127.0.0.1", 9001, session_timeout_ms=30_000, fenced=True
            )
            break
        except Exception:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)
    assert cluster.brokers[1].incarnation_epoch > old_epoch
    assert cluster.state("t") == before  # stale: it names broker 1 at the old epoch
    cluster.register(CONTROLLER + 1)
    successor = cluster.controller(CONTROLLER + 1)
    cluster.settle(successor)
    history = cluster.history("t", 0)
    assert any(s.leader != 1 and s.leader_epoch > before.leader_epoch for s in history)
    final = cluster.state("t")
    assert final.leader == 1 and final.leader_epoch >= before.leader_epoch + 2
    info = cluster.coord.get_broker(1)
    assert info is not None and info.admitted and not info.fenced
