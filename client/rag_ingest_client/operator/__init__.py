"""The operator's tools behind ``rag-ingest``: redrive, replay, reap, reconcile, preflight and the
deployed smoke test's sign-in. Each runs the domain package's own code against a stack, so they
need the checkout's venv (``make install``: the domain package, boto3, ``infra`` beside ``cdk.json``).

The CLI imports this package only inside the function that runs one of its commands, so the rest
of the client works without the domain package.

May import: ``rag_ingest``, ``infra``, boto3 and the rest of ``rag_ingest_client``.
"""
