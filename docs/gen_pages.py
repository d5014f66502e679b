"""Write the documentation site's generated pages (``make docs`` runs this, then MkDocs).

Generated from the code, so they cannot drift from it, and not committed (``.gitignore``):

- ``docs/index.md``: the README (the landing page), its ``docs/`` links made site-relative;
- ``docs/reference/cli.md``: every ``replog`` command's ``--help``;
- ``docs/reference/kafka-apis.md``: the Kafka APIs and versions the brokers serve;
- ``docs/reference/broker-config.md``: every ``BrokerConfig`` setting, its default and comment;
- ``docs/reference/api.md``: the API reference of every name in ``replog.__all__``
  (mkdocstrings), and the modules users reach into (testing, tools).

    python docs/gen_pages.py
"""

from __future__ import annotations

import argparse
import ast
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
REFERENCE = DOCS / "reference"

sys.path.insert(0, str(ROOT / "src"))

#: modules whose whole docstrings and public names the API reference also shows
API_MODULES = (
    "replog.testing.pytest_plugin",
    "replog.testing.faults",
    "replog.broker.shell.metrics",
    "replog.topic_config",
    "replog.spark",
)


def landing_page() -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    text = re.sub(r"\]\(docs/([^)]+)\)", r"](\1)", text)
    return "<!-- generated from README.md by docs/gen_pages.py -->\n" + text


def cli_page() -> str:
    from replog.cli import build_parser

    parser, _ = build_parser()
    subparsers = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    parts = [
        "# Command line reference\n",
        "Every `replog` command and its options, as `replog COMMAND --help` prints them. "
        "Exit status of every operator tool: 0 done, 1 the operation failed (the reason on "
        "stderr), 2 usage error. Guides with examples: [Operating a cluster](../operating.md).\n",
    ]
    for name, sub in sorted(subparsers.choices.items()):
        parts.append(f"## replog {name}\n")
        parts.append("```text\n" + sub.format_help().rstrip() + "\n```\n")
    return "\n".join(parts)


def kafka_apis_page() -> str:
    from replog.protocol import APIS

    rows = [
        f"| {spec.info.name} | {key} | {spec.info.min_version}-{spec.info.max_version} "
        f"| {spec.info.flexible_from} |"
        for key, spec in sorted(APIS.items())
    ]
    return "\n".join(
        [
            "# Kafka APIs served\n",
            "What a replog broker answers in ApiVersions: each API, its key, the versions "
            "served and the first flexible (tagged-fields) version. Clients negotiate within "
            "these ranges, so kafka-python, confluent-kafka (librdkafka), aiokafka and kafkajs "
            "work unchanged for producing (idempotent included), consuming, consumer groups, "
            "offsets by time, topic and config administration, DeleteRecords, reassignments "
            "and leader elections. Not served yet: transactions (InitProducerId with a "
            "transactional id, AddPartitionsToTxn, EndTxn, ...), SASL and ACLs.\n",
            "| API | key | versions | flexible from |",
            "| --- | --- | --- | --- |",
            *rows,
            "",
        ]
    )


def broker_config_page() -> str:
    import attrs

    from replog.broker.config import BrokerConfig

    source = (ROOT / "src/replog/broker/config.py").read_text(encoding="utf-8")
    comments = _field_comments(source, "BrokerConfig")
    rows = []
    for field in attrs.fields(BrokerConfig):
        default = field.default
        if default is attrs.NOTHING:
            shown = "required"
        elif isinstance(default, attrs.Factory):  # type: ignore[arg-type]
            shown = "computed"
        else:
            shown = f"`{default!r}`"
        note = comments.get(field.name, "").replace("|", "\\|")
        rows.append(f"| `{field.name}` | {shown} | {note} |")
    return "\n".join(
        [
            "# Broker configuration\n",
            "The settings of `BrokerConfig` (a TOML file for `replog broker --config FILE`, "
            "or keyword arguments of `BrokerConfig` and `Cluster.local`), with their defaults. "
            "Times are in ms and sizes in bytes. Topic-level settings (retention, segment "
            "size, min.insync.replicas, ...) are Kafka's topic configs: see "
            "`replog.topic_config` in the [API reference](api.md).\n",
            "| setting | default | what it is |",
            "| --- | --- | --- |",
            *rows,
            "",
        ]
    )


def _field_comments(source: str, class_name: str) -> dict[str, str]:
    """``#:`` comment lines above each field of ``class_name``, joined."""
    tree = ast.parse(source)
    lines = source.splitlines()
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == class_name)
    out: dict[str, str] = {}
    for node in cls.body:
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            comment: list[str] = []
            row = node.lineno - 2
            while row >= 0 and lines[row].strip().startswith("#:"):
                comment.insert(0, lines[row].strip()[2:].strip())
                row -= 1
            out[node.target.id] = " ".join(comment)
    return out


def api_page() -> str:
    import replog

    names = [n for n in replog.__all__ if not n.startswith("_")]
    parts = [
        "# API reference\n",
        "Every name `import replog` offers, then the modules a test suite or an operator "
        "reaches into. Generated from the docstrings.\n",
    ]
    for name in names:
        target = getattr(replog, name)
        where = f"{target.__module__}.{target.__qualname__}"
        parts.append(f"## replog.{name}\n\n::: {where}\n")
    for module in API_MODULES:
        parts.append(f"## {module}\n\n::: {module}\n")
    return "\n".join(parts)


def write_all() -> list[Path]:
    """Write every generated page; returns their paths."""
    REFERENCE.mkdir(exist_ok=True)
    pages = {
        DOCS / "index.md": landing_page(),
        REFERENCE / "cli.md": cli_page(),
        REFERENCE / "kafka-apis.md": kafka_apis_page(),
        REFERENCE / "broker-config.md": broker_config_page(),
        REFERENCE / "api.md": api_page(),
    }
    for path, text in pages.items():
        path.write_text(text, encoding="utf-8")
    return list(pages)


if __name__ == "__main__":
    for page in write_all():
        print(page.relative_to(ROOT))
