"""What every node kind is: a name, a default queue, a JSON Schema for its config, and a handler."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from concurrent.futures import Executor
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from workflows.engine.errors import GraphIssue
from workflows.engine.graph import Graph, Node
from workflows.engine.secrets import ProviderAccount, SecretScope

if TYPE_CHECKING:
    from workflows.engine.llm_cache import ResponseCache


@dataclass(frozen=True)
class EngineConfig:
    """The settings node handlers may read (passed in, so the engine never imports Django settings)."""

    http_allowlist: tuple[str, ...] = ()
    llm_base_url: str = "https://api.openai.com/v1"
    llm_api_key: str = ""
    # The provider of an llm node that names none: `scripted` until a real one is configured
    # (settings: STEADYFLOW_LLM_DEFAULT_PROVIDER), so a node left at its default never calls a paid API.
    llm_default_provider: str = "scripted"
    llm_max_per_provider: int = 400
    mcp_max_per_server: int = 8  # calls in flight to one MCP server, across every worker
    mcp_timeout_s: float = 60.0  # one MCP request's deadline when the node sets none
    # Per server (by credential name): ((name, max calls at once, request deadline s), ...), overriding the two above.
    mcp_server_limits: tuple[tuple[str, int, float], ...] = ()

    def mcp_limits(self, server: str) -> tuple[int, float]:
        """(calls at once, request deadline) for one MCP server."""
        for name, most, timeout_s in self.mcp_server_limits:
            if name == server:
                return most, timeout_s
        return self.mcp_max_per_server, self.mcp_timeout_s
    llm_prices: Mapping[str, Mapping[str, float]] = field(default_factory=dict)
    default_timeout_s: float = 300.0


@dataclass(frozen=True)
class ChildRun:
    """A sub-workflow instance as a subworkflow node sees it (engine/nodes/subworkflow.py)."""

    id: int
    workflow: str
    version: int
    status: str
    depth: int
    context: dict[str, Any] = field(default_factory=dict)
    tokens: int = 0
    cost_usd: float = 0.0


@dataclass(frozen=True)
class RecordedPlan:
    """A planner step's plan, saved as a (hidden) workflow version before its child starts, so a step
    that runs again finds it instead of asking the model again (engine/nodes/planner.py)."""

    workflow: str
    version: int
    graph: dict[str, Any]
    usage: dict[str, Any] = field(default_factory=dict)  # the planning call's tokens and cost


class Subflows(Protocol):
    """How a subworkflow (or planner) node starts its child; storage lives outside the engine
    (runtime/subflows.py)."""

    depth: int  # the calling instance's depth: 0 for a top-level instance

    def remaining(self) -> dict[str, float | int | None]:
        """What the calling instance has left: `budget_usd`, `budget_tokens`, `max_transitions` (None:
        unbounded); a planned child is given no more."""

    def recorded_plan(self) -> RecordedPlan | None:
        """The plan this step (this visit) recorded earlier, or None."""

    def record_plan(self, graph: dict[str, Any], usage: dict[str, Any], objective: str) -> RecordedPlan:
        """Validate `graph` (with credential names) and save it as this step's plan; raises
        PermanentStepError naming the plan's nodes when it is invalid."""

    def child(self, workflow: str, version: int | None, start_input: dict[str, Any]) -> ChildRun:
        """The step's current child: the latest one it started when that one is still active or
        completed; otherwise a new one, started with an idempotency key derived from the step (so a
        replayed step never starts two)."""


class Slots(Protocol):
    """Bounded concurrency shared by every process (an MCP server's calls at once); storage outside the
    engine (workflows/adapters/slots.py)."""

    def acquire(self, key: str, limit: int, hold_s: float) -> str | None:
        """A slot's token, or None when `limit` are taken. A slot lapses after `hold_s` (a holder that
        died does not keep it)."""

    def release(self, key: str, token: str) -> None: ...


class BreakerGate(Protocol):
    """The circuit breaker of one provider, as a node sees it (storage lives outside the engine)."""

    key: str

    def allow(self) -> bool: ...

    def record(self, ok: bool) -> None: ...

    def release(self) -> None:
        """The call ended without a verdict on the provider (a permanent error caused by the request):
        count nothing, but free a half-open trial slot the call held."""


