"""`MetadataMachine` on its own: commands applied at offsets, what the feed and snapshots hold,
and that applying the same log gives the same image."""

from __future__ import annotations

import json

import attrs
import pytest

from replog.coord.errors import (
    BrokerIdInUseError,
    FencedControllerError,
    MustResyncError,
    SessionExpiredError,
    TopicExistsError,
)
from replog.errors import CorruptRecordError
from replog.metadata.types import (
    ALL_BROKERS,
    BrokerChanged,
    BrokerChangeReason,
    BrokerConfigsChanged,
    CasStatus,
    ControllerChanged,
    MetadataSnapshot,
    PartitionState,
    ProducerIdBlock,
    SessionState,
    StartReplica,
)
from replog.quorum import codec as raft_codec
from replog.quorum.commands import (
    AllocateProducerIdsWrite,
    AlterBrokerConfigsWrite,
    AlterTopicConfigsWrite,
    Barrier,
    CasPartitionState,
    ChangesSince,
    Command,
    CreateTopicWrite,
    ElectController,
    ExpireSession,
    FeedHead,
    GetBrokerConfigs,
    GetProducerIdBlock,
    GetSnapshot,
    GetTopic,
    Heartbeat,
    InitCluster,
    RegisterBroker,
    SubmitAdminRequest,
    TrimHistory,
)
from replog.quorum.machine import MetadataMachine
from replog.raft.entries import Entry


def register(broker_id: int, timeout_ms: int = 6_000) -> RegisterBroker:
    return RegisterBroker(
        broker_id=broker_id,
        host="h",
        port=9000 + broker_id,
        rack=None,
        session_timeout_ms=timeout_ms,
        clean_shutdown=True,
        fenced=False,
    )


def topic(name: str, controller_epoch: int, partitions: int = 2) -> CreateTopicWrite:
    return CreateTopicWrite(
        topic=name,
        topic_id=f"{len(name):032x}",
        replica_assignment=tuple((1, 2) for _ in range(partitions)),
        controller_epoch=controller_epoch,
        initial_states=None,
        configs=(("retention.ms", "1000"),),
    )


class Log:
    """Applies commands at growing offsets, as the records of a metadata log (offset 0 is the
    leader-change record, which never reaches the machine)."""

    def __init__(self, machine: MetadataMachine | None = None) -> None:
        self.machine = machine or MetadataMachine()
        self.offset = 1
        self.records: list[tuple[int, bytes]] = []

    def apply(self, command: Command) -> object:
        value = raft_codec.dumps(command)
        self.records.append((self.offset, value))
        result = self.machine.apply(Entry(self.offset, 1, value))
        self.offset += 1
        return result


def busy_log() -> Log:
    log = Log()
    for b in (1, 2, 3):
        log.apply(register(b))
    log.apply(ElectController(broker_id=1, incarnation_epoch=1))
    log.apply(topic("t", 1))
    log.apply(Barrier())
    state = PartitionState.initial((1, 2))
    log.apply(
        CasPartitionState(
            topic="t",
            partition=0,
            expected_partition_epoch=0,
            new_state=attrs.evolve(state, isr=(1,)),
            controller_epoch=1,
        )
    )
    log.apply(SubmitAdminRequest(target=2, payload=StartReplica(topic="t", partition=1)))
    return log


def test_feed_seq_and_incarnation_are_the_log_offset() -> None:
    log = Log()
    log.apply(Barrier())  # offset 1: no feed record
    info = log.apply(register(7))  # offset 2
    assert info.incarnation_epoch == 2  # type: ignore[attr-defined]
    batch = log.machine.query(ChangesSince(0, 100))
    assert [c.seq for c in batch.changes] == [2]  # type: ignore[attr-defined]
    assert batch.next_seq == 3  # type: ignore[attr-defined]
    log.apply(Barrier())
    assert log.machine.query(FeedHead()) == 3, "a record without feed records moves no head"


