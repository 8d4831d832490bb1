"""`kernelsmith optimize`: a model to a checked patch in one call, within a search budget (docs/optimize.md).

It owns the work directory and its resume (workdir.py), the budget and its split by share (budget.py),
which regions are searched (plan.py) and from what start (starts.py), the searches on one evaluation pool
(search.py; board.py: their live view), the patch (patching.py), and the outcome, its record and its page
(outcome.py, result.py, page.py); run.py ties them. It uses capture, seed, evolve, evaluate and report, and
is used by the CLI only. `optimize` is imported when first asked for: the CLI reads the options' defaults
here without importing torch.
"""

from typing import TYPE_CHECKING

from kernelsmith.optimize.budget import parse_budget, split_budget
from kernelsmith.optimize.options import OptimizeOptions
from kernelsmith.optimize.result import Optimized

if TYPE_CHECKING:
    from kernelsmith.optimize.run import optimize

__all__ = ["OptimizeOptions", "Optimized", "optimize", "parse_budget", "split_budget"]


def __getattr__(name: str):
    if name == "optimize":
        from kernelsmith.optimize.run import optimize

        return optimize
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
