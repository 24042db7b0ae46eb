"""Inputs -> the artifact files of one trace: plain files, folders (recursively, hidden
files skipped) and archives (tar, tar.gz/tgz, zip; recognised by content, not suffix).

Archives are untrusted. Extraction never uses tarfile/zipfile's extract functions: each
regular member is streamed to a path we build from its sanitised name. A member whose name
escapes the archive root (`..`, an absolute path, a drive letter) rejects the whole archive
(it is crafted, not damaged); links, devices and FIFOs are skipped with a warning; an
archive inside an archive is not expanded (skipped with a warning: upload its content
instead) — one level only, so nesting cannot multiply the limits. Bounds: MAX_MEMBERS
entries and MAX_TOTAL_BYTES decompressed per call, and per archive at most the
decompression ratio (ingest.engine.io.DecompressionBound) times its size. They are checked on the
sizes an archive declares before anything is written (a zip's directory, each tar header;
also against the free disk space), then on the bytes actually written, since declarations
can lie. A gzip of a single non-tar file is one artifact (parsers
read gzip transparently), not a bundle.

A file named `tracedoc-clock.json` is not an artifact: it maps artifact names to clock
offsets (see ingest/engine/align.py) and is returned in `Members.clock_offsets`.
"""
from __future__ import annotations

import contextlib
import gzip
import logging
import os
import shutil
import stat
import tarfile
import zipfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Iterable, Iterator

from ingest.engine.align import read_clock_offsets
from ingest.engine.events import ParseError, excerpt
from ingest.engine.io import GZIP_MAGIC, DecompressionBound, env_int

log = logging.getLogger(__name__)

MAX_MEMBERS = 10_000
MAX_TOTAL_BYTES = 16 * 1024**3
CLOCK_FILE = "tracedoc-clock.json"
_CHUNK = 1 << 20


@dataclass(frozen=True)
class Member:
    name: str   # path inside the trace, forward slashes
    path: Path  # a real file to parse


class Members(list):
    """The members, plus what the expansion noticed on the way."""

    def __init__(self):
        super().__init__()
        self.warnings: list[str] = []
        self.clock_offsets: dict[str, int] = {}


@contextlib.contextmanager
def expand(paths: Iterable[str | Path], workdir: str | Path, *, max_members: int | None = None,
           max_bytes: int | None = None) -> Iterator[Members]:
    """Yield the members of all inputs; files extracted under `workdir` are removed on exit."""
    workdir = Path(workdir)
    created = not workdir.exists()
    workdir.mkdir(parents=True, exist_ok=True)
    budget = _Budget(max_members or MAX_MEMBERS,
                     max_bytes or env_int("TRACEDOC_MAX_EXTRACTED_BYTES", MAX_TOTAL_BYTES), workdir)
    members = Members()
    try:
        for index, p in enumerate(paths):
            _expand_one(Path(p), workdir / str(index), members, budget)
        _dedupe(members)
        yield members
    finally:
        if created:
            shutil.rmtree(workdir, ignore_errors=True)


