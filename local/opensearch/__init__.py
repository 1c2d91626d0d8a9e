"""A real single-node OpenSearch with the k-NN plugin for local development and integration tests.

Everything is fetched from Maven Central with ``mvn`` and installed under ``.local/opensearch/``.
Run ``python -m local.opensearch --help`` for the commands; see ``docs/opensearch-local.md``.
"""

from local.opensearch.settings import DEFAULT_URL, OPENSEARCH_VERSION, server_url

__all__ = ["DEFAULT_URL", "OPENSEARCH_VERSION", "server_url"]
