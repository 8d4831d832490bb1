"""`kernelsmith apply`: the best kernels of search runs on a capture's tasks written as a patch (patch_dir.py),
checked end to end on the captured model in each mode (e2e.py: outputs against the model's own error,
e2e_outputs.py, yardstick.py; times, forward_time.py; the verdicts' prediction, gains.py), as a function
(run.py: apply_runs, its options in options.py). The patch's own runtime is kernelsmith/patch."""
