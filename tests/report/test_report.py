"""HTML reports: a real run (engine, scripted LLM, CPU evaluation) and hand-made stores, written
to self-contained pages and opened in headless Chromium with the network blocked."""

from __future__ import annotations

import asyncio
import os
import random
import re
import shutil
import time
from pathlib import Path

import pytest
from conftest import case_path

from kernelsmith.errors import UserError
from kernelsmith.evolve.config import EvolveConfig, load_config
from kernelsmith.evolve.engine import Engine
from kernelsmith.evolve.program import Program, best_of, score_of
from kernelsmith.evolve.store import RunStore
from kernelsmith.llm import LLMClient, ScriptedServer
from kernelsmith.report import write_run_report, write_suite_report
from kernelsmith.report.archive_view import bin_labels
from kernelsmith.report.run_data import best_so_far, kind_of, load_run
from kernelsmith.suite.bench import BenchReport, TaskRow
from kernelsmith.task import Task

CHROMIUM, CHROMEDRIVER = Path("/usr/bin/chromium"), Path("/usr/bin/chromedriver")
TASK = case_path("elementwise_task")
SEED = case_path("elementwise_small_blocks")
FAST = case_path("elementwise_triton").read_text()
HALF = case_path("elementwise_half_written").read_text()
HOSTILE = '<script>alert(1)</script><img src=x onerror="window.__pwned = 1"></script><!--'


def fenced(code: str) -> dict:
    return {"reply": f"Here is the program.\n```python\n{code}```\n"}


@pytest.fixture(scope="module")
def run_dir(cpu_pool, tmp_path_factory) -> Path:
    """A real 4-iteration run on two islands: fast kernel, no code, wrong kernel, another fast one."""
    run = tmp_path_factory.mktemp("report") / "run"
    steps = [
        fenced(FAST),
        {"reply": "I would use bigger blocks."},
        fenced(HALF),
        fenced(FAST.replace("BLOCK = 4096", "BLOCK = 2048")),
    ]
    with ScriptedServer(steps) as server:
        cfg = load_config(
            None,
            {
                "iterations": 4,
                "max_in_flight": 1,
                "random_seed": 3,
                "llm": {
                    "base_url": server.url,
                    "models": [{"name": "scripted", "price_in": 1.0, "price_out": 2.0}],
                    "timeout": 5.0,
                },
                "archive": {"islands": 2, "migration_interval": 2},
                "evaluation": {"device": "cpu"},
            },
        )
        engine = Engine(
            Task.from_file(TASK), cfg, run, cpu_pool, LLMClient(cfg.llm, seed=cfg.random_seed), SEED.read_text()
        )
        asyncio.run(engine.run())
        engine.store.close()
    return run


@pytest.fixture(scope="module")
def browser():
    """Headless Chromium with every network request failing: a report must need none."""
    if not CHROMIUM.is_file() or not CHROMEDRIVER.is_file():
        pytest.fail(
            f"{CHROMIUM} or {CHROMEDRIVER} is missing: install Debian's chromium and chromium-driver "
            "(apt-get install chromium chromium-driver; the Makefile installs them)"
        )
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        pytest.fail("selenium is not installed: pip install selenium (the report tests drive Chromium with it)")

    opts = webdriver.ChromeOptions()
    for arg in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--host-resolver-rules=MAP * ~NOTFOUND",
        "--proxy-server=127.0.0.1:9",
        "--window-size=1400,2400",
    ):
        opts.add_argument(arg)
    opts.binary_location = str(CHROMIUM)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(options=opts, service=Service(str(CHROMEDRIVER)))  # a path: no Selenium Manager
    yield driver
    driver.quit()


def open_page(driver, path: Path):
    """Load `path` and return the driver, failing on any severe console entry (a script error,
    a blocked request)."""
    driver.get_log("browser")  # drop what an earlier page logged
    driver.get(path.resolve().as_uri())
    severe = [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]
    assert not severe, severe
    return driver


def count(driver, css: str) -> int:
    return len(driver.find_elements("css selector", css))


