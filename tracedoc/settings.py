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
        db["CONN_MAX_AGE"] = 0
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
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedStaticFilesStorage"
                    if not DEBUG else "django.contrib.staticfiles.storage.StaticFilesStorage"},
}

# --- uploads ---------------------------------------------------------------------------
# Root of the content-addressed artifact store and of the per-trace Parquet files.
TRACEDOC_STORAGE = Path(env("TRACEDOC_STORAGE", str(VAR_DIR / "storage"))).resolve()
# Hard cap per trace upload (all files together); enforced while streaming the upload.
TRACEDOC_MAX_UPLOAD_BYTES = envint("TRACEDOC_MAX_UPLOAD_BYTES", 4 * 1024**3)
TRACEDOC_MAX_WAIT_SECONDS = 300  # bound of ?wait= on the upload API
# Decompression bombs and expanding pickles are bounded by the parsing engine, which runs
# without Django (the CLI too), so these are environment variables read there, not settings:
# TRACEDOC_MAX_DECOMPRESSION_RATIO (100), TRACEDOC_DECOMPRESSION_FLOOR_BYTES (64 MiB),
# TRACEDOC_MAX_DECOMPRESSED_BYTES (8 GiB, one file), TRACEDOC_MAX_EXTRACTED_BYTES (16 GiB, the
# members of one upload's archives) in ingest/io.py and ingest/bundle.py;
# TRACEDOC_MAX_SNAPSHOT_RECORDS (50 M) in ingest/parsers/memory_snapshot.py.
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
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    # limit/offset validated (400) and the page size clamped (tracedoc.pagination)
    "DEFAULT_PAGINATION_CLASS": "tracedoc.pagination.BoundedLimitOffsetPagination",
    "PAGE_SIZE": 50,
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
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
    # one name per choice set that two fields share or whose field names collide
    "ENUM_NAME_OVERRIDES": {
        "SeverityEnum": "diagnosis.models.SEVERITY_CHOICES",
        "DestinationKindEnum": "alerts.models.Destination.Kind",
        "DeliveryStateEnum": "alerts.models.Delivery.State",
        "ClusterActivityKindEnum": "diagnosis.models.ClusterActivity.Kind",
        "CaptureRequestKindEnum": "hosts.models.CaptureRequest.Kind",
        "CaptureRequestStateEnum": "hosts.models.CaptureRequest.State",
        "TraceStateEnum": "ingest.models.Trace.State",
    },
}

# --- Celery ------------------------------------------------------------------------------
CELERY_BROKER_URL = env("CELERY_BROKER_URL", f"sqla+sqlite:///{VAR_DIR / 'broker.sqlite'}")
CELERY_RESULT_BACKEND = env("CELERY_RESULT_BACKEND", "") or None
# One queue name per deployment, so that two stacks sharing a Redis never take each other's work.
CELERY_TASK_DEFAULT_QUEUE = env("TRACEDOC_QUEUE", "tracedoc")
CELERY_TASK_IGNORE_RESULT = True  # state lives on the Trace row, not in a result backend
CELERY_TASK_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
# A task is acknowledged once it has run, and a pool child killed mid-task (SIGKILL, out of
# memory) puts its message back in the queue instead of losing it: every step is idempotent
# and bounded in attempts (tracedoc.workflow).
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
# the workflow's tasks (the beat job among them) live outside any app's tasks.py
CELERY_IMPORTS = ("tracedoc.workflow",)
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
}

# --- OTLP/HTTP receiver (otlp_receiver app) ------------------------------------------------
# Spans become one trace per team, service.name and window of this many seconds (by span start),
# once the window and a grace for late exports are past; an export request carries at most
# TRACEDOC_OTLP_MAX_REQUEST_BYTES, compressed and decompressed.
TRACEDOC_OTLP_WINDOW_SECONDS = envint("TRACEDOC_OTLP_WINDOW_SECONDS", 300)
TRACEDOC_OTLP_GRACE_SECONDS = envint("TRACEDOC_OTLP_GRACE_SECONDS", 30)
TRACEDOC_OTLP_MAX_REQUEST_BYTES = envint("TRACEDOC_OTLP_MAX_REQUEST_BYTES", 32 * 1024**2)

# --- alerts (alerts app) ---------------------------------------------------------------
# Where people open tracedoc: alert links to clusters and traces start with it.
TRACEDOC_BASE_URL = env("TRACEDOC_BASE_URL", "http://127.0.0.1:8000")
# A failed delivery is retried after 1, 2, 4, ... times this many seconds, up to this many attempts.
TRACEDOC_ALERT_RETRY_BACKOFF_S = envint("TRACEDOC_ALERT_RETRY_BACKOFF_S", 30)
TRACEDOC_ALERT_MAX_ATTEMPTS = envint("TRACEDOC_ALERT_MAX_ATTEMPTS", 6)
DEFAULT_FROM_EMAIL = env("DEFAULT_FROM_EMAIL", "tracedoc@localhost")

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": env("LOG_LEVEL", "INFO")},
}
