"""Reading the synthesized template: resources by construct path, policies, the state machine."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aws_cdk.assertions import Template

from infra.config import RagIngestConfig

Resource = dict[str, Any]


@dataclass
class SynthResult:
    """One synthesis of the app, shared by the whole infra suite (synth takes seconds)."""

    config: RagIngestConfig
    template: Template
    template_dict: dict[str, Any]
    outdir: Path
    stack_name: str
    validation_error: str | None = None
    validation_report: dict[str, Any] = field(default_factory=dict)
    manifest: dict[str, Any] = field(default_factory=dict)
    region: str | None = None  # the region the stack was bound to; None: environment-agnostic

    @property
    def template_file(self) -> Path:
        return self.outdir / f"{self.stack_name}.template.json"

    @property
    def resources(self) -> dict[str, Resource]:
        return dict(self.template_dict["Resources"])

    def of_type(self, resource_type: str) -> dict[str, Resource]:
        return {k: v for k, v in self.resources.items() if v["Type"] == resource_type}

    def logical_id(self, construct_path: str) -> str:
        """The logical id of ``<Stack>/<construct_path>/Resource`` (or of the exact path given)."""
        wanted = {f"{self.stack_name}/{construct_path}/Resource", f"{self.stack_name}/{construct_path}"}
        found = [
            logical_id
            for logical_id, resource in self.resources.items()
            if resource.get("Metadata", {}).get("aws:cdk:path") in wanted
        ]
        assert len(found) == 1, f"expected one resource at {construct_path}, found {found}"
        return found[0]

    def resource(self, construct_path: str) -> Resource:
        return self.resources[self.logical_id(construct_path)]

    def role_statements(self, function_path: str) -> list[dict[str, Any]]:
        """Every statement of every identity policy attached to the role of a function (or of a
        state machine: its ``RoleArn``)."""
        properties = self.resource(function_path)["Properties"]
        role_id = (properties.get("Role") or properties["RoleArn"])["Fn::GetAtt"][0]
        statements: list[dict[str, Any]] = []
        for policy in self.of_type("AWS::IAM::Policy").values():
            if {"Ref": role_id} in policy["Properties"]["Roles"]:
                statements.extend(policy["Properties"]["PolicyDocument"]["Statement"])
        role = self.resources[role_id]["Properties"]
        for inline in role.get("Policies", []):
            statements.extend(inline["PolicyDocument"]["Statement"])
        return statements

    @property
    def domain_arn_prefix(self) -> str:
        """``arn:${AWS::Partition}:es:...:domain/<name>``, the name rendered as the template spells it."""
        name = render_token(self.resource("Search/Domain")["Properties"]["DomainName"])
        return f"arn:${{AWS::Partition}}:es:${{AWS::Region}}:${{AWS::AccountId}}:domain/{name}"

    def state_machine_definition(self, path: str = "Workflow/StateMachine") -> dict[str, Any]:
        """The ingestion workflow's definition (or another state machine's, by construct path)."""
        return render_definition(self.resource(path)["Properties"]["DefinitionString"])


def problem_annotations(manifest: dict[str, Any]) -> list[str]:
    """The synth's warning and error annotations (``aws:cdk:warning``/``error``), one line each."""
    return [
        f"{entry['type']} at {path}: {entry['data']}"
        for artifact in manifest["artifacts"].values()
        for path, entries in artifact.get("metadata", {}).items()
        for entry in entries
        if entry["type"] in ("aws:cdk:warning", "aws:cdk:error")
    ]


def as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def render_token(value: Any) -> str:
    """``{"Fn::GetAtt": [id, attr]}`` -> ``${id.attr}``, ``{"Ref": id}`` -> ``${id}``."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and "Fn::GetAtt" in value:
        logical_id, attribute = value["Fn::GetAtt"]
        return f"${{{logical_id}.{attribute}}}"
    if isinstance(value, dict) and "Ref" in value:
        return f"${{{value['Ref']}}}"
    if isinstance(value, dict) and "Fn::Join" in value:
        separator, parts = value["Fn::Join"]
        return str(separator).join(render_token(part) for part in parts)
    if isinstance(value, dict) and "Fn::Select" in value:
        position, values = value["Fn::Select"]
        return f"${{Select({position},{render_token(values)})}}"
    if isinstance(value, dict) and "Fn::Split" in value:
        separator, source = value["Fn::Split"]
        return f"Split({separator},{render_token(source)})"
    raise AssertionError(f"unexpected intrinsic in template: {value!r}")


def render_definition(definition_string: Any) -> dict[str, Any]:
    """The state machine definition as JSON, with each token rendered as ``${LogicalId.Attr}``."""
    return dict(json.loads(render_token(definition_string)))
