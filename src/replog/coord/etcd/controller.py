"""The controller role in the etcd backend: election, resignation, admission of a broker
registration, and the guard every controller write carries.

``controller`` + ``controller_epoch`` are written by the election txn: it compares
``controller`` absent (create_revision 0), ``controller_epoch``'s mod_revision, and the
candidate's leased registration key present. The ``controller`` key carries no lease: the role
is *active* iff the registration of its broker incarnation (a leased key) is present. Every
controller write compares ``controller``'s mod_revision and that broker key's create_revision
(``guard``), so a zombie whose lease expired is fenced even before a successor is elected.
"""

from __future__ import annotations

import functools

from replog.coord import codec, rules
from replog.coord.errors import FencedControllerError
from replog.coord.etcd.client import (
    JsonObj,
    KeyValue,
    cmp_create,
    cmp_mod,
    op_delete,
    op_put,
    op_range,
)
from replog.coord.etcd.sessions import EtcdSessions, decode_broker
from replog.coord.etcd.store import (
    RETRY,
    Done,
    EtcdStore,
    Records,
    Retry,
    TxnPlan,
    last_int,
    mod_rev,
    plan,
)
from replog.metadata import records
from replog.metadata.types import ControllerInfo

__all__ = ["EtcdController"]


class EtcdController:
    """The controller role in ``store``; ``sessions`` are the broker sessions this handle
    holds (a candidate must be acting, and an election records a dead holder's expiry first)."""

    def __init__(self, store: EtcdStore, sessions: EtcdSessions) -> None:
        self._store = store
        self._sessions = sessions

    def active(
        self, ctl_kvs: list[KeyValue], ids: list[KeyValue]
    ) -> tuple[ControllerInfo | None, KeyValue | None]:
        """The active controller and its broker's lease key, from one read."""
        if not ctl_kvs:
            return None, None
        controller: ControllerInfo = codec.loads(ctl_kvs[0].value)
        for kv in ids:
            if kv.key == self._sessions.ids_key(controller.controller_id):
                broker = decode_broker([kv])
                if broker is not None and broker.incarnation_epoch == controller.incarnation_epoch:
                    return controller, kv
        return None, None

    def ctl_ops(self) -> list[JsonObj]:
        """The reads a controller check needs (controller, epoch, every lease key)."""
        return [
            op_range(self._store.k("controller")),
            op_range(self._store.k("controller_epoch")),
            op_range(self._store.k("brokers/ids/"), prefix=True),
        ]

    def guard(self, controller_epoch: int, got: list[list[KeyValue]]) -> list[JsonObj]:
        """Check ``controller_epoch`` is the active controller's (``got`` from ``ctl_ops``) and
        return the compares that keep it so until the commit."""
        ctl_kvs, _, ids = got
        found, lease_kv = self.active(ctl_kvs, ids)
        active = rules.check_controller_epoch(found, controller_epoch)
        if lease_kv is None:  # pragma: no cover - found is None, check_controller_epoch raised
            raise FencedControllerError(controller_epoch, None)
        self._sessions.acting(active.controller_id, active.incarnation_epoch, [lease_kv])
        return [
            cmp_mod(self._store.k("controller"), ctl_kvs[0].mod_revision),
            cmp_create(lease_kv.key, lease_kv.create_revision),
        ]

    def admit(
        self,
        broker_id: int,
        incarnation_epoch: int,
        controller_epoch: int,
        timeout_ms: int | None,
    ) -> bool:
        """``admit_broker``: the registration key is rewritten under the same lease, guarded
        by the controller fence and its own mod revision."""
        store, ids = self._store, self._sessions.ids_key(broker_id)

        def attempt() -> TxnPlan[bool] | Done[bool]:
            last, seq_mod, got = store.seq_read(self.ctl_ops(), timeout_ms)
            compares = self.guard(controller_epoch, got)
            kvs = [kv for kv in got[2] if kv.key == ids]
            old = decode_broker(kvs)
            new = rules.admitted_broker(old, incarnation_epoch)
            if new is None:
                return Done(False)
            if new == old:
                return Done(True)
            compares.append(cmp_mod(ids, kvs[0].mod_revision))
            ops = [op_put(ids, codec.dumps(new), kvs[0].lease)]
            build: Records = functools.partial(records.broker_updated, broker=new)
            return plan(last, seq_mod, compares, ops, build, lambda _: True)

        return store.run(timeout_ms, attempt)

    def elect(
        self, broker_id: int, incarnation_epoch: int, timeout_ms: int | None
    ) -> ControllerInfo:
        """``elect_controller``: the election txn (module docstring)."""
        store = self._store
        ctl, epoch_key = store.k("controller"), store.k("controller_epoch")

        def attempt() -> TxnPlan[ControllerInfo] | Done[ControllerInfo] | Retry:
            last, seq_mod, got = store.seq_read(self.ctl_ops(), timeout_ms)
            ctl_kvs, epoch_kvs, ids = got
            me = [kv for kv in ids if kv.key == self._sessions.ids_key(broker_id)]
            self._sessions.acting(broker_id, incarnation_epoch, me)
            active, _ = self.active(ctl_kvs, ids)
            if active is not None:
                return Done(active)
            if ctl_kvs:  # its broker is gone: record that first
                self._sessions.reap(timeout_ms)
                return RETRY
            won = ControllerInfo(broker_id, last_int(epoch_kvs) + 1, incarnation_epoch)
            ops = [op_put(ctl, codec.dumps(won)), op_put(epoch_key, str(won.controller_epoch))]
            compares = [
                cmp_create(ctl, 0),
                cmp_mod(epoch_key, mod_rev(epoch_kvs)),
                cmp_create(me[0].key, me[0].create_revision),
            ]
            build: Records = functools.partial(records.controller_changed, controller=won)
            return plan(last, seq_mod, compares, ops, build, lambda _: won)

        return store.run(timeout_ms, attempt)

    def resign(self, broker_id: int, controller_epoch: int, timeout_ms: int | None) -> bool:
        """``resign_controller``: ``controller`` deleted, if the role is still the one named."""
        store, ctl = self._store, self._store.k("controller")

        def attempt() -> TxnPlan[bool] | Done[bool]:
            last, seq_mod, got = store.seq_read(self.ctl_ops(), timeout_ms)
            active, _ = self.active(got[0], got[2])
            if not rules.holds_controller(active, broker_id, controller_epoch):
                return Done(False)
            compares = self.guard(controller_epoch, got)
            build: Records = functools.partial(records.controller_changed, controller=None)
            return plan(last, seq_mod, compares, [op_delete(ctl)], build, lambda _: True)

        return store.run(timeout_ms, attempt)

    def current(self, timeout_ms: int | None) -> ControllerInfo | None:
        """``current_controller``."""
        got = self._store.read(self.ctl_ops(), timeout_ms)
        return self.active(got[0], got[2])[0]
