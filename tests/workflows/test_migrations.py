"""The models and the migrations agree: a model change without its migration fails here, not in
production. Guards in particular the status fields, whose choices are built from the engine's plain
enums (workflows/models.py, status_choices) and must stay exactly what the migrations recorded."""

from __future__ import annotations

import io

import pytest
from django.core.management import call_command

from workflows.engine.statuses import InstanceStatus, StepStatus
from workflows.models import StepRun, WorkflowInstance


@pytest.mark.django_db
def test_makemigrations_finds_nothing_to_do() -> None:
    out = io.StringIO()
    # --check exits 1 when a migration is missing; SystemExit would fail the test with its output
    call_command("makemigrations", "--check", "--dry-run", stdout=out, stderr=out)
    assert "No changes detected" in out.getvalue()


def test_status_fields_offer_every_status_with_its_titled_label() -> None:
    instance_status = WorkflowInstance._meta.get_field("status")
    step_status = StepRun._meta.get_field("status")
    assert instance_status.choices == [(s.value, s.value.title()) for s in InstanceStatus]
    assert step_status.choices == [(s.value, s.value.title()) for s in StepStatus]
    # plain strings, so a future migration never has to import the engine's enums
    assert type(instance_status.default) is str and instance_status.default == "pending"
    assert type(step_status.default) is str and step_status.default == "queued"
