"""A client-side history and a checker in the style of Jepsen's Kafka checker.

The simulator's clients record what they did and saw: every send (partition, value, acks) and
its outcome (``ok`` with the offset, ``fail``, or ``info`` when the answer never came: the write
may or may not have happened), every consumer poll (the offsets and values it returned, in
order), every consumer seek, and a final read of every partition after the cluster has healed.
Values are unique per send, so a value identifies a write.

``check_history`` reports:

- ``lost-write``: an acknowledged acks=all send whose value the final read does not hold;
- ``wrong-offset``: an acknowledged send read back at another offset than the ack said;
- ``inconsistent-offset``: one offset read with two different values;
- ``duplicate``: one value read at two different offsets (each send is attempted once; the
  network may deliver an idempotent one twice, which the brokers must append once);
- ``phantom``: a value read that no client ever sent;
- ``nonmonotonic-poll`` / ``skipped-poll``: a consumer's next record is not the one right after
  its previous record (backwards, or skipping offsets) without a seek in between;
- ``unseen``: an acknowledged acks=all send never read by any consumer, polls or final read.
"""

from __future__ import annotations

from collections.abc import Iterable

import attrs

__all__ = ["Anomaly", "History", "Poll", "Send", "check_history"]


@attrs.define
class Send:
    """One produce attempt and its outcome (``status``: pending, ok, fail, info)."""

    tp: tuple[str, int]
    value: bytes
    acks: int
    status: str = "pending"
    offset: int = -1


@attrs.frozen
class Poll:
    """What one consumer saw in one poll (``seek``: the position was set explicitly first)."""

    consumer: int
    tp: tuple[str, int]
    records: tuple[tuple[int, bytes], ...]
    seek: int | None = None


@attrs.frozen
class Anomaly:
    """One violation the checker found."""

    kind: str
    detail: str


@attrs.define
class History:
    """Everything the clients did and saw."""

    sends: list[Send] = attrs.field(factory=list)
    polls: list[Poll] = attrs.field(factory=list)
    final_reads: dict[tuple[str, int], list[tuple[int, bytes]]] = attrs.field(factory=dict)

    def send(self, tp: tuple[str, int], value: bytes, acks: int) -> Send:
        """Record a send attempt; the caller fills in its outcome."""
        op = Send(tp, value, acks)
        self.sends.append(op)
        return op

    def poll(
        self,
        consumer: int,
        tp: tuple[str, int],
        records: Iterable[tuple[int, bytes]],
        *,
        seek: int | None = None,
    ) -> None:
        """Record one consumer poll."""
        self.polls.append(Poll(consumer, tp, tuple(records), seek))


def check_history(history: History, *, acks_all: int = -1) -> list[Anomaly]:
    """Every anomaly in ``history`` (empty: clean). See the module docstring."""
    anomalies: list[Anomaly] = []
    by_value = {(s.tp, s.value): s for s in history.sends}
    seen: dict[tuple[str, int], dict[int, bytes]] = {}
    where: dict[tuple[tuple[str, int], bytes], int] = {}
    reads: list[tuple[tuple[str, int], int, bytes]] = [
        (p.tp, o, v) for p in history.polls for o, v in p.records
    ] + [(tp, o, v) for tp, rs in sorted(history.final_reads.items()) for o, v in rs]
    for tp, offset, value in reads:
        at = seen.setdefault(tp, {})
        if offset in at and at[offset] != value:
            anomalies.append(
                Anomaly(
                    "inconsistent-offset",
                    f"{tp} offset {offset} read as {at[offset]!r} and {value!r}",
                )
            )
        at.setdefault(offset, value)
        previous = where.setdefault((tp, value), offset)
        if previous != offset:
            anomalies.append(
                Anomaly("duplicate", f"{tp} value {value!r} at offsets {previous} and {offset}")
            )
        send = by_value.get((tp, value))
        if send is None:
            anomalies.append(Anomaly("phantom", f"{tp} offset {offset}: {value!r} never sent"))
        elif send.status == "ok" and send.offset != offset:
            anomalies.append(
                Anomaly(
                    "wrong-offset",
                    f"{tp} {value!r} acknowledged at {send.offset}, read at {offset}",
                )
            )
    anomalies.extend(_check_consumers(history))
    final = {(tp, v): o for tp, rs in history.final_reads.items() for o, v in rs}
    for send in history.sends:
        if send.status != "ok" or send.acks != acks_all:
            continue
        key = (send.tp, send.value)
        if history.final_reads and key not in final:
            anomalies.append(
                Anomaly(
                    "lost-write",
                    f"{send.tp} {send.value!r} acknowledged at {send.offset}, "
                    "not in the final read",
                )
            )
        if key not in where:
            anomalies.append(
                Anomaly("unseen", f"{send.tp} {send.value!r} acknowledged, never read")
            )
    return anomalies


def _check_consumers(history: History) -> list[Anomaly]:
    anomalies: list[Anomaly] = []
    last: dict[tuple[int, tuple[str, int]], int] = {}
    for poll in history.polls:
        key = (poll.consumer, poll.tp)
        if poll.seek is not None:
            last[key] = poll.seek - 1
        for offset, _ in poll.records:
            previous = last.get(key)
            if previous is not None and offset != previous + 1:
                kind = "nonmonotonic-poll" if offset <= previous else "skipped-poll"
                anomalies.append(
                    Anomaly(kind, f"consumer {poll.consumer} {poll.tp}: {previous} then {offset}")
                )
            last[key] = offset
    return anomalies
