"""_types.py - the names the binding's annotations give to what its calls
take. Nothing here runs at call time: the binding checks its arguments
itself and says what was wrong (InvalidArgument), so these only tell a type
checker, and a reader, which arguments a call accepts.

numpy and torch are never imported by the binding, so a tensor is described
by what the binding reads from it: numpy's and torch's (CPU) arrays have
__array__, CUDA arrays (torch, CuPy) have __cuda_array_interface__, and any
object with the buffer protocol works (bytearray, memoryview, array.array,
ctypes arrays).
"""

from __future__ import annotations

import array
import ctypes
import datetime
from typing import Any, Dict, Mapping, Optional, Protocol, Sequence, Union


class SupportsArray(Protocol):
    """numpy arrays and torch CPU tensors (anything numpy can view)."""

    def __array__(self) -> Any: ...


class SupportsCudaArrayInterface(Protocol):
    """torch CUDA tensors, CuPy arrays (the CUDA array interface)."""

    @property
    def __cuda_array_interface__(self) -> Dict[str, Any]: ...


# An array the binding communicates in place (zero-copy): the buffer
# protocol's standard types are listed because typing has no name for "has
# the buffer protocol" before Python 3.12.
TensorLike = Union[
    SupportsArray,
    SupportsCudaArrayInterface,
    bytes,  # read-only: what a call only reads (a send, an input)
    bytearray,
    memoryview,
    "array.array[Any]",
    "ctypes.Array[Any]",
]

# A list form's arrays (all_gather's tensor_list, scatter's input_list, ...).
TensorList = Sequence[TensorLike]

# A deadline: a timedelta, or seconds as a number (None: the default one).
TimeoutLike = Union[datetime.timedelta, float, int]
OptTimeout = Optional[TimeoutLike]

# torchcomms' hints: names to values (values are str in torchcomms; collie
# also takes int, bool and None where a setting is numeric or unset).
Hints = Mapping[str, Union[str, int, float, bool, None]]
OptHints = Optional[Hints]
