"""Every statement the SQL stores send, by name, with its parameters in order.

Written for PostgreSQL with `%s` placeholders; `for_sqlite()` gives the SQLite text of the ones both
databases share (placeholders `?`, no `::jsonb` casts). Column lists follow the models' field
order, so a row hydrates a model positionally (tests/store/test_statements.py checks them against
the models, so a migration cannot silently shift them).

The runtime's rules a statement repeats (the step and review statuses it matches, which instances may
start which steps, the compensation prefix) are written from the Python constants, never typed again
(tests/store/test_statements.py checks each literal against them, and the claim rule against
runtime/activation.may_run for every status).
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import lru_cache

from workflows.engine.event_kinds import COMPENSATE_PREFIX, NODE_STATE_BY_EVENT
from workflows.engine.statuses import INSTANCE_ACTIVE, InstanceStatus, StepStatus
from workflows.models import ReviewStatus

INSTANCE = "workflows_workflowinstance"
STEP = "workflows_steprun"
EVENT = "workflows_event"
CHECKPOINT = "workflows_checkpoint"
DELTA = "workflows_statedelta"
REVIEW = "workflows_reviewitem"

INSTANCE_COLUMNS = (
    "id", "version_id", "status", "input", "context", "state", "loop_count", "max_transitions", "deadline",
    "open_steps", "event_seq", "trace_id", "idempotency_key", "halt_reason", "error", "tokens", "cost_usd",
    "budget_usd", "created_by_id", "created_at", "updated_at", "finished_at", "definition_id", "parent_step_id",
    "priority", "context_seq", "snapshot_seq", "snapshot_bytes", "delta_bytes",
    "context_bytes",
)
STEP_COLUMNS = (
    "id", "instance_id", "node_id", "node_type", "visit", "attempt", "status", "queue", "input", "output",
    "error", "usage", "worker", "lease_token", "lease_until", "due_at", "idempotency_key", "trace_id",
    "created_at", "started_at", "finished_at", "heartbeat_at", "degraded", "priority",
)
# JSON columns, by position in the lists above (hydration decodes them).
INSTANCE_JSON = frozenset({"input", "context", "state", "error"})
STEP_JSON = frozenset({"input", "output", "error", "usage"})


def _cols(prefix: str, columns: tuple[str, ...]) -> str:
    return ", ".join(f"{prefix}.{c}" for c in columns)


def literal(value: str) -> str:
    """A constant as an SQL string literal."""
    return "'" + str(value).replace("'", "''") + "'"


def literals(values: Iterable[str]) -> str:
    return ", ".join(literal(value) for value in sorted(values))


QUEUED, RUNNING, SUCCEEDED = literal(StepStatus.QUEUED), literal(StepStatus.RUNNING), literal(StepStatus.SUCCEEDED)
REVIEW_OPEN, REVIEW_CLOSED = literal(ReviewStatus.OPEN), literal(ReviewStatus.CLOSED)
# The event a claim writes: the one that moves a step to running (engine/event_kinds.py).
STEP_STARTED = next(kind for kind, state in NODE_STATE_BY_EVENT.items() if state == StepStatus.RUNNING)


def may_run(node_id: str, status: str) -> str:
    """runtime/activation.may_run as an SQL condition on a step's node id and its instance's status:
    a compensation step (its node id starts with COMPENSATE_PREFIX) runs while the instance
    compensates, any other while it is active (INSTANCE_ACTIVE)."""
    return (f"CASE WHEN substr({node_id}, 1, {len(COMPENSATE_PREFIX)}) = {literal(COMPENSATE_PREFIX)} "
            f"THEN {status} = {literal(InstanceStatus.COMPENSATING)} "
            f"ELSE {status} IN ({literals(INSTANCE_ACTIVE)}) END")


# -- Reads under the instance lock ----------------------------------------------------------------

LOCK_INSTANCE = f"SELECT {', '.join(INSTANCE_COLUMNS)} FROM {INSTANCE} WHERE id = %s FOR UPDATE"
"""Lock one instance for a transition. Params: instance id."""

LOCK_FOR_FINISH = (
    f"SELECT {_cols('i', INSTANCE_COLUMNS)}, EXISTS (SELECT 1 FROM {STEP} s WHERE s.id = %s "
    f"AND s.status = {RUNNING} AND s.lease_token = %s) FROM {INSTANCE} i WHERE i.id = %s FOR UPDATE OF i"
)
"""Lock the instance and check the lease of the step whose outcome commits, in one round trip.
Params: step id, lease token, instance id. The last column is true while the lease holds."""

# -- Claims and leases --------------------------------------------------------------------------

CLAIM_QUEUED = (
    f"UPDATE {STEP} SET status = {RUNNING}, attempt = attempt + 1, worker = %s, lease_token = %s, "
    f"started_at = %s, heartbeat_at = %s, lease_until = %s WHERE id = %s AND status = {QUEUED} "
    f"RETURNING {', '.join(STEP_COLUMNS)}"
)
"""Claim a queued step (the general path). Params: worker, token, now, now, lease until, step id."""

# One statement for the common claim: lock the instances (first: the lock order of every
# transition), claim the steps whose instance may run them and has not passed its deadline, bump each
# instance's event sequence and write the step_started events. A step it does not claim takes the
# general path.
PG_CLAIM_BATCH = f"""
WITH targets AS (
    SELECT DISTINCT instance_id FROM {STEP} WHERE id = ANY(%s) AND status = {QUEUED}),
