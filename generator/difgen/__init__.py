"""difgen: a build-time compiler for derivatives of NumPy functions.

``difgen build difgen.toml`` writes standalone Python modules whose operators
(pushforward, pullback, derivative, gradient, jacobian, hvp, hessian, ...) have
shapes, seeds and mode decided at build time.

From Python, :func:`difgen.build`, :func:`difgen.check` and :func:`difgen.verify`
do what the commands do and return typed results (:mod:`difgen.api`). They are
imported on first use, so ``import difgen`` itself stays cheap: it loads neither
NumPy nor SymPy nor the pipeline.

>>> import difgen
>>> difgen.check("difgen.toml").ok  # doctest: +SKIP
True
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

__all__ = ["__version__", "build", "check", "verify"]

if TYPE_CHECKING:
    from difgen.api import build, check, verify

_API = ("build", "check", "verify")


def __getattr__(name: str) -> Any:
    """``difgen.build`` and friends, imported from :mod:`difgen.api` when first used."""
    if name in _API:
        from difgen import api

        value = getattr(api, name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'difgen' has no attribute {name!r}")
