"""Workers: the processes that run steps. The RQ worker classes for the synchronous queues (sync.py),
the `ai` queue's many-in-flight consumer (aiworker.py, with every private RQ call in rq_adapter.py,
and group commits in groupcommit.py), putting step jobs on queues (dispatch.py) and riding out a
Redis outage (redis_outage.py). The RQ job entry points stay in workflows/jobs.py (queued jobs name
them by dotted path in Redis); the ORM-safe thread pool is workflows/db_threads.py.

May import: the engine, the runtime's facade (`workflows.runtime`), stores, models, adapters, live
and observability. Never the scheduler, operators or dashboard/. dispatch.py is a leaf (RQ and
settings only) that the runtime's post-commit effects use (tests/layers.py places it low).
"""
