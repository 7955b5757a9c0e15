"""The JSON APIs: the helpers every endpoint shares (http.py: `api_view`, `error`, `json_body`,
`BodyRejected`, `BadRequest`), what both APIs answer with and do (shapes.py, diff_details.py's
graph_diff, services.py), the pages' endpoints (core.py, editor_api.py, instance_api.py,
planner_api.py, review_api.py), the versioned REST API under v1/, GET /metrics (metrics_view.py) and
the local demo endpoints.

May import: workflows/ (services, models, engine), dashboard.security, dashboard.pages (review facts).
v1/ uses services and the shared shapes, never the pages' endpoints (tests/test_layers.py).
"""
