"""The judge's clock over CUDA-graph replays: a batch that bounds calls of a few microseconds.

Calls run one by one from Python measure the host (each launch, refill and checksum costs more
than a 2-us call), so a batch of them bounds nothing below ~1 ms. Here the sandbox captures `calls`
calls in one CUDA graph, call k reading input set k % sets and followed by an in-graph weighted
checksum of its whole output into slot k. On the judge's "go" (its seed and weight seed) the sandbox
refills the sets, writes the weights, replays the graph once and replies with every checksum: the
reply that stops the judge's clock cannot exist before every call's output did. The judge runs the
same code around a forward that does nothing (`harness_cost`) to learn what the harness itself
costs in that span, and checks sampled calls' checksums against the reference (judge_clock).
"""

from __future__ import annotations

import pickle as _pickle
import time

import torch

from kernelsmith.evaluate.checks import flatten_outputs
from kernelsmith.evaluate.checksums import checksum_weights, flat32, summed
from kernelsmith.evaluate.measuring import persisting_l2
from kernelsmith.evaluate.measuring.activity import Activity, ActivityRecorder
from kernelsmith.evaluate.measuring.capture import stream_for
from kernelsmith.evaluate.measuring.timing import Workload, touched

_perf_counter = time.perf_counter
_synchronize = torch.cuda.synchronize
_CUDAGraph = torch.cuda.CUDAGraph
_graph = torch.cuda.graph
_dot = torch.dot
_zeros = torch.zeros
_empty = torch.empty
_reset_l2 = persisting_l2.reset


class GraphBatch:
    """`calls` calls of `work.forward` with their checksums, captured in one graph."""

    def __init__(self, work: Workload, calls: int, sets: int, device: str = "cuda"):
        self.work = work
        self.calls = calls
        self.sets = work.sets(sets, 0)
        leaves = flatten_outputs(work.forward(self.sets[0]))  # the outputs' layout
        _synchronize()
        self.template = leaves
        self.weights = [
            _empty(flat32(x).numel(), dtype=torch.float32, device=device) if summed(x) else None for x in leaves
        ]
        slots = sum(w is not None for w in self.weights)
        self.sums = _zeros(calls, max(slots, 1), dtype=torch.float32, device=device)
        self.graph = _CUDAGraph()
        stream = stream_for(lambda: self._checksum(0, flatten_outputs(work.forward(self.sets[0]))))
        with _graph(self.graph, stream=stream):
            for k in range(calls):
                touched(self.sets[k % len(self.sets)])  # as the timing graph's calls (timing.touched)
                self._checksum(k, flatten_outputs(work.forward(self.sets[k % len(self.sets)])))
        self.slots = slots

    def _checksum(self, k: int, leaves: list) -> None:
        if len(leaves) != len(self.weights):
            raise ValueError(f"forward returned {len(leaves)} outputs, earlier {len(self.weights)}")
        j = 0
        for leaf, w in zip(leaves, self.weights):
            if w is not None:
                _dot(flat32(leaf), w, out=self.sums[k, j])
                j += 1

    def go(self, seed: int, weight_seed: int) -> list[list[float]]:
        """Refill set j from seed + 1 + j, draw the weights, replay once; every call's checksums."""
        self.work.refill(self.sets, seed + 1)
        for w, fresh in zip(self.weights, checksum_weights(self.template, weight_seed)):
            if w is not None:
                w.copy_(fresh)
        _reset_l2()  # as before every timed replay (timing.py): no input persists in the L2
        self.graph.replay()
        rows = self.sums.tolist()  # waits for the replay
        return [row[: self.slots] for row in rows]

    def record(self, device: str) -> Activity:
        """One untimed replay under the profiler: what ran in the calls (the operator rule)."""
        with ActivityRecorder(device) as rec:
            self.graph.replay()
            _synchronize()
        return rec.activity


def harness_cost(
    template_out, work_make, calls: int, sets: int, seed: int, device: str = "cuda", goes: int = 1
) -> tuple[list[float], Activity]:
    """In the judge's process: the batch's own cost around a forward that launches nothing (it returns
    `template_out`, shaped like the reference's output), in ms for each of `goes` "go"s, and the kernels
    the harness runs in one replay of `calls` calls (left out of the candidate's counts). Each go's reply
    is pickled and read back as the sandbox's travels (evaluate/protocol.py), so that its cost is the
    harness's too."""
    work = Workload(lambda inputs: template_out, work_make)
    batch = GraphBatch(work, calls, sets, device)
    batch.go(seed, seed + 1)  # warm: the first replay uploads the graph
    costs = []
    for g in range(goes):
        t0 = _perf_counter()
        _pickle.loads(_pickle.dumps({"op": "batch_done", "checksums": batch.go(seed + 2 + 2 * g, seed + 3 + 2 * g)}, 5))
        costs.append((_perf_counter() - t0) * 1e3)
    return costs, batch.record(device)
