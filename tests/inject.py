"""Fault injection for tests: wrappers that make a real function fail the way a defect would."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

__all__ = ["raise_once"]


def raise_once(real: Callable[..., Any]) -> Callable[..., Any]:
    """``real``, except that its first call raises ``RuntimeError("injected")``."""
    calls = itertools.count()

    def flaky(*args: Any, **kwargs: Any) -> Any:
        if next(calls) == 0:
            raise RuntimeError("injected")
        return real(*args, **kwargs)

    return flaky
