"""Automatic differentiation as graph-to-graph transforms.

- :mod:`difgen.ad.interpret`: evaluate a Graph inside a trace (so every equation goes
  through ``bind``: constants fold, identities apply, equal equations are shared);
- :mod:`difgen.ad.jvp`: forward mode, one JVP rule per primitive;
- :mod:`difgen.ad.transpose`: reverse mode as JVP, partial evaluation, transposition;
- :mod:`difgen.ad.control`: ``cond``, a branch on a traced value, whose rules are
  transforms of its branch sub-graphs;
- :mod:`difgen.ad.loops`: ``while_loop`` and its adjoint ``sweep`` (forward sweep
  recording the states, backward sweep over them);
- :mod:`difgen.ad.batching`: a leading batch axis for seeds (vmap), so a jacobian is
  one batched pushforward or pullback rather than a loop over seeds.
"""

from __future__ import annotations

from difgen.ad import control, custom, loops  # noqa: F401  (cond, calls, loops)
from difgen.ad.batching import vmap, vmap_eval
from difgen.ad.interpret import build_graph, eval_graph
from difgen.ad.jvp import jvp, jvp_eval
from difgen.ad.transpose import vjp, vjp_eval

__all__ = [
    "build_graph",
    "eval_graph",
    "jvp",
    "jvp_eval",
    "vjp",
    "vjp_eval",
    "vmap",
    "vmap_eval",
]
