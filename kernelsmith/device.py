"""Where candidates run: the one device type of every command, setting and verdict (a module of its
own, with no imports, so that the CLI can offer the choice without importing torch)."""

from __future__ import annotations

from enum import Enum


class Device(str, Enum):
    cuda = "cuda"
    cpu = "cpu"


DEVICES = tuple(d.value for d in Device)
