"""``replog dump-log PATH``: print what is in segment files, in the spirit of Kafka's dump-log.

``PATH`` may be a ``.log``, ``.index`` or ``.timeindex`` file, or a partition directory (every
segment in it, in offset order). For ``.log`` files each batch is listed with its position,
offsets, leader epoch, record count, codec, timestamps and whether its CRC-32C is valid; with
``print_data`` the records too, and with a ``decoder`` (``--cluster-metadata-decoder``: the
metadata log's commands, ``replog.quorum.record_text``) each record's key and value as it
describes them. Reading stops at the first batch that does not frame (a torn
tail): what follows is reported as unreadable bytes, never skipped silently.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from typing import TextIO

from replog.errors import CorruptRecordError
from replog.log.decoding import decode_records
from replog.log.fs import REAL_FS
from replog.log.offset_index import OffsetIndex
from replog.log.records import (
    HEADER,
    LOG_OVERHEAD,
    RECORD_BATCH_OVERHEAD,
    read_header,
    validate_batch,
)
from replog.log.segment import offset_from_file_name
from replog.log.time_index import TimeIndex

__all__ = ["RecordDecoder", "dump_path"]

RecordDecoder = Callable[[bytes | None, bytes | None], str]
"""A record's (key, value) as the text ``dump_path`` prints for it."""

_MAX_INDEX_BYTES = 2**31 - 1


def dump_path(
    path: str, out: TextIO, *, print_data: bool = False, decoder: RecordDecoder | None = None
) -> int:
    """Dump ``path`` to ``out``. Returns the number of invalid batches or unreadable tails."""
    if os.path.isdir(path):
        problems = 0
        names = sorted(n for n in os.listdir(path) if n.endswith((".log", ".index", ".timeindex")))
        for name in sorted(names, key=lambda n: (offset_from_file_name(n), n)):
            problems += dump_path(
                os.path.join(path, name), out, print_data=print_data, decoder=decoder
            )
        return problems
    out.write(f"Dumping {path}\n")
    if path.endswith(".log"):
        return _dump_log(path, out, print_data, decoder)
    if path.endswith(".index"):
        _dump_offset_index(path, out)
        return 0
    if path.endswith(".timeindex"):
        _dump_time_index(path, out)
        return 0
    raise ValueError(f"{path}: not a .log, .index or .timeindex file, nor a directory")


def _dump_log(path: str, out: TextIO, print_data: bool, decoder: RecordDecoder | None) -> int:
    with open(path, "rb") as f:
        data = f.read()
    problems = 0
    position = 0
    for position, size in _frames(data):
        view = memoryview(data)[position : position + size]
        header = read_header(view)
        try:
            validate_batch(view)
            valid = True
        except CorruptRecordError:
            valid, problems = False, problems + 1
        out.write(
            f"baseOffset: {header.base_offset} lastOffset: {header.last_offset} "
            f"count: {header.records_count} position: {position} size: {size} "
            f"partitionLeaderEpoch: {header.partition_leader_epoch} "
            f"compression: {header.compression.name.lower()} "
            f"baseTimestamp: {header.base_timestamp} maxTimestamp: {header.max_timestamp} "
            f"crc: {header.crc} isValid: {str(valid).lower()}\n"
        )
        if decoder is not None and valid:
            for record in decode_records(view):
                out.write(f"| offset: {record.offset} {decoder(record.key, record.value)}\n")
        elif print_data and valid:
            for record in decode_records(view):
                out.write(
                    f"| offset: {record.offset} timestamp: {record.timestamp} "
                    f"key: {record.key!r} value: {record.value!r} "
                    f"headers: {list(record.headers)}\n"
                )
        position += size
    end = _valid_end(data)
    if end < len(data):
        problems += 1
        out.write(f"unreadable tail: {len(data) - end} byte(s) from position {end}\n")
    return problems


def _frames(data: bytes) -> Iterator[tuple[int, int]]:
    """(position, size) of every batch that frames (size field sane, fits in the file)."""
    position = 0
    while len(data) - position >= RECORD_BATCH_OVERHEAD:
        size = HEADER.batch_length.read(data, position) + LOG_OVERHEAD
        if size < RECORD_BATCH_OVERHEAD or position + size > len(data):
            return
        yield position, size
        position += size


def _valid_end(data: bytes) -> int:
    end = 0
    for position, size in _frames(data):
        end = position + size
    return end


def _dump_offset_index(path: str, out: TextIO) -> None:
    base = offset_from_file_name(os.path.basename(path))
    index = OffsetIndex.open(REAL_FS, path, base, _MAX_INDEX_BYTES, writable=False)
    try:
        for n in range(index.entries):
            offset, position = index.entry(n)
            out.write(f"offset: {offset} position: {position}\n")
    finally:
        index.close()


def _dump_time_index(path: str, out: TextIO) -> None:
    base = offset_from_file_name(os.path.basename(path))
    index = TimeIndex.open(REAL_FS, path, base, _MAX_INDEX_BYTES, writable=False)
    try:
        for n in range(index.entries):
            timestamp, offset = index.entry(n)
            out.write(f"timestamp: {timestamp} offset: {offset}\n")
    finally:
        index.close()
