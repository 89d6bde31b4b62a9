"""Algebraic identities applied as equations are recorded (and so after each transform).

Each rule sees the input atoms of a would-be equation and returns an existing value
instead (a Var or a constant array), or None to record the equation. Constant folding
itself happens in ``bind``: an equation whose inputs are all constants is evaluated.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from difgen.ir import Atom, Lit, Var

Result = Var | np.ndarray | None


def _is_const(atom: Atom, value: float) -> bool:
    return isinstance(atom, Lit) and atom.dtype != "bool" and bool(np.all(atom.value == value))


def _out_shape(atoms: list[Atom]) -> tuple[int, ...]:
    return tuple(np.broadcast_shapes(*(a.shape for a in atoms)))


def _keep(atom: Atom, atoms: list[Atom]) -> Result:
    """``atom`` itself, if it already has the output's shape."""
    if isinstance(atom, Var) and atom.shape == _out_shape(atoms):
        return atom
    return None


def _zeros(atoms: list[Atom]) -> np.ndarray:
    return np.zeros(_out_shape(atoms))


def _add(atoms: list[Atom], params: dict[str, Any], producer: Any) -> Result:
    a, b = atoms
    if _is_const(b, 0.0):
        return _keep(a, atoms)
    if _is_const(a, 0.0):
        return _keep(b, atoms)
    return None


def _sub(atoms: list[Atom], params: dict[str, Any], producer: Any) -> Result:
    a, b = atoms
    return _keep(a, atoms) if _is_const(b, 0.0) else None


def _mul(atoms: list[Atom], params: dict[str, Any], producer: Any) -> Result:
    a, b = atoms
    if _is_const(a, 0.0) or _is_const(b, 0.0):
        return _zeros(atoms)
    if _is_const(b, 1.0):
        return _keep(a, atoms)
    if _is_const(a, 1.0):
        return _keep(b, atoms)
    return None


def _div(atoms: list[Atom], params: dict[str, Any], producer: Any) -> Result:
    a, b = atoms
    if _is_const(a, 0.0):
        return _zeros(atoms)
    return _keep(a, atoms) if _is_const(b, 1.0) else None


def _pow(atoms: list[Atom], params: dict[str, Any], producer: Any) -> Result:
    a, b = atoms
    if _is_const(b, 1.0):
        return _keep(a, atoms)
    if _is_const(b, 0.0):
        return np.ones(_out_shape(atoms))
    return None


def _neg(atoms: list[Atom], params: dict[str, Any], producer: Any) -> Result:
    eqn = producer.get(atoms[0])
    if eqn is not None and eqn.primitive.name == "neg":
        return eqn.inputs[0]
    return None


def _reshape(atoms: list[Atom], params: dict[str, Any], producer: Any) -> Result:
    (x,) = atoms
    if x.shape == tuple(params["shape"]):
        return x if isinstance(x, Var) else None
    eqn = producer.get(x)
    if eqn is not None and eqn.primitive.name == "reshape":  # reshape of reshape
        from difgen.frontend.tracer import bind

        inner = eqn.inputs[0]
        if inner.shape == tuple(params["shape"]):
            return inner if isinstance(inner, Var) else None
    return None


def _transpose(atoms: list[Atom], params: dict[str, Any], producer: Any) -> Result:
    (x,) = atoms
    axes = tuple(params["axes"])
    if axes == tuple(range(len(axes))):
        return x if isinstance(x, Var) else None
    eqn = producer.get(x)
    if eqn is not None and eqn.primitive.name == "transpose":  # double transpose
        inner_axes = eqn.params.as_dict()["axes"]
        if tuple(inner_axes[i] for i in axes) == tuple(range(len(axes))):
            return eqn.inputs[0] if isinstance(eqn.inputs[0], Var) else None
    return None


def _broadcast_to(atoms: list[Atom], params: dict[str, Any], producer: Any) -> Result:
    (x,) = atoms
    return x if isinstance(x, Var) and x.shape == tuple(params["shape"]) else None


def _getitem(atoms: list[Atom], params: dict[str, Any], producer: Any) -> Result:
    (x,) = atoms
    full = ("slice", None, None, None)
    if all(item == full for item in params["index"]) and isinstance(x, Var):
        return x
    return None


RULES: dict[str, Callable[[list[Atom], dict[str, Any], Any], Result]] = {
    "add": _add,
    "sub": _sub,
    "mul": _mul,
    "div": _div,
    "pow": _pow,
    "neg": _neg,
    "reshape": _reshape,
    "transpose": _transpose,
    "broadcast_to": _broadcast_to,
    "getitem": _getitem,
}


def simplify(prim: Any, atoms: list[Atom], params: dict[str, Any], builder: Any) -> Result:
    """An existing value equal to ``prim(*atoms, **params)``, if an identity gives one."""
    rule = RULES.get(prim.name)
    if rule is None:
        return None
    result = rule(atoms, params, builder.producer)
    if isinstance(result, Lit):
        return np.asarray(result.value)
    return result
