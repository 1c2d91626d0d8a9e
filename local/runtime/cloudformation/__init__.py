"""The synthesized CloudFormation template, read and provisioned into moto.

``template`` resolves the intrinsics CDK emits; ``provision`` creates each resource through its
type's provisioner (``iam``, ``s3``, ``sqs``, ``dynamodb``, ``events``, ``lambda_``,
``stepfunctions``), reads the HTTP API's routes (``apigateway``) and skips the rest (``skipped``).
docs/local-stack.md says why moto's CloudFormation is not used.
"""
