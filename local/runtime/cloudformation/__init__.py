"""The synthesized CloudFormation template, read and provisioned into moto.

``template`` resolves the intrinsics CDK emits; ``provision`` creates each resource with the
template's own properties (docs/local-stack.md says why moto's CloudFormation is not used).
"""
