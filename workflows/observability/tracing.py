"""OpenTelemetry: a span per instance and per step attempt, when OTEL_EXPORTER_OTLP_ENDPOINT is set.

Spans are recorded after the commit (the runtime's commit hook, workflows/runtime/observe.py) with
the times the rows hold: a step's span runs from its claim to the commit of its outcome; an
instance's from its creation to the commit that made it final. Nothing is held open while a handler
runs, so a worker killed mid-step leaves no half-made span (its attempt's span is recorded by
whoever commits its outcome: the reconciler, after the lease expires).

Ids follow the instance's stored W3C traceparent (`WorkflowInstance.trace_id`): its trace id is the
trace; its parent id is the instance span's id; each step attempt's span id is derived from the
step id and attempt (`observe.step_span_id`), which is also the parent id the `http` and `llm`
nodes send in their `traceparent` header, so a downstream service's spans hang under the step.
An instance started with a caller's `traceparent` header shares the caller's trace id, and its span's
parent is the caller's span (kept in the instance's state under `observe.CALLER_SPAN`).

Nothing of OpenTelemetry is imported unless tracing is configured.
"""

from __future__ import annotations

import atexit
import os
import threading
from datetime import datetime
from typing import Any

from workflows.engine.nodes.llm_tools import is_tool_step
from workflows.engine.statuses import InstanceStatus, StepStatus
from workflows.observability import genai_spans
from workflows.runtime import engine_config, observe
from workflows.runtime.observe import CALLER_SPAN
from workflows.store.unit import UnitOfWork

FINAL = frozenset({InstanceStatus.COMPLETED, InstanceStatus.FAILED, InstanceStatus.CANCELLED,
                   InstanceStatus.COMPENSATED})
RUNNING = str(StepStatus.RUNNING)

_tracer: Any = None
_provider: Any = None
_chosen = threading.local()  # the ids the next span takes (see _ids_generator)


def enabled_by_environment() -> bool:
    return bool(os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT") or os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"))


def setup(exporter: Any = None, *, batch: bool = True) -> None:
    """Record spans into `exporter` (default: the OTLP/HTTP exporter, configured by the standard
    OTEL_EXPORTER_OTLP_* variables). `batch=False` exports each span as it ends (tests)."""
    global _tracer, _provider
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor

    if exporter is None:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        exporter = OTLPSpanExporter()
    shutdown()
    resource = Resource.create({"service.name": os.environ.get("OTEL_SERVICE_NAME", "steadyflow")})
    _provider = TracerProvider(resource=resource, id_generator=_ids_generator())
    _provider.add_span_processor(BatchSpanProcessor(exporter) if batch else SimpleSpanProcessor(exporter))
    _tracer = _provider.get_tracer("steadyflow")
    observe.add_observer(record_spans)
    atexit.register(shutdown)


def shutdown() -> None:
    """Stop recording; flush what is batched (at exit, or before a test sets up again)."""
    global _tracer, _provider
    observe.remove_observer(record_spans)
    if _provider is not None:
        _provider.shutdown()
    _tracer = _provider = None


def _ids_generator() -> Any:
    from opentelemetry.sdk.trace.id_generator import RandomIdGenerator

    class ChosenIds(RandomIdGenerator):
        """Takes the trace and span id set for the next span in this thread (the ids the rows and
        the outgoing traceparents already carry); random ones otherwise."""

        def generate_span_id(self) -> int:
            chosen = getattr(_chosen, "span", None)
            if chosen is not None:
                _chosen.span = None
                return int(chosen)
            return int(super().generate_span_id())

        def generate_trace_id(self) -> int:
            chosen = getattr(_chosen, "trace", None)
            if chosen is not None:
                _chosen.trace = None
                return int(chosen)
            return int(super().generate_trace_id())

    return ChosenIds()


def _ns(moment: datetime) -> int:
    return int(moment.timestamp() * 1_000_000_000)


