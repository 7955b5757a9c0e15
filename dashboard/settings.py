"""Steadyflow settings. Everything that differs between machines comes from the environment."""

from __future__ import annotations

import base64
import hashlib
import ipaddress
import os
from pathlib import Path

import dj_database_url
from cryptography.fernet import Fernet
from django.core.exceptions import ImproperlyConfigured

from dashboard.env import env_bool, env_float, env_int, env_json, env_list, env_str, env_url

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(env_str("STEADYFLOW_VAR_DIR", str(BASE_DIR / "var")))

DEBUG = env_bool("DEBUG", False)
SECRET_KEY = env_str("SECRET_KEY", "")
if not SECRET_KEY:
    if not DEBUG:
        # Fail closed: a production process never signs sessions with a key anyone can read here.
        raise ImproperlyConfigured("SECRET_KEY must be set when DEBUG is off (production); for development set "
                                   "DEBUG=1 (make run does)")
    SECRET_KEY = "steadyflow-insecure-development-key-change-me"  # noqa: S105 - DEBUG only
# Credentials (workflows/credentials/store.py) are encrypted with these Fernet keys: the first encrypts, each
# decrypts (rotation: put a new key first, `manage.py rotate_credentials`, then drop the old one).
CREDENTIALS_KEYS = env_list("STEADYFLOW_CREDENTIALS_KEY", [])
if not CREDENTIALS_KEYS:
    if not DEBUG:
        raise ImproperlyConfigured("STEADYFLOW_CREDENTIALS_KEY must be set when DEBUG is off (production): a "
                                   "Fernet key, e.g. from python -c 'from cryptography.fernet import Fernet; "
                                   "print(Fernet.generate_key().decode())'")
    # Development only: derived from the (development) SECRET_KEY, so make run keeps its credentials.
    CREDENTIALS_KEYS = [base64.urlsafe_b64encode(
        hashlib.sha256(b"steadyflow-credentials:" + SECRET_KEY.encode()).digest()).decode()]
for _position, _key in enumerate(CREDENTIALS_KEYS, 1):
    try:
        Fernet(_key.encode())
    except ValueError:
        raise ImproperlyConfigured(f"STEADYFLOW_CREDENTIALS_KEY: key {_position} is not a Fernet key (32 bytes, "
                                   "url-safe base64)") from None
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["localhost", "127.0.0.1", "[::1]"])
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [])
# A failed CSRF check on /api/ answers JSON with a message, like every other API error.
CSRF_FAILURE_VIEW = "dashboard.api.http.csrf_failure"

# What every process loads at start-up (workers, scheduler and management commands too, and the test suite
# starts ~1,000 of them) is kept to what they use:
# - not "daphne": its app only swaps `manage.py runserver` for an ASGI one, which nothing here uses (web is the
#   `daphne` command: scripts/devrun.py, docker/), and importing it loads Twisted and Autobahn (~0.35 s);
# - the admin without autodiscovery at start-up: dashboard/urls.py discovers the admin modules when the URLs
#   load (web, the test client, `check`), not in a worker (django_rq's admin alone pulls in rq's cron module);
INSTALLED_APPS = [
    "django.contrib.admin.apps.SimpleAdminConfig",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "channels",
    "django_rq",
    # The v1 API (dashboard/api/v1/); listed so its Swagger UI files are served from static/, no CDN (ninja
    # renders its CDN page when it is not listed here).
    "ninja",
    "workflows",
    "dashboard",
]

MIDDLEWARE = [
    "dashboard.security.access_log.AccessLogMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "dashboard.security.headers.ContentSecurityPolicyMiddleware",
    "dashboard.security.headers.RejectNulMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "dashboard.urls"
ASGI_APPLICATION = "dashboard.asgi.application"
WSGI_APPLICATION = None

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "dashboard.pages.meta.context",
            ],
            # `|stamp`: every page shows a moment the same way (dashboard/templatetags/timestamps.py).
            "builtins": ["dashboard.templatetags.timestamps"],
        },
    },
]

# --- Database -----------------------------------------------------------------------------------
# SQLite is the embedded default. WAL plus IMMEDIATE transactions let several worker processes
# write without "database is locked" (measured in docs/STACK_NOTES.md: deferred transactions fail ~50%).
_SQLITE_DEFAULT = f"sqlite:///{VAR_DIR / 'steadyflow.sqlite3'}"
_database_url = env_url("DATABASE_URL", _SQLITE_DEFAULT, ("sqlite", "postgres", "postgresql", "pgsql"))
assert _database_url is not None
try:
    _db = dj_database_url.parse(_database_url, conn_max_age=600, conn_health_checks=True)
