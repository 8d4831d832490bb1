"""The patch runtime: what `kernelsmith apply` copies into every patch it writes (every module of this
folder but this one), so that a patched model needs torch alone at serving time. It imports nothing else of
kernelsmith (an import-linter contract holds it; docs/layout.md). install.py installs a patch on a live
model; kernel_op.py makes each kernel an operator and says which modes (eager, compile, graphs) it
serves; eager_graph.py serves eager mode on the forward Dynamo traces (aten_trace.py takes that graph down
to aten ops); graph_pass.py and inline.py serve torch.compile; module_swap.py swaps whole-module regions;
substitute.py is the dispatch mode for regions that write in place; graph_match.py finds a region on an
aten graph; pattern.py and match.py read a task's region; interpreter.py runs Triton kernels on the CPU."""