locked AS (
    SELECT id, status, deadline FROM {INSTANCE}
    WHERE id IN (SELECT instance_id FROM targets) ORDER BY id FOR UPDATE),
claimed AS (
    UPDATE {STEP} AS s SET status = {RUNNING}, attempt = s.attempt + 1, worker = %s, lease_token = %s,
        started_at = %s, heartbeat_at = %s, lease_until = %s
    FROM locked
    WHERE s.id = ANY(%s) AND s.status = {QUEUED} AND s.instance_id = locked.id
      AND (locked.deadline IS NULL OR locked.deadline >= %s)
      AND {may_run("s.node_id", "locked.status")}
    RETURNING s.*),
numbered AS (
    SELECT claimed.*, row_number() OVER (PARTITION BY claimed.instance_id ORDER BY claimed.id) AS n,
        count(*) OVER (PARTITION BY claimed.instance_id) AS total
    FROM claimed),
bumped AS (
    UPDATE {INSTANCE} AS i SET event_seq = i.event_seq + counted.total, updated_at = %s
    FROM (SELECT instance_id, count(*) AS total FROM claimed GROUP BY instance_id) AS counted
    WHERE i.id = counted.instance_id
    RETURNING i.*),
logged AS (
    INSERT INTO {EVENT} (instance_id, seq, type, node_id, step_id, payload, created_at)
    SELECT bumped.id, bumped.event_seq - numbered.total + numbered.n, {literal(STEP_STARTED)}, numbered.node_id,
        numbered.id, jsonb_build_object('visit', numbered.visit, 'attempt', numbered.attempt,
                                        'worker', numbered.worker, 'queue', numbered.queue),
        %s
    FROM numbered JOIN bumped ON bumped.id = numbered.instance_id)
