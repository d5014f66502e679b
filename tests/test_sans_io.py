"""The replication core, the election decisions and the group coordinator stay sans-IO:
inputs are method calls carrying ``now_ms``, outputs are values the driver acts on, and only the
runtime owns threads, sockets, clocks and files.

No module under ``replog.isr``, ``replog.election`` or ``replog.groups`` (nor the pure
planner of ``replog reassign``: ``replog.tools.reassign_plan`` and ``reassign_json``) may
import time, socket, threading, asyncio, random, os (or their private or related forms), nor
call ``open``.
That is what lets the deterministic simulator drive them with virtual time and a simulated
network and disk.
"""

from __future__ import annotations

import ast
import pathlib

import pytest

SRC = pathlib.Path(__file__).resolve().parents[1] / "src" / "replog"
FORBIDDEN = {
    "time",
    "socket",
    "threading",
    "asyncio",
    "random",
    "os",
    "subprocess",
    "selectors",
    "multiprocessing",
    "concurrent",
    "secrets",
    "datetime",
    "signal",
    "_thread",
    "io",
    "pathlib",
    "shutil",
    "tempfile",
}
PURE_PACKAGES = ("isr", "election", "groups")
#: single pure modules outside those packages (the reassignment planner and its JSON formats)
PURE_MODULES = ("tools/reassign_plan.py", "tools/reassign_json.py")


def _pure_modules() -> list[pathlib.Path]:
    packages = [p for pkg in PURE_PACKAGES for p in (SRC / pkg).rglob("*.py")]
    return sorted(packages + [SRC / module for module in PURE_MODULES])


def _violations(path: pathlib.Path) -> list[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    found = []
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module]
        for name in names:
            if name.split(".")[0] in FORBIDDEN:
                found.append(f"{path.name}:{node.lineno} imports {name}")
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in {"open", "__import__", "exec", "eval"}
        ):
            found.append(f"{path.name}:{node.lineno} calls {node.func.id}()")
    return found


def test_pure_packages_exist() -> None:
    assert _pure_modules(), "no modules found under replog.isr / replog.election"


@pytest.mark.parametrize("path", _pure_modules(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_module_is_sans_io(path: pathlib.Path) -> None:
    violations = _violations(path)
    assert not violations, "sans-IO rule broken (see this module's docstring):\n" + "\n".join(
        violations
    )
