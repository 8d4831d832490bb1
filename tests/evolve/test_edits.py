"""From an LLM reply to a program: code extraction, EVOLVE-BLOCK merges, SEARCH/REPLACE diffs."""

from __future__ import annotations

import textwrap

import pytest

from kernelsmith.evolve.edits import (
    EditError,
    apply_diff,
    apply_reply,
    evolve_blocks,
    extract_code,
    merge_evolve_blocks,
    parse_diff_blocks,
)

FENCE = "`" * 3


def fenced(code: str, tag: str = "python", fence: str = FENCE) -> str:
    return f"{fence}{tag}\n{code}{fence}\n"


def diff(search: str, replace: str, width: int = 7) -> str:
    return f"{'<' * width} SEARCH\n{search}{'=' * width}\n{replace}{'>' * width} REPLACE\n"


MODEL = textwrap.dedent("""\
    import torch


    class ModelNew(torch.nn.Module):
        def forward(self, x):
            y = x * 2
            return y + 1
""")

# -- extract_code ------------------------------------------------------------------------------


def test_extract_prefers_last_python_block_defining_model_new():
    helper = "def helper():\n    return 1\n" * 20  # larger than either program
    first = MODEL.replace("x * 2", "x * 3")
    usage = fenced("m = ModelNew()\n")
    reply = f"Plan:\n{fenced(helper)}Draft:\n{fenced(first)}Final:\n{fenced(MODEL)}Usage:\n{usage}"
    assert extract_code(reply) == MODEL


def test_extract_largest_python_block_without_model_new():
    small, large = "a = 1\n", "a = 1\nb = 2\nc = 3\n"
    reply = fenced(small) + fenced(large, tag="py") + fenced("x" * 500 + "\n", tag="")
    assert extract_code(reply) == large


def test_extract_untagged_block_when_no_python_block():
    reply = fenced("int main() {}\n", tag="cpp") + "and\n" + fenced("short\n", tag="") + fenced(MODEL, tag="")
    assert extract_code(reply) == MODEL


def test_extract_tilde_fences_and_python3_tag():
    assert extract_code(fenced(MODEL, tag="python3", fence="~~~")) == MODEL


def test_extract_ignores_other_languages_and_plain_text():
    assert extract_code("no code here, just `inline` words") is None
    assert extract_code(fenced("echo hi\n", tag="bash")) is None
    assert extract_code(fenced("\n\n", tag="python")) is None


def test_extract_unterminated_final_fence_runs_to_end():
    cut = "Here it is:\n```python\n" + MODEL + "    # the reply was cut he"
    assert extract_code(cut) == MODEL + "    # the reply was cut he\n"


def test_extract_crlf_and_blank_edges():
    reply = "Answer:\r\n```python\r\n\r\n\r\nx = 1\r\n\r\ny = 2\r\n\r\n```\r\n"
    assert extract_code(reply) == "x = 1\n\ny = 2\n"


def test_extract_dedents_an_indented_fence():
    reply = "1. the code:\n\n   ```python\n   x = 1\n   if x:\n       y = 2\n   ```\n"
    assert extract_code(reply) == "x = 1\nif x:\n    y = 2\n"


def test_extract_longer_fence_holds_a_shorter_one():
    code = 'DOC = """\n```\nexample\n```\n"""\n'
    assert extract_code(fenced(code, fence="````")) == code


def test_extract_skips_think_section():
    draft = fenced(MODEL.replace("x * 2", "x * 9"))
    reply = f"<think>\nmaybe this:\n{draft}no.\n</think>\nFinal:\n{fenced(MODEL)}"
    assert extract_code(reply) == MODEL
    # a reasoning model whose template opened <think> for it: only the closing tag is in the reply
    assert extract_code("draft " + fenced("a = 1\n") + "</think>" + fenced("b = 2\n")) == "b = 2\n"
    # reasoning that was cut off before its answer has no program
    assert extract_code(f"<think>\n{fenced(MODEL)}") is None


# -- EVOLVE-BLOCK markers ----------------------------------------------------------------------

