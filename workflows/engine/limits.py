"""Bounds on every number a graph (or an operator's grant) can set.

A number past these is refused at validation with a message naming the field and the bound, so no
stored value can overflow a database column, a timedelta or a timer later (a budget of 1e30 used to
be accepted at save and then break every page listing the instance). docs/graph-format.md lists
them; the editor gets them through the node and settings schemas.
"""

from __future__ import annotations

from decimal import Decimal

DAY_S = 86_400
YEAR_S = 366 * DAY_S

MAX_TRANSITIONS = 1_000_000          # node activations per instance (settings.max_transitions)
MAX_TTL_S = YEAR_S                   # an instance's deadline (settings.ttl_s)
MAX_CONCURRENCY = 10_000             # settings.max_concurrency
MAX_BUDGET_USD = 1_000_000           # settings.budget_usd; the column holds < 10^8 with 6 decimals
MAX_BUDGET_TOKENS = 10**12           # settings.budget_tokens
MAX_STEP_TIMEOUT_S = DAY_S           # a node's timeout_s, an http node's timeout_s
MAX_ATTEMPTS = 100                   # retry.max_attempts
MAX_BACKOFF_S = DAY_S                # retry.backoff_s and retry.max_backoff_s
MAX_WAIT_S = YEAR_S                  # a wait node's seconds
MAX_LLM_TOKENS = 10_000_000          # an llm node's max_tokens
MAX_LLM_CACHE_TTL_S = 90 * DAY_S    # an llm node's cache.ttl_s
MAX_SCRIPT_DELAY_S = DAY_S           # a scripted llm response's delay_s
MAX_TOOL_ROUNDS = 100                # an llm node's max_tool_rounds (each round also counts as a transition)
MAX_SCRIPT_CHUNK_CHARS = 100_000     # a scripted llm response's chunk_chars (streaming)
MAX_POSITION = 1e7                   # the editor's node coordinates
MAX_SUBWORKFLOW_DEPTH = 10          # a subworkflow node's max_depth (levels of nesting below a top-level instance)

# The size of one graph. Scheduling and validation are linear in it (graph.find_loops), so these bound
# the work and memory one version costs every process that runs it (each caches the parsed graph),
# not an algorithm's blow-up. 1,000 nodes is >100x the largest example (9) and more than the editor and
# the live view can show legibly; an instance's state (visits and join records per node) stays well
# inside the 1 MB payload limit. 5,000 edges is five per node on average: room for routers with many
# routes and wide fan-out/fan-in (a 1,000-way split and join needs 2,000).
MAX_NODES = 1_000
MAX_EDGES = 5_000
# Template placeholders (`{{ ... }}` in any string of the graph) plus conditions (edges' `when`,
# routers' rules), counted before anything is parsed: validation parses each, so this bounds the CPU
# one /validate or save costs (a flood of 300,000 cost over a minute). Ten per node of the largest graph.
MAX_GRAPH_EXPRESSIONS = 10_000

# An operator's grants on a review decision (workflows/operators/review.py, the decision form).
MAX_GRANT_TRANSITIONS = MAX_TRANSITIONS
MAX_GRANT_BUDGET_USD = Decimal(MAX_BUDGET_USD)
MAX_GRANT_TOKENS = MAX_BUDGET_TOKENS
MAX_GRANT_TTL_S = MAX_TTL_S


def number(minimum: float | None = None, maximum: float | None = None, *, exclusive_minimum: float | None = None,
           integer: bool = False, **extra: object) -> dict[str, object]:
    """A JSON Schema for a bounded number (the bounds travel to the editor with the schema)."""
    schema: dict[str, object] = {"type": "integer" if integer else "number", **extra}
    if minimum is not None:
        schema["minimum"] = minimum
    if exclusive_minimum is not None:
        schema["exclusiveMinimum"] = exclusive_minimum
    if maximum is not None:
        schema["maximum"] = maximum
    return schema

# JSON documents (request bodies, graphs, edited contexts): nesting deeper than this is refused before
# anything recursive (the JSON decoder, jsonschema, the database's JSON functions) sees it.
MAX_JSON_DEPTH = 64

# What the instance's columns hold after any number of grants: max_transitions is a 32-bit column,
# budget_usd a decimal with 8 digits before the point.
MAX_TOTAL_TRANSITIONS = 2_147_483_647
MAX_TOTAL_BUDGET_USD = Decimal(10_000_000)

# A workflow's declared start input (the graph's `input` key, workflows/engine/inputs.py).
MAX_INPUT_FIELDS = 200               # top-level fields
MAX_INPUT_DEPTH = 8                  # levels of nested object fields
MAX_INPUT_SCHEMA_BYTES = 64_000      # the schema as JSON
