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
COPY pyproject.toml README.md* ./
COPY tracedoc tracedoc
COPY accounts accounts
COPY ingest ingest
COPY diagnosis diagnosis
COPY rules rules
COPY cli cli
COPY agent agent
COPY templates templates
COPY static static
COPY manage.py ./
# gcc builds the Kineto window scanner (ingest/parsers/kineto/_scan.c), then goes: without it
# the install still works and Kineto windows are decoded with msgspec, ~2x slower.
RUN apt-get update && apt-get install -y --no-install-recommends gcc libc6-dev \
    && pip install --upgrade pip && pip install . \
    && apt-get purge -y gcc libc6-dev && apt-get autoremove -y && rm -rf /var/lib/apt/lists/*

USER tracedoc
# collectstatic needs no database; a build-time key is enough and is not kept.
RUN DEBUG=0 SECRET_KEY=collectstatic-only python manage.py collectstatic --noinput

EXPOSE 8000
# threaded workers (docs/deployment.md): a waiting upload (?wait, at most 10 s) holds one thread, not a process
CMD ["gunicorn", "tracedoc.wsgi", "--bind", "0.0.0.0:8000", "-k", "gthread", "--workers", "3", "--threads", "4", \
     "--timeout", "60", "--keep-alive", "5"]
