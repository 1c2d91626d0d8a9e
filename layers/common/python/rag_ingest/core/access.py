"""Per-document access: who may read a document of their tenant, who may change it, who never may.

A document's ``access`` (:class:`DocumentAccess`) lists readers (``users``, ``groups``; both empty:
the whole tenant reads), ``editors`` and ``deny``. :func:`can_read`, :func:`can_edit` (metadata,
retry, delete) and :func:`can_manage_access` apply them; a deny overrides every allow, a tenant
admin's and the uploader's too. The same rules run in the chunk index's queries
(rag_ingest.adapters.opensearch_filters) and over records in code. :func:`groups_of` reads both
shapes of the groups claim. Rules: docs/api.md, "Per-document access". May import: ``core``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator

from rag_ingest.core.auth import tenant_of

GROUPS_CLAIM = "cognito:groups"
SUBJECT_CLAIM = "sub"
DEFAULT_TENANT_ADMIN_GROUP = "tenant-admins"
MAX_PRINCIPALS = 100  # users, and groups, per document
MAX_NAME_CHARS = 256  # a user's sub or a group's name
#: Groups read from one token at most (Cognito caps a user at 100 groups; more is not a real token).
MAX_TOKEN_GROUPS = 500


# What _names accepts, in the OpenAPI document too: clients and the fuzzer then send only names the API
# takes (a name with a non-space character and no control characters).
NAME_PATTERN = r"^[^\x00-\x1f\x7f]*[^\s\x00-\x1f\x7f][^\x00-\x1f\x7f]*$"
NAMES_SCHEMA: dict[str, Any] = {
    "maxItems": MAX_PRINCIPALS,
    "items": {"type": "string", "minLength": 1, "maxLength": MAX_NAME_CHARS, "pattern": NAME_PATTERN},
}


class AccessError(ValueError):
    """An ``access`` value that breaks a rule; ``path`` names the bad part (``access.users[2]``)."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__(f"{path}: {message}")
        self.path = path


def _names(value: Any, path: str) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise AccessError(path, "must be a list of strings")
    if len(value) > MAX_PRINCIPALS:
        raise AccessError(path, f"at most {MAX_PRINCIPALS} entries (got {len(value)})")
    names: list[str] = []
    for index, item in enumerate(value):
        if not isinstance(item, str) or not item.strip():
            raise AccessError(f"{path}[{index}]", "must be a non-empty string")
        if len(item) > MAX_NAME_CHARS:
            raise AccessError(f"{path}[{index}]", f"at most {MAX_NAME_CHARS} characters")
        if any(ord(char) < 0x20 or ord(char) == 0x7F for char in item):
            raise AccessError(f"{path}[{index}]", "must not contain control characters")
        if item not in names:  # a repeated name is the same grant
            names.append(item)
    return names


