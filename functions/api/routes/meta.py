"""The route about the API itself: ``GET /openapi.json``, served without a token."""

from __future__ import annotations

import json
from functools import cache
from typing import Any

from aws_lambda_powertools.event_handler import Response, content_types
from aws_lambda_powertools.event_handler.api_gateway import ApiGatewayResolver, Router

from .common import responses
from .links import add_links

router = Router()


@router.get(
    "/openapi.json",
    summary="This OpenAPI document",
    description="Needs no token.",
    responses=responses(200, authorized=False),
    tags=["meta"],
    operation_id="getOpenApiDocument",
)
def openapi_document() -> Response[dict[str, Any]]:
    return Response(200, content_types.APPLICATION_JSON, openapi_schema())


@cache
def openapi_schema() -> dict[str, Any]:
    """The OpenAPI 3 document of every route of the resolver this router is in (also checked in as
    docs/openapi.json), with the title, version and security the resolver was configured with.

    Powertools documents its validation failures as 422; this API answers them as 400 with the
    one error body, so the 422 entries and their schemas are taken out, and the document itself
    is marked as needing no token. The responses carry their OpenAPI links (``links.LINKS``).
    """
    resolver = router.api_resolver
    if not isinstance(resolver, ApiGatewayResolver):
        raise RuntimeError("the meta router is not included in a resolver")
    document: dict[str, Any] = json.loads(resolver.get_openapi_json_schema())
    for path, item in document["paths"].items():
        for operation in item.values():
            operation["responses"].pop("422", None)
            # A 204 has no body (Powertools documents the None return as JSON: a make fuzz finding).
            operation["responses"].get("204", {}).pop("content", None)
            if path == "/openapi.json":
                operation["security"] = []
    schemas = document["components"]["schemas"]
    for name in ("HTTPValidationError", "ValidationError", "ResponseValidationError"):
        if f'"#/components/schemas/{name}"' not in json.dumps({**document, "components": {}}):
            schemas.pop(name, None)
    add_links(document)
    return document
