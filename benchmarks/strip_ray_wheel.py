"""Make a Ray wheel small enough to carry to the GPU machine (the device tool moves at most 64 MiB).

Ray's manylinux wheel is ~79 MB; a third of it is `ray/jars/ray_dist.jar` (Java workers) and much
of the rest is libraries kernelsmith never imports (RLlib, Tune, Train, Serve, Data, the
dashboard's web client). The evaluation actors need only Ray Core. This rewrites the wheel
without those folders and with a matching RECORD, so pip installs it normally.

    python benchmarks/strip_ray_wheel.py ray-2.60.0-cp312-cp312-manylinux2014_x86_64.whl OUT_DIR
"""

from __future__ import annotations

import sys
import zipfile
from pathlib import Path

DROP = (
    "ray/jars/",
    "ray/dashboard/client/",
    "ray/rllib/",
    "ray/tune/",
    "ray/train/",
    "ray/serve/",
    "ray/data/",
    "ray/llm/",
)


def strip(src: Path, out_dir: Path) -> Path:
    out = out_dir / src.name
    kept = dropped = 0
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as zout:
        for info in zin.infolist():
            name = info.filename
            if name.startswith(DROP):
                dropped += 1
                continue
            data = zin.read(info)
            if name.endswith(".dist-info/RECORD"):
                lines = [ln for ln in data.decode().splitlines() if not ln.startswith(DROP)]
                data = ("\n".join(lines) + "\n").encode()
            zout.writestr(info, data)
            kept += 1
    print(f"{out}: {kept} files kept, {dropped} dropped, {out.stat().st_size / 2**20:.1f} MiB")
    return out


if __name__ == "__main__":
    strip(Path(sys.argv[1]), Path(sys.argv[2]))
