"""ReplicaManager without sockets, threads or clocks: two managers wired by hand."""

from __future__ import annotations

import pytest

from replog.broker import BrokerConfig, ReplicaManager
from replog.clock import ManualClock
from replog.errors import ErrorCode, InvalidConfigError
from replog.isr import DurabilityMode
from replog.log import LogManager, encode_batch
from replog.metadata.types import PartitionState
from tests.metadata_feed import feed, load_snapshot, set_state


def _manager(tmp_path: object, broker_id: int) -> ReplicaManager:
    config = BrokerConfig(broker_id=broker_id, log_dirs=(f"{tmp_path}/b{broker_id}",))
    logs = LogManager.open(list(config.log_dirs), clock=ManualClock())
    return ReplicaManager(broker_id, logs, config.partition_config(), broker_epoch=broker_id)


def _flush(rm: ReplicaManager, now_ms: int) -> None:
    pending = rm.begin_flushes()
    for _, flush in pending:
        flush.run()
    rm.complete_flushes(pending, now_ms)


def test_acks_all_completes_after_follower_fetches_and_flushes(tmp_path: object) -> None:
    leader, follower = _manager(tmp_path, 1), _manager(tmp_path, 2)
    state = PartitionState(replicas=(1, 2), leader=1, leader_epoch=0, isr=(1, 2))
    set_state(leader, "t", 0, state, 0)
    set_state(follower, "t", 0, state, 0)
    request_id, result = leader.produce("t", 0, encode_batch([b"v"], base_timestamp=0), -1, 1)
    assert result is None
    _flush(leader, 2)
    for now_ms in (3, 4, 5):
        for tp, request in follower.fetch_requests_for(1):
            response = leader.fetch(*tp, request, now_ms)
            follower.on_fetch_response(tp, response, now_ms)
        _flush(follower, now_ms)
    ready = leader.take_ready()
    assert [(tp, r.request_id, r.error_code) for tp, r in ready.produce_results] == [
        (("t", 0), request_id, ErrorCode.NONE)
    ]
    assert follower.log("t", 0) is not None and follower.log("t", 0).log_end_offset == 1  # type: ignore[union-attr]


@pytest.mark.parametrize("acks", [-1, 1, 0])
def test_every_produce_refused_while_session_is_not_connected(tmp_path: object, acks: int) -> None:
    """Cut off from the controller, a leader fences itself: nothing is appended, acks=1 and
    acks=0 included (a broker that cannot reach the active controller is fenced), and it
    appends again once the session is back."""
    rm = _manager(tmp_path, 1)
    set_state(rm, "t", 0, PartitionState.initial((1,)), 0)
    rm.set_metadata_current(False)
    _, result = rm.produce("t", 0, encode_batch([b"v"], base_timestamp=0), acks, 1)
    assert result is not None and result.error_code is ErrorCode.NOT_LEADER_OR_FOLLOWER
    log = rm.log("t", 0)
    assert log is not None and log.log_end_offset == 0
    rm.set_metadata_current(True)
    _, result = rm.produce("t", 0, encode_batch([b"w"], base_timestamp=0), 1, 2)
    assert result is not None and result.error_code is ErrorCode.NONE and log.log_end_offset == 1


def test_unknown_partition_and_checkpoints(tmp_path: object) -> None:
    rm = _manager(tmp_path, 1)
    _, result = rm.produce("nope", 0, b"", 1, 0)
    assert result is not None and result.error_code is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    due = rm.checkpoint_due(0)
    assert due is not None and rm.checkpoint_due(1) is None
    assert due.write() == []  # the three files of its one log dir, written


def test_broker_config_validates_and_loads_files(tmp_path: object) -> None:
    with pytest.raises(InvalidConfigError):
        BrokerConfig(broker_id=-1, log_dirs=("x",))
    with pytest.raises(InvalidConfigError):
        BrokerConfig(broker_id=1, log_dirs=("x",), inflight_requests_max=0)
    path = f"{tmp_path}/b.toml"
    with open(path, "w") as f:
        f.write('broker_id = 3\nlog_dirs = ["/tmp/x"]\ndurability = "replicated"\n')
    config = BrokerConfig.from_file(path)
    assert config.broker_id == 3 and config.durability is DurabilityMode.REPLICATED
    with open(f"{tmp_path}/b.json", "w") as f:
        f.write('{"broker_id": 1, "log_dirs": ["/tmp/y"], "bogus": 1}')
    with pytest.raises(InvalidConfigError):
        BrokerConfig.from_file(f"{tmp_path}/b.json")


