"""The local runtime: moto's server, a Lambda runner, SQS pollers and an API Gateway adapter.

``python -m local.runtime {serve,up,down,status}`` runs the synthesized CDK template on this
machine, offline (see docs/local-stack.md).
"""
