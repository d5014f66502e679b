"""``ControllerRole``: this broker's part in the controller election and, when it wins, the
controller service's polls.

Every ``CONTROLLER_POLL_MS`` (and after metadata changes) an active broker -- registered, its
metadata loaded; a fenced one too, or nobody could admit the first -- with no controller service
campaigns when the metadata names no controller or names itself (a new incarnation of this
broker after a lost session); the winner polls its ``ControllerService`` (controller-epoch-
fenced writes out). The service reads no feed of its own: once the broker's image names the won
term, the first poll hands it a snapshot of that image, and every poll the feed batches the
metadata channel applied since (``on_batch``; ``on_image_loaded`` after a gap makes the next
poll rebuild it from the new image). The service is synchronous and calls the coordinator
itself, so each campaign or poll is one ``CoordCall`` run off the loop, and only one is in
flight. A coordinator error, or a poll after which the service is no longer active, ends the
role; the next tick may campaign again. The state-change records a poll returns are kept for the
driver (``take_state_changes``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, Protocol

from replog.broker.driver.ports import DriverCore
from replog.controller import ControllerService
from replog.coord.errors import CoordinatorError
from replog.election.state_change import StateChange
from replog.metadata.types import ChangeBatch
from replog.state_change import StateChangeSink

__all__ = ["CONTROLLER_POLL_MS", "ControllerRole", "STATE_CHANGES_MAX"]

_log = logging.getLogger(__name__)

CONTROLLER_POLL_MS = 50
STATE_CHANGES_MAX = 10_000
"""State-change records kept for the driver before the oldest are dropped."""


class ControllerHost(DriverCore, Protocol):
    """What the controller role uses of the driver (see ``replog.broker.driver.ports``)."""

    @property
    def active(self) -> bool:
        """Registered, metadata loaded, not stopping."""

    @property
    def state_change_sink(self) -> StateChangeSink:
        """Where state-change records go."""


class ControllerRole:
    """See the module docstring."""

    def __init__(
        self,
        driver: ControllerHost,
        placement_start: Callable[[int], tuple[int, int]] | None = None,
    ) -> None:
        self._driver = driver
        self._placement_start = placement_start
        self.service: ControllerService | None = None
        #: the feed batches the broker applied since the service's last poll, and whether the
        #: service must be rebuilt from the image first (it won, or the image was reloaded)
        self._batches: list[ChangeBatch] = []
        self._reload = False
        self._busy = False
        self._next_ms = 0
        self._state_changes: list[StateChange] = []

    @property
    def is_controller(self) -> bool:
        """Whether this broker holds the controller role now."""
        return self.service is not None and self.service.is_active

    def on_tick(self, now_ms: int, *, soon: bool = False) -> None:
        """Campaign or poll when due (``soon``: metadata changed, poll now)."""
        driver = self._driver
        if self._busy or (not soon and now_ms < self._next_ms) or not driver.active:
            return
        self._next_ms = now_ms + CONTROLLER_POLL_MS
        if self.service is None:
            current = driver.rm.image.controller
            if current is None or current.controller_id == driver.broker_id:
                self._campaign()
        else:
            self._poll(self.service, now_ms)

    def _campaign(self) -> None:
        driver = self._driver
        broker_id, incarnation = driver.broker_id, driver.incarnation_epoch
        config = driver.config.controller_config()
        self._busy = True

        def campaign(coordinator: Any) -> ControllerService | None:
            service = ControllerService(
                coordinator,
                broker_id,
                incarnation,
                config=config,
                start_index_source=self._placement_start,
            )
            return service if service.try_become_controller() else None

        def done(won: Any, error: BaseException | None) -> None:
            self._busy = False
            if error is not None:
                _log.debug("broker %s: controller election failed: %s", broker_id, error)
            elif (
                isinstance(won, ControllerService)
                and driver.active
                and driver.incarnation_epoch == incarnation
            ):
                self.service, self._batches, self._reload = won, [], True
                _log.info("broker %s is the controller", broker_id)
                self.on_tick(driver.now_ms, soon=True)

        driver.outbox.call("campaign", campaign, done)

    def on_batch(self, batch: ChangeBatch) -> None:
        """The broker applied ``batch`` to its image: the service takes it at its next poll."""
        if self.service is not None and not self._reload:
            self._batches.append(batch)

    def on_image_loaded(self) -> None:
        """The broker loaded a whole new image (a gap in its feed): the service rebuilds."""
        if self.service is not None:
            self._batches, self._reload = [], True

    def _poll(self, service: ControllerService, now_ms: int) -> None:
        driver = self._driver
        broker_id = driver.broker_id
        snapshot = None
        if self._reload:
            image = driver.rm.image
            if not service.has_seen_election(image.controller_epoch):
                return  # the image has not seen this term's election yet: poll again later
            snapshot, self._batches, self._reload = image.snapshot(), [], False
        batches, self._batches = self._batches, []
        self._busy = True

        def done(records: Any, error: BaseException | None) -> None:
            self._busy = False
            if self.service is not service:
                return
            if error is not None:
                if not isinstance(error, CoordinatorError):
                    _log.error("broker %s: controller poll failed", broker_id, exc_info=error)
                _log.info("broker %s: lost the controller role: %s", driver.broker_id, error)
                self.service = None
                return
            if isinstance(records, list):
                self._keep(records)
            if not service.is_active:
                _log.info("broker %s: controller role ended: %s", driver.broker_id,
                          service.lost_reason)  # fmt: skip
                self.service = None

        driver.outbox.call(
            "controller poll",
            lambda c: service.poll(now_ms, snapshot=snapshot, batches=batches),
            done,
        )

    def _keep(self, records: list[StateChange]) -> None:
        for record in records:
            self._driver.state_change_sink(record)
        self._state_changes.extend(records)
        overflow = len(self._state_changes) - STATE_CHANGES_MAX
        if overflow > 0:
            del self._state_changes[:overflow]

    def take_state_changes(self) -> list[StateChange]:
        """The controller's state-change records since the last call."""
        records, self._state_changes = self._state_changes, []
        return records

    def resign(self) -> None:
        """Give the role up (controlled shutdown); the call runs off the loop."""
        service, self.service = self.service, None
        if service is not None and service.is_active:
            self._driver.outbox.call("resign", lambda c: service.resign(), lambda r, e: None)

    def drop(self) -> None:
        """Forget the role without resigning (a crash, or a new incarnation)."""
        self.service = None