except Exception as exc:  # dj-database-url raises several kinds for malformed URLs
    raise ImproperlyConfigured(f"DATABASE_URL={_database_url!r} is not valid: {exc}") from None
if _db["ENGINE"] == "django.db.backends.sqlite3":
    # SQLite cannot create the folder its file lives in: a fresh checkout has no var/ until something makes it.
    Path(_db["NAME"]).parent.mkdir(parents=True, exist_ok=True)
    _db["OPTIONS"] = {
        "timeout": 20,
        "transaction_mode": "IMMEDIATE",
        # 32 MiB of page cache per connection (the default, 2 MiB, makes every write into a large
        # history read index pages back from the OS: W1 over 100,000 finished instances cost +24% CPU).
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; PRAGMA cache_size=-32768;",
    }
    # Worker processes started by tests must see the test database, so it is a file, not :memory:.
    _db["TEST"] = {"NAME": str(VAR_DIR / "test.sqlite3")}
    _db["CONN_MAX_AGE"] = 0 if env_bool("STEADYFLOW_SQLITE_NO_PERSIST", False) else 600
else:
    # A persistent connection matters on the hot path: reconnecting costs ~8 ms a step.
    _db.setdefault("OPTIONS", {})
DATABASES = {"default": _db}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# --- Redis: queues and the channel layer only; losing it loses no workflow state ----------------
REDIS_URL = env_url("REDIS_URL", f"unix://{VAR_DIR / 'redis.sock'}", ("redis", "rediss", "unix"))
assert REDIS_URL is not None

# Each kind has a queue per priority: "default:high", "default", "default:low" (engine/priorities.py).
RQ_QUEUES = {
    name: {"URL": REDIS_URL, "DEFAULT_TIMEOUT": -1}
    for kind in ("ai", "io", "default") for name in (f"{kind}:high", kind, f"{kind}:low")
}

CHANNEL_LAYERS = {
    "default": {
        "BACKEND": "channels_redis.core.RedisChannelLayer",
        # redis-py 8 defaults socket_timeout to 5 s, which kills idle consumers (docs/STACK_NOTES.md).
        "CONFIG": {"hosts": [{"address": REDIS_URL, "socket_timeout": None}]},
    }
}

# --- Auth ---------------------------------------------------------------------------------------
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator", "OPTIONS": {"min_length": 10}},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
# The throttling backend refuses every login (site, admin, anything calling authenticate) for an
# account or an address with too many recent failures, before the password is even checked.
AUTHENTICATION_BACKENDS = ["dashboard.security.login_throttle.ThrottledModelBackend"]
LOGIN_THROTTLE = {
    "MAX_FAILURES_PER_ACCOUNT": env_int("STEADYFLOW_LOGIN_MAX_FAILURES", 5, minimum=1),
    "MAX_FAILURES_PER_ADDRESS": env_int("STEADYFLOW_LOGIN_MAX_FAILURES_PER_ADDRESS", 20, minimum=1),
    "WINDOW_S": env_int("STEADYFLOW_LOGIN_LOCKOUT_S", 900, minimum=1),
}
# /metrics (docs/operating.md, Observability): a bearer token and/or client addresses (IPs or CIDRs).
# With neither, only loopback may scrape, and only with DEBUG.
METRICS_TOKEN = env_str("STEADYFLOW_METRICS_TOKEN", "")
METRICS_ALLOW = env_list("STEADYFLOW_METRICS_ALLOW", [])
# A guessable token is no protection: at least this long (e.g. `openssl rand -hex 24`). Wrong tokens
# are throttled per address too (dashboard/api/metrics_view.py): METRICS_MAX_FAILURES per minute.
METRICS_TOKEN_MIN_CHARS = 24
METRICS_MAX_FAILURES = env_int("STEADYFLOW_METRICS_MAX_FAILURES", 10, minimum=1)
if METRICS_TOKEN and len(METRICS_TOKEN) < METRICS_TOKEN_MIN_CHARS:
    raise ImproperlyConfigured(f"STEADYFLOW_METRICS_TOKEN is {len(METRICS_TOKEN)} characters: at least "
                               f"{METRICS_TOKEN_MIN_CHARS} (e.g. openssl rand -hex 24)")
