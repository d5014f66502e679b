"""replog storage demo: write, crash mid-write, recover, read back, and show what recovery cut.

Run with ``.venv/bin/python examples/storage_demo.py``. A partition log is written through a
filesystem that keeps track of what was fsynced; then the "machine loses power" in the middle of
a write: everything not fsynced is lost and the last write is torn. Reopening the log recovers
it: the torn tail is cut, indexes are rebuilt, and every record that was flushed before the crash
reads back intact.

This is the storage engine on its own (``replog.log``); ``examples/demo.py`` shows a cluster.
"""

from __future__ import annotations

import sys
import tempfile

from replog.log import FaultInjectingFileSystem, Log, LogConfig, decode_records, encode_batch

RECORDS_PER_BATCH = 100
FLUSHED_BATCHES = 40
UNFLUSHED_BATCHES = 7


def write_batches(log: Log, first: int, count: int, leader_epoch: int) -> None:
    """Append ``count`` batches of ``RECORDS_PER_BATCH`` small JSON-ish records."""
    for batch_number in range(first, first + count):
        values = [
            b'{"order": %d, "item": %d}' % (batch_number, i) for i in range(RECORDS_PER_BATCH)
        ]
        batch = encode_batch(values, base_timestamp=1_700_000_000_000 + batch_number)
        log.append_as_leader(batch, leader_epoch=leader_epoch)


def main() -> int:
    config = LogConfig(segment_bytes=64 * 1024, index_interval_bytes=4096)
    with tempfile.TemporaryDirectory(prefix="replog-demo-") as root:
        fs = FaultInjectingFileSystem(root, seed=7)
        path = f"{root}/orders-0"

        log = Log.open(path, config, fs=fs)
        write_batches(log, 0, FLUSHED_BATCHES, leader_epoch=0)
        log.flush()
        flushed = log.recovery_point
        print(f"wrote and fsynced {flushed} records in {len(log.segments)} segments")

        write_batches(log, FLUSHED_BATCHES, UNFLUSHED_BATCHES, leader_epoch=1)
        print(
            f"wrote {log.log_end_offset - flushed} more records without fsync "
            f"(log end offset {log.log_end_offset})"
        )

        print("-- power loss: unsynced writes are lost, the last one is torn --")
        fs.crash(tear=True)
        log.abandon()

        recovered = Log.open(path, config, fs=fs, recovery_point=flushed)
        report = recovered.recovery_report
        print(f"recovery: {report.describe()}")
        print(
            f"log end offset after recovery: {recovered.log_end_offset}; "
            f"leader epochs: {[(e.epoch, e.start_offset) for e in recovered.epoch_cache.entries]}"
        )

        offsets = []
        for batch in recovered.batches():
            offsets.extend(record.offset for record in decode_records(batch))
        dense = offsets == list(range(len(offsets)))
        print(f"read back {len(offsets)} records; offsets dense from 0: {dense}")
        recovered.close()

        if not dense or len(offsets) < flushed:
            print("FAILED: recovery lost fsynced records", file=sys.stderr)
            return 1
        print(f"OK: all {flushed} fsynced records survived the crash")
        return 0


if __name__ == "__main__":
    sys.exit(main())
