"""What the simulated consumer-group clients were told, and the checks on it.

**Committed offsets are never lost or moved backwards.** Every commit attempt of a group for a
partition gets a fresh offset, larger than every earlier attempt's (``GroupHistory.new_commit``),
so an offset names the attempt that wrote it. An OffsetFetch answered without error, sent after
a commit of offset ``v`` was acknowledged (OffsetCommit answered with no error), must return an
attempted offset (``offset-invented`` otherwise) that is at least ``v`` -- unless the attempt
that wrote the lower offset may have been appended to ``__consumer_offsets`` after ``v``'s:
it was sent before ``v``'s (offsets grow) but not answered before ``v``'s was sent, and
``v``'s was sent within the network's longest delivery of it (a request is handled when it
arrives; an unanswered one can arrive no later). A lower commit the group acknowledged after
``v`` is such a case. Otherwise: ``committed-offset-lost`` (-1, no offset) or
``committed-offset-backwards``.

**Generation fencing.** A SyncGroup answered without error for generation ``g`` means the
group's metadata at ``g`` was written with acks=all: from then on the group's generation is at
least ``g``, so a commit with an older generation sent afterwards must be refused
(``fenced-commit-accepted``). And a generation is assigned once: every member's SyncGroup
answer for ``g`` carries the assignment its leader computed for ``g``
(``generation-assignment-mismatch``; the leader tags each computation).
"""

from __future__ import annotations

import attrs

from replog.testing.sim_ports import SimCore

__all__ = ["CommitAttempt", "GroupHistory"]


@attrs.define
class CommitAttempt:
    """One partition's offset in one OffsetCommit request, and what became of it."""

    group: str
    tp: tuple[str, int]
    offset: int
    generation: int
    member_id: str
    sent_ms: int
    answered_ms: int | None = None
    acked: bool = False


@attrs.define
class _Synced:
    """The first SyncGroup success seen for a generation."""

    tag: str
    at_ms: int


class GroupHistory:
    """The group clients' record and its checks (see the module docstring)."""

    def __init__(self, sim: SimCore) -> None:
        self._sim = sim
        self._last_offset: dict[tuple[str, tuple[str, int]], int] = {}
        #: (group, tp, offset) -> the attempt that committed it
        self.attempts: dict[tuple[str, tuple[str, int], int], CommitAttempt] = {}
        #: (group, tp) -> acknowledged attempts, in the order the acknowledgements came
        self.acked: dict[tuple[str, tuple[str, int]], list[CommitAttempt]] = {}
        #: group -> generation -> the first SyncGroup success for it
        self.synced: dict[str, dict[int, _Synced]] = {}
        self.fetches_checked = 0
        self.fenced_refusals = 0

    @property
    def acked_count(self) -> int:
        """How many partition commits were acknowledged."""
        return sum(len(v) for v in self.acked.values())

    def _delivery_ms_max(self) -> int:
        net = self._sim.opts.net
        return net.delay_ms_max + net.clog_delay_ms_max

    # ------------------------------------------------------------------ commits

    def new_commit(
        self, group: str, tp: tuple[str, int], generation: int, member_id: str, step: int
    ) -> CommitAttempt:
        """A commit attempt with an offset above every earlier one of ``(group, tp)``."""
        offset = self._last_offset.get((group, tp), 0) + max(1, step)
        self._last_offset[(group, tp)] = offset
        attempt = CommitAttempt(group, tp, offset, generation, member_id, self._sim.now_ms)
        self.attempts[(group, tp, offset)] = attempt
        return attempt

    def on_commit_answer(self, attempt: CommitAttempt, acked: bool, *, fenced: bool) -> None:
        """An attempt was answered (``acked``: with no error; ``fenced``: refused for its
        generation or member)."""
        sim = self._sim
        attempt.answered_ms = sim.now_ms
        if fenced:
            self.fenced_refusals += 1
        if not acked:
            return
        attempt.acked = True
        self.acked.setdefault((attempt.group, attempt.tp), []).append(attempt)
        for generation, synced in self.synced.get(attempt.group, {}).items():
            if generation > attempt.generation and synced.at_ms < attempt.sent_ms:
                sim.violation(
                    f"fenced-commit-accepted: group {attempt.group} acknowledged {attempt.tp} "
                    f"offset {attempt.offset} from member {attempt.member_id} of generation "
                    f"{attempt.generation}, sent at {attempt.sent_ms} ms, after generation "
                    f"{generation} was synced at {synced.at_ms} ms"
                )

    def _possibly_after(self, lower: CommitAttempt, acked: CommitAttempt) -> bool:
        """Whether ``lower`` (sent before ``acked``) may have been appended after it."""
        if lower.answered_ms is not None:
            return lower.answered_ms >= acked.sent_ms
        return acked.sent_ms <= lower.sent_ms + self._delivery_ms_max()

    def on_fetch(
        self, group: str, tp: tuple[str, int], offset: int, sent_ms: int, broker: int
    ) -> None:
        """An OffsetFetch sent at ``sent_ms`` answered ``offset`` for ``tp`` without error."""
        sim = self._sim
        self.fetches_checked += 1
        written = self.attempts.get((group, tp, offset))
        if offset >= 0 and written is None:
            sim.violation(
                f"offset-invented: broker {broker} answered group {group} {tp} offset {offset}, "
                "which no client committed"
            )
        for acked in self.acked.get((group, tp), ()):
            answered_ms = acked.answered_ms
            if answered_ms is None or answered_ms >= sent_ms or acked.offset <= offset:
                continue
            if written is not None and self._possibly_after(written, acked):
                continue
            kind = "committed-offset-lost" if offset < 0 else "committed-offset-backwards"
            sim.violation(
                f"{kind}: broker {broker} answered group {group} {tp} offset {offset} to a "
                f"fetch sent at {sent_ms} ms; offset {acked.offset} (sent at {acked.sent_ms} "
                f"ms, generation {acked.generation}) was acknowledged at {answered_ms} ms"
            )

    # ------------------------------------------------------------------ generations

    def on_sync(self, group: str, generation: int, tag: str, member_id: str) -> None:
        """A SyncGroup success for ``generation`` carrying the leader's ``tag``."""
        sim = self._sim
        generations = self.synced.setdefault(group, {})
        first = generations.get(generation)
        if first is None:
            generations[generation] = _Synced(tag, sim.now_ms)
        elif first.tag != tag:
            sim.violation(
                f"generation-assignment-mismatch: group {group} generation {generation}: "
                f"member {member_id} got assignment {tag!r}, another got {first.tag!r} at "
                f"{first.at_ms} ms"
            )
        if not tag.startswith(f"{generation}/"):
            sim.violation(
                f"generation-assignment-mismatch: group {group} member {member_id} synced "
                f"generation {generation} with the assignment computed for {tag!r}"
            )
