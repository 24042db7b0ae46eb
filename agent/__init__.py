"""The GPU-host agent: samples NVML, tails logs, picks up dumps, and ships them to the server.

Modules: nvml_sampler (NVML -> JSON lines), tailer (logs), dumps (new dump files),
spool (atomic on-disk chunks and bundles), uploader (REST client and the shipping loop),
wrap (run a command under capture), main (the `tracedoc-agent` command).
"""
from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("tracedoc")
except PackageNotFoundError:  # running from a source tree that was not installed
    __version__ = "0+unknown"
