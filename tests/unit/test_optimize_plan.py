"""`kernelsmith optimize`'s rules, one module at a time: the budget's text and its split by share, which
regions are searched, the work directory's resume rules, the outcome's "too small" line, the live board."""

from __future__ import annotations

import json
from io import StringIO

import pytest

from kernelsmith.errors import UserError
from kernelsmith.optimize.budget import parse_budget, shown_time, split_budget, time_left
from kernelsmith.optimize.outcome import too_small
from kernelsmith.optimize.plan import plan
from kernelsmith.optimize.result import RegionOutcome
from kernelsmith.optimize.workdir import STATE, RegionState, State, WorkDir


@pytest.mark.parametrize(
    "text, seconds",
    [("90", 90.0), ("90s", 90.0), ("20m", 1200.0), ("1.5h", 5400.0), ("1h30m", 5400.0), ("2m30s", 150.0), ("0", 0.0)],
)
def test_a_budget_is_seconds_or_a_time_as_people_write_it(text, seconds):
    assert parse_budget(text) == seconds


@pytest.mark.parametrize("text", ["", "20x", "m", "1m1m", "-5", "inf", "nan", "1 h 2"])
def test_a_bad_budget_is_one_line_naming_the_flag(text):
    with pytest.raises(UserError, match=r"^--budget ") as exc:
        parse_budget(text)
    assert "\n" not in str(exc.value)


def test_a_duration_is_shown_as_people_write_it():
    assert [shown_time(s) for s in (0.25, 4.73, 45, 750, 3900)] == ["0.25s", "4.7s", "45s", "12m30s", "1h05m"]


def test_the_budget_is_split_by_share_so_a_1_percent_region_gets_a_thirtieth_of_a_30_percent_one():
    split = split_budget({"norm": 0.30, "gelu": 0.01}, 310.0)
    assert split == pytest.approx({"norm": 300.0, "gelu": 10.0})
    assert split["norm"] / split["gelu"] == pytest.approx(30.0)
    assert sum(split.values()) == pytest.approx(310.0)  # one search at a time: the budget, all of it


def test_with_several_workers_no_region_gets_more_than_the_budget_and_the_proportion_holds_below_it():
    split = split_budget({"a": 0.5, "b": 0.25, "c": 0.05}, 100.0, slots=2)
    assert split["a"] == pytest.approx(100.0)  # 2 x 100 x 0.5 / 0.8 = 125: one search runs on one worker
    assert split["b"] / split["c"] == pytest.approx(5.0)  # what a capped region cannot use goes to nobody
    assert split["b"] == pytest.approx(62.5)


def test_shares_that_say_nothing_split_the_budget_evenly_and_a_broken_share_gets_nothing():
    assert split_budget({"a": 0.0, "b": 0.0}, 10.0) == {"a": 5.0, "b": 5.0}
    assert split_budget({"a": float("nan"), "b": 0.2, "c": -0.1}, 10.0) == {"a": 0.0, "b": 10.0, "c": 0.0}
    assert split_budget({}, 10.0) == {}
    assert time_left(10.0, 12.5) == 0.0 and time_left(10.0, 2.5) == 7.5


def _task(name, rank, share, file=True, library=False, why=None):
    return {
        "name": name,
        "rank": rank,
        "share": share,
        "calls": 1,
        "file": f"{name}.py" if file else None,
        "library": library,
        "ops": ["mm.default"] if library else ["gelu.default"],
        "why": why,
    }


def test_the_heaviest_regions_outside_library_ops_are_searched_and_the_others_say_why():
    manifest = {
        "tasks": [
            _task("linear", 1, 0.5, library=True),
            _task("gelu", 2, 0.2),
            _task("odd", 3, 0.1, file=False, why="op foo is not an aten op"),
            _task("norm", 4, 0.1),
            _task("tail", 5, 0.05),
        ]
    }
    regions = {r.name: r for r in plan(manifest, top=2)}
    assert [n for n, r in regions.items() if r.searched] == ["gelu", "norm"]
    assert regions["linear"].why == "a library op (mm): left to its library"
    assert regions["odd"].why == "not captured as a task: op foo is not an aten op"
    assert regions["tail"].why == "beyond --top 2"


