"""The vector store (an OpenSearch Service domain, or an existing endpoint) and the embedding model."""

from __future__ import annotations

from typing import cast

from aws_cdk import ArnFormat, CfnOutput, Duration, Fn, Stack
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as cw_actions
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_logs as logs
from aws_cdk import aws_opensearchservice as opensearch
from aws_cdk import aws_sns as sns
from constructs import Construct
from rag_ingest.core.settings import INFERENCE_PROFILE_PREFIXES

from infra.config import RagIngestConfig
from infra.constructs.function import new_log_group, removal_policy
from infra.nag import acknowledge
from infra.naming import unique_name
from infra.permissions import OPENSEARCH_ACCESS, IndexAccess

# Replicas follow the node count: a copy of each shard on another node, up to one per extra zone.
# One node with a replica would stay yellow forever (a replica never sits beside its primary).
MAX_REPLICAS = 2
# AWS's recommended alarm settings for OpenSearch Service domains.
FREE_STORAGE_FRACTION = 0.25
JVM_MEMORY_PRESSURE_PERCENT = 95


def index_replicas(instance_count: int) -> int:
    return min(instance_count - 1, MAX_REPLICAS)


def _engine_version() -> opensearch.EngineVersion:
    # 2.19 matches the local server; fall back to the newest 2.x this aws-cdk-lib knows.
    if hasattr(opensearch.EngineVersion, "OPENSEARCH_2_19"):
        return opensearch.EngineVersion.OPENSEARCH_2_19
    names = [name for name in dir(opensearch.EngineVersion) if name.startswith("OPENSEARCH_2_")]
    latest = max(names, key=lambda name: int(name.rsplit("_", 1)[1]))
    return cast(opensearch.EngineVersion, getattr(opensearch.EngineVersion, latest))


def answer_model_arns(stack: Stack, model_id: str) -> list[str]:
    """What Converse with ``model_id`` invokes: its foundation model in this Region; for a cross-Region
    inference profile (``eu.amazon.nova-lite-v1:0``), the profile and its model in every Region it may
    route to (https://docs.aws.amazon.com/bedrock/latest/userguide/inference-profiles-prereq.html)."""
    prefix, _, base = model_id.partition(".")
    if prefix not in INFERENCE_PROFILE_PREFIXES:
        return [foundation_model_arn(stack, model_id)]
    profile = stack.format_arn(
        service="bedrock",
        resource="inference-profile",
        resource_name=model_id,
        arn_format=ArnFormat.SLASH_RESOURCE_NAME,
    )
    return [profile, f"arn:{stack.partition}:bedrock:*::foundation-model/{base}"]


