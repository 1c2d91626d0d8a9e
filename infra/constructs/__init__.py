"""The constructs of the rag-ingest stack; each owns its resources, permissions, alarms and outputs."""
