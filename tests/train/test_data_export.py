"""Post-training data from run directories: SFT steps, RL prompts, decontamination, the `data` commands.

The hand-made run (task relu, `run_a`), program by program, with what SFT at min_gain 1.0 does:

  seed       seed, no messages, ok 1.0                    -> no_llm_messages
  first      translate, ok 2.0                            -> kept (first)
  bad_first  translate, incorrect                         -> not_correct
  tuned      tune of first, no messages, ok 2.2           -> no_llm_messages
  fast       rewrite of first, ok 3.0 (gain 1.5)          -> kept
  even       diff of first, ok 2.0 (gain exactly 1.0)     -> gain_below_min
  slower     rewrite of first, ok 1.6 (gain 0.8)          -> gain_below_min
  cheat      rewrite of first, correct, flagged, 5.0      -> flagged
  wrong      rewrite of first, incorrect                  -> not_correct
  orphan     repair of bad_first, ok 2.5                  -> parent_not_correct
  dup_low    rewrite of fast, ok 3.8 (gain 1.27), code D  -> duplicate of dup_high
  dup_high   crossover of first, ok 3.9 (gain 1.95), D'   -> kept (D' = D up to comments/whitespace/docstring)
  small      rewrite of fast, ok 3.3 (gain 1.1)           -> kept (dropped at min_gain 1.2)
  tuned2     tune of small, no messages, ok 3.5           -> no_llm_messages
  best       diff of tuned2, ok 4.55 (gain 1.3)           -> kept; the run's best
                                                             (lineage: first, fast, small, tuned2, best)
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
import typer
from conftest import case_path
from typer.testing import CliRunner

from kernelsmith.cli.data import data_app
from kernelsmith.data import build_rl, build_sft, is_contaminated, read_run, suite_hashes
from kernelsmith.errors import UserError
from kernelsmith.evaluate.result import EvalResult, Status, TimingStats
from kernelsmith.evolve.program import Program, score_of
from kernelsmith.evolve.store import RunStore
from kernelsmith.task import Task

TASK_A = case_path("elementwise_task").read_text()
TASK_B = case_path("rowsum_task").read_text()
CODE_D = 'import torch\n\n\ndef f(x):\n    """Add one."""\n    return x + 1  # one\n'
CODE_D2 = "import torch\n# the same program, formatted otherwise\n\ndef f( x ):\n    return (x + 1)\n"


def messages(name: str) -> list[dict]:
    return [
        {"role": "system", "content": "You write Triton kernels."},
        {"role": "user", "content": f"Improve the program ({name})."},
    ]


def make_run(
    run_dir: Path,
    task_name: str,
    task_source: str,
    specs: list[tuple],
    timings: dict[str, list[float]] | None = None,
    evals: dict[str, dict] | None = None,
) -> dict[str, Program]:
    """specs: (name, operator, parent name or None, status, speedup, flags, code or None). LLM operators
    get messages and a response; seed and tune do not. `timings`: name -> timed samples (ms), stored
    as the program's `eval` record; `evals`: name -> the `eval` record itself, as stored."""
    store = RunStore(run_dir)
    store.set_meta("task_name", task_name)
    store.set_meta("task_hash", Task.from_source(task_source).hash)
    store.set_meta("task_source", task_source)
    made: dict[str, Program] = {}
    for i, (name, op, parent, status, speedup, flags, code) in enumerate(specs):
        llm = op not in ("seed", "tune")
        p = Program(
            iteration=i,
            island=0,
            operator=op,
            code=code or f"def {name}():\n    return {i}\n",
            status=status,
            parent_id=made[parent].id if parent else None,
            model="m" if llm else None,
            messages=messages(name) if llm else None,
            response=f"reply {name}" if llm else None,
            correct=status == "correct",
            speedup=speedup,
            speedup_vs_compile=speedup / 2 if speedup else None,
            flags=list(flags),
        )
        if timings and name in timings:
            p.eval = EvalResult(
                status=Status(status),
                correct=status == "correct",
                speedup=speedup,
                timing=TimingStats.from_samples(timings[name]),
            ).model_dump(mode="json")
        if evals and name in evals:
            p.eval = evals[name]
        p.score = score_of(status, p.flags, speedup)
        made[name] = store.add(p)
    store.close()
    return made