class _Budget:
    def __init__(self, max_members: int, max_bytes: int, workdir: Path):
        self.max_members, self.max_bytes, self.workdir = max_members, max_bytes, workdir
        self.members = self.bytes = 0
        self.ratio = DecompressionBound.from_env()
        self.archive_bytes = self.archive_allowed = 0

    def start_archive(self, path: Path) -> None:
        """The archive about to be extracted may write at most ratio x its size (floor for small ones)."""
        self.archive_bytes = 0
        self.archive_allowed = max(self.ratio.floor, self.ratio.ratio * path.stat().st_size)

    def _refuse(self, archive: str, where: str, written: int) -> None:
        """ParseError when `written` more bytes would pass a bound."""
        if self.bytes + written > self.max_bytes:
            raise ParseError(archive, where, f"at most {self.max_bytes:,} decompressed bytes in one trace",
                             got=f"{self.bytes + written:,} bytes (possible decompression bomb)")
        if self.archive_bytes + written > self.archive_allowed:
            raise ParseError(archive, where, f"at most {self.archive_allowed:,} decompressed "
                             f"bytes from this archive ({self.ratio.ratio}:1 its size, "
                             "TRACEDOC_MAX_DECOMPRESSION_RATIO)",
                             got=f"{self.archive_bytes + written:,} bytes (possible decompression bomb)")

    def declare(self, archive: str, where: str, size: int) -> None:
        """Refuse before writing when the declared uncompressed size already breaks a bound
        or would not fit on the disk."""
        self._refuse(archive, where, size)
        free = shutil.disk_usage(self.workdir).free
        if size > free:
            raise ParseError(archive, where, f"room to extract it: {size:,} bytes declared, "
                             f"{free:,} free on the disk")

    def count(self, archive: str, member: str) -> None:
        self.members += 1
        if self.members > self.max_members:
            raise ParseError(archive, f"member {excerpt(member, 100)}",
                             f"at most {self.max_members:,} files in one trace",
                             got="more")

    def write(self, src, dest: Path, archive: str, member: str) -> None:
        dest.parent.mkdir(parents=True, exist_ok=True)
        with open(dest, "wb") as out:
            while chunk := src.read(_CHUNK):
                self._refuse(archive, f"member {excerpt(member, 100)}", len(chunk))
                self.bytes += len(chunk)
                self.archive_bytes += len(chunk)
                out.write(chunk)


def archive_kind(path: Path) -> str | None:
    """'zip', 'tar' or 'tar.gz' by content; None for anything else (including gzip of one file)."""
    with open(path, "rb") as f:
        head = f.read(512)
    if head[:4] in (b"PK\x03\x04", b"PK\x05\x06"):
        return "zip"
    if _is_tar_header(head):
        return "tar"
    if head[:2] == GZIP_MAGIC:
        try:
            with gzip.open(path, "rb") as g:
                inner = g.read(512)
        except (OSError, EOFError):
            return None  # a damaged gzip: the parser reports it as an artifact
        if _is_tar_header(inner):
            return "tar.gz"
    return None


def _is_tar_header(block: bytes) -> bool:
    return len(block) >= 262 and block[257:262] == b"ustar"


def _expand_one(path: Path, dest: Path, members: Members, budget: _Budget) -> None:
    if not path.exists():
        raise ParseError(str(path), "", "an existing file or folder", got="nothing at this path")
    if path.is_dir():
        _expand_dir(path, dest, members, budget)
        return
    kind = archive_kind(path)
    if kind is None:
        budget.count(str(path), path.name)
        _add(members, path.name, path)
    elif kind == "zip":
        _expand_zip(path, path.name, dest, members, budget)
    else:
        _expand_tar(path, path.name, dest, members, budget)


def _expand_dir(root: Path, dest: Path, members: Members, budget: _Budget) -> None:
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        for fname in sorted(filenames):
            if fname.startswith("."):
                continue
            full = Path(dirpath) / fname
            rel = full.relative_to(root).as_posix()
            if not full.is_file():
                continue
            kind = archive_kind(full)
            budget.count(str(root), rel)
            if kind is None:
                _add(members, rel, full)
            elif kind == "zip":
                _expand_zip(full, rel, dest / rel, members, budget, prefix=rel + "/")
            else:
                _expand_tar(full, rel, dest / rel, members, budget, prefix=rel + "/")


def _safe_name(archive: str, raw: str) -> str | None:
    """The member's relative path, None for names to skip quietly (folders, hidden files);
    a name that escapes the root rejects the archive."""
    name = raw.replace("\\", "/")
    pure = PurePosixPath(name)
    if name.startswith("/") or (len(name) > 1 and name[1] == ":") or ".." in pure.parts:
        raise ParseError(archive, f"member {excerpt(raw, 100)}", "member paths inside the archive",
                         got="one that escapes it (absolute or '..'); the archive was not extracted")
    parts = [p for p in pure.parts if p not in ("", ".")]
    if not parts or any(p.startswith(".") or p == "__MACOSX" for p in parts):
        return None
    return "/".join(parts)