def foundation_model_arn(stack: Stack, model_id: str) -> str:
    return stack.format_arn(
        service="bedrock",
        account="",
        resource="foundation-model",
        resource_name=model_id,
        arn_format=ArnFormat.SLASH_RESOURCE_NAME,
    )


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
        # Rerank invokes the reranker model: bedrock:InvokeModel on its foundation-model ARN.
        self.rerank_model_arn = Stack.of(self).format_arn(
            service="bedrock",
            account="",
            resource="foundation-model",
            resource_name=config.search.rerank.model_id,
            arn_format=ArnFormat.SLASH_RESOURCE_NAME,
        )
        self.answer_model_arns = answer_model_arns(Stack.of(self), config.search.answer.model_id)
        # Role -> what it may do in the index (infra/permissions.py OPENSEARCH_ACCESS).
        self._grants: list[tuple[iam.IRole, IndexAccess]] = []
        self.domain: opensearch.Domain | None = None
        self.alarms: dict[str, cloudwatch.Alarm] = {}
        # Configured, or unique to this creation of the stack: a retained domain must not block the
        # next deploy with "already exists" (infra/naming.py).
        self.domain_name: str = config.opensearch.domain_name or unique_name(config.search_domain_prefix)

        if config.opensearch.endpoint:
            # An existing cluster: its own access policy applies; IAM grants need its domain ARN,
            # which an endpoint URL does not reveal (custom endpoints), so none are added here.
            self.endpoint_url = config.opensearch.endpoint
        else:
            self.domain = self._create_domain(config)
            self.endpoint_url = Fn.join("", ["https://", self.domain.domain_endpoint])

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
            domain_name=self.domain_name,
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
            # Index-scoped permissions hold only if a request body cannot name another index
            # (_bulk, _mget, _msearch): the adapter names the index in the path, never in the body.
            advanced_options={"rest.action.multi.allow_explicit_index": "false"},
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
        # (re)written by each grant, since the principals are the roles granted later.

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
            "No dedicated master nodes: the stack deploys data nodes only (opensearch.instanceCount), a cost "
            "choice for a single-index vector store; add dedicated masters for large production clusters.",
        )
        if zone_count == 0:
            acknowledge(
                domain,
                "AwsSolutions-OS7",
                "Zone awareness needs an even (or multiple of 3) opensearch.instanceCount; the default single "
                "node is a cost choice, and the index can be rebuilt from S3 artifacts.",
            )
        return domain

    def _index_arns(self, domain: str, paths: tuple[str, ...]) -> list[str]:
        """``domain/<name>/<index>`` (``""``) and ``domain/<name>/<index>/<path>`` ARNs."""
        return [
            Stack.of(self).format_arn(
                service="es",
                resource="domain",
                resource_name=f"{domain}/{self.index_name}" + (f"/{path}" if path else ""),
            )
            for path in paths
        ]

    def _statements(self, access: IndexAccess, domain: str) -> list[tuple[list[str], list[str]]]:
        """(actions, resources) pairs: one per distinct set of paths."""
        by_paths: dict[tuple[str, ...], list[str]] = {}
        for action, paths in sorted(access.items()):
            by_paths.setdefault(tuple(paths), []).append(action)
        return [(actions, self._index_arns(domain, paths)) for paths, actions in by_paths.items()]

    def _write_access_policy(self) -> None:
        assert self.domain is not None
        cfn = cast(opensearch.CfnDomain, self.domain.node.default_child)
        # Within an account the resource policy alone grants access, so it is as narrow as the
        # roles' own policies: each role its own statements, on the index paths it uses.
        cfn.access_policies = {
            "Version": "2012-10-17",
            "Statement": [
                {
                    "Effect": "Allow",
                    "Principal": {"AWS": role.role_arn},
                    "Action": actions,
                    "Resource": resources,
                }
                for role, access in self._grants
                for actions, resources in self._statements(access, self.domain_name)
            ],
        }

    def grant_index_access(self, role: iam.IRole, function: str) -> None:
        """Let ``role`` make the requests ``function``'s code makes (infra/permissions.py), on the
        chunk index only: an IAM grant plus a statement in the domain's access policy."""
        if self.domain is None:
            return  # an existing endpoint: its own access policy applies
        access = OPENSEARCH_ACCESS[function]
        for actions, resources in self._statements(access, self.domain_name):
            role.add_to_principal_policy(iam.PolicyStatement(actions=actions, resources=resources))
        self._grants.append((role, access))
        self._write_access_policy()

    def alarm_to(self, topic: sns.ITopic) -> None:
        """The domain's health alarms (AWS's recommended set), to the alarm topic."""
        if self.domain is None:
            return  # an existing cluster is watched by whoever runs it
        domain = self.domain
        minute = Duration.minutes(1)
        free_storage_mb = self._config.opensearch.volume_size_gb * 1024 * FREE_STORAGE_FRACTION
        below = cloudwatch.ComparisonOperator.LESS_THAN_OR_EQUAL_TO_THRESHOLD
        at_least = cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD
        for construct_id, metric, threshold, comparison, periods, description in (
            (
                "ClusterRedAlarm",
                domain.metric_cluster_status_red(period=minute, statistic="Maximum"),
                1,
                at_least,
                1,
                "OpenSearch cluster status RED: a primary shard is unassigned, indexing and search fail",
            ),
            (
                "ClusterYellowAlarm",
                domain.metric_cluster_status_yellow(period=minute, statistic="Maximum"),
                1,
                at_least,
                1,
                "OpenSearch cluster status YELLOW: a replica shard is unassigned (a node is down or out of disk)",
            ),
            (
                "FreeStorageAlarm",
                domain.metric_free_storage_space(period=minute, statistic="Minimum"),
                free_storage_mb,
                below,
                1,
                f"A data node has {int(FREE_STORAGE_FRACTION * 100)}% or less of its storage free "
                "(writes are blocked near the limit): grow opensearch.volumeSizeGb",
            ),
            (
                "JvmMemoryPressureAlarm",
                domain.metric_jvm_memory_pressure(period=minute, statistic="Maximum"),
                JVM_MEMORY_PRESSURE_PERCENT,
                at_least,
                3,
                f"OpenSearch JVM memory pressure at {JVM_MEMORY_PRESSURE_PERCENT}% or more for 3 minutes: "
                "out-of-memory risk, scale opensearch.instanceType up",
            ),
            (
                "AutomatedSnapshotFailureAlarm",
                domain.metric_automated_snapshot_failure(period=minute, statistic="Maximum"),
                1,
                at_least,
                1,
                "The domain's automated snapshot failed: the cluster has no recent backup",
            ),
        ):
            alarm = cloudwatch.Alarm(
                self,
                construct_id,
                metric=metric,
                alarm_description=description,
                threshold=threshold,
                evaluation_periods=periods,
                comparison_operator=comparison,
                # No data (the domain not yet reporting) is not a failure of the domain.
                treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
            )
            action = cw_actions.SnsAction(topic)
            alarm.add_alarm_action(action)
            alarm.add_ok_action(action)
            self.alarms[construct_id] = alarm

    def grant_embedding(self, role: iam.IRole) -> None:
        """Let ``role`` invoke the configured embedding model, and no other."""
        role.add_to_principal_policy(
            iam.PolicyStatement(actions=["bedrock:InvokeModel"], resources=[self.embedding_model_arn])
        )

    def grant_rerank(self, role: iam.IRole) -> None:
        """Let ``role`` call Bedrock's Rerank with the configured reranker model, and no other. Rerank
        needs ``bedrock:Rerank`` and ``bedrock:InvokeModel`` on the model
        (https://docs.aws.amazon.com/bedrock/latest/userguide/rerank-prereq.html); ``bedrock:Rerank``
        names no resource type, so '*' is the only resource IAM takes for it (acknowledged here), and
        the model is scoped by InvokeModel."""
        role.add_to_principal_policy(iam.PolicyStatement(actions=["bedrock:Rerank"], resources=["*"]))
        acknowledge(
            role,
            "AwsSolutions-IAM5",
            "bedrock:Rerank has no resource-level permissions (IAM requires '*'); the model it may use is "
            "scoped by bedrock:InvokeModel on its one foundation-model ARN.",
            "Resource::*",
        )
        role.add_to_principal_policy(
            iam.PolicyStatement(actions=["bedrock:InvokeModel"], resources=[self.rerank_model_arn])
        )

    def grant_converse(self, role: iam.IRole, model_id: str) -> None:
        """Let ``role`` call Converse with ``model_id`` (figures.vision's model) and no other model."""
        arns = answer_model_arns(Stack.of(self), model_id)
        role.add_to_principal_policy(iam.PolicyStatement(actions=["bedrock:InvokeModel"], resources=arns))
        routed = [arn for arn in arns if "*" in arn]
        if routed:
            partition = Stack.of(self).partition
            acknowledge(
                role,
                "AwsSolutions-IAM5",
                "A cross-Region inference profile routes to its one model in any Region of its geography; "
                "the profile itself is granted by ARN.",
                *(f"Resource::{arn.replace(partition, '<AWS::Partition>')}" for arn in routed),
            )

    def grant_answer(self, role: iam.IRole, *, stream: bool = False) -> None:
        """Let ``role`` call Converse (or, with ``stream``, ConverseStream) with the configured answer
        model, and no other: Converse needs ``bedrock:InvokeModel`` on it
        (https://docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_Converse.html),
        ConverseStream ``bedrock:InvokeModelWithResponseStream``
        (https://docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_ConverseStream.html)."""
        action = "bedrock:InvokeModelWithResponseStream" if stream else "bedrock:InvokeModel"
        role.add_to_principal_policy(iam.PolicyStatement(actions=[action], resources=self.answer_model_arns))
        routed = [arn for arn in self.answer_model_arns if "*" in arn]
        if routed:
            partition = Stack.of(self).partition
            acknowledge(
                role,
                "AwsSolutions-IAM5",
                "A cross-Region inference profile routes to its one model in any Region of its geography; "
                "the profile itself is granted by ARN.",
                *(f"Resource::{arn.replace(partition, '<AWS::Partition>')}" for arn in routed),
            )

    @property
    def answer_parameters(self) -> dict[str, str]:
        """POST /answer (rag_ingest.core.config.AnswerEnv)."""
        answer = self._config.search.answer
        return {
            "ANSWER_MODEL_ID": answer.model_id,
            "ANSWER_MIN_RELEVANCE": str(answer.min_relevance),
            "ANSWER_MAX_TOKENS": str(answer.max_tokens),
            "ANSWER_RERANK_DEFAULT": "true" if answer.rerank else "false",
        }

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
        """The k-NN index parameters (rag_ingest.core.config.IndexParamsEnv), for every function that
        creates or queries the index."""
        opensearch = self._config.opensearch
        parameters = {
            "OPENSEARCH_SPACE_TYPE": opensearch.space_type,
            "OPENSEARCH_HNSW_M": str(opensearch.hnsw_m),
            "OPENSEARCH_EF_CONSTRUCTION": str(opensearch.ef_construction),
            "OPENSEARCH_EF_SEARCH": str(opensearch.ef_search),
            "OPENSEARCH_CONCURRENT_SEGMENT_SEARCH": opensearch.concurrent_segment_search,
            "OPENSEARCH_MERGE_SEGMENTS_PER_TIER": str(opensearch.merge_segments_per_tier),
            "OPENSEARCH_MERGE_FLOOR_SEGMENT_MB": str(opensearch.merge_floor_segment_mb),
            "OPENSEARCH_VECTOR_ENCODING": opensearch.vector_encoding,
        }
        if self.domain is not None:
            # The stack knows the node count of the domain it creates; an existing cluster's index
            # keeps OpenSearch's default.
            parameters["OPENSEARCH_REPLICAS"] = str(index_replicas(opensearch.instance_count))
        return parameters

    @property
    def query_environment(self) -> dict[str, str]:
        """What POST /search needs (rag_ingest.core.config.SearchEnv): the index and the query embedder."""
        embedding = self._config.embedding
        return {
            "OPENSEARCH_ENDPOINT": self.endpoint_url,
            "OPENSEARCH_INDEX": self.index_name,
            "EMBEDDING_PROVIDER": embedding.provider,
            "EMBEDDING_MODEL_ID": embedding.model_id,
            "EMBEDDING_DIMENSION": str(embedding.dimension),
            **self.index_parameters,
            **self.fusion_parameters,
            **self.rerank_parameters,
        }

    @property
    def rerank_parameters(self) -> dict[str, str]:
        """POST /search's optional rerank stage (rag_ingest.core.config.RerankEnv)."""
        rerank = self._config.search.rerank
        return {
            "SEARCH_RERANK_DEFAULT": "true" if rerank.default else "false",
            "SEARCH_RERANK_MODEL_ID": rerank.model_id,
            "SEARCH_RERANK_CANDIDATES": str(rerank.candidates),
        }

    @property
    def fusion_parameters(self) -> dict[str, str]:
        """How hybrid search fuses its legs (rag_ingest.core.config.FusionEnv)."""
        search = self._config.search
        return {
            "SEARCH_BM25_WEIGHT": str(search.bm25_weight),
            "SEARCH_KNN_WEIGHT": str(search.knn_weight),
            "SEARCH_RRF_RANK_CONSTANT": str(search.rrf_rank_constant),
            "SEARCH_MIN_CANDIDATES": str(search.min_candidates),
            "SEARCH_CANDIDATES_PER_RESULT": str(search.candidates_per_result),
        }
