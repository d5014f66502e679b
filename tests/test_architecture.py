"""The layering and the sans-IO rule as import contracts (``[tool.importlinter]`` in
pyproject.toml), checked with import-linter on every ``make test``.

A package imports only from the layers below its own; the client library uses no server
package; ``replog.isr``, ``replog.election`` and ``replog.groups`` import nothing that does IO,
directly or through another module. A broken contract fails this test with import-linter's
report (the offending import chains, file and line). The import graph has no cycles either,
imports under ``TYPE_CHECKING`` included (a few inside ``replog.log`` aside, which its
restructuring removes).

import-linter runs in its own process: in-process it reconfigures the logging module, which
would silence the log-message checks of the tests that run after it.
"""

from __future__ import annotations

import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]


def test_import_contracts_are_kept() -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; from importlinter.cli import lint_imports_command as c; sys.exit(c())",
            "--config",
            str(ROOT / "pyproject.toml"),
            "--no-cache",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    report = done.stdout + done.stderr
    assert done.returncode == 0, report
    assert "Contracts: 5 kept, 0 broken." in report, report


def _import_cycles() -> list[str]:
    """Every module that reaches itself through imports, as ``module -> ... -> module`` (the
    shortest way back from each module it imports)."""
    import grimp

    graph = grimp.build_graph("replog", exclude_type_checking_imports=False)
    cycles = []
    for module in sorted(graph.modules):
        for imported in graph.find_modules_directly_imported_by(module):
            if imported != module and graph.chain_exists(imported, module):
                chain = graph.find_shortest_chain(importer=imported, imported=module)
                cycles.append(" -> ".join([module, *(chain or ())]))
    return cycles


def test_the_import_graph_has_no_cycles() -> None:
    """No module reaches itself through imports: lazy ones inside functions and those under
    ``TYPE_CHECKING`` count too (a type-only import still ties one module's design to the
    other's; a part names the members of its owner it uses in a ``Protocol`` instead). Uses
    grimp, import-linter's graph builder."""
    cycles = _import_cycles()
    assert not cycles, cycles