def _expand_tar(path: Path, label: str, dest: Path, members: Members, budget: _Budget, prefix: str = "") -> None:
    last = None
    budget.start_archive(path)
    try:
        with tarfile.open(path, "r:*") as tar:
            for info in tar:
                last = info.name
                budget.count(label, info.name)
                name = _safe_name(label, info.name)
                if name is None or info.isdir():
                    continue
                if not info.isreg():
                    what = "link" if (info.issym() or info.islnk()) else "device or special file"
                    _warn(members, f"{label}: member {info.name!r} is a {what}; skipped")
                    continue
                budget.declare(label, f"member {excerpt(info.name, 100)} (declared size)", info.size)
                src = tar.extractfile(info)
                target = dest / name
                budget.write(src, target, label, info.name)
                _add_extracted(members, label, prefix + name, target)
    except (tarfile.TarError, EOFError, OSError, gzip.BadGzipFile) as e:
        where = f"after member {excerpt(last, 100)}" if last else "first member"
        raise ParseError(label, where, "a complete, readable tar archive",
                         got=f"a truncated or damaged one ({e})") from None


def _expand_zip(path: Path, label: str, dest: Path, members: Members, budget: _Budget, prefix: str = "") -> None:
    budget.start_archive(path)
    try:
        with zipfile.ZipFile(path) as zf:
            infos = zf.infolist()
            if infos:  # the whole directory's declared total, before the first byte is written
                largest = max(infos, key=lambda i: i.file_size)
                budget.declare(label, f"zip directory ({len(infos)} members declared, the largest "
                               f"{excerpt(largest.filename, 100)})", sum(i.file_size for i in infos))
            for info in infos:
                budget.count(label, info.filename)
                name = _safe_name(label, info.filename)
                if name is None or info.is_dir():
                    continue
                file_type = stat.S_IFMT(info.external_attr >> 16)  # 0 when the zip tool set none
                if file_type and file_type != stat.S_IFREG:
                    _warn(members, f"{label}: member {info.filename!r} is a link or special file; skipped")
                    continue
                if info.flag_bits & 0x1:
                    raise ParseError(label, f"member {excerpt(info.filename, 100)}", "unencrypted members",
                                     got="an encrypted one")
                target = dest / name
                with zf.open(info) as src:
                    budget.write(src, target, label, info.filename)
                _add_extracted(members, label, prefix + name, target)
    except zipfile.BadZipFile as e:
        raise ParseError(label, "zip directory", "a readable zip archive", got=f"a damaged one ({e})") from None
    except (EOFError, OSError, NotImplementedError) as e:
        raise ParseError(label, "zip member", "a complete zip archive with supported compression",
                         got=f"{type(e).__name__}: {e}") from None


def _add_extracted(members: Members, label: str, name: str, target: Path) -> None:
    if archive_kind(target) is not None:
        target.unlink()
        _warn(members, f"{label}: member {name!r} is itself an archive; nested archives are not expanded "
                       "(extract it and upload its content)")
        return
    _add(members, name, target)


def _add(members: Members, name: str, path: Path) -> None:
    if PurePosixPath(name).name == CLOCK_FILE:
        members.clock_offsets.update(read_clock_offsets(path, name))
        return
    members.append(Member(name=name, path=path))


def _dedupe(members: Members) -> None:
    """Two inputs may hold the same relative name (rank0.log in two archives): number them."""
    seen: dict[str, int] = {}
    for i, m in enumerate(members):
        n = seen.get(m.name, 0)
        seen[m.name] = n + 1
        if n:
            members[i] = Member(name=f"{m.name}~{n + 1}", path=m.path)


def _warn(members: Members, message: str) -> None:
    log.warning(message)
    members.warnings.append(message)
