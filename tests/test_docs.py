"""The documentation: the site builds with no warning (``mkdocs build --strict``), its API
reference covers every name of ``replog.__all__``, every runnable example in it runs, and the
Grafana dashboard asks only for metrics a live broker serves.

Code blocks: a ```python block is an example and runs as it stands (a fresh interpreter, this
checkout's ``src``), except a block quoting ``examples/`` (its first line says which file;
``tests/client/test_pytest_plugin.py`` checks the quote) and a pytest snippet (a block that
defines ``test_`` functions), which must compile. ```py blocks are API sketches, not run.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

import replog
from replog import Cluster

pytestmark = pytest.mark.system

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
GENERATED = {DOCS / "index.md"} | set((DOCS / "reference").glob("*.md"))
PAGES = sorted([ROOT / "README.md", *(p for p in DOCS.glob("*.md") if p not in GENERATED)], key=str)
_BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)


def _examples() -> list[tuple[str, str]]:
    found = []
    for page in PAGES:
        for n, match in enumerate(_BLOCK.finditer(page.read_text(encoding="utf-8"))):
            found.append((f"{page.relative_to(ROOT)}#{n}", match.group(1)))
    return found


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT / "src"), "NO_MKDOCS_2_WARNING": "1"}


@pytest.mark.timeout(180)
def test_the_site_builds_without_a_warning(tmp_path: Path) -> None:
    subprocess.run([sys.executable, str(DOCS / "gen_pages.py")], check=True, env=_env())
    mkdocs = Path(sys.executable).parent / "mkdocs"
    built = subprocess.run(
        [str(mkdocs), "build", "--strict", "-d", str(tmp_path / "site")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env=_env(),
        check=False,
    )
    assert built.returncode == 0, built.stdout + built.stderr
    assert "WARNING" not in built.stderr, built.stderr
    api = (tmp_path / "site" / "reference" / "api" / "index.html").read_text(encoding="utf-8")
    for name in replog.__all__:
        if name.startswith("_"):
            continue
        target = getattr(replog, name)
        anchor = f'id="{target.__module__}.{target.__qualname__}"'
        assert anchor in api, f"the API reference has no entry for replog.{name}"
    cli = (tmp_path / "site" / "reference" / "cli" / "index.html").read_text(encoding="utf-8")
    for command in ("console-consumer", "configs", "get-offsets", "topics", "broker"):
        assert f"replog {command}" in cli


@pytest.mark.timeout(300)
@pytest.mark.parametrize(("where", "code"), _examples(), ids=[w for w, _ in _examples()])
def test_every_code_example_runs(where: str, code: str) -> None:
    if code.startswith("# examples/"):
        return  # a quote of a tested file (checked verbatim elsewhere)
    if re.search(r"^def test_", code, re.M):
        compile(code, where, "exec")  # a pytest snippet: its fixtures come from the plugin
        return
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=_env(), timeout=240
    )
    assert done.returncode == 0, f"{where} failed:\n{done.stdout}\n{done.stderr}"


def test_there_are_examples_to_run() -> None:
    runnable = [w for w, code in _examples() if not code.startswith("# examples/")]
    assert len(runnable) >= 5, runnable


@pytest.mark.timeout(120)
def test_the_dashboard_asks_only_for_metrics_a_broker_serves() -> None:
    dashboard = json.loads((ROOT / "dashboards" / "replog-grafana.json").read_text())
    exprs = [t["expr"] for panel in dashboard["panels"] for t in panel["targets"]]
    asked = {m for e in exprs for m in re.findall(r"\b(kafka_[a-z_]+)", e)}
    assert len(asked) >= 15
    with Cluster.local(1, metrics_port=0) as cluster:
        with replog.Admin(cluster.bootstrap) as admin:
            admin.create_topics("dash", 1, 1)
        with replog.Producer(cluster.bootstrap, acks="all") as producer:
            producer.send("dash", b"v").result()
        with replog.Consumer(cluster.bootstrap, auto_offset_reset="earliest") as consumer:
            consumer.assign([("dash", 0)])
            while not consumer.poll(timeout_ms=1000):
                pass
        port = cluster.brokers[1].metrics_port
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as answer:
            text = answer.read().decode()
    served = {line.split("{")[0].split(" ")[0] for line in text.splitlines() if line[:1] != "#"}
    missing = sorted(asked - served)
    assert not missing, f"the dashboard asks for metrics no broker serves: {missing}"
