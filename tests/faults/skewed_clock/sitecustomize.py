"""A whole process whose wall clock is off: what a host without time sync looks like to Python.

The fault tests put this directory on PYTHONPATH of one worker or scheduler process, with
STEADYFLOW_TEST_CLOCK_SHIFT_S set (seconds, + ahead, - behind). Python imports `sitecustomize` at
interpreter start, before Django, RQ or anything of ours, so every reading of the wall clock in that
process is shifted: time.time(), time.time_ns() (logging, RQ, redis-py) and datetime.now(),
utcnow() and today() (Django's timezone.now(), RQ's timestamps). time.monotonic() is left alone,
as a real host's would be. Test-only: nothing outside tests/ imports or names this.
"""

from __future__ import annotations

import datetime as _datetime
import os
import sys
import time as _time
from typing import Any

SHIFT_ENV = "STEADYFLOW_TEST_CLOCK_SHIFT_S"


def _install(shift_s: float) -> None:
    real_datetime = _datetime.datetime
    real_time, real_time_ns = _time.time, _time.time_ns
    delta = _datetime.timedelta(seconds=shift_s)
    delta_ns = int(shift_s * 1_000_000_000)

    class _Meta(type):
        # Datetimes made by C code (psycopg, the datetime module itself) are the real class: they
        # must still pass isinstance() checks against the shifted one.
        def __instancecheck__(cls, obj: Any) -> bool:
            return isinstance(obj, real_datetime)

        def __subclasscheck__(cls, sub: type) -> bool:
            return issubclass(sub, real_datetime)

    class datetime(real_datetime, metaclass=_Meta):  # noqa: N801 - stands in for datetime.datetime
        __slots__ = ()  # the real one's size: C extensions (psycopg) check it when they import it

        @classmethod
        def now(cls, tz: Any = None) -> Any:
            return real_datetime.now(tz) + delta

        @classmethod
        def utcnow(cls) -> Any:
            return real_datetime.utcnow() + delta

        @classmethod
        def today(cls) -> Any:
            return real_datetime.today() + delta

    # Pickled datetimes (RQ job data) name `datetime.datetime`, as the real ones do.
    datetime.__module__ = "datetime"
    datetime.__qualname__ = "datetime"
    _datetime.datetime = datetime  # type: ignore[misc]
    _time.time = lambda: real_time() + shift_s
    _time.time_ns = lambda: real_time_ns() + delta_ns
    sys.stderr.write(f"[skewed clock] this process's wall clock is shifted by {shift_s:+g} s\n")


_shift = float(os.environ.get(SHIFT_ENV, "0") or 0)
if _shift:
    _install(_shift)
