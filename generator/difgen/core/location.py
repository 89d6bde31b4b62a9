"""Where in the user's code a trace is: the ``file:line`` every error message names."""

from __future__ import annotations

import os
import sys
from types import FrameType

import numpy as np

_DIFGEN_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_NUMPY_DIR = os.path.dirname(os.path.abspath(np.__file__))


def in_difgen_or_numpy(filename: str) -> bool:
    """Whether code in ``filename`` is difgen's or NumPy's own (not the user's)."""
    return os.path.abspath(filename).startswith((_DIFGEN_DIR, _NUMPY_DIR))


def user_location() -> str:
    """``file:line`` of the innermost frame outside difgen and NumPy.

    >>> user_location().endswith(">:1")  # called from a doctest, which is user code
    True
    """
    frame: FrameType | None = sys._getframe(1)
    while frame is not None:
        if not in_difgen_or_numpy(frame.f_code.co_filename):
            return f"{frame.f_code.co_filename}:{frame.f_lineno}"
        frame = frame.f_back
    return "<unknown>"
