"""Post-training on the search's trajectories: TRL SFT and GRPO with the speedup reward.

Nothing here imports trl, peft or transformers at import time: they come with the optional
`train` extra and are loaded inside the functions that need them.
"""
