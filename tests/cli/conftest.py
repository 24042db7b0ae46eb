"""The agent's and the CLI's tests talk to a real HTTP server on localhost (tests/support/stub_server.py)."""
from tests.support.stub_server import closed_port_url, stub_server  # noqa: F401  (fixtures)