def save_screenshot(driver, tmp_path: Path, name: str) -> Path:
    png = tmp_path / name
    driver.execute_script("window.scrollTo(0, 0)")
    driver.save_screenshot(str(png))
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 30_000, len(data)
    width, height = int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
    assert width >= 800 and height >= 800, (width, height)
    artifacts = os.environ.get("KERNELSMITH_TEST_ARTIFACTS")
    if artifacts:
        Path(artifacts).mkdir(parents=True, exist_ok=True)
        shutil.copy(png, Path(artifacts) / name)
    return png


def test_run_report_draws_every_part(run_dir, browser, tmp_path):
    report = write_run_report(run_dir)
    assert report == run_dir / "report.html"
    html = report.read_text()
    assert not re.search(r"<(script|link|img)[^>]+(src|href)=\"(https?:)?//", html)  # nothing fetched
    store = RunStore(run_dir, create=False)
    programs, best = store.all(), store.best()
    store.close()
    assert [p.status for p in programs] == ["correct", "correct", "no_program", "incorrect", "correct"]
    d = open_page(browser, report)

    shown = d.find_element("id", "best-speedup").text
    assert shown.endswith("\u00d7") and float(shown[:-1]) == pytest.approx(best.speedup, rel=0.05, abs=0.005)
    # a CPU run's speedups say they are relative only (issue 29, item 10: the page said nothing)
    assert "relative only, not a GPU speedup" in d.find_element("id", "subtitle").text
    assert count(d, "#chart-best path.best-line") == 1 and count(d, "#chart-best circle") == 3
    assert count(d, "#lineage circle.node") == len(programs)
    assert count(d, "#lineage path.edge") == sum(p.parent_id is not None for p in programs)
    assert count(d, "#lineage circle.k-incorrect") == 1 and count(d, "#lineage circle.k-none") == 1
    assert count(d, "#archive-grid table.grid") == 2 and count(d, "#archive-grid td.cell") >= 2
    assert count(d, "#programs tbody tr") == len(programs)
    if best.iteration != 0:  # the best against its parent and the starting program, line by line
        assert count(d, "#best-code pre.diff .d-add") >= 1 and count(d, "#best-code pre.diff .d-del") >= 1
    else:  # a loaded CPU can leave the seed best (no later program faster beyond noise): nothing to diff
        assert count(d, "#best-code pre.diff") == 0 and count(d, "#best-code pre.code") == 1
    # clicking a node of the lineage shows that program in the detail panel
    wrong = next(p for p in programs if p.status == "incorrect")
    d.find_element("css selector", f'#lineage g.lnode[data-id="{wrong.id}"] circle').click()
    assert d.find_element("id", "detail-title").text == f"program #{wrong.id}"
    assert "out of tolerance" in d.find_element("id", "detail-error").text
    # sorting the table by speedup puts the fastest first (not always the best: that one is faster
    # than those stored before it beyond both programs' timing noise)
    d.find_element("css selector", "#programs thead th:nth-child(7)").click()
    d.find_element("css selector", "#programs thead th:nth-child(7)").click()
    first = d.find_element("css selector", "#programs tbody tr").get_attribute("data-id")
    assert int(first) == max((p for p in programs if p.speedup is not None), key=lambda p: p.speedup).id
    assert not [e for e in d.get_log("browser") if e["level"] == "SEVERE"]
    save_screenshot(d, tmp_path, "report.png")


def test_report_agrees_with_the_store_and_the_engine_archive(run_dir, tmp_path):
    data = load_run(run_dir)
    store = RunStore(run_dir, create=False)
    assert data.best_id == store.best().id
    assert data.status_counts == store.status_counts()
    assert data.totals["prompt_tokens"] == store.totals()["prompt_tokens"] > 0
    cfg = EvolveConfig.model_validate(store.get_meta("config"))
    store.close()
    # the engine's own replay of the same store puts the same elites in the same cells
    engine = Engine(Task.from_file(TASK), cfg, run_dir, None, None)
    engine._rebuild()
    for isl in data.archive.islands:
        expected = {cell: e.id for cell, e in engine.archive.cells(isl.island).items()}
        assert {tuple(c.cell): c.id for c in isl.cells} == expected
    assert data.archive.migrations == engine.archive.migrations >= 1
    engine.store.close()
    # the report goes where it is asked to, and the run directory is left as it was
    before = {p.name: p.read_bytes() for p in run_dir.iterdir()}
    assert write_run_report(run_dir, tmp_path / "elsewhere" / "r.html").is_file()
    assert {p.name: p.read_bytes() for p in run_dir.iterdir()} == before
    with pytest.raises(UserError, match="not a run directory"):
        write_run_report(tmp_path / "nothing-here")


