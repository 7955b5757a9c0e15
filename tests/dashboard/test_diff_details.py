"""Field-level diff detail (dashboard/api/diff_details.py): the paths that changed inside a node, and a
declared start input's fields added, removed and changed."""

from __future__ import annotations

from dashboard.api.diff_details import MAX_CHANGES, input_diff, node_changes, value_changes


def test_value_changes_name_each_changed_path_and_leave_out_an_absent_side() -> None:
    before = {"config": {"prompt": "a", "model": "m", "script": [1]}, "retry": {"max_attempts": 2}}
    after = {"config": {"prompt": "b", "model": "m", "script": [1, 2]}, "timeout_s": 5}
    assert value_changes(before, after) == [
        {"path": "config.prompt", "before": "a", "after": "b"},
        {"path": "config.script", "before": [1], "after": [1, 2]},
        {"path": "retry", "before": {"max_attempts": 2}},
        {"path": "timeout_s", "after": 5},
    ]
    assert value_changes({"a": 1}, {"a": 1}) == []
    many = value_changes({f"k{i}": i for i in range(50)}, {})
    assert len(many) == MAX_CHANGES


def test_node_changes_ignore_the_id_and_the_position() -> None:
    a = {"id": "x", "type": "llm", "position": {"x": 1}, "config": {"prompt": "hi"}}
    b = {"id": "x", "type": "llm", "position": {"x": 9}, "config": {"prompt": "hello"}}
    assert node_changes(a, b, {"id", "position"}) == [{"path": "config.prompt", "before": "hi", "after": "hello"}]


def test_input_diff_lists_fields_added_removed_and_changed() -> None:
    old = {"type": "object", "required": ["ticket"], "title": "T",
           "properties": {"ticket": {"type": "string"}, "gone": {"type": "number"}}}
    new = {"type": "object", "required": [], "title": "U",
           "properties": {"ticket": {"type": "string", "description": "text"}, "tier": {"type": "string"}}}
    d = input_diff(old, new)
    assert d["declared"] == [True, True]
    assert d["added"] == [{"name": "tier", "type": "string", "required": False}]
    assert d["removed"] == ["gone"]
    assert d["changed"] == [{"name": "ticket", "changes": [{"path": "description", "after": "text"},
                                                           {"path": "required", "before": True, "after": False}]}]
    assert d["other"] == [{"path": "title", "before": "T", "after": "U"}]
    dropped = input_diff(old, None)
    assert dropped["declared"] == [True, False] and dropped["removed"] == ["gone", "ticket"]
    assert input_diff("junk", 3)["declared"] == [False, False]
