"""The quorum core stays sans-IO (time and randomness come in as arguments, effects go out as
values), like ``replog.isr`` and ``replog.election``.

The same rule as ``tests/test_sans_io.py``, applied to the pure modules of ``replog.raft``: no
time, socket, threading, random, os or file IO, and no import of the package's IO shell
(storage, snapshot and quorum-state files, the driver).
"""

from __future__ import annotations

import ast
import pathlib

import pytest

from tests.test_sans_io import _violations

RAFT = pathlib.Path(__file__).resolve().parents[2] / "src" / "replog" / "raft"
PURE = [
    "canvass",
    "config",
    "core",
    "entries",
    "fetch_loop",
    "kv",
    "leader_role",
    "log_model",
    "messages",
    "pending_ready",
    "progress",
    "ready",
    "replicated_log",
    "states",
    "votes",
]
SHELL = {"node", "quorum_state", "snapshots", "storage"}


def test_every_raft_module_is_classified() -> None:
    found = {p.stem for p in RAFT.glob("*.py")} - {"__init__", "__main__"}
    assert found == set(PURE) | SHELL


@pytest.mark.parametrize("name", PURE)
def test_pure_raft_module_is_sans_io(name: str) -> None:
    path = RAFT / f"{name}.py"
    problems = _violations(path)
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            parts = node.module.split(".")
            if parts[:2] == ["replog", "raft"] and len(parts) > 2 and parts[2] in SHELL:
                problems.append(f"{name}.py:{node.lineno} imports the shell {node.module}")
    assert not problems, "sans-IO rule broken:\n" + "\n".join(problems)