SELECT {_cols('bumped', INSTANCE_COLUMNS)}, {_cols('numbered', STEP_COLUMNS)}
FROM numbered JOIN bumped ON bumped.id = numbered.instance_id ORDER BY numbered.instance_id, numbered.id
"""
"""Claim any set of queued steps (one job's, a batch job's of one instance, or the ai consumer's
jobs of many): the instances locked in id order (the order every multi-instance writer takes), each
instance's step_started events numbered in step id order. Params: step ids, worker, token, now,
now, lease until, step ids, now, now, now."""

SQLITE_CLAIM_BATCH = (
    f"UPDATE {STEP} SET status = {RUNNING}, attempt = attempt + 1, worker = %s, lease_token = %s, "
    f"started_at = %s, heartbeat_at = %s, lease_until = %s "
    f"WHERE id IN (SELECT value FROM json_each(%s)) AND status = {QUEUED} AND EXISTS (SELECT 1 FROM {INSTANCE} i "
    f"WHERE i.id = {STEP}.instance_id AND (i.deadline IS NULL OR i.deadline >= %s) "
    f"AND {may_run(f'{STEP}.node_id', 'i.status')}) "
    f"RETURNING {', '.join(STEP_COLUMNS)}"
)
"""SQLite's batch claim (the step ids as a JSON array). Params: worker, token, now, now, lease until,
step ids, now."""

SQLITE_BUMP_SEQ_BY = (
    f"UPDATE {INSTANCE} SET event_seq = event_seq + %s, updated_at = %s WHERE id = %s "
    f"RETURNING {', '.join(INSTANCE_COLUMNS)}"
)
"""Params: events added, now, instance id."""

PG_EXTEND_LEASES = (
    f"UPDATE {STEP} AS s SET lease_until = %s, heartbeat_at = %s "
    f"FROM unnest(%s::bigint[], %s::text[]) AS held(id, token) "
    f"WHERE s.id = held.id AND s.lease_token = held.token AND s.status = {RUNNING}"
)
"""Every lease a worker holds, extended in one statement. Params: until, now, step ids, tokens."""

EXTEND_LEASE = (
    f"UPDATE {STEP} SET lease_until = %s, heartbeat_at = %s "
    f"WHERE id = %s AND lease_token = %s AND status = {RUNNING}"
)
"""One lease (SQLite runs it for each in one transaction). Params: until, now, step id, token."""

LATEST_OUTPUT = (
    f"SELECT output, visit FROM {STEP} WHERE instance_id = %s AND node_id = %s AND status = {SUCCEEDED} "
    f"ORDER BY visit DESC LIMIT 1"
)
"""`steps.<node>` in templates and conditions. Params: instance id, node id."""

# -- Writing a unit of work -------------------------------------------------------------------

UPDATE_STEP = (
    f"UPDATE {STEP} SET status = %s, attempt = %s, input = %s::jsonb, output = %s::jsonb, error = %s::jsonb, "
    f"usage = %s::jsonb, worker = %s, lease_token = %s, lease_until = %s, due_at = %s, started_at = %s, "
    f"finished_at = %s, degraded = %s WHERE id = %s AND status = %s AND lease_token = %s"
)
"""A step as the runtime decided it, conditional on the status and lease token it was decided from.
Params: status, attempt, input, output, error, usage, worker, lease token, lease until, due at,
started at, finished at, degraded, step id, expected status, expected lease token."""


def guarded(update: str) -> str:
    """PostgreSQL: an UPDATE that must change exactly one row, else the statement fails (division by
    zero) and with it the transaction. In a pipelined batch that ends in COMMIT, a later check of the
    row count would come too late; this aborts the batch at the guard."""
    return f"WITH changed AS ({update} RETURNING 1) SELECT 1 / count(*) FROM changed"


PG_UPDATE_STEP = guarded(UPDATE_STEP)
"""UPDATE_STEP, failing when the step moved on. Same params."""

_STEP_INSERTED = STEP_COLUMNS[1:]
INSERT_STEP = (
    f"INSERT INTO {STEP} ({', '.join(_STEP_INSERTED)}) VALUES "
    f"(%s, %s, %s, %s, %s, %s, %s, %s::jsonb, %s::jsonb, %s::jsonb, %s::jsonb, %s, %s, %s, %s, %s, %s, "
    f"%s, %s, %s, %s, %s, %s) RETURNING id"
)
"""A new step. Params: the columns of STEP_COLUMNS after id, in order."""

UPDATE_INSTANCE = (
    f"UPDATE {INSTANCE} SET status = %s, state = %s::jsonb, loop_count = %s, "
    f"max_transitions = %s, deadline = %s, open_steps = %s, event_seq = %s, halt_reason = %s, "
    f"error = %s::jsonb, tokens = %s, cost_usd = %s, budget_usd = %s, updated_at = %s, finished_at = %s, "
    f"context_seq = %s, snapshot_seq = %s, snapshot_bytes = %s, delta_bytes = %s, context_bytes = %s "
    f"WHERE id = %s"
)
"""The instance as the transition left it, without its context (a delta and a snapshot carry that).
Params: status, state, loop count, max transitions, deadline, open steps, event seq, halt reason,
error, tokens, cost, budget, updated at, finished at, context seq, snapshot seq, snapshot bytes,
delta bytes, context bytes, instance id."""

PG_UPDATE_INSTANCE = guarded(UPDATE_INSTANCE + " AND event_seq = %s")
"""UPDATE_INSTANCE, failing unless the instance is still at the event seq the runtime read: first in
a transition written without the lock held while deciding, it takes the row lock and proves that
nothing changed the instance meanwhile. Params: those of UPDATE_INSTANCE, then the expected seq."""

_EVENT_INSERT = f"INSERT INTO {EVENT} (instance_id, seq, type, node_id, step_id, payload, created_at) VALUES "
_EVENT_ROW = "(%s, %s, %s, %s, %s, %s::jsonb, %s)"
_EVENT_ROW_OF_NEW_STEP = (f"(%s, %s, %s, %s, (SELECT id FROM {STEP} WHERE instance_id = %s AND node_id = %s "
                          f"AND visit = %s), %s::jsonb, %s)")

INSERT_EVENT = _EVENT_INSERT + _EVENT_ROW
"""One event. Params: instance id, seq, type, node id, step id (or NULL), payload, created at."""


@lru_cache(maxsize=128)
def insert_events(of_new_steps: tuple[bool, ...]) -> str:
    """A unit's events in one multi-row INSERT (SQLite; PostgreSQL sends PG_INSERT_EVENTS). Each row
    takes INSERT_EVENT's params, or, where `of_new_steps` says True, those of an event of a step
    inserted earlier in the same batch, found by its unique (instance, node, visit) so the batch needs
    no round trip for the new id: instance id, seq, type, node id, instance id, step node id, step
    visit, payload, created at."""
    return _EVENT_INSERT + ", ".join(_EVENT_ROW_OF_NEW_STEP if new else _EVENT_ROW for new in of_new_steps)


PG_INSERT_EVENTS = (
    f"INSERT INTO {EVENT} (instance_id, seq, type, node_id, step_id, payload, created_at) "
    f"SELECT e.instance_id, e.seq, e.type, e.node_id, CASE WHEN e.visit IS NULL THEN e.step_id ELSE "
    f"(SELECT s.id FROM {STEP} s WHERE s.instance_id = e.instance_id AND s.node_id = e.step_node "
    f"AND s.visit = e.visit) END, e.payload, e.created_at "
    f"FROM unnest(%s::bigint[], %s::integer[], %s::text[], %s::text[], %s::bigint[], %s::text[], %s::integer[], "
    f"%s::jsonb[], %s::timestamptz[]) "
    f"AS e(instance_id, seq, type, node_id, step_id, step_node, visit, payload, created_at)"
)
"""The events of one unit, or of every unit of a batch (a bulk start, a group commit), in one
statement of one text (prepared once, whatever their number), as parallel arrays. An event of a step
inserted earlier in the same batch has a NULL step id and that step's node id and visit: its id is
looked up by its unique (instance, node, visit). Params, the arrays: instance ids, seqs, types, node
ids, step ids, step node ids, step visits, payloads, created ats."""

INSERT_CHECKPOINT = (
    f"INSERT INTO {CHECKPOINT} (instance_id, seq, state, checksum, created_at) VALUES (%s, %s, %s::jsonb, %s, %s)"
)
"""Params: instance id, seq, state, checksum, created at."""

INSERT_DELTA = (
    f"INSERT INTO {DELTA} (instance_id, seq, delta, checksum, created_at) VALUES (%s, %s, %s::jsonb, %s, %s)"
)
"""A transition's state delta. Params: instance id, seq, delta, checksum, created at."""

