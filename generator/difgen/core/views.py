"""NumPy's view model, as the tracer follows it: which results are views, and how a
view relates to its base.

In NumPy, basic indexing, ``reshape``, ``transpose``, ``broadcast_to`` (read-only),
``diagonal`` (read-only)... return a *view*: an array object that shares its base's
memory, so a write into the base shows through the view and a write into the view
lands in the base. A tracer has no memory to share; instead a traced view records a
:class:`View`: its base (the array object owning the data, never itself a view),
``derive`` (the NumPy operations that recompute the view from the base), and the
base's write count when the view was last derived. :class:`~difgen.core.tracer.
Tracer` re-derives a view read after its base was written, and writes a write into
the view into the base at the positions :meth:`View.positions` gives.

This module knows nothing of tracers beyond their ``view`` and ``version``
attributes; :func:`difgen.core.tracer.view_of` attaches a :func:`derived` view to a
tracer (the core imports nothing above it, design.md §2).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from difgen.core.location import user_location

if TYPE_CHECKING:
    from difgen.core.tracer import Tracer


@dataclass
class View:
    """How a tracer views another array object, as NumPy's views do.

    ``derive`` recomputes the view from its ``base`` (NumPy operations, so it also
    maps an array of flat positions of the base to the positions the view holds);
    ``version`` is the base's write count when the view's value was last derived.
    """

    base: Tracer
    derive: Callable[[Any], Any]
    version: int
    writable: bool
    where: str

    def positions(self) -> np.ndarray:
        """The flat positions in the base of the view's elements (the view's shape)."""
        base = self.base
        return np.asarray(self.derive(np.arange(base.size).reshape(base.shape)))


def derived(source: Tracer, op: Callable[[Any], Any], writable: bool) -> View:
    """The view ``op(source)`` is: of ``source``, or of ``source``'s base when
    ``source`` is itself a view (a view of a view derives from the base in one go,
    and is read-only when either step is)."""
    parent = source.view
    if parent is None:
        base, derive = source, op
    else:
        base, derive = parent.base, compose(op, parent.derive)
    writable = writable and (parent is None or parent.writable)
    return View(base, derive, base.version, writable, user_location())


def compose(
    outer: Callable[[Any], Any], inner: Callable[[Any], Any]
) -> Callable[[Any], Any]:
    """``a -> outer(inner(a))``: a view of a view derives from the base in one go."""

    def derive(a: Any) -> Any:
        return outer(inner(a))

    return derive


def is_basic(index: Any) -> bool:
    """Whether NumPy indexing with ``index`` returns a view (no arrays in it)."""
    items = index if isinstance(index, tuple) else (index,)
    return all(
        item is None
        or item is Ellipsis
        or (
            isinstance(item, (slice, int, np.integer))
            and not isinstance(item, (bool, np.bool_))
        )
        for item in items
    )


def is_element(index: Any, ndim: int) -> bool:
    """Whether ``index`` reads one element by integers alone (NumPy returns a scalar,
    not a view)."""
    items = index if isinstance(index, tuple) else (index,)
    return len(items) == ndim and all(
        isinstance(i, (int, np.integer)) and not isinstance(i, (bool, np.bool_))
        for i in items
    )
