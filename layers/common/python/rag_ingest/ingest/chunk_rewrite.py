"""A READY document's chunks rewritten with its record's current fields (a PATCH, a late sidecar).

The chunk index keeps ``embedding`` out of ``_source``, so a partial update would lose the vector:
the current version's chunks are written again, whole, from the Index stage's own inputs (the
chunks artifact and the Embed checkpoints, kept while the version is current), stamped with the
same :class:`~rag_ingest.core.record.DocumentStamp` as Index. Nothing is parsed or embedded again.
Each rewrite reads the record again and writes again while a PATCH moved its revision on (at most
``MAX_REWRITES``); one that finds a newer version or a delete took over withdraws what it wrote.
Races and storage: docs/api.md, "Changing a document".
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from rag_ingest.core.errors import IndexArtifactsMissingError
from rag_ingest.core.logs import logger
from rag_ingest.core.parsed import Chunk
from rag_ingest.core.ports import ArtifactReader, ChunkIndex, DocumentReader
from rag_ingest.core.record import DocumentRecord, DocumentStamp, DocumentStatus
from rag_ingest.core.s3_keys import CHUNKS_ARTIFACT, EMBEDDINGS_FOLDER, artifact_key, embedding_batch_key

#: Rewrites per refresh at most: each further one follows a PATCH that landed during the last.
MAX_REWRITES = 3


class ChunkRewriter:
    """``rag_ingest.core.ports.ChunkFieldsRefresher`` over the artifacts bucket and the chunk index."""

    def __init__(
        self,
        *,
        documents: DocumentReader,
        objects: ArtifactReader,
        vector_store: Callable[[], ChunkIndex],
        bucket: str,
        artifacts_prefix: str,
    ) -> None:
        self._documents = documents
        self._objects = objects
        self._vector_store = vector_store
        self._bucket = bucket
        self._prefix = artifacts_prefix

    def check(self, record: DocumentRecord) -> None:
        """Raise ``IndexArtifactsMissingError`` unless ``record``'s version can be rewritten."""
        self._batches(record)

    def refresh(self, document_id: str) -> int:
        written = 0
        for _ in range(MAX_REWRITES):
            record = self._documents.get(document_id)
            if record is None or record.status is not DocumentStatus.READY or not record.version:
                return written  # the workflow (if any) writes the record's fields itself
            written = self._write(record)
            after = self._documents.get(document_id)
            if after is None or after.version != record.version or after.status is not DocumentStatus.READY:
                # A newer version or a delete took over while this wrote: never leave chunks behind it.
                self._vector_store().delete_version(document_id, record.version)
                logger.warning("chunk rewrite superseded: withdrawn", extra={"document_id": document_id})
                return 0
            if after.revision == record.revision:
                return written
        return written

    def _write(self, record: DocumentRecord) -> int:
        assert record.version is not None
        chunks_key, batch_keys = self._batches(record)
        chunks = [Chunk.model_validate(item) for item in self._objects.get_json(self._bucket, chunks_key)]
        return self._vector_store().write_chunks(
            DocumentStamp.of(record), chunks, self._vectors(batch_keys, len(chunks))
        )

    def _batches(self, record: DocumentRecord) -> tuple[str, list[str]]:
        """The chunks artifact's key and every Embed checkpoint's, all present (else the error).
        The batch size is read off the first checkpoint (it holds min(batch size, chunks) vectors),
        not taken from the configuration: the checkpoints were cut with the size of their day."""
        if not record.version or not record.chunk_count:
            raise IndexArtifactsMissingError(f"document {record.document_id} has no indexed chunks")
        chunks_key = artifact_key(record.document_id, record.version, CHUNKS_ARTIFACT, self._prefix)
        prefix = artifact_key(record.document_id, record.version, EMBEDDINGS_FOLDER, self._prefix)
        first = embedding_batch_key(prefix, 0)
        if not (self._objects.exists(self._bucket, chunks_key) and self._objects.exists(self._bucket, first)):
            raise IndexArtifactsMissingError(f"document {record.document_id}: its chunks or vectors are gone")
        batch = self._objects.get_json(self._bucket, first)
        if not isinstance(batch, list) or not batch:
            raise IndexArtifactsMissingError(f"document {record.document_id}: its first vectors batch is unreadable")
        count = -(-record.chunk_count // len(batch))
        keys = [embedding_batch_key(prefix, number) for number in range(count)]
        if not all(self._objects.exists(self._bucket, key) for key in keys[1:]):
            raise IndexArtifactsMissingError(f"document {record.document_id}: some of its vectors are gone")
        return chunks_key, keys

    def _vectors(self, keys: list[str], chunk_count: int) -> Iterator[list[float]]:
        """The checkpoints' vectors in chunk order, one batch in memory at a time."""
        seen = 0
        for key in keys:
            batch = self._objects.get_json(self._bucket, key)
            if not isinstance(batch, list):
                raise IndexArtifactsMissingError(f"{key} holds no vectors")
            seen += len(batch)
            yield from batch
        if seen != chunk_count:
            raise IndexArtifactsMissingError(f"the checkpoints hold {seen} vectors for {chunk_count} chunks")
