"""The ingestion workflow: the stage functions (one code asset) and the Step Functions state machine.

Two lanes: after Parse's first task (the page count is known there), a Choice sends documents of more
than ``lanes.bulkAbovePages`` pages through bulk copies of Parse, Chunk, Embed and Index, so their
page ranges and Embed tasks never take the workers, the concurrency or the Map slots small uploads
need. Both lanes end in the same Finalize.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass

from aws_cdk import CfnOutput, Duration, Stack, Tags
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_stepfunctions as sfn
from aws_cdk import aws_stepfunctions_tasks as tasks
from constructs import Construct
from rag_ingest.core.errors import EmbeddingCapacityWait
from rag_ingest.core.job import LANE_TAG, BatchPhase, Lane
from rag_ingest.core.s3_keys import ARTIFACTS_PREFIX, BATCH_FOLDER, RAW_PREFIX
from rag_ingest.parsing.ocr.engine import OCR_DPI

from infra.config import EmbeddingCapacityConfig, FunctionSettings, RagIngestConfig
from infra.constructs.function import FunctionFactory, new_log_group, removal_policy
from infra.constructs.search import Search
from infra.constructs.storage import Storage, grant_table
from infra.nag import acknowledge, arn_ref, pseudo_spelling
from infra.naming import unique_name
from infra.permissions import EMBEDDING_CAPACITY_TABLE

# Retry/Catch match the Lambda errorType, i.e. the exception class name (rag_ingest.core.errors).
PERMANENT_ERRORS = ["PermanentError"]
CAPACITY_WAIT_ERROR = EmbeddingCapacityWait.__name__
CAPACITY_RETRY_INTERVAL_SECONDS = 10
CAPACITY_RETRY_BACKOFF = 1.5
CAPACITY_RETRY_MAX_DELAY_SECONDS = 60
TRANSIENT_ERRORS = [
    "TransientError",
    "Lambda.ServiceException",
    "Lambda.AWSLambdaException",
    "Lambda.SdkClientException",
    "Lambda.TooManyRequestsException",
]


@dataclass(frozen=True)
class StageSpec:
    """A stage and the access its code needs (rag_ingest.ingest.pipeline), and nothing more."""

    name: str  # state name and construct id prefix: "Validate" -> Workflow/ValidateFunction
    handler: str
    reads_raw: bool = False  # the uploaded PDF under raw/
    artifacts: bool = False  # checkpoints under artifacts/ (read, write, exists)
    search: bool = False  # the OpenSearch index
    embeds: bool = False  # the Bedrock embedding model
    publishes: bool = False  # DocumentReady / DocumentFailed events on the default event bus
    ocr: bool = False  # Textract DetectDocumentText on pages without a text layer (rag_ingest.adapters.textract)


STAGES = (
    StageSpec("Validate", "app.validate", reads_raw=True),
    StageSpec("Parse", "app.parse", reads_raw=True, artifacts=True, ocr=True),
    StageSpec("Chunk", "app.chunk", artifacts=True),
    StageSpec("Embed", "app.embed", artifacts=True, embeds=True),
    StageSpec("Index", "app.index", artifacts=True, search=True),
    StageSpec("Finalize", "app.finalize", search=True, publishes=True),
)
MARK_FAILED = StageSpec("MarkFailed", "app.mark_failed", publishes=True)
# The bulk lane's Embed by Bedrock batch inference (embedding.batchInference): submit, look, collect.
EMBED_BATCH = StageSpec("EmbedBatch", "app.embed_batch", artifacts=True)
EVENT_BUS_NAME = "default"
# The stages whose work grows with the page count: the bulk lane has its own copy of each.
BULK_LANE_STAGES = ("Parse", "Chunk", "Embed", "Index")


def textract_actions(config: RagIngestConfig) -> list[str]:
    """What Parse may call on Textract: DetectDocumentText, and AnalyzeDocument when parsing.textractTables
    is on (rag_ingest.adapters.textract calls one or the other, as OCR_TEXTRACT_TABLES says)."""
    return ["textract:DetectDocumentText", *(["textract:AnalyzeDocument"] if config.parsing.textract_tables else [])]


def bulk(name: str) -> str:
    """The bulk lane's copy of a stage: its function key and state names (``Parse`` -> ``ParseBulk``)."""
    return f"{name}Bulk"


