"""Entry point of a judge process.

It starts its sandbox template (or, with bubblewrap, its first sandbox) before importing torch, so
the two warm up side by side and a one-off `kernelsmith eval` does not wait for them one after the other.

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
from kernelsmith.evaluate.sandboxing import containment
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
    if use_template() and "bwrap" not in containment.plan(args.device).on:
        # It imports beside the judge; every sandbox, the first included, is forked once it has.
        template, spares = Template(args.device, tmp, tmp / "template.log"), []
    else:  # bubblewrap's sandboxes are spawned (their PID namespace comes with the spawn): the first now
        template, spares = None, [SandboxHandle(args.device, tmp)]

    from kernelsmith.evaluate.judging.service import serve  # torch: seconds to import

    serve(Channel(Connection(args.fd)), args.device, tmp, spares, template)
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
