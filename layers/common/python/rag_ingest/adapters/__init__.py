"""Adapters: the only modules that talk to boto3 and opensearch-py."""
