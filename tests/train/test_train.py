"""kernelsmith.train: data loading, the speedup reward on the real CPU evaluator, SFT and GRPO
on a tiny random Llama built here (nothing is downloaded), and the `train` CLI's errors."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from concurrent.futures import Future
from pathlib import Path

import pytest
from conftest import case_path

from kernelsmith.errors import UserError
from kernelsmith.evaluate.result import EvalResult, Status
from kernelsmith.train.reward import NO_PROGRAM, SpeedupReward, reply_text

pytest.importorskip("trl")
pytest.importorskip("peft")

TASK = case_path("elementwise_task").read_text()
PARENT = case_path("elementwise_small_blocks").read_text()  # correct, 64 programs: slow
FAST = case_path("elementwise_triton").read_text()  # the same kernel in 4 programs
WRONG = case_path("elementwise_half_written").read_text()
TORCH_ONLY = (
    "import torch\nimport torch.nn as nn\n\n\nclass ModelNew(nn.Module):\n"
    "    def forward(self, x, y):\n        return torch.relu(x) * y + 1.0\n"
)
SYSTEM = "You write fast Triton kernels."
ANSWER = "```python\nBLOCK = 4096\nrelu_mul_add_kernel[(triton.cdiv(n, BLOCK),)](x, y, out, n, BLOCK=BLOCK)\n```"

# Renders system/user/assistant turns; {% generation %} marks what TRL's assistant-only loss trains.
CHAT_TEMPLATE = (
    "{%- for message in messages -%}<|{{ message['role'] }}|>{{ '\\n' }}"
    "{%- if message['role'] == 'assistant' -%}{% generation %}{{ message['content'] }}<|end|>{% endgeneration %}"
    "{%- else -%}{{ message['content'] }}<|end|>{%- endif -%}{{ '\\n' }}{%- endfor -%}"
    "{%- if add_generation_prompt -%}<|assistant|>{{ '\\n' }}{%- endif -%}"
)
SPECIAL = ["<|pad|>", "<|end|>", "<|system|>", "<|user|>", "<|assistant|>"]


def fenced(code: str) -> str:
    return f"Here it is.\n```python\n{code}```\n"


def sft_rows(n: int = 8) -> list[dict]:
    return [
        {
            "messages": [
                {"role": "system", "content": SYSTEM},
                {"role": "user", "content": f"Make task {i} faster with bigger blocks."},
                {"role": "assistant", "content": ANSWER},
            ],
            "meta": {"task": f"t{i}", "step_speedup": 2.0},
        }
        for i in range(n)
    ]


def rl_row(parent_code: str | None, parent_speedup: float | None, operator: str = "rewrite") -> dict:
    return {
        "prompt": [
            {"role": "system", "content": SYSTEM},
            {"role": "user", "content": f"Make this faster:\n{parent_code or TASK}"},
        ],
        "meta": {
            "task": "elementwise",
            "task_hash": "h",
            "task_source": TASK,
            "run_dir": "run",
            "program_id": 3,
            "parent_id": 1 if parent_code else None,
            "parent_code": parent_code,
            "parent_speedup": parent_speedup,
            "operator": operator,
            "step_speedup": 2.0,
            "best_speedup": 2.0,
        },
    }


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory) -> Path:
    """A 2-layer random Llama and a byte-level BPE tokenizer trained on the tests' text, saved locally."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    path = tmp_path_factory.mktemp("tiny-model")
    texts = [m["content"] for r in sft_rows() for m in r["messages"]] + [TASK, PARENT, FAST]
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(
        texts,
        trainers.BpeTrainer(
            vocab_size=400, special_tokens=SPECIAL, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
        ),
    )
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=tok, pad_token="<|pad|>", eos_token="<|end|>", additional_special_tokens=SPECIAL[2:]
    )
    tokenizer.chat_template = CHAT_TEMPLATE
    torch.manual_seed(0)
    config = LlamaConfig(
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        vocab_size=len(tokenizer),
        max_position_embeddings=2048,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
        bos_token_id=None,
    )
    LlamaForCausalLM(config).save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


# ---- data -------------------------------------------------------------------------------------


def test_datasets_keep_what_trl_reads(tmp_path):
    from kernelsmith.train.data import rl_dataset, sft_dataset

    sft = sft_dataset(write_jsonl(tmp_path / "sft.jsonl", sft_rows(3)))
    assert sft.column_names == ["messages"] and sft[0]["messages"][2]["role"] == "assistant"
    rl = rl_dataset(write_jsonl(tmp_path / "rl.jsonl", [rl_row(None, None), rl_row(PARENT, 0.5, "diff")]))
    assert {"prompt", "task_source", "parent_code", "parent_speedup", "operator", "task_hash"} <= set(rl.column_names)
    assert rl[0]["parent_code"] is None and rl[1]["parent_code"] == PARENT and rl[1]["parent_speedup"] == 0.5


