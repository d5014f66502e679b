"""``state-change.log``: the state changes a broker (and its controller role) asked for,
received and completed, one line each, in the broker's first log dir, rotated by size.
The broker writes it (``StateChangeLog``); ``replog state-change-log`` reads it
(``parse_state_change_log_line``). Not pure (files, wall-clock dates), so it sits apart from
``replog.state_change``, which the sans-IO packages import.

Line layout (UTF-8, one record per line)::

    [2026-11-24 17:58:00,123] <StateChange.to_log_line()>

The bracketed wall-clock time of the change (UTC, millisecond precision; Kafka's log4j
layout) orders the lines of several brokers against each other when ``replog
state-change-log`` merges them; the rest is ``replog.state_change``'s line, whose own leading
number is the driver's monotonic clock, and which ``parse_state_change_log_line`` reads back.
When the file reaches ``bytes_max`` it is renamed ``state-change.log.1`` (older ones shift to
``.2`` ...; those beyond ``backups`` are deleted), as the standard library's
``RotatingFileHandler`` does.
"""

from __future__ import annotations

import datetime
import logging
import logging.handlers
import os

import attrs

from replog.clock import SYSTEM_CLOCK, Clock
from replog.state_change import StateChange, parse_log_line

__all__ = [
    "STATE_CHANGE_LOG",
    "StateChangeLog",
    "format_wall_ms",
    "parse_state_change_log_line",
]

STATE_CHANGE_LOG = "state-change.log"


def format_wall_ms(wall_ms: int) -> str:
    """``2026-11-24 17:58:00,123`` for a wall-clock time in ms since the epoch (UTC)."""
    moment = datetime.datetime.fromtimestamp(wall_ms / 1000, tz=datetime.UTC)
    return moment.strftime("%Y-%m-%d %H:%M:%S,") + f"{wall_ms % 1000:03d}"


def parse_state_change_log_line(line: str) -> tuple[int, StateChange]:
    """(wall-clock ms, record) of one line this module wrote; ``ValueError`` otherwise."""
    if not line.startswith("[") or "] " not in line:
        raise ValueError(f"not a state-change.log line: {line!r}")
    stamp, _, rest = line[1:].partition("] ")
    moment = datetime.datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S,%f")
    wall_ms = round(moment.replace(tzinfo=datetime.UTC).timestamp() * 1000)
    return wall_ms, parse_log_line(rest.rstrip("\n"))


@attrs.define
class StateChangeLog:
    """The open ``state-change.log`` of one broker; ``write`` is a ``StateChangeSink``."""

    path: str
    _handler: logging.handlers.RotatingFileHandler
    _clock: Clock
    _closed: bool = False

    @classmethod
    def open(
        cls, log_dir: str, *, bytes_max: int, backups: int, clock: Clock = SYSTEM_CLOCK
    ) -> StateChangeLog:
        """Append to ``<log_dir>/state-change.log`` (created if missing)."""
        os.makedirs(log_dir, exist_ok=True)
        path = os.path.join(log_dir, STATE_CHANGE_LOG)
        handler = logging.handlers.RotatingFileHandler(
            path, maxBytes=bytes_max, backupCount=backups, encoding="utf-8"
        )
        handler.setFormatter(logging.Formatter("%(message)s"))
        return cls(path, handler, clock)

    def write(self, change: StateChange) -> None:
        """Append one line for ``change`` (nothing once closed: the broker has stopped, and the
        handler would reopen the file). The stamp is the wall-clock time of the change's
        current phase (``at_ms``, on the monotonic clock, shifted by the clocks' offset now):
        a controller's records reach the shell after its metadata write, and stamping them
        with the time of writing would order them after the completions they caused."""
        if self._closed:
            return
        offset_ms = self._clock.wall_ms() - self._clock.monotonic_ms()
        line = f"[{format_wall_ms(change.at_ms + offset_ms)}] {change.to_log_line()}"
        # A record handed straight to the handler: no logger, so nothing propagates to (or is
        # filtered by) the application's logging configuration.
        self._handler.handle(logging.makeLogRecord({"msg": line, "levelno": logging.INFO}))

    def close(self) -> None:
        """Flush and close the file. Idempotent."""
        self._closed = True
        self._handler.close()
