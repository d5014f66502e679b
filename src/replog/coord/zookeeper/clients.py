"""Opening and closing the ZooKeeper backend's kazoo clients: the handle's main client and one
per registered broker (whose ZooKeeper session is that broker's session)."""

from __future__ import annotations

import logging
from typing import Any

from kazoo.client import KazooClient
from kazoo.retry import KazooRetry

__all__ = ["RECONNECT_MAX_DELAY_S", "new_client", "stop_client"]

_log = logging.getLogger(__name__)

#: The longest pause between reconnect attempts, and the share of a session's timeout it may take.
RECONNECT_MAX_DELAY_S = 1.0
_RECONNECT_SHARE_OF_TIMEOUT = 0.25


def new_client(hosts: str, session_timeout_s: float, **kwargs: Any) -> KazooClient:
    """A kazoo client that keeps trying to reconnect at most ``RECONNECT_MAX_DELAY_S`` apart.

    kazoo's default reconnect back-off doubles up to an hour: after a ZooKeeper server is down a
    few seconds, the next attempt can come later than the session timeout, so a session that a
    restarted server would have kept expires instead. Attempts stay well inside the timeout.
    """
    max_delay = min(RECONNECT_MAX_DELAY_S, session_timeout_s * _RECONNECT_SHARE_OF_TIMEOUT)
    retry = KazooRetry(max_tries=-1, delay=min(0.1, max_delay), backoff=2, max_delay=max_delay)
    return KazooClient(hosts=hosts, timeout=session_timeout_s, connection_retry=retry, **kwargs)


def stop_client(client: Any) -> None:
    """Stop and close a kazoo client, ignoring failures."""
    try:
        client.stop()
        client.close()
    except Exception:
        _log.debug("stopping a kazoo client failed", exc_info=True)
