#!/usr/bin/env bash
# `make run`: the web app on http://HOST:PORT and one Celery worker, on the embedded
# default (SQLite + a broker that needs no server) unless DATABASE_URL/CELERY_BROKER_URL say otherwise.
set -euo pipefail
cd "$(dirname "$0")/.."
HOST=${1:-127.0.0.1}
PORT=${2:-8000}
PY=.venv/bin/python
# alert links open where this serves, unless the environment names a public address
case "$HOST" in *:*) URL_HOST="[$HOST]" ;; 0.0.0.0) URL_HOST=127.0.0.1 ;; *) URL_HOST=$HOST ;; esac
export TRACEDOC_BASE_URL=${TRACEDOC_BASE_URL:-http://$URL_HOST:$PORT}
mkdir -p var
# the pages a user sees in production (Not found, Server error), not Django's debug pages
# (DEBUG=1 make run for those); plain http on this machine; static files served by the app
# (whitenoise) from static/ as they are edited, no collectstatic
export DEBUG=${DEBUG:-0} TRACEDOC_INSECURE_HTTP=${TRACEDOC_INSECURE_HTTP:-1} TRACEDOC_STATIC_FROM_SOURCE=1
if [ -z "${SECRET_KEY:-}${SECRET_KEY_FILE:-}" ]; then  # DEBUG off needs one: made once, kept in var/
  [ -s var/secret_key ] || (umask 077 && $PY -c 'import secrets; print(secrets.token_urlsafe(50))' > var/secret_key)
  export SECRET_KEY_FILE=$PWD/var/secret_key
fi
$PY manage.py migrate --noinput
$PY manage.py loadrules
DEBUG=1 $PY manage.py ensuredemo  # the local login: a command of this local run, which DEBUG on allows
.venv/bin/celery -A tracedoc worker --pool=solo --concurrency=1 --loglevel=INFO &
WORKER=$!
trap 'kill $WORKER 2>/dev/null || true' EXIT INT TERM
echo "tracedoc: http://$HOST:$PORT  (worker pid $WORKER; alert links: $TRACEDOC_BASE_URL)"
$PY manage.py runserver "$HOST:$PORT" --noreload
