"""common.py - what the jobs that tests start share: the backend under test
(COLLIE_TORCH_TEST_BACKEND, imported as the session's conftest does) and
torchrun's variables from collierun's when the launcher did not set them."""

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
BACKEND = os.environ.get("COLLIE_TORCH_TEST_BACKEND", "collie")

if BACKEND == "collie":
    sys.path.insert(0, os.path.join(ROOT, "python"))
    import collie.torch  # noqa: E402,F401

env = os.environ
env.setdefault("RANK", env["COLLIE_RANK"])
env.setdefault("WORLD_SIZE", env["COLLIE_WORLD_SIZE"])
env.setdefault("LOCAL_RANK", env.get("COLLIE_LOCAL_RANK", env["COLLIE_RANK"]))
env.setdefault("MASTER_ADDR", "127.0.0.1")
env.setdefault("MASTER_PORT", env["COLLIE_TORCH_JOB_PORT"])  # picked free by the test
RANK = int(env["RANK"])
SIZE = int(env["WORLD_SIZE"])


def say(*words):
    """One line of output, flushed (collierun --tag-output prefixes the rank)."""
    print(*words, flush=True)