def test_a_work_directory_resumes_only_with_the_settings_its_capture_was_made_with(tmp_path):
    settings = {"entry": "m.py:make", "device": "cpu", "top": 10, "min_share": 0.0, "forwards": 5, "small": False}
    wd = WorkDir(tmp_path / "work")
    state = wd.open(settings)
    state.regions["gelu"] = RegionState(seed_origin="--seeds s/gelu.py", finished=True, stop_reason="done")
    wd.save(state)
    assert wd.open(settings).regions["gelu"].stop_reason == "done"  # nothing captured yet: settings may change
    assert wd.open({**settings, "top": 3}).settings["top"] == 3
    state.captured = True
    wd.save(state)
    with pytest.raises(UserError, match=r"made with --top 10 \(now 3\): run it with the same settings"):
        wd.open({**settings, "top": 3})
    with pytest.raises(UserError, match=r"ENTRY 'm.py:make' \(now 'n.py:make'\)"):
        wd.open({**settings, "entry": "n.py:make"})
    assert State.model_validate(json.loads((wd.out / STATE).read_text())).captured


def test_a_folder_that_holds_something_else_is_refused_and_the_patch_is_named_by_the_factory(tmp_path):
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("keep")
    with pytest.raises(UserError, match="is not empty and holds no previous optimize"):
        WorkDir(tmp_path / "mine").open({})
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / STATE).write_text("[1, 2]")
    with pytest.raises(UserError, match="is not an optimize's"):
        WorkDir(tmp_path / "bad").open({})
    wd = WorkDir(tmp_path / "w")
    assert wd.patch_dir("examples/model.py:tiny_decode_step").name == "tiny_decode_step_patch"
    assert wd.patch_dir("pkg.mod:make-model").name == "make_model_patch"


def test_a_budget_that_ends_every_search_at_its_start_says_so():
    def ran(stop, iterations=0):
        return RegionOutcome(
            name="r", rank=1, share=0.1, searched=True, elapsed_s=3.0, iterations=iterations, stop_reason=stop
        )

    said = too_small([ran("time limit reached (1 s)"), ran("time limit reached (2 s)")], 5.0)
    assert said is not None and said.startswith("the budget (5s) was too small to search") and "took 6s" in said
    assert too_small([ran("time limit reached (1 s)"), ran("time limit reached (1 s)", 2)], 5.0) is None
    assert too_small([ran("done")], 5.0) is None  # --iterations 0 asked for the start alone
    assert too_small([], 5.0) is None


def test_the_board_shows_regions_done_running_left_their_best_and_the_time_left():
    from rich.console import Console

    from kernelsmith.optimize.board import Board, Row
    from kernelsmith.optimize.search import Searched
    from kernelsmith.progress import LiveProgress

    console, said = Console(file=StringIO(), width=200), []
    with LiveProgress(console, "regions", 0) as view:
        board = Board([Row("gelu", 60.0, 0.0), Row("norm", 30.0, 10.0)], 1, said.append, view)
        assert board.left_s() == pytest.approx(80.0)
        board.hooks.started("gelu")
        board.hooks.ended(
            Searched("gelu", summary={"stop_reason": "done", "iterations_done": 3, "best": {"speedup": 1.5}})
        )
        board.rows["gelu"].best = 1.5
        board.draw()
        assert board.left_s() == pytest.approx(20.0)
    text = console.file.getvalue()
    assert "done 1" in text and "left 1" in text and "search time left 20s" in text, text
    assert "gelu  done     best 1.5x" in text and "1/2" in text, text
    assert said == ["gelu: searching, 1m of search time left", "gelu: done; 3 iterations, best 1.5x"]
