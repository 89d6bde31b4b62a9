"""Helpers for batching (vmap) rules, and the rules elementwise and axis rows share
(their family helpers assign them; see :mod:`difgen.primitives.family`).

A batching rule evaluates a primitive when some inputs carry an extra leading axis
of size ``k``; see ``Primitive.batch`` in :mod:`difgen.core.primitive`. The
transform that applies the rules is :mod:`difgen.ad.batching`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from difgen.core.tracer import bind_name


def lift_batched(value: Any, rank: int) -> Any:
    """A batched value ``(k, *s)`` reshaped to ``(k, 1, ..., 1, *s)`` of rank 1+rank.

    Right-aligned NumPy broadcasting against unbatched operands of rank <= ``rank``
    then keeps the batch axis in front.
    """
    shape = tuple(np.shape(value))
    missing = rank + 1 - len(shape)
    if missing <= 0:
        return value
    return np.reshape(value, (shape[0],) + (1,) * missing + shape[1:])


def batched_to(value: Any, is_batched: bool, k: int) -> Any:
    """``value`` with a leading batch axis of size ``k`` (broadcast if it has none)."""
    if is_batched:
        return value
    return np.broadcast_to(value, (k, *np.shape(value)))


def elementwise_batch(name: str) -> Callable[..., Any]:
    """The batch rule of an elementwise primitive: broadcasting does the work once
    the batch axis is lifted in front of every operand."""

    def rule(
        args: Sequence[Any], batched: Sequence[bool], k: int, **params: Any
    ) -> Any:
        """Broadcasting with the batch axis lifted in front of every operand."""
        rank = len(
            np.broadcast_shapes(
                *(np.shape(a)[1:] if b else np.shape(a) for a, b in zip(args, batched))
            )
        )
        lifted = [lift_batched(a, rank) if b else a for a, b in zip(args, batched)]
        return bind_name(name, *lifted, **params)

    return rule


def axes_batch(name: str) -> Callable[..., Any]:
    """The batch rule of a single-input primitive with static ``axes``/``axis``
    params (reductions, cumulative ones): the same operation, one axis further."""

    def rule(
        args: Sequence[Any], batched: Sequence[bool], k: int, **params: Any
    ) -> Any:
        """The batch axis is axis 0: every static axis moves up by one."""
        shifted = dict(params)
        if "axes" in params:
            shifted["axes"] = tuple(int(a) + 1 for a in params["axes"])
        if "axis" in params:
            shifted["axis"] = int(params["axis"]) + 1
        return bind_name(name, *args, **shifted)

    return rule