def test_bins_are_named_and_the_best_so_far_ignores_flagged_programs():
    assert bin_labels("launches", 4) == ["0", "1", "2-3", ">=4"]
    assert bin_labels("complexity", 4) == ["0-39", "40-79", "80-159", ">=160"]
    assert bin_labels("uses_dot", 4) == ["0", ">=1", None, None]  # a yes/no feature reaches two bins
    ps = [
        Program(1, 0, "rewrite", "x", "incorrect"),
        Program(0, 0, "seed", "x", "correct", speedup=1.0),
        Program(2, 0, "rewrite", "x", "correct", speedup=5.0, flags=["torch_fallback"]),
        Program(3, 0, "rewrite", None, "no_program"),
        Program(4, 0, "rewrite", "x", "correct", speedup=2.0),
    ]
    assert best_so_far(ps) == [[0, 1.0], [1, 1.0], [2, 1.0], [3, 1.0], [4, 2.0]]
    assert [kind_of(p) for p in ps] == ["incorrect", "correct", "flagged", "none", "correct"]
    assert best_so_far(ps[:1]) == []


def test_the_best_so_far_rises_only_beyond_noise():
    spread = {"timing": {"median_ms": 1.0, "std_ms": 0.05}}  # 5% per program: 10% between two
    ps = [
        Program(0, 0, "seed", "x", "correct", speedup=1.0, eval=spread, id=1),
        Program(2, 0, "rewrite", "x", "correct", speedup=1.05, eval=spread, id=2),  # stored before 1
        Program(1, 0, "rewrite", "x", "correct", speedup=1.5, eval=spread, id=3),
        Program(3, 0, "rewrite", "x", "correct", speedup=1.6, eval=spread, id=4),
    ]
    # the line follows the store's order (the search's new bests) and ends at the run's best
    assert best_so_far(ps) == [[0, 1.0], [2, 1.0], [2, 1.5], [3, 1.5]]
    assert best_of(ps).id == 3


def hand_made_run(run_dir: Path, programs: list[Program], config: dict | None = None) -> Path:
    """A store written directly (the verdicts are made up): for shapes a real run rarely takes."""
    store = RunStore(run_dir)
    store.set_meta("task_name", f"hostile {HOSTILE}")
    store.set_meta("task_source", TASK.read_text() + f"# {HOSTILE}\n")
    store.set_meta("config", EvolveConfig.model_validate(config or {}).model_dump(mode="json"))
    for p in programs:
        p.score = score_of(p.status, p.flags, p.speedup)
        store.add(p)
    store.close()
    return run_dir


def test_one_failed_program_with_hostile_text_stays_text(browser, tmp_path):
    p = Program(
        iteration=0,
        island=0,
        operator="seed",
        code=HALF + f"\n# {HOSTILE}\n",
        status="incorrect",
        error=f"output mismatch {HOSTILE}\nsecond line",
        response=HOSTILE,
        model=HOSTILE,
    )
    run = hand_made_run(tmp_path / "run", [p])
    report = write_run_report(run)
    blob = report.read_text().split('id="data">', 1)[1].split("</script>", 1)[0]
    assert "</" not in blob and "<!--" not in blob
    d = open_page(browser, report)  # an alert would make every later command fail
    assert d.execute_script("return window.__pwned === undefined") is True
    assert d.find_element("id", "best-speedup").text == "none"
    assert "no correct program" in d.find_element("id", "chart-empty").text
    assert count(d, "#chart-best circle") == 0 and count(d, "#lineage circle.node") == 1
    assert count(d, "#lineage path.edge") == 0 and count(d, "#programs tbody tr") == 1
    assert "No correct program" in d.find_element("id", "best-code").text
    assert HOSTILE in d.find_element("id", "detail-error").text  # shown as text, literally
    assert "<script>alert(1)</script>" in d.find_element("css selector", "#programs td.err").text
    assert d.title.startswith("kernelsmith run: hostile <script>")


