"""The shape of the ports: the adapters and the in-memory fakes both implement the ports they stand
for, method by method. (That the domain imports no adapter, nor boto3 or opensearch-py, is
tests/unit/test_package_dependencies.py's.)"""

from __future__ import annotations

import inspect

import pytest
from rag_ingest.adapters.documents_table import DocumentsTable
from rag_ingest.adapters.embedding_cache_table import EmbeddingCacheTable
from rag_ingest.adapters.object_store import ObjectStore
from rag_ingest.adapters.object_versions import ObjectVersions
from rag_ingest.adapters.vector_store import VectorStore
from rag_ingest.adapters.workflow import WorkflowStarter
from rag_ingest.core import ports
from rag_ingest.retrieval import ports as retrieval_ports

from tests.support.fakes import (
    InMemoryChunkIndex,
    InMemoryDocuments,
    InMemoryEmbeddingCache,
    InMemoryObjects,
    InMemoryWorkflow,
)

pytestmark = pytest.mark.unit
# port -> (adapter, fake)
IMPLEMENTATIONS: dict[type, tuple[type, type]] = {
    ports.PipelineDocuments: (DocumentsTable, InMemoryDocuments),
    ports.IntakeDocuments: (DocumentsTable, InMemoryDocuments),
    ports.ApiDocuments: (DocumentsTable, InMemoryDocuments),
    ports.ReplayDocuments: (DocumentsTable, InMemoryDocuments),
    ports.ReaperDocuments: (DocumentsTable, InMemoryDocuments),
    ports.DeletionDocuments: (DocumentsTable, InMemoryDocuments),
    ports.StageObjects: (ObjectStore, InMemoryObjects),
    ports.ObjectEraser: (ObjectVersions, InMemoryObjects),
    ports.ChunkIndex: (VectorStore, InMemoryChunkIndex),
    ports.ChunkEraser: (VectorStore, InMemoryChunkIndex),
    retrieval_ports.PassageRetriever: (VectorStore, InMemoryChunkIndex),
    ports.ExecutionStarter: (WorkflowStarter, InMemoryWorkflow),
    ports.EmbeddingCache: (EmbeddingCacheTable, InMemoryEmbeddingCache),
}


def _port_methods(port: type) -> dict[str, inspect.Signature]:
    return {
        name: inspect.signature(member)
        for name, member in inspect.getmembers(port, inspect.isfunction)
        if not name.startswith("_")
    }


def _parameters(signature: inspect.Signature) -> list[tuple[str, inspect._ParameterKind]]:
    return [(p.name, p.kind) for p in signature.parameters.values()]


@pytest.mark.parametrize("port", list(IMPLEMENTATIONS), ids=lambda port: port.__name__)
def test_the_adapter_and_the_fake_implement_the_port(port: type) -> None:
    methods = _port_methods(port)
    assert methods, f"{port.__name__} declares no methods"
    for implementation in IMPLEMENTATIONS[port]:
        for name, expected in methods.items():
            assert hasattr(implementation, name), f"{implementation.__name__} lacks {port.__name__}.{name}"
            actual = inspect.signature(getattr(implementation, name))
            assert _parameters(actual) == _parameters(expected), f"{implementation.__name__}.{name}{actual}"