@pytest.mark.parametrize(
    "content, kind, needle",
    [
        (None, "sft", "no such data file"),
        ("\n\n", "sft", "holds no rows"),
        ('{"messages": []}\n{oops\n', "sft", "line 2 is not JSON"),
        ('{"prompt": [{"role": "user", "content": "x"}], "meta": {}}\n', "sft", "kernelsmith data sft"),
        (json.dumps(sft_rows(1)[0]) + "\n", "rl", "kernelsmith data rl"),
        ('{"prompt": [{"role": "user", "content": "x"}], "meta": {"operator": "diff"}}\n', "rl", "meta lacks"),
    ],
)
def test_bad_data_files_are_one_line_user_errors(tmp_path, content, kind, needle):
    from kernelsmith.train.data import rl_dataset, sft_dataset

    path = tmp_path / "data.jsonl"
    if content is not None:
        path.write_text(content)
    with pytest.raises(UserError) as err:
        (sft_dataset if kind == "sft" else rl_dataset)(path)
    assert needle in str(err.value) and "\n" not in str(err.value)


def test_batch_arithmetic_makes_whole_prompt_groups():
    from kernelsmith.train.grpo import accumulation_steps

    assert accumulation_steps(prompts_per_step=4, num_generations=8, batch_size=8) == 4
    assert accumulation_steps(prompts_per_step=1, num_generations=8, batch_size=2, processes=2) == 2
    for bad in (
        dict(prompts_per_step=1, num_generations=8, batch_size=3),
        dict(prompts_per_step=2, num_generations=1, batch_size=1),
    ):
        with pytest.raises(UserError):
            accumulation_steps(**bad)


def test_a_missing_train_extra_is_named(monkeypatch, tmp_path):
    import importlib.util

    from kernelsmith.train import common
    from kernelsmith.train.sft import train_sft

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "peft" else real(name, *a))
    with pytest.raises(UserError, match=r"pip install 'kernelsmith\[train\]'") as err:
        train_sft(tmp_path, tmp_path / "sft.jsonl", tmp_path / "out")
    assert str(err.value) == common.TRAIN_EXTRA


# ---- reward -----------------------------------------------------------------------------------


class RecordingBackend:
    """Wraps the real pool: records each submit and each wait on a result, in order."""

    def __init__(self, inner):
        self.inner, self.events = inner, []

    def submit(self, task, candidate, options=None):
        self.events.append(("submit", candidate))
        inner, events = self.inner.submit(task, candidate, options), self.events

        class Watched(Future):
            def result(self, timeout=None):
                events.append(("wait", candidate))
                return inner.result(timeout)

        return Watched()

    def submitted(self) -> list[str]:
        return [c for kind, c in self.events if kind == "submit"]


def test_reward_is_speedup_over_the_remeasured_parent(cpu_pool):
    backend = RecordingBackend(cpu_pool)
    reward = SpeedupReward(backend, max_reward=100.0)
    assert reward.__name__ == "speedup_reward"
    replies = [fenced(FAST), fenced(WRONG), "Use bigger blocks; that is all.", fenced(TORCH_ONLY), fenced(FAST)]
    completions = [[{"role": "assistant", "content": r}] for r in replies]
    step = rl_row(PARENT, 1e-6)["meta"]  # a stored parent speedup that would give a huge reward if it were used
    first = rl_row(None, None)["meta"]  # a first step: no parent
    columns = {k: [step[k]] * 4 + [first[k]] for k in step}
    rewards = reward(prompts=[None] * 5, completions=completions, completion_ids=[[]] * 5, **columns)

    batch = reward.last_batch
    assert batch.statuses[:4] == ["correct", "incorrect", NO_PROGRAM, "rejected"], batch.items
    assert rewards[1:4] == [0.0, 0.0, 0.0]
    parent_now = reward.parent_speedup(reward.task(TASK), PARENT)
    assert parent_now is not None and batch.items[0].parent_speedup == parent_now  # re-measured, not the stored 1e-6
    speedup = batch.items[0].speedup
    assert rewards[0] == pytest.approx(speedup / parent_now) and rewards[0] > 1.0, batch.items[0]
    assert rewards[4] == pytest.approx(speedup) and batch.items[4].parent_speedup is None  # vs eager
    # the parent once for the batch, the fast program once for two rows, every submit before the first wait
    assert backend.submitted().count(PARENT) == 1 and backend.submitted().count(FAST) == 1
    assert batch.parent_evaluations == 1 and batch.evaluations == 3
    first_wait = next(i for i, (kind, _) in enumerate(backend.events) if kind == "wait")
    assert first_wait == 4 and all(kind == "submit" for kind, _ in backend.events[:first_wait])


