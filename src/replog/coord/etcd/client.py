"""A thin client for etcd v3's HTTP/JSON gateway (``/v3/...``) over ``httpx``.

Only what the etcd coordinator needs: ranges, transactions, and leases. The gateway speaks
JSON: keys and values are base64, int64s are JSON strings, and fields holding a zero value are
left out (``succeeded`` is absent when a txn failed, ``kvs`` when nothing matched, ``TTL`` once a
lease is gone). Every request has a timeout; transport failures and timeouts become
``CoordinatorUnavailableError`` (the outcome of a write is then unknown). With several
endpoints, a request that cannot connect moves on to the next one.

``httpx`` is imported here only, so the coordinator module can be imported without it.
"""

from __future__ import annotations

import base64
import threading
from collections.abc import Sequence
from typing import Any

import attrs
import httpx

from replog.coord.errors import CoordinatorClosedError, CoordinatorUnavailableError

__all__ = [
    "EtcdClient",
    "EtcdRequestError",
    "KeyValue",
    "TxnResult",
    "b64",
    "cmp_create",
    "cmp_mod",
    "op_delete",
    "op_put",
    "op_range",
    "prefix_end",
    "unb64",
]

JsonObj = dict[str, Any]


class EtcdRequestError(CoordinatorUnavailableError):
    """etcd answered a request with an error (e.g. "requested lease not found")."""

    def __init__(self, path: str, status: int, message: str) -> None:
        super().__init__(f"etcd {path} failed ({status}): {message}")
        self.status = status
        self.etcd_message = message


def b64(data: str | bytes) -> str:
    """Base64 of a key or value (str is UTF-8 encoded)."""
    raw = data.encode() if isinstance(data, str) else data
    return base64.b64encode(raw).decode("ascii")


def unb64(data: str) -> bytes:
    """Decode a base64 field of a gateway answer."""
    return base64.b64decode(data)


def prefix_end(prefix: str) -> str:
    """The ``range_end`` that selects every key starting with ``prefix`` (ASCII prefixes)."""
    raw = prefix.encode()
    return (raw[:-1] + bytes([raw[-1] + 1])).decode()


@attrs.frozen
class KeyValue:
    """One key as a range returned it."""

    key: str
    value: bytes
    create_revision: int
    mod_revision: int
    version: int
    lease: int


@attrs.frozen
class TxnResult:
    """A txn's outcome: whether the compares held, the store revision after it, and each
    branch op's answer (range answers as lists of ``KeyValue``, others as None)."""

    succeeded: bool
    revision: int
    ranges: tuple[list[KeyValue] | None, ...]


def _kvs(answer: JsonObj) -> list[KeyValue]:
    return [
        KeyValue(
            key=unb64(kv["key"]).decode(),
            value=unb64(kv.get("value", "")),
            create_revision=int(kv.get("create_revision", 0)),
            mod_revision=int(kv.get("mod_revision", 0)),
            version=int(kv.get("version", 0)),
            lease=int(kv.get("lease", 0)),
        )
        for kv in answer.get("kvs", [])
    ]


def op_put(key: str, value: str | bytes, lease: int = 0) -> JsonObj:
    """A txn put op."""
    body: JsonObj = {"key": b64(key), "value": b64(value)}
    if lease:
        body["lease"] = str(lease)
    return {"request_put": body}


def op_delete(key: str, *, prefix: bool = False) -> JsonObj:
    """A txn delete op (of one key, or of every key under ``key`` as a prefix)."""
    body: JsonObj = {"key": b64(key)}
    if prefix:
        body["range_end"] = b64(prefix_end(key))
    return {"request_delete_range": body}


def op_range(
    key: str,
    *,
    prefix: bool = False,
    range_end: str | None = None,
    limit: int = 0,
    keys_only: bool = False,
) -> JsonObj:
    """A txn range op."""
    body: JsonObj = {"key": b64(key)}
    if keys_only:
        body["keys_only"] = True
    if prefix:
        body["range_end"] = b64(prefix_end(key))
    elif range_end is not None:
        body["range_end"] = b64(range_end)
    if limit:
        body["limit"] = str(limit)
    return {"request_range": body}


def cmp_mod(key: str, mod_revision: int) -> JsonObj:
    """Compare: the key's mod_revision equals ``mod_revision`` (0: the key is absent)."""
    return {"key": b64(key), "result": "EQUAL", "target": "MOD", "mod_revision": str(mod_revision)}


def cmp_create(key: str, create_revision: int) -> JsonObj:
    """Compare: the key's create_revision equals ``create_revision`` (0: absent)."""
    return {
        "key": b64(key),
        "result": "EQUAL",
        "target": "CREATE",
        "create_revision": str(create_revision),
    }


