"""The rag-ingest stack: constructs wired together; each owns its resources and outputs."""

from __future__ import annotations

from typing import Any

from aws_cdk import Aws, Stack, Tags
from constructs import Construct

from infra.config import RagIngestConfig
from infra.constructs.api import Api
from infra.constructs.function import FunctionFactory
from infra.constructs.intake import Intake
from infra.constructs.layer import SharedLayer
from infra.constructs.live_answers import LiveAnswers
from infra.constructs.live_status import LiveStatus
from infra.constructs.mcp import McpServer
from infra.constructs.monitoring import Monitoring
from infra.constructs.operations import Operations
from infra.constructs.reconciler import Reconciler
from infra.constructs.search import Search
from infra.constructs.sources import Sources
from infra.constructs.storage import Storage
from infra.constructs.tenant_usage import TenantUsage
from infra.constructs.web_hosting import WebHosting
from infra.constructs.webhooks import Webhooks
from infra.constructs.workflow import EVENT_BUS_NAME, Workflow


class RagIngestStack(Stack):
    def __init__(self, scope: Construct, construct_id: str, *, config: RagIngestConfig, **kwargs: Any) -> None:
        super().__init__(
            scope,
            construct_id,
            description="rag-ingest: serverless PDF ingestion for retrieval-augmented generation",
            **kwargs,
        )
        self.config = config
        Tags.of(self).add("project", "rag-ingest")

        layer = SharedLayer(self, "Layer", config.functions.architecture)
        self.storage = Storage(self, "Storage", config=config)
        factory = FunctionFactory(
            config=config, layer=layer.layer, documents_table_name=self.storage.documents_table.table_name
        )
        # Search comes first: the stage functions need its endpoint; each grant_index_access
        # then adds the role to the domain's access policy.
        self.search = Search(self, "Search", config=config)
        self.workflow = Workflow(
            self, "Workflow", config=config, factory=factory, storage=self.storage, search=self.search
        )
        self.intake = Intake(
            self,
            "Intake",
            config=config,
            factory=factory,
            storage=self.storage,
            state_machine=self.workflow.state_machine,
            search=self.search,
        )
        # The page's distribution first: its URL is a CORS origin of the API and of the documents
        # bucket (browser uploads) and the app client's callback URL.
        self.web = WebHosting(self, "Web", config=config, access_logs_bucket=self.storage.access_logs_bucket)
        self.api = Api(
            self,
            "Api",
            config=config,
            factory=factory,
            storage=self.storage,
            search=self.search,
            state_machine=self.workflow.state_machine,
        )
        self.api.add_web_app(self.web.url)
        self.sources = Sources(
            self, "Sources", config=config, factory=factory, storage=self.storage, search=self.search
        )
        self.sources.serve_api(self.api.function, config)
        # The tools of `rag-ingest mcp` over streamable HTTP, behind the same HTTP API and user pool.
        self.mcp = McpServer(
            self, "Mcp", config=config, factory=factory, storage=self.storage, search=self.search, api=self.api
        )
        self.live = LiveStatus(
            self,
            "Live",
            config=config,
            factory=factory,
            documents_table=self.storage.documents_table,
            user_pool=self.api.user_pool,
            user_pool_client=self.api.user_pool_client,
        )
        # Answers streamed over the same WebSocket API, as the connection's principal.
        self.live_answers = LiveAnswers(
            self, "LiveAnswers", config=config, factory=factory, live=self.live, search=self.search
        )
        self._publish_page(config)
        self.operations = Operations(
            self,
            "Operations",
            config=config,
            factory=factory,
            storage=self.storage,
            queue=self.intake.queue,
            dead_letter_queue=self.intake.dead_letter_queue,
            state_machine=self.workflow.state_machine,
        )
        # Records, uploads and the index compared on a schedule (drift repaired, counted, alarmed).
        self.reconciler = Reconciler(
            self,
            "Reconciler",
            config=config,
            factory=factory,
            storage=self.storage,
            search=self.search,
            state_machine=self.workflow.state_machine,
        )
        self.sources.serve_reconciler(self.reconciler.function)
        # Signed webhooks: the pipeline's document events, fanned out to the tenants' endpoints.
        self.webhooks = Webhooks(
            self,
            "Webhooks",
            config=config,
            factory=factory,
            api_function=self.api.function,
            event_bus_name=EVENT_BUS_NAME,
        )
        # Per-tenant limits: the API checks them; intake counts bytes and Parse (both lanes) pages.
        self.tenant_usage = TenantUsage(self, "TenantUsage", config=config)
        self.tenant_usage.serve("Api", self.api.function)
        self.tenant_usage.serve("Intake", self.intake.function)
        for name, function in self.workflow.functions.items():
            self.tenant_usage.serve(name, function)  # granted to Parse only (infra/permissions.py)
        self.monitoring = Monitoring(
            self,
            "Monitoring",
            config=config,
            queue=self.intake.queue,
            dead_letter_queue=self.intake.dead_letter_queue,
            state_machine=self.workflow.state_machine,
            functions={
                "Api": self.api.function,
                "Mcp": self.mcp.function,
                "LiveAnswers": self.live_answers.function,
                "Intake": self.intake.function,
                "Redrive": self.operations.redrive_function,
                "Reaper": self.operations.reaper_function,
                "Reconciler": self.reconciler.function,
                **self.workflow.functions,
                **self.webhooks.functions,
                **self.sources.functions,
            },
            stage_functions=self.workflow.functions,
        )
        # The domain's health alarms live with the domain, and page through the one alarm topic.
        self.search.alarm_to(self.monitoring.topic)
        self.live.alarm_to(self.monitoring.topic)
        self.webhooks.alarm_to(self.monitoring.topic)
        self.reconciler.alarm_to(self.monitoring.topic)

    def _publish_page(self, config: RagIngestConfig) -> None:
        """The page's config.json, and the origins its Content-Security-Policy lets it connect to."""
        domain = self.api.user_pool_domain
        cognito_url = domain.base_url()
        self.web.allow_connections_to(self.live.origin, cognito_url)
        if self.web.has_custom_domain:
            # The page's origin is a literal: the CSP can name the API and the bucket exactly.
            bucket = self.storage.bucket
            self.web.allow_connections_to(
                self.api.http_api.api_endpoint,
                f"https://{bucket.bucket_name}.s3.{Aws.URL_SUFFIX}",
                f"https://{bucket.bucket_regional_domain_name}",
            )
        else:
            # The API's and the bucket's CORS origins name the distribution; a CSP on the distribution
            # naming them back would be a reference cycle, so it names them by regional wildcard.
            self.web.allow_connections_to(*WebHosting.regional_wildcards())
        self.web.publish(
            api_url=self.api.http_api.api_endpoint,
            websocket_url=self.live.url,
            cognito_domain_url=cognito_url,
            client_id=self.api.user_pool_client.user_pool_client_id,
            max_upload_bytes=config.upload.max_upload_bytes,
        )