PARENT = textwrap.dedent("""\
    import torch
    # EVOLVE-BLOCK-START
    def kernel(x):
        return x * 2
    # EVOLVE-BLOCK-END

    def get_inputs():
        return [torch.randn(4)]
    # EVOLVE-BLOCK-START
    SCALE = 1
    # EVOLVE-BLOCK-END
    TAIL = True
""")


def test_evolve_blocks_spans():
    assert evolve_blocks(PARENT) == [(1, 4), (8, 10)]
    assert evolve_blocks(MODEL) == []


@pytest.mark.parametrize(
    "code, message",
    [
        ("# EVOLVE-BLOCK-START\nx = 1\n", r"EVOLVE-BLOCK-START on line 1 is never closed"),
        ("x = 1\n# EVOLVE-BLOCK-END\n", r"EVOLVE-BLOCK-END on line 2 has no EVOLVE-BLOCK-START"),
        (
            "# EVOLVE-BLOCK-START\n# EVOLVE-BLOCK-START\n# EVOLVE-BLOCK-END\n",
            r"line 2 opens inside the block begun on line 1",
        ),
    ],
)
def test_evolve_blocks_unbalanced(code, message):
    with pytest.raises(EditError, match=message):
        evolve_blocks(code)


def test_merge_takes_only_marked_text_from_child():
    child = textwrap.dedent("""\
        import numpy  # the child changed the harness: ignored
        # EVOLVE-BLOCK-START
        def kernel(x):
            return x + x
        # EVOLVE-BLOCK-END
        def get_inputs():
            return []
        # EVOLVE-BLOCK-START
        SCALE = 2
        EXTRA = 3
        # EVOLVE-BLOCK-END
    """)
    expected = PARENT.replace("x * 2", "x + x").replace("SCALE = 1", "SCALE = 2\nEXTRA = 3")
    assert merge_evolve_blocks(PARENT, child) == expected


def test_merge_block_count_mismatch():
    child = "# EVOLVE-BLOCK-START\nx = 1\n# EVOLVE-BLOCK-END\n"
    with pytest.raises(EditError, match=r"the program has 2 EVOLVE-BLOCK sections but the reply has 1"):
        merge_evolve_blocks(PARENT, child)


def test_merge_unmarked_child_fills_a_single_block():
    parent = "import torch\n# EVOLVE-BLOCK-START\nold = 1\n# EVOLVE-BLOCK-END\nkeep = 2"
    assert merge_evolve_blocks(parent, "new = 1\nmore = 2\n") == (
        "import torch\n# EVOLVE-BLOCK-START\nnew = 1\nmore = 2\n# EVOLVE-BLOCK-END\nkeep = 2"
    )


def test_merge_unmarked_child_into_two_blocks_is_an_error():
    with pytest.raises(EditError, match=r"2 EVOLVE-BLOCK sections but the reply has no markers"):
        merge_evolve_blocks(PARENT, "x = 1\n")


def test_merge_without_parent_markers_returns_child():
    child = "# EVOLVE-BLOCK-START\nx = 1\n# EVOLVE-BLOCK-END\n"
    assert merge_evolve_blocks(MODEL, child) == child


# -- parse_diff_blocks -------------------------------------------------------------------------


def test_parse_blocks_in_and_out_of_fences_with_odd_markers():
    reply = (
        "First:\n"
        + fenced(diff("a = 1\n", "a = 2\n"))
        + "Then:\n"
        + "<<<<< SEARCH  \nb = 1\n=========   \n\n>>>>>>>>> REPLACE \nbye\n"
    )
    assert parse_diff_blocks(reply) == [("a = 1\n", "a = 2\n"), ("b = 1\n", "\n")]


def test_parse_empty_replace_and_crlf():
    reply = "<<<<<<< SEARCH\r\nx = 1\r\n=======\r\n>>>>>>> REPLACE\r\n"
    assert parse_diff_blocks(reply) == [("x = 1\n", "")]


def test_parse_ignores_drafts_in_think():
    reply = "<think>\n" + diff("a\n", "b\n") + "</think>\n" + diff("c\n", "d\n")
    assert parse_diff_blocks(reply) == [("c\n", "d\n")]


