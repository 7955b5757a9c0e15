"""What operators use: actions on one instance (operations.py: cancel, retry, rerun), review decisions
and their form (review.py, forms.py), the run report (report.py), the JSON run summary the API and the
management commands share (api_shapes.py), and the health checks behind `manage.py health` and
/healthz (health.py). models.py holds the review items and audit entries (rows of the `workflows` app:
workflows.models imports them; the runtime opens review items at halts).

May import: everything in workflows/ below it (engine, models, adapters, the runtime's facade, the
scheduler). Never dashboard/.
"""
