import os

# Before numpy loads (web and worker processes): no linear algebra here, and OpenBLAS's idle
# threads spin for a while after start, taking CPU from the parse (cli/main.py does the same).
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

# The Celery app is loaded with Django so that @shared_task binds to it.
from tracedoc.celery import app as celery_app  # noqa: E402

__all__ = ("celery_app",)
