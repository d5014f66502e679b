"""Records of the metadata log and of snapshot files: the owner's values and control records.

Every batch is a Kafka record batch v2 (``replog.log.records``), stamped with its offsets and
the leader epoch that wrote it. Two kinds of record share the log:

- **data records** (key null): the owner's opaque values, one record each, in the order
  proposed. The core never looks inside them;
- **control records** (key = the control type, value = UTF-8 JSON), written by the quorum
  itself:

  ==================  ====================================================================
  key                 value
  ==================  ====================================================================
  ``leader-change``   ``{"leaderId": L, "voters": [..]}``: the first record of every leader
                      epoch, so the high watermark can move in that epoch (KIP-595)
  ``snapshot-header`` ``{"endOffset": O, "epoch": E}``: the first record of a snapshot file
  ==================  ====================================================================

Kafka marks control batches with attribute bit 5; replog's batch codec does not build control
batches yet, so the record key tells them apart instead (a documented departure, confined to
this module). A snapshot file (KIP-630) is the header batch at offset 0 followed by batches of
the state machine's records at offsets 1, 2, ...; every batch of a snapshot carries its epoch.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence

import attrs

from replog.errors import CorruptRecordError
from replog.log.decoding import decode_records
from replog.log.encoding import encode_batch
from replog.log.records import BatchHeader, iter_batches, validate_batch
from replog.raft.messages import RaftSnapshotId

__all__ = [
    "LEADER_CHANGE",
    "SNAPSHOT_HEADER",
    "Entry",
    "decode_entries",
    "decode_snapshot",
    "encode_data_batch",
    "encode_leader_change",
    "encode_snapshot",
    "whole_batches",
]

LEADER_CHANGE = b"leader-change"
SNAPSHOT_HEADER = b"snapshot-header"
#: records per batch in a snapshot file
_SNAPSHOT_BATCH_RECORDS = 64


@attrs.frozen
class Entry:
    """One record of the metadata log: ``control`` is its control type, None for data."""

    offset: int
    epoch: int
    value: bytes
    control: bytes | None = None


def encode_data_batch(
    values: Sequence[bytes], *, base_offset: int, epoch: int, timestamp_ms: int
) -> bytes:
    """One batch of data records at ``base_offset``.. written in ``epoch``."""
    return encode_batch(
        list(values),
        base_offset=base_offset,
        base_timestamp=timestamp_ms,
        partition_leader_epoch=epoch,
    )


def encode_leader_change(
    *, base_offset: int, epoch: int, leader_id: int, voters: Iterable[int], timestamp_ms: int
) -> bytes:
    """The leader-change control record that opens ``epoch``."""
    body = {"leaderId": leader_id, "voters": sorted(voters)}
    return encode_batch(
        [json.dumps(body, separators=(",", ":")).encode()],
        keys=[LEADER_CHANGE],
        base_offset=base_offset,
        base_timestamp=timestamp_ms,
        partition_leader_epoch=epoch,
    )


def whole_batches(data: bytes) -> list[BatchHeader]:
    """The headers of the whole batches at the start of ``data`` (a fetch cut at its byte limit
    ends in a partial batch, which is left out). CRCs are checked; a bad one raises
    `CorruptRecordError`."""
    return [validate_batch(data, position) for position, _ in iter_batches(data)]


def decode_entries(data: bytes) -> list[Entry]:
    """Every record of the whole batches in ``data``, in offset order."""
    entries = []
    for position, header in iter_batches(data):
        epoch = header.partition_leader_epoch
        for record in decode_records(data, position):
            entries.append(Entry(record.offset, epoch, record.value or b"", record.key))
    return entries


# ------------------------------------------------------------------------------- snapshots


def encode_snapshot(
    snapshot_id: RaftSnapshotId, records: Sequence[bytes], timestamp_ms: int
) -> bytes:
    """A snapshot file's bytes: the header batch, then the state machine's records."""
    header = {"endOffset": snapshot_id.end_offset, "epoch": snapshot_id.epoch}
    parts = [
        encode_batch(
            [json.dumps(header, separators=(",", ":")).encode()],
            keys=[SNAPSHOT_HEADER],
            base_offset=0,
            base_timestamp=timestamp_ms,
            partition_leader_epoch=snapshot_id.epoch,
        )
    ]
    for start in range(0, len(records), _SNAPSHOT_BATCH_RECORDS):
        chunk = list(records[start : start + _SNAPSHOT_BATCH_RECORDS])
        parts.append(
            encode_data_batch(
                chunk, base_offset=1 + start, epoch=snapshot_id.epoch, timestamp_ms=timestamp_ms
            )
        )
    return b"".join(parts)


def decode_snapshot(data: bytes) -> tuple[RaftSnapshotId, list[bytes]]:
    """Parse a whole snapshot file: its id (from the header) and the state machine's records.
    Anything but whole, valid batches led by a header raises `CorruptRecordError`."""
    consumed = 0
    entries: list[Entry] = []
    for position, header in iter_batches(data):
        epoch = header.partition_leader_epoch
        for record in decode_records(data, position):
            entries.append(Entry(record.offset, epoch, record.value or b"", record.key))
        consumed = position + header.size_bytes
    if consumed != len(data):
        raise CorruptRecordError(f"snapshot has {len(data) - consumed} trailing bytes", consumed)
    if not entries or entries[0].control != SNAPSHOT_HEADER:
        raise CorruptRecordError("snapshot does not start with a snapshot-header record")
    try:
        body = json.loads(entries[0].value)
        snapshot_id = RaftSnapshotId(int(body["endOffset"]), int(body["epoch"]))
    except (ValueError, KeyError, TypeError) as exc:
        raise CorruptRecordError(f"snapshot header does not parse: {exc}") from exc
    if any(entry.control is not None for entry in entries[1:]):
        raise CorruptRecordError("snapshot holds a control record after its header")
    return snapshot_id, [entry.value for entry in entries[1:]]
