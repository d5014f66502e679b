"""``BrokerFaults``: faults injected at one broker's edge, for tests; every client sees them.

A test cluster's faults live where a real network or a real disk would put them, so every Kafka
client meets them the same way (``replog.broker.shell.cluster_faults`` is the test-facing API):

- **error rules**: the next requests of an API (from any client, or one ``client_id``) are
  answered with the given error codes, one code per request, without reaching the driver (as
  librdkafka's mock ``push_request_errors``); inter-broker requests are never matched;
- **latency**: requests (of one API, or all) wait that long before the broker handles them;
- **cut clients**: requests from every client (or one ``client_id``) get no answer at all, as
  behind a network partition; healing drops those connections, so clients reconnect;
- **cut brokers**: this broker's requests to the listed brokers (follower fetches) wait out
  their timeout and fail, as across a partition;
- **pause**: like a stopped process: requests wait, the timers (heartbeats included) and the
  sends to other brokers stop, inputs are held; ``resume`` goes on where it stopped;
- **tracking**: every request's client, API, version and correlation id, in arrival order.

The broker asks ``active`` first, one attribute read per request when no fault is set.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import attrs

from replog.errors import ErrorCode, ReplogError
from replog.protocol import RequestHeader

__all__ = [
    "BLACKHOLE",
    "INTER_BROKER_CLIENT_PREFIX",
    "BrokerFaults",
    "ErrorRule",
    "InjectedError",
    "TrackedRequest",
]

INTER_BROKER_CLIENT_PREFIX = "replica-"
"""The client id prefix of a broker's requests to other brokers (``replica-<id>``)."""


class InjectedError(ReplogError):
    """An error a test asked for: the error response of the request carries ``code``."""

    def __init__(self, code: ErrorCode) -> None:
        super().__init__(f"injected {code.name}")
        self.code = code


@attrs.frozen
class TrackedRequest:
    """One request a broker received (``BrokerFaults.tracking``)."""

    broker_id: int
    client_id: str | None
    api: str
    api_key: int
    api_version: int
    correlation_id: int


@attrs.define
class ErrorRule:
    """The next requests of ``api_key`` (from ``client_id``, or any client) are answered with
    ``codes``, one each, in order; ``ErrorCode.NONE`` lets one through."""

    api_key: int
    codes: list[ErrorCode]
    client_id: str | None = None


@attrs.define
class _Latency:
    delay_s: float
    api_key: int | None


