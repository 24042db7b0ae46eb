"""ingest.engine.prefetch: items made one ahead in a thread, in order; the producer's error raised
at its item; a caller that stops early stops (and closes) the producer; the caller's context
seen by the producer."""
import contextvars
import threading
import time

import pytest

from ingest.engine.prefetch import prefetched


def test_items_come_in_order_from_another_thread():
    made_in = []

    def items():
        for i in range(50):
            made_in.append(threading.current_thread().name)
            yield i
    assert list(prefetched(items())) == list(range(50))
    assert set(made_in) == {"prefetch"}


def test_an_error_in_the_producer_is_raised_after_the_items_before_it():
    def items():
        yield 1
        yield 2
        raise ValueError("damaged at byte 9")
    got = []
    with pytest.raises(ValueError, match="byte 9"):
        for item in prefetched(items()):
            got.append(item)
    assert got == [1, 2]


def test_a_caller_that_stops_early_stops_and_closes_the_producer():
    made, closed = [], threading.Event()

    def items():
        try:
            for i in range(10_000):
                made.append(i)
                yield i
        finally:
            closed.set()
    stream = prefetched(items(), ahead=1)
    assert next(stream) == 0
    stream.close()  # as a caller's error or time limit does
    assert closed.wait(5)
    time.sleep(0.1)
    assert len(made) <= 3  # the item handed over, one queued, one being made


def test_the_producer_sees_the_callers_context():
    var = contextvars.ContextVar("reading", default=None)
    var.set("the caller's callback")

    def items():
        yield var.get()
    assert list(prefetched(items())) == ["the caller's callback"]


@pytest.mark.parametrize("ahead", [1, 2])
def test_at_most_ahead_items_exist_beyond_the_callers(ahead):
    """A slow caller: the producer waits for a turn instead of making one more item while
    another sits in the queue (three Kineto windows alive where two are enough)."""
    started, taken = [], []
    most = []

    def items():
        for i in range(12):
            started.append(i)
            most.append(len(started) - len(taken))
            yield i
    for item in prefetched(items(), ahead=ahead):
        taken.append(item)
        time.sleep(0.01)  # the producer has time to run ahead, if it may
    assert taken == list(range(12))
    # the caller's item (taken, not yet counted as let go) plus `ahead` more at most
    assert max(most) == ahead


def test_a_burst_runs_ahead_while_the_caller_starts_then_ahead_items_at_most():
    """A caller slow with its first item (the Kineto parse waiting for pandas): up to `burst`
    items beyond it are made meanwhile; from its second item on, `ahead` at most again."""
    started, taken, beyond = [], [], []

    def items():
        for i in range(20):
            started.append(i)
            beyond.append(len(started) - len(taken))
            yield i
    stream = prefetched(items(), ahead=1, burst=5)
    taken.append(next(stream))
    time.sleep(0.2)  # the caller is slow with its first item
    assert len(started) == 1 + 5  # the caller's item and the burst, not one more
    for item in stream:
        taken.append(item)
        time.sleep(0.01)
    assert taken == list(range(20))
    assert max(beyond[8:]) == 1  # drained: `ahead` again, as measured in the test above


def test_a_caller_that_starts_at_once_ends_the_burst_with_its_second_item():
    """A worker's parse builds its first window at once: the producer does not keep `burst`
    windows alive for the whole file (~18 MiB each), only until the second is taken."""
    started, taken, beyond = [], [], []

    def items():
        for i in range(30):
            time.sleep(0.002)  # a producer faster than the caller, as the Kineto scanner is
            started.append(i)
            beyond.append(len(started) - len(taken))
            yield i
    for item in prefetched(items(), ahead=1, burst=5):
        taken.append(item)
        time.sleep(0.01)
    assert taken == list(range(30))
    assert max(beyond[6:]) == 1
