"""The synthesized CloudFormation template and a resolver for the intrinsics CDK emits.

The resolver evaluates values the way CloudFormation would, given the physical ids and
attributes of the resources the local stack created (``set_resource``) and placeholders for
the ones it skips. An intrinsic it does not know is an error, never a silent pass-through.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final


class TemplateError(Exception):
    """The template cannot be loaded or a value in it cannot be resolved."""


class UnsupportedIntrinsicError(TemplateError):
    """An ``Fn::*`` (or other intrinsic) the local resolver does not implement."""


class UnresolvedReferenceError(TemplateError):
    """A Ref/GetAtt to a resource, parameter or attribute with no known value."""


class _NoValue:
    """``AWS::NoValue``: the enclosing property or list element is removed."""

    def __repr__(self) -> str:
        return "AWS::NoValue"


NO_VALUE: Final = _NoValue()

INTRINSICS: Final = frozenset(
    {
        "Ref",
        "Fn::GetAtt",
        "Fn::Join",
        "Fn::Sub",
        "Fn::Select",
        "Fn::Split",
        "Fn::FindInMap",
        "Fn::If",
        "Fn::Equals",
        "Fn::Not",
        "Fn::And",
        "Fn::Or",
        "Fn::Base64",
        "Condition",
    }
)
# Known CloudFormation intrinsics deliberately not implemented locally (clear error if met).
_KNOWN_UNSUPPORTED: Final = frozenset(
    {"Fn::ImportValue", "Fn::GetAZs", "Fn::Cidr", "Fn::Transform", "Fn::Length", "Fn::ToJsonString"}
)

_SUB_VARIABLE = re.compile(r"\$\{([^}]*)\}")


@dataclass(frozen=True)
class TemplateResource:
    logical_id: str
    type: str
    properties: Mapping[str, Any]
    metadata: Mapping[str, Any]
    depends_on: tuple[str, ...]
    condition: str | None

    @property
    def cdk_path(self) -> str | None:
        value = self.metadata.get("aws:cdk:path")
        return str(value) if value else None

    @property
    def asset_path(self) -> str | None:
        value = self.metadata.get("aws:asset:path")
        return str(value) if value else None


@dataclass
class CloudFormationTemplate:
    body: dict[str, Any]
    path: Path | None = None
    resources: dict[str, TemplateResource] = field(init=False)

    def __post_init__(self) -> None:
        raw_resources = self.body.get("Resources")
        if not isinstance(raw_resources, dict) or not raw_resources:
            raise TemplateError(f"template {self.path or '<dict>'} has no Resources")
        self.resources = {}
        for logical_id, raw in raw_resources.items():
            if not isinstance(raw, dict) or "Type" not in raw:
                raise TemplateError(f"resource {logical_id} has no Type")
            depends_on = raw.get("DependsOn", [])
            self.resources[logical_id] = TemplateResource(
                logical_id=logical_id,
                type=str(raw["Type"]),
                properties=raw.get("Properties", {}) or {},
                metadata=raw.get("Metadata", {}) or {},
                depends_on=tuple([depends_on] if isinstance(depends_on, str) else depends_on),
                condition=raw.get("Condition"),
            )

    @classmethod
    def load(cls, path: Path) -> CloudFormationTemplate:
        if not path.is_file():
            raise TemplateError(
                f"template not found: {path}. Synthesize it first "
                "(.venv/bin/python tools/build_layer.py && CDK_OUTDIR=cdk.out .venv/bin/python app.py) "
                "or point LOCAL_TEMPLATE at one."
            )
        try:
            body = json.loads(path.read_text())
        except json.JSONDecodeError as exc:
            raise TemplateError(f"template {path} is not valid JSON: {exc}") from exc
        return cls(body=body, path=path.resolve())

    @property
    def parameters(self) -> dict[str, Any]:
        return dict(self.body.get("Parameters", {}) or {})

    @property
    def outputs(self) -> dict[str, Any]:
        return dict(self.body.get("Outputs", {}) or {})

    @property
    def mappings(self) -> dict[str, Any]:
        return dict(self.body.get("Mappings", {}) or {})

    @property
    def conditions(self) -> dict[str, Any]:
        return dict(self.body.get("Conditions", {}) or {})

    def of_type(self, *types: str) -> list[TemplateResource]:
        return [resource for resource in self.resources.values() if resource.type in types]

    def asset_dir(self, resource: TemplateResource) -> Path | None:
        """The directory of a resource's CDK asset (relative paths are relative to cdk.out)."""
        asset = resource.asset_path
        if asset is None:
            return None
        candidate = Path(asset)
        if not candidate.is_absolute():
            if self.path is None:
                return None
            candidate = self.path.parent / candidate
        return candidate.resolve()


