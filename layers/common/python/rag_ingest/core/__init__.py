"""The records and contracts every other part shares: models, errors and codes, ids, the S3 key
layout, the ports (Protocols the domain depends on), logging, tracing, telemetry, the clock, token
verification, the tokenizer and the text a chunk is indexed as.

May import: nothing else of rag_ingest (only ``core`` itself).
"""
