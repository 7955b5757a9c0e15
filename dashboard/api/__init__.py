"""The JSON APIs: the pages' endpoints (core.py holds the shared helpers, `api_view`, `error`,
`json_body`, and the first endpoints; editor_api.py, instance_api.py, planner_api.py, review_api.py),
the versioned REST API under v1/, GET /metrics (metrics_view.py) and the local demo endpoints.

May import: workflows/ (services, models, engine), dashboard.security, dashboard.pages (review facts).
"""