# Where every process's metric values are written (prometheus_client's multiprocess mode); made here,
# before any app (django-rq too) creates a metric in it.
PROMETHEUS_MULTIPROC_DIR = env_str("PROMETHEUS_MULTIPROC_DIR", "")
if PROMETHEUS_MULTIPROC_DIR:
    from workflows.observability import prometheus_dir
    from workflows.observability.logging_setup import process_kind

    # Only the long-running processes write files there (web, workers, scheduler), not every command.
    prometheus_dir.setup(PROMETHEUS_MULTIPROC_DIR, record=process_kind() in ("web", "worker", "scheduler"))
for _network in METRICS_ALLOW:
    try:
        ipaddress.ip_network(_network, strict=False)
    except ValueError:
        raise ImproperlyConfigured(f"STEADYFLOW_METRICS_ALLOW={_network!r} is not valid: expected IP addresses "
                                   "or CIDRs, comma-separated") from None
LOGIN_URL = "/accounts/login/"
LOGIN_REDIRECT_URL = "/"
LOGOUT_REDIRECT_URL = "/accounts/login/"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = VAR_DIR / "staticfiles"

# --- Engine -------------------------------------------------------------------------------------
STEADYFLOW = {
    # Guards
    "DEFAULT_MAX_TRANSITIONS": env_int("STEADYFLOW_MAX_TRANSITIONS", 10, minimum=1),
    "DEFAULT_TTL_S": env_int("STEADYFLOW_TTL_S", 3600, minimum=1),
    "DEFAULT_STEP_TIMEOUT_S": env_float("STEADYFLOW_STEP_TIMEOUT_S", 300.0, minimum=0.01),
    "DEFAULT_MAX_ATTEMPTS": env_int("STEADYFLOW_MAX_ATTEMPTS", 1, minimum=1),
    # Leases: a claimed step whose worker stops heartbeating is retried after this long. 25 s keeps a
    # dead worker's step re-dispatched within 30 s: lease + a scheduler tick + the first retry backoff.
    "LEASE_S": env_float("STEADYFLOW_LEASE_S", 25.0, minimum=1.0),
    # The reconciler re-enqueues a queued step that no queue holds after this long.
    "REDISPATCH_AFTER_S": env_float("STEADYFLOW_REDISPATCH_AFTER_S", 10.0, minimum=0.5),
    "SCHEDULER_INTERVAL_S": env_float("STEADYFLOW_SCHEDULER_INTERVAL_S", 0.5, minimum=0.05),
    # One clock (docs/DESIGN.md, Time): on PostgreSQL each process measures its offset to the
    # database's clock every CLOCK_SYNC_S and stamps every shared time with it; an offset beyond
    # CLOCK_SKEW_WARN_S is logged once, exported and named by `manage.py health --role all`.
    "CLOCK_SYNC_S": env_float("STEADYFLOW_CLOCK_SYNC_S", 10.0, minimum=0.5),
    "CLOCK_SKEW_WARN_S": env_float("STEADYFLOW_CLOCK_SKEW_WARN_S", 5.0, minimum=0.0),
    # `manage.py health` names active instances with no progress for longer than this.
    # A step whose worker died this many times (lease lost) is presumed poison: halted into review.
    "POISON_AFTER_LOSSES": env_int("STEADYFLOW_POISON_AFTER_LOSSES", 2, minimum=1),
    "STUCK_AFTER_S": env_float("STEADYFLOW_STUCK_AFTER_S", 300.0, minimum=1.0),
    # Run a single same-queue successor in the same job (see docs/architecture.md, Inline continuation).
    "INLINE_CONTINUATION": env_bool("STEADYFLOW_INLINE_CONTINUATION", True),
    # Modules imported at start-up that register more `python` node functions (register_function),
    # so every process (web, workers) knows them: a comma-separated list of dotted module paths.
    "EXTRA_FUNCTION_MODULES": env_list("STEADYFLOW_EXTRA_FUNCTIONS", []),
    # Outbound HTTP: private and loopback addresses are refused unless allow-listed here: host names,
    # host:port pairs, networks, or host:port/path-prefix (that host only under that path; `make run`
    # admits its own demo endpoints as 127.0.0.1:<port>/demo/, workflows/engine/ssrf.py policy_for_url).
    "HTTP_ALLOWLIST": env_list("STEADYFLOW_HTTP_ALLOWLIST", []),
    # OpenAI-compatible LLM provider
    "LLM_BASE_URL": env_str("STEADYFLOW_LLM_BASE_URL", "https://api.openai.com/v1"),
    "LLM_API_KEY": env_str("STEADYFLOW_LLM_API_KEY", ""),
    # The provider of an llm node that names none: `openai` once an endpoint or key is configured,
    # else `scripted` (offline), so a node left at its default never calls a paid API by surprise.
    "LLM_DEFAULT_PROVIDER": env_str("STEADYFLOW_LLM_DEFAULT_PROVIDER", "openai" if (
        os.environ.get("STEADYFLOW_LLM_API_KEY") or os.environ.get("STEADYFLOW_LLM_BASE_URL")) else "scripted"),
    "LLM_MAX_IN_FLIGHT": env_int("STEADYFLOW_LLM_MAX_IN_FLIGHT", 500, minimum=1),
    "LLM_MAX_PER_PROVIDER": env_int("STEADYFLOW_LLM_MAX_PER_PROVIDER", 400, minimum=1),
    # ai consumer: on SIGTERM, in-flight jobs get this long to finish before their steps are given
    # back to the queue (within the usual 10 s a supervisor waits before SIGKILL).
    "AI_SHUTDOWN_GRACE_S": env_float("STEADYFLOW_AI_SHUTDOWN_GRACE_S", 8.0, minimum=0.0),
    # ai consumer: RQ heartbeat interval for the worker and its in-flight jobs (RQ's job monitoring
    # interval; an execution not heartbeated for this + 60 s counts as abandoned).
    "AI_MONITORING_INTERVAL_S": env_int("STEADYFLOW_AI_MONITORING_INTERVAL_S", 10, minimum=1),
    # ai consumer: threads for its database work (claims, commits, breakers). A few suffice next to
    # a local database; a remote one (more round trips in flight) may want more.
    "AI_DB_THREADS": env_int("STEADYFLOW_AI_DB_THREADS", 4, minimum=1),
    # ai consumer: outcomes finished within this many ms of each other (or this many of them)
    # commit together in one transaction (0 ms: each commits on its own).
    "AI_GROUP_COMMIT_MS": env_float("STEADYFLOW_AI_GROUP_COMMIT_MS", 5.0, minimum=0.0),
    "AI_GROUP_COMMIT_MAX": env_int("STEADYFLOW_AI_GROUP_COMMIT_MAX", 50, minimum=1),
    # Circuit breaker per LLM provider/model (shared by all workers through the database)
    "BREAKER_FAILURE_RATIO": env_float("STEADYFLOW_BREAKER_FAILURE_RATIO", 0.5, minimum=0.0),
    "BREAKER_WINDOW_S": env_float("STEADYFLOW_BREAKER_WINDOW_S", 60.0, minimum=1.0),
    "BREAKER_MIN_CALLS": env_int("STEADYFLOW_BREAKER_MIN_CALLS", 5, minimum=1),
    "BREAKER_COOLDOWN_S": env_float("STEADYFLOW_BREAKER_COOLDOWN_S", 30.0, minimum=0.0),
    # Each process adds its window counts to the shared row at most this often (a failure that may
    # open the breaker, and a half-open trial's outcome, are written at once); 0 writes every call.
    "BREAKER_FLUSH_S": env_float("STEADYFLOW_BREAKER_FLUSH_S", 1.0, minimum=0.0),
    # How long a process trusts the breaker state it last read (no lock while closed).
    "BREAKER_CACHE_S": env_float("STEADYFLOW_BREAKER_CACHE_S", 0.25, minimum=0.0),
    # What a TTL does to an instance past its deadline: halt into review, or fail.
    "TTL_ACTION": env_str("STEADYFLOW_TTL_ACTION", "halt"),
    # Four eyes: the user who started an instance may not approve its review items.
    "REVIEW_FOUR_EYES": env_bool("STEADYFLOW_REVIEW_FOUR_EYES", False),
    # The API's rate limit per user (all of a user's tokens and sessions): this many requests per window
    # (0: no limit), counted in Redis.
    "API_RATE_LIMIT": env_int("STEADYFLOW_API_RATE_LIMIT", 600, minimum=0),
    "API_RATE_WINDOW_S": env_int("STEADYFLOW_API_RATE_WINDOW_S", 60, minimum=1),
    # Event streams (SSE) and long polls open at once in one web process: per user, and for everyone
    # (0: no limit); past either a new one is a 429 with Retry-After (dashboard/api/v1/stream_slots.py).
    "STREAMS_PER_USER": env_int("STEADYFLOW_STREAMS_PER_USER", 5, minimum=0),
    "STREAMS_PER_PROCESS": env_int("STEADYFLOW_STREAMS_PER_PROCESS", 50, minimum=0),
    # "Plan with AI" requests being answered at once in one web process (each holds a thread while the
    # LLM answers); past it a 429 with Retry-After (dashboard/api/planner_api.py).
    "PLANNER_CONCURRENCY": env_int("STEADYFLOW_PLANNER_CONCURRENCY", 4, minimum=1),
    # Per-model prices in USD per 1,000 tokens, JSON: {"gpt-4o-mini": {"prompt_per_1k": 0.00015,
    # "completion_per_1k": 0.0006}}; "*" applies to models not listed.
    "LLM_PRICES": env_json("STEADYFLOW_LLM_PRICES", {}),
    # Payload cap for step outputs and context (bytes of JSON).
    "MAX_PAYLOAD_BYTES": env_int("STEADYFLOW_MAX_PAYLOAD_BYTES", 1_000_000, minimum=1024),
    # State deltas and snapshots (docs/DESIGN.md "State: deltas and snapshots"): a step writes the
    # context keys it changed; a full snapshot is written at halts, ends and compensation, every
    # SNAPSHOT_EVERY_EVENTS events, and once the deltas since the last one reach
    # max(SNAPSHOT_MIN_BYTES, that snapshot's size).
    "SNAPSHOT_EVERY_EVENTS": env_int("STEADYFLOW_SNAPSHOT_EVERY_EVENTS", 1000, minimum=1),
    "SNAPSHOT_MIN_BYTES": env_int("STEADYFLOW_SNAPSHOT_MIN_BYTES", 1024 * 1024, minimum=0),
    # A snapshot refers to a context value whose JSON is at least this long by the seq of the delta
    # that set it, instead of copying it (store/snapshot_refs.py). 0 copies every value.
    "SNAPSHOT_REF_BYTES": env_int("STEADYFLOW_SNAPSHOT_REF_BYTES", 1024, minimum=0),
    # Per process: the contexts a worker last committed, kept so continuing an instance does not read
    # and decode its context again (store/context_cache.py). 0 disables it.
    "CONTEXT_CACHE_BYTES": env_int("STEADYFLOW_CONTEXT_CACHE_BYTES", 64 * 1024 * 1024, minimum=0),
    # Live view publishing over Channels
    "PUBLISH_EVENTS": env_bool("STEADYFLOW_PUBLISH_EVENTS", True),
    # Which store writes the engine's rows: "sql" (hand-written statements per database, the
    # default) or "orm" (the Django ORM: the reference implementation, slower).
    "STORE": env_str("STEADYFLOW_STORE", "sql"),
    # PostgreSQL: the SQL store's hot statements (a step's commit, the claim, leases) are prepared on
    # the server once per connection and per shape. Django's own queries are not (client-side binding).
    # 0 behind a pooler in transaction mode that cannot keep prepared statements.
    "PG_PREPARE": env_bool("STEADYFLOW_PG_PREPARE", True),
    # Fan-outs: the steps one transition makes due on one queue go out as one job per worker
    # listening there, at most this many steps a job (1 = a job per step).
    "BATCH_MAX": env_int("STEADYFLOW_BATCH_MAX", 20, minimum=1),
    # Priorities: a worker takes high before normal before low, but every this many dequeues the
    # lowest non-empty queue first, so low work is never starved (engine/priorities.py; 0: strict).
    "PRIORITY_FAIR_EVERY": env_int("STEADYFLOW_PRIORITY_FAIR_EVERY", 5, minimum=0),
    # Triggers and notifications (docs/operating.md, Triggers and notifications)
    # An incoming webhook's signed timestamp may be this far from now (replay window).
    "WEBHOOK_REPLAY_WINDOW_S": env_float("STEADYFLOW_WEBHOOK_REPLAY_WINDOW_S", 300.0, minimum=1.0),
    "WEBHOOK_MAX_BODY_BYTES": env_int("STEADYFLOW_WEBHOOK_MAX_BODY_BYTES", 262_144, minimum=1024),
    # Requests the webhook endpoint refuses before a signature authenticates them, per client address and
    # per hook in a window: over either limit it answers 429 without looking (0: no limit).
    "WEBHOOK_REJECT_LIMIT": env_int("STEADYFLOW_WEBHOOK_REJECT_LIMIT", 30, minimum=0),
    "WEBHOOK_HOOK_REJECT_LIMIT": env_int("STEADYFLOW_WEBHOOK_HOOK_REJECT_LIMIT", 300, minimum=0),
    "WEBHOOK_REJECT_WINDOW_S": env_int("STEADYFLOW_WEBHOOK_REJECT_WINDOW_S", 60, minimum=1),
    # The planner's generated plan versions that no instance ran on are purged this long after their
    # planning instance ended (workflows/authoring/plans.py).
    "PLAN_RETENTION_DAYS": env_float("STEADYFLOW_PLAN_RETENTION_DAYS", 30.0, minimum=0.0),
    # Retention (docs/operating-retention.md): finished instances' history (steps, events, checkpoints,
    # every table that references an instance except reviews and audit) is deleted this many days after
    # they finished, the instance row kept as their summary; 0 keeps everything forever.
    "RETENTION_DAYS": env_float("STEADYFLOW_RETENTION_DAYS", 30.0, minimum=0.0),
    # Instances whose history one retention batch deletes (one transaction each batch).
    "RETENTION_BATCH": env_int("STEADYFLOW_RETENTION_BATCH", 50, minimum=1),
    # A running instance keeps this many of its newest checkpoints that verify; older ones are pruned.
    "CHECKPOINTS_KEEP": env_int("STEADYFLOW_CHECKPOINTS_KEEP", 3, minimum=1),
    # A schedule's tick is on time while at most this old; older due ticks were missed (catch-up policy).
    "SCHEDULE_GRACE_S": env_float("STEADYFLOW_SCHEDULE_GRACE_S", 60.0, minimum=1.0),
    # Links in notifications: the address users reach the dashboard at.
    "BASE_URL": env_str("STEADYFLOW_BASE_URL", "http://127.0.0.1:8000"),
    # How long the approve / reject / open links in notices stay valid (workflows/triggers/action_links.py).
    "ACTION_LINK_TTL_S": env_int("STEADYFLOW_ACTION_LINK_TTL_S", 7 * 24 * 3600, minimum=60),
    # MCP servers (workflows/engine/nodes/mcp.py): calls in flight to one server across every worker (a
    # call waits for a free slot within its deadline), and one request's deadline when a node sets none.
    "MCP_MAX_PER_SERVER": env_int("STEADYFLOW_MCP_MAX_PER_SERVER", 8, minimum=1),
    "MCP_TIMEOUT_S": env_float("STEADYFLOW_MCP_TIMEOUT_S", 60.0, minimum=0.1),
    # Per server, by credential name: {"crm": {"max_concurrent": 2, "timeout_s": 10}} overrides the two above.
    "MCP_SERVER_LIMITS": env_json("STEADYFLOW_MCP_SERVER_LIMITS", {}),
    # The public address pages show in URLs meant for other systems (a webhook's URL); empty: the
    # address of the request (dashboard/pages/public_url.py).
    "PUBLIC_URL": env_url("STEADYFLOW_PUBLIC_URL", None, ("http", "https")) or "",
    "NOTIFY_MAX_ATTEMPTS": env_int("STEADYFLOW_NOTIFY_MAX_ATTEMPTS", 8, minimum=1),
    "NOTIFY_BACKOFF_S": env_float("STEADYFLOW_NOTIFY_BACKOFF_S", 30.0, minimum=0.0),
    "NOTIFY_TIMEOUT_S": env_float("STEADYFLOW_NOTIFY_TIMEOUT_S", 10.0, minimum=0.1),
    # Small endpoints the examples call when run locally (make run turns them on).
    "DEMO_ENDPOINTS": env_bool("STEADYFLOW_DEMO_ENDPOINTS", False),
    # Where the examples' declared input defaults send their http nodes (load_examples writes it into
    # them): this server's demo endpoints. `make run` sets it to the port it took.
    "DEMO_BASE_URL": env_str("STEADYFLOW_DEMO_BASE_URL", "http://127.0.0.1:8000"),
    "CREDENTIALS_KEYS": CREDENTIALS_KEYS,
}

