"""Lower priority and CPU placement apply to the calling thread (and what it starts), so `wrap`
can place its sampler thread without touching the command it runs."""
import os
import sys
import threading

import pytest

from agent.main import build_parser
from agent.nvml_sampler import Sampler
from agent.placement import choose_cpus, lower_priority, parse_cpus, pin_cpus
from tests.support.nvml_sampler import FakeReader

linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="per-thread priority is Linux's")


def in_thread(fn):
    out = {}
    t = threading.Thread(target=lambda: out.update(result=fn(), tid=threading.get_native_id()))
    t.start()
    t.join()
    return out


def test_cpu_lists_and_the_auto_choice():
    assert parse_cpus("31") == {31}
    assert parse_cpus("0,4-6") == {0, 4, 5, 6}
    with pytest.raises(ValueError):
        parse_cpus("4-")
    allowed = set(range(32))
    assert choose_cpus("auto", allowed) == {31}           # the last CPU: workloads fill from CPU 0
    assert choose_cpus("auto", {0, 1}) == set()           # too few CPUs to set one aside
    assert choose_cpus("none", allowed) == set()
    assert choose_cpus("30-33", allowed) == {30, 31}      # only the allowed ones


@linux_only
def test_lower_priority_changes_the_calling_thread_only():
    before = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
    out = in_thread(lambda: (lower_priority(15), os.getpriority(os.PRIO_PROCESS, threading.get_native_id())))
    done, nice = out["result"]
    assert nice == max(15, before) and f"nice {nice}" in done
    assert os.getpriority(os.PRIO_PROCESS, threading.get_native_id()) == before
    assert lower_priority(0) == []  # 0 leaves both priorities alone


@linux_only
def test_pinning_applies_to_the_calling_thread_only():
    allowed = os.sched_getaffinity(0)
    cpu = max(allowed)
    out = in_thread(lambda: (pin_cpus(str(cpu)), os.sched_getaffinity(0)))
    assert out["result"] == (f"CPU {cpu}", {cpu})
    assert os.sched_getaffinity(0) == allowed
    assert in_thread(lambda: pin_cpus("none"))["result"] == ""


def test_the_sampler_thread_runs_its_setup_in_itself():
    ran_in = []
    sampler = Sampler(FakeReader(), interval=0.01, host="h").start(setup=lambda: ran_in.append(threading.get_ident()))
    sampler.stop()
    assert ran_in == [sampler._thread.ident] and ran_in[0] != threading.get_ident()


def test_capture_commands_take_the_overhead_options():
    args = build_parser().parse_args(["run", "--pcie", "--nice", "5", "--cpus", "30-31"])
    assert (args.pcie, args.nice, args.cpus) == (True, 5, "30-31")
    args = build_parser().parse_args(["wrap", "--", "true"])
    assert (args.pcie, args.nice, args.cpus, args.interval) == (False, 10, "auto", 0.1)