class EtcdClient:
    """Synchronous JSON-gateway client over one ``httpx.Client`` (thread-safe)."""

    def __init__(self, endpoints: Sequence[str], *, timeout_ms: int) -> None:
        if not endpoints:
            raise ValueError("an etcd client needs at least one endpoint")
        self._endpoints = list(endpoints)
        self._preferred = 0
        self._timeout_ms = timeout_ms
        self._http = httpx.Client(timeout=timeout_ms / 1000)
        self._lock = threading.Lock()
        self._closed = False

    def close(self) -> None:
        """Close the connection pool (idempotent)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self._http.close()

    def post(self, path: str, body: JsonObj, *, timeout_ms: int | None = None) -> JsonObj:
        """POST ``body`` to ``/v3/<path>`` and return the JSON answer."""
        if self._closed:
            raise CoordinatorClosedError("the etcd client is closed")
        timeout_s = (self._timeout_ms if timeout_ms is None else timeout_ms) / 1000
        count = len(self._endpoints)
        last: Exception | None = None
        for attempt in range(count):
            index = (self._preferred + attempt) % count
            url = f"{self._endpoints[index]}/v3/{path}"
            try:
                response = self._http.post(url, json=body, timeout=timeout_s)
            except httpx.ConnectError as e:
                last = e
                continue
            except (httpx.TimeoutException, httpx.TransportError) as e:
                raise CoordinatorUnavailableError(f"etcd {path} at {url}: {e!r}") from e
            except RuntimeError as e:  # the pool was closed under us
                raise CoordinatorClosedError(f"etcd client closed during {path}") from e
            self._preferred = index
            if response.status_code != 200:
                try:
                    message = str(response.json().get("message", response.text))
                except ValueError:
                    message = response.text
                raise EtcdRequestError(path, response.status_code, message)
            answer: JsonObj = response.json()
            return answer
        raise CoordinatorUnavailableError(f"etcd {path}: no endpoint reachable ({last!r})")

    def range(
        self, key: str, *, prefix: bool = False, timeout_ms: int | None = None
    ) -> list[KeyValue]:
        """The key (or every key under the prefix)."""
        body = op_range(key, prefix=prefix)["request_range"]
        return _kvs(self.post("kv/range", body, timeout_ms=timeout_ms))

    def txn(
        self,
        compare: Sequence[JsonObj],
        success: Sequence[JsonObj],
        failure: Sequence[JsonObj] = (),
        *,
        timeout_ms: int | None = None,
    ) -> TxnResult:
        """Run one transaction."""
        answer = self.post(
            "kv/txn",
            {"compare": list(compare), "success": list(success), "failure": list(failure)},
            timeout_ms=timeout_ms,
        )
        ranges: list[list[KeyValue] | None] = []
        for response in answer.get("responses", []):
            got = response.get("response_range")
            ranges.append(None if got is None else _kvs(got))
        return TxnResult(
            succeeded=bool(answer.get("succeeded", False)),
            revision=int(answer.get("header", {}).get("revision", 0)),
            ranges=tuple(ranges),
        )

    def read(
        self, ops: Sequence[JsonObj], *, timeout_ms: int | None = None
    ) -> list[list[KeyValue]]:
        """Several ranges at one revision (a txn with no compares)."""
        result = self.txn((), ops, timeout_ms=timeout_ms)
        return [r if r is not None else [] for r in result.ranges]

    def lease_grant(self, ttl_s: int, *, timeout_ms: int | None = None) -> tuple[int, int]:
        """Grant a lease; returns (id, granted TTL in s)."""
        answer = self.post("lease/grant", {"TTL": str(ttl_s)}, timeout_ms=timeout_ms)
        if answer.get("error"):
            raise EtcdRequestError("lease/grant", 200, str(answer["error"]))
        return int(answer["ID"]), int(answer.get("TTL", ttl_s))

    def lease_keepalive(self, lease_id: int, *, timeout_ms: int | None = None) -> int | None:
        """Renew a lease once: its TTL in s, or None if the lease is gone."""
        answer = self.post("lease/keepalive", {"ID": str(lease_id)}, timeout_ms=timeout_ms)
        ttl = int(answer.get("result", {}).get("TTL", 0))
        return ttl if ttl > 0 else None

    def lease_revoke(self, lease_id: int, *, timeout_ms: int | None = None) -> bool:
        """Revoke a lease (its keys go); False if it was already gone."""
        try:
            self.post("lease/revoke", {"ID": str(lease_id)}, timeout_ms=timeout_ms)
        except EtcdRequestError as e:
            if "not found" in e.etcd_message:
                return False
            raise
        return True
