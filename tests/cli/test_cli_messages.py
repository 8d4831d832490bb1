"""What the `kernelsmith` command says when the user gets something wrong; none of these evaluates."""

from __future__ import annotations

import re
import shlex

import pytest
from conftest import REPO
from test_cli import assert_usage_error, ks, ks_here

SUITE_SOFTMAX = REPO / "examples/suite/softmax.py"


def _no_gpu() -> None:
    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU is visible here: the run would start")


# ---- 11a: the config file is validated whole, before the flags override it


def test_bad_config_value_is_an_error_even_when_a_flag_overrides_it(tmp_path):
    _no_gpu()  # without the fix the run goes on to the backend: "no CUDA GPU", not the config error
    cfg = tmp_path / "bad.toml"
    cfg.write_text('iterations = "many"\n')
    p = ks_here(
        "evolve",
        SUITE_SOFTMAX,
        "--config",
        cfg,
        "--iterations",
        "1",
        "--mutator",
        "tune",
        "--run-dir",
        tmp_path / "run",
    )
    assert_usage_error(p, "bad.toml", "iterations")


# ---- 11b: a bad size names its flag or setting


def test_bad_memory_limit_names_the_flag():
    p = ks(
        "eval",
        REPO / "examples/softmax/task.py",
        REPO / "examples/softmax/triton_softmax.py",
        "--device",
        "cpu",
        "--memory-limit",
        "lots",
    )
    assert_usage_error(p, "--memory-limit", "bad size 'lots'")


def test_bad_max_body_names_the_flag():
    p = ks("serve", "--device", "cpu", "--max-body", "lots", timeout=60)
    assert_usage_error(p, "--max-body", "bad size 'lots'")


def test_bad_memory_limit_in_the_config_names_the_setting(tmp_path):
    cfg = tmp_path / "bad.toml"
    cfg.write_text('[evaluation]\nmemory_limit = "lots"\n')
    p = ks_here(
        "evolve",
        SUITE_SOFTMAX,
        "--config",
        cfg,
        "--mutator",
        "tune",
        "--device",
        "cpu",
        "--run-dir",
        tmp_path / "run",
    )
    assert_usage_error(p, "[evaluation] memory_limit", "bad size 'lots'")


# ---- 11c: a path of the wrong kind says so


@pytest.mark.parametrize(
    "args, needle",
    [
        (("eval", "{dir}", REPO / "examples/softmax/triton_softmax.py", "--device", "cpu"), "is a directory"),
        (("eval", REPO / "examples/softmax/task.py", "{dir}", "--device", "cpu"), "is a directory"),
        (("evolve", SUITE_SOFTMAX, "--config", "{dir}", "--mutator", "tune"), "is a directory"),
        (("bench", "{file}", "--solutions", "{dir}", "--device", "cpu"), "is not a directory"),
        (("report", "{file}"), "is not a directory"),
        (("export", "{file}"), "is not a directory"),
        (("data", "sft", "{file}", "--out", "{dir}/out.jsonl"), "is not a directory"),
    ],
)
def test_path_of_the_wrong_kind_says_so(tmp_path, args, needle):
    (tmp_path / "a_file").write_text("x")
    subs = {"{dir}": str(tmp_path), "{file}": str(tmp_path / "a_file")}
    args = [subs.get(str(a), str(a).replace("{dir}", str(tmp_path))) for a in args]
    assert_usage_error(ks(*args, timeout=120), needle)


# ---- 11d: resuming at the other size says that is the difference


def test_resume_with_small_of_a_full_size_run_says_so(tmp_path):
    from kernelsmith.evolve.store import RunStore
    from kernelsmith.task import Task

    task = Task.from_file(SUITE_SOFTMAX)  # the run directory holds the full-size task
    store = RunStore(tmp_path / "run")
    for key, value in (("task_hash", task.hash), ("task_name", task.name), ("task_source", task.source)):
        store.set_meta(key, value)
    store.close()
    p = ks(
        "evolve",
        SUITE_SOFTMAX,
        "--small",
        "--run-dir",
        tmp_path / "run",
        "--mutator",
        "tune",
        "--device",
        "cpu",
        "--quiet",
        timeout=120,
    )
    assert_usage_error(p, "full size", "without --small")


