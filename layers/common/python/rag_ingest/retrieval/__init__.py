"""Search: BM25, k-NN and their weighted reciprocal-rank fusion, always within the caller's tenant.

May import: ``core``, ``embeddings`` (the query's embedding).
"""