RUN_A = [
    ("seed", "seed", None, "correct", 1.0, [], None),
    ("first", "translate", None, "correct", 2.0, [], None),
    ("bad_first", "translate", None, "incorrect", None, [], None),
    ("tuned", "tune", "first", "correct", 2.2, [], None),
    ("fast", "rewrite", "first", "correct", 3.0, [], None),
    ("even", "diff", "first", "correct", 2.0, [], None),
    ("slower", "rewrite", "first", "correct", 1.6, [], None),
    ("cheat", "rewrite", "first", "correct", 5.0, ["no_custom_kernel"], None),
    ("wrong", "rewrite", "first", "incorrect", None, [], None),
    ("orphan", "repair", "bad_first", "correct", 2.5, [], None),
    ("dup_low", "rewrite", "fast", "correct", 3.8, [], CODE_D),
    ("dup_high", "crossover", "first", "correct", 3.9, [], CODE_D2),
    ("small", "rewrite", "fast", "correct", 3.3, [], None),
    ("tuned2", "tune", "small", "correct", 3.5, [], None),
    ("best", "diff", "tuned2", "correct", 4.55, [], None),
]
RUN_B = [  # task rowsum: a seed beaten once
    ("seed", "seed", None, "correct", 1.0, [], None),
    ("better", "rewrite", "seed", "correct", 1.5, [], None),
]
RUN_C = [("failed", "translate", None, "compile_error", None, [], None)]  # task relu, nothing correct


@pytest.fixture
def runs(tmp_path):
    a = make_run(tmp_path / "run_a", "relu", TASK_A, RUN_A)
    b = make_run(tmp_path / "run_b", "rowsum", TASK_B, RUN_B)
    c = make_run(tmp_path / "run_c", "relu", TASK_A, RUN_C)
    return tmp_path, a, b, c


def kept_ids(result) -> set[int]:
    return {row["meta"]["program_id"] for row in result.rows}


def ids(made: dict[str, Program], *names: str) -> set[int]:
    return {made[n].id for n in names}


def test_sft_keeps_correct_first_steps_and_gains_above_min(runs):
    tmp, a, _, _ = runs
    result = build_sft([tmp / "run_a"])
    assert kept_ids(result) == ids(a, "first", "fast", "dup_high", "small", "best")
    assert result.dropped == {
        "no_llm_messages": 3,
        "not_correct": 2,
        "flagged": 1,
        "parent_not_correct": 1,
        "gain_below_min": 2,
        "duplicate": 1,
    }
    assert result.kept == {("relu", "first"): 1, ("relu", "improvement"): 4}
    assert [r["meta"]["program_id"] for r in result.rows] == sorted(kept_ids(result))  # one run: id order

    by_id = {r["meta"]["program_id"]: r for r in result.rows}
    fast = by_id[a["fast"].id]
    assert [m["role"] for m in fast["messages"]] == ["system", "user", "assistant"]
    assert fast["messages"][:2] == messages("fast") and fast["messages"][2]["content"] == "reply fast"
    assert fast["meta"] == {
        "task": "relu",
        "task_hash": Task.from_source(TASK_A).hash,
        "run_dir": str(tmp / "run_a"),
        "program_id": a["fast"].id,
        "parent_id": a["first"].id,
        "iteration": 4,
        "operator": "rewrite",
        "model": "m",
        "speedup": 3.0,
        "parent_speedup": 2.0,
        "gain": 1.5,
        "speedup_vs_compile": 1.5,
        "kind": "improvement",
    }
    first = by_id[a["first"].id]["meta"]
    assert first["kind"] == "first" and first["gain"] is None and first["parent_id"] is None
    assert first["parent_speedup"] is None and first["speedup"] == 2.0
    assert by_id[a["best"].id]["meta"]["parent_speedup"] == 3.5  # a tuned parent is a parent
    assert by_id[a["dup_high"].id]["meta"]["gain"] == pytest.approx(1.95)


