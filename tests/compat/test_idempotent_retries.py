"""A real client's retry of a produce whose answer was lost is deduplicated by the broker.

Between a client (kafka-python, confluent-kafka, replog's own ``Producer``) and a one-broker
replog cluster sits a proxy that swallows the answers to the first two produce requests. The
client times the request out, reconnects and sends the same batch again (same producer id,
epoch and sequence); the broker, which wrote the batch the first time, answers the retry with
the batch's first offsets instead of appending it again, so every record is in the log exactly
once.
"""

from __future__ import annotations

import asyncio
import struct
import threading
from collections.abc import Iterator

import confluent_kafka
import pytest
from kafka import KafkaProducer

from replog import Admin, Consumer, Producer
from replog.broker import BrokerConfig, Cluster
from tests.ports import free_port

pytestmark = [pytest.mark.system, pytest.mark.timeout(120)]

_LENGTH = struct.Struct(">i")
_PRODUCE_API_KEY = 0


def _frames(buffer: bytearray) -> Iterator[bytes]:
    """Take every whole length-prefixed Kafka frame off the front of ``buffer``."""
    while len(buffer) >= 4:
        (size,) = _LENGTH.unpack_from(buffer)
        if len(buffer) < 4 + size:
            return
        frame = bytes(buffer[: 4 + size])
        del buffer[: 4 + size]
        yield frame


class LostAnswers:
    """A TCP proxy to one broker that drops the answers to the first ``produces`` produce
    requests it forwards (the request reaches the broker; its answer never reaches the
    client)."""

    def __init__(self, target_port: int, produces: int) -> None:
        self.target_port = target_port
        self.to_drop = produces
        self.dropped: list[int] = []  # correlation ids whose answers were swallowed
        self.connections = 0
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.server: asyncio.Server | None = None
        self.port = 0

    def start(self, port: int) -> None:
        self.thread.start()

        async def listen() -> None:
            self.server = await asyncio.start_server(self._on_client, "127.0.0.1", port)

        asyncio.run_coroutine_threadsafe(listen(), self.loop).result(10)
        self.port = port

    def close(self) -> None:
        async def shutdown() -> None:
            if self.server is not None:
                self.server.close()
            for task in asyncio.all_tasks():
                if task is not asyncio.current_task():
                    task.cancel()

        asyncio.run_coroutine_threadsafe(shutdown(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)

    async def _on_client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.target_port)
        self.connections += 1
        swallow: set[int] = set()
        try:
            await asyncio.gather(
                self._requests(reader, up_writer, swallow),
                self._answers(up_reader, writer, swallow),
            )
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()
            up_writer.close()

    async def _requests(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, swallow: set[int]
    ) -> None:
        buffer = bytearray()
        while data := await reader.read(1 << 16):
            buffer += data
            for frame in _frames(buffer):
                api_key, _, correlation_id = struct.unpack_from(">hhi", frame, 4)
                if api_key == _PRODUCE_API_KEY and self.to_drop > 0:
                    self.to_drop -= 1
                    swallow.add(correlation_id)
                writer.write(frame)
            await writer.drain()
        writer.close()

    async def _answers(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, swallow: set[int]
    ) -> None:
        buffer = bytearray()
        while data := await reader.read(1 << 16):
            buffer += data
            for frame in _frames(buffer):
                (correlation_id,) = struct.unpack_from(">i", frame, 4)
                if correlation_id in swallow:
                    swallow.discard(correlation_id)
                    self.dropped.append(correlation_id)
                    continue
                writer.write(frame)
            await writer.drain()
        writer.close()


@pytest.fixture
def proxied(tmp_path: object) -> Iterator[tuple[Cluster, LostAnswers]]:
    """One broker that binds a port of its own and advertises the proxy's."""
    bound, advertised = free_port(), free_port()
    proxy = LostAnswers(bound, produces=2)
    proxy.start(advertised)
    config = BrokerConfig(
        broker_id=1,
        log_dirs=(f"{tmp_path}/b1",),
        coordinator=f"memory://lost-answers-{id(proxy)}",
        port=bound,
        advertised_host="127.0.0.1",
        advertised_port=advertised,
        session_timeout_ms=2_000,
        heartbeat_interval_ms=200,
    )
    cluster = Cluster([config], base_dir=str(tmp_path), owns_base_dir=False)
    try:
        cluster.start(1)
        yield cluster, proxy
    finally:
        cluster.close()
        proxy.close()


