"""The floor for a Python request/response server: answers every Produce with a fixed response.

    python -m benchmarks.floor_server PORT PRODUCE_VERSION

An ``asyncio.Protocol`` server (on uvloop when installed) that splits the stream into Kafka
frames and answers each with one precomputed ProduceResponse frame (partition 0, no error),
its correlation id copied from the request: no decode, no dispatch, no log. What replog's
broker costs per produce beyond this is what its request path costs
(``benchmarks.replication --floor`` runs it beside the single broker in the same run).
Prints ``ready`` once listening; runs until killed.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from replog.event_loop import run as run_loop
from replog.protocol import encode_response
from replog.protocol.messages import (
    PartitionProduceResponse,
    ProduceResponse,
    TopicProduceResponse,
)

TOPIC = "bench"


def response_frame(version: int) -> bytes:
    """The answer to every request (correlation id 0, patched per answer)."""
    body = ProduceResponse(
        responses=[
            TopicProduceResponse(
                name=TOPIC,
                partition_responses=[PartitionProduceResponse(index=0, error_code=0)],
            )
        ]
    )
    return bytes(encode_response(0, version, body))


class _Floor(asyncio.Protocol):
    def __init__(self, answer: bytes) -> None:
        self.answer = bytearray(answer)
        self.buffer = bytearray()
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        buffer = self.buffer
        buffer += data
        out = bytearray()
        while len(buffer) >= 4:
            size = int.from_bytes(buffer[:4], "big")
            if len(buffer) < 4 + size:
                break
            self.answer[4:8] = buffer[8:12]  # size | api key, version | correlation id
            out += self.answer
            del buffer[: 4 + size]
        if out and self.transport is not None:
            self.transport.write(bytes(out))


async def serve(port: int, version: int) -> None:
    answer = response_frame(version)
    loop = asyncio.get_running_loop()
    server = await loop.create_server(lambda: _Floor(answer), "127.0.0.1", port)
    print("ready", flush=True)
    async with server:
        await server.serve_forever()


@contextmanager
def running(version: int) -> Iterator[tuple[str, int]]:
    """This server in a process of its own (inheriting the environment): (address, pid)."""
    from tests.ports import free_port

    root = Path(__file__).resolve().parents[1]
    port = free_port()
    path = os.pathsep.join([os.environ.get("PYTHONPATH", ""), str(root), str(root / "src")])
    proc = subprocess.Popen(
        [sys.executable, "-m", "benchmarks.floor_server", str(port), str(version)],
        cwd=root,
        stdout=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": path},
    )
    try:
        assert proc.stdout is not None
        if proc.stdout.readline().strip() != b"ready":
            raise RuntimeError("the floor server did not start")
        yield f"127.0.0.1:{port}", proc.pid
    finally:
        proc.kill()
        proc.wait()


if __name__ == "__main__":
    run_loop(serve(int(sys.argv[1]), int(sys.argv[2])))
