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
