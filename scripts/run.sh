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
$PY manage.py migrate --noinput
$PY manage.py loadrules
$PY manage.py ensuredemo
.venv/bin/celery -A tracedoc worker --pool=solo --concurrency=1 --loglevel=INFO &
WORKER=$!
trap 'kill $WORKER 2>/dev/null || true' EXIT INT TERM
echo "tracedoc: http://$HOST:$PORT  (worker pid $WORKER; alert links: $TRACEDOC_BASE_URL)"
$PY manage.py runserver "$HOST:$PORT" --noreload
