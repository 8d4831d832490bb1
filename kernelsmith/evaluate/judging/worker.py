"""Entry point of a judge process.

It starts its first sandbox before importing torch, so the two warm up side by side and a
one-off `kernelsmith eval` does not wait for them one after the other.

    python -m kernelsmith.evaluate.judging.worker --fd N --device cpu|cuda [--parent PID]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from multiprocessing.connection import Connection
from pathlib import Path

from kernelsmith.evaluate.protocol import Channel
from kernelsmith.evaluate.sandboxing.process import become_subreaper, die_with_parent
from kernelsmith.evaluate.sandboxing.sandbox_handle import SandboxHandle
from kernelsmith.evaluate.sandboxing.template_handle import Template, use_template


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--fd", type=int, required=True)
    ap.add_argument("--device", choices=["cpu", "cuda"], required=True)
    ap.add_argument("--parent", type=int, default=None, help="pid of the pool's process: die with it")
    args = ap.parse_args()
    if args.parent is not None:
        die_with_parent(args.parent)
    become_subreaper()  # before any sandbox exists, so its orphans re-parent to us
    tmp = Path(tempfile.mkdtemp(prefix="ks-judge-"))
    first = SandboxHandle(args.device, tmp)
    # Forks the next sandboxes with their imports done; the first is spawned, as the template imports beside it.
    template = Template(args.device, tmp, tmp / "template.log") if use_template() else None

    from kernelsmith.evaluate.judging.service import serve  # torch: seconds to import

    serve(Channel(Connection(args.fd)), args.device, tmp, [first], template)
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
