"""pytest-benchmark micro suite for the storage hot paths (not part of ``make test``).

Run: ``.venv/bin/pytest benchmarks/test_storage_micro.py --benchmark-only``. Compare runs with
``--benchmark-autosave`` / ``--benchmark-compare``; never assert on timings.
"""

from __future__ import annotations

import os
import pathlib
import random

import pytest

from replog.log import Log, LogConfig, decode_records, encode_batch, validate_batch

pytest.importorskip("pytest_benchmark")

VALUE = os.urandom(100)


@pytest.mark.parametrize("records", [1, 100, 1000])
def test_encode_batch(benchmark: pytest.FixtureRequest, records: int) -> None:
    values = [VALUE] * records
    benchmark(encode_batch, values, base_timestamp=0)


def test_validate_batch_of_1000(benchmark: pytest.FixtureRequest) -> None:
    batch = encode_batch([VALUE] * 1000, base_timestamp=0)
    benchmark(validate_batch, batch)


def test_decode_batch_of_1000(benchmark: pytest.FixtureRequest) -> None:
    batch = encode_batch([VALUE] * 1000, base_timestamp=0)
    benchmark(decode_records, batch)


@pytest.mark.parametrize("records", [1, 1000])
def test_append_as_leader(
    benchmark: pytest.FixtureRequest, tmp_path: pathlib.Path, records: int
) -> None:
    log = Log.open(str(tmp_path / "bench-0"), LogConfig())
    batch = encode_batch([VALUE] * records, base_timestamp=0)
    benchmark(log.append_as_leader, batch, 0, 0)
    log.close()


def test_append_and_flush_of_one_batch(
    benchmark: pytest.FixtureRequest, tmp_path: pathlib.Path
) -> None:
    """One batch appended and made durable (the acks=all path with flush.messages=1): the
    segment's fdatasync plus an index msync only when an index entry was written."""
    log = Log.open(str(tmp_path / "bench-0"), LogConfig())
    batch = encode_batch([VALUE] * 5, base_timestamp=0)

    def append_and_flush() -> None:
        log.append_as_leader(batch, 0)
        log.flush()

    benchmark(append_and_flush)
    log.close()


def test_random_read_of_one_batch(benchmark: pytest.FixtureRequest, tmp_path: pathlib.Path) -> None:
    log = Log.open(str(tmp_path / "bench-0"), LogConfig(index_interval_bytes=4096))
    batch = encode_batch([VALUE] * 10, base_timestamp=0)
    for _ in range(20_000):
        log.append_as_leader(batch, 0)
    rng = random.Random(0)
    leo = log.log_end_offset

    def read_one() -> bytes:
        return log.read(rng.randrange(leo), 1).to_bytes()

    benchmark(read_one)
    log.close()