def test_resume_without_small_of_a_small_run_says_so(tmp_path):
    from kernelsmith.evolve.store import RunStore
    from kernelsmith.task import Task
    from kernelsmith.task_sizes import shrink

    small = Task.from_source(shrink(SUITE_SOFTMAX.read_text()), name="softmax", path=str(SUITE_SOFTMAX))
    store = RunStore(tmp_path / "run")
    for key, value in (("task_hash", small.hash), ("task_name", small.name), ("task_source", small.source)):
        store.set_meta(key, value)
    store.close()
    p = ks(
        "evolve",
        SUITE_SOFTMAX,
        "--run-dir",
        tmp_path / "run",
        "--mutator",
        "tune",
        "--device",
        "cpu",
        "--quiet",
        timeout=120,
    )
    assert_usage_error(p, "add --small")


# ---- 11e: `runs` names what it skipped


def test_runs_names_the_folders_it_skipped(tmp_path):
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "run.sqlite").write_text("not a database")
    p = ks("runs", tmp_path, "--json")
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip().splitlines()[-1] == "[]"
    skipped = [line for line in p.stderr.splitlines() if line.startswith("skipped ")]
    assert len(skipped) == 1 and "broken" in skipped[0] and "not a readable run store" in skipped[0], p.stderr


def test_runs_before_any_run_is_an_empty_listing_that_says_where_runs_go(tmp_path):
    p = ks("runs", tmp_path / "runs")
    assert p.returncode == 0 and p.stderr == "", p.stderr
    assert " ".join(p.stdout.split()) == (
        f"no runs yet: there is no folder {tmp_path / 'runs'} (evolve puts each run in runs/TASK, "
        "or where --run-dir says)"
    )
    listed = ks("runs", tmp_path / "runs", "--json")
    assert listed.returncode == 0 and listed.stdout.strip() == "[]"
    (tmp_path / "file").write_text("")
    assert_usage_error(ks("runs", tmp_path / "file"), "is a file, not a folder of run directories")


def test_bench_of_a_folder_without_task_files_is_one_error_line(tmp_path):
    (tmp_path / "suite").mkdir()
    (tmp_path / "solutions").mkdir()
    p = ks("bench", tmp_path / "suite", "--solutions", tmp_path / "solutions", "--device", "cpu")
    assert_usage_error(p, f"{tmp_path / 'suite'} holds no task files")
    assert "0/0 correct" not in p.stdout


# ---- 11f: an endpoint without a model is refused before the first call


def test_llm_base_url_without_model_is_refused(tmp_path):
    p = ks_here(
        "evolve",
        SUITE_SOFTMAX,
        "--llm-base-url",
        "http://127.0.0.1:9/v1",
        "--device",
        "cpu",
        "--quiet",
        "--run-dir",
        tmp_path / "run",
    )
    assert_usage_error(p, "--llm-base-url needs --model")
    assert not (tmp_path / "run").exists()


def test_llm_base_url_with_models_in_the_config_is_not_refused(tmp_path):
    _no_gpu()  # stops at the backend ("no CUDA GPU"), past the model check
    cfg = tmp_path / "models.toml"
    cfg.write_text('[[llm.models]]\nname = "big-model"\n')
    p = ks_here(
        "evolve",
        SUITE_SOFTMAX,
        "--llm-base-url",
        "http://127.0.0.1:9/v1",
        "--config",
        cfg,
        "--quiet",
        "--run-dir",
        tmp_path / "run",
    )
    assert_usage_error(p, "no CUDA GPU")


