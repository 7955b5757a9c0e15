"""Settings for the test suite: the project's settings, with the things production must set and a
test run must not need. DJANGO_SETTINGS_MODULE points here (pyproject.toml), and the worker, scheduler and
daphne processes the tests start inherit both the module and these variables.

- SECRET_KEY: production refuses to start without one (dashboard/settings.py); tests use a throwaway.
- STEADYFLOW_CREDENTIALS_KEY: likewise (credentials are encrypted with it); a throwaway Fernet key.
- STEADYFLOW_HTTPS=0: the test client and pytest-django's live server speak plain HTTP, so no redirect
  to HTTPS and no secure-only cookies.
"""

import os

os.environ.setdefault("SECRET_KEY", "steadyflow-test-suite-only-" + "x" * 40)
os.environ.setdefault("STEADYFLOW_HTTPS", "0")
# Production refuses to start without a credentials key too; a fixed throwaway Fernet key for the suite.
os.environ.setdefault("STEADYFLOW_CREDENTIALS_KEY", "km3DmfDJlycJ07W3yCOQ55jBJBO8uMhCDe5Z05tMt00=")

from dashboard.settings import *  # noqa: E402, F403 - the project's settings, unchanged otherwise
