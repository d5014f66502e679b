"""Incremental fetch sessions (KIP-227), the fetcher's side: ``IncrementalFetch``.

A follower's fetch round lists every partition it follows on a leader. With a session, only
the first Fetch does (epoch 0, which asks the leader for a session); each later one names the
session and its next epoch and lists only the partitions whose fetch fields changed since the
last request (a fetch offset that moved, a new leader epoch, ...), plus the ones no longer
fetched as ``forgotten_topics_data``. The leader answers only partitions with something new,
so an idle partition costs neither side any encoding or decoding. (The leader's side is
``replog.broker.driver.fetch_session_cache``.)

Any failure -- a session error in the answer, a lost connection, a leader that answers with no
session -- sends the next request in full again with epoch 0. ``request`` records what a
request lists as soon as it is built: an answer that is lost resets the session, so the leader
never holds fields the fetcher does not know of.
"""

from __future__ import annotations

import attrs

from replog.broker.driver.convert import fetch_partitions
from replog.broker.driver.fetch_session_cache import next_session_epoch
from replog.errors import unreachable
from replog.protocol import messages as m
from replog.topics import TopicPartition

__all__ = ["IncrementalFetch"]


@attrs.define(eq=False)
class IncrementalFetch:
    """The session with one leader: its id (0: none yet), the epoch of the next request, and
    the fields the leader holds for each partition."""

    session_id: int = 0
    epoch: int = 0
    _sent: dict[TopicPartition, m.FetchPartition] = attrs.Factory(dict)

    def reset(self) -> None:
        """Forget the session: the next request is a full one that opens a new session."""
        self.session_id, self.epoch = 0, 0
        self._sent = {}

    @property
    def is_open(self) -> bool:
        """Whether the leader holds a session (so a request may list only changes)."""
        return self.session_id != 0

    def request(self, full: m.FetchRequest) -> m.FetchRequest:
        """``full`` (every partition fetched) as this session's next request."""
        listed = fetch_partitions(full)
        if self.session_id == 0:
            self._sent = dict(listed)
            return attrs.evolve(full, session_id=0, session_epoch=0)
        now = dict(listed)
        removed = [tp for tp in self._sent if tp not in now]
        return self.request_changes(attrs.evolve(full, topics=[]), listed, removed)

    def request_changes(
        self,
        template: m.FetchRequest,
        updated: list[tuple[TopicPartition, m.FetchPartition]],
        removed: list[TopicPartition],
    ) -> m.FetchRequest:
        """The next request of an open session, from the partitions whose fetch may have
        changed (``updated``) and those no longer fetched (``removed``); every other
        partition is as last sent. ``template``: the request's own fields."""
        if self.session_id == 0:
            unreachable("request_changes needs an open session")
        sent = self._sent
        changed: dict[str, list[m.FetchPartition]] = {}
        for tp, fetch in updated:
            if sent.get(tp) != fetch:
                sent[tp] = fetch
                changed.setdefault(tp.topic, []).append(fetch)
        forgotten: dict[str, list[int]] = {}
        for tp in removed:
            if sent.pop(tp, None) is not None:
                forgotten.setdefault(tp.topic, []).append(tp.partition)
        return attrs.evolve(
            template,
            session_id=self.session_id,
            session_epoch=self.epoch,
            topics=[m.FetchTopic(topic=t, partitions=ps) for t, ps in changed.items()],
            forgotten_topics_data=[
                m.ForgottenTopic(topic=t, partitions=ps) for t, ps in forgotten.items()
            ],
        )

    def on_response(self, response: m.FetchResponse) -> bool:
        """Note the leader's answer to the last request; False for a whole-response error (the
        session starts over, and nothing in the answer is to be applied)."""
        if response.error_code != 0:
            self.reset()
            return False
        if self.epoch == 0:
            if response.session_id == 0:  # no slot on the leader: full fetches, asking again
                self._sent = {}
            else:
                self.session_id, self.epoch = response.session_id, 1
        else:
            self.epoch = next_session_epoch(self.epoch)
        return True