class BrokerFaults:
    """The faults set on one broker (module docstring); changed on the broker's loop only."""

    def __init__(self, broker_id: int) -> None:
        self.broker_id = broker_id
        self.active = False
        self._errors: list[ErrorRule] = []
        self._latency: list[_Latency] = []
        #: client ids whose requests go unanswered (None: every client)
        self._cut_clients: set[str | None] = set()
        #: connections holding an unanswered request, dropped at heal
        self.blackholed: set[int] = set()
        self.cut_brokers: set[int] = set()
        self._reachable = asyncio.Event()
        self._reachable.set()
        self._resumed = asyncio.Event()
        self._resumed.set()
        self._held: list[Callable[[], None]] = []
        self.tracking: list[TrackedRequest] | None = None

    # ----------------------------------------------------------------- setting

    def inject_errors(self, rule: ErrorRule) -> None:
        """Answer the next requests ``rule`` matches with its codes in turn (a rule may be
        shared by several brokers: the codes go to whichever broker is asked first)."""
        self._errors.append(rule)
        self._update()

    def add_latency(self, delay_s: float, api_key: int | None) -> None:
        """Hold every request (of ``api_key``, or all) ``delay_s`` before handling it."""
        self._latency.append(_Latency(delay_s, api_key))
        self._update()

    def cut_clients(self, client_id: str | None) -> None:
        """Answer nothing to ``client_id`` (None: every client but other brokers)."""
        self._cut_clients.add(client_id)
        self._update()

    def cut_broker(self, broker_id: int) -> None:
        """Let requests to ``broker_id`` time out."""
        self.cut_brokers.add(broker_id)
        self._reachable.clear()
        self._update()

    def uncut_broker(self, broker_id: int) -> None:
        """Undo ``cut_broker``: requests waiting to reach ``broker_id`` go on."""
        self.cut_brokers.discard(broker_id)
        self._reachable.set()
        self._update()

    def pause(self) -> None:
        """Stop as a stopped process does (module docstring)."""
        self._resumed.clear()
        self._update()

    def track(self, into: list[TrackedRequest]) -> None:
        """Record every request from now on in ``into`` (which several brokers may share)."""
        self.tracking = into
        self._update()

    def resume(self) -> None:
        """Undo ``pause``: held inputs run in order, waiting requests go on."""
        self._resumed.set()
        held, self._held = self._held, []
        for step in held:
            step()
        self._update()

    def heal(self) -> set[int]:
        """Undo every fault (tracking stops too); returns the connections to drop."""
        self._errors.clear()
        self._latency.clear()
        self._cut_clients.clear()
        self.cut_brokers.clear()
        self._reachable.set()
        self.tracking = None
        if not self._resumed.is_set():
            self.resume()
        dropped, self.blackholed = self.blackholed, set()
        self._update()
        return dropped

    def _update(self) -> None:
        self.active = bool(
            self._errors
            or self._latency
            or self._cut_clients
            or self.cut_brokers
            or self.tracking is not None
            or not self._resumed.is_set()
        )

    # ----------------------------------------------------------------- consulted by the broker

    @property
    def paused(self) -> bool:
        """Whether the broker is paused."""
        return not self._resumed.is_set()

    async def before_request(
        self, conn_id: int, header: RequestHeader, api: str
    ) -> Exception | None:
        """Called for each request while ``active``: waits out a pause and any latency;
        returns the error to answer with, ``BLACKHOLE`` for no answer, None to go on."""
        if self.tracking is not None:
            self.tracking.append(
                TrackedRequest(
                    self.broker_id,
                    header.client_id,
                    api,
                    header.api_key,
                    header.api_version,
                    header.correlation_id,
                )
            )
        if not self._resumed.is_set():
            await self._resumed.wait()
        client_id = header.client_id
        if client_id is not None and client_id.startswith(INTER_BROKER_CLIENT_PREFIX):
            return None
        delay_s = sum(
            rule.delay_s
            for rule in self._latency
            if rule.api_key is None or rule.api_key == header.api_key
        )
        if delay_s > 0:
            await asyncio.sleep(delay_s)
        if None in self._cut_clients or client_id in self._cut_clients:
            self.blackholed.add(conn_id)
            return BLACKHOLE
        for rule in list(self._errors):
            if not rule.codes:  # used up at another broker
                self._errors.remove(rule)
                self._update()
            elif rule.api_key == header.api_key and rule.client_id in (None, client_id):
                code = rule.codes.pop(0)
                return None if code is ErrorCode.NONE else InjectedError(code)
        return None

    def hold(self, step: Callable[[], None]) -> bool:
        """Keep ``step`` (an input for the driver) until ``resume`` if paused; True if kept."""
        if self._resumed.is_set():
            return False
        self._held.append(step)
        return True

    async def wait_resumed(self) -> None:
        """Return once the broker is not paused."""
        await self._resumed.wait()

    async def reachable(self, broker_id: int, timeout_s: float) -> bool:
        """Whether ``broker_id`` can be reached within ``timeout_s`` (at once when not cut)."""
        if broker_id not in self.cut_brokers:
            return True
        try:
            await asyncio.wait_for(self._wait_healed(broker_id), timeout_s)
        except TimeoutError:
            return False
        return True

    async def _wait_healed(self, broker_id: int) -> None:
        while broker_id in self.cut_brokers:
            self._reachable.clear()
            await self._reachable.wait()


class _Blackhole(Exception):
    """The request gets no answer (a cut client)."""


BLACKHOLE = _Blackhole("no answer: the client is cut off")
