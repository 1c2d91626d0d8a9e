"""The rag-ingest stack: constructs wired together; each owns its resources and outputs."""

from __future__ import annotations

from typing import Any

from aws_cdk import Stack, Tags
from constructs import Construct

from infra.config import RagIngestConfig
from infra.constructs.api import Api
from infra.constructs.function import FunctionFactory
from infra.constructs.intake import Intake
from infra.constructs.layer import SharedLayer
from infra.constructs.monitoring import Monitoring
from infra.constructs.operations import Operations
from infra.constructs.search import Search
from infra.constructs.storage import Storage
from infra.constructs.workflow import Workflow


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

        layer = SharedLayer(self, "Layer")
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
        )
        self.api = Api(self, "Api", config=config, factory=factory, storage=self.storage, search=self.search)
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
        self.monitoring = Monitoring(
            self,
            "Monitoring",
            config=config,
            queue=self.intake.queue,
            dead_letter_queue=self.intake.dead_letter_queue,
            state_machine=self.workflow.state_machine,
            functions={
                "Api": self.api.function,
                "Intake": self.intake.function,
                "Redrive": self.operations.redrive_function,
                "Reaper": self.operations.reaper_function,
                **self.workflow.functions,
            },
            stage_functions=self.workflow.functions,
        )
        # The domain's health alarms live with the domain, and page through the one alarm topic.
        self.search.alarm_to(self.monitoring.topic)