class ScriptedBackend:
    """Verdicts by the program's block size, for what the real evaluator cannot be steered into."""

    def __init__(self, verdicts: dict[str, EvalResult | Exception]):
        self.verdicts, self.calls = verdicts, []

    def submit(self, task, candidate, options=None):
        self.calls.append(candidate)
        fut: Future = Future()
        verdict = self.verdicts[re.search(r"BLOCK = (\d+)", candidate).group(1)]
        fut.set_exception(verdict) if isinstance(verdict, Exception) else fut.set_result(verdict)
        return fut


def ok(speedup: float, flags=()) -> EvalResult:
    return EvalResult(status=Status.correct, correct=True, speedup=speedup, flags=list(flags))


def test_reward_fallbacks_flags_clipping_and_diffs():
    backend = ScriptedBackend(
        {
            "256": EvalResult(status=Status.timeout, correct=False),
            "4096": ok(3.0),
            "2048": ok(9.0, ["timing_mismatch"]),
            "1024": ok(1e9),
            "512": RuntimeError("boom"),
        }
    )
    reward = SpeedupReward(backend, max_reward=10.0)
    block = lambda size: fenced(FAST.replace("BLOCK = 4096", f"BLOCK = {size}"))  # noqa: E731
    diff = (
        "<<<<<<< SEARCH\n        BLOCK = 256  # small blocks: many programs, slow\n=======\n"
        "        BLOCK = 4096\n>>>>>>> REPLACE\n"
    )
    texts = [block(4096), block(2048), block(1024), block(512), diff, block(4096)]
    n = len(texts)
    rewards = reward(
        completions=texts,
        task_source=[TASK] * n,
        parent_code=[PARENT] * n,
        parent_speedup=[1.5] * n,
        operator=["rewrite"] * 4 + ["diff", "rewrite"],
    )
    # the parent timed out here, so the row's stored 1.5 is the denominator; flagged -> 0; 1e9/1.5 -> clipped
    assert rewards == [pytest.approx(2.0), 0.0, 10.0, 0.0, pytest.approx(2.0), pytest.approx(2.0)], reward.last_batch
    assert reward.last_batch.statuses[3] == "eval_error" and "boom" in reward.last_batch.errors[3]
    # 4 distinct programs + the parent: the diff's child is FAST but for its comments, the same program
    # by the project's identity (kernelsmith.identity), so it is evaluated once
    assert backend.calls.count(FAST) == 1 and len(backend.calls) == 5
    assert reward.parent_speedup(reward.task(TASK), PARENT) is None  # the failure is cached: not retried
    reward(completions=[block(4096)], task_source=[TASK], parent_code=[PARENT], parent_speedup=[1.5])
    assert backend.calls.count(PARENT) == 1
    assert (
        reply_text(
            [{"role": "user", "content": "q"}, {"role": "assistant", "content": [{"type": "text", "text": "a"}]}]
        )
        == "a"
    )


# ---- SFT and GRPO ----------------------------------------------------------------------------


def test_sft_lora_loss_falls_and_the_adapter_loads(tiny_model, tmp_path):
    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from kernelsmith.train.sft import train_sft

    data = write_jsonl(tmp_path / "sft.jsonl", sft_rows(8))
    out = tmp_path / "out"
    summary = train_sft(tiny_model, data, out, lora_r=8, lr=1e-2, max_steps=16, max_length=256, bf16=False, merge=True)
    losses = summary["losses"]
    assert summary["steps"] == 16 and len(losses) == 16 and summary["tokens_per_s"] > 0
    assert sum(losses[-3:]) / 3 < sum(losses[:3]) / 3 - 0.3, losses
    assert (out / "adapter_config.json").is_file() and (out / "tokenizer.json").is_file()
    assert summary["merged"] == str(out / "merged") and (out / "merged" / "config.json").is_file()
    assert not (out / "merged" / "adapter_config.json").exists()  # a plain model, loadable as one

    tokenizer = AutoTokenizer.from_pretrained(out, local_files_only=True)
    text = tokenizer.apply_chat_template(sft_rows(1)[0]["messages"][:2], tokenize=False, add_generation_prompt=True)
    ids = tokenizer(text, return_tensors="pt")
    base = AutoModelForCausalLM.from_pretrained(tiny_model, local_files_only=True)
    with torch.no_grad():
        before = base(**ids).logits
        tuned = PeftModel.from_pretrained(base, out)
        after = tuned(**ids).logits
        generated = tuned.generate(**ids, max_new_tokens=4, do_sample=False)
    assert not torch.allclose(before, after)  # the adapter carries what was trained
    assert generated.shape[1] > ids["input_ids"].shape[1]


