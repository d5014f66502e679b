"""Tidiness rules that keep the code base readable, checked on every ``make test``.

- No module over ``MODULE_LINES_MAX`` lines and no function over ``FUNCTION_LINES_MAX``: a
  module is one idea and a function one step of it.
- No module imports another package's private names (``from replog.log.log import _x``), or
  reaches into another package's module for one (``segment._x``): packages talk through their
  public names.
- The ``__all__`` of every package (and of ``replog`` itself) is the public surface, checked
  in as ``tests/tidy/public_surface.txt``: a change of the surface is a visible diff. After a
  deliberate change, refresh it with ``python -m tests.test_tidy``.
- Only ``replog.clock`` reads the ``time`` module; everything else takes its time from it.
- One class per name: no two ``class`` statements under ``src/replog`` (top-level or nested,
  private or public) share a name, so a name in a docstring, a traceback or a review means one
  concept. Kafka's wire messages keep Kafka's names; the other definitions say what they are.
"""

from __future__ import annotations

import ast
import importlib
import pathlib
import sys
from collections import defaultdict
from collections.abc import Iterator

SRC = pathlib.Path(__file__).resolve().parents[1] / "src"
SURFACE = pathlib.Path(__file__).resolve().parent / "tidy" / "public_surface.txt"
MODULE_LINES_MAX = 700
FUNCTION_LINES_MAX = 80


def _modules() -> Iterator[tuple[str, pathlib.Path, ast.Module]]:
    for path in sorted(SRC.rglob("*.py")):
        parts = path.relative_to(SRC).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        yield name, path, ast.parse(path.read_text(), str(path))


def _package(module: str) -> str:
    return ".".join(module.split(".")[:2])


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def test_no_module_is_too_long() -> None:
    long = {
        name: lines
        for name, path, _ in _modules()
        if (lines := len(path.read_text().splitlines())) > MODULE_LINES_MAX
    }
    assert not long, f"modules over {MODULE_LINES_MAX} lines (split them): {long}"


def test_no_function_is_too_long() -> None:
    long = [
        f"{name}.{node.name}: {node.end_lineno - node.lineno + 1}"  # type: ignore[operator]
        for name, _, tree in _modules()
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and node.end_lineno - node.lineno + 1 > FUNCTION_LINES_MAX  # type: ignore[operator]
    ]
    assert not long, f"functions over {FUNCTION_LINES_MAX} lines: {long}"


def _private_reaches(module: str, tree: ast.Module) -> Iterator[str]:
    foreign_modules: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("replog"):
            if _package(node.module) == _package(module):
                continue
            if any(_private(part) for part in node.module.split(".")):
                yield f"{module} imports the private module {node.module}"
            for alias in node.names:
                if _private(alias.name):
                    yield f"{module} imports {node.module}.{alias.name}"
                foreign_modules[alias.asname or alias.name] = f"{node.module}.{alias.name}"
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("replog") and _package(alias.name) != _package(module):
                    foreign_modules[alias.asname or alias.name] = alias.name
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id in foreign_modules
            and _private(node.attr)
        ):
            yield f"{module} uses {foreign_modules[node.value.id]}.{node.attr}"


def test_no_package_uses_another_packages_private_names() -> None:
    reaches = [r for name, _, tree in _modules() for r in _private_reaches(name, tree)]
    assert not reaches, reaches


def test_only_the_clock_reads_time() -> None:
    readers = [
        name
        for name, _, tree in _modules()
        if name != "replog.clock"
        for node in ast.walk(tree)
        if (isinstance(node, ast.Import) and any(a.name == "time" for a in node.names))
        or (isinstance(node, ast.ImportFrom) and node.module == "time")
    ]
    assert not readers, f"use replog.clock instead of the time module in: {readers}"


def _class_modules() -> dict[str, list[str]]:
    modules: dict[str, list[str]] = defaultdict(list)
    for name, _, tree in _modules():
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                modules[node.name].append(name)
    return modules


def test_no_class_name_is_defined_twice() -> None:
    modules = _class_modules()
    shared = {name: where for name, where in sorted(modules.items()) if len(where) > 1}
    assert not shared, (
        f"class names defined more than once (rename one to say what it is): {shared}"
    )


def _surface() -> str:
    lines = []
    packages = sorted(name for name, path, _ in _modules() if path.name == "__init__.py")
    for package in packages:
        exported = getattr(importlib.import_module(package), "__all__", None)
        assert exported is not None, f"package {package} declares no __all__"
        lines.extend(f"{package}: {name}" for name in sorted(exported))
    return "\n".join(lines) + "\n"


def test_public_surface_matches_the_checked_in_list() -> None:
    assert _surface() == SURFACE.read_text(), (
        "a package's __all__ changed; if deliberate, run `python -m tests.test_tidy` and "
        "commit tests/tidy/public_surface.txt"
    )


def test_every_exported_name_exists() -> None:
    missing = [
        line
        for line in _surface().splitlines()
        if not hasattr(importlib.import_module(line.split(": ")[0]), line.split(": ")[1])
    ]
    assert not missing, missing


if __name__ == "__main__":
    SURFACE.parent.mkdir(exist_ok=True)
    SURFACE.write_text(_surface())
    sys.exit(0)
