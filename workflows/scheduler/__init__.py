"""The scheduler's work: the reconciler's tick (what is due, expired leases, lost jobs; the database,
not Redis, says what is due), recovery from checkpoints, finding instances without progress, and
running due work in this process (inprocess.py: one tick, then every queue in burst mode).

May import: the engine, the runtime's facade, models, adapters, authoring (the plan purge), workers
and observability. Never operators or dashboard/.
"""
