"""The planner node on real workers: it plans a sub-graph (scripted, or a local OpenAI-compatible
server), records the plan as a hidden generated version, runs it as a child to completion, and a retry
reuses the recorded plan (no second LLM call) while a refused plan fails the step naming the node."""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

import pytest

import tests.workflows.functions  # noqa: F401 - registers tests.* functions in this process
from tests.conftest import chain
from tests.workflows.functions import EXTRA_FUNCTIONS_ENV, calls_so_far
from tests.workflows.support import assert_history_consistent, expect_status, py
from workflows import runtime
from workflows.authoring.definitions import save_document, save_version
from workflows.examples import GRAPHS_DIR, load_example
from workflows.models import StepRun, WorkflowDefinition, WorkflowInstance

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def worker_env(worker_env: dict[str, str]) -> dict[str, str]:
    worker_env.update(EXTRA_FUNCTIONS_ENV)
    return worker_env


def planner(**config: Any) -> dict[str, Any]:
    extra = {key: config.pop(key) for key in ("retry",) if key in config}
    return {"id": "plan", "type": "planner", "config": {"objective": "Do {{ context.what }}", **config}, **extra}


def test_the_demo_plans_and_runs_its_plan_as_a_child(processes: Any, redis_conn: Any) -> None:
    version, _ = save_document(load_example(GRAPHS_DIR / "planner_demo.json"))
    parent = runtime.start_instance(version, {"question": "How do I reset my password?"})
    processes.worker("default")
    processes.worker("ai")
    processes.scheduler()

    expect_status(parent, "completed", timeout=60)
    [child] = WorkflowInstance.objects.filter(parent_step__instance=parent)
    generated = WorkflowDefinition.objects.get(slug="planner-demo--plan-plan")
    assert child.status == "completed" and child.version.definition == generated and generated.archived
    assert child.state["depth"] == 1 and child.input == {"question": "How do I reset my password?"}
    step = StepRun.objects.get(instance=parent, node_id="plan")
    assert [n["id"] for n in step.output["plan"]["nodes"]] == ["start", "answer", "filter", "done"]
    assert step.output["validation"] == {"valid": True, "issues": []}
    assert step.output["child"] == child.pk and step.output["workflow"] == "planner-demo--plan-plan"
    # Bounded by the parent: no more transitions or budget than the parent had left when it planned.
    assert step.output["plan"]["settings"]["max_transitions"] == 20
    assert 0 < step.output["plan"]["settings"]["budget_usd"] <= 1
    assert parent.context["planned"]["reply"] == "Your new ******** is on its way by email."
    # The planning call's usage and the child's both count toward the parent.
    assert parent.tokens == child.tokens + 900 + 160 and child.tokens == 52
    assert parent.cost_usd == child.cost_usd + Decimal("0.0003")
    assert_history_consistent(parent)
    assert_history_consistent(child)


def test_a_retry_reuses_the_recorded_plan_and_makes_no_second_llm_call(processes: Any, redis_conn: Any) -> None:
    from tests.support.llm_server import LLMTestServer

    plan = chain(py("flaky", "tests.fail_counted", args={"counter": "{{ context.counter }}", "failures": 1}))
    save_version("replanned", chain(planner(provider="openai", model="planner-model", max_nodes=5,
                                            allowed_functions=["tests.fail_counted"],
                                            input={"counter": "{{ context.counter }}"},
                                            retry={"max_attempts": 2, "backoff_s": 0})))
    with LLMTestServer() as server:
        server.configure(reply=json.dumps(plan))
        env = {"STEADYFLOW_LLM_BASE_URL": server.url}
        parent = runtime.start_instance(WorkflowDefinition.objects.get(slug="replanned").latest_version(),
                                        {"what": "a flaky thing", "counter": "planner-retry"})
        processes.worker("default", env=env)
        processes.scheduler(env=env)
        expect_status(parent, "completed", timeout=60)
        # One planning call for two attempts: the retry found the plan its first attempt recorded.
        assert len(server.requests) == 1
        sent = server.requests[0]["body"]
        assert sent["model"] == "planner-model" and sent["messages"][1]["content"] == "Objective: Do a flaky thing"
        assert "- tests.fail_counted" in sent["messages"][0]["content"]
        assert "- tests.echo" not in sent["messages"][0]["content"]  # the allow-list only
    children = list(WorkflowInstance.objects.filter(parent_step__instance=parent).order_by("id"))
    assert [c.status for c in children] == ["failed", "completed"]
    assert len({c.version_id for c in children}) == 1
    assert WorkflowDefinition.objects.get(slug="replanned--plan-plan").versions.count() == 1
    assert [c.idempotency_key for c in children] == [f"subflow:{parent.pk}:plan:1:1", f"subflow:{parent.pk}:plan:1:2"]
    assert calls_so_far("planner-retry") == 2
    step = StepRun.objects.get(instance=parent, node_id="plan")
    assert step.attempt == 2 and step.output["child"] == children[1].pk
    assert step.output["planning_usage"]["model"] == "planner-model"
    assert_history_consistent(parent)


def test_a_refused_plan_fails_the_step_naming_the_node(processes: Any, redis_conn: Any) -> None:
    cyclic = chain(py("again", "noop"))
    cyclic["edges"].append({"source": "again", "target": "again"})
    unknown = chain(py("tool", "os.system"))
    slugs = {}
    for name, plan in (("cyclic", cyclic), ("unknown", unknown)):
        save_version(f"refused-{name}", chain(planner(provider="scripted", script=[{"text": json.dumps(plan)}])))
        slugs[name] = runtime.start_instance(
            WorkflowDefinition.objects.get(slug=f"refused-{name}").latest_version(), {"what": name})
    processes.worker("default")
    processes.scheduler()
    for name, fragment in (("cyclic", "unconditional cycle again -> again"),
                           ("unknown", "node 'tool': function 'os.system' is not registered")):
        parent = slugs[name]
        expect_status(parent, "failed", timeout=60)
        step = StepRun.objects.get(instance=parent, node_id="plan")
        assert "node 'plan': the plan was refused" in step.error["message"] and fragment in step.error["message"]
        assert any(issue.get("node") in ("again", "tool") for issue in step.error["issues"]), step.error
        assert step.error["plan"]["nodes"][1]["id"] in ("again", "tool")  # the refused plan, recorded
        assert not WorkflowInstance.objects.filter(parent_step__instance=parent).exists()
        assert not WorkflowDefinition.objects.filter(slug=f"refused-{name}--plan-plan").exists()
