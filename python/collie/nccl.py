"""collie.nccl - where libcollie-nccl.so is (docs/nccl.md): the NCCL-API
library to preload so that a program written against NCCL (torch's
backend="nccl", vLLM's pynccl, nccl-tests) runs on collie.

    LD_PRELOAD=$(python -m collie.nccl) python train.py

Looks beside the libcollie.so in use: the wheel's collie/lib/, or a build
tree's nccl/ folder (COLLIE_LIBRARY=build/libcollie.so). `python -m
collie.nccl` prints the path, or says where it looked and exits 1.
"""

import os
import sys
from typing import List

NAME = "libcollie-nccl.so"


def _candidates() -> List[str]:
    from . import library_path

    here = os.path.dirname(os.path.abspath(library_path()))
    return [os.path.join(here, NAME), os.path.join(here, "nccl", NAME)]


def library_path() -> str:
    """Path of libcollie-nccl.so beside the libcollie.so in use; FileNotFoundError
    naming the places looked at when there is none."""
    tried = _candidates()
    for p in tried:
        if os.path.isfile(p):
            return p
    raise FileNotFoundError("no %s beside the collie library in use (looked at %s): build the "
                            "collie_nccl target, or install collie's wheel" % (NAME, ", ".join(tried)))


if __name__ == "__main__":
    try:
        print(library_path())
    except Exception as e:  # no collie library at all (LibraryNotFound), or no NCCL one beside it
        sys.exit("collie.nccl: %s" % e)
