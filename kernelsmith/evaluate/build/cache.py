"""The content-addressed build cache: one directory per build key, holding the built library and
`entry.json` (its SHA-256, or the compiler's error for a build that failed).

Only trusted code writes it: the build pool publishes what a contained builder produced, after
the builder's processes are dead, and reads the library through a descriptor that refuses links
and anything but a plain file. Sandboxes never see it: the judge copies the entries a candidate
needs into the candidate's scratch directory, checking each library's hash on the way.
Shared by every pool, run and service on the host (under the kernelsmith cache directory).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
import tempfile
import time
from pathlib import Path

from kernelsmith.evaluate.options import cache_dir

ENTRY = "entry.json"
MAX_LIBRARY = 512 * 2**20  # bytes; a larger "library" is not one
DEFAULT_MAX_BYTES = 8 * 2**30


def _read_regular(path: Path, limit: int = MAX_LIBRARY) -> bytes:
    """A plain file's bytes, never through a link (a defence: the builder wrote this directory)."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0))
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise OSError(f"{path.name} is not a plain file")
        if st.st_size > limit:
            raise OSError(f"{path.name} is {st.st_size} bytes, over the {limit}-byte limit")
        chunks, left = [], st.st_size
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


class BuildCache:
    def __init__(self, root: Path | None = None, max_bytes: int | None = None):
        self.root = Path(root) if root is not None else cache_dir() / "builds"
        self.root.mkdir(parents=True, exist_ok=True)
        env_max = os.environ.get("KERNELSMITH_BUILD_CACHE_BYTES")
        self.max_bytes = max_bytes if max_bytes is not None else int(env_max) if env_max else DEFAULT_MAX_BYTES

    def path(self, key: str) -> Path:
        if len(key) != 64 or any(c not in "0123456789abcdef" for c in key):
            raise ValueError(f"not a build key: {key!r}")
        return self.root / key[:2] / key

    def get(self, key: str) -> dict | None:
        """The entry of `key` ({"ok": True, "module", "file", "sha256"} or {"ok": False, "error"}), or None."""
        try:
            entry = json.loads((self.path(key) / ENTRY).read_text())
        except (OSError, ValueError):
            return None
        return entry if isinstance(entry, dict) and "ok" in entry else None

    # -- publishing (the build pool) ---------------------------------------------------------
    def _publish(self, key: str, entry: dict, library: bytes | None) -> dict:
        final = self.path(key)
        final.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=".publish-", dir=self.root))
        try:
            if library is not None:
                (staging / entry["file"]).write_bytes(library)
            (staging / ENTRY).write_text(json.dumps({**entry, "published": time.time()}))
            try:
                os.rename(staging, final)  # atomic: readers see a whole entry or none
            except OSError:  # published meanwhile by another pool: the first one stays
                pass
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        return self.get(key) or entry

    def publish_library(self, key: str, library_path: Path, module: str, seconds: float) -> dict:
        data = _read_regular(library_path)
        entry = {
            "ok": True,
            "module": module,
            "file": f"{module}.so",
            "sha256": hashlib.sha256(data).hexdigest(),
            "bytes": len(data),
            "seconds": round(seconds, 3),
        }
        return self._publish(key, entry, data)

    def publish_failure(self, key: str, error: str, seconds: float) -> dict:
        """A compiler error is a property of the content: the same sources fail the same way."""
        return self._publish(key, {"ok": False, "error": error, "seconds": round(seconds, 3)}, None)

    # -- staging (the judge) -------------------------------------------------------------------
    def stage(self, keys: list[str], dest: Path) -> list[str]:
        """Copy the entries of `keys` into `dest/<key>/`, checking each library's hash; returns the
        keys staged. A damaged entry is removed (it is built again next time)."""
        staged = []
        for key in keys:
            entry = self.get(key)
            if entry is None:
                continue
            src = self.path(key)
            out = dest / key
            try:
                out.mkdir(parents=True, exist_ok=True)
                if entry["ok"]:
                    data = _read_regular(src / entry["file"])
                    if hashlib.sha256(data).hexdigest() != entry["sha256"]:
                        raise OSError("hash mismatch")
                    (out / entry["file"]).write_bytes(data)
                    os.chmod(out / entry["file"], 0o755)
                (out / ENTRY).write_text(json.dumps(entry))
                os.chmod(out, 0o755)
                os.utime(src / ENTRY)  # recently used: pruned last
                staged.append(key)
            except (OSError, KeyError):
                shutil.rmtree(out, ignore_errors=True)
                shutil.rmtree(src, ignore_errors=True)
        if dest.exists():
            os.chmod(dest, 0o755)  # readable by a sandbox with a uid of its own
        return staged

    def prune(self) -> int:
        """Remove the least recently used entries beyond `max_bytes`; returns how many."""
        entries = []
        for entry_file in self.root.glob(f"??/*/{ENTRY}"):
            d = entry_file.parent
            try:
                size = sum(f.stat().st_size for f in d.iterdir())
                entries.append((entry_file.stat().st_mtime, size, d))
            except OSError:
                continue
        total = sum(size for _, size, _ in entries)
        removed = 0
        for _, size, d in sorted(entries):
            if total <= self.max_bytes:
                break
            shutil.rmtree(d, ignore_errors=True)
            total -= size
            removed += 1
        return removed
