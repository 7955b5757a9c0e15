"""Server-rendered pages: the dashboard and instance pages (views.py), the editor shell (editor.py), the
review inbox and its facts, run reports, credentials, API tokens and triggers pages, and the meta the
pages' scripts read (meta.py).

May import: workflows/ (services, models, engine), dashboard.security, dashboard.api's shared helpers.
"""
