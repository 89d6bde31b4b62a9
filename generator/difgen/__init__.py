"""difgen: a build-time compiler for derivatives of NumPy functions.

``difgen build difgen.toml`` writes standalone Python modules whose operators
(pushforward, pullback, derivative, gradient, jacobian, hvp, hessian, ...) have
shapes, seeds and mode decided at build time.

From Python, :func:`difgen.build`, :func:`difgen.check` and :func:`difgen.verify`
do what the commands do and return typed results (:mod:`difgen.api`);
:func:`difgen.generate` traces a function at example arguments and returns the
generated module loaded in this process, writing nothing (:mod:`difgen.inprocess`);
:func:`difgen.custom_jvp` and :func:`difgen.custom_vjp` (or autograd's spelling,
:func:`difgen.defvjp`) declare a derivative rule for a function (:mod:`difgen.custom`).
``import difgen`` stays cheap: SymPy and the pipeline are imported by the first
build.

>>> import difgen
>>> difgen.check("difgen.toml").ok  # doctest: +SKIP
True
"""

from __future__ import annotations

from difgen.api import build, check, verify
from difgen.custom import custom_jvp, custom_vjp, defvjp
from difgen.inprocess import generate
from difgen.version import VERSION as __version__

__all__ = [
    "__version__",
    "build",
    "check",
    "custom_jvp",
    "custom_vjp",
    "defvjp",
    "generate",
    "verify",
]
