"""The ingest engine: bounded parsers of uploaded captures, the event table and its one clock.

Runs without Django (the `tracedoc` CLI and the workers both call it); the app around it
(models, tasks, storage, views) stores uploads and queues the work. pyproject.toml's
engine-without-django contract holds it to that."""
