"""Signals ingest sends, so the layers above it react without ingest importing them."""
from __future__ import annotations

from django.dispatch import Signal

# sent with trace= inside the upload's transaction, once its files are stored: the project's
# workflow (tracedoc.workflow) connects to it and queues the parse and the diagnosis
trace_received = Signal()