class Workflow(Construct):
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
        self._config = config
        self._storage = storage
        self._search = search
        self._factory = factory
        capacity = config.embedding.capacity
        self.capacity_table = self._capacity_table() if capacity.mode == "shared" else None

        # Every stage gets the same environment: one code asset, seven entry points.
        self.environment = {
            "BUCKET_NAME": storage.bucket.bucket_name,
            "ARTIFACTS_PREFIX": ARTIFACTS_PREFIX,
            **search.environment,
            "MAX_FILE_BYTES": str(config.limits.max_file_bytes),
            "MAX_PAGES": str(config.limits.max_pages),
            "PARSE_RANGE_PAGES": str(config.parsing.range_pages),
            "BULK_ABOVE_PAGES": str(config.lanes.bulk_above_pages),
            "CHUNK_TOKENS": str(config.chunking.chunk_tokens),
            "CHUNK_OVERLAP_TOKENS": str(config.chunking.chunk_overlap_tokens),
            "EVENT_BUS_NAME": EVENT_BUS_NAME,
            # Unset, Embed embeds every chunk (embedding.cache false): no lookup, no entry written.
            **({"EMBEDDING_CACHE_TABLE": storage.embedding_cache_table.table_name} if config.embedding.cache else {}),
            # Pages without a text layer: Textract in AWS (the local stack runs Tesseract instead).
            "OCR_ENGINE": "textract",
            "MAX_OCR_PAGES": str(config.limits.max_ocr_pages),
            "OCR_DPI": str(OCR_DPI),
            # parsing.textractTables: AnalyzeDocument TABLES instead of DetectDocumentText (Parse's grant below).
            "OCR_TEXTRACT_TABLES": "true" if config.parsing.textract_tables else "false",
            "MAX_FIGURES_READ": str(config.figures.max_read),
            **self._vision_environment(),
            # parsing.indexHiddenSheets: a workbook's hidden sheets are read (docs/formats.md, "Spreadsheets").
            "INDEX_HIDDEN_SHEETS": "true" if config.parsing.index_hidden_sheets else "false",
            **self._capacity_environment(capacity),
        }
        self.functions: dict[str, lambda_.Function] = {}
        for spec in (*STAGES, MARK_FAILED):
            self.functions[spec.name] = self._stage_function(spec, self._settings(spec), Lane.STANDARD)
        for spec in STAGES:
            if spec.name in BULK_LANE_STAGES:
                self.functions[bulk(spec.name)] = self._stage_function(spec, self._settings(spec), Lane.BULK)
        self.batch_role: iam.Role | None = None
        if config.embedding.batch_inference.enabled:
            self._batch_inference()

        self.state_machine = self._state_machine()
        CfnOutput(self, "StateMachineArn", value=self.state_machine.state_machine_arn).override_logical_id(
            "StateMachineArn"
        )

    def _capacity_table(self) -> dynamodb.Table:
        """The shared embedding-quota ledger: one small item per model, booked by every Embed task
        (rag_ingest.adapters.capacity_table). It holds the last minute's bookings, nothing to restore."""
        table = dynamodb.Table(
            self,
            "EmbeddingCapacityTable",
            partition_key=dynamodb.Attribute(name="scope", type=dynamodb.AttributeType.STRING),
            billing_mode=dynamodb.BillingMode.PAY_PER_REQUEST,
            encryption=dynamodb.TableEncryption.AWS_MANAGED,
            removal_policy=removal_policy(self._config),
        )
        acknowledge(
            table,
            "AwsSolutions-DDB3",
            "The table holds the last minute's bookings of the embedding quota, per model; a lost item only "
            "forgets a minute of bookings, so point-in-time recovery would back up nothing of value.",
        )
        CfnOutput(self, "EmbeddingCapacityTableName", value=table.table_name).override_logical_id(
            "EmbeddingCapacityTableName"
        )
        return table

    def _vision_environment(self) -> dict[str, str]:
        """figures.vision: whether on, the model, its prompt and the figures described per document."""
        vision = self._config.figures.vision
        return {
            "FIGURE_VISION_ENABLED": "true" if vision.enabled else "false",
            "FIGURE_VISION_MODEL_ID": vision.model_id,
            "FIGURE_VISION_PROMPT": vision.prompt,
            "FIGURE_VISION_MAX_FIGURES": str(vision.max_figures),
        }

    def _capacity_environment(self, capacity: EmbeddingCapacityConfig) -> dict[str, str]:
        environment = {
            "EMBEDDING_CAPACITY_MODE": capacity.mode,
            "EMBEDDING_CAPACITY_HEADROOM": str(capacity.headroom),
            "EMBEDDING_CAPACITY_MAX_WAIT_SECONDS": str(capacity.max_wait_seconds),
            "EMBEDDING_CAPACITY_BOOK_AHEAD_SECONDS": str(capacity.book_ahead_seconds),
        }
        # Always set ({} when no tenant has a weight of its own), as every variable StagesEnv reads.
        environment["EMBEDDING_CAPACITY_TENANT_WEIGHTS"] = json.dumps(capacity.tenant_weights, separators=(",", ":"))
        if self.capacity_table is not None:
            environment["EMBEDDING_CAPACITY_TABLE"] = self.capacity_table.table_name
        if capacity.requests_per_minute is not None:
            environment["EMBEDDING_REQUESTS_PER_MINUTE"] = str(capacity.requests_per_minute)
        if capacity.tokens_per_minute is not None:
            environment["EMBEDDING_TOKENS_PER_MINUTE"] = str(capacity.tokens_per_minute)
        return environment

    def _settings(self, spec: StageSpec) -> FunctionSettings:
        stages = self._config.functions.stages
        return {
            "Validate": stages.validate_,
            "Parse": stages.parse,
            "Chunk": stages.chunk,
            "Embed": stages.embed,
            "EmbedBatch": stages.embed,
            "Index": stages.index,
            "Finalize": stages.finalize,
            "MarkFailed": stages.mark_failed,
        }[spec.name]

    def _stage_function(self, spec: StageSpec, settings: FunctionSettings, lane: Lane) -> lambda_.Function:
        """The stage's function in ``lane``: the bulk copy has the same code, memory, timeout and
        access (its metrics share the stage's service name), and the lane's reserved concurrency."""
        is_bulk = lane is Lane.BULK
        function = self._factory.create(
            self,
            f"{bulk(spec.name) if is_bulk else spec.name}Function",
            code_dir="stages",
            handler=spec.handler,
            service=f"rag-ingest-{spec.name.lower()}",
            settings=settings,
            environment=self.environment,
            description=f"rag-ingest workflow stage: {spec.name}" + (" (bulk lane)" if is_bulk else ""),
            reserved_concurrency=self._config.lanes.bulk_reserved_concurrency if is_bulk else None,
        )
        Tags.of(function).add(LANE_TAG, lane.value)
        role = function.role
        assert role is not None
        bucket = self._storage.bucket
        # Every stage records its progress in the document's status record.
        self._storage.grant_documents(role, spec.name)
        findings: list[str] = []
        if spec.reads_raw:
            # Reads pin the S3 versionId of the upload: GetObjectVersion.
            self._grant_objects(role, bucket, RAW_PREFIX, ["s3:GetObject", "s3:GetObjectVersion"])
            findings.append(f"Resource::{arn_ref(bucket)}/{RAW_PREFIX}*")
        if spec.artifacts:
            self._grant_objects(role, bucket, ARTIFACTS_PREFIX, ["s3:GetObject", "s3:PutObject"])
            findings.append(f"Resource::{arn_ref(bucket)}/{ARTIFACTS_PREFIX}*")
        if spec.reads_raw or spec.artifacts:
            # Without ListBucket a missing key is 403, not the 404 that tells "no checkpoint yet"; no
            # s3:prefix condition can narrow it (HeadObject/GetObject requests carry no prefix).
            role.add_to_principal_policy(iam.PolicyStatement(actions=["s3:ListBucket"], resources=[bucket.bucket_arn]))
        if spec.search:
            self._search.grant_index_access(role, spec.name)
        if spec.embeds:
            self._search.grant_embedding(role)
            if self._config.embedding.cache:
                self._storage.grant_embedding_cache(role, spec.name)
            if self.capacity_table is not None:
                grant_table(role, self.capacity_table, EMBEDDING_CAPACITY_TABLE[spec.name])
        if spec.publishes:
            bus_arn = Stack.of(self).format_arn(service="events", resource="event-bus", resource_name=EVENT_BUS_NAME)
            role.add_to_principal_policy(iam.PolicyStatement(actions=["events:PutEvents"], resources=[bus_arn]))
        if spec.ocr and self._config.figures.vision.enabled:
            # figures.vision: Converse with the one vision model (bedrock:InvokeModel), nothing else.
            self._search.grant_converse(role, self._config.figures.vision.model_id)
        if spec.ocr:
            # Textract has no resource-level permissions for these calls on image bytes: '*' is the only
            # resource IAM accepts (AnalyzeDocument only with parsing.textractTables).
            actions = textract_actions(self._config)
            role.add_to_principal_policy(iam.PolicyStatement(actions=actions, resources=["*"]))
            acknowledge(
                role,
                "AwsSolutions-IAM5",
                f"{' and '.join(actions)}: no resource-level permissions (IAM requires '*'); the only actions.",
                "Resource::*",
            )
        if findings:
            acknowledge(
                role,
                "AwsSolutions-IAM5",
                "Wildcards are object-key prefixes of the one bucket (raw/*, artifacts/*): resource-scoped, not '*'.",
                *findings,
            )
        return function

    def _batch_inference(self) -> None:
        """The bulk lane's batch Embed function and the service role Bedrock assumes for its jobs.

        The role (https://docs.aws.amazon.com/bedrock/latest/userguide/batch-iam-sr.html): trusted by
        bedrock.amazonaws.com for this account's model-invocation jobs only (aws:SourceAccount,
        aws:SourceArn), reading the jobs' input and listing their folder, writing under their
        ``output/`` only. The function creates, reads and lists jobs on the configured model, passes
        that role and no other (iam:PassedToService bedrock), and deletes a job's files once collected.
        """
        stack = Stack.of(self)
        spelling = pseudo_spelling(self)
        bucket = self._storage.bucket
        batch = self._config.embedding.batch_inference
        job_arns = stack.format_arn(service="bedrock", resource="model-invocation-job", resource_name="*")
        jobs_folder = f"{ARTIFACTS_PREFIX}*/{BATCH_FOLDER}*"
        role = iam.Role(
            self,
            "BatchInferenceRole",
            description="rag-ingest: Bedrock batch inference jobs read their input and write their output",
            assumed_by=iam.ServicePrincipal(
                "bedrock.amazonaws.com",
                conditions={
                    "StringEquals": {"aws:SourceAccount": stack.account},
                    "ArnLike": {"aws:SourceArn": job_arns},
                },
            ),
        )
        role.add_to_policy(
            iam.PolicyStatement(actions=["s3:GetObject"], resources=[bucket.arn_for_objects(jobs_folder)])
        )
        role.add_to_policy(
            iam.PolicyStatement(actions=["s3:PutObject"], resources=[bucket.arn_for_objects(f"{jobs_folder}/output/*")])
        )
        role.add_to_policy(
            iam.PolicyStatement(
                actions=["s3:ListBucket"],
                resources=[bucket.bucket_arn],
                conditions={"StringLike": {"s3:prefix": [jobs_folder]}},
            )
        )
        acknowledge(
            role,
            "AwsSolutions-IAM5",
            "Wildcards are the batch jobs' folders under the one bucket's artifacts/ (artifacts/*/batch/*): "
            "resource-scoped, not '*'.",
            f"Resource::{arn_ref(bucket)}/{jobs_folder}",
            f"Resource::{arn_ref(bucket)}/{jobs_folder}/output/*",
        )
        self.batch_role = role

        function = self._stage_function(EMBED_BATCH, self._settings(EMBED_BATCH), Lane.BULK)
        for name, value in {
            "BATCH_INFERENCE_ROLE_ARN": role.role_arn,
            "BATCH_MIN_RECORDS": str(batch.min_records),
            "BATCH_TIMEOUT_HOURS": str(batch.timeout_hours),
            "BATCH_POLL_SECONDS": str(batch.poll_seconds),
            "BATCH_MAX_POLL_SECONDS": str(batch.max_poll_seconds),
            "BATCH_WRITE_CACHE": "true" if batch.write_cache else "false",
        }.items():
            function.add_environment(name, value)
        fn_role = function.role
        assert fn_role is not None
        if self._config.embedding.cache:
            access = "EmbedBatchWritingCache" if batch.write_cache else "EmbedBatch"
            self._storage.grant_embedding_cache(fn_role, access)
        fn_role.add_to_principal_policy(
            iam.PolicyStatement(
                actions=["bedrock:CreateModelInvocationJob"],
                resources=[job_arns, self._search.embedding_model_arn],
            )
        )
        fn_role.add_to_principal_policy(
            iam.PolicyStatement(actions=["bedrock:GetModelInvocationJob"], resources=[job_arns])
        )
        # ListModelInvocationJobs names no resource type: '*' is the only resource IAM takes for it.
        fn_role.add_to_principal_policy(
            iam.PolicyStatement(actions=["bedrock:ListModelInvocationJobs"], resources=["*"])
        )
        fn_role.add_to_principal_policy(
            iam.PolicyStatement(
                actions=["iam:PassRole"],
                resources=[role.role_arn],
                conditions={"StringEquals": {"iam:PassedToService": "bedrock.amazonaws.com"}},
            )
        )
        fn_role.add_to_principal_policy(
            iam.PolicyStatement(actions=["s3:DeleteObject"], resources=[bucket.arn_for_objects(jobs_folder)])
        )
        acknowledge(
            fn_role,
            "AwsSolutions-IAM5",
            "bedrock:ListModelInvocationJobs has no resource-level permissions (IAM requires '*'); the jobs "
            "it creates and reads are this account's model-invocation-job/* in this Region; deletions are "
            "limited to the batch jobs' folders (artifacts/*/batch/*).",
            "Resource::*",
            f"Resource::arn:{spelling.partition}:bedrock:{spelling.region}:{spelling.account}:model-invocation-job/*",
            f"Resource::{arn_ref(bucket)}/{jobs_folder}",
        )
        self.functions[bulk(EMBED_BATCH.name)] = function

    @staticmethod
    def _grant_objects(role: iam.IRole, bucket: s3.IBucket, prefix: str, actions: list[str]) -> None:
        role.add_to_principal_policy(
            iam.PolicyStatement(actions=actions, resources=[bucket.arn_for_objects(f"{prefix}*")])
        )

    def _task(self, name: str, state_name: str | None = None) -> tasks.LambdaInvoke:
        retry = self._config.workflow.retry
        task = tasks.LambdaInvoke(
            self,
            state_name or name,
            lambda_function=self.functions[name],
            # The function's return value is the new job state (stages pass the whole job along).
            payload_response_only=True,
            retry_on_service_exceptions=False,
            result_path="$",
        )
        # Order matters: Step Functions uses the first retrier whose errors match.
        task.add_retry(errors=PERMANENT_ERRORS, max_attempts=0)
        if name in ("Embed", bulk("Embed")):
            # Waiting for the shared embedding quota is not a failure: its own, patient retrier
            # (about a minute apart with the task's own wait; embedding.capacity.waitMinutes in all).
            task.add_retry(
                errors=[CAPACITY_WAIT_ERROR],
                interval=Duration.seconds(CAPACITY_RETRY_INTERVAL_SECONDS),
                backoff_rate=CAPACITY_RETRY_BACKOFF,
                max_attempts=self._config.embedding.capacity.wait_minutes,
                max_delay=Duration.seconds(CAPACITY_RETRY_MAX_DELAY_SECONDS),
                jitter_strategy=sfn.JitterType.FULL,
            )
        task.add_retry(
            errors=TRANSIENT_ERRORS,
            interval=Duration.seconds(retry.interval_seconds),
            backoff_rate=retry.backoff_rate,
            max_attempts=retry.max_attempts,
            max_delay=Duration.seconds(retry.max_delay_seconds),
            jitter_strategy=sfn.JitterType.FULL,
        )
        # Unknown errors (bugs, Sandbox.Timedout...): a couple of retries, then MarkFailed.
        task.add_retry(
            errors=["States.ALL"],
            interval=Duration.seconds(2),
            max_attempts=2,
            jitter_strategy=sfn.JitterType.FULL,
        )
        return task

    def _fan_out(
        self, state_name: str, task_state_name: str, items_path: str, item_key: str, stage: str, max_concurrency: int
    ) -> sfn.Map:
        """A Map over ``items_path`` running ``stage``'s function once per item (``{job, <item_key>}``).

        MaxConcurrency bounds the work in flight; each iteration writes its own checkpoints and its
        result is discarded, so the job state stays pointers only (256 KB).
        """
        fan_out = sfn.Map(
            self,
            state_name,
            items_path=items_path,
            item_selector={"job.$": "$", f"{item_key}.$": "$$.Map.Item.Value"},
            max_concurrency=max_concurrency,
            result_path=sfn.JsonPath.DISCARD,
        )
        fan_out.item_processor(self._task(stage, state_name=task_state_name))
        return fan_out

    def _lane_steps(self, lane: Lane) -> tuple[sfn.Map, list[sfn.TaskStateBase | sfn.Map]]:
        """The Map over the other page ranges, then the steps from Chunk to Finalize, in ``lane``'s
        functions.

        ParseRanges: the page ranges after the first (planned by Parse's first task), each in the
        Parse function, whose memory and time are then the range's; MaxConcurrency bounds the copies
        of the PDF read at once. Items are {first_page, last_page, max_ocr_pages}: text stays in S3.
        A document of one range skips it (the Lane choice goes straight to Chunk: an empty Map is a
        state transition that does nothing). Embed: the embedding tasks Chunk planned; MaxConcurrency
        bounds the calls in flight to the embedding model, whose quota is the bottleneck (retrying
        into a throttled model only makes it worse). The bulk lane takes the smaller share of both.
        """
        in_bulk = lane is Lane.BULK

        def named(stage: str) -> str:
            return bulk(stage) if in_bulk else stage

        lanes = self._config.lanes
        parse_concurrency = lanes.bulk_parse_max_concurrency if in_bulk else self._config.parsing.max_concurrency
        embed_concurrency = lanes.bulk_embed_max_concurrency if in_bulk else self._config.embedding.max_concurrency
        parse_ranges = self._fan_out(
            named("ParseRanges"),
            f"{named('ParseRange')}Task",
            "$.parse_tasks",
            "range",
            named("Parse"),
            parse_concurrency,
        )
        return parse_ranges, [
            self._task(named("Chunk")),
            self._fan_out(
                named("Embed"), f"{named('Embed')}Task", "$.embed_tasks", "task", named("Embed"), embed_concurrency
            ),
            self._task(named("Index")),
        ]

    def _batch_embed_steps(
        self,
        steps: list[sfn.TaskStateBase | sfn.Map],
        chained: Callable[[list[sfn.TaskStateBase | sfn.Map]], sfn.Chain],
        finalize: sfn.Chain,
    ) -> sfn.Chain:
        """The bulk lane from Chunk with batch inference: Chunk -> EmbedBatchBulk -> a Choice on
        ``$.embed_batch.phase``: WAITING waits ``$.embed_batch.wait_seconds`` and looks again;
        ON_DEMAND takes the Embed Map (too few texts for a job); DONE goes on to Index."""
        chunk, embed_map, index = steps
        to_index = chained([index]).next(finalize)
        on_demand = chained([embed_map]).next(to_index)
        look = self._task(bulk(EMBED_BATCH.name))
        wait = sfn.Wait(self, bulk("EmbedBatchWait"), time=sfn.WaitTime.seconds_path("$.embed_batch.wait_seconds"))
        phase = sfn.Choice(self, bulk("EmbedBatchPhase"), comment="The batch inference job's phase (EmbedBatch)")
        phase.when(sfn.Condition.string_equals("$.embed_batch.phase", BatchPhase.WAITING.value), wait.next(look))
        phase.when(sfn.Condition.string_equals("$.embed_batch.phase", BatchPhase.ON_DEMAND.value), on_demand)
        phase.otherwise(to_index)
        return chained([chunk, look]).next(phase)

    def _state_machine(self) -> sfn.StateMachine:
        mark_failed = tasks.LambdaInvoke(
            self,
            "MarkFailed",
            lambda_function=self.functions["MarkFailed"],
            payload_response_only=True,
            retry_on_service_exceptions=False,
            result_path="$",
        )
        mark_failed.add_retry(
            errors=TRANSIENT_ERRORS,
            interval=Duration.seconds(1),
            backoff_rate=2.0,
            max_attempts=3,
            jitter_strategy=sfn.JitterType.FULL,
        )
        failed = mark_failed.next(
            sfn.Fail(self, "Failed", error="DocumentFailed", cause="The document is FAILED: see its status record.")
        )

        def chained(steps: list[sfn.TaskStateBase | sfn.Map]) -> sfn.Chain:
            chain: sfn.Chain | None = None
            for step in steps:
                step.add_catch(failed, errors=["States.ALL"], result_path="$.error")
                chain = sfn.Chain.start(step) if chain is None else chain.next(step)
            assert chain is not None
            return chain

        # Finalize ends the execution itself: a Succeed state after it would be one more state
        # transition a document, billed, doing nothing.
        finalize = chained([self._task("Finalize")])
        # One Choice on $.lane and $.parse_tasks (set by Parse's first task): a document of one range
        # goes straight to Chunk, never through a Map over no items (docs/architecture.md, "Lanes").
        lane_choice = sfn.Choice(
            self,
            "Lane",
            comment=(
                "Documents above lanes.bulkAbovePages pages run in the bulk lane; "
                "documents of one page range skip the Map over the others."
            ),
        )
        has_more_ranges = sfn.Condition.is_present("$.parse_tasks[0]")
        for lane in (Lane.BULK, Lane.STANDARD):
            parse_ranges, steps = self._lane_steps(lane)
            if lane is Lane.BULK and self.batch_role is not None:
                from_chunk = self._batch_embed_steps(steps, chained, finalize)
            else:
                from_chunk = chained(steps).next(finalize)
            chained([parse_ranges]).next(from_chunk)
            in_lane = sfn.Condition.string_equals("$.lane", lane.value)
            if lane is Lane.BULK:
                lane_choice.when(sfn.Condition.and_(in_lane, has_more_ranges), parse_ranges)
                lane_choice.when(in_lane, from_chunk)
            else:
                lane_choice.when(has_more_ranges, parse_ranges)
                lane_choice.otherwise(from_chunk)
        definition = chained([self._task("Validate"), self._task("Parse")]).next(lane_choice)

        stack_name = Stack.of(self).stack_name
        # /aws/vendedlogs/ keeps the log group out of the size-limited CloudWatch Logs resource policy;
        # the suffix lets a retained group outlive the stack without blocking the next deploy.
        log_group = new_log_group(
            self,
            "StateMachineLogs",
            self._config,
            log_group_name=unique_name(f"/aws/vendedlogs/states/{stack_name}-workflow-"),
        )

        state_machine = sfn.StateMachine(
            self,
            "StateMachine",
            definition_body=sfn.DefinitionBody.from_chainable(definition),
            state_machine_type=sfn.StateMachineType.STANDARD,
            timeout=Duration.minutes(self._config.workflow.timeout_minutes),
            tracing_enabled=True,
            logs=sfn.LogOptions(destination=log_group, level=sfn.LogLevel.ALL, include_execution_data=False),
            comment=(
                "rag-ingest: Validate -> Parse -> Lane -> ParseRanges (documents of more than one page range) "
                "-> Chunk -> Embed -> Index -> Finalize (the bulk lane: the same steps in the *Bulk functions)"
            ),
        )
        acknowledge(
            state_machine.role,
            "AwsSolutions-IAM5",
            "CDK's Lambda invoke grant covers the function's versions/aliases (<arn>:*); log delivery and X-Ray "
            "actions support no resource-level permissions, so AWS requires '*'.",
            "Resource::*",
            *(f"Resource::{arn_ref(function)}:*" for function in self.functions.values()),
        )
        return state_machine
