"""Lambda without Docker: warm worker processes per function, moto's invoke seam, SQS pollers.

``runner`` is Invoke; ``pool`` and ``worker`` are execution environments; ``moto_seam`` routes
moto's invocations here; ``sqs_poller`` is an event source mapping; ``faults`` injects failures.
"""