def test_parse_incomplete_block_names_the_missing_marker():
    with pytest.raises(EditError, match=r"block 2 is incomplete \(no >>>>>>> REPLACE line\)"):
        parse_diff_blocks(diff("a\n", "b\n") + "<<<<<<< SEARCH\nc\n=======\nd\n")
    with pytest.raises(EditError, match=r"block 1 is incomplete \(no ======= line\)"):
        parse_diff_blocks("<<<<<<< SEARCH\nc\n")
    with pytest.raises(EditError, match=r"block 1 is not closed before the next <<<<<<< SEARCH"):
        parse_diff_blocks("<<<<<<< SEARCH\nc\n" + diff("a\n", "b\n"))


# -- apply_diff --------------------------------------------------------------------------------


def test_diff_exact():
    out = apply_diff(MODEL, "Change:\n" + diff("        y = x * 2\n", "        y = x * 4\n"))
    assert out == MODEL.replace("x * 2", "x * 4")


def test_diff_trailing_whitespace_tolerated():
    code = MODEL.replace("y = x * 2\n", "y = x * 2   \n")
    out = apply_diff(code, diff("        y = x * 2\n        return y + 1\t\n", "        return x * 2 + 1\n"))
    assert out == MODEL.replace("        y = x * 2\n        return y + 1\n", "        return x * 2 + 1\n")


def test_diff_indentation_shift_reindents_replacement():
    search = "def forward(self, x):\n    y = x * 2\n"
    replace = "def forward(self, x):\n    if x.is_cuda:\n        return x\n\n    y = x * 2\n"
    out = apply_diff(MODEL, diff(search, replace))
    assert out == MODEL.replace("y = x * 2\n", "if x.is_cuda:\n            return x\n\n        y = x * 2\n")


def test_diff_over_indented_search_is_dedented():
    code = "def f(x):\n    return x\n"
    out = apply_diff(
        code, diff("        def f(x):\n            return x\n", "        def f(x):\n            return -x\n")
    )
    assert out == "def f(x):\n    return -x\n"


def test_diff_inconsistent_indentation_does_not_match():
    code = "def f(x):\n    return x\n"
    with pytest.raises(EditError, match=r"block 1 matches nothing"):
        apply_diff(code, diff("    def f(x):\n    return x\n", "pass\n"))


def test_diff_blank_lines_tolerated():
    code = "a = 1\n\n\nb = 2\nc = 3\n"
    assert apply_diff(code, diff("a = 1\nb = 2\n", "a = 10\nb = 20\n")) == "a = 10\nb = 20\nc = 3\n"
    code = "a = 1\nb = 2\nc = 3\n"
    assert apply_diff(code, diff("a = 1\n\nb = 2\n", "ab = 3\n")) == "ab = 3\nc = 3\n"


def test_diff_blocks_apply_in_order_on_previous_result():
    reply = (
        diff("        y = x * 2\n", "        z = x * 2\n")
        + "and\n"
        + diff("        z = x * 2\n", "        y = z - 1\n")
    )
    assert apply_diff(MODEL, reply) == MODEL.replace("y = x * 2", "y = z - 1")
    # the second block matches only what the first wrote
    with pytest.raises(EditError, match=r"block 2 matches nothing"):
        apply_diff(MODEL, diff("        y = x * 2\n", "        w = x\n") + diff("        z = x * 2\n", "pass\n"))


def test_diff_stricter_match_wins_over_looser_ones():
    # exact beats trailing-whitespace, which beats shifted indentation: no false ambiguity
    code = "x = 1\nx = 1   \nif x:\n    x = 1\n"
    assert apply_diff(code, diff("x = 1   \n", "x = 2\n")) == "x = 1\nx = 2\nif x:\n    x = 1\n"
    code = "x = 1  \nif x:\n    x = 1\n"
    assert apply_diff(code, diff("x = 1\n", "x = 2\n")) == "x = 2\nif x:\n    x = 1\n"


def test_diff_ambiguous_match():
    code = "a = 1\nb = 2\na = 1\n"
    with pytest.raises(EditError, match=r"block 1 matches 2 places \(lines 1, 3\); include more context"):
        apply_diff(code, diff("a = 1\n", "a = 5\n"))
    # more context resolves it
    assert apply_diff(code, diff("b = 2\na = 1\n", "b = 2\na = 5\n")) == "a = 1\nb = 2\na = 5\n"


