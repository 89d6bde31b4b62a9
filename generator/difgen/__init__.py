"""difgen: a build-time compiler for derivatives of NumPy functions.

``difgen build difgen.toml`` writes standalone Python modules whose operators
(pushforward, pullback, derivative, gradient, jacobian, hvp, hessian, ...) have
shapes, seeds and mode decided at build time.
"""

from __future__ import annotations

__version__ = "0.1.0"
