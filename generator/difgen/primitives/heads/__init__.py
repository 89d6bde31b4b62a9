"""The SymPy side of the primitives: the heads and rules their ``sympy`` facts name.

Each module here is the SymPy half of the family module of the same name in
:mod:`difgen.primitives`, whose declarations name what they need by
:class:`~difgen.core.primitive.Deferred` paths (``"difgen.primitives.heads.binary:
NpHypot"``). Declaring the primitives imports none of this, nor SymPy: a module is
imported the first time a build lowers a graph to SymPy (the sympy backend, or
the trace backend's straight-line scalar code), and never by a trace build that
emits NumPy or C loops.
"""