def test_diff_missing_block_names_number_head_and_closest_line():
    reply = diff("        y = x * 2\n", "        y = x * 3\n") + diff(
        "    def forward(self, x):\n        y = x * 3\n        return y + 2\n        extra\n", "pass\n"
    )
    with pytest.raises(EditError) as info:
        apply_diff(MODEL, reply)
    message = str(info.value)
    assert "block 2 matches nothing" in message
    assert "def forward(self, x):\n    y = x * 3\n    return y + 2\n" in message
    assert "extra" not in message  # only the first 3 lines are shown
    assert "its line `return y + 2` is not in the program" in message
    assert "most similar program line is line 7: `return y + 1`" in message


def test_diff_missing_block_with_lines_out_of_order():
    with pytest.raises(EditError, match=r"each of its lines is in the program, but not together"):
        apply_diff("a = 1\nb = 2\nc = 3\n", diff("c = 3\na = 1\n", "x\n"))


def test_diff_missing_block_with_no_similar_line():
    with pytest.raises(EditError, match=r"`zzzzqqqq` is not in the program; no program line resembles it"):
        apply_diff(MODEL, diff("zzzzqqqq\n", "x\n"))


def test_diff_empty_search_and_no_blocks():
    with pytest.raises(EditError, match=r"block 1 has an empty SEARCH section"):
        apply_diff(MODEL, diff("\n", "x = 1\n"))
    with pytest.raises(EditError, match=r"^the reply holds no SEARCH/REPLACE block$"):
        apply_diff(MODEL, fenced(MODEL))


def test_diff_keeps_trailing_newline_behaviour():
    assert apply_diff("a = 1\nb = 2", diff("b = 2\n", "b = 3\n")) == "a = 1\nb = 3"
    assert apply_diff("a = 1\nb = 2\n", diff("b = 2\n", "b = 3\n")) == "a = 1\nb = 3\n"
    assert apply_diff("a = 1\r\nb = 2\r\n", diff("a = 1\n", "")) == "b = 2\n"


# -- apply_reply -------------------------------------------------------------------------------


def test_reply_rewrite_without_parent():
    assert apply_reply(None, "Sure.\n" + fenced(MODEL), "rewrite") == MODEL


def test_reply_rewrite_merges_into_parent_blocks():
    parent = "import torch\n# EVOLVE-BLOCK-START\nK = 1\n# EVOLVE-BLOCK-END\nHARNESS = 1\n"
    child = "import os\n# EVOLVE-BLOCK-START\nK = 2\n# EVOLVE-BLOCK-END\nHARNESS = 99\n"
    assert apply_reply(parent, fenced(child), "rewrite") == parent.replace("K = 1", "K = 2")


def test_reply_rewrite_without_code():
    with pytest.raises(EditError, match=r"the reply holds no python code block"):
        apply_reply(MODEL, "I would use shared memory.", "rewrite")


def test_reply_diff_applies_blocks():
    out = apply_reply(MODEL, fenced(diff("        return y + 1\n", "        return y - 1\n")), "diff")
    assert out == MODEL.replace("y + 1", "y - 1")


def test_reply_diff_accepts_full_program_as_rewrite():
    child = MODEL.replace("x * 2", "x * 8")
    assert apply_reply(MODEL, "Rewrote it all:\n" + fenced(child), "diff") == child


def test_reply_diff_rejects_fragment_without_blocks():
    with pytest.raises(EditError, match=r"no SEARCH/REPLACE block and no full program defining ModelNew"):
        apply_reply(MODEL, fenced("y = x * 8\n"), "diff")


def test_reply_bad_mode_or_missing_parent():
    with pytest.raises(ValueError, match=r"unknown edit mode 'patch'"):
        apply_reply(MODEL, fenced(MODEL), "patch")
    with pytest.raises(ValueError, match=r"diff mode needs a parent program"):
        apply_reply(None, diff("a\n", "b\n"), "diff")


def test_rewrite_refuses_diff_markers_inside_the_program():
    reply = "```python\n<<<<<<< SEARCH\nx = 1\n=======\nx = 2\n>>>>>>> REPLACE\n```\n"
    with pytest.raises(EditError, match="SEARCH/REPLACE markers"):
        apply_reply("x = 1\n", reply, "rewrite")
