"""ListOffsets by timestamp over a stored batch that cannot be decoded (written before Produce
validated records) answers CORRUPT_MESSAGE for that partition, and one on a log whose dir went
offline KAFKA_STORAGE_ERROR: never an exception."""

from __future__ import annotations

import pathlib

from replog.broker.driver.requests.offsets import _offset_at
from replog.errors import ErrorCode
from replog.log import Log, LogConfig, encode_batch
from replog.log.encoding import encode_varint
from replog.protocol import messages as m
from tests.log.test_produce_validation import _GOOD_BODY, _batch


def test_a_time_lookup_through_an_undecodable_batch_is_corrupt_message(
    tmp_path: pathlib.Path,
) -> None:
    log = Log.open(str(tmp_path / "t-0"), LogConfig())
    try:
        log.append_as_leader(encode_batch([b"ok"], base_timestamp=500), 0)
        # a record longer than its batch: the CRC holds, the log's own checks let it in
        log.append_as_leader(_batch(encode_varint(len(_GOOD_BODY) + 50) + _GOOD_BODY, 1), 0)
        log.update_high_watermark(log.log_end_offset)
        assert _offset_at(log, 100, False) == (ErrorCode.NONE, 500, 0)
        assert _offset_at(log, 900, False) == (ErrorCode.CORRUPT_MESSAGE, -1, -1)
        assert _offset_at(log, m.MAX_TIMESTAMP, False)[0] is ErrorCode.CORRUPT_MESSAGE
    finally:
        log.close()


def test_a_time_lookup_on_an_offline_log_is_a_storage_error(tmp_path: pathlib.Path) -> None:
    log = Log.open(str(tmp_path / "t-0"), LogConfig())
    try:
        log.append_as_leader(encode_batch([b"ok"], base_timestamp=500), 0)
        log.update_high_watermark(log.log_end_offset)
        log.mark_offline("fsync failed")
        assert _offset_at(log, 100, False) == (ErrorCode.KAFKA_STORAGE_ERROR, -1, -1)
        assert _offset_at(log, m.MAX_TIMESTAMP, False)[0] is ErrorCode.KAFKA_STORAGE_ERROR
    finally:
        log.close()
