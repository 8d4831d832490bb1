"""Throughput of the evaluation service against direct `kernelsmith eval`, on one machine.

Three ways to evaluate the same kind of candidate (the bundled softmax seed, each copy with its own
comment so that each is a distinct candidate and nothing is served from the cache):

1. direct: one `kernelsmith eval --json` process per candidate, one after another (how a script
   without the service does it);
2. `kernelsmith serve --backend local`, CLIENTS threads posting N candidates at once;
3. `kernelsmith serve --backend ray`, the same.

The baselines (eager, torch.compile) are measured once before phase 1 and cached, as a search does.
Prints and writes OUT/serve_gpu.json: evaluations per minute, latency percentiles, the start-up of
each service, and the candidate's median time in each phase (they should agree).

    python benchmarks/serve_gpu.py --device cuda --out DIR [--direct 6] [--service 16] [--clients 4] [--small]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import selectors
import signal
import statistics
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TASK = REPO / "examples/suite/softmax.py"
SEED = REPO / "examples/suite_seeds/softmax.py"
KS = [sys.executable, "-m", "kernelsmith.cli"]
OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def variant(tag: str) -> str:
    return SEED.read_text() + f"\n# benchmark copy {tag}\n"


def direct(tmp: Path, tags: list[str], device: str) -> dict:
    walls, times, statuses = [], [], []
    for tag in tags:
        path = tmp / f"cand_{tag}.py"
        path.write_text(variant(tag))
        t0 = time.monotonic()
        p = subprocess.run(
            [*KS, "eval", str(TASK), str(path), "--device", device, "--json"], capture_output=True, text=True, cwd=REPO
        )
        walls.append(time.monotonic() - t0)
        if p.returncode != 0:
            raise SystemExit(f"kernelsmith eval failed:\n{p.stderr[-2000:]}")
        r = json.loads(p.stdout.strip().splitlines()[-1])
        statuses.append(r["status"])
        times.append(r["candidate_ms"])
    total = sum(walls)
    return {
        "evaluations": len(tags),
        "wall_s": round(total, 2),
        "per_minute": round(60 * len(tags) / total, 2),
        "latency_s": _pct(walls),
        "statuses": _count(statuses),
        "candidate_ms_median": _median(times),
    }


def start(args: list[str]) -> tuple[subprocess.Popen, str, float]:
    t0 = time.monotonic()
    proc = subprocess.Popen([*KS, "serve", "--port", "0", *args], stdout=subprocess.PIPE, cwd=REPO)
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ)
    line = b""
    while not line.endswith(b"\n") and time.monotonic() - t0 < 300:
        if sel.select(1.0):
            chunk = os.read(proc.stdout.fileno(), 4096)
            if not chunk:
                break
            line += chunk
    m = re.search(rb"serving on (http://\S+)", line)
    if not m:
        proc.kill()
        raise SystemExit(f"service did not start: {line!r}")
    url = m.group(1).decode()
    while True:  # ready = the first health answer
        try:
            with OPENER.open(url + "/v1/health", timeout=5):
                break
        except (urllib.error.URLError, OSError):
            time.sleep(0.1)
    return proc, url, time.monotonic() - t0


def post(url: str, body: dict) -> dict:
    data = json.dumps(body).encode()
    while True:
        req = urllib.request.Request(url + "/v1/evaluate", data=data, headers={"Content-Type": "application/json"})
        try:
            with OPENER.open(req, timeout=1200) as r:
                return json.loads(r.read())
        except urllib.error.HTTPError as e:
            if e.code != 429:
                raise SystemExit(f"service answered {e.code}: {e.read()[:500]!r}") from None
            time.sleep(float(e.headers.get("Retry-After", "1")))


def through_service(args: list[str], tags: list[str], clients: int, device: str) -> dict:
    proc, url, startup = start(["--device", device, *args])
    try:
        task_source = TASK.read_text()
        bodies = [
            {"task_source": task_source, "task_name": TASK.stem, "candidate_source": variant(t), "device": device}
            for t in tags
        ]
        results: list = [None] * len(bodies)
        latency: list = [None] * len(bodies)

        def client(k: int) -> None:
            for i in range(k, len(bodies), clients):
                t0 = time.monotonic()
                results[i] = post(url, bodies[i])
                latency[i] = time.monotonic() - t0

        threads = [threading.Thread(target=client, args=(k,)) for k in range(clients)]
        t0 = time.monotonic()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        wall = time.monotonic() - t0
        with OPENER.open(url + "/v1/health", timeout=10) as r:
            health = json.loads(r.read())
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
    return {
        "evaluations": len(tags),
        "clients": clients,
        "startup_s": round(startup, 2),
        "wall_s": round(wall, 2),
        "per_minute": round(60 * len(tags) / wall, 2),
        "latency_s": _pct(latency),
        "statuses": _count([r["status"] for r in results]),
        "candidate_ms_median": _median([r["candidate_ms"] for r in results]),
        "gpu_name": results[0].get("gpu_name"),
        "service_health": health,
    }


def _pct(xs: list[float]) -> dict:
    s = sorted(xs)
    return {
        "p50": round(statistics.median(s), 2),
        "p95": round(s[min(len(s) - 1, int(0.95 * len(s)))], 2),
        "max": round(s[-1], 2),
    }


def _median(xs: list) -> float | None:
    xs = [x for x in xs if x is not None]
    return round(statistics.median(xs), 4) if xs else None


def _count(xs: list[str]) -> dict:
    return {k: xs.count(k) for k in sorted(set(xs))}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--direct", type=int, default=6)
    ap.add_argument("--service", type=int, default=16)
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--skip-ray", action="store_true")
    ap.add_argument("--small", action="store_true", help="the task at its CPU_SIZES (a dry run on the CPU)")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    tmp = args.out / "candidates"
    tmp.mkdir(exist_ok=True)
    if args.small:
        from kernelsmith.task_sizes import shrink_file

        global TASK
        small = tmp / TASK.name
        small.write_text(shrink_file(TASK))
        TASK = small
    report: dict = {"date": time.strftime("%Y-%m-%d"), "task": TASK.name, "device": args.device}

    warm = direct(tmp, ["warm-baselines"], args.device)  # measures and caches eager and torch.compile
    report["cold_first_eval_s"] = warm["wall_s"]
    print("cold first eval:", warm, flush=True)
    report["direct"] = direct(tmp, [f"d{i}" for i in range(args.direct)], args.device)
    print("direct:", report["direct"], flush=True)
    report["service_local"] = through_service(
        ["--backend", "local"], [f"l{i}" for i in range(args.service)], args.clients, args.device
    )
    print("service local:", report["service_local"], flush=True)
    if not args.skip_ray:
        report["service_ray"] = through_service(
            ["--backend", "ray"], [f"r{i}" for i in range(args.service)], args.clients, args.device
        )
        print("service ray:", report["service_ray"], flush=True)
    (args.out / "serve_gpu.json").write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
