"""The build cache (kernelsmith/evaluate/build/cache.py): published by trusted code only, handed to
a sandbox as a hash-checked copy, never through a link the builder planted."""

from __future__ import annotations

import hashlib
import json
import os

import pytest

from kernelsmith.evaluate.build.cache import ENTRY, BuildCache

KEY = "ab" + "0" * 62
KEY2 = "cd" + "1" * 62


def _library(tmp_path, data: bytes = b"\x7fELF fake library"):
    lib = tmp_path / "out" / "ext.so"
    lib.parent.mkdir(exist_ok=True)
    lib.write_bytes(data)
    return lib


def test_a_published_library_is_staged_as_a_checked_copy(tmp_path):
    cache = BuildCache(tmp_path / "cache")
    entry = cache.publish_library(KEY, _library(tmp_path), "ext", 12.5)
    assert entry["ok"] and entry["sha256"] == hashlib.sha256(b"\x7fELF fake library").hexdigest()
    assert cache.stage([KEY, KEY2], tmp_path / "scratch") == [KEY]  # KEY2 was never built
    staged = tmp_path / "scratch" / KEY
    assert (staged / "ext.so").read_bytes() == b"\x7fELF fake library"
    assert json.loads((staged / ENTRY).read_text())["module"] == "ext"


def test_a_failed_build_is_cached_with_its_error(tmp_path):
    cache = BuildCache(tmp_path / "cache")
    cache.publish_failure(KEY, "cuda.cu(3): error: identifier x is undefined", 4.0)
    entry = cache.get(KEY)
    assert entry is not None and entry["ok"] is False
    assert cache.stage([KEY], tmp_path / "scratch") == [KEY]
    assert "identifier x" in json.loads((tmp_path / "scratch" / KEY / ENTRY).read_text())["error"]


def test_the_first_publication_of_a_key_stays(tmp_path):
    cache = BuildCache(tmp_path / "cache")
    cache.publish_library(KEY, _library(tmp_path, b"first"), "ext", 1.0)
    second = cache.publish_library(KEY, _library(tmp_path, b"second"), "ext", 1.0)
    assert second["sha256"] == hashlib.sha256(b"first").hexdigest()
    assert not list((tmp_path / "cache").glob(".publish-*"))


def test_a_library_changed_in_the_cache_is_not_staged_and_is_dropped(tmp_path):
    cache = BuildCache(tmp_path / "cache")
    cache.publish_library(KEY, _library(tmp_path), "ext", 1.0)
    (cache.path(KEY) / "ext.so").write_bytes(b"something else")
    assert cache.stage([KEY], tmp_path / "scratch") == []
    assert cache.get(KEY) is None  # built again next time
    assert not (tmp_path / "scratch" / KEY).exists()


def test_a_builder_cannot_publish_a_link_to_a_file_outside_its_scratch(tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("token=hunter2")
    link = tmp_path / "out" / "ext.so"
    link.parent.mkdir()
    os.symlink(secret, link)
    cache = BuildCache(tmp_path / "cache")
    with pytest.raises(OSError):
        cache.publish_library(KEY, link, "ext", 1.0)
    assert cache.get(KEY) is None


def test_a_directory_is_not_a_library(tmp_path):
    (tmp_path / "out" / "ext.so").mkdir(parents=True)
    with pytest.raises(OSError):
        BuildCache(tmp_path / "cache").publish_library(KEY, tmp_path / "out" / "ext.so", "ext", 1.0)


def test_keys_are_checked_before_they_name_a_path(tmp_path):
    cache = BuildCache(tmp_path / "cache")
    for bad in ("../../etc", "AB" + "0" * 62, "ab"):
        with pytest.raises(ValueError):
            cache.path(bad)


def test_pruning_removes_the_least_recently_used_entries_first(tmp_path):
    cache = BuildCache(tmp_path / "cache", max_bytes=3000)
    keys = [f"{i:02x}" + "0" * 62 for i in range(3)]
    for i, key in enumerate(keys):
        cache.publish_library(key, _library(tmp_path, bytes([i]) * 1200), "ext", 1.0)
        os.utime(cache.path(key) / ENTRY, (1000 + i, 1000 + i))
    os.utime(cache.path(keys[0]) / ENTRY, (5000, 5000))  # used last
    assert cache.prune() == 1
    assert cache.get(keys[1]) is None
    assert cache.get(keys[0]) is not None and cache.get(keys[2]) is not None
