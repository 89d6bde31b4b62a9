"""Where NumPy's calls on tracers go: the frontend's handlers, registered here.

What each NumPy function means is the frontend's business, one layer up: it
registers its ``__array_ufunc__``/``__array_function__`` handlers with
:func:`use_numpy_dispatch` and what touches run-time integer or boolean data with
:func:`use_runtime_dispatch` when it is imported. Until then a call refuses.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from difgen.core.location import user_location
from difgen.errors import TraceError

if TYPE_CHECKING:
    from difgen.core.tracer import Tracer

UfuncHandler = Callable[[Any, str, Any, dict[str, Any]], Any]
FunctionHandler = Callable[[Any, Any, dict[str, Any]], Any]


def _no_frontend(*args: Any) -> Any:
    raise TraceError(
        f"{user_location()}: a NumPy function was called on a traced value, but "
        "difgen.frontend (which gives NumPy's functions their meaning on tracers) "
        "is not imported"
    )


class _Dispatch:
    """The frontend's handlers (see :func:`use_numpy_dispatch` and
    :func:`use_runtime_dispatch`)."""

    ufunc: UfuncHandler = _no_frontend
    function: FunctionHandler = _no_frontend
    getitem: Callable[[Tracer, Any], Any] = _no_frontend
    setitem: Callable[[Tracer, Any, Any], None] = _no_frontend
    integer: Callable[[str, Any, Any], Any] = _no_frontend
    astype: Callable[[Tracer, Any], Any] = _no_frontend


def use_numpy_dispatch(ufunc: UfuncHandler, function: FunctionHandler) -> None:
    """Route ``__array_ufunc__`` and ``__array_function__`` of tracers to a frontend."""
    _Dispatch.ufunc = staticmethod(ufunc)
    _Dispatch.function = staticmethod(function)


def use_runtime_dispatch(
    getitem: Callable[[Tracer, Any], Any],
    setitem: Callable[[Tracer, Any, Any], None],
    integer: Callable[[str, Any, Any], Any],
    astype: Callable[[Tracer, Any], Any],
) -> None:
    """Route what touches run-time integer or boolean data to a frontend: indexing
    with a traced index or mask, arithmetic with a traced int64 operand, and dtype
    conversions."""
    _Dispatch.getitem = staticmethod(getitem)
    _Dispatch.setitem = staticmethod(setitem)
    _Dispatch.integer = staticmethod(integer)
    _Dispatch.astype = staticmethod(astype)
