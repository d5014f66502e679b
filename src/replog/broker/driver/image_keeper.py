"""``ImageKeeper``: the broker's metadata image, its on-disk cache, and resuming from it.

Theory of operation. The metadata channel hands the keeper the image it loads (``loaded``):
the channel's one image, which the channel goes on applying the feed to, so ``image`` is
always what the broker acts on, at the feed cursor; ``changed`` says a batch changed it. While
it changes, ``take_save`` hands out a copy at most every ``metadata_image_cache_interval_ms``,
which ``write`` encodes and writes to ``<first log dir>/__cluster_metadata_image``
(``replog.broker.driver.image_cache``) off the event loop (a coordinator call whose coordinator goes
unused); ``save_at_shutdown`` writes it once more at a clean shutdown.

At start, ``resume`` (off the loop) reads the file and, if it parses, asks the store for its
cluster id: only a cache of the same store (``Coordinator.cluster_id``; only ``raft://`` has
one) is followed, from its cursor, to the feed head (``changes_since`` until a batch comes
back short of ``MAX_CHANGES_PER_BATCH``). The result is the image at that seq, the one a
``snapshot()`` there shows (``replog.metadata.image`` applies records the way the stores do),
and the broker applies it exactly as it applies a snapshot. A missing or damaged file,
another store's id (a recreated quorum, whose seqs restart at 0), a backend without an id,
or a cursor the store no longer has (``MustResyncError``: history compacted below a
snapshot) all make the caller read a full snapshot instead; nothing but a warning is lost.

Only an image with a cluster id is ever written: on ``memory://``, ZooKeeper and etcd there is
no way to tell a cursor of this store from one of an earlier store, so no cache is kept.
"""

from __future__ import annotations

import logging
import os
import threading

from replog.broker.driver.image_cache import IMAGE_CACHE_FILE, read_image, write_image
from replog.coord.contract import MAX_CHANGES_PER_BATCH, Coordinator
from replog.errors import StorageError
from replog.log.fs import FileSystem
from replog.metadata.image import MetadataImage
from replog.metadata.types import MetadataSnapshot

__all__ = ["CATCH_UP_READS_MAX", "ImageKeeper", "catch_up"]

_log = logging.getLogger(__name__)

CATCH_UP_READS_MAX = 10_000
"""Feed reads a resume makes at most before it stops short of the head (the feed poll goes
on from where it stopped; any seq it stops at is a consistent image)."""


def catch_up(coordinator: Coordinator, cached: MetadataSnapshot) -> MetadataSnapshot | str:
    """``cached`` brought to the feed head, or why it cannot be (another store's cache).
    Raises ``MustResyncError`` when the store no longer has the cached cursor."""
    store_id = coordinator.cluster_id()
    if store_id is None or store_id != cached.cluster_id:
        return f"the store's cluster id is {store_id!r}, the cached image's {cached.cluster_id!r}"
    image = MetadataImage.from_snapshot(cached)
    for _ in range(CATCH_UP_READS_MAX):
        batch = coordinator.changes_since(image.seq, max_changes=MAX_CHANGES_PER_BATCH)
        image.apply(batch.changes, batch.next_seq)
        if len(batch.changes) < MAX_CHANGES_PER_BATCH:
            break  # a short batch is the whole tail: the head when it was read
    if coordinator.cluster_id() != store_id:  # the store was replaced while we read
        return "the store's cluster id changed while the cached image was brought up to date"
    return image.snapshot()


class ImageKeeper:
    """See the module docstring."""

    def __init__(
        self, fs: FileSystem, log_dir: str, *, enabled: bool, interval_ms: int, broker_id: int
    ) -> None:
        self.fs = fs
        self.log_dir = log_dir
        self.enabled = enabled
        self.interval_ms = interval_ms
        self.broker_id = broker_id
        self.image: MetadataImage | None = None
        self._dirty = False
        self._saving = False
        self._saved_ms: int | None = None
        self._write_lock = threading.Lock()
        self._written_seq = -1
        #: full snapshots loaded, and starts that resumed from the cache instead
        self.snapshot_loads = 0
        self.cache_resumes = 0

    # ------------------------------------------------------------------ following the image

    def loaded(self, image: MetadataImage, *, from_cache: bool) -> None:
        """The broker loaded ``image`` (a full snapshot's, or the cache brought up to date):
        the metadata channel's one image, which it goes on applying the feed to. The keeper
        only reads it, when it writes it (and only when it may: enabled, with a cluster id)."""
        self.image = image if self.enabled and image.cluster_id is not None else None
        self._dirty = True
        if from_cache:
            self.cache_resumes += 1
        else:
            self.snapshot_loads += 1
        source = "the image cache" if from_cache else "a full snapshot"
        _log.info(
            "broker %s: metadata image at seq %d loaded from %s",
            self.broker_id, image.seq, source,
        )  # fmt: skip

    def changed(self) -> None:
        """A feed batch changed the image."""
        self._dirty = True

    # ------------------------------------------------------------------ resuming

    def has_cache(self) -> bool:
        """Whether a cache file is there to try (a stat: no file, no resume call at all --
        so the backends without a cluster id, which never get one, start as before)."""
        if not self.enabled:
            return False
        try:
            return self.fs.exists(os.path.join(self.log_dir, IMAGE_CACHE_FILE))
        except OSError:
            return False

    def resume(self, coordinator: Coordinator) -> MetadataSnapshot | str:
        """Off the loop: the cached image at the feed head, or why there is none to use. Raises
        what the coordinator raises (``MustResyncError``: the cursor is gone)."""
        if not self.enabled:
            return "the image cache is disabled"
        cached = read_image(self.fs, self.log_dir)
        if cached is None:
            return "no usable cached image"
        return catch_up(coordinator, cached)

    # ------------------------------------------------------------------ saving

    def take_save(self, now_ms: int) -> MetadataSnapshot | None:
        """The image to write now, if one is due (changed, written longer than the interval
        ago, no write in flight, and it has a cluster id); the caller runs ``write`` off the
        loop and reports with ``saved``."""
        image = self.image
        if not self.enabled or image is None or image.cluster_id is None:
            return None
        if not self._dirty or self._saving:
            return None
        if self._saved_ms is not None and now_ms - self._saved_ms < self.interval_ms:
            return None
        self._saving, self._dirty, self._saved_ms = True, False, now_ms
        return image.snapshot()

    def write(self, snapshot: MetadataSnapshot) -> None:
        """Write ``snapshot`` (any thread); an older image never replaces a newer one."""
        with self._write_lock:
            if snapshot.seq < self._written_seq:
                return
            write_image(self.fs, self.log_dir, snapshot)
            self._written_seq = snapshot.seq

    def saved(self, error: BaseException | None) -> None:
        """A write ``take_save`` started has ended."""
        self._saving = False
        if error is not None:
            self._dirty = True
            _log.warning(
                "broker %s: cannot write the metadata image cache: %s", self.broker_id, error
            )

    def save_at_shutdown(self) -> None:
        """Write the image now (clean shutdown; on the loop, once nothing else runs)."""
        image = self.image
        if not self.enabled or image is None or image.cluster_id is None or not self._dirty:
            return
        try:
            self.write(image.snapshot())
        except StorageError as exc:
            _log.warning("broker %s: cannot write the image cache: %s", self.broker_id, exc)
        self._dirty = False