def test_mutator_names_the_tuner_not_a_model():
    from kernelsmith.report.run_data import mutator_text

    tuner = EvolveConfig.model_validate({"operators": {"rewrite": 0, "tune": 1}})
    assert mutator_text(tuner) == "launch-parameter tuner (no LLM)"
    llm = {"llm": {"models": [{"name": "m1"}, {"name": "m2"}]}}
    assert mutator_text(EvolveConfig.model_validate(llm)) == "LLM: m1, m2"
    mixed = EvolveConfig.model_validate({**llm, "operators": {"rewrite": 1, "tune": 0.3}})
    assert mutator_text(mixed) == "LLM: m1, m2; launch-parameter tuner"


def boxes_overlap(a: dict, b: dict) -> bool:
    return a["left"] < b["right"] and b["left"] < a["right"] and a["top"] < b["bottom"] and b["top"] < a["bottom"]


def rects(driver, css: str) -> list[dict]:
    return driver.execute_script(
        "return Array.from(document.querySelectorAll(arguments[0])).map(function (n) {"
        " var r = n.getBoundingClientRect(); return {left: r.left, right: r.right, top: r.top, bottom: r.bottom}; })",
        css,
    )


def test_a_cpu_tuner_run_reads_clearly(browser, tmp_path):
    """A CPU run's speedups are ~0.001x: the axis title clears the wider tick labels, the archive
    shows scores in significant figures, and the budget names the tuner, not a model."""
    cell = {"launches": 1, "complexity": 10, "uses_dot": 0}
    programs = [
        Program(0, 0, "seed", "x = 0\n", "correct", speedup=0.000834, descriptors=cell),
        Program(1, 0, "tune", "x = 1\n", "correct", parent_id=1, speedup=0.00121, descriptors=cell),
        Program(2, 1, "tune", "x = 2\n", "correct", parent_id=2, speedup=0.00116, descriptors={**cell, "launches": 2}),
    ]
    run = hand_made_run(tmp_path / "run", programs, {"operators": {"rewrite": 0, "tune": 1}})
    d = open_page(browser, write_run_report(run))
    [title] = rects(d, '#chart-best text.label[transform*="rotate"]')
    ticks = rects(d, '#chart-best text.tick[text-anchor="end"]')
    assert len(ticks) >= 3 and not [t for t in ticks if boxes_overlap(title, t)], (title, ticks)
    scores = [e.text for e in d.find_elements("css selector", "#archive-grid .cscore")]
    assert scores and "0.00121" in scores and "0.00116" in scores and "0.00" not in scores, scores
    assert "\nscore 0.00121\n" in d.find_element("id", "detail").text  # the best program is selected
    budget = d.find_element("id", "budget").text
    assert "mutator launch-parameter tuner (no LLM)" in budget.replace("\n", " ") and "default" not in budget
    save_screenshot(d, tmp_path, "report_cpu_tuner.png")


