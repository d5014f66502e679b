"""``docs/internals.md`` matches the code: every name it puts in backticks exists, and every
call it shows (``name(arg, ...)``) names parameters the function (or attrs class) has.

A dotted ``replog.x.y`` reference must resolve by import; a bare name (a class, a function, a
method, an attribute or a module) must be defined somewhere under ``src/replog``. Plain words
in backticks (lower-case without underscores, such as file names or settings) are skipped.
"""

from __future__ import annotations

import ast
import builtins
import importlib
import pathlib
import re
from types import ModuleType

ROOT = pathlib.Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "internals.md"
NOT_CODE = {
    "getErrorResponse",  # Kafka's method, named for comparison
    "__consumer_offsets",  # a topic name
    "replog.coordinators",  # an entry-point group, not a module
}


def _trees() -> list[ast.Module]:
    return [ast.parse(p.read_text()) for p in sorted((ROOT / "src" / "replog").rglob("*.py"))]


def _defined_names() -> set[str]:
    names = {p.stem for p in (ROOT / "src" / "replog").rglob("*.py")}
    for tree in _trees():
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                names.add(node.name)
            elif isinstance(node, ast.Name | ast.arg | ast.Attribute):
                names.add(getattr(node, "id", None) or getattr(node, "arg", None) or node.attr)  # type: ignore[union-attr]
            elif isinstance(node, ast.keyword) and node.arg:
                names.add(node.arg)
    return names


def _parameters() -> dict[str, list[set[str]]]:
    """Function, method and attrs-class name -> the parameter sets of each definition."""
    found: dict[str, list[set[str]]] = {}
    for tree in _trees():
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                a = node.args
                params = {x.arg for x in [*a.posonlyargs, *a.args, *a.kwonlyargs]}
                if a.vararg or a.kwarg:
                    params.add("*")
                found.setdefault(node.name, []).append(params)
            elif isinstance(node, ast.ClassDef):
                fields = {
                    s.target.id
                    for s in node.body
                    if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)
                }
                found.setdefault(node.name, []).append(fields or {"*"})
    return found


def _quoted() -> list[tuple[str, list[str] | None]]:
    """(dotted name, call arguments or None) for each backticked name in the document."""
    out = []
    for token in re.findall(r"`([^`\n]+)`", DOC.read_text()):
        match = re.fullmatch(r"([A-Za-z_][\w.]*)(?:\((.*)\))?", token)
        if not match:
            continue
        args = None
        if match.group(2) is not None:
            args = [a.strip().split("=")[0].strip() for a in match.group(2).split(",")]
            args = [a for a in args if re.fullmatch(r"[a-z_]\w*", a)]
        out.append((match.group(1), args))
    return out


def _resolves(dotted: str) -> bool:
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj: object = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        try:
            for part in parts[cut:]:
                obj = getattr(obj, part)
        except AttributeError:
            return False
        return isinstance(obj, ModuleType) or obj is not None
    return False


def test_every_named_thing_exists() -> None:
    names = _defined_names() | NOT_CODE | set(dir(builtins))
    missing = []
    for dotted, args in _quoted():
        if dotted.startswith("replog.") and dotted not in NOT_CODE:
            if not _resolves(dotted):
                missing.append(dotted)
            continue
        last = dotted.split(".")[-1]
        looks_like_code = args is not None or "_" in last or re.search(r"[A-Z][a-z]", last)
        if looks_like_code and last not in names and dotted.split(".")[0] not in names:
            missing.append(dotted)
    assert not missing, f"docs/internals.md names what the code does not have: {missing}"


def test_every_call_shown_has_those_parameters() -> None:
    params = _parameters()
    wrong = [
        f"{dotted}({', '.join(args)})"
        for dotted, args in _quoted()
        if args
        and (name := dotted.split(".")[-1]) in params
        and not any(set(args) <= p or "*" in p for p in params[name])
    ]
    assert not wrong, f"docs/internals.md shows calls with parameters the code lacks: {wrong}"
