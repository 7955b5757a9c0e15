"""Who may do what and how requests are hardened: the one permission check (permissions.py), API
tokens (tokens.py), login throttling, response headers and the Content-Security-Policy (headers.py),
and the structured access log (access_log.py).

May import: workflows/ (models, roles, adapters.ratelimit), dashboard.models. problem_docs.py is the
RFC 9457 shape v1 answers errors in (the NUL-refusing middleware answers /api/v1/ with it too).
"""