if STEADYFLOW["STORE"] not in ("sql", "orm"):
    raise ImproperlyConfigured(f"STEADYFLOW_STORE={STEADYFLOW['STORE']!r} is not valid: expected sql or orm")
if STEADYFLOW["TTL_ACTION"] not in ("halt", "fail"):
    raise ImproperlyConfigured(f"STEADYFLOW_TTL_ACTION={STEADYFLOW['TTL_ACTION']!r} is not valid: "
                               "expected halt or fail")

# Email notifications: Django's mail backend (SMTP by default; the console backend prints them).
EMAIL_BACKEND = env_str("EMAIL_BACKEND", "django.core.mail.backends.smtp.EmailBackend")
EMAIL_HOST = env_str("EMAIL_HOST", "localhost")
EMAIL_PORT = env_int("EMAIL_PORT", 25, minimum=1)
EMAIL_HOST_USER = env_str("EMAIL_HOST_USER", "")
EMAIL_HOST_PASSWORD = env_str("EMAIL_HOST_PASSWORD", "")
EMAIL_USE_TLS = env_bool("EMAIL_USE_TLS", False)
DEFAULT_FROM_EMAIL = env_str("DEFAULT_FROM_EMAIL", "steadyflow@localhost")

LOG_LEVEL = env_str("LOG_LEVEL", "INFO").upper()
if LOG_LEVEL not in {"DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"}:
    raise ImproperlyConfigured(f"LOG_LEVEL={LOG_LEVEL!r} is not valid: expected DEBUG, INFO, WARNING or ERROR")