class PrincipalSet(BaseModel):
    """Token subjects and groups: a document's editors, or those denied it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    users: list[str] = Field(
        default_factory=list,
        description=f"Token subjects (sub); at most {MAX_PRINCIPALS}, each 1-{MAX_NAME_CHARS} characters",
        json_schema_extra=NAMES_SCHEMA,
    )
    groups: list[str] = Field(
        default_factory=list,
        description=f"Groups (cognito:groups); at most {MAX_PRINCIPALS}, each 1-{MAX_NAME_CHARS} characters",
        json_schema_extra=NAMES_SCHEMA,
    )

    @field_validator("users", "groups", mode="before")
    @classmethod
    def _checked(cls, value: Any, info: ValidationInfo) -> list[str]:
        return _names(value, str(info.field_name))

    @property
    def is_empty(self) -> bool:
        return not self.users and not self.groups

    def holds(self, principal: Principal) -> bool:
        """Whether ``principal`` is one of the users or a member of one of the groups."""
        if principal.subject and principal.subject in self.users:
            return True
        return not principal.groups.isdisjoint(self.groups)


NOBODY = PrincipalSet()


class DocumentAccess(BaseModel):
    """Who, besides the uploader and tenant admins, reads a document (both empty: the whole tenant),
    who also changes it (``editors``), and who may do neither whatever else says so (``deny``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    users: list[str] = Field(
        default_factory=list,
        json_schema_extra=NAMES_SCHEMA,
        description=(
            f"Token subjects (sub) who may read the document; at most {MAX_PRINCIPALS}, "
            f"each 1-{MAX_NAME_CHARS} characters"
        ),
    )
    groups: list[str] = Field(
        default_factory=list,
        json_schema_extra=NAMES_SCHEMA,
        description=(
            f"Groups (cognito:groups) whose members may read it; at most {MAX_PRINCIPALS}, "
            f"each 1-{MAX_NAME_CHARS} characters"
        ),
    )

    editors: PrincipalSet = Field(
        default=NOBODY,
        description=(
            "Who may also change the document's metadata, retry or delete it (an editor reads it too); the "
            "uploader and tenant admins always may"
        ),
    )
    deny: PrincipalSet = Field(
        default=NOBODY,
        description="Who may neither read nor change the document: overrides every allow, a tenant admin's too",
    )

    @field_validator("users", mode="before")
    @classmethod
    def _users(cls, value: Any) -> list[str]:
        return _names(value, "access.users")

    @field_validator("groups", mode="before")
    @classmethod
    def _groups(cls, value: Any) -> list[str]:
        return _names(value, "access.groups")

    @field_validator("editors", "deny", mode="before")
    @classmethod
    def _principal_sets(cls, value: Any, info: ValidationInfo) -> PrincipalSet:
        return _principal_set(value, f"access.{info.field_name}")

    @property
    def is_open(self) -> bool:
        """No reader is listed: the whole tenant reads it (``deny`` still applies)."""
        return not self.users and not self.groups

    @property
    def is_default(self) -> bool:
        """Nothing is listed at all: the access every document has unless told otherwise."""
        return self.is_open and self.editors.is_empty and self.deny.is_empty

    def denies(self, principal: Principal) -> bool:
        return self.deny.holds(principal)


OPEN_ACCESS = DocumentAccess()


def _principal_set(raw: Any, path: str) -> PrincipalSet:
    if raw is None:
        return NOBODY
    if isinstance(raw, PrincipalSet):
        return raw
    if not isinstance(raw, Mapping):
        raise AccessError(path, "must be an object with users and groups")
    unknown = sorted(set(raw) - {"users", "groups"})
    if unknown:
        raise AccessError(f"{path}.{unknown[0]}", "unknown key (expected users and groups)")
    return PrincipalSet(
        users=_names(raw.get("users"), f"{path}.users"), groups=_names(raw.get("groups"), f"{path}.groups")
    )


_ACCESS_KEYS = ("users", "groups", "editors", "deny")


def parse_access(raw: Any, path: str = "access") -> DocumentAccess:
    """``raw`` (a request's ``access`` object) checked, or :class:`AccessError` naming the bad part."""
    if raw is None:
        return OPEN_ACCESS
    if isinstance(raw, DocumentAccess):
        return raw
    if not isinstance(raw, Mapping):
        raise AccessError(path, "must be an object with users, groups, editors and deny")
    unknown = sorted(set(raw) - set(_ACCESS_KEYS))
    if unknown:
        raise AccessError(f"{path}.{unknown[0]}", "unknown key (expected users, groups, editors and deny)")
    return DocumentAccess(
        users=_names(raw.get("users"), f"{path}.users"),
        groups=_names(raw.get("groups"), f"{path}.groups"),
        editors=_principal_set(raw.get("editors"), f"{path}.editors"),
        deny=_principal_set(raw.get("deny"), f"{path}.deny"),
    )


@dataclass(frozen=True)
class Principal:
    """The caller, from verified claims: tenant, subject, groups, and whether they administer the tenant."""

    tenant_id: str
    subject: str
    groups: frozenset[str] = frozenset()
    is_tenant_admin: bool = False

    @classmethod
    def of(cls, claims: Mapping[str, Any], tenant_admin_group: str = DEFAULT_TENANT_ADMIN_GROUP) -> Principal:
        """The principal of verified claims (``InvalidTenantError`` without a valid tenant)."""
        tenant = tenant_of(claims)
        groups = groups_of(claims.get(GROUPS_CLAIM))
        return cls(
            tenant_id=tenant,
            subject=str(claims.get(SUBJECT_CLAIM) or ""),
            groups=groups,
            is_tenant_admin=bool(tenant_admin_group) and tenant_admin_group in groups,
        )


def groups_of(value: Any) -> frozenset[str]:
    """A groups claim as a set: a JSON array (the token), ``"[a b]"`` (API Gateway's HTTP API JWT
    authorizer: docs/api.md, "Groups from the token"), a JSON array in a string, or one group name;
    anything else is none."""
    items: Iterable[Any]
    if value is None:
        return frozenset()
    if isinstance(value, list | tuple):
        items = value
    elif isinstance(value, str):
        text = value.strip()
        if not text:
            return frozenset()
        if text.startswith("[") and text.endswith("]"):
            try:
                parsed = json.loads(text)
            except ValueError:
                parsed = None
            # "[a b]" is not JSON (unless it is "[]" or a one-name array like ["a"]): split it.
            items = parsed if isinstance(parsed, list) else text[1:-1].split()
        else:
            items = text.split(",") if "," in text else [text]
    else:
        return frozenset()
    names = [item.strip() for item in list(items)[:MAX_TOKEN_GROUPS] if isinstance(item, str) and item.strip()]
    return frozenset(name for name in names if len(name) <= MAX_NAME_CHARS)


class AccessRecord(Protocol):
    """What the rules read of a document (a ``DocumentRecord`` has it)."""

    @property
    def tenant_id(self) -> str: ...

    @property
    def uploaded_by(self) -> str | None: ...

    @property
    def access(self) -> DocumentAccess: ...


def _is_uploader(principal: Principal, record: AccessRecord) -> bool:
    return bool(principal.subject) and principal.subject == record.uploaded_by


def can_read(principal: Principal, record: AccessRecord) -> bool:
    """Whether ``principal`` may see ``record`` at all: not denied, and a tenant admin, the uploader,
    an editor, a listed reader, or anyone of the tenant when no reader is listed."""
    access = record.access
    if principal.tenant_id != record.tenant_id or access.denies(principal):
        return False
    if principal.is_tenant_admin or access.is_open or _is_uploader(principal, record):
        return True
    if principal.subject and principal.subject in access.users:
        return True
    return not principal.groups.isdisjoint(access.groups) or access.editors.holds(principal)


def can_edit(principal: Principal, record: AccessRecord) -> bool:
    """Whether ``principal`` may change ``record``'s metadata, retry or delete it: not denied, and a
    tenant admin, the uploader or an editor (a reader, listed or not, may not)."""
    access = record.access
    if principal.tenant_id != record.tenant_id or access.denies(principal):
        return False
    return principal.is_tenant_admin or _is_uploader(principal, record) or access.editors.holds(principal)


def can_manage_access(principal: Principal, record: AccessRecord) -> bool:
    """Whether ``principal`` may set or change ``record``'s access: its uploader or a tenant admin,
    not denied (an editor may not: it would grant itself more)."""
    if principal.tenant_id != record.tenant_id or record.access.denies(principal):
        return False
    return principal.is_tenant_admin or _is_uploader(principal, record)
