"""Package attributes loaded on first use (PEP 562), so importing a package costs only what
its caller touches: ``__getattr__ = lazy_exports(__name__, {"Name": "package.module", ...})``.
A name is imported from its module the first time it is read and then kept on the package."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_exports"]


def lazy_exports(package: str, where: Mapping[str, str]) -> Callable[[str], Any]:
    """The module ``__getattr__`` of ``package`` for the names in ``where`` (name -> module)."""

    def __getattr__(name: str) -> Any:
        module_name = where.get(name)
        if module_name is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module_name), name)
        setattr(sys.modules[package], name, value)
        return value

    return __getattr__
