"""The layering and the sans-IO rule as import contracts (``[tool.importlinter]`` in
pyproject.toml), checked with import-linter on every ``make test``.

A package imports only from the layers below its own; the client library uses no server
package; ``replog.isr``, ``replog.election`` and ``replog.groups`` import nothing that does IO,
directly or through another module. A broken contract fails this test with import-linter's
report (the offending import chains, file and line).
"""

from __future__ import annotations

import pathlib

import pytest
from importlinter import cli

ROOT = pathlib.Path(__file__).resolve().parents[1]


def test_import_contracts_are_kept(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(ROOT)
    exit_code = cli.lint_imports(
        config_filename=str(ROOT / "pyproject.toml"), no_cache=True, no_logo=True
    )
    report = capsys.readouterr().out
    assert exit_code == cli.EXIT_STATUS_SUCCESS, report
    assert "Contracts: 3 kept, 0 broken." in report, report