# ---- 12: one style for usage errors; -h; --version; choices in --help


@pytest.mark.parametrize(
    "args, needle",
    [
        (("eval",), "Missing argument"),
        (("eval", "a.py", "b.py", "--device", "gpu"), "--device"),
        (("evolve", "x.py", "--mutator", "foo"), "--mutator"),
        (("evolve", "x.py", "--iterations", "many"), "--iterations"),
        (("--nope",), "--nope"),
        (("data", "sft"), "Missing argument"),
        (("nosuchcommand",), "nosuchcommand"),
    ],
)
def test_usage_errors_are_one_error_line(args, needle):
    p = ks(*args, timeout=60)
    assert_usage_error(p, needle, "--help")
    assert "╭" not in p.stderr + p.stdout  # no framework box


def test_h_is_help_and_version():
    from kernelsmith import __version__

    for args in (("-h",), ("evolve", "-h"), ("data", "sft", "-h")):
        p = ks(*args, timeout=60)
        assert p.returncode == 0 and "Usage:" in p.stdout, (args, p.stderr)
    p = ks("--version", timeout=60)
    assert p.returncode == 0 and p.stdout.strip() == f"kernelsmith {__version__}", p


def test_evolve_help_shows_choices_and_defaults():
    out = re.sub(r"[│\s]+", " ", ks("evolve", "--help", timeout=60).stdout)  # unwrap the help's table
    assert "llm|tune" in out and "cuda|cpu" in out
    assert "[default: llm]" in out and "[default: 40]" in out


# ---- 13: every command line in the README and the docs names subcommands and flags that exist

DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]


def _readme_commands(doc=REPO / "README.md") -> list[list[str]]:
    """The `kernelsmith ...` lines of a page's code blocks (the README's), continuation lines joined, comments cut."""
    blocks, inside = [[]], False
    for line in doc.read_text().splitlines():
        if line.lstrip().startswith("```"):
            inside = not inside
            blocks.append([])
        elif inside:
            blocks[-1].append(line)
    commands = []
    for block in blocks:
        for line in "\n".join(block).replace("\\\n", " ").splitlines():
            line = line.split(" #", 1)[0].strip()
            if line.startswith("kernelsmith "):
                commands.append(shlex.split(line)[1:])
    return commands


def _params(command) -> set[str]:
    return {opt for p in command.params for opt in (*p.opts, *p.secondary_opts)}


def test_readme_and_docs_commands_name_real_subcommands_and_flags():
    import typer

    from kernelsmith.cli.app import app

    assert len(_readme_commands()) >= 15
    root = typer.main.get_command(app)
    for doc, words in ((page, words) for page in DOCS for words in _readme_commands(page)):
        command, i = root, 0
        while hasattr(command, "commands") and i < len(words) and not words[i].startswith("-"):
            assert words[i] in command.commands, f"{doc.name}: kernelsmith {' '.join(words)}: no subcommand {words[i]}"
            command, i = command.commands[words[i]], i + 1
        for word in words[i:]:
            flag = word.strip("[]").split("=", 1)[0]
            if flag.startswith("--") or flag == "-h":
                assert flag in _params(command) | {"--help", "-h"}, (
                    f"{doc.name}: kernelsmith {' '.join(words)}: {flag} is not a flag of {command.name}"
                )


def test_readme_and_docs_paths_under_examples_exist():
    """A path a command of the README or the docs names under examples/ is bundled, so the command runs as
    written (an ENTRY or a seed function, `file.py:name`, by its file)."""
    for doc, words in ((page, words) for page in DOCS for words in _readme_commands(page)):
        for word in words:
            if word.startswith("examples/"):
                path = word.split(":", 1)[0]
                assert (REPO / path).exists(), f"{doc.name}: kernelsmith {' '.join(words)}: {path} is not bundled"


