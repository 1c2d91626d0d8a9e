"""The OpenAPI ``links`` of the API's responses: how an id one operation returns feeds the next
(create a document, then read, change, retry, download and delete it; likewise sources, their
items and syncs, and webhook endpoints). Clients and schemathesis' stateful phase follow them
(docs/fuzzing.md). Data only: ``meta.openapi_schema`` adds them to the document."""

from __future__ import annotations

from typing import Any

# (operation, status) -> {link name: (target operation, {parameter: runtime expression})}
LINKS: dict[tuple[str, str], dict[str, tuple[str, dict[str, str]]]] = {
    ("createDocument", "201"): {
        name: (target, {"document_id": "$response.body#/document_id"})
        for name, target in (
            ("GetDocument", "getDocument"),
            ("UpdateDocument", "updateDocument"),
            ("RetryDocument", "retryDocument"),
            ("DownloadDocument", "downloadDocument"),
            ("GetDocumentContent", "getDocumentContent"),
            ("DeleteDocument", "deleteDocument"),
        )
    },
    ("getDocument", "200"): {
        # A conditional PATCH with the revision just read (GET's ETag is PATCH's If-Match).
        "UpdateDocument": (
            "updateDocument",
            {"document_id": "$response.body#/document_id", "header.if-match": "$response.header.ETag"},
        ),
        "DeleteDocument": ("deleteDocument", {"document_id": "$response.body#/document_id"}),
    },
    ("updateDocument", "200"): {
        "GetDocument": ("getDocument", {"document_id": "$response.body#/document_id"}),
        "DeleteDocument": ("deleteDocument", {"document_id": "$response.body#/document_id"}),
    },
    ("createSource", "201"): {
        name: (target, {"source_id": "$response.body#/id"})
        for name, target in (
            ("GetSource", "getSource"),
            ("UpdateSource", "updateSource"),
            ("StartSourceSync", "startSourceSync"),
            ("ListSourceSyncs", "listSourceSyncs"),
            ("PutSourceItem", "putSourceItem"),
            ("DeleteSource", "deleteSource"),
        )
    },
    ("updateSource", "200"): {
        "GetSource": ("getSource", {"source_id": "$response.body#/id"}),
        "DeleteSource": ("deleteSource", {"source_id": "$response.body#/id"}),
    },
    ("putSourceItem", "200"): {
        "GetItemDocument": ("getDocument", {"document_id": "$response.body#/document_id"}),
        "DeleteSourceItem": (
            "deleteSourceItem",
            {"source_id": "$request.path.source_id", "external_id": "$response.body#/external_id"},
        ),
    },
    ("startSourceSync", "202"): {
        "GetSourceSync": ("getSourceSync", {"source_id": "$response.body#/source_id", "sync_id": "$response.body#/id"}),
    },
    ("createWebhook", "201"): {
        name: (target, {"endpoint_id": "$response.body#/id"})
        for name, target in (
            ("ListWebhookDeliveries", "listWebhookDeliveries"),
            ("RotateWebhookSecret", "rotateWebhookSecret"),
            ("DeleteWebhook", "deleteWebhook"),
        )
    },
}


def add_links(document: dict[str, Any]) -> None:
    """Adds ``LINKS`` to ``document``'s responses; a link naming an operation or status the document
    lacks raises, so the table cannot drift from the routes."""
    operations = {
        operation["operationId"]: operation for item in document["paths"].values() for operation in item.values()
    }
    for (source, status), links in LINKS.items():
        responses = operations[source]["responses"]
        if status not in responses:
            raise KeyError(f"{source} has no {status} response for its links")
        for target, _ in links.values():
            if target not in operations:
                raise KeyError(f"a link of {source} names an unknown operation {target}")
        responses[status]["links"] = {
            name: {"operationId": target, "parameters": dict(parameters)}
            for name, (target, parameters) in sorted(links.items())
        }
