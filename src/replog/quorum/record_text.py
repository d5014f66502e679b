"""How ``replog dump-log --cluster-metadata-decoder`` shows a record of the metadata log (the
built-in quorum's ``__cluster_metadata-0``), as Kafka's decoder shows one of KRaft's:

- a control record (its key names the type, ``replog.raft.entries``): ``control: {"type":
  "leader-change", "data": {"leaderId": 1, "voters": [1, 2, 3]}}``;
- a data record (key null): the quorum command its JSON value holds (``replog.quorum.codec``),
  ``payload: {"type": "CreateTopicWrite", "data": {...}}``;
- anything else: ``payload: undecodable (N bytes): why``, never an exception.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["metadata_record_text"]


def metadata_record_text(key: bytes | None, value: bytes | None) -> str:
    """One metadata-log record as text (module docstring)."""
    if value is None:
        return "payload: null"
    try:
        document: Any = json.loads(value)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        return f"payload: undecodable ({len(value)} bytes): {exc}"
    if key is not None:
        control = key.decode("utf-8", errors="replace")
        return "control: " + json.dumps({"type": control, "data": document}, sort_keys=True)
    kind = document.get("@") if isinstance(document, dict) else None
    if not isinstance(kind, str):
        return f"payload: undecodable ({len(value)} bytes): not a quorum command"
    data = {k: v for k, v in document.items() if k != "@"}
    return "payload: " + json.dumps({"type": kind, "data": data}, sort_keys=True)