def test_min_gain_and_cap_change_the_set(runs):
    tmp, a, _, _ = runs
    stricter = build_sft([tmp / "run_a"], min_gain=1.2)
    assert kept_ids(stricter) == ids(a, "first", "fast", "dup_high", "best")  # small (gain 1.1) goes
    assert stricter.dropped["gain_below_min"] == 3 and stricter.dropped["duplicate"] == 1
    looser = build_sft([tmp / "run_a"], min_gain=0.5)
    assert kept_ids(looser) == ids(a, "first", "fast", "dup_high", "small", "best", "even", "slower")

    # rank: best 1.3 gain, first 2.0 speedup, dup_high 1.95 gain, fast 1.5, small 1.1 -> first, dup_high
    capped = build_sft([tmp / "run_a"], max_per_task=2)
    assert kept_ids(capped) == ids(a, "first", "dup_high")
    assert capped.dropped["over_task_cap"] == 3 and capped.dropped["duplicate"] == 1
    with pytest.raises(UserError, match="min-gain"):
        build_sft([tmp / "run_a"], min_gain=-1)


def test_a_child_identical_to_its_parent_is_no_step(tmp_path):
    double = "def g(x):\n    return x * 2\n"
    double2 = "def g(x):\n    '''Double.'''\n    return (x * 2)  # the same\n"
    made = make_run(
        tmp_path / "run",
        "relu",
        TASK_A,
        [
            ("seed", "seed", None, "correct", 1.0, [], CODE_D),
            ("same", "rewrite", "seed", "correct", 1.07, [], CODE_D2),  # the seed again: 1.07 is noise
            ("slower", "rewrite", "seed", "correct", 0.9, [], double),
            ("again", "diff", "slower", "correct", 0.963, [], double2),  # its parent again, gain 1.07
            ("real", "rewrite", "seed", "correct", 1.5, [], CODE_D.replace("x + 1", "x + 1.0")),
        ],
    )
    # not equal as text, equal as syntax trees: the stored program identity says so
    assert made["same"].code != made["seed"].code and made["same"].code_hash == made["seed"].code_hash
    result = build_sft([tmp_path / "run"])
    assert kept_ids(result) == ids(made, "real")
    assert result.dropped == {"no_llm_messages": 1, "same_as_parent": 2, "gain_below_min": 1}


def test_a_gain_inside_the_timing_spread_is_noise(tmp_path):
    def noisy(ms: float) -> list[float]:  # std 5% of the median
        return [0.95 * ms, ms, 1.05 * ms]

    made = make_run(
        tmp_path / "run",
        "relu",
        TASK_A,
        [
            ("seed", "seed", None, "correct", 1.0, [], None),
            ("within", "rewrite", "seed", "correct", 1.07, [], None),  # needs > 1 + 0.05 + 0.05
            ("beyond", "rewrite", "seed", "correct", 1.2, [], None),
            ("tuned", "tune", "seed", "correct", 1.0, [], None),
            ("steady", "rewrite", "tuned", "correct", 1.07, [], None),  # no spread: 1.07 is a gain
        ],
        timings={
            "seed": noisy(10.0),
            "within": noisy(9.35),
            "beyond": noisy(8.33),
            "tuned": [10.0] * 3,
            "steady": [9.35] * 3,
        },
    )
    result = build_sft([tmp_path / "run"])
    assert kept_ids(result) == ids(made, "beyond", "steady")
    assert result.dropped == {"no_llm_messages": 2, "within_noise": 1}

    from kernelsmith.data.sft import required_gain

    assert required_gain(made["seed"], made["within"]) == pytest.approx(1.10)
    assert required_gain(made["seed"], made["within"], min_gain=1.2) == pytest.approx(1.32)
    assert required_gain(made["tuned"], made["steady"]) == 1.0
    assert required_gain(Program(0, 0, "seed", "x = 1", "correct"), made["within"]) == pytest.approx(1.05)