def test_readme_data_sft_example_runs(tmp_path):
    """The README's `data sft ... --exclude-tasks` line, as written, on a run directory of ours (no programs)."""
    from kernelsmith.evolve.store import RunStore
    from kernelsmith.task import Task

    [line] = [w for w in _readme_commands() if w[:2] == ["data", "sft"]]
    task = Task.from_file(SUITE_SOFTMAX)
    store = RunStore(tmp_path / "run")
    for key, value in (("task_hash", task.hash), ("task_name", task.name), ("task_source", task.source)):
        store.set_meta(key, value)
    store.close()
    args = [str(tmp_path / "run") if w == "runs/round1/*" else w for w in line]
    args = [str(tmp_path / "sft.jsonl") if w == "sft.jsonl" else w for w in args]
    p = ks(*args, timeout=120)
    assert p.returncode == 0, p.stderr
    assert (tmp_path / "sft.jsonl").is_file()


def _broken_tables(text: str) -> list[str]:
    """Runs of table rows (lines starting with `|`, outside code blocks) that do not open with a
    header and a `| --- |` separator: a row cut off from its table renders as a stray line."""
    broken, run, inside = [], [], False
    for line in text.splitlines() + [""]:
        if line.lstrip().startswith("```"):
            inside = not inside
        if not inside and line.startswith("|"):
            run.append(line)
            continue
        if run and (len(run) < 2 or not re.fullmatch(r"\|(\s*:?-+:?\s*\|)+", run[1].replace(" ", ""))):
            broken.append(run[0])
        run = []
    return broken


def test_markdown_tables_are_whole():
    assert _broken_tables("| a | b |\n| --- | --- |\n| 1 | 2 |\n\ntext\n| 3 | 4 |\n") == ["| 3 | 4 |"]
    for doc in [*DOCS, REPO / "benchmarks/README.md"]:
        assert _broken_tables(doc.read_text()) == [], doc.name


# ---- 5: every option checked once, for the CLI, config files and the service alike


@pytest.mark.parametrize(
    "value, needle",
    [
        ("0", "below the least memory limit"),
        ("100M", "below the least"),
        ("-5G", "bad size"),
        ("99999999T", "more memory than any host"),
    ],
)
def test_memory_limit_out_of_range_names_the_flag(value, needle):
    p = ks(
        "eval",
        REPO / "examples/softmax/task.py",
        REPO / "examples/softmax/triton_softmax.py",
        "--device",
        "cpu",
        "--memory-limit",
        value,
    )
    assert_usage_error(p, "--memory-limit", needle)


def test_memory_limit_out_of_range_in_the_config_names_the_setting(tmp_path):
    cfg = tmp_path / "small.toml"
    cfg.write_text('[evaluation]\nmemory_limit = 123\n')
    p = ks_here(
        "evolve",
        SUITE_SOFTMAX,
        "--config",
        cfg,
        "--mutator",
        "tune",
        "--device",
        "cpu",
        "--run-dir",
        tmp_path / "run",
    )
    assert_usage_error(p, "[evaluation] memory_limit", "below the least memory limit")


def test_negative_tolerance_in_the_config_names_the_setting(tmp_path):
    cfg = tmp_path / "tol.toml"
    cfg.write_text('[evaluation]\natol = -1.0\n')
    p = ks_here(
        "evolve",
        SUITE_SOFTMAX,
        "--config",
        cfg,
        "--mutator",
        "tune",
        "--device",
        "cpu",
        "--run-dir",
        tmp_path / "run",
    )
    assert_usage_error(p, "evaluation.atol", "greater than or equal to 0")


@pytest.mark.parametrize(
    "args, needle", [(("--max-body", "0"), "--max-body"), (("--max-timeout", "nan"), "--max-timeout")]
)
def test_serve_refuses_out_of_range_limits(args, needle):
    p = ks("serve", "--device", "cpu", *args, timeout=60)
    assert_usage_error(p, needle, "")
