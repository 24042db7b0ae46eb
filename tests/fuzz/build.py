"""The project's C extensions (pyproject.toml's ext-modules) built for fuzzing: clang with
AddressSanitizer, UndefinedBehaviorSanitizer (any report aborts) and libFuzzer's coverage,
into a folder of their own (never over the installed build), and the environment a Python
needs to load them: atheris' AddressSanitizer + libFuzzer runtime preloaded, Python's own
allocator off so the sanitizer sees every object's memory.

    python -m tests.fuzz.build BUILD_DIR
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# compiled with the sanitizers, linked without their runtime: the preloaded one serves them
FLAGS = ["-fPIC", "-O1", "-g", "-fno-omit-frame-pointer", "-Wall", "-Werror",
         "-fsanitize=address,undefined,fuzzer-no-link", "-fno-sanitize-recover=all"]


def extensions() -> dict[str, list[Path]]:
    """The extensions pyproject.toml declares: short name (`_scan`) -> sources."""
    with open(ROOT / "pyproject.toml", "rb") as f:
        declared = tomllib.load(f)["tool"]["setuptools"]["ext-modules"]
    return {ext["name"].rsplit(".", 1)[-1]: [ROOT / s for s in ext["sources"]] for ext in declared}


def compiler() -> str | None:
    """clang: libFuzzer's coverage instrumentation (gcc has none that libFuzzer reads)."""
    return shutil.which(os.environ.get("TRACEDOC_FUZZ_CC", "clang"))


def build(out: Path) -> dict[str, Path]:
    """Every extension into `out`; raises RuntimeError with the compiler's words."""
    cc = compiler()
    if cc is None:
        raise FileNotFoundError("clang not found (scripts/ensure-clang.sh installs it)")
    out.mkdir(parents=True, exist_ok=True)
    include, suffix = sysconfig.get_paths()["include"], sysconfig.get_config_var("EXT_SUFFIX")
    built = {}
    for name, sources in extensions().items():
        built[name] = out / f"{name}{suffix}"
        objects = [out / f"{name}.{k}.o" for k in range(len(sources))]
        for source, obj in zip(sources, objects):
            _run([cc, *FLAGS, f"-I{include}", "-c", str(source), "-o", str(obj)])
        _run([cc, "-shared", *map(str, objects), "-o", str(built[name])])
    return built


def _run(command: list[str]) -> None:
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode:
        raise RuntimeError(f"{' '.join(command)}:\n{done.stdout}{done.stderr}")


def fuzz_env() -> dict[str, str]:
    """The environment of a Python that loads the sanitizer build."""
    import atheris
    runtime = Path(atheris.path()) / "asan_with_fuzzer.so"
    return {**os.environ, "LD_PRELOAD": str(runtime), "PYTHONMALLOC": "malloc",
            # Python frees little at exit (not a leak of ours); libFuzzer reports the rest
            "ASAN_OPTIONS": "detect_leaks=0:allocator_may_return_null=1:handle_abort=1",
            "UBSAN_OPTIONS": "halt_on_error=1:print_stacktrace=1",
            "PYTHONPATH": str(ROOT)}


if __name__ == "__main__":
    for name, path in build(Path(sys.argv[1])).items():
        print(name, path)
