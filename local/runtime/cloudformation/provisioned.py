"""What provisioning hands the runtime: the stack's functions, queue mappings, API routes, outputs.

Plain records, filled by the per-service provisioners and read by the Lambda runner, the SQS
pollers and the API adapter. Imports nothing of the runtime but the lane tag of a stage function.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rag_ingest.core.job import LANE_TAG


class ProvisioningError(Exception):
    """The template asks for something the local stack cannot provide."""


@dataclass(frozen=True)
class FunctionDefinition:
    """What the Lambda runner needs to run one function of the template."""

    logical_id: str
    name: str
    arn: str
    handler: str
    runtime: str
    code_dir: Path
    timeout_seconds: int
    memory_mb: int
    environment: Mapping[str, str]
    cdk_path: str | None = None
    reserved_concurrency: int | None = None
    tags: Mapping[str, str] = field(default_factory=dict)

    @property
    def lane(self) -> str | None:
        """The workflow lane of a stage function (its ``rag-ingest:lane`` tag), None for the others."""
        return self.tags.get(LANE_TAG)

    @property
    def display_name(self) -> str:
        """A readable name for logs: the construct path without stack and ``/Resource``."""
        if self.cdk_path:
            parts = [part for part in self.cdk_path.split("/")[1:] if part != "Resource"]
            if parts:
                return "/".join(parts)
        return self.logical_id

    def aliases(self) -> set[str]:
        """Names a test may use for this function (fault injection)."""
        names = {self.name, self.logical_id, self.arn, self.display_name}
        names.add(re.sub(r"[0-9A-F]{8}$", "", self.logical_id))
        if self.cdk_path:
            names.add(self.cdk_path)
            names.add(self.cdk_path.removesuffix("/Resource"))
            names.add(self.display_name.split("/")[-1])
        return {name for name in names if name}


@dataclass(frozen=True)
class EventSourceMapping:
    """An SQS event source mapping of the template, as the local poller runs it."""

    logical_id: str
    queue_arn: str
    queue_url: str
    function_name: str
    batch_size: int
    batching_window_seconds: int
    report_batch_item_failures: bool
    maximum_concurrency: int | None
    enabled: bool


@dataclass(frozen=True)
class ApiRoute:
    """One route of the HTTP API and the local function behind it."""

    route_key: str
    method: str  # "ANY" matches every method
    path_template: str | None  # None: the $default route
    function_name: str
    requires_jwt: bool


@dataclass
class ProvisionedStack:
    """Everything created or read from the template, by logical id where it has one."""

    stack_name: str
    physical_ids: dict[str, Any] = field(default_factory=dict)
    functions: list[FunctionDefinition] = field(default_factory=list)
    event_source_mappings: list[EventSourceMapping] = field(default_factory=list)
    api_routes: list[ApiRoute] = field(default_factory=list)
    state_machines: dict[str, str] = field(default_factory=dict)
    outputs: dict[str, Any] = field(default_factory=dict)
    skipped: dict[str, list[str]] = field(default_factory=dict)

    def function_named(self, name: str) -> FunctionDefinition | None:
        return next((function for function in self.functions if function.name == name), None)

    @property
    def api_function_names(self) -> frozenset[str]:
        """The functions behind the HTTP API's routes: a person waits on each of their invocations."""
        return frozenset(route.function_name for route in self.api_routes)


def api_function_name(stack: ProvisionedStack) -> str | None:
    """The API function: logical id ``ApiApiFunction*`` or construct path ``.../Api/ApiFunction``."""
    for function in stack.functions:
        if function.logical_id.startswith("ApiApiFunction") or "/Api/ApiFunction" in (function.cdk_path or ""):
            return function.name
    return None
