"""The vector store (an OpenSearch Service domain, or an existing endpoint) and the embedding model."""

from __future__ import annotations

from typing import cast

from aws_cdk import ArnFormat, CfnOutput, Fn, Stack
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_logs as logs
from aws_cdk import aws_opensearchservice as opensearch
from constructs import Construct

from infra.config import RagIngestConfig
from infra.constructs.function import new_log_group, removal_policy
from infra.nag import acknowledge

HTTP_ACTIONS = ("es:ESHttpGet", "es:ESHttpPut", "es:ESHttpPost", "es:ESHttpDelete", "es:ESHttpHead")
# Finding one document's chunks and deleting them by id: exists (HEAD), refresh and search
# (GET/POST), bulk delete (POST /_bulk: opensearch-py sends bulk requests to the domain root).
DOCUMENT_DELETE_ACTIONS = ("es:ESHttpHead", "es:ESHttpGet", "es:ESHttpPost")


def _engine_version() -> opensearch.EngineVersion:
    # 2.19 matches the local server; fall back to the newest 2.x this aws-cdk-lib knows.
    if hasattr(opensearch.EngineVersion, "OPENSEARCH_2_19"):
        return opensearch.EngineVersion.OPENSEARCH_2_19
    names = [name for name in dir(opensearch.EngineVersion) if name.startswith("OPENSEARCH_2_")]
    latest = max(names, key=lambda name: int(name.rsplit("_", 1)[1]))
    return cast(opensearch.EngineVersion, getattr(opensearch.EngineVersion, latest))


