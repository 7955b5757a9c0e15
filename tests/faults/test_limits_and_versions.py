"""Steps that break limits (a timeout, a 10 MB output or input) fail with a clear error and leave the
workers healthy; a definition edited while an instance runs does not touch that instance."""

from __future__ import annotations

import json
import time

import pytest

import tests.faults.functions  # noqa: F401 - registers faults.* functions in this process
from tests.conftest import chain
from tests.faults.conftest import (
    check_effects,
    check_history,
    http,
    new_version,
    py,
    record,
    start,
    statuses,
    step_of,
    wait_all,
)
from workflows import runtime
from workflows.authoring.definitions import save_version
from workflows.engine.errors import PayloadTooLarge
from workflows.models import WorkflowInstance, WorkflowVersion

pytestmark = [pytest.mark.faults, pytest.mark.django_db(transaction=True)]

TEN_MB = 10 * 1024 * 1024


def test_step_that_exceeds_its_timeout(processes, sink):
    """A python step sleeping past timeout_s is interrupted, retried with the same idempotency key,
    then fails the instance with a timeout error; an http step whose server answers too late fails
    the same way. The workers stay healthy: the next instance completes."""
    slow_py = start(chain(py("slow", "faults.effect", {"sink": sink.url(), "seconds": 5}, timeout_s=0.5,
                             retry={"max_attempts": 2, "backoff_s": 0.1})))[0]
    slow_http = start(chain(http("slow", sink, delay=5, timeout_s=0.5, retry={"max_attempts": 1})))[0]
    processes.worker("default")
    processes.worker("io")
    processes.scheduler()
    began = time.monotonic()
    wait_all([slow_py, slow_http], "failed")
    took = time.monotonic() - began
    after = start(chain(py("fine", "faults.effect", {"sink": sink.url()}), http("also", sink)))[0]
    wait_all([after], "completed")

    step = step_of(slow_py, "slow")
    assert step.attempt == 2 and step.status == "failed"
    assert step.error["code"] == "timeout"
    assert step.error["message"] == "step slow exceeded its timeout of 0.5 s"
    assert slow_py.error["message"] == "step 'slow' failed: step slow exceeded its timeout of 0.5 s"
    assert sink.deliveries_of(step.idempotency_key) == 2  # both attempts, one key, one effect
    step = step_of(slow_http, "slow")
    # The HTTP client's own timeout or the step's time limit, whichever fires first: both say so.
    assert step.error["code"] == "timeout" and "0.5 s" in step.error["message"]
    instances = [slow_py, slow_http, after]
    histories = [check_history(i) for i in instances]
    effects = check_effects(sink, instances, exact=False)
    record("step exceeds its timeout", statuses=statuses(instances), steps=sum(h.steps for h in histories),
           **effects, both_failed_within_s=round(took, 2))


def test_ten_megabyte_payloads_fail_clearly(processes, sink):
    """A 10 MB function output and a 10 MB HTTP response fail their steps with a clear error (nothing
    of the payload stored); a 10 MB start input is refused before anything is committed."""
    big_py = start(chain(py("big", "faults.big_output", {"bytes": TEN_MB})))[0]
    big_http = start(chain(http("big", sink, retry={"max_attempts": 1}) | {
        "config": {"method": "GET", "url": sink.url(size=TEN_MB)}}))[0]
    processes.worker("default")
    processes.worker("io")
    processes.scheduler()
    wait_all([big_py, big_http], "failed")

    step = step_of(big_py, "big")
    assert step.status == "failed" and step.attempt == 1 and step.output is None
    assert step.error["code"] == "payload_too_large"
    size = len(json.dumps({"blob": "x" * TEN_MB}))
    assert step.error["message"].startswith(f"output of step big is {size} bytes, over the limit of ")
    assert "STEADYFLOW_MAX_PAYLOAD_BYTES" in step.error["message"]
    step = step_of(big_http, "big")
    assert step.status == "failed" and step.output is None
    assert "is larger than 5000000 bytes" in step.error["message"]
    for instance in (big_py, big_http):
        stored = sum(len(str(e.payload)) for e in instance.events.all())
        assert stored < 10_000, "the payload leaked into the event log"

    version = new_version(chain(py("x", "faults.effect")))
    before = WorkflowInstance.objects.count()
    with pytest.raises(PayloadTooLarge, match="start input is .* bytes, over the limit of"):
        runtime.start_instance(version, {"blob": "x" * TEN_MB})
    assert WorkflowInstance.objects.count() == before

    after = start(chain(py("fine", "faults.effect", {"sink": sink.url()})))[0]
    wait_all([after], "completed")
    instances = [big_py, big_http, after]
    histories = [check_history(i) for i in instances]
    record("10 MB output / response / input", statuses=statuses(instances),
           steps=sum(h.steps for h in histories), py_error=step_of(big_py, "big").error["message"][:60])


def test_definition_edited_while_an_instance_runs(processes, sink):
    """Saving v2 while an instance runs on v1: the running instance finishes on v1's graph (its nodes,
    its edges); instances started afterwards run v2. Versions are immutable."""
    v1_graph = chain(http("slow", sink, delay=1.0), http("old_path", sink))
    v1 = save_version("fault-edited", v1_graph)
    running = runtime.start_instance(v1, {})
    processes.worker("io")
    processes.scheduler()
    sink.wait_for_key(f"{running.pk}:slow:1")
    v2 = save_version("fault-edited", chain(http("new_path", sink)))
    assert v2.number == v1.number + 1
    newer = runtime.start_instance(v2, {})

    wait_all([running, newer], "completed")
    assert [s.node_id for s in running.steps.order_by("id")] == ["start", "slow", "old_path", "end"]
    assert [s.node_id for s in newer.steps.order_by("id")] == ["start", "new_path", "end"]
    assert running.version_id == v1.pk and newer.version_id == v2.pk
    assert WorkflowVersion.objects.get(pk=v1.pk).graph == v1_graph
    histories = [check_history(i) for i in (running, newer)]
    effects = check_effects(sink, [running, newer], exact=True)
    record("definition edited while an instance runs", statuses=statuses([running, newer]),
           steps=sum(h.steps for h in histories), **effects)