def test_hundreds_of_programs_stay_drawable(browser, tmp_path):
    rng = random.Random(0)
    statuses = ["correct", "correct", "incorrect", "compile_error", "runtime_error", "timeout", "no_program"]
    programs = [Program(iteration=0, island=0, operator="seed", code="x = 0\n", status="correct", speedup=1.0)]
    for i in range(1, 300):
        st = rng.choice(statuses)
        programs.append(
            Program(
                iteration=i,
                island=(i - 1) % 3,
                operator="rewrite",
                code=None if st == "no_program" else f"x = {i}\n" * i,
                status=st,
                parent_id=rng.randint(max(1, i - 30), i),
                speedup=rng.uniform(0.5, 3) if st == "correct" else None,
                flags=["torch_fallback"] if i % 50 == 0 and st == "correct" else [],
                error=None if st == "correct" else "boom",
                descriptors={"launches": i % 5, "complexity": i, "uses_dot": i % 2},
            )
        )
    run = hand_made_run(tmp_path / "run", programs, {"archive": {"islands": 3, "migration_interval": 10}})
    started = time.monotonic()
    report = write_run_report(run)
    assert time.monotonic() - started < 10
    d = open_page(browser, report)
    assert count(d, "#lineage circle.node") == 300 and count(d, "#lineage path.edge") == 299
    assert count(d, "#programs tbody tr") == 300 and count(d, "#archive-grid table.grid") == 3
    assert count(d, "#chart-best circle") == sum(p.status == "correct" for p in programs)
    assert count(d, "#lineage circle.k-flagged") >= 1


def test_suite_report_table_and_chart(browser, tmp_path):
    rows = [
        TaskRow(
            task="level1/1_matmul.py",
            level="level1",
            status="correct",
            correct=True,
            speedup=2.5,
            speedup_vs_compile=1.2,
            candidate_ms=1.0,
            reference_ms=2.5,
            floor_ms=0.5,
        ),
        TaskRow(task="level1/2_relu.py", level="level1", status="correct", correct=True, speedup=0.0003),
        TaskRow(
            task="level2/3_fused.py",
            level="level2",
            status="correct",
            correct=True,
            speedup=3.0,
            flags=["torch_fallback"],
        ),
        TaskRow(task="level2/4_conv.py", level="level2", status="compile_error", error=f"bad {HOSTILE}"),
        TaskRow(task="level2/5_missing.py", level="level2", status="missing", error="no solution file"),
    ]
    report = BenchReport.build("suite", "solutions", "cpu", None, rows, ["level1/helpers.py"])
    out = write_suite_report(report, tmp_path / "suite.html")
    d = open_page(browser, out)
    assert d.execute_script("return window.__pwned === undefined") is True
    assert count(d, "#suite-table tbody tr") == 5
    assert count(d, "#suite-chart rect.bar") == 3 and count(d, "#suite-chart text.bar") == 2
    assert count(d, "#suite-chart rect.k-flagged") == 1
    table = d.find_element("id", "suite-table").text
    assert "50.0%" in table and "2.50\u00d7" in table and HOSTILE in table  # roofline 0.5 / 1.0 ms
    assert "40.0%" in d.find_element("id", "headline").text  # 2 of 5 correct and unflagged
    assert count(d, "#level-table tbody tr") == 2 and count(d, "#fast-p tbody tr") == 4
    assert d.find_element("id", "title").text == "kernelsmith bench: suite" and count(d, "#search-table") == 0
    assert "relative only, not a GPU speedup" in d.find_element("id", "subtitle").text  # a CPU suite
    # AMSR is said in words where it is shown
    assert "failed task or a speedup below 1\u00d7 counting as 0" in d.find_element("id", "amsr-means").text
    amsr_head = d.find_element("xpath", "//table[@id='level-table']//th[text()='AMSR']")
    assert "mean speedup over all tasks" in amsr_head.get_attribute("title")
    # the log axis reaches past the slowest (0.0003x) and the fastest (3x) bar, its labels apart
    ticks = d.find_elements("css selector", '#suite-chart text.tick[text-anchor="middle"]')
    values = [float(e.text.rstrip("\u00d7")) for e in ticks]
    xs = [float(e.get_attribute("x")) for e in ticks]
    assert min(values) <= 0.0003 and max(values) >= 3.0, values
    for bar in d.find_elements("css selector", "#suite-chart rect.bar"):
        x, w = float(bar.get_attribute("x")), float(bar.get_attribute("width"))
        assert min(xs) - 0.5 <= x and x + w <= max(xs) + 0.5, (x, w, xs)
    labels = rects(d, '#suite-chart text.tick[text-anchor="middle"]')
    assert not [(a, b) for a, b in zip(labels, labels[1:]) if boxes_overlap(a, b)], labels
    save_screenshot(d, tmp_path, "suite_report.png")


