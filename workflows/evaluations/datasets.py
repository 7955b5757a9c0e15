"""Datasets as JSONL: one row a line, `{"input": {...}, "expect": [...], "label": "..."}` (expect and label
optional). A malformed line is refused with its number and nothing of the file is saved."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from django.db import transaction
from django.utils.text import slugify

from workflows.evaluations import expectations
from workflows.evaluations.models import Dataset, DatasetRow
from workflows.models import WorkflowDefinition

MAX_ROWS = 1000
MAX_LINE_BYTES = 200_000


class DatasetInvalid(Exception):
    """A dataset that cannot be saved; the message names the line."""


def parse(lines: Iterable[str]) -> list[dict[str, Any]]:
    rows = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        if len(line.encode()) > MAX_LINE_BYTES:
            raise DatasetInvalid(f"line {number}: longer than {MAX_LINE_BYTES} bytes")
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise DatasetInvalid(f"line {number}: not valid JSON: {exc.msg} (column {exc.colno})") from None
        if not isinstance(row, dict) or not isinstance(row.get("input", {}), dict):
            raise DatasetInvalid(f"line {number}: a row is an object with an 'input' object")
        unknown = sorted(set(row) - {"input", "expect", "label"})
        if unknown:
            raise DatasetInvalid(f"line {number}: unknown key(s) {', '.join(unknown)} (input, expect, label)")
        expect = row.get("expect", [])
        if not isinstance(expect, list):
            raise DatasetInvalid(f"line {number}: 'expect' must be a list of expectations")
        for index, expectation in enumerate(expect, start=1):
            found = expectations.problems(expectation)
            if found:
                raise DatasetInvalid(f"line {number}, expectation {index}: {'; '.join(found)}")
        rows.append({"input": row.get("input", {}), "expect": expect, "label": str(row.get("label", ""))[:200]})
        if len(rows) > MAX_ROWS:
            raise DatasetInvalid(f"line {number}: a dataset holds at most {MAX_ROWS} rows")
    if not rows:
        raise DatasetInvalid("the file has no rows")
    return rows


def save(definition: WorkflowDefinition, name: str, text: str, *, user: Any = None,
         description: str = "") -> Dataset:
    """Create or replace the dataset `name` of a workflow from JSONL text (all or nothing)."""
    if not name or slugify(name) != name:
        raise DatasetInvalid(f"name {name!r} is not valid: use lowercase letters, digits and -")
    rows = parse(text.splitlines())
    with transaction.atomic():
        dataset, _ = Dataset.objects.get_or_create(definition=definition, name=name,
                                                   defaults={"created_by": user if getattr(user, "pk", None)
                                                             else None, "description": description})
        if dataset.evaluations.exists():
            raise DatasetInvalid(f"dataset {name!r} has evaluations: import it under a new name to keep them "
                                 "comparable")
        dataset.rows.all().delete()
        DatasetRow.objects.bulk_create([DatasetRow(dataset=dataset, number=n, **row)
                                        for n, row in enumerate(rows, start=1)])
    return dataset


def export(dataset: Dataset) -> str:
    return "".join(json.dumps({"input": row.input, "expect": row.expect, **({"label": row.label} if row.label
                                                                             else {})}, sort_keys=True) + "\n"
                   for row in dataset.rows.order_by("number"))
