"""Authoring workflows: saving definitions as validated immutable versions (definitions.py), asking an
LLM for a graph (planning.py), the planner node's generated definitions (plans.py) and trying one node
on sample data from the editor (node_trial.py). The example graphs stay in workflows/examples/.

May import: the engine, the runtime's facade, models, credentials and adapters. Never dashboard/.
"""
