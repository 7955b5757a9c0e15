"""What marks a generated definition's slug (plain Python): the planner node's plans and evaluations'
copies. workflows/authoring/plans.py keeps and purges them; the runtime names a planner step's plan
definition and refuses to start a generated one by hand (workflows/runtime/subflows.py).
"""

from __future__ import annotations

PLAN_MARK = "--plan-"  # save_version refuses "--" in a slug: only the planner's definitions have it
# Every generated definition has "--" in its slug (the planner's, and evaluations' copies: "--eval"),
# so all of them are hidden alike from the pages, the API, git exports and the dashboard's figures.
GENERATED_MARK = "--"


def plan_slug(parent_slug: str, node_slug: str) -> str:
    """The definition a planner node's plans are saved under: `<parent-slug>--plan-<node>`."""
    return f"{parent_slug}{PLAN_MARK}{node_slug}"[:100]


def is_generated(slug: str) -> bool:
    return GENERATED_MARK in slug
