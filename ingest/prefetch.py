"""An iterator produced one item ahead in a thread.

For producers that spend their time outside the GIL (the Kineto window scanner, file reads,
zlib): the next item is made while the caller works on this one, on a second core. The
items come in order; an exception in the producer is raised in the caller at the item it
stopped at; when the caller stops early (an error, a time limit) the producer stops too.
"""
from __future__ import annotations

import contextvars
import queue
import threading
from collections.abc import Generator, Iterator
from typing import TypeVar

T = TypeVar("T")

_END = object()
_POLL_S = 0.05  # how often a blocked producer looks whether the caller has gone


def prefetched(items: Iterator[T], ahead: int = 1, burst: int | None = None) -> Iterator[T]:
    """`items`, with up to `ahead` items made before the caller asks for them.

    The producer starts an item only when one of its `ahead` turns is free, and a turn comes
    back when the caller takes an item: besides the caller's own item, at most `ahead` exist
    (made, queued or being made). A queue alone let the producer make one more while another
    waited in it: three 8 MiB Kineto windows with their scanned texts alive instead of two.

    `burst` (> ahead + 1): while the caller is slow with its first item, up to `burst` items
    exist, that one included; the producer's turns come back only once the caller has
    drained the excess, then `ahead` again."""
    burst = max(burst or ahead, ahead)
    handoff: queue.Queue = queue.Queue(maxsize=burst)
    turns = threading.Semaphore(burst)
    excess = burst - ahead  # items the caller takes without giving a turn back
    stop = threading.Event()

    def turn() -> bool:
        while not stop.is_set():
            if turns.acquire(timeout=_POLL_S):
                return True
        return False

    def hand(entry) -> bool:
        while not stop.is_set():
            try:
                handoff.put(entry, timeout=_POLL_S)
                return True
            except queue.Full:
                continue
        return False

    def produce() -> None:
        try:
            while turn():
                item = next(items, _END)
                if item is _END or not hand((item, None)):
                    break
                del item  # the caller holds it from here on
        except BaseException as e:  # handed over: the caller raises it
            hand((None, e))
            return
        finally:
            if isinstance(items, Generator):
                items.close()  # in this thread, where the generator runs: its files close here
        hand((_END, None))

    # in the caller's context: what it set for the files it opens (ingest.io.count_bytes_read)
    worker = threading.Thread(target=contextvars.copy_context().run, args=(produce,), name="prefetch",
                              daemon=True)
    worker.start()
    try:
        while True:
            item, error = handoff.get()
            if error is not None:
                raise error
            if item is _END:
                return
            if excess:
                excess -= 1
            else:
                turns.release()  # the caller has its item (and let the one before go): make the next
            yield item
            del item
    finally:
        stop.set()
        worker.join()
