"""Sources kept in sync (docs/sources.md): the sources table, the sync function, and the sync
workflow that runs it step by step until the listing and the deletions are done.

    POST /sources/{id}/sync -> StartExecution(name = sync id)
      -> Step (list and checkpoint; S3 objects staged to a file, web pages written) -> NextPhase
      -> "applying": FanOut (Distributed Map over the file, a child per batch) -> Step -> ...
      -> done; a step or map that fails past its retries -> Fail (the sync FAILED, nothing deleted)

Each step stays under the function's timeout (``sources.stepSeconds``) and resumes at its
checkpoint. Why a file of batches: docs/decisions/sync-at-scale.md.
"""

from __future__ import annotations

from typing import Any

from aws_cdk import ArnFormat, CfnOutput, Duration, Stack
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_scheduler as scheduler
from aws_cdk import aws_stepfunctions as sfn
from aws_cdk import aws_stepfunctions_tasks as tasks
from constructs import Construct
from rag_ingest.core.s3_keys import ARTIFACTS_PREFIX, RAW_PREFIX, SOURCES_PREFIX

from infra.config import RagIngestConfig
from infra.constructs.function import FunctionFactory, new_log_group
from infra.constructs.search import Search
from infra.constructs.storage import Storage, grant_table, recoverable_table
from infra.constructs.workflow import EVENT_BUS_NAME, TRANSIENT_ERRORS
from infra.nag import acknowledge, arn_ref, pseudo_spelling
from infra.naming import unique_name
from infra.permissions import SOURCES_TABLE

LOST_SYNC_CHECK_MINUTES = 10