# JSON lines (one object per line, for a log shipper) or readable lines; `make run` sets console.
LOG_FORMAT = env_str("LOG_FORMAT", "json").strip().lower()
if LOG_FORMAT not in {"json", "console"}:
    raise ImproperlyConfigured(f"LOG_FORMAT={LOG_FORMAT!r} is not valid: expected json or console")
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    # workflows/observability/logging_setup.py: structlog renders every record, with the step a worker runs.
    "formatters": {"structured": {"()": "workflows.observability.logging_setup.formatter", "log_format": LOG_FORMAT}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "structured"}},
    "root": {"handlers": ["console"], "level": LOG_LEVEL},
    "loggers": {
        "rq.worker": {"level": "WARNING"},
        "daphne": {"level": "WARNING"},
        "httpx": {"level": "WARNING"},
    },
}


# --- HTTPS and browser hardening (see docs/security.md) ---------------------------------------
# On by default whenever DEBUG is off: a production deployment must opt *out* of HTTPS explicitly
# (STEADYFLOW_HTTPS=0, e.g. the local docker compose), never forget to opt in.
HTTPS = env_bool("STEADYFLOW_HTTPS", not DEBUG)
SECURE_SSL_REDIRECT = HTTPS
# The load balancer's plain-HTTP liveness probe must not be redirected.
SECURE_REDIRECT_EXEMPT = [r"^healthz$"]
SESSION_COOKIE_SECURE = HTTPS
CSRF_COOKIE_SECURE = HTTPS
SECURE_HSTS_SECONDS = env_int("STEADYFLOW_HSTS_SECONDS", 31_536_000, minimum=0) if HTTPS else 0
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("STEADYFLOW_HSTS_INCLUDE_SUBDOMAINS", True)
SECURE_HSTS_PRELOAD = env_bool("STEADYFLOW_HSTS_PRELOAD", False)
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
X_FRAME_OPTIONS = "DENY"
SESSION_COOKIE_HTTPONLY = True
# Behind a TLS-terminating proxy: the header it sets to "https" (e.g. X-Forwarded-Proto). Only set this
# when the proxy always sets (or strips) that header, or a client could claim HTTPS.
_proxy_header = env_str("STEADYFLOW_PROXY_SSL_HEADER", "").strip()
if _proxy_header:
    SECURE_PROXY_SSL_HEADER = ("HTTP_" + _proxy_header.upper().replace("-", "_"), "https")
# Content-Security-Policy (dashboard/security/headers.py): scripts and styles only from this origin, no inline
# script, no eval; WebSockets to this origin. STEADYFLOW_CSP replaces the whole policy.
CONTENT_SECURITY_POLICY = env_str("STEADYFLOW_CSP", "").strip() or "; ".join([
    "default-src 'self'",
    "script-src 'self'",
    "style-src 'self'",
    "img-src 'self' data:",
    "font-src 'self'",
    "connect-src 'self'",
    "object-src 'none'",
    "base-uri 'self'",
    "form-action 'self'",
    "frame-ancestors 'none'",
])