PG_DELTA_KEY_SEQS = (
    f"SELECT k.key, max(d.seq) FROM {DELTA} d CROSS JOIN LATERAL jsonb_object_keys(CASE WHEN "
    f"jsonb_typeof(d.delta -> 'set') = 'object' THEN d.delta -> 'set' ELSE '{{}}'::jsonb END) AS k(key) "
    f"WHERE d.instance_id = %s AND d.seq > %s GROUP BY k.key"
)
"""For each context key the instance's deltas after a seq set: the last seq that set it (the keys
only: the values stay in the database). Params: instance id, seq."""

SQLITE_DELTA_KEY_SEQS = (
    f"SELECT j.key, max(d.seq) FROM {DELTA} d, json_each(d.delta, '$.set') AS j "
    f"WHERE d.instance_id = %s AND d.seq > %s AND json_type(d.delta, '$.set') = 'object' GROUP BY j.key"
)
"""PG_DELTA_KEY_SEQS on SQLite. Params: instance id, seq."""

CLOSE_REVIEWS = (f"UPDATE {REVIEW} SET status = {REVIEW_CLOSED}, decided_at = %s WHERE instance_id = %s "
                 f"AND status = {REVIEW_OPEN}")
"""Nothing is left to decide on an instance that ended. Params: now, instance id."""


# -- A step's commit as one statement (PostgreSQL) -----------------------------------------------

# The types of INSERT_STEP's params: an INSERT ... SELECT (gated below) cannot infer them from the
# columns as INSERT ... VALUES does.
_STEP_TYPES = {"instance_id": "bigint", "visit": "integer", "attempt": "integer", "degraded": "boolean",
               **{c: "jsonb" for c in STEP_JSON},
               **{c: "timestamptz" for c in ("lease_until", "due_at", "created_at", "started_at", "finished_at",
                                             "heartbeat_at")}}
_GATE = "EXISTS (SELECT FROM i)"


def _typed(columns: Iterable[str], types: dict[str, str]) -> str:
    return ", ".join(f"%s::{types.get(c, 'text')}" for c in columns)


