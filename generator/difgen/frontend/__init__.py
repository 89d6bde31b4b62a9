"""The frontend: trace unmodified NumPy code into the IR."""

from __future__ import annotations

from difgen.frontend.tracer import Tracer, bind, trace

__all__ = ["Tracer", "bind", "trace"]
