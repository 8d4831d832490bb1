"""A failed build, as feedback (kernelsmith/evaluate/build/errors.py): the compiler's first error
lines with their source line and caret; ninja's commands and progress left out."""

from __future__ import annotations

from kernelsmith.evaluate.build.errors import MAX_LINES, first_error_lines

NVCC = """Error building extension 'fused_gelu': [1/3] c++ -MMD -MF main.o.d -DTORCH_EXTENSION_NAME=fused_gelu -isystem /x/include -fPIC -std=c++17 -c /tmp/ks-cand-abc/build/main.cpp -o main.o
[2/3] /usr/local/cuda/bin/nvcc --generate-dependencies-with-compile -DTORCH_EXTENSION_NAME=fused_gelu -gencode=arch=compute_90,code=sm_90 -c /tmp/ks-cand-abc/build/cuda.cu -o cuda.cuda.o
FAILED: cuda.cuda.o
/usr/local/cuda/bin/nvcc --generate-dependencies-with-compile -c /tmp/ks-cand-abc/build/cuda.cu -o cuda.cuda.o
/tmp/ks-cand-abc/build/cuda.cu(14): error: identifier "tanhf_fast" is undefined
          out[i] = 0.5f * x * (1.0f + tanhf_fast(0.79788456f * x));
                                      ^

1 error detected in the compilation of "/tmp/ks-cand-abc/build/cuda.cu".
ninja: build stopped: subcommand failed.
"""

LINKER = """Error building extension 'ext': [2/2] c++ main.o -shared -o ext.so
FAILED: ext.so
/usr/bin/ld: main.o: in function `f()':
main.cpp:(.text+0x5): undefined reference to `missing_symbol()'
collect2: error: ld returned 1 exit status
ninja: build stopped: subcommand failed.
"""


def test_nvcc_errors_keep_the_source_line_and_caret_and_drop_ninja():
    text = first_error_lines(NVCC, {"/tmp/ks-cand-abc/build/": ""})
    lines = text.splitlines()
    assert lines[0] == 'cuda.cu(14): error: identifier "tanhf_fast" is undefined'
    assert "tanhf_fast(0.79788456f * x)" in lines[1] and lines[2].strip() == "^"
    assert "1 error detected" in text
    assert "ninja" not in text and "FAILED" not in text and "-gencode" not in text and "/tmp/ks-cand" not in text


def test_linker_errors_are_kept():
    text = first_error_lines(LINKER)
    assert "undefined reference to `missing_symbol()'" in text
    assert "ld returned 1 exit status" in text


def test_without_a_recognisable_error_the_tail_of_the_log_is_kept():
    log = "\n".join(f"line {i}" for i in range(100))
    text = first_error_lines(log)
    assert text.splitlines() == [f"line {i}" for i in range(100 - MAX_LINES, 100)]


def test_a_flood_of_errors_is_cut():
    log = "\n".join(f"main.cpp:{i}:1: error: e{i}" for i in range(500))
    text = first_error_lines(log)
    assert len(text.splitlines()) == MAX_LINES and text.startswith("main.cpp:0:1: error: e0")
