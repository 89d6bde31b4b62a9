"""Static indices: any NumPy index with constant parts, frozen for the IR (and back)."""

from __future__ import annotations

from typing import Any

import numpy as np

from difgen.core.ir import FrozenArray
from difgen.core.location import user_location
from difgen.errors import TraceError


def freeze_index(index: Any, shape: tuple[int, ...]) -> tuple[Any, ...]:
    """Turn ``index`` into the frozen tuple form that ``getitem`` takes.

    Boolean masks become integer positions (they are constants, so the positions are
    known at build time). The tracer has already replaced constant tracers in the
    index by their values and refused traced ones (``Tracer.__getitem__``).

    >>> freeze_index((0, slice(1, None)), (3, 4))
    (0, ('slice', 1, None, None))
    """
    items = index if isinstance(index, tuple) else (index,)
    frozen: list[Any] = []
    for item in items:
        if item is None or item is Ellipsis:
            frozen.append(item)
        elif isinstance(item, slice):
            for bound in (item.start, item.stop, item.step):
                if bound is not None and not isinstance(bound, (int, np.integer)):
                    raise TraceError(
                        f"{user_location()}: slice bounds must be constant ints"
                    )
            bounds = (item.start, item.stop, item.step)
            frozen.append(("slice", *(None if b is None else int(b) for b in bounds)))
        elif isinstance(item, (bool, np.bool_)):
            raise TraceError(f"{user_location()}: indexing with a Python bool")
        elif isinstance(item, (int, np.integer)):
            frozen.append(int(item))
        else:
            arr = np.asarray(item)
            if arr.dtype == np.bool_:
                frozen.extend(FrozenArray(p.astype(np.int64)) for p in np.nonzero(arr))
            elif arr.dtype.kind in "iu":
                frozen.append(FrozenArray(arr.astype(np.int64)))
            else:
                raise TraceError(
                    f"{user_location()}: unsupported index of type {type(item).__name__}"
                )
    return tuple(frozen)


def to_index(frozen: tuple[Any, ...]) -> tuple[Any, ...]:
    """Rebuild a NumPy index from its frozen form."""
    items: list[Any] = []
    for item in frozen:
        if isinstance(item, tuple) and len(item) == 4 and item[0] == "slice":
            items.append(slice(*item[1:]))
        elif isinstance(item, FrozenArray):
            items.append(item.value)
        else:
            items.append(item)
    return tuple(items)