def record_spans(unit: UnitOfWork) -> None:
    """The commit observer: a span for each step attempt that left `running` in this unit, and the
    instance's span when the unit made it final."""
    tracer = _tracer
    if tracer is None:
        return
    from opentelemetry import trace
    from opentelemetry.trace import NonRecordingSpan, SpanContext, SpanKind, Status, StatusCode, TraceFlags

    inst = unit.instance
    trace_hex, instance_span_hex = observe.trace_parts(inst.trace_id)
    trace_id, instance_span_id = int(trace_hex, 16), int(instance_span_hex, 16)
    parent = trace.set_span_in_context(NonRecordingSpan(SpanContext(
        trace_id, instance_span_id, is_remote=False, trace_flags=TraceFlags(TraceFlags.SAMPLED))))
    end = _ns(unit.now)
    content = genai_spans.capture_content()
    for change in unit.changes.values():
        status = change.fields.get("status")
        if status is None or change.expect_status != RUNNING:
            continue
        step = change.step
        node = unit.graph.nodes.get(step.node_id)
        usage = change.fields.get("usage") or {}
        node_type = node.type if node is not None else "tool" if is_tool_step(step.node_id) else "compensation"
        attributes: dict[str, Any] = {
            "steadyflow.instance.id": inst.pk, "steadyflow.step.id": step.pk, "steadyflow.node.id": step.node_id,
            "steadyflow.node.type": node_type,
            "steadyflow.step.attempt": step.attempt, "steadyflow.step.visit": step.visit,
            "steadyflow.step.queue": step.queue, "steadyflow.step.worker": step.worker or "",
            "steadyflow.step.outcome": str(status),
            "steadyflow.llm.tokens": int(usage.get("prompt_tokens") or 0) + int(usage.get("completion_tokens") or 0),
            "steadyflow.llm.cost_usd": float(usage.get("cost_usd") or 0.0),
            **genai_spans.attributes(node_type, step.node_id, change.fields.get("input", step.input), change.fields,
                                     engine_config().llm_default_provider, content),
        }
        _chosen.span = int(observe.step_span_id(step.pk, step.attempt), 16)
        span = tracer.start_span(f"step {step.node_id}", context=parent, kind=SpanKind.INTERNAL,
                                 attributes=attributes,
                                 start_time=_ns(step.started_at) if step.started_at else end)
        if status in (StepStatus.FAILED, StepStatus.RETRYING):
            error = change.fields.get("error") or {}
            span.set_status(Status(StatusCode.ERROR, str(error.get("message", ""))[:200]
                                   if isinstance(error, dict) else None))
        span.end(end_time=end)
    if "status" in unit.instance_fields and inst.status in FINAL:
        caller_span = (inst.state or {}).get(CALLER_SPAN) if isinstance(inst.state, dict) else None
        if caller_span:
            # Started with the caller's traceparent: the instance span is a child of the caller's span
            # (the trace id comes with that parent, so only the span id is chosen).
            _chosen.span = instance_span_id
            root = trace.set_span_in_context(NonRecordingSpan(SpanContext(
                trace_id, int(caller_span, 16), is_remote=True, trace_flags=TraceFlags(TraceFlags.SAMPLED))))
        else:
            _chosen.trace, _chosen.span = trace_id, instance_span_id
            root = trace.set_span_in_context(trace.INVALID_SPAN)
        span = tracer.start_span(f"instance {inst.pk}", context=root,
                                 kind=SpanKind.INTERNAL, start_time=_ns(inst.created_at) if inst.created_at else end,
                                 attributes={"steadyflow.instance.id": inst.pk,
                                             "steadyflow.instance.outcome": str(inst.status),
                                             "steadyflow.llm.tokens": int(inst.tokens or 0),
                                             "steadyflow.llm.cost_usd": float(inst.cost_usd or 0)})
        if inst.status != InstanceStatus.COMPLETED:
            span.set_status(Status(StatusCode.ERROR, str(inst.status)))
        span.end(end_time=end)