def test_a_gain_inside_the_timing_methods_floor_is_noise(tmp_path):
    """Repetitions of one evaluation that agree say nothing of the next one: a 5 us graph replay
    moves ~5% between evaluations, so a step needs a gain above ~1.1 (one cached reference
    measurement cancels in the ratio)."""

    def stored(ms: float, method: str | None) -> dict:
        def t(m: float) -> dict:
            d = {"median_ms": m, "mean_ms": m, "min_ms": m, "max_ms": m, "std_ms": 0.0, "reps": 100}
            return d if method is None else {**d, "method": method}

        return {"status": "correct", "correct": True, "timing": t(ms), "reference_timing": t(0.01)}

    specs = [
        ("seed", "seed", None, "correct", 2.0, [], None),
        ("within", "rewrite", "seed", "correct", 2.16, [], None),  # gain 1.08
        ("beyond", "rewrite", "seed", "correct", 2.4, [], None),  # gain 1.2
    ]
    graph = {
        "seed": stored(0.005, "cuda_graph"),
        "within": stored(0.00463, "cuda_graph"),
        "beyond": stored(0.00417, "cuda_graph"),
    }
    made = make_run(tmp_path / "graph", "relu", TASK_A, specs, evals=graph)
    result = build_sft([tmp_path / "graph"])
    assert kept_ids(result) == ids(made, "beyond")
    assert result.dropped == {"no_llm_messages": 1, "within_noise": 1}
    # the same times from a version that named no method: their repetitions agreed, so both are gains
    old = {name: stored(r["timing"]["median_ms"], None) for name, r in graph.items()}
    made = make_run(tmp_path / "old", "relu", TASK_A, specs, evals=old)
    assert kept_ids(build_sft([tmp_path / "old"])) == ids(made, "within", "beyond")


def test_near_duplicates_are_one_program(runs):
    from kernelsmith.identity import program_hash

    assert program_hash(CODE_D) == program_hash(CODE_D2)
    assert program_hash(CODE_D) != program_hash(CODE_D.replace("x + 1", "x + 2"))
    assert program_hash("def broken(:\n  pass  # c\n") == program_hash("def broken(:\n  pass\n")  # text fallback


def test_several_runs_order_by_task_and_decontamination_drops_a_task(runs, tmp_path):
    tmp, a, b, c = runs
    dirs = [tmp / "run_b", tmp / "run_c", tmp / "run_a"]
    result = build_sft(dirs)
    assert [(r["meta"]["task"], r["meta"]["run_dir"]) for r in result.rows][:5] == [("relu", str(tmp / "run_a"))] * 5
    assert [r["meta"]["program_id"] for r in result.rows][5:] == [b["better"].id]
    assert result.dropped_by_task[("relu", "not_correct")] == 3  # two in run_a, one in run_c
    assert result.dropped_by_task[("rowsum", "no_llm_messages")] == 1

    suite = tmp_path / "suite" / "level1"
    suite.mkdir(parents=True)
    reformatted = "# KernelBench copy\n" + TASK_A.replace("    ", "\t").replace(", y:", " ,  y :") + "\n\n# end\n"
    (suite / "1_relu.py").write_text(reformatted.replace("\n", "\r\n"))
    (suite / "2_other.py").write_text(TASK_B.replace("dim=-1", "dim=0"))  # another operator
    (suite / "helper.py").write_text("def not_a_task():\n    pass\n")
    hashes = suite_hashes(tmp_path / "suite")
    assert len(hashes) == 2 and is_contaminated(TASK_A, hashes) and not is_contaminated(TASK_B, hashes)
    clean = build_sft(dirs, exclude=hashes)
    assert kept_ids(clean) == {b["better"].id}
    assert clean.dropped["excluded_task"] == len(RUN_A) + len(RUN_C)
    assert build_rl(dirs, exclude=suite_hashes(suite / "1_relu.py")).dropped == {"excluded_task": 2}

    with pytest.raises(UserError, match="not found"):
        suite_hashes(tmp_path / "nowhere")
    with pytest.raises(UserError, match="not a task file"):
        suite_hashes(suite / "helper.py")
    (tmp_path / "empty").mkdir()
    with pytest.raises(UserError, match="no task files"):
        suite_hashes(tmp_path / "empty")


