"""The controller role in the ZooKeeper backend: election, resignation, and the fence every
controller write carries.

Election is one multi-op: create the ephemeral ``/controller`` (it goes with the winner's
session) and compare-and-set ``/controller_epoch``. Every controller write checks the versions
of both nodes in its own transaction (``fence``), so a controller whose session expired (its
``/controller`` is gone) or that was replaced is refused even before anyone else is elected.
A controller this handle holds writes through its own session's client, refused while that
session is SUSPENDED; others write through the main client.
"""

from __future__ import annotations

from typing import Any

from replog.coord import rules
from replog.coord.errors import (
    CoordinatorUnavailableError,
    FencedControllerError,
    SessionExpiredError,
)
from replog.coord.zookeeper.expiry import epoch_node
from replog.coord.zookeeper.sessions import ZkSessions
from replog.coord.zookeeper.znode_io import Op, Plan, ZkIo, kazoo_errors
from replog.coord.zookeeper.znodes import (
    CONTROLLER,
    EPOCH,
    IDS,
    decode_broker,
    decode_controller,
    decode_epoch,
    encode_controller,
    encode_epoch,
)
from replog.metadata import records
from replog.metadata.types import ControllerInfo, SessionState

__all__ = ["ZkController"]


class ZkController:
    """The controller role as seen from one handle: ``io`` and the ``main`` client read the
    store; ``sessions`` are the broker sessions this handle holds (a candidate runs for
    election through its own). Callers pass deadlines (monotonic seconds)."""

    def __init__(self, io: ZkIo, main: Any, sessions: ZkSessions) -> None:
        self._io = io
        self._main = main
        self._sessions = sessions

    def elect(self, broker_id: int, incarnation_epoch: int, deadline: float) -> ControllerInfo:
        """``elect_controller``: one multi-op creating the ephemeral /controller and
        compare-and-setting /controller_epoch."""
        io = self._io
        with kazoo_errors():
            client = self._sessions.session_for(broker_id, incarnation_epoch, deadline).client
            if io.get(client, CONTROLLER, deadline) is None:
                # a dead holder's expiry goes in the feed before its successor
                self._sessions.reap(deadline)

            def prepare(seq: int) -> Plan[ControllerInfo]:
                got = io.get(client, CONTROLLER, deadline)
                if got is not None:
                    return Plan(decode_controller(got[0]), write=False)
                me = io.get(client, f"{IDS}/{broker_id}", deadline)
                mine = None if me is None else decode_broker(broker_id, me[0])
                rules.check_incarnation(broker_id, incarnation_epoch, mine)
                if me is None:  # pragma: no cover - check_incarnation raised
                    raise SessionExpiredError(broker_id, incarnation_epoch, None)
                epoch_got = epoch_node(io, client, deadline)
                epoch, _ = decode_epoch(epoch_got[0])
                new = ControllerInfo(broker_id, epoch + 1, incarnation_epoch)
                holder = encode_epoch(epoch + 1, [broker_id, incarnation_epoch])
                ops: list[Op] = [
                    ("check", f"{IDS}/{broker_id}", me[1].version),
                    ("create", CONTROLLER, encode_controller(new), True),
                    ("set", EPOCH, holder, epoch_got[1].version),
                ]
                return Plan(new, ops, records.controller_changed(seq, new))

            return io.transact(client, prepare, deadline)

    def resign(self, broker_id: int, controller_epoch: int, deadline: float) -> bool:
        """``resign_controller``: delete /controller and clear the epoch's holder, if the
        role is still the one named."""
        io = self._io
        with kazoo_errors():
            got = io.get(self._main, CONTROLLER, deadline)
            if got is None:
                return False
            ctl = decode_controller(got[0])
            if not rules.holds_controller(ctl, broker_id, controller_epoch):
                return False
            client = self.client_of(ctl)

            def prepare(seq: int) -> Plan[bool]:
                now = io.get(client, CONTROLLER, deadline)
                if now is None or decode_controller(now[0]) != ctl:
                    return Plan(False, write=False)
                epoch_got = epoch_node(io, client, deadline)
                epoch, _ = decode_epoch(epoch_got[0])
                ops: list[Op] = [
                    ("delete", CONTROLLER, now[1].version),
                    ("set", EPOCH, encode_epoch(epoch, None), epoch_got[1].version),
                ]
                return Plan(True, ops, records.controller_changed(seq, None))

            return io.transact(client, prepare, deadline)

    def current(self, deadline: float) -> ControllerInfo | None:
        """``current_controller``."""
        with kazoo_errors():
            got = self._io.get(self._main, CONTROLLER, deadline)
        return None if got is None else decode_controller(got[0])

    def client_of(self, ctl: ControllerInfo) -> Any:
        """The client to write as controller ``ctl``: its own session's if this handle holds
        it (refused while SUSPENDED), else the main one."""
        session = self._sessions.held(ctl.controller_id)
        if session is None or session.incarnation_epoch != ctl.incarnation_epoch:
            return self._main
        if session.state is SessionState.SUSPENDED:
            raise CoordinatorUnavailableError(
                f"controller {ctl.controller_id}'s session is suspended"
            )
        return session.client

    def client_for(self, controller_epoch: int, deadline: float) -> Any:
        """The client a write of ``controller_epoch`` goes through: the active controller's
        (``client_of``) if that epoch is active, else the main one (whose ``fence`` then
        refuses it). Runs inside the caller's ``kazoo_errors``."""
        got = self._io.get(self._main, CONTROLLER, deadline)
        if got is not None:
            ctl = decode_controller(got[0])
            if ctl.controller_epoch == controller_epoch:
                return self.client_of(ctl)
        return self._main

    def fence(self, client: Any, controller_epoch: int, deadline: float) -> list[Op]:
        """Checks that make a write conditional on ``controller_epoch`` being the active
        controller's; raises ``FencedControllerError`` if it is not now. Runs inside the
        caller's ``kazoo_errors``."""
        got = self._io.get(client, CONTROLLER, deadline)
        active = rules.check_controller_epoch(
            None if got is None else decode_controller(got[0]), controller_epoch
        )
        if got is None:  # pragma: no cover - check_controller_epoch raised
            raise FencedControllerError(controller_epoch, None)
        self.client_of(active)  # SUSPENDED check
        epoch_got = epoch_node(self._io, client, deadline)
        return [("check", CONTROLLER, got[1].version), ("check", EPOCH, epoch_got[1].version)]
