"""What the local stack was given, kept across restarts and ``kill -9`` (docs/local-stack.md).

``durable_state`` is the store (snapshot, journal, restore); ``journal`` the crash-safe record file;
``s3``, ``dynamodb`` and ``sqs`` hook moto and read and write each service's entities;
``moto_entities`` dispatches to them; ``blobs`` keeps S3 bodies; ``base`` is what they share.
"""
