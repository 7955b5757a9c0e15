"""Evaluations: run a workflow version over a dataset of inputs with expectations, and compare versions.

- models.py: Dataset (rows of inputs, each with expectations), Evaluation (one version over one
  dataset), EvaluationResult (one row's instance, output, pass/fail, cost, latency).
- expectations.py: the checks (equals, contains, JSON Schema, a python check function, an LLM judge).
- datasets.py: JSONL import/export (a malformed line refused with its number).
- runner.py: starting and advancing an evaluation (bounded concurrency, driven by the scheduler's tick
  or by `manage.py evaluate`), scoring, and the comparison of two evaluations.

An evaluation runs the chosen version's graph as a generated definition `<slug>--eval` (authoring/plans.py
GENERATED_MARK), so its instances are real, durable and budgeted like any, yet hidden from production's
lists, history and figures. May import: models, engine, runtime, authoring.
"""
