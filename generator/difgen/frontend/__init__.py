"""The frontend: NumPy's API on tracers, and tracing of unmodified user code.

Importing it routes NumPy's dispatch on tracers (``__array_ufunc__``,
``__array_function__``) to :mod:`difgen.frontend.numpy_api`; it sits on top of the
graph-building core (:mod:`difgen.core`) and the primitive tables.
"""

from __future__ import annotations

from difgen.frontend import array_methods, custom, linalg_api, numpy_api, runtime
from difgen.frontend.tracing import trace

__all__ = ["array_methods", "custom", "linalg_api", "numpy_api", "runtime", "trace"]
