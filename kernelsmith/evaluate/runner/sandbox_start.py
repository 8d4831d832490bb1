"""Entry point of a sandbox process: contain it, then start the sandbox.

Landlock binds the calling thread and the threads it starts later, so it is applied here, before
torch is imported (importing torch starts a thread). The other layers bind every thread and
come after CUDA is up (sandbox.py).

    python -m kernelsmith.evaluate.runner.sandbox_start --fd N --device cpu|cuda [--layers L,..] [--uid U]
"""

from __future__ import annotations

import argparse
import os


def start(fd: int, device: str, layers: list[str], uid: int | None) -> None:
    """Contain this process (the layers that come before torch's threads), then be the sandbox. Also
    the start of a sandbox forked from a template (runner/template.py), whose imports are done."""
    from kernelsmith.evaluate.sandboxing.containment import apply_early, enter_pid_namespace  # standard library only

    early = {"pidns": enter_pid_namespace(fd)} if "pidns" in layers else {}
    early.update(apply_early(layers, os.getcwd(), device))

    from kernelsmith.evaluate.runner import sandbox  # torch, triton

    sandbox.main(fd, device, layers, uid, early)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--fd", type=int, required=True)
    ap.add_argument("--device", choices=["cpu", "cuda"], required=True)
    ap.add_argument("--layers", default="", help="containment layers to apply in the process")
    ap.add_argument("--uid", type=int, default=None, help="drop to this uid/gid once CUDA is up")
    args = ap.parse_args()
    start(args.fd, args.device, [n for n in args.layers.split(",") if n], args.uid)


if __name__ == "__main__":
    main()
