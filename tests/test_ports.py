"""The test port allocator stays out of the kernel's ephemeral range and never repeats."""

from __future__ import annotations

import socket

from tests.ports import free_port


def _ephemeral_low() -> int:
    with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
        return int(f.read().split()[0])


def test_ports_are_below_the_ephemeral_range_and_distinct() -> None:
    ports = [free_port() for _ in range(200)]
    assert len(set(ports)) == len(ports)
    assert all(20000 <= p < min(32768, _ephemeral_low()) for p in ports)


def test_a_port_someone_holds_is_skipped() -> None:
    with socket.socket() as held:
        held.bind(("127.0.0.1", free_port()))
        held.listen()
        taken = held.getsockname()[1]
        # The allocator walks on; a held port never comes back even once the walk wraps.
        assert all(free_port() != taken for _ in range(100))
