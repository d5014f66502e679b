"""``MetadataChannel``: everything the driver says to and hears from the coordinator.

- **Registration** (``register``): a new incarnation, retried while the previous one's session
  lives (``BrokerIdInUseError``) or the coordinator is unreachable, up to three session timeouts
  at start-up; ``clean_shutdown`` as the log dirs say (KIP-966). A LOST session re-registers as
  a new incarnation (KIP-903), never the old, retrying until it succeeds.
- **Heartbeats** every ``heartbeat_interval_ms``; the session state says whether this broker's
  metadata is current (while it is not, leaders complete no acks=all produce).
- **The image** (``load_image``, at each registration): the cached image brought up to date
  from the feed when the store vouches for it (``ImageKeeper``), else a full snapshot; the
  feed is not polled until one of them is applied. A read that fails (the coordinator is
  unreachable, the quorum elects) is logged and tried again after a back-off that doubles
  from ``IMAGE_RETRY_MS_MIN`` to ``IMAGE_RETRY_MS_MAX`` (on ticks, so on the driver's input
  time), until it succeeds or the broker halts: a broker never stays FENCED, nor a feed
  stuck after a gap, because one read failed.
- **The feed**: one ``changes_since`` in flight at a time, from the image's cursor; a gap
  (``MustResyncError``) reloads a snapshot. Each batch is applied once, to the channel's
  ``image``, and the ``MetadataDelta`` it returns goes with the image to the ``ReplicaManager``
  (under ``BrokerDriver.exclusive``: a metadata change may truncate or delete a log); every
  other part reads the same image. The keeper writes it to the log dir now and then. Completions
  of this broker's admin requests are routed to their waiters (a completion seen before its
  submission returned is kept, bounded); a request queued for this broker drains the queue.
- **Admin requests**: ``submit`` queues a payload for the controller and reports its
  completion, or None when it could not be queued or did not complete by the deadline. This
  broker's own queue (CloseReplica and the like) is acted on and completed by ``drain``, at
  start-up and whenever the feed shows a new request for it.
"""

from __future__ import annotations

import collections
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from replog.broker.driver.controller_role import ControllerRole
from replog.broker.driver.image_keeper import ImageKeeper
from replog.broker.driver.ports import DriverCore
from replog.coord.errors import (
    BrokerIdInUseError,
    CoordinatorUnavailableError,
    MustResyncError,
    SessionExpiredError,
)
from replog.metadata.image import MetadataImage
from replog.metadata.types import (
    CONTROLLER_TARGET,
    AdminPayload,
    AdminRequest,
    AdminRequestChanged,
    AdminRequestChangeReason,
    BrokerInfo,
    ChangeBatch,
    MetadataSnapshot,
    SessionEvent,
    SessionState,
)

if TYPE_CHECKING:
    from replog.coord.contract import Coordinator

__all__ = ["AdminCallback", "MetadataChannel"]

AdminCallback = Callable[[AdminRequestChanged | None, str], None]
"""Gets the completion record, or (None, why) when there is none."""

_log = logging.getLogger(__name__)

EARLY_COMPLETIONS_MAX = 1024
SUBMITS_PER_CALL_MAX = 64
"""The most admin submissions one coordinator call carries (see ``MetadataChannel.submit``)."""
REGISTER_RETRY_MS = 50
IMAGE_RETRY_MS_MIN = 100
"""The wait before the first retry of a failed image read (doubling at each failure)."""
IMAGE_RETRY_MS_MAX = 5_000
"""The longest wait between retries of a failed image read."""


class ChannelHost(DriverCore, Protocol):
    """What the metadata channel uses of the driver (see ``replog.broker.driver.ports``)."""

    @property
    def advertised_address(self) -> tuple[str, int]:
        """The host and port this broker registers."""

    @property
    def running(self) -> bool:
        """Not OFFLINE."""

    @property
    def controller(self) -> ControllerRole:
        """The controller role (it follows the batches this channel applies)."""

    def after_input(self) -> None:
        """Run the driver's end-of-input step (completions, outputs)."""

    def after_metadata(self) -> None:
        """Act on a metadata change (roles, waits, the controller)."""

    def exclusive(self, action: Callable[[], None]) -> None:
        """Run ``action`` when no group commit is in flight."""

    def coordinator_unavailable(self, what: str, error: BaseException | None) -> None:
        """A coordinator call failed."""

    def registration_failed(self, error: BaseException) -> None:
        """Registration gave up."""

    def set_session(self, state: SessionState) -> None:
        """The coordinator session's state changed."""


