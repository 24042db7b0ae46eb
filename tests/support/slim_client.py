"""The slim `tracedoc-client` wheel (clients/python/), installed alone into a fresh virtual
environment by tests/tracedoc/conftest.py's `client_venv`: what it must not bring along."""

# what the server needs and the client must not (`tracedoc` itself included)
SERVER_PACKAGES = ("django", "pandas", "pyarrow", "numpy", "requests", "celery", "psycopg", "tracedoc")
