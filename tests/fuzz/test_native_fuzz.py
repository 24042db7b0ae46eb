"""The native code that parses uploads, under AddressSanitizer and UndefinedBehaviorSanitizer,
fuzzed with coverage by atheris (libFuzzer) against differential oracles (tests/fuzz/oracles.py):
the Kineto window scanner (ingest/engine/parsers/kineto/_scan.c) against msgspec, the row copy
(ingest/engine/_gather.c) against plain Python.

The extensions are built with clang into a temporary folder (tests/fuzz/build.py), never over
the installed ones. Each target starts from its kept seed corpus, tests/fuzz/seeds/TARGET/
(read only: what the run finds goes to a temporary folder), and runs for its share of
TRACEDOC_NATIVE_FUZZ_SECONDS (60 in all by default; 0 skips the fuzzing). A failure prints the
report and the input that caused it, in base64: add it to the seeds once fixed.
"""
from __future__ import annotations

import base64
import os
import re
import subprocess
import sys

import pytest

from tests.fuzz import build
from tests.fuzz.targets import SEEDS, TARGETS
from tests.support.native import compiler_on_path

SECONDS = float(os.environ.get("TRACEDOC_NATIVE_FUZZ_SECONDS", "60"))
DICTS = {"kineto_scan": build.ROOT / "tests" / "fuzz" / "kineto_scan.dict"}


@pytest.fixture(scope="module")
def sanitizer_build(tmp_path_factory):
    if SECONDS <= 0:
        pytest.skip("TRACEDOC_NATIVE_FUZZ_SECONDS=0")
    if build.compiler() is None:
        if compiler_on_path():
            pytest.fail("clang not found: the sanitizer build needs it (scripts/ensure-clang.sh installs it)")
        pytest.skip("no C compiler")
    try:  # in the test extra: missing, it is a fault of the install, not a reason to skip
        import atheris  # noqa: F401
    except ImportError:
        pytest.fail("atheris is not installed: pip install -e '.[test]'")
    out = tmp_path_factory.mktemp("sanitizer-build")
    build.build(out)
    return out


@pytest.mark.timeout(SECONDS + 600)  # `FUZZ_SECONDS=3600 make fuzz` outlasts pytest's usual 600 s
@pytest.mark.parametrize("target", sorted(TARGETS))
def test_no_sanitizer_report_and_no_oracle_mismatch(target, sanitizer_build, tmp_path):
    seconds = max(1, round(SECONDS / len(TARGETS)))
    work, artifacts = tmp_path / "corpus", tmp_path / "artifacts"
    work.mkdir()
    artifacts.mkdir()
    flags = [f"-max_total_time={seconds}", "-timeout=30", "-rss_limit_mb=4096", "-print_final_stats=1",
             f"-artifact_prefix={artifacts}/"]
    if target in DICTS:
        flags.append(f"-dict={DICTS[target]}")
    done = subprocess.run([sys.executable, "-m", "tests.fuzz.targets", target, str(sanitizer_build), *flags,
                           str(work), str(SEEDS / target)],
                          env=build.fuzz_env(), cwd=build.ROOT, capture_output=True, text=True,
                          timeout=seconds + 300)
    found = [f"{f.name}: {base64.b64encode(f.read_bytes()).decode()}" for f in sorted(artifacts.iterdir())]
    assert done.returncode == 0 and not found, (
        f"exit {done.returncode}; inputs (base64): {found}\n{done.stdout[-4000:]}\n{done.stderr[-8000:]}")
    runs = re.search(r"^stat::number_of_executed_units: *(\d+)", done.stderr, re.M)
    assert runs and int(runs[1]) > len(list((SEEDS / target).iterdir())), done.stderr[-4000:]


def test_the_extensions_use_no_private_cpython_api():
    """`_Py*` names change between CPython releases without notice (issue 29: the scanner's
    `_PyBytes_Resize`)."""
    private = {str(source.relative_to(build.ROOT)): sorted(set(re.findall(r"\b_Py\w+", source.read_text())))
               for sources in build.extensions().values() for source in sources}
    assert len(private) == 2 and not any(private.values()), private
