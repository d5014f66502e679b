"""The producer's delivery timeout: a record that cannot be delivered fails within
``delivery_timeout_ms`` with ``DeliveryTimeoutError``, and ``flush()``/``close()`` end."""

from __future__ import annotations

import asyncio
import socket

import pytest

from replog.client import AsyncProducer, DeliveryTimeoutError, FlushTimeoutError
from replog.client.accumulator import PendingRecord, RecordAccumulator
from replog.client.producer import ProducerConfig


def test_producer_defaults_are_kafkas() -> None:
    config = ProducerConfig()
    assert config.retries == 2**31 - 1
    assert config.delivery_timeout_ms == 120_000
    assert config.request_timeout_ms == 30_000
    assert (config.retry_backoff_ms, config.retry_backoff_max_ms) == (100, 1_000)
    assert [config.backoff_ms(n) for n in range(6)] == [100, 200, 400, 800, 1000, 1000]


def test_delivery_timeout_shorter_than_linger_plus_request_timeout_is_refused() -> None:
    with pytest.raises(ValueError, match="delivery_timeout_ms"):
        ProducerConfig(delivery_timeout_ms=1_000, request_timeout_ms=1_000, linger_ms=5)


def test_queued_batches_expire_once_the_delivery_timeout_passes() -> None:
    loop = asyncio.new_event_loop()
    try:
        accumulator = RecordAccumulator(batch_bytes_max=100, linger_ms=0, buffer_bytes_max=10_000)
        for now, value in ((0, b"a" * 90), (50, b"b" * 90)):
            record = PendingRecord(None, value, (), 1, loop.create_future())
            accumulator.append(("t", 0), record, now_ms=now)
        assert accumulator.expire(now_ms=99, delivery_timeout_ms=100) == []
        expired = accumulator.expire(now_ms=100, delivery_timeout_ms=100)
        assert [b.created_ms for b in expired] == [0]
        assert [b.created_ms for b in accumulator.queued(("t", 0))] == [50]
    finally:
        loop.close()


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_a_send_that_cannot_be_delivered_fails_and_flush_and_close_end() -> None:
    async def scenario() -> None:
        producer = await AsyncProducer.start(
            f"127.0.0.1:{_closed_port()}",
            linger_ms=0,
            request_timeout_ms=200,
            delivery_timeout_ms=300,
        )
        future = await producer.send("t", b"v", partition=0)
        with pytest.raises(FlushTimeoutError):
            await producer.flush(timeout_ms=1)
        await asyncio.wait_for(producer.flush(), 30)  # bounded: generous guard, not a timing
        with pytest.raises(DeliveryTimeoutError) as failed:
            future.result()
        assert (failed.value.topic, failed.value.partition) == ("t", 0)
        await producer.send("t", b"w", partition=0)
        await asyncio.wait_for(producer.close(timeout_ms=10), 30)

    asyncio.run(scenario())