def references(value: Any) -> set[str]:
    """Logical ids (resources or parameters) a value refers to via Ref, GetAtt or Sub."""
    found: set[str] = set()
    if isinstance(value, list):
        for item in value:
            found |= references(item)
    elif isinstance(value, dict):
        if len(value) == 1:
            ((key, argument),) = value.items()
            if key == "Ref" and isinstance(argument, str) and not argument.startswith("AWS::"):
                found.add(argument)
            elif key == "Fn::GetAtt":
                target = argument.split(".", 1)[0] if isinstance(argument, str) else argument[0]
                if isinstance(target, str):
                    found.add(target)
            elif key == "Fn::Sub":
                text = argument if isinstance(argument, str) else argument[0]
                local_names = set(argument[1]) if isinstance(argument, list) and len(argument) > 1 else set()
                for name in _SUB_VARIABLE.findall(text):
                    if name.startswith("!"):
                        continue
                    target = name.split(".", 1)[0]
                    if target not in local_names and not target.startswith("AWS::"):
                        found.add(target)
                if isinstance(argument, list) and len(argument) > 1:
                    found |= references(argument[1])
        for item in value.values():
            found |= references(item)
    return found


def generated_physical_name(stack_name: str, logical_id: str, *, max_length: int, lowercase: bool = False) -> str:
    """A CloudFormation-style generated name, deterministic so restarts keep the same names."""
    digest = hashlib.sha256(f"{stack_name}/{logical_id}".encode()).digest()
    suffix = base64.b32encode(digest).decode().rstrip("=")[:12]
    prefix_budget = max_length - len(suffix) - 2
    stack_part = stack_name[: prefix_budget // 2]
    logical_part = logical_id[: prefix_budget - len(stack_part)]
    name = f"{stack_part}-{logical_part}-{suffix}"
    if lowercase:
        name = re.sub(r"[^a-z0-9.-]", "", name.lower())
    return name


class IntrinsicResolver:
    """Evaluates intrinsics against the physical ids the local stack knows."""

    def __init__(
        self,
        template: CloudFormationTemplate,
        *,
        region: str,
        account_id: str,
        stack_name: str,
        partition: str = "aws",
        url_suffix: str = "amazonaws.com",
        parameter_values: Mapping[str, Any] | None = None,
    ) -> None:
        self.template = template
        self.pseudo_parameters: dict[str, Any] = {
            "AWS::Region": region,
            "AWS::AccountId": account_id,
            "AWS::Partition": partition,
            "AWS::URLSuffix": url_suffix,
            "AWS::StackName": stack_name,
            "AWS::StackId": (
                f"arn:{partition}:cloudformation:{region}:{account_id}:stack/{stack_name}/"
                "00000000-0000-0000-0000-000000000000"
            ),
            "AWS::NotificationARNs": [],
            "AWS::NoValue": NO_VALUE,
        }
        self._parameter_values = dict(parameter_values or {})
        self._refs: dict[str, Any] = {}
        self._attributes: dict[str, Mapping[str, Any]] = {}
        self._condition_cache: dict[str, bool] = {}

    # -- physical ids -------------------------------------------------------------------------

    def set_resource(self, logical_id: str, ref: Any, attributes: Mapping[str, Any] | None = None) -> None:
        if logical_id not in self.template.resources:
            raise UnresolvedReferenceError(f"no resource {logical_id} in the template")
        self._refs[logical_id] = ref
        self._attributes[logical_id] = attributes if attributes is not None else {}

    def has_resource(self, logical_id: str) -> bool:
        return logical_id in self._refs

    def ref(self, name: str) -> Any:
        if name in self.pseudo_parameters:
            return self.pseudo_parameters[name]
        if name in self._refs:
            return self._refs[name]
        if name in self.template.parameters:
            if name in self._parameter_values:
                return self._parameter_values[name]
            definition = self.template.parameters[name]
            if "Default" in definition:
                return definition["Default"]
            raise UnresolvedReferenceError(f"parameter {name} has no Default and no local value")
        if name in self.template.resources:
            raise UnresolvedReferenceError(f"Ref {name}: resource not provisioned (yet)")
        raise UnresolvedReferenceError(f"Ref {name}: no such resource, parameter or pseudo parameter")

    def get_att(self, logical_id: str, attribute: str) -> Any:
        if logical_id not in self.template.resources:
            raise UnresolvedReferenceError(f"Fn::GetAtt {logical_id}.{attribute}: no such resource")
        if logical_id not in self._attributes:
            raise UnresolvedReferenceError(f"Fn::GetAtt {logical_id}.{attribute}: resource not provisioned (yet)")
        attributes = self._attributes[logical_id]
        if attribute not in attributes:
            raise UnresolvedReferenceError(
                f"Fn::GetAtt {logical_id}.{attribute}: attribute unknown locally "
                f"(known: {', '.join(sorted(attributes)) or 'none'})"
            )
        return attributes[attribute]

    # -- evaluation ---------------------------------------------------------------------------

    def resolve(self, value: Any) -> Any:
        """The value with every intrinsic evaluated (``AWS::NoValue`` entries removed)."""
        resolved = self._resolve(value)
        return None if resolved is NO_VALUE else resolved

    def _resolve(self, value: Any) -> Any:
        if isinstance(value, list):
            items = [self._resolve(item) for item in value]
            return [item for item in items if item is not NO_VALUE]
        if not isinstance(value, dict):
            return value
        if len(value) == 1:
            ((key, argument),) = value.items()
            if key in INTRINSICS:
                return self._intrinsic(key, argument)
            if key in _KNOWN_UNSUPPORTED or key.startswith("Fn::"):
                raise UnsupportedIntrinsicError(f"{key} is not supported by the local resolver: {value!r}")
        resolved: dict[str, Any] = {}
        for key, item in value.items():
            result = self._resolve(item)
            if result is not NO_VALUE:
                resolved[key] = result
        return resolved

    def _intrinsic(self, name: str, argument: Any) -> Any:
        if name == "Ref":
            if not isinstance(argument, str):
                raise TemplateError(f"Ref expects a name, got {argument!r}")
            return self.ref(argument)
        if name == "Fn::GetAtt":
            return self._get_att(argument)
        if name == "Fn::Join":
            delimiter, items = self._expect_list(name, argument, 2)
            parts = self._resolve(items)
            if not isinstance(parts, list):
                raise TemplateError(f"Fn::Join expects a list, got {parts!r}")
            return str(self._resolve(delimiter)).join(self._scalar_text(name, part) for part in parts)
        if name == "Fn::Sub":
            return self._sub(argument)
        if name == "Fn::Select":
            index, items = self._expect_list(name, argument, 2)
            position = int(self._resolve(index))
            values = self._resolve(items)
            if not isinstance(values, list) or not 0 <= position < len(values):
                raise TemplateError(f"Fn::Select index {position} out of range of {values!r}")
            return values[position]
        if name == "Fn::Split":
            delimiter, text = self._expect_list(name, argument, 2)
            return str(self._resolve(text)).split(str(self._resolve(delimiter)))
        if name == "Fn::FindInMap":
            map_name, top_key, second_key = (self._resolve(item) for item in self._expect_list(name, argument, 3))
            try:
                return self.template.mappings[map_name][top_key][second_key]
            except KeyError as exc:
                raise UnresolvedReferenceError(
                    f"Fn::FindInMap {map_name}/{top_key}/{second_key}: no such entry"
                ) from exc
        if name == "Fn::If":
            condition, when_true, when_false = self._expect_list(name, argument, 3)
            return self._resolve(when_true if self.condition(str(condition)) else when_false)
        if name == "Fn::Equals":
            left, right = self._expect_list(name, argument, 2)
            return self._resolve(left) == self._resolve(right)
        if name == "Fn::Not":
            (operand,) = self._expect_list(name, argument, 1)
            return not self._truth(operand)
        if name == "Fn::And":
            return all(self._truth(operand) for operand in self._expect_list(name, argument, None))
        if name == "Fn::Or":
            return any(self._truth(operand) for operand in self._expect_list(name, argument, None))
        if name == "Fn::Base64":
            return base64.b64encode(str(self._resolve(argument)).encode()).decode()
        if name == "Condition":
            return self.condition(str(argument))
        raise UnsupportedIntrinsicError(f"{name} is not supported by the local resolver")

    def condition(self, name: str) -> bool:
        if name not in self._condition_cache:
            if name not in self.template.conditions:
                raise UnresolvedReferenceError(f"no condition {name} in the template")
            self._condition_cache[name] = self._truth(self.template.conditions[name])
        return self._condition_cache[name]

    def _truth(self, value: Any) -> bool:
        result = self._resolve(value)
        if not isinstance(result, bool):
            raise TemplateError(f"condition did not evaluate to a boolean: {value!r} -> {result!r}")
        return result

    def _get_att(self, argument: Any) -> Any:
        if isinstance(argument, str):
            logical_id, _, attribute = argument.partition(".")
        else:
            logical_id, attribute_value = self._expect_list("Fn::GetAtt", argument, 2)
            attribute = self._scalar_text("Fn::GetAtt", self._resolve(attribute_value))
        if not logical_id or not attribute:
            raise TemplateError(f"Fn::GetAtt expects [LogicalId, Attribute], got {argument!r}")
        return self.get_att(str(logical_id), attribute)

    def _sub(self, argument: Any) -> str:
        if isinstance(argument, str):
            text, variables = argument, {}
        else:
            text, raw_variables = self._expect_list("Fn::Sub", argument, 2)
            variables = self._resolve(raw_variables)
            if not isinstance(variables, dict):
                raise TemplateError(f"Fn::Sub variables must be a map, got {raw_variables!r}")

        def substitute(match: re.Match[str]) -> str:
            expression = match.group(1)
            if expression.startswith("!"):
                return "${" + expression[1:] + "}"
            if expression in variables:
                return self._scalar_text("Fn::Sub", variables[expression])
            if "." in expression and not expression.startswith("AWS::"):
                logical_id, attribute = expression.split(".", 1)
                return self._scalar_text("Fn::Sub", self.get_att(logical_id, attribute))
            return self._scalar_text("Fn::Sub", self.ref(expression))

        return _SUB_VARIABLE.sub(substitute, str(text))

    @staticmethod
    def _scalar_text(context: str, value: Any) -> str:
        if isinstance(value, bool):
            return "true" if value else "false"
        if isinstance(value, str | int | float):
            return str(value)
        raise TemplateError(f"{context}: expected a string, got {value!r}")

    @staticmethod
    def _expect_list(name: str, argument: Any, length: int | None) -> list[Any]:
        if not isinstance(argument, list) or (length is not None and len(argument) != length):
            expected = f"a list of {length}" if length is not None else "a list"
            raise TemplateError(f"{name} expects {expected}, got {argument!r}")
        return argument


def dependency_order(template: CloudFormationTemplate, logical_ids: Iterable[str]) -> list[str]:
    """The given resources sorted so every resource comes after the ones it refers to."""
    wanted = list(logical_ids)
    wanted_set = set(wanted)
    edges: dict[str, set[str]] = {}
    for logical_id in wanted:
        resource = template.resources[logical_id]
        needs = references(resource.properties) | set(resource.depends_on)
        edges[logical_id] = {
            dependency for dependency in needs if dependency in wanted_set and dependency != logical_id
        }
    ordered: list[str] = []
    state: dict[str, int] = {}  # 1 = visiting, 2 = done

    def visit(node: str, trail: tuple[str, ...]) -> None:
        if state.get(node) == 2:
            return
        if state.get(node) == 1:
            raise TemplateError(f"circular dependency: {' -> '.join((*trail, node))}")
        state[node] = 1
        for dependency in sorted(edges[node]):
            visit(dependency, (*trail, node))
        state[node] = 2
        ordered.append(node)

    for logical_id in wanted:
        visit(logical_id, ())
    return ordered