def read_all(cluster: Cluster, count: int) -> list[tuple[int, bytes | None]]:
    got: list[tuple[int, bytes | None]] = []
    with Consumer(cluster.bootstrap, auto_reset="earliest") as consumer:
        consumer.assign([("lost", 0)])
        for _ in range(50):
            got += [(r.offset, r.value) for r in consumer.poll(timeout_ms=100)]
            if len(got) >= count:
                break
        got += [(r.offset, r.value) for r in consumer.poll(timeout_ms=300)]
    return got


def check_written_once(cluster: Cluster, proxy: LostAnswers, offsets: list[int]) -> None:
    assert len(proxy.dropped) == 2 and proxy.connections >= 3  # lost, reconnected, retried
    assert offsets == list(range(6))
    assert read_all(cluster, 6) == [(i, b"v%d" % i) for i in range(6)]


def test_kafka_python_retry_of_a_lost_answer_is_written_once(
    proxied: tuple[Cluster, LostAnswers],
) -> None:
    cluster, proxy = proxied
    with Admin(cluster.bootstrap) as admin:
        admin.create_topics("lost", 1, 1)
    producer = KafkaProducer(
        bootstrap_servers=f"127.0.0.1:{proxy.port}",
        request_timeout_ms=1_500,
        retry_backoff_ms=50,
        linger_ms=0,
    )
    try:
        assert producer.config["enable_idempotence"]
        offsets = []
        for i in range(6):  # one at a time: the first two answers are lost, then retried
            offsets.append(producer.send("lost", b"v%d" % i, partition=0).get(timeout=30).offset)
    finally:
        producer.close(timeout=10)
    check_written_once(cluster, proxy, offsets)


def test_confluent_kafka_retry_of_a_lost_answer_is_written_once(
    proxied: tuple[Cluster, LostAnswers],
) -> None:
    cluster, proxy = proxied
    with Admin(cluster.bootstrap) as admin:
        admin.create_topics("lost", 1, 1)
    producer = confluent_kafka.Producer(
        {
            "bootstrap.servers": f"127.0.0.1:{proxy.port}",
            "enable.idempotence": True,
            "request.timeout.ms": 1_500,
            "socket.timeout.ms": 1_500,
            "message.timeout.ms": 30_000,
            "retry.backoff.ms": 50,
            "linger.ms": 0,
        }
    )
    delivered: list[tuple[object, int]] = []
    for i in range(6):
        producer.produce(
            "lost",
            b"v%d" % i,
            partition=0,
            on_delivery=lambda error, message: delivered.append((error, message.offset())),
        )
        assert producer.flush(30) == 0
    assert [error for error, _ in delivered] == [None] * 6
    check_written_once(cluster, proxy, [offset for _, offset in delivered])


def test_replog_producer_retry_of_a_lost_answer_is_written_once(
    proxied: tuple[Cluster, LostAnswers],
) -> None:
    cluster, proxy = proxied
    with Admin(cluster.bootstrap) as admin:
        admin.create_topics("lost", 1, 1)
    offsets = []
    with Producer(
        f"127.0.0.1:{proxy.port}", request_timeout_ms=1_500, retry_backoff_ms=50, linger_ms=0
    ) as producer:
        assert producer._producer.config.idempotent  # the default, as in Kafka's clients
        for i in range(6):
            offsets.append(producer.send("lost", b"v%d" % i, partition=0).result(30).offset)
    check_written_once(cluster, proxy, offsets)


def test_without_idempotence_a_retry_of_a_lost_answer_is_written_again(
    proxied: tuple[Cluster, LostAnswers],
) -> None:
    """What the proxy does to a producer that is not idempotent: Kafka's classic duplicates
    (the first record is in the log three times)."""
    cluster, proxy = proxied
    with Admin(cluster.bootstrap) as admin:
        admin.create_topics("lost", 1, 1)
    with Producer(
        f"127.0.0.1:{proxy.port}",
        request_timeout_ms=1_500,
        retry_backoff_ms=50,
        linger_ms=0,
        enable_idempotence=False,
    ) as producer:
        for i in range(6):
            producer.send("lost", b"v%d" % i, partition=0).result(30)
    values = [v for _, v in read_all(cluster, 8)]
    assert values == [b"v0", b"v0", b"v0", b"v1", b"v2", b"v3", b"v4", b"v5"]
