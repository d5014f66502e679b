"""The ports through which the broker driver's parts see it.

Each part (``MetadataChannel``, ``FetchSessions``, ``ControllerRole``, ``GroupHost``,
``DriverServices``) declares, as a ``Protocol`` in its own module, exactly the members of the
driver it uses, and is typed against that, never against ``BrokerDriver``: what a part may
touch is written down where it is used, and no part imports the driver (the driver imports
them). ``DriverCore`` is what every part shares: who this broker is, its latest input time,
its config, its effects, its logs and its replica manager.
"""

from __future__ import annotations

from typing import Protocol

from replog.broker.config import BrokerConfig
from replog.broker.driver.outbox import Outbox
from replog.broker.driver.replica_manager import ReplicaManager
from replog.log.manager import LogManager

__all__ = ["DriverCore"]


class DriverCore(Protocol):
    """The members of ``BrokerDriver`` every part reads."""

    @property
    def broker_id(self) -> int:
        """This broker's id."""

    @property
    def incarnation_epoch(self) -> int:
        """This registration's epoch (-1 before the first)."""

    @property
    def now_ms(self) -> int:
        """The ``now_ms`` of the driver's latest input."""

    @property
    def config(self) -> BrokerConfig:
        """The broker's static config."""

    @property
    def outbox(self) -> Outbox:
        """Where effects are queued for the shell."""

    @property
    def log_manager(self) -> LogManager:
        """The broker's logs."""

    @property
    def rm(self) -> ReplicaManager:
        """The replica manager (raises before registration)."""

    @property
    def rm_or_none(self) -> ReplicaManager | None:
        """The replica manager, or None before registration."""
