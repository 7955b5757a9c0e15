"""Settings for benchmark processes that try a connection option the project does not set yet.

`python -m bench --pg-options '{"server_side_binding": true, "prepare_threshold": 5}'` runs every
process (workers, scheduler, this one) with DJANGO_SETTINGS_MODULE=bench.settings and the options in
BENCH_PG_OPTIONS: the project's settings, plus those OPTIONS on a PostgreSQL connection. Used only to
measure a proposal before anyone changes dashboard/settings.py.
"""

import json
import os

from dashboard.settings import *  # noqa: F403 - the project's settings, unchanged
from dashboard.settings import DATABASES

_extra = json.loads(os.environ.get("BENCH_PG_OPTIONS") or "{}")
if _extra and DATABASES["default"]["ENGINE"].endswith("postgresql"):
    DATABASES["default"]["OPTIONS"] = {**DATABASES["default"].get("OPTIONS", {}), **_extra}