def test_errors_are_outcomes_and_change_nothing() -> None:
    log = busy_log()
    before = log.machine.state()
    assert isinstance(log.apply(register(1)), BrokerIdInUseError)
    assert isinstance(log.apply(topic("t", 1)), TopicExistsError)
    assert isinstance(log.apply(topic("u", 99)), FencedControllerError)
    assert isinstance(
        log.apply(ElectController(broker_id=2, incarnation_epoch=99)), SessionExpiredError
    )
    stale = CasPartitionState(
        topic="t",
        partition=0,
        expected_partition_epoch=0,
        new_state=PartitionState.initial((1, 2)),
        controller_epoch=1,
    )
    result = log.apply(stale)
    assert result.status is CasStatus.VERSION_MISMATCH  # type: ignore[attr-defined]
    assert log.machine.state() == before


def test_expiry_ends_the_session_and_the_controller_role() -> None:
    log = busy_log()
    assert log.machine.query(Heartbeat(1, 1)) is SessionState.CONNECTED
    assert log.apply(ExpireSession(broker_id=1, incarnation_epoch=999)) is None  # not current
    offset = log.offset
    assert log.apply(ExpireSession(broker_id=1, incarnation_epoch=1)) == 1
    assert isinstance(log.machine.query(Heartbeat(1, 1)), SessionExpiredError)
    changes = log.machine.query(ChangesSince(offset, 10)).changes  # type: ignore[attr-defined]
    assert changes == (
        BrokerChanged(
            seq=offset,
            reason=BrokerChangeReason.EXPIRED,
            broker_id=1,
            incarnation_epoch=1,
            broker=None,
        ),
        ControllerChanged(seq=offset, controller=None),
    )


def test_snapshot_restores_the_image_without_history() -> None:
    log = busy_log()
    image = log.machine.query(GetSnapshot())
    copy = MetadataMachine()
    copy.restore(log.machine.snapshot())
    assert copy.state() == log.machine.state()
    restored = copy.query(GetSnapshot())
    assert isinstance(restored, MetadataSnapshot) and restored == image
    assert isinstance(copy.query(ChangesSince(1, 10)), MustResyncError)
    # both go on identically
    follow = Log(copy)
    follow.offset = log.offset
    for machine_log in (log, follow):
        machine_log.apply(register(4))
    assert copy.state() == log.machine.state()
    assert copy.query(ChangesSince(image.seq, 10)) == log.machine.query(ChangesSince(image.seq, 10))


def test_a_replayed_log_gives_the_same_image() -> None:
    log = busy_log()
    log.apply(TrimHistory(before_seq=5))
    replay = MetadataMachine()
    for offset, value in log.records:
        replay.apply(Entry(offset, 1, value))
    assert replay.state() == log.machine.state()
    assert replay.query(ChangesSince(5, 100)) == log.machine.query(ChangesSince(5, 100))
    assert isinstance(replay.query(ChangesSince(4, 100)), MustResyncError)


def test_a_corrupt_record_or_snapshot_is_an_error() -> None:
    machine = MetadataMachine()
    with pytest.raises(CorruptRecordError):
        machine.apply(Entry(1, 1, b"{not json"))
    with pytest.raises(CorruptRecordError):
        machine.apply(Entry(1, 1, raft_codec.dumps(FeedHead())))  # a query is no command
    before = busy_log().machine
    state = before.state()
    with pytest.raises(CorruptRecordError):
        before.restore([b"[]"])
    assert before.state() == state, "a bad snapshot changes nothing"