@dataclass
class StepCall:
    """Everything a handler gets for one attempt of one step."""

    node: Node
    config: dict[str, Any]  # templates already rendered
    context: dict[str, Any]
    steps: Mapping[str, Any]
    start_input: dict[str, Any]
    instance_id: int
    visit: int
    attempt: int
    idempotency_key: str
    trace_id: str  # the W3C traceparent of this attempt's span (sent by the http and llm nodes)
    now: datetime
    activated_at: datetime
    engine: EngineConfig
    call_index: int = 0  # how many calls this node made earlier in this instance (scripted LLMs)
    breaker: BreakerGate | None = None
    slots: Slots | None = None  # an mcp node's per-server concurrency (None: unbounded, in tests)
    # Where the blocking helpers (the breaker's gate, the response cache: database calls) run off the
    # event loop. None: the running loop's default executor, which the ai consumer makes its managed
    # database pool. A synchronous worker's step runs on a loop of its own (LLM.run), whose default
    # executor is made and dropped per call: the runtime gives one whose threads live on and close
    # their connections (workflows/db_threads.py), or every call would leave a connection open.
    offload: Executor | None = None
    # `{{ secrets.NAME }}` references are placeholders in `config`: a handler reveals them only in
    # what it sends, and scrubs what comes back (engine/secrets.py).
    secrets: SecretScope | None = None
    provider: ProviderAccount | None = None  # an llm node's provider credential (None: the environment's)
    # An llm node's response cache: given only to a node whose config opts in (workflows/engine/llm_cache.py).
    cache: ResponseCache | None = None
    subflows: Subflows | None = None  # a subworkflow node's way to its child (None outside a worker)
    # An llm node's tool rounds answered so far in this step (engine/nodes/llm_tools.py).
    tool_rounds: list[dict[str, Any]] = field(default_factory=list)
    # Where a streaming llm node (`stream: true`) sends the reply text received so far, as it arrives
    # (engine/llm_stream.py); the ai consumer publishes it to the live view, throttled. Never recorded.
    on_partial: Callable[[str], None] | None = None


@dataclass
class NodeResult:
    output: Any = None
    context_updates: dict[str, Any] = field(default_factory=dict)
    usage: dict[str, Any] | None = None  # {"prompt_tokens", "completion_tokens", "cost_usd", "model"}
    defer_until: datetime | None = None  # not done yet: run again at this time (timers)
    # not done yet: the step waits, with no worker, until this sub-workflow instance ends
    waiting_on: int | None = None
    degraded: bool = False
    # An llm node's model asked for tool calls: the round to commit (engine/nodes/llm_tools.py); the
    # step waits for its tool steps instead of finishing.
    tool_round: dict[str, Any] | None = None


class NodeKind:
    name: ClassVar[str]
    default_queue: ClassVar[str] = "default"
    config_schema: ClassVar[dict[str, Any]] = {"type": "object"}
    # Completes inside the transaction that activates it (start, end): no job, no worker.
    structural: ClassVar[bool] = False
    is_async: ClassVar[bool] = False
    # Activation creates a task for a person (the review queue) instead of a job for a worker.
    awaits_person: ClassVar[bool] = False
    # Starts a child instance and waits for it without a worker (runtime/subflows.py): subworkflow, planner.
    starts_children: ClassVar[bool] = False
    # Whether the node-level settings the editor offers apply to this kind: retries (a step a worker
    # runs and may run again), and the fallback used when an LLM provider's circuit is open.
    retries: ClassVar[bool] = True
    circuit_fallback: ClassVar[bool] = False
    # Whether a step's started -> finished is work done (the dashboard's run-time percentiles): a timer
    # waits for its time, and a person or a child instance is waited for (awaits_person, starts_children).
    measured: ClassVar[bool] = True
    # Keys of config left as written (not template-rendered) before the handler sees them.
    raw_config_keys: ClassVar[frozenset[str]] = frozenset()
    label: ClassVar[str] = ""
    icon: ClassVar[str] = "■"
    color: ClassVar[str] = "#64748b"

    def check(self, node: Node, graph: Graph) -> list[GraphIssue]:
        """Checks beyond the JSON Schema (for example, routes that name no edge)."""
        return []

    def run(self, call: StepCall) -> NodeResult:
        raise NotImplementedError

    async def arun(self, call: StepCall) -> NodeResult:
        return self.run(call)

    def describe(self, engine: EngineConfig | None = None) -> dict[str, Any]:
        """What the editor and the live view know of this kind; `engine` supplies defaults that depend
        on the deployment (the llm node's provider)."""
        return {
            "name": self.name,
            "label": self.label or self.name,
            "default_queue": self.default_queue,
            "schema": self.config_schema,
            "icon": self.icon,
            "color": self.color,
            "structural": self.structural,
            "retries": self.retries and not (self.structural or self.awaits_person or self.starts_children),
            "circuit_fallback": self.circuit_fallback,
        }