class Sources(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: RagIngestConfig,
        factory: FunctionFactory,
        storage: Storage,
        search: Search,
    ) -> None:
        super().__init__(scope, construct_id)
        settings = config.sources
        # Sources by tenant, sync jobs and item states by source (rag_ingest.adapters.sources_table).
        self.table = recoverable_table(self, "SourcesTable", config, "pk", "sk")
        self.environment = {
            "SOURCES_TABLE": self.table.table_name,
            "BUCKET_NAME": storage.bucket.bucket_name,
            "RAW_PREFIX": RAW_PREFIX,
            "ARTIFACTS_PREFIX": ARTIFACTS_PREFIX,
            "OPENSEARCH_ENDPOINT": search.endpoint_url,
            "OPENSEARCH_INDEX": search.index_name,
            "EMBEDDING_DIMENSION": str(config.embedding.dimension),
            "EVENT_BUS_NAME": EVENT_BUS_NAME,
            # Crawled pages: public addresses only in AWS (the local stack overrides this).
            "SOURCE_ALLOW_LOOPBACK_HTTP": "false",
        }
        # Named, so the sync function can start it again without a reference to it (a cycle).
        self.state_machine_name = f"{Stack.of(self).stack_name}-source-sync"
        self.state_machine_arn = Stack.of(self).format_arn(
            service="states",
            resource="stateMachine",
            resource_name=self.state_machine_name,
            arn_format=ArnFormat.COLON_RESOURCE_NAME,
        )
        self.function: lambda_.Function = factory.create(
            self,
            "SourceSyncFunction",
            code_dir="source_sync",
            handler="app.handler",
            service="rag-ingest-source-sync",
            settings=config.functions.source_sync,
            environment={
                **self.environment,
                "SOURCE_SYNC_STEP_SECONDS": str(settings.step_seconds),
                "SOURCE_SYNC_STATE_MACHINE_ARN": self.state_machine_arn,
                "SOURCE_MAX_ITEMS_PER_SYNC": str(settings.max_items_per_sync),
                "MAX_UPLOAD_BYTES": str(config.upload.max_upload_bytes),
                "SOURCE_FAN_OUT_BATCH_ITEMS": str(settings.fan_out_batch_items),
            },
            description="rag-ingest sources: one step of a sync (list, write documents, checkpoint; then deletions)",
        )
        role = self.function.role
        assert role is not None
        self.grant_source_documents(role, storage, search, "SourceSync")
        self._grant_readable_buckets(role, settings.readable_buckets)
        if settings.readable_keys:
            # SSE-KMS objects of those buckets: decrypted for S3's reads and copies only.
            region = Stack.of(self).region
            role.add_to_principal_policy(
                iam.PolicyStatement(
                    sid="DecryptSourceObjects",
                    actions=["kms:Decrypt"],
                    resources=list(settings.readable_keys),
                    conditions={"StringLike": {"kms:ViaService": f"s3.{region}.amazonaws.com"}},
                )
            )
        role.add_to_principal_policy(
            iam.PolicyStatement(
                sid="SyncCursors",
                actions=["s3:GetObject", "s3:PutObject"],
                resources=[storage.bucket.arn_for_objects(f"{SOURCES_PREFIX}*")],
            )
        )
        self.state_machine = self._state_machine(config, storage)
        role.add_to_principal_policy(
            iam.PolicyStatement(
                sid="RestartLostSyncs", actions=["states:StartExecution"], resources=[self.state_machine_arn]
            )
        )
        # Every few minutes: syncs whose execution is gone (not saved for two function timeouts).
        events.Rule(
            self,
            "LostSyncsSchedule",
            description="rag-ingest sources: start again the syncs whose execution was lost",
            schedule=events.Schedule.rate(Duration.minutes(LOST_SYNC_CHECK_MINUTES)),
            targets=[
                targets.LambdaFunction(
                    self.function,
                    event=events.RuleTargetInput.from_object(
                        {"resume_lost_syncs": {"stale_after_seconds": 2 * config.functions.source_sync.timeout_seconds}}
                    ),
                )
            ],
        )
        # Sources' schedules: one EventBridge Scheduler schedule per source, in this group, each
        # starting the sync workflow under this role (rag_ingest.adapters.sync_schedules).
        self.schedule_group = scheduler.CfnScheduleGroup(
            self, "SyncSchedules", name=f"{Stack.of(self).stack_name}-source-syncs"
        )
        self.schedule_role = iam.Role(
            self,
            "SchedulerRole",
            assumed_by=iam.ServicePrincipal(
                "scheduler.amazonaws.com", conditions={"StringEquals": {"aws:SourceAccount": Stack.of(self).account}}
            ),
            description="rag-ingest: EventBridge Scheduler starts source syncs",
        )
        self.state_machine.grant_start_execution(self.schedule_role)
        self._object_events(settings.readable_buckets)
        # What a bucket owner in another account names in their bucket policy (docs/sources.md).
        for name, value in (
            ("SourcesTableName", self.table.table_name),
            ("SourceSyncRoleArn", role.role_arn),
            ("SourceSyncStateMachineArn", self.state_machine.state_machine_arn),
            ("SourceSyncFunctionName", self.function.function_name),
        ):
            CfnOutput(self, name, value=value).override_logical_id(name)

    def grant_source_documents(self, role: iam.IRole, storage: Storage, search: Search, function: str) -> None:
        """What writing and deleting a source's documents takes: the two tables, the uploads (put, head,
        every version deleted with the artifacts), the chunk index and DocumentDeleted events."""
        grant_table(role, self.table, SOURCES_TABLE[function])
        if function == "SourceSync":
            storage.grant_documents(role, function)
            search.grant_index_access(role, function)
            role.add_to_principal_policy(
                iam.PolicyStatement(
                    actions=["s3:PutObject", "s3:GetObject"],
                    resources=[storage.bucket.arn_for_objects(f"{RAW_PREFIX}*")],
                )
            )
            storage.grant_document_delete(role)
            role.add_to_principal_policy(
                iam.PolicyStatement(
                    actions=["events:PutEvents"],
                    resources=[
                        Stack.of(self).format_arn(service="events", resource="event-bus", resource_name=EVENT_BUS_NAME)
                    ],
                )
            )
            acknowledge(
                role,
                "AwsSolutions-IAM5",
                "Resource-scoped: objects under raw/, artifacts/ and sources/ of the one bucket.",
                f"Resource::{arn_ref(storage.bucket)}/{RAW_PREFIX}*",
                f"Resource::{arn_ref(storage.bucket)}/{ARTIFACTS_PREFIX}*",
                f"Resource::{arn_ref(storage.bucket)}/{SOURCES_PREFIX}*",
            )

    def serve_api(self, function: lambda_.Function, config: RagIngestConfig) -> None:
        """The API's source routes: the table, starting a sync, and the limit per tenant (the API
        already writes uploads and deletes documents)."""
        function.add_environment("SOURCES_TABLE", self.table.table_name)
        function.add_environment("SOURCE_SYNC_STATE_MACHINE_ARN", self.state_machine.state_machine_arn)
        function.add_environment("SOURCE_MAX_PER_TENANT", str(config.sources.max_per_tenant))
        function.add_environment("SOURCE_MAX_SYNCS_PER_HOUR", str(config.sources.max_syncs_per_hour))
        function.add_environment("SOURCE_ALLOW_LOOPBACK_HTTP", "false")
        function.add_environment("SOURCE_SCHEDULE_GROUP", str(self.schedule_group.name))
        function.add_environment("SOURCE_SCHEDULE_ROLE_ARN", self.schedule_role.role_arn)
        role = function.role
        assert role is not None
        grant_table(role, self.table, SOURCES_TABLE["Api"])
        role.add_to_principal_policy(
            iam.PolicyStatement(
                sid="StartSourceSync",
                actions=["states:StartExecution"],
                resources=[self.state_machine.state_machine_arn],
            )
        )
        spelling = pseudo_spelling(self)
        schedules = Stack.of(self).format_arn(
            service="scheduler", resource="schedule", resource_name=f"{self.schedule_group.name}/*"
        )
        role.add_to_principal_policy(
            iam.PolicyStatement(
                sid="ManageSourceSchedules",
                actions=["scheduler:CreateSchedule", "scheduler:UpdateSchedule", "scheduler:DeleteSchedule"],
                resources=[schedules],
            )
        )
        role.add_to_principal_policy(
            iam.PolicyStatement(
                sid="PassSchedulerRole",
                actions=["iam:PassRole"],
                resources=[self.schedule_role.role_arn],
                conditions={"StringEquals": {"iam:PassedToService": "scheduler.amazonaws.com"}},
            )
        )
        acknowledge(
            role,
            "AwsSolutions-IAM5",
            "The schedules of the stack's own group only (one per source, named by the source id).",
            f"Resource::arn:{spelling.partition}:scheduler:{spelling.region}:{spelling.account}:"
            f"schedule/{self.schedule_group.name}/*",
        )

    def serve_reconciler(self, function: lambda_.Function) -> None:
        """The reconciler reads the sources' items and forgets one whose document is gone."""
        function.add_environment("SOURCES_TABLE", self.table.table_name)
        role = function.role
        assert role is not None
        grant_table(role, self.table, SOURCES_TABLE["Reconciler"])

    def _object_events(self, buckets: tuple[str, ...]) -> None:
        """Object Created/Deleted of the readable buckets (sent to EventBridge when their owner turns
        it on) reach the sync function, which updates the sources over them between syncs. A lost
        event costs only freshness: the next sync lists the bucket whole."""
        if not buckets:
            return
        detail: dict[str, Any] = {} if "*" in buckets else {"bucket": {"name": list(buckets)}}
        events.Rule(
            self,
            "ObjectEventsRule",
            description="rag-ingest sources: S3 object events of the readable buckets -> the sync function",
            event_pattern=events.EventPattern(
                source=["aws.s3"], detail_type=["Object Created", "Object Deleted"], detail=detail or None
            ),
            targets=[targets.LambdaFunction(self.function, retry_attempts=8, max_event_age=Duration.hours(6))],
        )

    @staticmethod
    def _grant_readable_buckets(role: iam.IRole, buckets: tuple[str, ...]) -> None:
        """Read on the buckets sources may name, nothing else (none by default: docs/sources.md)."""
        if not buckets:
            return
        bucket_arns = [f"arn:{Stack.of(role).partition}:s3:::{name}" for name in buckets]
        partition = pseudo_spelling(role).partition
        role.add_to_principal_policy(
            iam.PolicyStatement(
                sid="ReadSourceBuckets",
                actions=["s3:ListBucket", "s3:ListBucketVersions", "s3:GetBucketLocation"],
                resources=bucket_arns,
            )
        )
        role.add_to_principal_policy(
            iam.PolicyStatement(
                sid="ReadSourceObjects",
                actions=["s3:GetObject", "s3:GetObjectVersion"],
                resources=[f"{arn}/*" for arn in bucket_arns],
            )
        )
        acknowledge(
            role,
            "AwsSolutions-IAM5",
            "Read-only on the objects of the buckets named in sources.readableBuckets (cdk.json), which "
            "an operator lists on purpose; a bucket's objects have no narrower ARN.",
            *(f"Resource::arn:{partition}:s3:::{name}/*" for name in buckets),
            *([f"Resource::arn:{partition}:s3:::*"] if "*" in buckets else []),
        )

    def _invoke(self, construct_id: str, config: RagIngestConfig) -> tasks.LambdaInvoke:
        """The sync function as a task, retried as the pipeline's stages are."""
        retry = config.workflow.retry
        task = tasks.LambdaInvoke(
            self,
            construct_id,
            lambda_function=self.function,
            payload_response_only=True,
            retry_on_service_exceptions=False,
            result_path="$",
        )
        task.add_retry(errors=["PermanentError"], max_attempts=0)
        task.add_retry(
            errors=TRANSIENT_ERRORS,
            interval=Duration.seconds(retry.interval_seconds),
            backoff_rate=retry.backoff_rate,
            max_attempts=retry.max_attempts,
            max_delay=Duration.seconds(retry.max_delay_seconds),
            jitter_strategy=sfn.JitterType.FULL,
        )
        task.add_retry(errors=["States.ALL"], interval=Duration.seconds(2), max_attempts=2)
        return task

    def _state_machine(self, config: RagIngestConfig, storage: Storage) -> sfn.StateMachine:
        step = self._invoke("Step", config)
        fail = tasks.LambdaInvoke(
            self,
            "MarkSyncFailed",
            lambda_function=self.function,
            payload_response_only=True,
            retry_on_service_exceptions=False,
            result_path="$",
        )
        fail.add_retry(errors=TRANSIENT_ERRORS, interval=Duration.seconds(2), max_attempts=5)
        fail.next(sfn.Fail(self, "SyncFailed", cause="a sync step failed past its retries"))
        step.add_catch(fail, errors=["States.ALL"], result_path="$.error")
        # Listed S3 objects staged by a step: each batch of the file is a child workflow applying it.
        fan_out = sfn.DistributedMap(
            self,
            "FanOut",
            # By path, not by bucket: CDK would grant every object of the bucket; staged files only, below.
            item_reader=sfn.S3JsonItemReader(
                bucket_name_path=sfn.JsonPath.string_at("$.staged.bucket"), key=sfn.JsonPath.string_at("$.staged.key")
            ),
            max_concurrency=config.sources.fan_out_concurrency,
            map_execution_type=sfn.StateMachineType.STANDARD,
            result_path="$.applied",
            label="ApplyStagedItems",
        )
        fan_out.item_processor(self._invoke("ApplyBatch", config))
        fan_out.add_catch(fail, errors=["States.ALL"], result_path="$.error")
        fan_out.next(step)
        next_phase = sfn.Choice(self, "NextPhase")
        next_phase.when(sfn.Condition.string_equals("$.phase", "listing"), step)
        next_phase.when(sfn.Condition.string_equals("$.phase", "applying"), fan_out)
        next_phase.when(sfn.Condition.string_equals("$.phase", "finishing"), step)
        # A sync that ended FAILED by its own account (an unreadable bucket) is the user's to fix: no alarm.
        next_phase.otherwise(sfn.Succeed(self, "SyncEnded"))
        step.next(next_phase)
        log_group = new_log_group(
            self,
            "SyncLogs",
            config,
            log_group_name=unique_name(f"/aws/vendedlogs/states/{Stack.of(self).stack_name}-source-sync-"),
        )
        state_machine = sfn.StateMachine(
            self,
            "SyncStateMachine",
            definition_body=sfn.DefinitionBody.from_chainable(step),
            state_machine_name=self.state_machine_name,
            state_machine_type=sfn.StateMachineType.STANDARD,
            timeout=Duration.hours(config.sources.timeout_hours),
            tracing_enabled=True,
            logs=sfn.LogOptions(destination=log_group, level=sfn.LogLevel.ALL, include_execution_data=False),
            comment="rag-ingest: one source sync: Step (list, stage, checkpoint) and FanOut until the listing ends",
        )
        state_machine.add_to_role_policy(
            iam.PolicyStatement(
                sid="ReadStagedItems",
                actions=["s3:GetObject"],
                resources=[storage.bucket.arn_for_objects(f"{SOURCES_PREFIX}*")],
            )
        )
        # How cdk-nag spells the map's grants on this state machine's own executions.
        spelling, logical_id = pseudo_spelling(self), arn_ref(state_machine)[1:-5]
        name = f'{{"Fn::Select":[6,{{"Fn::Split":[":",{{"Ref":"{logical_id}"}}]}}]}}'
        executions = f"arn:{spelling.partition}:states:{spelling.region}:{spelling.account}:execution:{name}"
        acknowledge(
            state_machine,
            "AwsSolutions-IAM5",
            "CDK's Lambda invoke grant covers the function's versions/aliases (<arn>:*); log delivery and X-Ray "
            "actions support no resource-level permissions, so AWS requires '*'. The Distributed Map starts, "
            "reads and stops its own child executions (this state machine's executions and map runs only) and "
            "reads the staged files under sources/ of the stack's bucket.",
            "Resource::*",
            f"Resource::{arn_ref(self.function)}:*",
            f"Resource::{arn_ref(storage.bucket)}/{SOURCES_PREFIX}*",
            f"Resource::{executions}:*",
            f"Resource::{executions}/ApplyStagedItems:*",
        )
        return state_machine

    @property
    def functions(self) -> dict[str, lambda_.Function]:
        return {"SourceSync": self.function}