def test_producer_id_blocks_never_overlap_across_a_snapshot() -> None:
    """The next free producer id lives in the image, so a voter restored from a snapshot hands
    out the same next block as one that applied the whole log (no id twice)."""
    log = busy_log()

    def allocate(broker_id: int, count: int, controller_epoch: int = 1) -> AllocateProducerIdsWrite:
        return AllocateProducerIdsWrite(
            broker_id=broker_id,
            broker_epoch=broker_id,
            count=count,
            controller_epoch=controller_epoch,
        )

    first = log.apply(allocate(2, 10))
    assert first == ProducerIdBlock(broker_id=2, broker_epoch=2, first_id=0, size=10)
    fenced = log.apply(allocate(3, 10, controller_epoch=0))
    assert isinstance(fenced, FencedControllerError)
    copy = MetadataMachine()
    copy.restore(log.machine.snapshot())
    assert copy.query(GetProducerIdBlock(2)) == first
    follow = Log(copy)
    follow.offset = log.offset
    command = allocate(3, 5)
    after = [machine_log.apply(command) for machine_log in (log, follow)]
    assert after[0] == after[1] == ProducerIdBlock(broker_id=3, broker_epoch=3, first_id=10, size=5)
    assert copy.state() == log.machine.state()


def test_dynamic_configs_are_fenced_applied_and_survive_a_snapshot() -> None:
    """Broker and topic configs live in the image: a fenced write changes nothing, an accepted
    one writes its feed record at its offset, and a voter restored from a snapshot holds the
    same configs (and goes on identically)."""
    log = busy_log()
    fenced = log.apply(
        AlterBrokerConfigsWrite(broker_id=7, configs=(("a", "1"),), controller_epoch=0)
    )
    assert isinstance(fenced, FencedControllerError)
    for broker_id, configs in ((7, (("a", "1"),)), (ALL_BROKERS, (("b", "2"),)), (9, ())):
        offset = log.offset
        assert (
            log.apply(
                AlterBrokerConfigsWrite(broker_id=broker_id, configs=configs, controller_epoch=1)
            )
            is None
        )
        assert log.machine.query(ChangesSince(offset, 10)).changes == (
            BrokerConfigsChanged(seq=offset, broker_id=broker_id, configs=configs),
        )
    altered = log.apply(
        AlterTopicConfigsWrite(
            topic="t", configs=(("cleanup.policy", "compact"),), controller_epoch=1
        )
    )
    assert log.machine.query(GetTopic("t")) == altered
    wanted = {ALL_BROKERS: (("b", "2"),), 7: (("a", "1"),)}
    assert log.machine.query(GetBrokerConfigs()) == wanted
    copy = MetadataMachine()
    copy.restore(log.machine.snapshot())
    assert copy.state() == log.machine.state()
    assert copy.query(GetBrokerConfigs()) == wanted
    image = copy.query(GetSnapshot())
    assert isinstance(image, MetadataSnapshot) and image.broker_configs == wanted
    assert image.topics["t"].configs == (("cleanup.policy", "compact"),)
    follow = Log(copy)
    follow.offset = log.offset
    for machine_log in (log, follow):
        machine_log.apply(AlterBrokerConfigsWrite(broker_id=7, configs=(), controller_epoch=1))
    assert copy.state() == log.machine.state()
    assert copy.query(GetBrokerConfigs()) == {ALL_BROKERS: (("b", "2"),)}


def test_the_first_cluster_id_applied_is_the_stores_for_good() -> None:
    log = Log()
    assert log.machine.cluster_id is None
    assert log.machine.query(GetSnapshot()).cluster_id is None  # type: ignore[attr-defined]
    assert log.apply(InitCluster(cluster_id="first")) == "first"
    assert log.apply(InitCluster(cluster_id="second")) == "first"  # a leader that lagged
    assert isinstance(log.apply(InitCluster(cluster_id="")), ValueError)
    assert log.machine.query(GetSnapshot()).cluster_id == "first"  # type: ignore[attr-defined]
    copy = MetadataMachine()
    copy.restore(log.machine.snapshot())
    assert copy.cluster_id == "first" and copy.state() == log.machine.state()


def test_a_snapshot_written_before_cluster_ids_still_loads() -> None:
    meta = json.loads(MetadataMachine().snapshot()[0])
    del meta["cluster_id"]  # the meta record as a voter without cluster ids wrote it
    machine = MetadataMachine()
    machine.restore([json.dumps(meta).encode()])
    assert machine.cluster_id is None
