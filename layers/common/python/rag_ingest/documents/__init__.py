"""The document service behind the API (uploads, status, retry, download, listing), intake of S3
events into QUEUED documents and started workflows, and deletion of a document everywhere.

May import: ``core``.
"""