def test_rl_follows_the_best_lineage(runs):
    tmp, a, b, c = runs
    result = build_rl([tmp / "run_a", tmp / "run_b", tmp / "run_c"])
    assert [r["meta"]["program_id"] for r in result.rows] == [a[n].id for n in ("first", "fast", "small", "best")] + [
        b["better"].id
    ]
    assert result.dropped == {"no_correct_program": 1} and result.kept == {"relu": 4, "rowsum": 1}
    first, fast, small, best, better = result.rows
    assert first["prompt"] == messages("first")  # system, user: exactly as sent
    assert first["meta"]["parent_code"] is None and first["meta"]["parent_speedup"] is None
    assert first["meta"]["operator"] == "translate" and first["meta"]["task_source"] == TASK_A
    assert best["meta"] == {
        "task": "relu",
        "task_hash": Task.from_source(TASK_A).hash,
        "task_source": TASK_A,
        "run_dir": str(tmp / "run_a"),
        "program_id": a["best"].id,
        "parent_id": a["tuned2"].id,
        "parent_code": a["tuned2"].code,
        "parent_speedup": 3.5,
        "operator": "diff",
        "step_speedup": 4.55,
        "best_speedup": 4.55,
    }
    assert fast["meta"]["parent_code"] == a["first"].code and small["meta"]["step_speedup"] == 3.3
    assert better["meta"]["parent_code"] == b["seed"].code and better["meta"]["parent_speedup"] == 1.0
    assert read_run(tmp / "run_c").best is None and build_rl([tmp / "run_c"]).rows == []


def test_rl_a_flagged_parent_is_no_baseline(tmp_path):
    made = make_run(
        tmp_path / "my run #1",
        "rowsum",
        TASK_B,
        [  # a name that needs URI quoting
            ("seed", "seed", None, "correct", 1.0, [], None),
            ("cheat", "rewrite", "seed", "correct", 9.0, ["torch_fallback"], None),
            ("honest", "repair", "cheat", "correct", 1.4, [], None),
        ],
    )
    result = build_rl([tmp_path / "my run #1"])
    assert [r["meta"]["program_id"] for r in result.rows] == [made["cheat"].id, made["honest"].id]
    assert [r["meta"]["parent_speedup"] for r in result.rows] == [1.0, None]  # 9.0 was a cheat's
    assert result.rows[1]["meta"]["parent_code"] == made["cheat"].code
    assert kept_ids(build_sft([tmp_path / "my run #1"])) == set()  # flagged; parent flagged
    only_seed = make_run(tmp_path / "seed_only", "rowsum", TASK_B, [("seed", "seed", None, "correct", 1.0, [], None)])
    assert only_seed and build_rl([tmp_path / "seed_only"]).dropped == {"no_llm_steps": 1}


def test_a_missing_or_foreign_directory_is_a_user_error(tmp_path):
    with pytest.raises(UserError, match="run directory not found"):
        build_sft([tmp_path / "nope"])
    (tmp_path / "plain").mkdir()
    with pytest.raises(UserError, match="not a run directory"):
        build_rl([tmp_path / "plain"])
    (tmp_path / "junk").mkdir()
    (tmp_path / "junk" / "run.sqlite").write_text("not sqlite")
    with pytest.raises(UserError, match="not a readable run store"):
        read_run(tmp_path / "junk")


# ---- the files, as a trainer loads them


def test_cli_writes_jsonl_that_datasets_loads(runs):
    from datasets import load_dataset

    tmp, *_ = runs
    cli = CliRunner()
    dirs = [str(tmp / "run_a"), str(tmp / "run_b"), str(tmp / "run_c")]
    sft = cli.invoke(data_app, ["sft", *dirs, "--out", str(tmp / "out" / "sft.jsonl")])
    assert sft.exit_code == 0, sft.output
    assert "relu" in sft.stdout and "rowsum" in sft.stdout and "duplicate 1" in sft.stdout
    assert not (tmp / "out" / "sft.jsonl.tmp").exists()
    ds = load_dataset("json", data_files=str(tmp / "out" / "sft.jsonl"), split="train")
    assert ds.num_rows == 6 and "messages" in ds.column_names
    assert ds[0]["messages"][2] == {"role": "assistant", "content": "reply first"}

    rl = cli.invoke(data_app, ["rl", *dirs, "--out", str(tmp / "rl.jsonl")])
    assert rl.exit_code == 0, rl.output
    assert "no_correct_program 1" in rl.stdout
    ds = load_dataset("json", data_files=str(tmp / "rl.jsonl"), split="train")
    assert ds.num_rows == 5 and "prompt" in ds.column_names and ds[0]["meta"]["parent_code"] is None

    capped = cli.invoke(
        data_app, ["sft", dirs[0], "--out", str(tmp / "capped.jsonl"), "--max-per-task", "2", "--min-gain", "1.2"]
    )
    assert capped.exit_code == 0, capped.output
    assert len((tmp / "capped.jsonl").read_text(encoding="utf-8").splitlines()) == 2


