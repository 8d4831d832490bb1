"""Post-training data from stored searches: step-centric SFT rows and RL prompts (Kernel-Smith's recipe).

`read_run` / `read_steps` read run directories (read-only); `build_sft` keeps the correct, unflagged
steps that beat their parent; `build_rl` turns the lineage of each run's best program into prompts;
`suite_hashes` / `is_contaminated` keep benchmark tasks out of both; `write_jsonl` writes a dataset.
"""

from kernelsmith.data.decontam import is_contaminated, suite_hashes
from kernelsmith.data.jsonl import write_jsonl
from kernelsmith.data.rl import RlResult, build_rl
from kernelsmith.data.sft import SftResult, build_sft
from kernelsmith.data.steps import Run, Step, read_run, read_steps

__all__ = [
    "Run",
    "Step",
    "read_run",
    "read_steps",
    "SftResult",
    "build_sft",
    "RlResult",
    "build_rl",
    "suite_hashes",
    "is_contaminated",
    "write_jsonl",
]
