"""Not a task: neither Model nor get_inputs."""


def helper(x):
    return x + 1
