"""The end of a broker incarnation in the ZooKeeper backend's store, as multi-op pieces: the
``/replog/gone/<id>-<incarnation>`` marker (its create fails if another handle recorded that
end first, so the feed gets exactly one record), the deletion of ``/replog/seen/<id>``, and the
end of the controller role if that incarnation held it. Registration, unregistration and
every expiry record (``record_gone``) are built from these.

Every function reads through ``io`` with ``client`` and runs inside the caller's
``kazoo_errors``."""

from __future__ import annotations

from typing import Any

from replog.coord.errors import CoordinatorUnavailableError
from replog.coord.zookeeper.znode_io import Op, Plan, ZkIo
from replog.coord.zookeeper.znodes import (
    CONTROLLER,
    EPOCH,
    GONE,
    IDS,
    SEEN,
    decode_controller,
    decode_epoch,
    encode_epoch,
)
from replog.metadata import records
from replog.metadata.types import BrokerChangeReason, MetadataChange

__all__ = [
    "epoch_node",
    "expiry_parts",
    "gone_marker",
    "record_gone",
    "unsee_ops",
    "vacate_if_holder",
]


def gone_marker(broker_id: int, inc: int) -> str:
    """The marker whose existence says the end of incarnation ``inc`` is in the feed."""
    return f"{GONE}/{broker_id}-{inc}"


def epoch_node(io: ZkIo, client: Any, deadline: float) -> tuple[bytes, Any]:
    """(data, stat) of ``/controller_epoch``, which the layout always has."""
    got = io.get(client, EPOCH, deadline)
    if got is None:
        raise CoordinatorUnavailableError("the ZooKeeper layout is missing /controller_epoch")
    return got


def vacate_if_holder(io: ZkIo, c: Any, broker_id: int, inc: int, deadline: float) -> list[Op]:
    """Ops ending the controller role if this incarnation holds it (none: it does not)."""
    ops: list[Op] = []
    got = io.get(c, CONTROLLER, deadline)
    epoch_got = epoch_node(io, c, deadline)
    epoch, holder = decode_epoch(epoch_got[0])
    if got is not None:
        ctl = decode_controller(got[0])
        if (ctl.controller_id, ctl.incarnation_epoch) != (broker_id, inc):
            return ops
        ops.append(("delete", CONTROLLER, got[1].version))
    elif holder != [broker_id, inc]:
        return ops
    ops.append(("set", EPOCH, encode_epoch(epoch, None), epoch_got[1].version))
    return ops


def unsee_ops(io: ZkIo, c: Any, broker_id: int, inc: int, deadline: float) -> list[Op]:
    """Delete ``/replog/seen/<id>`` if it still names incarnation ``inc``."""
    got = io.get(c, f"{SEEN}/{broker_id}", deadline)
    if got is None or int(got[0] or b"0") != inc:
        return []
    return [("delete", f"{SEEN}/{broker_id}", got[1].version)]


def expiry_parts(
    io: ZkIo, c: Any, broker_id: int, inc: int, seq: int, deadline: float
) -> tuple[list[Op], list[MetadataChange]]:
    """The ops (marker create, end of the controller role if it held it) and feed records
    of the expiry of incarnation ``inc``, whose registration is already gone."""
    vacate = vacate_if_holder(io, c, broker_id, inc, deadline)
    gone = records.broker_gone(
        seq, BrokerChangeReason.EXPIRED, broker_id, inc, was_controller=bool(vacate)
    )
    return [("create", gone_marker(broker_id, inc), b"", False), *vacate], gone


def record_gone(io: ZkIo, c: Any, broker_id: int, inc: int, deadline: float) -> bool:
    """Write BrokerChanged(EXPIRED) for incarnation ``inc`` (plus ControllerChanged(None) if
    it held the role) unless it is alive or its end is already in the feed. Any handle may
    call this: the marker's create makes exactly one writer win. True if that end is in
    the feed now (whoever wrote it), False if the incarnation is alive or superseded."""
    marker = gone_marker(broker_id, inc)

    def prepare(seq: int) -> Plan[bool]:
        if io.get(c, marker, deadline) is not None:
            return Plan(True, write=False)
        if io.get(c, f"{IDS}/{broker_id}", deadline) is not None:
            return Plan(False, write=False)  # alive, or re-registered (which recorded it)
        ops, gone = expiry_parts(io, c, broker_id, inc, seq, deadline)
        return Plan(True, [*ops, *unsee_ops(io, c, broker_id, inc, deadline)], gone)

    return io.transact(c, prepare, deadline)
