"""replog.log: the storage engine (Kafka's log format and files; knows nothing of replication).

A ``Log`` is one partition's directory of segments (``LogSegment``: ``.log``, ``.index``,
``.timeindex``) with its checkpoints and leader-epoch cache; a ``LogManager`` owns the logs of
a broker's log dirs. Record batches use Kafka's v2 format: ``records`` is the layout (and
``BatchHeader``), ``encode_batch`` writes batches, ``decode_records`` / ``decode_columns`` read
their records. Every file access goes through a ``FileSystem`` (the real one, or a
``FaultInjectingFileSystem`` in tests) and time through an injected ``replog.clock.Clock``.
The module map is in docs/internals.md.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from replog.lazy_exports import lazy_exports

if TYPE_CHECKING:
    from replog.log.checkpoints import LeaderEpochCheckpointFile, OffsetCheckpointFile
    from replog.log.compression import Compression
    from replog.log.config import LogConfig
    from replog.log.decoding import decode_columns, decode_records
    from replog.log.encoding import encode_batch
    from replog.log.epoch_cache import EpochEntry, LeaderEpochCache
    from replog.log.fault_fs import FaultInjectingFileSystem
    from replog.log.fs import REAL_FS, FileHandle, FileSlice, FileSystem, RealFileSystem
    from replog.log.loader import RecoveryReport
    from replog.log.log import AppendInfo, FetchSlice, Log, PendingFlush
    from replog.log.manager import LogManager
    from replog.log.offset_index import OffsetIndex
    from replog.log.records import (
        LOG_OVERHEAD,
        NO_PARTITION_LEADER_EPOCH,
        NO_TIMESTAMP,
        RECORD_BATCH_OVERHEAD,
        BatchHeader,
        Buffer,
        Record,
        RecordColumns,
        TimestampType,
        iter_batches,
        read_header,
        stamp_batch,
        validate_batch,
    )
    from replog.log.segment import LogSegment
    from replog.log.time_index import TimeIndex
    from replog.log.time_lookup import (
        TimestampAndOffset,
        offset_for_timestamp,
        offset_of_max_timestamp,
    )

__all__ = [
    "LOG_OVERHEAD",
    "NO_PARTITION_LEADER_EPOCH",
    "NO_TIMESTAMP",
    "REAL_FS",
    "RECORD_BATCH_OVERHEAD",
    "AppendInfo",
    "BatchHeader",
    "Buffer",
    "Compression",
    "EpochEntry",
    "FaultInjectingFileSystem",
    "FetchSlice",
    "FileHandle",
    "FileSlice",
    "FileSystem",
    "LeaderEpochCache",
    "LeaderEpochCheckpointFile",
    "Log",
    "LogConfig",
    "LogManager",
    "LogSegment",
    "OffsetCheckpointFile",
    "OffsetIndex",
    "PendingFlush",
    "RealFileSystem",
    "Record",
    "RecordColumns",
    "RecoveryReport",
    "TimeIndex",
    "TimestampAndOffset",
    "TimestampType",
    "decode_columns",
    "decode_records",
    "encode_batch",
    "iter_batches",
    "offset_for_timestamp",
    "offset_of_max_timestamp",
    "read_header",
    "stamp_batch",
    "validate_batch",
]

#: the module of each name, imported on first use: a client that needs only the record format
#: (``replog.log.records``, ``replog.log.compression``) never loads the file layer or numpy
_LAZY = {
    "LeaderEpochCheckpointFile": "replog.log.checkpoints",
    "OffsetCheckpointFile": "replog.log.checkpoints",
    "Compression": "replog.log.compression",
    "LogConfig": "replog.log.config",
    "decode_columns": "replog.log.decoding",
    "decode_records": "replog.log.decoding",
    "encode_batch": "replog.log.encoding",
    "EpochEntry": "replog.log.epoch_cache",
    "LeaderEpochCache": "replog.log.epoch_cache",
    "FaultInjectingFileSystem": "replog.log.fault_fs",
    "REAL_FS": "replog.log.fs",
    "FileHandle": "replog.log.fs",
    "FileSlice": "replog.log.fs",
    "FileSystem": "replog.log.fs",
    "RealFileSystem": "replog.log.fs",
    "RecoveryReport": "replog.log.loader",
    "AppendInfo": "replog.log.log",
    "FetchSlice": "replog.log.log",
    "Log": "replog.log.log",
    "PendingFlush": "replog.log.log",
    "LogManager": "replog.log.manager",
    "OffsetIndex": "replog.log.offset_index",
    "LOG_OVERHEAD": "replog.log.records",
    "NO_PARTITION_LEADER_EPOCH": "replog.log.records",
    "NO_TIMESTAMP": "replog.log.records",
    "RECORD_BATCH_OVERHEAD": "replog.log.records",
    "BatchHeader": "replog.log.records",
    "Buffer": "replog.log.records",
    "Record": "replog.log.records",
    "RecordColumns": "replog.log.records",
    "TimestampType": "replog.log.records",
    "iter_batches": "replog.log.records",
    "read_header": "replog.log.records",
    "stamp_batch": "replog.log.records",
    "validate_batch": "replog.log.records",
    "LogSegment": "replog.log.segment",
    "TimeIndex": "replog.log.time_index",
    "TimestampAndOffset": "replog.log.time_lookup",
    "offset_for_timestamp": "replog.log.time_lookup",
    "offset_of_max_timestamp": "replog.log.time_lookup",
}

__getattr__ = lazy_exports(__name__, _LAZY)