def test_evolve_suite_report_compares_seed_and_best_and_links_each_run(browser, tmp_path):
    from kernelsmith.evolve.outputs import write_summary
    from kernelsmith.report import write_evolve_suite_report
    from kernelsmith.suite.evolve_suite import task_run_dir

    runs, task = tmp_path / "runs", Task.from_file(TASK)
    cfg = EvolveConfig.model_validate({"operators": {"rewrite": 0, "tune": 1}})
    searched = {"a.py": (0.0008, 0.0012), "level1/b c.py": (0.5, 0.4)}  # a space: the link is URL-quoted
    for rel, (seed, child) in searched.items():
        run = task_run_dir(runs, rel)
        seed_p = Program(0, 0, "seed", "x = 0\n", "correct", speedup=seed)
        hand_made_run(run, [seed_p, Program(1, 0, "tune", "x = 1\n", "correct", parent_id=1, speedup=child)])
        store = RunStore(run, create=False)
        write_summary(run, store, task, cfg, {}, "done", 1.0)
        store.close()
        write_run_report(run)
    rows = [
        TaskRow(task="a.py", status="correct", correct=True, speedup=0.0011),
        TaskRow(task="level1/b c.py", level="level1", status="correct", correct=True, speedup=0.45),
        TaskRow(task="c.py", status="missing", error="no solution file"),  # skipped: never searched
    ]
    report = BenchReport.build("suite", str(runs / "solutions"), "cpu", None, rows, [])
    page = write_evolve_suite_report(report, runs, runs)
    assert page == runs / "suite_report.html"
    d = open_page(browser, page)
    assert d.title == "kernelsmith evolve-suite: suite" == d.find_element("id", "title").text
    trs = d.find_elements("css selector", "#search-table tbody tr")
    assert [tr.get_attribute("data-task") for tr in trs] == ["a.py", "level1/b c.py", "c.py"]
    cells = [td.text for td in trs[0].find_elements("css selector", "td")]
    assert " ".join(cells[:7]).replace("\u00d7", "x") == "a.py 1 done 0.00080x 0.0012x (#2, iteration 1) 1.50x 0.0011x"
    assert trs[1].find_elements("css selector", "td")[5].text == "1.00\u00d7"  # the seed stayed the best
    assert "not searched" in trs[2].text and "none correct" not in trs[2].text
    assert count(d, "#search-table tr[data-task='c.py'] a") == 0
    links = {a.text: a.get_attribute("href") for a in d.find_elements("css selector", "#search-table a.run-link")}
    assert links == {rel: (task_run_dir(runs, rel) / "report.html").as_uri() for rel in searched}
    save_screenshot(d, tmp_path, "evolve_suite_report.png")
    d.find_element("css selector", "#search-table a.run-link").click()  # the link opens the task's run report
    assert d.title.startswith("kernelsmith run: ")


def test_an_interrupted_run_still_writes_its_summary_and_report(cpu_pool, tmp_path):
    import json
    import signal

    from kernelsmith.evolve.run import run_evolve

    run = tmp_path / "run"
    said: list[str] = []

    def say(text: str) -> None:
        said.append(text)
        if "iteration 0" in text:  # the seed is stored: Ctrl-C, as a user would press it
            signal.raise_signal(signal.SIGINT)

    # Python's own Ctrl-C handler, as in a user's `kernelsmith` process: a library that ran earlier
    # in this test process (Ray's driver, under xdist) may have replaced it, and then nothing raises.
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)

    try:
        with ScriptedServer([], default=fenced(FAST)) as server:
            cfg = load_config(
                None,
                {
                    "iterations": 4,
                    "max_in_flight": 1,
                    "random_seed": 3,
                    "llm": {"base_url": server.url, "models": [{"name": "scripted"}], "timeout": 5.0},
                    "archive": {"islands": 1, "migration_interval": 0},
                    "evaluation": {"device": "cpu"},
                },
            )
            with pytest.raises(KeyboardInterrupt):
                run_evolve(
                    Task.from_file(TASK),
                    SEED.read_text(),
                    cfg,
                    run,
                    say,
                    backend=cpu_pool,
                    write_report=write_run_report,
                )
    finally:
        signal.signal(signal.SIGINT, previous)
    store = RunStore.open_readonly(run)
    stored = store.count()
    store.close()
    summary = json.loads((run / "summary.json").read_text())
    assert summary["stop_reason"] == "interrupted" and summary["programs"] == stored >= 1
    assert summary["iterations_done"] < 4 and summary["best"]["operator"] == "seed"
    html = (run / "report.html").read_text()
    assert '"stop_reason":"interrupted"' in html
    assert not list(run.glob("*.tmp"))
    assert any(line.startswith("interrupted; summary: ") for line in said), said


