"""The source kinds' configurations: each kind's model checks its config at creation and fills its
defaults, so a bad config is a 400 then, never a failed sync later. A web source whose host the URL
policy refuses (a private or link-local address) is refused the same way. May import core and this
package only."""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from rag_ingest.core.errors import validation_problems
from rag_ingest.core.url_policy import UrlPolicy
from rag_ingest.sources.model import SourceKind
from rag_ingest.sources.s3 import S3SourceConfig
from rag_ingest.sources.web.config import WebSourceConfig


def config_validator(policy: UrlPolicy) -> Any:
    """``validate_config(kind, config)`` under ``policy`` (the one the crawler will run under)."""

    def validate_config(kind: SourceKind, config: dict[str, Any]) -> dict[str, Any]:
        """The config as stored (defaults filled); ``ValueError`` naming what is wrong."""
        if kind == "custom":
            if config:
                raise ValueError("a custom source takes no config: its items are pushed")
            return {}
        try:
            if kind == "s3":
                return S3SourceConfig.model_validate(config).model_dump(mode="json")
            web = WebSourceConfig.model_validate(config)
        except ValidationError as exc:
            raise ValueError(validation_problems(exc, "config")) from None
        refusal = web.policy_refusal(policy)
        if refusal is not None:
            code, message = refusal
            raise ValueError(f"{code}: {message}")
        return web.model_dump(mode="json", exclude_none=True)

    return validate_config