def test_a_fenced_registration_leads_nothing_until_admitted(tmp_path: object) -> None:
    """While this incarnation's registration is fenced (or the image still shows an older
    one), a state naming this broker leader is not acted on: the replica follows nobody; once
    the controller admits the incarnation, the current state applies."""
    from replog.metadata.types import (
        BrokerChanged,
        BrokerChangeReason,
        BrokerInfo,
        MetadataSnapshot,
    )

    rm = _manager(tmp_path, 1)
    fenced = BrokerInfo(broker_id=1, incarnation_epoch=1, host="h", port=1, fenced=True,
                        admitted=False)  # fmt: skip
    state = PartitionState(replicas=(1,), leader=1, leader_epoch=3, isr=(1,), partition_epoch=5)
    snapshot = MetadataSnapshot(seq=1, brokers={1: fenced}, topics={}, partitions={("t", 0): state},
                                controller=None, controller_epoch=0)  # fmt: skip
    load_snapshot(rm, snapshot, 0)
    replica = rm.partition("t", 0)
    assert replica is not None and not replica.is_leader and replica.leader_id == -1
    _, result = rm.produce("t", 0, encode_batch([b"v"], base_timestamp=0), 1, 1)
    assert result is not None and result.error_code is ErrorCode.NOT_LEADER_OR_FOLLOWER
    admitted = BrokerInfo(broker_id=1, incarnation_epoch=1, host="h", port=1)
    feed(rm,
        [BrokerChanged(seq=2, reason=BrokerChangeReason.UPDATED, broker_id=1,
                       incarnation_epoch=1, broker=admitted)], 2
    )  # fmt: skip
    assert replica.is_leader and replica.leader_epoch == 3


def test_a_registration_gone_from_the_image_leads_nothing(tmp_path: object) -> None:
    """Once the image has shown this incarnation's registration, its disappearance (the
    session expired) fences it: a state naming this broker leader is not acted on, as while it
    was fenced (found by the simulator: a broker that registered unclean and lost its session
    before being admitted led on from a log that had lost its tail)."""
    from replog.metadata.types import (
        BrokerChanged,
        BrokerChangeReason,
        BrokerInfo,
        MetadataSnapshot,
    )

    rm = _manager(tmp_path, 1)
    fenced = BrokerInfo(broker_id=1, incarnation_epoch=1, host="h", port=1, fenced=True,
                        admitted=False, clean_shutdown=False)  # fmt: skip
    snapshot = MetadataSnapshot(seq=1, brokers={1: fenced}, topics={}, partitions={},
                                controller=None, controller_epoch=0)  # fmt: skip
    load_snapshot(rm, snapshot, 0)
    assert rm.is_fenced_here()
    feed(rm,
        [BrokerChanged(seq=2, reason=BrokerChangeReason.EXPIRED, broker_id=1,
                       incarnation_epoch=1, broker=None)], 1
    )  # fmt: skip
    assert rm.is_fenced_here()
    state = PartitionState(replicas=(1,), leader=1, leader_epoch=0, isr=(1,), partition_epoch=0)
    set_state(rm, "t", 0, state, 2)
    replica = rm.partition("t", 0)
    assert replica is not None and not replica.is_leader
    _, result = rm.produce("t", 0, encode_batch([b"v"], base_timestamp=0), 1, 3)
    assert result is not None and result.error_code is ErrorCode.NOT_LEADER_OR_FOLLOWER


def test_a_follower_whose_log_went_offline_fetches_nothing(tmp_path: object) -> None:
    """A failed fsync takes the log offline; the follower then sends no fetch, whose offset
    would report a log end the fsync never made durable (found by the simulator: the leader
    counted it toward the HW, and a power cut lost an acks=all record in FSYNC mode)."""
    follower = _manager(tmp_path, 2)
    state = PartitionState(replicas=(1, 2), leader=1, leader_epoch=0, isr=(1, 2))
    set_state(follower, "t", 0, state, 0)
    assert [tp for tp, _ in follower.fetch_requests_for(1)] == [("t", 0)]
    follower.fail_flush(("t", 0), "injected fsync failure")
    assert follower.fetch_requests_for(1) == []
