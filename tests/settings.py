"""Settings for the test suite: the project's settings, with the things production must set and a
test run must not need. DJANGO_SETTINGS_MODULE points here (pyproject.toml), and the worker, scheduler and
daphne processes the tests start inherit both the module and these variables.

- SECRET_KEY: production refuses to start without one (dashboard/settings.py); tests use a throwaway.
- STEADYFLOW_CREDENTIALS_KEY: likewise (credentials are encrypted with it); a throwaway Fernet key.
- STEADYFLOW_HTTPS=0: the test client and pytest-django's live server speak plain HTTP, so no redirect
  to HTTPS and no secure-only cookies.
- REDIS_URL: under pytest-xdist, a Redis database per worker (below).
"""

import os

os.environ.setdefault("SECRET_KEY", "steadyflow-test-suite-only-" + "x" * 40)
os.environ.setdefault("STEADYFLOW_HTTPS", "0")
# Production refuses to start without a credentials key too; a fixed throwaway Fernet key for the suite.
os.environ.setdefault("STEADYFLOW_CREDENTIALS_KEY", "km3DmfDJlycJ07W3yCOQ55jBJBO8uMhCDe5Z05tMt00=")



def redis_url_for_worker(url: str, worker: str) -> str:
    """The Redis URL of one pytest-xdist worker ("gw0", "gw1", ...): the same server, a database of its own
    (the URL's database + 1 + the worker's number)."""
    from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

    parts = urlsplit(url)
    query = dict(parse_qsl(parts.query))
    base = int(query.get("db", 0)) if parts.scheme == "unix" else int(parts.path.strip("/") or 0)
    db = base + 1 + int(worker.removeprefix("gw"))
    if db > 15:
        raise RuntimeError(f"pytest-xdist worker {worker} would need Redis database {db} of 16: run fewer "
                           "workers or name a lower database in REDIS_URL")
    if parts.scheme == "unix":
        return url.split("?", 1)[0] + "?" + urlencode({**query, "db": str(db)})  # urlunsplit drops the "//"
    return urlunsplit(parts._replace(path=f"/{db}"))


# Under pytest-xdist (`make test`) each worker has its own test database (pytest-django suffixes its name,
# test_<name>_gw0 ...) and, from here, its own Redis database: queues, rate-limit and login-throttle counters,
# the channel layer and the live notices (whose pub/sub channels carry the database number, workflows/live/notices.py)
# all follow REDIS_URL, and so do the worker, scheduler and daphne processes a test starts (they inherit it).
# The processes a test starts inherit PYTEST_XDIST_WORKER and the already-assigned REDIS_URL and load these
# settings again: STEADYFLOW_TEST_REDIS_FOR marks the URL as assigned, so they do not move one database on.
_xdist_worker = os.environ.get("PYTEST_XDIST_WORKER")
if _xdist_worker and os.environ.get("STEADYFLOW_TEST_REDIS_FOR") != _xdist_worker:
    _var = os.environ.get("STEADYFLOW_VAR_DIR") or os.path.join(os.path.dirname(os.path.dirname(__file__)), "var")
    os.environ["REDIS_URL"] = redis_url_for_worker(os.environ.get("REDIS_URL") or f"unix://{_var}/redis.sock",
                                                   _xdist_worker)
    os.environ["STEADYFLOW_TEST_REDIS_FOR"] = _xdist_worker

from dashboard.settings import *  # noqa: E402, F403 - the project's settings, unchanged otherwise
