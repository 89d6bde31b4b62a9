"""Branches on traced values: the user's ``if`` becomes a ``cond`` in the graph.

A branch on a value difgen knows at build time is plain Python and traces as
always. Only when a traced value reaches ``bool()`` (the tracer raises
:class:`~difgen.core.conversions.TracedBranch`) does :func:`difgen.frontend.trace`
rewrite the function where that happened, and trace again:

- ``if``/``elif``/``else`` statements become two nested functions (one per branch)
  taking the variables either branch assigns, and a call of :func:`if_`;
- an ``if`` containing a ``return`` takes the statements after it into its
  branches (both then end in a ``return``), so an early return is one ``cond`` of
  the returned values;
- ``a if c else b`` becomes :func:`ifexp`, ``and``/``or`` :func:`and_`/:func:`or_`
  (Python's short-circuit values: ``a and b`` is ``b if a else a``), ``not`` :func:`not_`,
  and a chained comparison ``a < b < c`` the ``and`` of its pairs.

At run time each helper calls the branch that is taken when the predicate is known
(so the rewritten function computes exactly what the original does) and, when it is
traced, traces both branches as sub-graphs (:class:`~difgen.core.tracer.
BranchBuilder`) and binds one ``cond`` per value they give. The rewritten code keeps
the user's file and line numbers, so every message still names the user's line.

What is not rewritten keeps the ``bool()`` error, with the reason (a ``return``
inside a loop, branches that change a Python container, an attribute or a
global...: :mod:`~difgen.frontend.control.transformer` lists them).

Three modules: :mod:`~difgen.frontend.control.transformer` (the AST rewriter),
:mod:`~difgen.frontend.control.rewrite` (rewriting a function and swapping the
rewrite in for the second trace) and :mod:`~difgen.frontend.control.helpers` (what
the rewritten code calls at run time, and the sub-graph tracing it does).
"""

from __future__ import annotations

from difgen.frontend.control.helpers import (
    Undefined,
    and_,
    counting_unrolled,
    for_,
    if_,
    ifexp,
    implicit_loops,
    not_,
    or_,
    unrolling,
    value,
    while_,
)
from difgen.frontend.control.rewrite import (
    Rewrite,
    explain,
    function_of,
    is_rewritten,
    refusal,
    rewrite_function,
    rewritten,
    watching_loops,
)
from difgen.frontend.control.transformer import HELPERS

__all__ = [
    "HELPERS",
    "Rewrite",
    "Undefined",
    "and_",
    "counting_unrolled",
    "explain",
    "for_",
    "function_of",
    "if_",
    "ifexp",
    "implicit_loops",
    "is_rewritten",
    "not_",
    "or_",
    "refusal",
    "rewrite_function",
    "rewritten",
    "unrolling",
    "value",
    "watching_loops",
    "while_",
]