@pytest.mark.parametrize(
    "args, needle",
    [
        (["sft", "{tmp}/missing", "--out", "{tmp}/x.jsonl"], "run directory not found"),
        (["rl", "{tmp}/missing", "--out", "{tmp}/x.jsonl"], "run directory not found"),
        (["sft", "{tmp}/run_a", "--out", "{tmp}/x.jsonl", "--min-gain", "-0.5"], "--min-gain"),
        (["sft", "{tmp}/run_a", "--out", "{tmp}/x.jsonl", "--exclude-tasks", "{tmp}/nothing"], "not found"),
    ],
)
def test_cli_errors_are_one_line(runs, args, needle):
    tmp, *_ = runs
    app = typer.Typer()
    app.add_typer(data_app, name="data")  # as the main CLI mounts it
    result = CliRunner().invoke(app, ["data", *[a.format(tmp=tmp) for a in args]])
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and needle in lines[0], result.stderr
    assert "Traceback" not in result.output and not (tmp / "x.jsonl").exists()


# ---- a run made by the real engine (scripted LLM, Triton interpreter)


def test_sft_from_a_real_run(cpu_pool, tmp_path):
    from kernelsmith.evolve.config import load_config
    from kernelsmith.evolve.engine import Engine
    from kernelsmith.llm import LLMClient, ScriptedServer

    fast = case_path("elementwise_triton").read_text()
    reply = {"reply": f"Bigger blocks.\n```python\n{fast}```\n"}
    with ScriptedServer([], default=reply) as server:
        cfg = load_config(
            None,
            {
                "iterations": 2,
                "max_in_flight": 1,
                "random_seed": 3,
                "llm": {"base_url": server.url, "models": [{"name": "scripted"}], "timeout": 5.0},
                "archive": {"islands": 1, "migration_interval": 0},
                "evaluation": {"device": "cpu"},
            },
        )
        engine = Engine(
            Task.from_file(case_path("elementwise_task")),
            cfg,
            tmp_path / "run",
            cpu_pool,
            LLMClient(cfg.llm, seed=cfg.random_seed),
            case_path("elementwise_small_blocks").read_text(),
        )
        asyncio.run(engine.run())
        sent = server.requests
    engine.store.close()
    stored = RunStore(tmp_path / "run", create=False).all()
    step = next(p for p in stored if p.messages is not None)
    assert step.iteration == 1 and step.status == "correct"

    # min_gain=0: which steps count as gains is tested on stored programs above; here the row's
    # plumbing from a real run is, and a 2-core CI machine under load can time the bigger blocks
    # within the interpreter's noise of the small ones (the step then drops as "within_noise").
    result = build_sft([tmp_path / "run"], min_gain=0.0)
    row = next((r for r in result.rows if r["meta"]["program_id"] == step.id), None)
    assert row is not None, result.dropped
    assert row["meta"]["kind"] == "improvement" and row["meta"]["gain"] == pytest.approx(
        step.speedup / stored[0].speedup
    )
    assert row["meta"]["parent_id"] == stored[0].id and stored[0].operator == "seed"
    assert row["messages"][:-1] == step.messages == sent[0]["messages"]
    assert row["messages"][-1] == {"role": "assistant", "content": step.response}
    assert result.dropped["no_llm_messages"] == 1  # the seed
    assert sum(result.dropped.values()) + len(result.rows) == len(stored)
    json.dumps(result.rows)  # plain JSON all the way down
