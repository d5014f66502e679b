"""Record-level checks of the batches a client produces, before the leader appends them.

The log's own checks (`replog.log.incoming`) cover the framing, magic, CRC-32C and offset
range of each batch; a batch can pass them and still hold records no reader can decode (a
record longer than its batch, an overlong varint, a negative header count, bytes that are not
the codec the attributes name). Such a batch, once stored, fails every later read, so a client's
batch is decoded once here, in full, and refused whole (as Kafka's leader validates every
record before appending):

- a codec id outside 0-4, a records section its codec cannot inflate, or any record framing
  error: `CorruptRecordError` (CORRUPT_MESSAGE);
- a control batch: `InvalidRecordError` (INVALID_RECORD): only the broker writes transaction
  markers, never a client;
- a compressed batch whose records inflate past ``INFLATED_BYTES_MAX``: `CorruptRecordError`,
  found by inflating into a buffer of that size, which stops when it is full.

The inflated bound is a fixed cap, the one replog's readers decode with
(``DEFAULT_MAX_DECOMPRESSED_BYTES``, 64 MiB): a batch inflating past it would be refused by the
cleaner, the time lookups and the consumers, so accepting it would store a poisoned batch. It
is not tied to ``max.message.bytes`` (which bounds the bytes as sent), because a topic with a
large ``max.message.bytes`` would then raise the memory one request can claim without bound.

Validation happens once, on the leader: followers copy the leader's bytes, and the CRC (which
they check) proves those bytes are the ones validated, so they do not decode them again. Reads
serve stored bytes as they are (zero copy).
"""

from __future__ import annotations

from replog.errors import CorruptRecordError, InvalidRecordError
from replog.log.compression import DEFAULT_MAX_DECOMPRESSED_BYTES
from replog.log.decoding import decode_columns
from replog.log.records import LOG_OVERHEAD, Buffer, read_header

__all__ = ["INFLATED_BYTES_MAX", "validate_client_batches"]

INFLATED_BYTES_MAX = DEFAULT_MAX_DECOMPRESSED_BYTES
"""Largest records section a produced batch may inflate to (see the module docstring)."""


def validate_client_batches(data: Buffer, inflated_bytes_max: int = INFLATED_BYTES_MAX) -> None:
    """Check every record of every batch in ``data`` (whole batches, as a producer sends
    them); raises `CorruptRecordError` or `InvalidRecordError` (module docstring) for the
    first bad one, and returns nothing when all are readable."""
    position = 0
    while position < len(data):
        if len(data) - position < LOG_OVERHEAD:
            raise CorruptRecordError("trailing bytes after the last batch", position)
        header = read_header(data, position)  # decode_columns checks size, magic and CRC
        if header.is_control:
            raise InvalidRecordError(
                f"batch at {position} is a control batch: clients may not write control records"
            )
        header.compression  # noqa: B018  (raises for a codec id Kafka does not define)
        decode_columns(data, position, max_decompressed_bytes=inflated_bytes_max)
        position += header.size_bytes
