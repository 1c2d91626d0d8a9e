"""X-Ray tracing: one Powertools Tracer, the handlers' and the adapters'.

Handlers decorate with ``tracer.capture_lambda_handler``; each adapter class (S3, DynamoDB, Step
Functions, EventBridge, SQS, OpenSearch, Bedrock) with :func:`traced`, so a slow document shows
as one subsegment per call (``## rag_ingest.adapters.object_store.ObjectStore.read``: module and
qualified name), around the botocore subsegments the tracer's auto-patching adds.

Responses are never captured: they hold PDF bytes, vectors and passages (too large for a trace,
and tenant data). Tracing is off outside Lambda and when ``POWERTOOLS_TRACE_DISABLED`` is set
(the local runtime sets it: no X-Ray daemon listens there).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any, TypeVar

from aws_lambda_powertools import Tracer

tracer = Tracer()

_Class = TypeVar("_Class", bound=type)
_Result = TypeVar("_Result")


def traced(cls: _Class) -> _Class:
    """Trace every public method of ``cls`` (plain and generator functions; not static, class
    or property members) as a subsegment named ``## <module>.<Class>.<method>``."""
    for name, member in list(vars(cls).items()):
        if name.startswith("_") or not inspect.isfunction(member):
            continue
        setattr(cls, name, tracer.capture_method(capture_response=False)(member))
    return cls


def in_callers_trace(function: Callable[[], _Result]) -> Callable[[], _Result]:
    """``function``, to be called in another thread inside the calling thread's current X-Ray
    entity. The SDK keeps the current entity per thread: without this, the other thread's
    subsegments would hang off a facade segment of their own instead of the caller's subsegment.
    Call it in the calling thread (it reads the entity there); with tracing off it is ``function``."""
    if tracer.disabled:
        return function
    # Typed as Powertools' BaseProvider; it is the X-Ray SDK's recorder (Tracer's default provider).
    recorder: Any = tracer.provider
    entity = recorder.get_trace_entity()
    if entity is None:  # no segment to carry (the SDK logged that the context is missing)
        return function

    def run() -> _Result:
        recorder.set_trace_entity(entity)
        try:
            return function()
        finally:
            recorder.clear_trace_entities()

    return run
