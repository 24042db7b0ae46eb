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


def prefetched(items: Iterator[T], ahead: int = 1, burst: int = 0) -> Generator[T, None, None]:
    """`items`, with up to `ahead` items made before the caller asks for them.

    The producer starts an item only when fewer than `ahead` are made and not yet taken, so
    besides the caller's own item at most `ahead` exist (made, queued or being made). A queue
    alone let the producer make one more while another waited in it: three 8 MiB Kineto
    windows with their scanned texts alive instead of two.

    `burst` (> ahead): while the caller still holds its first item, up to `burst` beyond it.
    For a caller that waits on something else at first (the Kineto parse, on pandas being
    imported by another thread): the producer works meanwhile. A caller that starts at once
    takes its second item soon, and from then on it is `ahead` again."""
    limit = max(burst, ahead)
    handoff: queue.Queue = queue.Queue(maxsize=limit)
    counts = threading.Condition()
    made = taken = 0
    stop = threading.Event()

    def turn() -> bool:
        nonlocal made
        with counts:
            while not stop.is_set():
                if made - taken < limit:
                    made += 1
                    return True
                counts.wait(_POLL_S)
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

    # in the caller's context: what it set for the files it opens (ingest.engine.io.count_bytes_read)
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
            with counts:  # the caller has its item (and let the one before go): make the next
                taken += 1
                if taken == 2:
                    limit = ahead  # the caller is under way: the burst is over
                counts.notify()
            yield item
            del item
    finally:
        stop.set()
        worker.join()
