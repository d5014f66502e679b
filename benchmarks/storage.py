"""Storage engine benchmark: ``python -m benchmarks.storage`` (also ``make bench``).

Prints one JSON line per case. Appends are compared with a baseline measured in the same run,
interleaved with it (median and range over ``--repeats`` runs after a warm-up, and the median
of the paired ratios):
the same 100-byte records appended to a plain file with one length prefix per record and one
CRC-32C per batch (the least a durable record format can do), so the ratio says what replog's
format, offsets, indexes and bookkeeping cost on this machine, whatever its speed today.

Cases: append (batches of 1, 100, 1000, no fsync), sequential read, offset lookup, recovery
(16 KiB batches, unclean open), reopen after a clean shutdown, and sequential reads of that
reopened log (the first pass reads batches this process neither wrote nor recovered, the second
reads them again).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import struct
import tempfile
import time

import crc32c

from replog.log import Log, LogConfig, encode_batch, iter_batches

RECORD_BYTES = 100
_PREFIX = struct.Struct(">I")


def _emit(case: str, **fields: object) -> None:
    print(json.dumps({"case": case, **fields}), flush=True)


def append_replog(root: str, batch_records: int, total_records: int) -> float:
    """Seconds to encode and append ``total_records`` in batches of ``batch_records``."""
    values = [os.urandom(RECORD_BYTES) for _ in range(batch_records)]
    log = Log.open(f"{root}/bench-{batch_records}-{time.monotonic_ns()}", LogConfig())
    batches = total_records // batch_records
    start = time.perf_counter()
    for n in range(batches):
        log.append_as_leader(encode_batch(values, base_timestamp=n), leader_epoch=0)
    elapsed = time.perf_counter() - start
    log.close()
    return elapsed


def append_plain(root: str, batch_records: int, total_records: int) -> float:
    """The baseline: length-prefixed records, one CRC-32C per batch, appended to one file."""
    values = [os.urandom(RECORD_BYTES) for _ in range(batch_records)]
    fd = os.open(
        f"{root}/plain-{batch_records}-{time.monotonic_ns()}",
        os.O_CREAT | os.O_WRONLY | os.O_APPEND,
    )
    batches = total_records // batch_records
    pack = _PREFIX.pack
    start = time.perf_counter()
    for _ in range(batches):
        body = b"".join(pack(len(v)) + v for v in values)
        os.write(fd, pack(crc32c.crc32c(body)) + body)
    elapsed = time.perf_counter() - start
    os.close(fd)
    return elapsed


def _spread(values: list[float]) -> dict[str, float]:
    median = statistics.median(values)
    return {
        "median": round(median, 3),
        "min": round(min(values), 3),
        "max": round(max(values), 3),
        "spread_pct": round(100 * (max(values) - min(values)) / median, 1) if median else 0.0,
    }


def bench_appends(root: str, scale: float, repeats: int) -> None:
    """Each batch size ``repeats`` times, replog and the plain file alternating (which goes
    first alternates too), so both see the same drift; median and range of each, and the
    median of the paired ratios."""
    for batch_records, total in ((1, 200_000), (100, 1_000_000), (1000, 2_000_000)):
        total = max(batch_records, int(total * scale) // batch_records * batch_records)
        append_replog(root, batch_records, max(batch_records, total // 10))  # warm-up
        replog_rates, plain_rates, ratios = [], [], []
        for n in range(repeats):
            if n % 2 == 0:
                replog_s = append_replog(root, batch_records, total)
                plain_s = append_plain(root, batch_records, total)
            else:
                plain_s = append_plain(root, batch_records, total)
                replog_s = append_replog(root, batch_records, total)
            replog_rates.append(total / replog_s)
            plain_rates.append(total / plain_s)
            ratios.append(plain_s / replog_s)
        _emit(
            f"append_batch_{batch_records}",
            records=total,
            repeats=repeats,
            replog_records_per_s=_spread(replog_rates),
            plain_records_per_s=_spread(plain_rates),
            replog_mb_per_s=round(statistics.median(replog_rates) * RECORD_BYTES / 1e6, 1),
            ratio_replog_to_plain=_spread(ratios),
        )


def _fill(path: str, batch_bytes: int, total_bytes: int, config: LogConfig) -> Log:
    per_batch = max(1, batch_bytes // (RECORD_BYTES + 10))
    values = [os.urandom(RECORD_BYTES) for _ in range(per_batch)]
    batch = encode_batch(values, base_timestamp=0)
    log = Log.open(path, config)
    for _ in range(max(1, total_bytes // len(batch))):
        log.append_as_leader(batch, leader_epoch=0)
    return log


def _sequential_read(log: Log, leo: int) -> tuple[int, float]:
    """Read the whole log in 1 MiB fetches; returns (bytes read, seconds)."""
    start = time.perf_counter()
    offset, read_bytes = 0, 0
    while offset < leo:
        data = log.read(offset, 1 << 20).to_bytes()
        read_bytes += len(data)
        last_offset = offset - 1
        for _, header in iter_batches(data):
            last_offset = header.last_offset
        offset = last_offset + 1
    return read_bytes, time.perf_counter() - start


def bench_read_lookup_recovery(root: str, scale: float) -> None:
    total_bytes = int(1024**3 * scale)
    config = LogConfig()
    path = f"{root}/big"
    log = _fill(path, 16 * 1024, total_bytes, config)
    leo = log.log_end_offset
    log.flush()

    read_bytes, read_s = _sequential_read(log, leo)
    _emit("sequential_read", mb=round(read_bytes / 1e6), mb_per_s=round(read_bytes / 1e6 / read_s))

    rng = random.Random(1)
    targets = [rng.randrange(leo) for _ in range(20_000)]
    start = time.perf_counter()
    for target in targets:
        log.read(target, 1, min_one_batch=False)
    lookup_us = (time.perf_counter() - start) / len(targets) * 1e6
    _emit("offset_lookup", lookups=len(targets), microseconds_per_lookup=round(lookup_us, 2))
    size = log.size_bytes
    log.close()

    start = time.perf_counter()
    recovered = Log.open(path, config, recovery_point=0, had_clean_shutdown=False)
    recovery_s = time.perf_counter() - start
    _emit(
        "recovery_16k_batches",
        mb=round(size / 1e6),
        gb_per_s=round(size / 1e9 / recovery_s, 2),
        bytes_cut=recovered.recovery_report.bytes_truncated,
    )
    recovered.close()

    start = time.perf_counter()
    reopened = Log.open(path, config, recovery_point=leo, had_clean_shutdown=True)
    reopen_ms = (time.perf_counter() - start) * 1e3
    _emit("reopen_after_clean_shutdown", mb=round(size / 1e6), milliseconds=round(reopen_ms, 2))
    for case in ("sequential_read_after_reopen", "sequential_read_after_reopen_again"):
        read_bytes, read_s = _sequential_read(reopened, leo)
        _emit(case, mb=round(read_bytes / 1e6), mb_per_s=round(read_bytes / 1e6 / read_s))
    reopened.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=float, default=1.0, help="shrink (<1) or grow the sizes")
    parser.add_argument("--repeats", type=int, default=5, help="runs per append case")
    parser.add_argument("--appends-only", action="store_true", help="skip read/recovery cases")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="replog-bench-") as root:
        bench_appends(root, args.scale, args.repeats)
        if not args.appends_only:
            bench_read_lookup_recovery(root, args.scale)


if __name__ == "__main__":
    main()
