"""Retention: finished instances' history is deleted once past STEADYFLOW_RETENTION_DAYS, after the
daily rollup has kept the charts' figures; active instances' superseded checkpoints are pruned
(docs/operating-retention.md).

The scheduler's tick (workflows/scheduler/reconciler.py) calls `runner.schedule.run_if_due`: a run rolls
up finished days, deletes the history of one batch of instances (STEADYFLOW_RETENTION_BATCH, within about
RUN_BUDGET_S of work) and prunes checkpoints; it runs again on the next tick while there is more to do, else after
IDLE_EVERY. `manage.py retention` runs it by hand (with --dry-run).
"""
