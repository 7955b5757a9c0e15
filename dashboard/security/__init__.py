"""Who may do what and how requests are hardened: the one permission check (permissions.py), API
tokens (tokens.py), login throttling, response headers and the Content-Security-Policy (headers.py),
and the structured access log (access_log.py).

May import: workflows/ (models, roles, adapters.ratelimit), dashboard.models.
"""
