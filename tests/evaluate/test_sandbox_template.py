"""A judge's sandbox template (runner/template.py, sandboxing/template_handle.py): sandboxes forked with
their imports done start in a fraction of a spawned one's time, with the same layers, and are watched,
killed and collected as spawned ones are. The escapes through forked sandboxes: tests/redteam/test_escapes.py
(its configurations without bubblewrap)."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from kernelsmith.evaluate.sandboxing.process import describe_exit
from kernelsmith.evaluate.sandboxing.sandbox_handle import SandboxHandle
from kernelsmith.evaluate.sandboxing.template_handle import Template

pytestmark = pytest.mark.skipif(not os.path.isdir("/proc"), reason="needs Linux's /proc")


@pytest.fixture
def template(tmp_path, monkeypatch):
    monkeypatch.setenv("KERNELSMITH_SANDBOX_LAYERS", "landlock,seccomp")  # no bubblewrap: the template serves
    monkeypatch.setenv("KS_TEST_API_KEY", "s3cr3t-of-the-judge")
    t = Template("cpu", tmp_path, tmp_path / "template.log")
    deadline = time.monotonic() + 120
    while not t.is_ready():
        assert time.monotonic() < deadline, (tmp_path / "template.log").read_text()
        time.sleep(0.02)
    yield t
    t.close()


def _ready(sb: SandboxHandle) -> float:
    t0 = time.monotonic()
    sb.wait_ready(time.monotonic() + 120)
    return time.monotonic() - t0


def test_a_forked_sandbox_is_ready_with_its_layers_and_no_secret(template, tmp_path):
    sb = SandboxHandle("cpu", tmp_path, template=template)
    try:
        assert sb.forked
        _ready(sb)
        assert sb.info["pid"] == sb.proc.pid
        assert sb.containment().on.keys() >= {"landlock", "seccomp"}, sb.info
        environ = Path(f"/proc/{sb.proc.pid}/environ").read_bytes().decode(errors="replace")
        assert "s3cr3t-of-the-judge" not in environ  # the template's own environment was scrubbed
        assert os.getsid(sb.proc.pid) == sb.proc.pid  # a session of its own: the judge kills its group
        assert os.readlink(f"/proc/{sb.proc.pid}/cwd") == str(sb.workdir)
    finally:
        sb.close()
    assert sb.proc.returncode == -signal.SIGKILL, describe_exit(sb.proc.returncode)
    assert not Path(f"/proc/{sb.proc.pid}").exists()  # collected: no zombie left


def test_a_sandbox_that_dies_is_seen_dead_with_its_signal(template, tmp_path):
    sb = SandboxHandle("cpu", tmp_path, template=template)
    try:
        _ready(sb)
        os.kill(sb.proc.pid, signal.SIGSEGV)
        deadline = time.monotonic() + 30
        while sb.proc.poll() is None:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        assert describe_exit(sb.proc.returncode) == "killed by SIGSEGV"
    finally:
        sb.close()


def test_without_its_template_a_sandbox_is_spawned(template, tmp_path):
    template.proc.kill()
    template.proc.wait()
    sb = SandboxHandle("cpu", tmp_path, template=template)
    try:
        assert not sb.forked
        _ready(sb)
    finally:
        sb.close()


def test_the_template_refuses_a_sandbox_of_the_other_interpreter_setting(template, tmp_path):
    sb = SandboxHandle("cpu", tmp_path, template=template, interpret=False)
    try:
        assert not sb.forked  # Triton read its interpreter flag when the template imported it
    finally:
        sb.close()
