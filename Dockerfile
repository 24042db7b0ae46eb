# tracedoc: one image for the web process, the Celery worker and beat.
FROM python:3.11-slim-bookworm

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    TRACEDOC_VAR=/var/lib/tracedoc \
    TRACEDOC_STORAGE=/var/lib/tracedoc/storage

RUN useradd --system --create-home --home-dir /app tracedoc \
    && mkdir -p /var/lib/tracedoc/storage \
    && chown -R tracedoc /var/lib/tracedoc

WORKDIR /app
# The build context is the project less what .dockerignore leaves out (local state, tests,
# tooling): every app in INSTALLED_APPS ships without a line here (tests/tracedoc/test_image.py).
COPY . ./
# gcc builds the Kineto window scanner (ingest/engine/parsers/kineto/_scan.c) and the row copy
# (ingest/engine/_gather.c), then goes: without it the install still works, ~2x slower. Editable, so the
# extensions are built beside the sources in /app, where `python manage.py`, gunicorn and celery
# import the apps from (a plain install would build them into site-packages, unused).
RUN apt-get update && apt-get install -y --no-install-recommends gcc libc6-dev \
    && pip install --upgrade pip && pip install -e . \
    && apt-get purge -y gcc libc6-dev && apt-get autoremove -y && rm -rf /var/lib/apt/lists/*

USER tracedoc
# collectstatic needs no database; a build-time key is enough and is not kept.
RUN DEBUG=0 SECRET_KEY=collectstatic-only python manage.py collectstatic --noinput

EXPOSE 8000
# threaded workers (docs/deployment.md): a waiting upload (?wait, at most 10 s) holds one thread, not a process
CMD ["gunicorn", "tracedoc.wsgi", "--bind", "0.0.0.0:8000", "-k", "gthread", "--workers", "3", "--threads", "4", \
     "--timeout", "60", "--keep-alive", "5"]
