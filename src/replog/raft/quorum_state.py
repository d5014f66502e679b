"""The ``quorum-state`` file: the election state a node must never forget (R1 in ``core.py``).

Layout (UTF-8 JSON, one object, the fields of Kafka's QuorumStateData v0 that apply)::

    {"leaderId": 1, "leaderEpoch": 7, "votedId": -1, "appliedOffset": 0,
     "currentVoters": [{"voterId": 1}, {"voterId": 2}, {"voterId": 3}], "data_version": 0}

``leaderId`` / ``votedId`` are -1 when unknown / not voted. ``appliedOffset`` is always 0 (Kafka
keeps the field and does not use it either).

Writes are atomic like replog's checkpoint files: write ``quorum-state.tmp``, fsync it, rename
it over ``quorum-state``, fsync the directory; a crash leaves the old or the new file. Reading is
strict: a missing file means "never written" (None), anything that does not parse raises
`MalformedCheckpointError`: forgetting a vote silently could elect two leaders in one epoch.
"""

from __future__ import annotations

import json
import os

from replog.errors import MalformedCheckpointError, StorageError
from replog.log.fs import FileSystem
from replog.raft.states import ElectionState

__all__ = ["QUORUM_STATE_FILE", "QuorumStateFile"]

QUORUM_STATE_FILE = "quorum-state"
_DATA_VERSION = 0


class QuorumStateFile:
    """The ``quorum-state`` file of one metadata log directory."""

    def __init__(self, fs: FileSystem, dir_path: str) -> None:
        self.fs = fs
        self.dir_path = dir_path
        self.path = os.path.join(dir_path, QUORUM_STATE_FILE)

    def write(self, election: ElectionState) -> None:
        """Replace the file with ``election``: tmp, fsync, rename, fsync the directory."""
        doc = {
            "leaderId": election.leader_id,
            "leaderEpoch": election.epoch,
            "votedId": election.voted_id,
            "appliedOffset": 0,
            "currentVoters": [{"voterId": v} for v in sorted(election.voters)],
            "data_version": _DATA_VERSION,
        }
        tmp_path = self.path + ".tmp"
        try:
            self.fs.write_bytes(tmp_path, json.dumps(doc, separators=(",", ":")).encode())
            self.fs.fsync_file(tmp_path)
            self.fs.rename(tmp_path, self.path)
            self.fs.fsync_dir(self.dir_path)
        except OSError as exc:
            raise StorageError(f"cannot write {self.path}: {exc}", self.dir_path) from exc

    def read(self) -> ElectionState | None:
        """The stored election state; None if the file was never written."""
        try:
            if not self.fs.exists(self.path):
                return None
            raw = self.fs.read_bytes(self.path)
        except OSError as exc:
            raise StorageError(f"cannot read {self.path}: {exc}", self.dir_path) from exc
        try:
            doc = json.loads(raw.decode("utf-8"))
            if doc["data_version"] != _DATA_VERSION:
                raise ValueError(f"unknown data_version {doc['data_version']}")
            voters = frozenset(_int(v["voterId"]) for v in doc["currentVoters"])
            return ElectionState(
                epoch=_int(doc["leaderEpoch"]),
                leader_id=_int(doc["leaderId"]),
                voted_id=_int(doc["votedId"]),
                voters=voters,
            )
        except (UnicodeDecodeError, ValueError, KeyError, TypeError) as exc:
            raise MalformedCheckpointError(
                f"quorum state does not parse: {exc}", self.path
            ) from exc


def _int(value: object) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < -1:
        raise ValueError(f"expected an int >= -1, got {value!r}")
    return value