class Search(Construct):
    def __init__(self, scope: Construct, construct_id: str, *, config: RagIngestConfig) -> None:
        super().__init__(scope, construct_id)
        self._config = config
        self.index_name = config.opensearch.index
        self.embedding_model_arn = Stack.of(self).format_arn(
            service="bedrock",
            account="",
            resource="foundation-model",
            resource_name=config.embedding.model_id,
            arn_format=ArnFormat.SLASH_RESOURCE_NAME,
        )
        self._principals: list[iam.IRole] = []
        self._document_deleters: list[iam.IRole] = []
        self.domain: opensearch.Domain | None = None

        if config.opensearch.endpoint:
            # An existing cluster: its own access policy applies; IAM grants need its domain ARN,
            # which an endpoint URL does not reveal (custom endpoints), so none are added here.
            self.endpoint_url = config.opensearch.endpoint
            self._domain_arn: str | None = None
        else:
            self.domain = self._create_domain(config)
            self.endpoint_url = Fn.join("", ["https://", self.domain.domain_endpoint])
            self._domain_arn = self.domain.domain_arn

        CfnOutput(self, "OpenSearchEndpoint", value=self.endpoint_url).override_logical_id("OpenSearchEndpoint")

    def _create_domain(self, config: RagIngestConfig) -> opensearch.Domain:
        count = config.opensearch.instance_count
        zone_count = 3 if count % 3 == 0 else 2 if count % 2 == 0 else 0
        policy = removal_policy(config)
        log_groups = [new_log_group(self, name, config) for name in ("SlowSearchLogs", "SlowIndexLogs", "AppLogs")]
        domain = opensearch.Domain(
            self,
            "Domain",
            version=_engine_version(),
            # Named, so the access policy can name the domain without referring to itself.
            domain_name=config.search_domain_name,
            capacity=opensearch.CapacityConfig(
                data_node_instance_type=config.opensearch.instance_type,
                data_nodes=count,
                multi_az_with_standby_enabled=False,
            ),
            zone_awareness=opensearch.ZoneAwarenessConfig(
                enabled=zone_count > 0, availability_zone_count=zone_count or None
            ),
            ebs=opensearch.EbsOptions(
                volume_size=config.opensearch.volume_size_gb, volume_type=ec2.EbsDeviceVolumeType.GP3
            ),
            encryption_at_rest=opensearch.EncryptionAtRestOptions(enabled=True),
            node_to_node_encryption=True,
            enforce_https=True,
            tls_security_policy=opensearch.TLSSecurityPolicy.TLS_1_2,
            logging=opensearch.LoggingOptions(
                slow_search_log_enabled=True,
                slow_search_log_group=log_groups[0],
                slow_index_log_enabled=True,
                slow_index_log_group=log_groups[1],
                app_log_enabled=True,
                app_log_group=log_groups[2],
            ),
            # The L2 would write the logs resource policy with a custom resource (a Lambda with
            # logs:* on '*'); the plain AWS::Logs::ResourcePolicy below does the same declaratively.
            suppress_logs_resource_policy=True,
            removal_policy=policy,
        )
        logs_policy = logs.ResourcePolicy(
            self,
            "LogsResourcePolicy",
            policy_statements=[
                iam.PolicyStatement(
                    principals=[iam.ServicePrincipal("es.amazonaws.com")],
                    actions=["logs:PutLogEvents", "logs:CreateLogStream"],
                    resources=[group.log_group_arn for group in log_groups],
                    conditions={"StringEquals": {"aws:SourceAccount": Stack.of(self).account}},
                )
            ],
        )
        # OpenSearch checks at creation that it may write to its log groups.
        domain.node.add_dependency(logs_policy)
        # The L2's access-policy API deploys a custom resource; the L1 property needs none. It is
        # (re)written by each grant_http, since the principals are the roles granted later.
        self._domain_resources = Stack.of(self).format_arn(
            service="es", resource="domain", resource_name=f"{config.search_domain_name}/*"
        )

        acknowledge(
            domain,
            "AwsSolutions-OS1",
            "Public endpoint by design (Lambdas run outside a VPC to avoid NAT cost); every request must be "
            "SigV4-signed by a role named in the domain's resource policy, over TLS 1.2.",
        )
        acknowledge(
            domain,
            "AwsSolutions-OS3",
            "Access is restricted by IAM principal in the resource policy, not by source IP: Lambda has no fixed IPs.",
        )
        acknowledge(
            domain,
            "AwsSolutions-OS4",
            "Dedicated master nodes are sized per environment; the default is a small single-purpose "
            "vector index that a data node serves. Raise opensearch.instanceCount for production.",
        )
        if zone_count == 0:
            acknowledge(
                domain,
                "AwsSolutions-OS7",
                "Zone awareness needs an even (or multiple of 3) opensearch.instanceCount; the default single "
                "node is a cost choice, and the index can be rebuilt from S3 artifacts.",
            )
        return domain

    def _write_access_policy(self) -> None:
        assert self.domain is not None
        cfn = cast(opensearch.CfnDomain, self.domain.node.default_child)
        cfn.access_policies = {
            "Version": "2012-10-17",
            "Statement": [
                {
                    "Effect": "Allow",
                    "Principal": {"AWS": [role.role_arn for role in self._principals]},
                    "Action": list(HTTP_ACTIONS),
                    "Resource": self._domain_resources,
                },
                *(
                    [
                        {
                            "Effect": "Allow",
                            "Principal": {"AWS": [role.role_arn for role in self._document_deleters]},
                            "Action": list(DOCUMENT_DELETE_ACTIONS),
                            "Resource": self._document_delete_resources(),
                        }
                    ]
                    if self._document_deleters
                    else []
                ),
            ],
        }

    def _document_delete_resources(self) -> list[str]:
        name = self._config.search_domain_name
        return [
            Stack.of(self).format_arn(service="es", resource="domain", resource_name=f"{name}/{path}")
            for path in (self.index_name, f"{self.index_name}/*", "_bulk")
        ]

    def grant_http(self, role: iam.IRole) -> None:
        """Let ``role`` call the OpenSearch HTTP API: an IAM grant plus a seat in the domain policy."""
        if self._domain_arn is None:
            return
        role.add_to_principal_policy(
            iam.PolicyStatement(actions=list(HTTP_ACTIONS), resources=[self._domain_arn, f"{self._domain_arn}/*"])
        )
        self._principals.append(role)
        self._write_access_policy()

    def grant_document_delete(self, role: iam.IRole) -> None:
        """Let ``role`` find and delete chunks in the index, and nothing else (DELETE /documents/{id}).

        Its own statement in the domain policy too: within an account the resource policy alone
        grants access, so a seat in grant_http's statement would give every HTTP action.
        """
        if self._domain_arn is None:
            return
        role.add_to_principal_policy(
            iam.PolicyStatement(actions=list(DOCUMENT_DELETE_ACTIONS), resources=self._document_delete_resources())
        )
        self._document_deleters.append(role)
        self._write_access_policy()

    def grant_embedding(self, role: iam.IRole) -> None:
        """Let ``role`` invoke the configured embedding model, and no other."""
        role.add_to_principal_policy(
            iam.PolicyStatement(actions=["bedrock:InvokeModel"], resources=[self.embedding_model_arn])
        )

    @property
    def environment(self) -> dict[str, str]:
        """What the stages need: the query environment plus how to batch embeddings."""
        embedding = self._config.embedding
        return {
            **self.query_environment,
            "EMBED_BATCH_SIZE": str(embedding.batch_size),
            "EMBED_TASK_CHUNKS": str(embedding.task_chunks),
        }

    @property
    def index_parameters(self) -> dict[str, str]:
        """The k-NN index parameters (rag_ingest.config.IndexParamsEnv), for every function that
        creates or queries the index."""
        opensearch = self._config.opensearch
        return {
            "OPENSEARCH_SPACE_TYPE": opensearch.space_type,
            "OPENSEARCH_HNSW_M": str(opensearch.hnsw_m),
            "OPENSEARCH_EF_CONSTRUCTION": str(opensearch.ef_construction),
            "OPENSEARCH_EF_SEARCH": str(opensearch.ef_search),
        }

    @property
    def query_environment(self) -> dict[str, str]:
        """What POST /search needs (rag_ingest.config.SearchEnv): the index and the query embedder."""
        embedding = self._config.embedding
        return {
            "OPENSEARCH_ENDPOINT": self.endpoint_url,
            "OPENSEARCH_INDEX": self.index_name,
            "EMBEDDING_PROVIDER": embedding.provider,
            "EMBEDDING_MODEL_ID": embedding.model_id,
            "EMBEDDING_DIMENSION": str(embedding.dimension),
            **self.index_parameters,
        }