class SpyReward(SpeedupReward):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.calls: list[dict] = []

    def __call__(self, prompts=None, completions=None, completion_ids=None, **kwargs):
        self.calls.append({"completions": completions, **kwargs})
        return super().__call__(prompts, completions, completion_ids, **kwargs)


def test_grpo_step_runs_with_the_real_reward(tiny_model, tmp_path, cpu_pool):
    from kernelsmith.train.grpo import train_grpo

    data = write_jsonl(tmp_path / "rl.jsonl", [rl_row(PARENT, 0.5), rl_row(None, None)])
    reward = SpyReward(cpu_pool)
    summary = train_grpo(
        tiny_model,
        data,
        tmp_path / "out",
        reward,
        num_generations=2,
        prompts_per_step=1,
        batch_size=2,
        max_steps=1,
        max_completion_length=16,
        bf16=False,
    )
    assert summary["steps"] == 1 and summary["rewards"] == [0.0]  # a random model writes no program
    assert len(reward.calls) == 1
    call = reward.calls[0]
    assert {"task_source", "parent_code", "parent_speedup", "operator", "task_hash", "program_id"} <= set(call)
    assert len(call["completions"]) == 2 and call["task_source"] == [TASK, TASK]
    assert call["completions"][0][0]["role"] == "assistant"  # conversational completions
    assert reward.last_batch.statuses == [NO_PROGRAM, NO_PROGRAM]
    assert (tmp_path / "out" / "adapter_config.json").is_file()


# ---- CLI --------------------------------------------------------------------------------------


def run_train_cli(*args: str) -> subprocess.CompletedProcess:
    """`kernelsmith train ARGS`, in this process: the errors below come before any training starts."""
    from test_cli import ks_here

    return ks_here("train", *args)


def test_cli_missing_model_is_one_error_line(tmp_path):
    missing = tmp_path / ("a-long-directory-name-" * 6) / "model"
    p = run_train_cli("sft", "--model", str(missing), "--data", str(tmp_path / "d.jsonl"), "--out", str(tmp_path))
    assert p.returncode == 2, (p.stdout, p.stderr)
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: --model") and "no such model directory" in lines[0], p.stderr
    assert "Traceback" not in p.stderr


def test_cli_empty_model_folder_says_so(tmp_path):
    empty = tmp_path / "model"
    empty.mkdir()
    p = run_train_cli("sft", "--model", str(empty), "--data", str(tmp_path / "d.jsonl"), "--out", str(tmp_path))
    assert p.returncode == 2 and "Traceback" not in p.stderr, p.stderr
    assert p.stderr.strip().splitlines() == [
        f"error: --model {empty}: the folder is empty; a local model folder holds config.json, the weights "
        "(*.safetensors or *.bin) and the tokenizer's files"
    ]


def test_a_model_folder_without_its_parts_is_named(tmp_path):
    from kernelsmith.train.common import load_local, model_dir

    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "README.md").write_text("weights to come\n")
    with pytest.raises(UserError, match=r"no config\.json in it; a local model folder holds config\.json"):
        model_dir(folder)
    (folder / "config.json").write_text('{"model_type": "llama"}')
    with pytest.raises(UserError, match="no weights in it"):
        model_dir(folder)
    (folder / "model.safetensors").write_bytes(b"")
    with pytest.raises(UserError) as no_tokenizer:
        load_local(model_dir(folder), bf16=False)
    message = str(no_tokenizer.value)
    assert message.startswith(f"--model {folder}: its tokenizer does not load: ") and "\n" not in message
    assert not message.rstrip().endswith("from one of:")


def test_cli_import_leaves_the_training_stack_unloaded():
    code = (
        "import sys, kernelsmith.cli.train; "
        "print(sorted(m for m in ('trl', 'peft', 'transformers', 'datasets', 'torch') if m in sys.modules))"
    )
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0 and p.stdout.strip() == "[]", (p.stdout, p.stderr)
