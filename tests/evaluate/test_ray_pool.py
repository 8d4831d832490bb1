"""The Ray backend on a local Ray cluster with two CPU actors: a batch evaluated correctly, an actor
killed mid-evaluation costs a retry and not a verdict, and the commands that take the backend
(`serve --backend ray` joining the cluster, `evolve --eval-backend ray` starting its own) work
end to end."""

from __future__ import annotations

import json
import logging
import subprocess
import threading
import time

import pytest

ray = pytest.importorskip("ray", reason="the Ray backend needs Ray (the Makefile installs it)")

from conftest import REPO  # noqa: E402
from serve_helpers import KERNELSMITH, REDTEAM, SOFTMAX_TASK, evaluate_body, http, start_service, variant  # noqa: E402

from kernelsmith.evaluate import EvalOptions, Status  # noqa: E402
from kernelsmith.task import Task  # noqa: E402

pytestmark = pytest.mark.timeout(600)

OPTS = EvalOptions(device="cpu", trials=2, timeout=120, memory_limit="1G")


@pytest.fixture(scope="module")
def cluster() -> str:
    """A local Ray cluster for this module, with room (logical CPUs) for the pool's two actors
    and for a service that joins it, and two logical GPUs (no real ones: enough to check how
    actors are placed on GPUs). Yields its address."""
    ray.init(num_cpus=6, num_gpus=2, include_dashboard=False, log_to_driver=False, logging_level=logging.ERROR)
    yield ray.get_runtime_context().gcs_address
    ray.shutdown()


@pytest.fixture(scope="module")
def pool(cluster):
    from kernelsmith.evaluate.backends.ray import RayPool

    p = RayPool(device="cpu", workers=2, options=OPTS)
    yield p
    p.close()
    assert ray.is_initialized()  # the pool joined Ray, so it leaves it running


def test_a_batch_is_evaluated_correctly_on_two_actors(pool):
    task = Task.from_file(SOFTMAX_TASK)
    batch = {
        "honest": variant("ray-honest"),
        "honest2": variant("ray-honest-2"),
        "torch_only": (REDTEAM / "torch_only_forward.py").read_text(),
        "syntax": "class ModelNew(:\n",
    }
    futures = {name: pool.submit(task, code) for name, code in batch.items()}
    results = {name: f.result(timeout=400) for name, f in futures.items()}
    assert results["honest"].status is Status.correct and results["honest2"].status is Status.correct
    assert results["torch_only"].status is Status.rejected and "no_custom_kernel" in results["torch_only"].flags
    assert results["syntax"].status is Status.compile_error
    where = [ray.get(a.where.remote(), timeout=60) for a in pool.actors()]
    assert len({w["pid"] for w in where}) == 2  # two actors, two processes


def test_an_actor_killed_mid_evaluation_is_replaced_and_its_job_retried(pool):
    task = Task.from_file(SOFTMAX_TASK)
    slow = [variant(f"ray-slow-{i}", sleep_s=1.0) for i in range(2)]
    restarts = pool.restarts
    futures = [pool.submit(task, code, OPTS.model_copy(update={"trials": 1})) for code in slow]
    time.sleep(3.0)  # both actors are busy with a sleeping candidate
    victim = pool.actors()[0]
    ray.kill(victim, no_restart=True)
    results = [f.result(timeout=500) for f in futures]
    assert [r.status for r in results] == [Status.correct] * 2, [r.error for r in results]
    assert pool.restarts == restarts + 1
    assert pool.actors()[0] is not victim
    # and the pool goes on
    assert pool.evaluate(task, variant("ray-after-kill")).status is Status.correct


def test_hardware_comes_from_an_actor(pool):
    info = pool.hardware().result(timeout=120)
    assert info["device"] == "cpu" and info["cores"] >= 1


def test_serve_joins_the_cluster_and_evolve_starts_its_own(cluster, tmp_path):
    """The commands: a service whose actor joins this module's cluster answers clients, and a
    search with --eval-backend ray and no address starts (and stops) a Ray instance of its own."""
    served = start_service(tmp_path, "--backend", "ray", "--ray-address", cluster, "--workers", "1")
    try:
        status, _, health = http("GET", served.url + "/v1/health")
        assert status == 200 and health["backend"] == "ray" and health["workers"] == 1
        answers: list = []
        threads = [
            threading.Thread(
                target=lambda i=i: answers.append(
                    http("POST", served.url + "/v1/evaluate", evaluate_body(variant(f"ray-serve-{i}")))
                )
            )
            for i in range(2)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=400)
        assert [(a[0], a[2]["status"]) for a in answers] == [(200, "correct")] * 2
    finally:
        assert served.stop() == 0, served.log.read_text(errors="replace")

    p = subprocess.run(
        [
            str(KERNELSMITH),
            "evolve",
            REPO / "examples/suite/softmax.py",
            "--small",
            "--seed",
            REPO / "examples/suite_seeds/softmax.py",
            "--mutator",
            "tune",
            "--iterations",
            "1",
            "--device",
            "cpu",
            "--eval-backend",
            "ray",
            "--workers",
            "1",
            "--run-dir",
            tmp_path / "run",
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=500,
        cwd=REPO,
    )
    assert p.returncode == 0, p.stderr
    summary = json.loads(p.stdout.strip().splitlines()[-1])
    assert summary["iterations_done"] == 1 and summary["best"]["status"] == "correct"


def test_one_actor_per_gpu_each_sticking_to_its_own(pool):
    """On a cluster with two (logical) GPUs, a cuda pool has two actors by default, and Ray gives
    each its own GPU: the judge it starts inherits that CUDA_VISIBLE_DEVICES. More workers than
    GPUs is refused in one line. (No evaluation runs: there is no real GPU here.)"""
    from kernelsmith.errors import UserError
    from kernelsmith.evaluate.backends.ray import RayPool

    gpu_pool = RayPool(device="cuda", options=OPTS.model_copy(update={"device": "cuda"}))
    try:
        assert gpu_pool.workers == 2
        where = [ray.get(a.where.remote(), timeout=120) for a in gpu_pool.actors()]
        assert sorted(w["cuda_visible_devices"] for w in where) == ["0", "1"], where
    finally:
        gpu_pool.close()
    with pytest.raises(UserError, match=r"^--workers 3: the Ray cluster has 2 GPUs, and each worker takes one$"):
        RayPool(device="cuda", workers=3, options=OPTS)
    assert ray.is_initialized()  # a refused pool leaves a cluster it joined alone


def test_local_pool_gives_each_worker_one_gpu():
    from kernelsmith.evaluate.pool import gpu_slots, visible_gpus

    assert gpu_slots(["0", "1", "2", "3"], None) == ["0", "1", "2", "3"]
    assert gpu_slots(["4", "6"], 4) == ["4", "6", "4", "6"]
    assert gpu_slots(["0", "1", "2"], 2) == ["0", "1"]
    import os

    old = os.environ.get("CUDA_VISIBLE_DEVICES")
    os.environ["CUDA_VISIBLE_DEVICES"] = "2, 5,7"
    try:
        assert visible_gpus() == ["2", "5", "7"]
    finally:
        if old is None:
            os.environ.pop("CUDA_VISIBLE_DEVICES")
        else:
            os.environ["CUDA_VISIBLE_DEVICES"] = old
