"""The web source: a crawler of one site's scope (host and path prefix) as a ``Connector``.

``WebConnector`` (crawler) lists pages breadth-first from seeds and sitemaps; ``WebSourceConfig``
(config) is the source's configuration; ``PageFetcher`` (fetching) is the port it reads through
(the policy-checked adapter: ``rag_ingest.adapters.web_fetch``). May import ``core`` and
``sources.connector``. docs/sources.md, "The web source".
"""