def _gated_insert(table: str, columns: tuple[str, ...], types: dict[str, str]) -> str:
    return f"INSERT INTO {table} ({', '.join(columns)}) SELECT {_typed(columns, types)} WHERE {_GATE}"


_WRITES = {
    "u": f"{UPDATE_STEP} AND {_GATE} RETURNING 1",
    "n": f"{_gated_insert(STEP, _STEP_INSERTED, _STEP_TYPES)} RETURNING id",
    "r": f"{CLOSE_REVIEWS} AND {_GATE}",
    "d": _gated_insert(DELTA, ("instance_id", "seq", "delta", "checksum", "created_at"),
                       {"instance_id": "bigint", "seq": "integer", "delta": "jsonb", "created_at": "timestamptz"}),
    "c": _gated_insert(CHECKPOINT, ("instance_id", "seq", "state", "checksum", "created_at"),
                       {"instance_id": "bigint", "seq": "integer", "state": "jsonb", "created_at": "timestamptz"}),
}
_EVENT_TYPES = ("%s::bigint", "%s::integer", "%s::text", "%s::text", "{step}", "%s::jsonb", "%s::timestamptz")


@lru_cache(maxsize=64)
def pg_commit_unit(writes: tuple[str, ...], event_steps: tuple[int, ...]) -> str:
    """A unit of work (one instance's transition) written by ONE statement, sent in autocommit (atomic
    by itself: no BEGIN/COMMIT round trips, one parse/bind/execute). `writes` names its writes after
    the instance's, in order: "u" a step UPDATE (UPDATE_STEP's params), "n" a new step (INSERT_STEP's),
    "r" CLOSE_REVIEWS, "d" INSERT_DELTA, "c" INSERT_CHECKPOINT (each with its params). `event_steps`:
    per event, -1 when its step id is a param (or NULL), else the index of the new step (among the "n"
    writes) it is of, whose id comes from that INSERT's RETURNING (a statement sees no row it inserts).

    The instance's UPDATE, guarded by the event seq the runtime decided on, comes first (CTE `i`);
    every other write is gated on it (`EXISTS (SELECT FROM i)`: evaluated first, so the instance's row
    lock is taken before any step's, the lock order of every transition, and nothing is written when it
    fails). The final SELECT divides by the product of the guarded writes' row counts: when the
    instance or a step moved on, the statement fails (division by zero) and writes nothing. It returns
    the new steps' ids in order. Params: UPDATE_INSTANCE's and the expected seq, then each write's, then
    each event's (instance id, seq, type, node id, [step id when -1], payload, created at)."""
    ctes = [f"i AS ({UPDATE_INSTANCE} AND event_seq = %s RETURNING 1)"]
    counted, new = ["i"], []
    for n, kind in enumerate(writes):
        name = f"{kind}{n}"
        ctes.append(f"{name} AS ({_WRITES[kind]})")
        if kind == "u":
            counted.append(name)
        elif kind == "n":
            new.append(name)
    if event_steps:
        rows = ", ".join("(" + ", ".join(_EVENT_TYPES).format(
            step="%s::bigint" if ref < 0 else f"(SELECT id FROM {new[ref]})") + ")" for ref in event_steps)
        ctes.append(f"e AS ({_EVENT_INSERT.removesuffix(' VALUES ')} SELECT * FROM (VALUES {rows}) AS v "
                    f"WHERE {_GATE})")
    guard = " * ".join(f"(SELECT count(*) FROM {name})" for name in counted)
    returned = "".join(f", (SELECT id FROM {name})" for name in new)
    return f"WITH {', '.join(ctes)} SELECT 1 / ({guard}){returned}"


@lru_cache(maxsize=64)
def numbered(statement: str) -> str:
    """A statement's `%s` placeholders as PostgreSQL's own `$1, $2, ...`, for psycopg's RawCursor,
    which sends the text as it is: psycopg re-parses the `%s` of a statement with more than 50 params
    on every execution (its cache takes only smaller ones), ~0.1 ms of the worker's CPU for a step's
    commit."""
    parts = statement.split("%s")
    return "".join(f"{part}${n}" for n, part in enumerate(parts[:-1], start=1)) + parts[-1]


def for_sqlite(statement: str) -> str:
    """The SQLite text of a shared statement: `?` placeholders, JSON as text (no casts)."""
    return statement.replace("::jsonb", "").replace("%s", "?").replace(" FOR UPDATE OF i", "").replace(
        " FOR UPDATE", "")
