#!/usr/bin/env bash
# The sanitizer + fuzz run of the C extensions (tests/fuzz) builds them with Debian's clang:
# libFuzzer's coverage instrumentation is clang's (atheris brings the runtime).
set -eu
command -v clang >/dev/null 2>&1 && exit 0
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  echo "installing Debian's clang for the sanitizer + fuzz run"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends clang >/dev/null \
    || { apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends clang >/dev/null; }
else
  echo "clang not found: tests/fuzz fails where a C compiler exists (install clang)" >&2
fi
