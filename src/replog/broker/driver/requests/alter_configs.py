"""AlterConfigs (key 33) and IncrementalAlterConfigs (key 44): change the configs of topics and
the dynamic configs of brokers (a broker id, or "" for the cluster-wide default).

Each resource's changes are checked here against this broker's metadata image -- the result
must be configs replog honours (``replog.topic_config``, ``replog.config_layers``): anything
else is INVALID_CONFIG naming the key, an unknown topic UNKNOWN_TOPIC_OR_PARTITION, another
resource type or a bad broker name INVALID_REQUEST -- then queued for the controller as an
``AlterConfigs`` payload carrying the changes (not the result: the controller applies them to
the stored configs, so concurrent requests never undo one another) and answered once it stores
them. ``validate_only`` checks and queues nothing. Every broker and the controller apply the
stored configs live (see ``ReplicaAdmin.refresh_settings`` and the controller's policy).
"""

from __future__ import annotations

from collections.abc import Iterable

from replog.broker.driver.requests.base import (
    AdminResult,
    Handler,
    Outcome,
    RequestContext,
    RequestServices,
)
from replog.broker.driver.requests.queueing import Checked, queue_checked
from replog.config_layers import apply_changes, check_broker_configs
from replog.errors import ErrorCode, InvalidConfigError, InvalidTopicError
from replog.metadata.types import (
    ALL_BROKERS,
    AlterConfigs,
    ConfigChange,
    ConfigOperation,
    ConfigResourceType,
    topic_configs,
)
from replog.protocol import messages as m
from replog.protocol.schema import Message
from replog.topic_config import parse_topic_configs
from replog.topics import validate_topic_name

__all__ = ["HANDLERS", "check_alter_configs", "handle_alter_configs", "handle_incremental"]

Resource = tuple[int, str]


def check_alter_configs(
    services: RequestServices,
    resource_type: int,
    name: str,
    changes: tuple[ConfigChange, ...],
    *,
    replace: bool,
) -> tuple[AlterConfigs | None, AdminResult]:
    """The payload to queue for one resource, or None and why it is refused."""
    try:
        kind = ConfigResourceType(resource_type)
    except ValueError:
        return None, AdminResult(
            ErrorCode.INVALID_REQUEST,
            f"replog alters topic and broker configs, not type {resource_type}",
        )
    try:
        if kind is ConfigResourceType.TOPIC:
            validate_topic_name(name)
            assignment = services.topics.get(name)
            if assignment is None:
                message = f"unknown topic {name!r}"
                return None, AdminResult(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, message)
            configs = apply_changes(assignment.config_map, changes, replace=replace)
            parse_topic_configs(configs)
        else:
            if name and not (name.isascii() and name.isdigit()):
                message = f"a broker config resource is a broker id or '', not {name!r}"
                return None, AdminResult(ErrorCode.INVALID_REQUEST, message)
            current = services.broker_configs.get(int(name) if name else ALL_BROKERS, ())
            configs = apply_changes(dict(current), changes, replace=replace)
            check_broker_configs(configs)
        topic_configs(configs)  # the store's bounds
    except InvalidTopicError as exc:
        return None, AdminResult(ErrorCode.INVALID_TOPIC_EXCEPTION, str(exc))
    except (InvalidConfigError, ValueError) as exc:
        return None, AdminResult(ErrorCode.INVALID_CONFIG, str(exc))
    payload = AlterConfigs(resource_type=kind, resource_name=name, changes=changes, replace=replace)
    return payload, AdminResult(ErrorCode.NONE)


def _answers(answers: list[tuple[Resource, AdminResult]]) -> list[m.AlterConfigsResourceResponse]:
    return [
        m.AlterConfigsResourceResponse(
            error_code=int(result.error),
            error_message=result.message or None,
            resource_type=resource_type,
            resource_name=name,
        )
        for (resource_type, name), result in answers
    ]


def _check_all(
    services: RequestServices,
    items: Iterable[tuple[Resource, tuple[ConfigChange, ...] | AdminResult]],
    *,
    replace: bool,
) -> list[Checked[Resource]]:
    checked: list[Checked[Resource]] = []
    for (resource_type, name), changes in items:
        if isinstance(changes, AdminResult):
            checked.append(((resource_type, name), None, changes))
            continue
        payload, result = check_alter_configs(
            services, resource_type, name, changes, replace=replace
        )
        checked.append(((resource_type, name), payload, result))
    return checked


def handle_alter_configs(
    ctx: RequestContext, body: m.AlterConfigsRequest, services: RequestServices
) -> Outcome:
    """Replace each resource's configs with the ones given (null value: the default)."""
    items = [
        (
            (r.resource_type, r.resource_name),
            tuple(
                ConfigChange(operation=ConfigOperation.SET, key=c.name, value=c.value)
                for c in r.configs
            ),
        )
        for r in body.resources
    ]
    checked = _check_all(services, items, replace=True)
    timeout_ms = services.config.request_timeout_ms
    return queue_checked(
        checked,
        timeout_ms,
        body.validate_only,
        lambda answers: m.AlterConfigsResponse(responses=_answers(answers)),
    )


def handle_incremental(
    ctx: RequestContext, body: m.IncrementalAlterConfigsRequest, services: RequestServices
) -> Outcome:
    """Apply each resource's changes (SET, DELETE, APPEND, SUBTRACT) in order."""
    items: list[tuple[Resource, tuple[ConfigChange, ...] | AdminResult]] = []
    for r in body.resources:
        key = (r.resource_type, r.resource_name)
        try:
            changes = tuple(
                ConfigChange(operation=c.config_operation, key=c.name, value=c.value)
                for c in r.configs
            )
        except ValueError:
            bad = [c.config_operation for c in r.configs]
            items.append((key, AdminResult(ErrorCode.INVALID_REQUEST, f"bad operations {bad}")))
            continue
        items.append((key, changes))
    checked = _check_all(services, items, replace=False)
    timeout_ms = services.config.request_timeout_ms
    return queue_checked(
        checked,
        timeout_ms,
        body.validate_only,
        lambda answers: m.IncrementalAlterConfigsResponse(responses=_answers(answers)),
    )


HANDLERS: dict[type[Message], Handler] = {
    m.AlterConfigsRequest: handle_alter_configs,
    m.IncrementalAlterConfigsRequest: handle_incremental,
}
