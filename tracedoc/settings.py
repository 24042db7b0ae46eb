"""Settings for tracedoc.

Embedded default (no server needed): SQLite and a Celery broker on a SQLite file, both
under `var/`. Set DATABASE_URL / CELERY_BROKER_URL for PostgreSQL and Redis. Every value
read from the environment goes through a typed helper that fails loudly on a bad value.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured
from kombu import Queue

BASE_DIR = Path(__file__).resolve().parent.parent


def env(name: str, default: str = "") -> str:
    """A string setting; NAME_FILE (Docker secrets) wins over NAME."""
    file = os.environ.get(f"{name}_FILE")
    if file:
        return Path(file).read_text().strip()
    return os.environ.get(name, default)


def envbool(name: str, default: bool) -> bool:
    raw = env(name, "")
    if raw == "":
        return default
    if raw.lower() in ("1", "true", "yes", "on"):
        return True
    if raw.lower() in ("0", "false", "no", "off"):
        return False
    raise ImproperlyConfigured(f"{name}={raw!r}: expected true/false")


def envint(name: str, default: int) -> int:
    raw = env(name, "")
    if raw == "":
        return default
    try:
        return int(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name}={raw!r}: expected an integer") from None


def envlist(name: str, default: list[str]) -> list[str]:
    raw = env(name, "")
    return [x.strip() for x in raw.split(",") if x.strip()] if raw else default


VAR_DIR = Path(env("TRACEDOC_VAR", str(BASE_DIR / "var"))).resolve()
VAR_DIR.mkdir(parents=True, exist_ok=True)

DEBUG = envbool("DEBUG", True)
_DEV_SECRET = "dev-only-insecure-secret-key-set-SECRET_KEY-in-production"
SECRET_KEY = env("SECRET_KEY", _DEV_SECRET)
if SECRET_KEY == _DEV_SECRET and not DEBUG:
    raise ImproperlyConfigured("SECRET_KEY must be set when DEBUG is off")
ALLOWED_HOSTS = envlist("ALLOWED_HOSTS", ["127.0.0.1", "localhost", "[::1]", "testserver"])
CSRF_TRUSTED_ORIGINS = envlist("CSRF_TRUSTED_ORIGINS", [])

# HTTPS on by default in production (DEBUG off): redirect, HSTS, secure cookies. A stack
# served over plain HTTP on purpose (a local docker compose, the test and bench stacks) sets
# TRACEDOC_INSECURE_HTTP=1; nothing else turns these off.
_HTTPS = not DEBUG and not envbool("TRACEDOC_INSECURE_HTTP", False)
SECURE_SSL_REDIRECT = _HTTPS
SESSION_COOKIE_SECURE = _HTTPS
CSRF_COOKIE_SECURE = _HTTPS
SECURE_HSTS_SECONDS = envint("TRACEDOC_HSTS_SECONDS", 31_536_000) if _HTTPS else 0
SECURE_HSTS_INCLUDE_SUBDOMAINS = _HTTPS
SECURE_HSTS_PRELOAD = _HTTPS
# TLS ends at the reverse proxy, which must set (and strip from clients) X-Forwarded-Proto;
# without this the redirect above would loop.
SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https") if _HTTPS else None
# Django's default COOP (same-origin) cuts the link to a window the page opens: "Open in
# Perfetto" hands the trace to ui.perfetto.dev by postMessage, which Perfetto accepts only from
# its window.opener. Other sites still cannot reach a tracedoc page they open.
SECURE_CROSS_ORIGIN_OPENER_POLICY = "same-origin-allow-popups"

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "django.contrib.humanize",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "django_htmx",
    "csp",
    "accounts",
    "ingest",
    "diagnosis",
    "rules",
    "hosts",
    "alerts",
    "otlp_receiver",
    "tracedoc",  # the project: connects ingest's signals to the workflow (tracedoc/apps.py)
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "accounts.audit.AuditRequestMiddleware",  # who made a change, for the audit log
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "csp.middleware.CSPMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
]

# Content-Security-Policy (django-csp) on every response: scripts only from our own static
# files (htmx and ECharts are vendored; no inline script or handler in the templates, the API
# docs load their init script from a URL). Inline *styles* stay allowed: htmx inserts its
# indicator <style> and ECharts styles its tooltips through HTML.
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": ["'self'"],
        "script-src": ["'self'"],
        "style-src": ["'self'", "'unsafe-inline'"],
        "img-src": ["'self'", "data:"],
        "object-src": ["'none'"],
        "base-uri": ["'self'"],
        "form-action": ["'self'"],
        "frame-ancestors": ["'none'"],
    },
}

AUTHENTICATION_BACKENDS = ["accounts.login_throttle.ThrottledModelBackend"]
# Failed logins (accounts.login_throttle): this many within the window lock the username (or,
# with the larger number, the client address) until the window ends.
TRACEDOC_LOGIN_MAX_FAILURES = envint("TRACEDOC_LOGIN_MAX_FAILURES", 5)
TRACEDOC_LOGIN_MAX_FAILURES_PER_ADDRESS = envint("TRACEDOC_LOGIN_MAX_FAILURES_PER_ADDRESS", 30)
TRACEDOC_LOGIN_LOCKOUT_MINUTES = envint("TRACEDOC_LOGIN_LOCKOUT_MINUTES", 15)

ROOT_URLCONF = "tracedoc.urls"
WSGI_APPLICATION = "tracedoc.wsgi.application"

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
            ],
        },
    },
]


# Connections each web or worker process may hold (0: no pool, one persistent connection per
# thread, CONN_MAX_AGE 60 s); PostgreSQL only.
DB_POOL_SIZE = envint("TRACEDOC_DB_POOL_SIZE", 4)


def _database() -> dict:
    db = dj_database_url.config(default=f"sqlite:///{VAR_DIR / 'tracedoc.sqlite3'}", conn_max_age=60)
    if db["ENGINE"].endswith("sqlite3"):
        # The web process and the worker share the file: WAL lets readers run beside the
        # writer, IMMEDIATE transactions and a timeout turn lock races into short waits.
        db["CONN_MAX_AGE"] = 0
        db["OPTIONS"] = {"timeout": 30, "transaction_mode": "IMMEDIATE",
                         "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;"}
        # A file, not memory, so that a worker subprocess can open the test database too.
        db["TEST"] = {"NAME": str(VAR_DIR / f"test-{os.getpid()}.sqlite3")}
    elif db["ENGINE"].endswith("postgresql") and DB_POOL_SIZE:
        # A bounded psycopg pool per process: a burst of requests waits (up to the timeout) for
        # one of DB_POOL_SIZE connections instead of opening one per thread until PostgreSQL
        # runs out (docs/deployment.md sizes it). Django refuses a pool with persistent
        # connections: the pool is what keeps them.
        # Health checks: a connection the server dropped while it sat in the pool (a restart,
        # an idle timeout) is replaced when taken, not handed to a request or task that fails.
        db["CONN_MAX_AGE"], db["CONN_HEALTH_CHECKS"] = 0, True
        db.setdefault("OPTIONS", {})["pool"] = {"min_size": 1, "max_size": DB_POOL_SIZE,
                                                "timeout": envint("TRACEDOC_DB_POOL_TIMEOUT", 20)}
    return db


DATABASES = {"default": _database()}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]
if "pytest" in sys.modules:
    PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]  # fast tests

LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "ingest:trace-list"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = VAR_DIR / "static"
STATIC_ROOT.mkdir(exist_ok=True)  # whitenoise warns about a missing folder before collectstatic
STATICFILES_DIRS = [BASE_DIR / "static"]
# `make run` (DEBUG off) serves static/ itself, edits included, without a collectstatic
WHITENOISE_USE_FINDERS = WHITENOISE_AUTOREFRESH = envbool("TRACEDOC_STATIC_FROM_SOURCE", False)
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedStaticFilesStorage"
                    if not DEBUG else "django.contrib.staticfiles.storage.StaticFilesStorage"},
}

# --- uploads ---------------------------------------------------------------------------
# Root of the content-addressed artifact store and of the per-trace Parquet files: a folder,
# or S3-compatible object storage as s3://bucket/prefix (ingest/storage, docs/deployment.md).
_storage = env("TRACEDOC_STORAGE", str(VAR_DIR / "storage"))
TRACEDOC_STORAGE = _storage if _storage.startswith("s3://") else Path(_storage).resolve()
# S3: MinIO / Ceph / an emulator's endpoint (AWS needs none); credentials: the usual AWS variables.
TRACEDOC_S3_ENDPOINT_URL = env("TRACEDOC_S3_ENDPOINT_URL", "") or env("AWS_ENDPOINT_URL", "")
TRACEDOC_S3_REGION = env("AWS_REGION", "") or env("AWS_DEFAULT_REGION", "")
# S3: this process's local folder for downloads the parsers read and Parquet files being written.
TRACEDOC_SCRATCH = Path(env("TRACEDOC_SCRATCH", str(VAR_DIR / "scratch"))).resolve()
# Hard cap per trace upload (all files together); enforced while streaming the upload.
TRACEDOC_MAX_UPLOAD_BYTES = envint("TRACEDOC_MAX_UPLOAD_BYTES", 4 * 1024**3)
# Bound of ?wait= on the upload API: a waiting upload holds a web thread, so a longer wait is cut
# to this and answered 202 + Location + Retry-After (docs/deployment.md sizes the threads).
TRACEDOC_MAX_WAIT_SECONDS = envint("TRACEDOC_MAX_WAIT_SECONDS", 10)
# ... and only so many uploads wait at once in one web process (gunicorn's gthread worker has 4
# threads): at most this many per user, and in all; past them an upload answers 202 at once.
TRACEDOC_MAX_WAITING_PER_USER = envint("TRACEDOC_MAX_WAITING_PER_USER", 1)
TRACEDOC_MAX_WAITING = envint("TRACEDOC_MAX_WAITING", 2)
# Decompression bombs and expanding pickles are bounded by the parsing engine, which runs
# without Django (the CLI too), so these are environment variables read there, not settings:
# TRACEDOC_MAX_DECOMPRESSION_RATIO (100), TRACEDOC_DECOMPRESSION_FLOOR_BYTES (64 MiB),
# TRACEDOC_MAX_DECOMPRESSED_BYTES (8 GiB, one file), TRACEDOC_MAX_EXTRACTED_BYTES (16 GiB, the
# members of one upload's archives) in ingest/engine/io.py and ingest/engine/bundle.py;
# TRACEDOC_MAX_SNAPSHOT_RECORDS (50 M) in ingest/engine/parsers/memory_snapshot.py.
# Stored artifact bytes per team (sum of its traces' uploads); 0 turns the quota off.
TRACEDOC_TEAM_STORAGE_QUOTA_BYTES = envint("TRACEDOC_TEAM_STORAGE_QUOTA_BYTES", 200 * 1024**3)
FILE_UPLOAD_MAX_MEMORY_SIZE = 2_621_440  # spill to disk above this (not a cap)
DATA_UPLOAD_MAX_NUMBER_FILES = envint("DATA_UPLOAD_MAX_NUMBER_FILES", 200)
FILE_UPLOAD_HANDLERS = [
    "ingest.storage.SizeLimitUploadHandler",
    "django.core.files.uploadhandler.TemporaryFileUploadHandler",
]

# --- API ---------------------------------------------------------------------------------
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "accounts.authentication.ApiTokenAuthentication",  # hashed keys, expiry, revocation
        "rest_framework.authentication.SessionAuthentication",
    ],
    # a token's scope (read / upload / admin) bounds what it may do (accounts.permissions)
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated",
                                   "accounts.permissions.TokenScopePermission"],
    # limit/offset validated (400) and the page size clamped (tracedoc.pagination)
    "DEFAULT_PAGINATION_CLASS": "tracedoc.pagination.BoundedLimitOffsetPagination",
    "PAGE_SIZE": 50,
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    # every error answer is an RFC 9457 problem document (application/problem+json)
    "EXCEPTION_HANDLER": "problems.exception_handler",
}
# Uploads per user (ingest.api.throttles); "" turns the throttle off. Counted in the default
# cache: set TRACEDOC_CACHE_URL (redis://...) so that every web process counts together.
TRACEDOC_UPLOAD_THROTTLE_RATE = env("TRACEDOC_UPLOAD_THROTTLE_RATE", "1200/hour")
if env("TRACEDOC_CACHE_URL"):
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.redis.RedisCache",
                          "LOCATION": env("TRACEDOC_CACHE_URL")}}
# The schema and /api/docs/ need a login unless this is on (tracedoc.api_docs).
TRACEDOC_PUBLIC_API_DOCS = envbool("TRACEDOC_PUBLIC_API_DOCS", False)
SPECTACULAR_SETTINGS = {
    "TITLE": "tracedoc API",
    "DESCRIPTION": "Upload GPU / LLM-inference traces, read their diagnosis, triage clusters, manage rules.",
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    # request and response components apart: a request's required text says minLength 1 (DRF
    # refuses it blank) and a generated client gets upload models with files
    "COMPONENT_SPLIT_REQUEST": True,
    "POSTPROCESSING_HOOKS": ["drf_spectacular.hooks.postprocess_schema_enums",
                             "tracedoc.openapi_problems.document_problems",
                             "tracedoc.openapi_requests.json_bodies"],
    # one name per choice set that two fields share or whose field names collide
    "ENUM_NAME_OVERRIDES": {
        "SeverityEnum": "diagnosis.models.SEVERITY_CHOICES",
        "DestinationKindEnum": "alerts.models.Destination.Kind",
        "DeliveryStateEnum": "alerts.models.Delivery.State",
        "ClusterActivityKindEnum": "diagnosis.models.ClusterActivity.Kind",
        "CaptureRequestKindEnum": "hosts.models.CaptureRequest.Kind",
        "CaptureRequestStateEnum": "hosts.models.CaptureRequest.State",
        "TraceStateEnum": "ingest.models.Trace.State",
        "ApiTokenStateEnum": "accounts.serializers.TOKEN_STATES",
    },
}

# --- Celery ------------------------------------------------------------------------------
CELERY_BROKER_URL = env("CELERY_BROKER_URL", f"sqla+sqlite:///{VAR_DIR / 'broker.sqlite'}")
CELERY_RESULT_BACKEND = env("CELERY_RESULT_BACKEND", "") or None
# One queue name per deployment, so that two stacks sharing a Redis never take each other's work.
CELERY_TASK_DEFAULT_QUEUE = env("TRACEDOC_QUEUE", "tracedoc")
# One queue per role (docs/deployment.md "Scale-out"): `<queue>.parse` (parse, its parts and
# their merge), `<queue>.diagnose`, `<queue>.notify` (alerts); beat jobs and the rest on
# `<queue>`. A worker started without -Q consumes all four (the default single worker of
# `make run`); a role's workers are started with `-Q <queue>.parse` and so on.
TRACEDOC_QUEUES = {role: f"{CELERY_TASK_DEFAULT_QUEUE}.{role}" for role in ("parse", "diagnose", "notify")}
CELERY_TASK_QUEUES = [Queue(CELERY_TASK_DEFAULT_QUEUE), *(Queue(q) for q in TRACEDOC_QUEUES.values())]
CELERY_TASK_ROUTES = ("tracedoc.celery.route_by_role",)  # ingest.* -> parse, diagnosis.* -> diagnose, alerts.* -> notify
# Fan-out (ingest/fanout.py): a trace whose files together reach TRACEDOC_FANOUT_BYTES is parsed
# by several workers, one part per file and, for a plain text log, per range of about
# TRACEDOC_FANOUT_PART_BYTES (each warmed up on the TRACEDOC_FANOUT_WARMUP_BYTES before it).
# 0 turns fan-out off.
TRACEDOC_FANOUT_BYTES = envint("TRACEDOC_FANOUT_BYTES", 256 * 1024**2)
TRACEDOC_FANOUT_PART_BYTES = max(1, envint("TRACEDOC_FANOUT_PART_BYTES", 64 * 1024**2))
TRACEDOC_FANOUT_WARMUP_BYTES = envint("TRACEDOC_FANOUT_WARMUP_BYTES", 4 * 1024**2)
# A plain Kineto JSON in byte ranges of about this size (ingest/engine/kineto_ranges.py); 0, the
# default: one part per file. The merge is serial and re-reads every range, so the split pays
# only with many parse workers on free cores (on 2 cores a 504 MB file parsed 0.62x as fast:
# bench/README.md "Fan-out").
TRACEDOC_FANOUT_KINETO_PART_BYTES = envint("TRACEDOC_FANOUT_KINETO_PART_BYTES", 0)
# At most this many traces of one team parse at once (0: no limit); the others wait in `received`.
TRACEDOC_TEAM_MAX_PARSING = envint("TRACEDOC_TEAM_MAX_PARSING", 4)
CELERY_TASK_IGNORE_RESULT = True  # state lives on the Trace row, not in a result backend
CELERY_TASK_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
# A task is acknowledged once it has run, and a pool child killed mid-task (SIGKILL, out of
# memory) puts its message back in the queue instead of losing it: every step is idempotent
# and bounded in attempts (tracedoc.workflow).
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
# Memory per task (docs/deployment.md): a prefork pool child may allocate at most this much
# (RLIMIT_DATA); a parse or diagnosis past it fails its trace with "out of memory" and the worker
# serves on. Default: 3/4 of the machine, set it to about RAM / worker concurrency. 0: no cap.
TRACEDOC_TASK_MEMORY_LIMIT_MB = envint("TRACEDOC_TASK_MEMORY_LIMIT_MB",
                                       os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") * 3 // 4 // 2**20)
# ... and a child still holding more than this (resident, KiB) after a task is replaced by a fresh
# one: what the allocators kept of one big trace is not carried into the next.
CELERY_WORKER_MAX_MEMORY_PER_CHILD = envint("TRACEDOC_WORKER_MAX_MEMORY_PER_CHILD_MB", 2048) * 1024
# the workflow's tasks (the beat job among them) and the rule editor's trials (beside the
# service they run, which reads diagnosis.tasks) live outside any app's tasks.py
CELERY_IMPORTS = ("tracedoc.workflow", "diagnosis.rule_trial_runs")
CELERY_TASK_SOFT_TIME_LIMIT = envint("TRACEDOC_TASK_SOFT_TIME_LIMIT", 55 * 60)
CELERY_TASK_TIME_LIMIT = envint("TRACEDOC_TASK_TIME_LIMIT", 60 * 60)
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# Redis redelivers an unacknowledged message after visibility_timeout (how a task of a worker
# killed as a whole comes back): above the task time limit, or a long parse would run twice,
# and not much above it, or the trace waits for nothing. (The SQLite broker passes its
# options to SQLAlchemy's create_engine, so it gets none.)
CELERY_BROKER_TRANSPORT_OPTIONS = ({"visibility_timeout": CELERY_TASK_TIME_LIMIT + 10 * 60}
                                   if CELERY_BROKER_URL.startswith(("redis", "rediss")) else {})
CELERY_TASK_ALWAYS_EAGER = envbool("CELERY_TASK_ALWAYS_EAGER", False)
# an upload must not hang on a dead broker: fail fast, the beat job below sends it again
CELERY_TASK_PUBLISH_RETRY_POLICY = {"max_retries": 2, "interval_start": 0, "interval_step": 0.5, "interval_max": 1}
# beat: send the uploads whose task could not reach the broker when they arrived, re-queue
# the traces whose task was lost (tracedoc.workflow)
CELERY_BEAT_SCHEDULE = {
    "reconcile-traces": {"task": "tracedoc.reconcile_traces", "schedule": 120.0},
    "flush-otlp-windows": {"task": "tracedoc.flush_otlp_windows", "schedule": 60.0},
    "resend-alerts": {"task": "alerts.resend_unqueued", "schedule": 60.0},
    # agents gone stale or back (alerts.agent_health); a host is stale after a minute at least
    "check-agents": {"task": "alerts.check_agents", "schedule": float(envint("TRACEDOC_AGENT_CHECK_S", 30))},
}

# --- OTLP/HTTP receiver (otlp_receiver app) ------------------------------------------------
# Spans become one trace per team, service.name and window of this many seconds (by span start),
# once the window and a grace for late exports are past; an export request carries at most
# TRACEDOC_OTLP_MAX_REQUEST_BYTES, compressed and decompressed.
TRACEDOC_OTLP_WINDOW_SECONDS = envint("TRACEDOC_OTLP_WINDOW_SECONDS", 300)
TRACEDOC_OTLP_GRACE_SECONDS = envint("TRACEDOC_OTLP_GRACE_SECONDS", 30)
TRACEDOC_OTLP_MAX_REQUEST_BYTES = envint("TRACEDOC_OTLP_MAX_REQUEST_BYTES", 32 * 1024**2)
# The web process decodes the body itself, so what it may cost is bounded before decoding: a
# gzip body expands at most TRACEDOC_MAX_DECOMPRESSION_RATIO times past its first MiB, and a
# JSON body holds at most this many objects and arrays (a span is ~10-20) nested at most 64 deep.
TRACEDOC_OTLP_MAX_OBJECTS = envint("TRACEDOC_OTLP_MAX_OBJECTS", 250_000)

# --- alerts (alerts app) ---------------------------------------------------------------
# Where people open tracedoc: alert links to clusters and traces start with it.
TRACEDOC_BASE_URL = env("TRACEDOC_BASE_URL", "http://127.0.0.1:8000")
# A failed delivery is retried after 1, 2, 4, ... times this many seconds, up to this many attempts.
TRACEDOC_ALERT_RETRY_BACKOFF_S = envint("TRACEDOC_ALERT_RETRY_BACKOFF_S", 30)
TRACEDOC_ALERT_MAX_ATTEMPTS = envint("TRACEDOC_ALERT_MAX_ATTEMPTS", 6)
# Destinations may not point at loopback, private, link-local or metadata addresses (SSRF)
# unless one of these networks (CIDR, comma-separated) holds the address, e.g. 10.20.0.0/16
# for an in-house Alertmanager.
TRACEDOC_ALERT_ALLOWED_NETWORKS = envlist("TRACEDOC_ALERT_ALLOWED_NETWORKS", [])
# Deliveries the broker did not take (down) are sent by the beat job once they are this old.
TRACEDOC_ALERT_UNSENT_AFTER_S = envint("TRACEDOC_ALERT_UNSENT_AFTER_S", 60)
DEFAULT_FROM_EMAIL = env("DEFAULT_FROM_EMAIL", "tracedoc@localhost")
# Mail (email alerts, password resets) goes through SMTP at EMAIL_HOST. Without it nothing can
# be sent: the password-reset pages are not served (tracedoc/urls.py), rather than saying "sent".
EMAIL_HOST = env("EMAIL_HOST", "")
EMAIL_PORT = envint("EMAIL_PORT", 587)
EMAIL_HOST_USER = env("EMAIL_HOST_USER", "")
EMAIL_HOST_PASSWORD = env("EMAIL_HOST_PASSWORD", "")
EMAIL_USE_TLS = envbool("EMAIL_USE_TLS", True)
EMAIL_TIMEOUT = 10
TRACEDOC_PASSWORD_RESET = bool(EMAIL_HOST)

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": env("LOG_LEVEL", "INFO")},
}