def test_the_best_program_and_its_parent_show_where_their_time_goes(browser, tmp_path):
    from conftest import recorded_counters, recorded_verdict

    parent_ev, best_ev = recorded_verdict("1_Conv2D_ReLU_BiasAdd"), recorded_verdict("19_ReLU")
    best_ev["counters"] = recorded_counters()
    parent_ev["counters"] = {"status": "not_permitted", "message": "ERR_NVGPUCTRPERM"}
    programs = [
        Program(iteration=0, island=0, operator="seed", code="x = 0\n", status="correct", speedup=0.9, eval=parent_ev),
        Program(
            iteration=1,
            island=0,
            operator="rewrite",
            code="x = 1\n",
            status="correct",
            speedup=1.2,
            parent_id=1,
            eval=best_ev,
        ),
        Program(iteration=2, island=0, operator="rewrite", code="x = 2\n", status="incorrect", parent_id=2, error="no"),
    ]
    programs[0].candidate_ms, programs[1].candidate_ms = parent_ev["candidate_ms"], best_ev["candidate_ms"]
    run = hand_made_run(tmp_path / "run", programs)
    data = load_run(run)
    assert [v.id for v in data.profiles] == [2, 1]  # the best, then its parent
    d = open_page(browser, write_run_report(run))
    charts = d.find_elements("css selector", "#profiles svg.profile")
    assert [c.get_attribute("data-id") for c in charts] == ["2", "1"]
    assert count(d, '#profiles svg.profile[data-id="2"] rect.pbar.own') == 1
    parent_bars = len(parent_ev["kernels"])
    assert count(d, '#profiles svg.profile[data-id="1"] rect.pbar') == parent_bars
    assert count(d, '#profiles svg.profile[data-id="1"] rect.pbar.library') == parent_bars - 1
    text = d.find_element("id", "profiles").text
    assert "relu_bias_kernel" in text and "relu_kernel" in text and "ms of kernels in a measured 3.3659 ms" in text
    widths = [float(r.get_attribute("width")) for r in d.find_elements("css selector", "#profiles rect.pbar")]
    assert max(widths) > 10 * min(widths)  # one scale for both programs: a 3 ms bar beside a 0.001 ms one
    # Nsight Compute's counters under the best program's chart; the parent's say why there are none
    rows = d.find_elements("css selector", '#profiles table.counters[data-id="2"] tr')
    assert len(rows) == 2  # header, one kernel (two launches merged)
    assert "compute-bound: SM at 69% of peak" in rows[1].text and "52 registers/thread" in rows[1].text
    assert rows[1].find_elements("css selector", "td")[1].text == "2"
    assert count(d, '#profiles table.counters[data-id="1"]') == 0
    assert "no counters (not_permitted): ERR_NVGPUCTRPERM" in d.find_element("css selector", ".counters-note").text


def test_a_run_without_kernel_records_says_so(browser, tmp_path):
    p = Program(iteration=0, island=0, operator="seed", code="x = 0\n", status="correct", speedup=1.0)
    d = open_page(browser, write_run_report(hand_made_run(tmp_path / "run", [p])))
    assert count(d, "#profiles svg.profile") == 0
    assert "recorded for correct programs on CUDA" in d.find_element("id", "profiles").text
