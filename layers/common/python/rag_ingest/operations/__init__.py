"""What an operator runs: DLQ redrive, replay of FAILED documents, and the reaper of stuck ones.

May import: ``core``, ``documents`` (redrive re-runs intake).
"""
