"""Ports for servers the tests start: below the kernel's ephemeral range, never repeated.

A port picked by binding port 0 and closing the socket lies in the ephemeral range
(32768-60999 on Linux), so any outgoing connection made before the server binds it can take
it: a CI run once lost a voter that way (``address already in use``). Ports handed out here
come from 20000-32767, which the kernel never assigns on its own, each at most once per
process, from a start spread by the process id so concurrent test processes rarely meet; a
port that something already holds is skipped.
"""

from __future__ import annotations

import itertools
import os
import socket
import threading

__all__ = ["free_port"]

_LOW, _HIGH = 20000, 32768
_lock = threading.Lock()
_next = itertools.count((os.getpid() * 7919) % (_HIGH - _LOW))


def _bindable(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def free_port() -> int:
    """A TCP port on 127.0.0.1 nothing holds now and no other call here returned."""
    with _lock:
        for _ in range(_HIGH - _LOW):
            port = _LOW + next(_next) % (_HIGH - _LOW)
            if _bindable(port):
                return port
    raise RuntimeError(f"no free port in {_LOW}-{_HIGH - 1}")
