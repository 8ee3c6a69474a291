"""collie - Python binding of the collie collective-communication library.

A torchcomms-like API over libcollie.so (ctypes; the standard library only at
import: numpy and torch are never imported, their arrays are recognised by
duck typing):

    import collie, numpy as np
    comm = collie.new_comm()                  # rank/size/store from collierun, torchrun, Slurm...
    x = np.ones(1024, dtype=np.float32)
    comm.all_reduce(x)                        # in place, zero-copy
    w = comm.all_reduce(x, async_op=True)     # overlap with compute
    w.wait()
    comm.finalize()

Submodules: collie.objcol (pickled-object collectives), collie.distributed
(torch.distributed-style functions with telemetry categories and steps),
collie.timing (the per-rank timing logger). docs/python.md is the guide.
"""

from __future__ import annotations

from ._comm import (
    BatchSendRecv,
    Comm,
    Plan,
    Work,
    get_default_comm,
    new_comm,
    register_category,
    set_default_comm,
)
from ._enums import ALGORITHMS, DType, PayloadCategory, PremulSum, ReduceOp, dtype_of
from ._options import (
    AllGatherOptions,
    AllGatherPExecOptions,
    AllGatherPInitOptions,
    AllGatherSingleOptions,
    AllReduceOptions,
    AllToAllOptions,
    AllToAllSingleOptions,
    AllToAllvSingleOptions,
    BarrierOptions,
    BatchP2POptions,
    BroadcastOptions,
    CommOptions,
    GatherOptions,
    OpOptions,
    RecvOptions,
    ReduceOptions,
    ReduceScatterOptions,
    ReduceScatterSingleOptions,
    ScatterOptions,
    SendOptions,
    SplitOptions,
)
from ._window import Window, WindowWork
from ._errors import (
    CollieError,
    CollieSystemError,
    InternalError,
    InvalidArgument,
    InvalidUsage,
    LibraryNotFound,
    RemoteError,
    Timeout,
    Unsupported,
)
from ._lib import SPLIT_NONE, VERSION as _VERSION
from . import objcol  # torchcomms' collie.objcol, there after `import collie`

# The version of collie: of this package and of the C library it was made
# with (one number, CMakeLists.txt's project(); the wheel's metadata says it too).
__version__ = _VERSION


def library_path() -> str:
    """Path of the libcollie.so in use (loads it; LibraryNotFound if none)."""
    from . import _lib

    return str(_lib.path())


# torchcomms' class names for the same objects.
TorchComm = Comm
TorchWork = Work
TorchCommWindow = Window

__all__ = [
    "ALGORITHMS",
    "AllGatherOptions",
    "AllGatherPExecOptions",
    "AllGatherPInitOptions",
    "AllGatherSingleOptions",
    "AllReduceOptions",
    "AllToAllOptions",
    "AllToAllSingleOptions",
    "AllToAllvSingleOptions",
    "BarrierOptions",
    "BatchP2POptions",
    "BroadcastOptions",
    "CommOptions",
    "GatherOptions",
    "OpOptions",
    "PremulSum",
    "RecvOptions",
    "ReduceOptions",
    "ReduceScatterOptions",
    "ReduceScatterSingleOptions",
    "ScatterOptions",
    "SendOptions",
    "SplitOptions",
    "TorchComm",
    "TorchCommWindow",
    "TorchWork",
    "WindowWork",
    "BatchSendRecv",
    "CollieError",
    "CollieSystemError",
    "Comm",
    "DType",
    "InternalError",
    "InvalidArgument",
    "InvalidUsage",
    "LibraryNotFound",
    "PayloadCategory",
    "Plan",
    "Window",
    "ReduceOp",
    "RemoteError",
    "SPLIT_NONE",
    "Timeout",
    "Unsupported",
    "Work",
    "dtype_of",
    "get_default_comm",
    "library_path",
    "new_comm",
    "register_category",
    "set_default_comm",
]