class MetadataChannel:
    """See the module docstring."""

    def __init__(self, driver: ChannelHost) -> None:
        self._driver = driver
        #: the broker's one metadata image: each feed batch is applied to it once, here
        self.image = MetadataImage.empty()
        self._image_loaded = False
        config = driver.config
        self.keeper = ImageKeeper(
            driver.log_manager.fs,
            driver.log_manager.dirs[0].path,
            enabled=config.metadata_image_cache_enable,
            interval_ms=config.metadata_image_cache_interval_ms,
            broker_id=driver.broker_id,
        )
        self._feed_busy = False
        self._feed_again = False
        self._heartbeat_busy = False
        self._drain_busy = False
        self._drain_again = False
        self._register_deadline_ms = 0
        self._register_retry_at_ms: int | None = None
        self._retry_register = True  # the clean_shutdown a retried registration says
        self._on_registered: Callable[[BrokerInfo], None] | None = None
        #: a failed image read to try again at ``_image_retry_at_ms``, and how often it failed
        self._image_retry: Callable[[], None] | None = None
        self._image_retry_at_ms = 0
        self.image_read_failures = 0
        self._waiters: dict[int, tuple[int, AdminCallback]] = {}
        self._early: collections.OrderedDict[int, AdminRequestChanged] = collections.OrderedDict()
        self._submits: list[tuple[AdminPayload, int, AdminCallback]] = []
        self._submit_busy = False

    # ------------------------------------------------------------------ registration

    def register(
        self,
        now_ms: int,
        *,
        clean_shutdown: bool,
        then: Callable[[BrokerInfo], None],
        give_up: bool = True,
    ) -> None:
        """Register a new incarnation, retrying while the old session lives or the
        coordinator cannot be reached -- for three session timeouts at start-up
        (``give_up``), for as long as it takes when a running broker lost its session."""
        timeout_ms = self._driver.config.session_timeout_ms * 3
        self._register_deadline_ms = now_ms + timeout_ms if give_up else 1 << 62
        self._on_registered = then
        self._try_register(clean_shutdown)

    def _try_register(self, clean_shutdown: bool) -> None:
        driver = self._driver
        config = driver.config
        host, port = driver.advertised_address

        def done(info: Any, error: BaseException | None) -> None:
            now_ms = driver.now_ms
            retriable = isinstance(error, (BrokerIdInUseError, CoordinatorUnavailableError))
            if retriable and now_ms <= self._register_deadline_ms:
                self._retry_register = clean_shutdown
                self._register_retry_at_ms = now_ms + REGISTER_RETRY_MS
                return
            if error is not None or not isinstance(info, BrokerInfo):
                driver.registration_failed(error or RuntimeError(f"registration gave {info!r}"))
                return
            then, self._on_registered = self._on_registered, None
            if then is not None:
                then(info)

        driver.outbox.call(
            "register",
            lambda c: c.register_broker(
                driver.broker_id,
                host,
                port,
                rack=config.rack,
                session_timeout_ms=config.session_timeout_ms,
                clean_shutdown=clean_shutdown,
                fenced=True,  # until the controller admits this incarnation (KRaft)
            ),
            done,
        )

    def on_tick(self, now_ms: int) -> None:
        """Retry a registration that waits for the old session to end; expire admin waits."""
        if self._register_retry_at_ms is not None and self._register_retry_at_ms <= now_ms:
            self._register_retry_at_ms = None
            self._try_register(self._retry_register)
        retry = self._image_retry
        if retry is not None and self._image_retry_at_ms <= now_ms:
            self._image_retry = None
            if self._driver.running:
                retry()
        expired = [rid for rid, (deadline, _) in self._waiters.items() if deadline <= now_ms]
        for request_id in expired:
            _, then = self._waiters.pop(request_id)
            then(None, "the controller did not complete the request")

    # ------------------------------------------------------------------ session

    def heartbeat(self) -> None:
        """One heartbeat (none while one is in flight)."""
        driver = self._driver
        if self._heartbeat_busy or driver.incarnation_epoch < 0:
            return
        self._heartbeat_busy = True
        incarnation = driver.incarnation_epoch

        def done(state: Any, error: BaseException | None) -> None:
            self._heartbeat_busy = False
            if incarnation != driver.incarnation_epoch:
                return
            if isinstance(error, CoordinatorUnavailableError):
                driver.set_session(SessionState.SUSPENDED)
            elif isinstance(error, SessionExpiredError):
                driver.set_session(SessionState.LOST)
            elif error is None and isinstance(state, SessionState):
                driver.set_session(state)

        driver.outbox.call("heartbeat", lambda c: c.heartbeat(driver.broker_id, incarnation), done)

    def on_session_event(self, event: SessionEvent) -> None:
        """A session listener's event for this broker."""
        if event.incarnation_epoch == self._driver.incarnation_epoch:
            self._driver.set_session(event.state)

    # ------------------------------------------------------------------ the feed

    def load_image(self, then: Callable[[], None]) -> None:
        """At registration: the cached image brought up to date if the store vouches for it,
        else a full snapshot; then ``then``."""
        driver = self._driver
        self._image_loaded = False
        self._image_retry = None
        if not self.keeper.has_cache():
            self.load_snapshot(then)
            return

        def done(resumed: Any, error: BaseException | None) -> None:
            if error is None and isinstance(resumed, MetadataSnapshot):
                self._apply_image(resumed, then, from_cache=True)
                return
            if isinstance(error, MustResyncError):
                why: object = f"the store no longer has its cursor ({error})"
            else:
                why = error if error is not None else resumed
            if why != "no usable cached image":  # (read_image said why)
                _log.warning("broker %s: reading a full snapshot: %s", driver.broker_id, why)
            # a failed snapshot read tries the cache again: it may be usable once the store is
            self.load_snapshot(then, retry=lambda: self.load_image(then))

        driver.outbox.call("resume from the image cache", self.keeper.resume, done)

    def load_snapshot(
        self, then: Callable[[], None], *, retry: Callable[[], None] | None = None
    ) -> None:
        """Read a snapshot and apply it (start-up, and after a feed gap); a failed read runs
        ``retry`` (default: this read again) after a back-off (the module docstring)."""
        driver = self._driver

        def done(snapshot: Any, error: BaseException | None) -> None:
            if error is not None or not isinstance(snapshot, MetadataSnapshot):
                self._image_read_failed(error or snapshot, retry or again)
                return
            self.image_read_failures = 0
            self._apply_image(snapshot, then, from_cache=False)

        def again() -> None:
            self.load_snapshot(then)

        driver.outbox.call("snapshot", lambda c: c.snapshot(), done)

    def _image_read_failed(self, why: object, retry: Callable[[], None]) -> None:
        """Log the failure and schedule ``retry`` after the back-off (none once halted)."""
        driver = self._driver
        if driver.rm_or_none is None or not driver.running:
            return
        self.image_read_failures += 1
        doublings = min(self.image_read_failures - 1, 16)
        wait_ms = min(IMAGE_RETRY_MS_MAX, IMAGE_RETRY_MS_MIN << doublings)
        _log.warning(
            "broker %s: reading the metadata image failed (%d in a row), again in %d ms: %s",
            driver.broker_id, self.image_read_failures, wait_ms, why,
        )  # fmt: skip
        self._image_retry = retry
        self._image_retry_at_ms = driver.now_ms + wait_ms

    def _apply_image(
        self, snapshot: MetadataSnapshot, then: Callable[[], None], *, from_cache: bool
    ) -> None:
        driver = self._driver

        def apply() -> None:
            image = MetadataImage.from_snapshot(snapshot)
            image.cluster_id = snapshot.cluster_id or self.image.cluster_id
            self.image, self._image_loaded = image, True
            driver.rm.apply_image(image, driver.now_ms)
            self.keeper.loaded(image, from_cache=from_cache)
            driver.controller.on_image_loaded()
            driver.after_metadata()
            then()
            if self._feed_again and not self._feed_busy:
                self.poll_feed()  # the feed moved while the image was read

        driver.exclusive(apply)

    def maybe_save_image(self) -> None:
        """Write the image to the log dir if it changed and the interval has passed."""
        snapshot = self.keeper.take_save(self._driver.now_ms)
        if snapshot is None:
            return
        keeper = self.keeper
        self._driver.outbox.call(
            "image cache", lambda c: keeper.write(snapshot), lambda _, e: keeper.saved(e)
        )

    def poll_feed(self) -> None:
        """Read the feed from the cursor (again later if a read is in flight)."""
        driver = self._driver
        if driver.rm_or_none is None:
            return
        if self._feed_busy or not self._image_loaded:
            # after the read in flight, or once the image is applied (a read from before it
            # would apply records the image already has, to an empty replica manager)
            self._feed_again = True
            return
        self._feed_busy, self._feed_again = True, False
        seq = self.image.seq

        def done(batch: Any, error: BaseException | None) -> None:
            if isinstance(error, MustResyncError):
                self.load_snapshot(self._feed_done)
                return
            if error is not None or not isinstance(batch, ChangeBatch):
                self._feed_busy = False
                driver.coordinator_unavailable("feed", error)
                return
            driver.exclusive(lambda: self._apply(batch))

        driver.outbox.call("feed", lambda c: c.changes_since(seq), done)

    def _apply(self, batch: ChangeBatch) -> None:
        driver = self._driver
        delta = self.image.apply(batch.changes, batch.next_seq)
        if delta.image_changed:
            driver.rm.apply_delta(self.image, delta, driver.now_ms)
            self.keeper.changed()
        if batch.changes:  # an empty batch moves no cursor the controller needs
            driver.controller.on_batch(batch)
        queued_for_us = False
        for change in delta.admin_requests:
            if change.reason is AdminRequestChangeReason.SUBMITTED:
                queued_for_us |= change.request.target == driver.broker_id
            elif change.reason is AdminRequestChangeReason.COMPLETED:
                self._completed(change)
        driver.after_metadata()
        if queued_for_us:
            self.drain()
        self._feed_done()

    def _feed_done(self) -> None:
        self._feed_busy = False
        if self._feed_again:
            self.poll_feed()

    # ------------------------------------------------------------------ admin requests

    def submit(self, payload: AdminPayload, deadline_ms: int, then: AdminCallback) -> None:
        """Queue ``payload`` for the controller; ``then`` gets its completion (or None).

        Submissions go out in order, one coordinator call at a time carrying every submission
        waiting then (at most ``SUBMITS_PER_CALL_MAX``): after a fault a broker leading many
        partitions proposes an ISR change for each at once, and a call apiece would fill the
        shell's threads, so its heartbeats and feed reads would queue behind them (a session
        lost, a committed change seen seconds late) and the submissions would contend with
        each other for the store's writes."""
        self._submits.append((payload, deadline_ms, then))
        self._send_submits()

    def _send_submits(self) -> None:
        if self._submit_busy or not self._submits:
            return
        batch = self._submits[:SUBMITS_PER_CALL_MAX]
        del self._submits[:SUBMITS_PER_CALL_MAX]
        payloads = [payload for payload, _, _ in batch]
        self._submit_busy = True

        def submit_all(c: Coordinator) -> list[AdminRequest | BaseException]:
            out: list[AdminRequest | BaseException] = []
            for payload in payloads:
                try:
                    out.append(c.submit_admin_request(CONTROLLER_TARGET, payload))
                except Exception as e:  # each submission fails alone, as it did alone
                    out.append(e)
            return out

        def queued(results: Any, error: BaseException | None) -> None:
            self._submit_busy = False
            if error is not None or not isinstance(results, list):
                results = [error] * len(batch)
            for (_, deadline_ms, then), request in zip(batch, results, strict=True):
                self._queued(request, deadline_ms, then)
            self._send_submits()

        self._driver.outbox.call("submit", submit_all, queued)

    def _queued(self, request: object, deadline_ms: int, then: AdminCallback) -> None:
        if not isinstance(request, AdminRequest):
            then(None, f"could not queue the request: {request}")
            return
        early = self._early.pop(request.request_id, None)
        if early is not None:
            then(early, early.message)
        else:
            self._waiters[request.request_id] = (deadline_ms, then)

    def _completed(self, change: AdminRequestChanged) -> None:
        waiter = self._waiters.pop(change.request.request_id, None)
        if waiter is not None:
            waiter[1](change, change.message)
            return
        if change.request.target != CONTROLLER_TARGET:
            return
        self._early[change.request.request_id] = change
        while len(self._early) > EARLY_COMPLETIONS_MAX:
            self._early.popitem(last=False)

    def drain(self) -> None:
        """Act on and complete what the controller queued for this broker."""
        driver = self._driver
        if self._drain_busy:
            self._drain_again = True
            return
        self._drain_busy, self._drain_again = True, False

        def listed(pending: Any, error: BaseException | None) -> None:
            if error is not None or not isinstance(pending, list):
                self._drain_busy = False
                return
            driver.exclusive(lambda: self._act(pending))

        driver.outbox.call(
            "admin queue", lambda c: c.pending_admin_requests(driver.broker_id), listed
        )

    def _act(self, pending: list[AdminRequest]) -> None:
        driver = self._driver
        for request in pending:
            driver.rm.cleanup.on_admin_request(request.payload)
        driver.after_input()
        ids = [r.request_id for r in pending]

        def completed(result: Any, error: BaseException | None) -> None:
            self._drain_busy = False
            if self._drain_again:
                self.drain()

        if not ids:
            completed(None, None)
            return

        def complete_all(c: Any) -> None:
            for request_id in ids:
                c.complete_admin_request(request_id)

        driver.outbox.call("admin completions", complete_all, completed)

    def abandon(self) -> None:
        """Forget every wait (halting); their callbacks are not called."""
        self._image_retry = None
        self._waiters.clear()
        self._early.clear()
        self._submits.clear()
        self._submit_busy = False
