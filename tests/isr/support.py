"""Test helpers for replog.isr: real `Log`s on temp dirs, batches, and message delivery."""

from __future__ import annotations

from pathlib import Path

import attrs

from replog.clock import ManualClock
from replog.errors import ErrorCode
from replog.isr import (
    BytesSlice,
    FollowerOutcome,
    Partition,
    PartitionConfig,
    PartitionFetchRequest,
    PartitionFetchResponse,
    ReplicaLog,
    StateChange,
)
from replog.log import (
    FaultInjectingFileSystem,
    Log,
    LogConfig,
    decode_records,
    encode_batch,
    iter_batches,
)
from replog.metadata.types import AlterPartition, AlterPartitionResult

TOPIC = "t"


def as_replica_log(log: Log) -> ReplicaLog:
    """Type-checks that the real Log satisfies the ReplicaLog protocol."""
    return log


def open_log(root: Path, name: str) -> Log:
    """A real Log on a fault-injecting filesystem rooted at ``root/name``, on a manual clock."""
    fs = FaultInjectingFileSystem(str(root / name))
    return Log.open(str(root / name / f"{TOPIC}-0"), LogConfig(), fs=fs, clock=ManualClock())


def reopen_after_crash(log: Log, *, high_watermark: int = 0) -> Log:
    """Power-cut ``log``'s filesystem (unsynced data is lost) and open it again."""
    fs = log.fs
    assert isinstance(fs, FaultInjectingFileSystem)
    recovery_point = log.recovery_point
    fs.crash(tear=True)
    return Log.open(
        log.dir_path,
        LogConfig(),
        fs=fs,
        clock=log.clock,
        recovery_point=recovery_point,
        high_watermark=high_watermark,
    )


def batch(value: bytes, timestamp_ms: int = 0) -> bytes:
    """One single-record v2 batch."""
    return encode_batch([value], base_timestamp=timestamp_ms)


def write(log: Log, epoch: int, count: int, *, tag: bytes = b"r") -> None:
    """Append ``count`` single-record batches stamped with ``epoch`` directly to ``log``."""
    for _ in range(count):
        offset = log.log_end_offset
        log.append_as_leader(batch(tag + b"%d" % offset), epoch)


def entries(log: Log) -> list[tuple[int, int, bytes]]:
    """(base offset, leader epoch, batch bytes) for every batch in the log."""
    found = []
    for data in log.batches():
        for _, header in iter_batches(data):
            found.append((header.base_offset, header.partition_leader_epoch, data))
    return found


def values(log: Log) -> list[bytes | None]:
    """Every record value in the log, in offset order."""
    return [record.value for data in log.batches() for record in decode_records(data)]


def epochs(log: Log) -> list[tuple[int, int]]:
    """The epoch cache as (epoch, start offset) pairs."""
    return [(e.epoch, e.start_offset) for e in log.epoch_cache.entries]


def on_wire(response: PartitionFetchResponse) -> PartitionFetchResponse:
    """What the follower receives: the slice materialised as bytes."""
    if response.records is None:
        return response
    return attrs.evolve(response, records=BytesSlice(response.records.to_bytes()))


def partition(
    broker_id: int,
    log: Log,
    config: PartitionConfig | None = None,
    changes: list[StateChange] | None = None,
    broker_epoch: int = -1,
) -> Partition:
    """A Partition for topic ``t`` partition 0 over ``log``."""
    sink = changes.append if changes is not None else (lambda _c: None)
    return Partition(
        topic=TOPIC,
        partition=0,
        broker_id=broker_id,
        log=log,
        config=config or PartitionConfig(),
        broker_epoch=broker_epoch,
        state_change_sink=sink,
    )


def fetch_once(leader: Partition, follower: Partition, now_ms: int) -> FollowerOutcome:
    """One follower fetch round trip, flushing first when the request says so."""
    request = follower.fetch_request()
    assert request is not None
    if request.requires_flush:
        assert isinstance(follower.log, Log)
        follower.log.flush()
    response = leader.on_fetch(request, now_ms)
    return follower.on_fetch_response(on_wire(response), now_ms)


def follower_fetch(
    leader: Partition, replica_id: int, fetch_offset: int, now_ms: int, last_fetched_epoch: int
) -> PartitionFetchResponse:
    """A hand-made follower fetch delivered to ``leader`` (no follower machine involved)."""
    request = PartitionFetchRequest(
        replica_id=replica_id,
        fetch_offset=fetch_offset,
        current_leader_epoch=leader.leader_epoch,
        last_fetched_epoch=last_fetched_epoch,
    )
    return leader.on_fetch(request, now_ms)


def accept_alter_partition(leader: Partition, now_ms: int) -> AlterPartition:
    """Play the coordinator: accept the one pending AlterPartition request."""
    requests = leader.take_ready().alter_partition
    assert len(requests) == 1, requests
    request = requests[0]
    response = AlterPartitionResult(
        ErrorCode.NONE,
        leader=request.leader_id,
        leader_epoch=request.leader_epoch,
        partition_epoch=request.partition_epoch + 1,
        isr=request.isr_ids,
    )
    assert leader.on_alter_partition_response(request, response, now_ms)
    return request
