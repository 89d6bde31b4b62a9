"""What a module offers solvers besides its operators (docs/design.md, section 10).

- **Structure functions**, on every module with sparse results: for each sparse
  kind, ``<kind>_sparsity()`` (its pattern as a boolean ``csr_array``, SciPy's
  ``jac_sparsity=``) and ``<kind>_structure()`` (``(rows, cols)`` of its entries in
  the order of the result's ``.data``: IPOPT's structure callbacks, CasADi's
  ``get_triplet``), read from the pattern constants the printers recorded
  (:class:`~difgen.targets.parts.Pattern`).
- **The scipy adapter** (``adapters = ["scipy"]``): ``fun``, ``jac``, ``hess``,
  ``hessp`` with the signatures SciPy's ``minimize``/``least_squares`` call
  (``x`` then the contexts as ``*args``), and ``ode_jac(t, y, *args)`` for
  ``solve_ivp``, each where its operator is emitted.
- **The ipopt adapter** (``adapters = ["ipopt"]``): a cyipopt problem class over
  the module's Lagrangian (:func:`difgen.load.lagrangian`).

Each is source text that calls the operators by their module names, so a compiled
module's adapters call its compiled operators.
"""

from __future__ import annotations

import math
import textwrap

from difgen import naming
from difgen.config import ModuleSpec
from difgen.targets.parts import Function, Pattern
from difgen.targets.signatures import annotation, context_annotation


def solver_parts(
    spec: ModuleSpec,
    patterns: dict[str, Pattern],
    functions: list[Function],
    output_shape: tuple[int, ...],
) -> list[tuple[str, str]]:
    """(public name, source) of each structure function and adapter of the module."""
    public = sorted(kind for kind in patterns if not kind.startswith("_"))
    found = [item for kind in public for item in _structure(patterns[kind], spec)]
    by_name = {f.name: f for f in functions if f.block_of is None}
    found += _scipy(spec, by_name, output_shape)
    if "ipopt" in spec.adapters:
        found.append((naming.IPOPT_CLASS, _ipopt(spec, patterns)))
    return found


def _doc(text: str, indent: str = "    ") -> str:
    """A docstring of ``text`` wrapped at 88 columns, at ``indent``."""
    lines = textwrap.wrap(f'"""{text}"""', 88 - len(indent))
    return "\n".join(indent + line for line in lines)


def _structure(pattern: Pattern, spec: ModuleSpec) -> list[tuple[str, str]]:
    kind, (rows, cols) = pattern.kind, pattern.shape
    what = f"{kind}()"
    if kind == "hessian" and spec.triangle is not None:
        what = f"{kind}() (its {spec.triangle} triangle, diagonal included)"
    layout = f"{pattern.indices}.copy(), {pattern.indptr}.copy()"
    sparsity = (
        f"def {kind}{naming.SPARSITY_SUFFIX}() -> sp.csr_array:\n"
        + _doc(
            f"The sparsity pattern of {what}: a boolean CSR array of shape "
            f"({rows}, {cols}), True at each of its {pattern.nnz} entries (SciPy's "
            "jac_sparsity= of solve_ivp and least_squares)."
        )
        + "\n"
        f"    data = np.ones({pattern.nnz}, dtype=np.bool_)\n"
        f"    return sp.csr_array((data, {layout}), shape=({rows}, {cols}))"
    )
    structure = (
        f"def {kind}{naming.STRUCTURE_SUFFIX}() -> "
        "tuple[NDArray[np.int64], NDArray[np.int64]]:\n"
        + _doc(
            f"(rows, cols) of the {pattern.nnz} entries of {what}, in the order "
            "of its .data (row by row, columns ascending): IPOPT's structure "
            "callbacks, CasADi's Sparsity.get_triplet()."
        )
        + "\n"
        f"    counts = np.diff({pattern.indptr})\n"
        f"    rows = np.repeat(np.arange({rows}, dtype=np.int64), counts)\n"
        f"    return rows, {pattern.indices}.astype(np.int64)"
    )
    return [
        (kind + naming.SPARSITY_SUFFIX, sparsity),
        (kind + naming.STRUCTURE_SUFFIX, structure),
    ]


def _params(spec: ModuleSpec, skip: str | None = None) -> tuple[list[str], list[str]]:
    """(typed parameters, argument names) of the contexts, ``skip`` left out."""
    contexts = [c for c in spec.contexts if c.name != skip]
    typed = [f"{c.name}: {context_annotation(c.shape, c.dtype)}" for c in contexts]
    return typed, [c.name for c in spec.contexts]


def _scipy(
    spec: ModuleSpec,
    by_name: dict[str, Function],
    ys: tuple[int, ...],
) -> list[tuple[str, str]]:
    """(name, source) of the scipy adapter's functions this module can offer."""
    if "scipy" not in spec.adapters:
        return []
    xs = tuple(spec.input.shape)
    typed, args = _params(spec)
    # SciPy's solvers pass and take flat vectors: an input of another shape is
    # reshaped, and results are returned flat (dense matrices as 2-D)
    flat = len(xs) == 1
    x = f"{naming.INPUT}: {annotation(xs if flat else (1,))}"
    v = f"{naming.DIRECTION}: {annotation(xs if flat else (1,))}"

    def given(name: str) -> str:
        return name if flat else f"np.reshape({name}, INPUT_SHAPE)"

    n, m = math.prod(xs), math.prod(ys)
    dense_2d = {"jacobian": (m, n), "hessian": (n, n)}
    found: list[tuple[str, str]] = []

    def add(name: str, op: str, params: list[str], doc: str, seeds: str = "") -> None:
        if op not in by_name:
            return
        suffix = ""
        if op in dense_2d and not spec.sparse and (len(ys) != 1 or not flat):
            suffix = f".reshape{dense_2d[op]}"
        elif (op in ("gradient", "hvp") and not flat) or (op == "f" and len(ys) > 1):
            suffix = ".ravel()"
        returns = "NDArray[np.float64]" if suffix else by_name[op].returns
        call = f"{op}({', '.join([given(naming.INPUT), *seeds.split(), *args])})"
        call += suffix
        body = f"return {call}"
        if op == "hessian" and spec.triangle is not None:
            body = f"h = {call}\n    return h + h.T - sp.diags_array(h.diagonal())"
        head = f"def {name}({', '.join(params)}) -> {returns}:"
        found.append((name, f"{head}\n{_doc(doc)}\n    {body}"))

    note = "" if flat else f" x is flat (reshaped to {xs}), and so are the results."
    add(
        "fun",
        "f",
        [x, *typed],
        f"f(x, *args), as SciPy's minimize, least_squares and root call fun.{note}",
    )
    jac_op = "gradient" if "gradient" in by_name else "jacobian"
    add(
        "jac",
        jac_op,
        [x, *typed],
        f"{jac_op}(x, *args), as SciPy's minimize and "
        f"least_squares call jac.{note}",
    )
    if spec.triangle is None:
        hess_doc = "hessian(x, *args), as SciPy's minimize (and trust-constr's "
        hess_doc += "NonlinearConstraint, whose multipliers v are a context) call hess."
    else:
        hess_doc = f"The whole hessian from its {spec.triangle} triangle, as SciPy's "
        hess_doc += "minimize calls hess(x, *args)."
    add("hess", "hessian", [x, *typed], hess_doc + note)
    add(
        "hessp",
        "hvp",
        [x, v, *typed],
        f"hvp(x, p, *args): the hessian times p, as SciPy's minimize calls hessp.{note}",
        given(naming.DIRECTION),
    )
    if tuple(ys) == xs:  # a right-hand side y' = f(t, y)
        time = spec.time or naming.TIME
        typed_rest, _ = _params(spec, spec.time)
        said = (
            f"t is the context {spec.time!r}"
            if spec.time
            else 't is not used: the system is autonomous (time = "name" makes a '
            "scalar context the time)"
        )
        add(
            "ode_jac",
            "jacobian",
            [f"{time}: float", x, *typed_rest],
            f"jacobian(y, *args) as solve_ivp calls jac(t, y, *args); {said}.{note}",
        )
    return found


def _ipopt(spec: ModuleSpec, patterns: dict[str, Pattern]) -> str:
    """The cyipopt problem class of an ipopt module, over its private functions
    of x (:func:`difgen.pipeline.ipopt_parts`), whose ``patterns`` these are."""
    assert spec.constraints is not None
    jac, hess = patterns["_constraints_jacobian"], patterns["_lagrangian_hessian"]
    m = spec.constraints.size
    n = math.prod(spec.constraints.variables)
    typed, args = _params(spec)
    init = ", ".join(["self", *typed])
    stored = "".join(f"        self._c_{a} = {a}\n" for a in args)
    passed = "".join(f", self._c_{a}" for a in args)
    ctx_doc = f"({', '.join(args)})" if args else "()"
    return f'''class {naming.IPOPT_CLASS}:
    """cyipopt's problem object for min f(x) subject to cl <= g(x) <= cu, x of
    {n} variables, g of {m} constraints (f: {spec.function}, g:
    {spec.constraints.function}); the contexts {ctx_doc} are given once, here.

    Use: ``cyipopt.Problem(n={n}, m={m}, problem_obj={naming.IPOPT_CLASS}(),
    lb=..., ub=..., cl=..., cu=...)``. Each callback computes only what it
    returns, from functions of x: f, its gradient, g, g's sparse jacobian
    (colored on its own pattern) and the lower triangle of the Lagrangian's
    sparse hessian in x (the multipliers its last arguments), the sparse ones
    refilled in place. The module's operators over z = (x, obj_factor,
    lagrange) hold the same derivatives (its hessian's multipliers' rows are
    g's jacobian) and are verified as the module.
    """

    n = {n}
    m = {m}

    def __init__({init}) -> None:
{stored}        # the results' CSR arrays, made once and refilled in place by each call
        self._j = _csr({jac.indptr}, {jac.indices}, {jac.shape})
        self._h = _csr({hess.indptr}, {hess.indices}, {hess.shape})
        self._jac_rows, self._jac_cols = _triplets({jac.indptr}, {jac.indices})
        self._hess_rows, self._hess_cols = _triplets({hess.indptr}, {hess.indices})

    def objective(self, x: NDArray[np.float64]) -> float:
        """f(x)."""
        return _objective(x{passed})

    def gradient(self, x: NDArray[np.float64]) -> NDArray[np.float64]:
        """The objective's gradient."""
        return _objective_gradient(x{passed})

    def constraints(self, x: NDArray[np.float64]) -> NDArray[np.float64]:
        """g(x)."""
        return _constraints(x{passed})

    def jacobianstructure(self) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
        """(rows, cols) of the constraints' jacobian, in the order of jacobian()."""
        return self._jac_rows.copy(), self._jac_cols.copy()

    def jacobian(self, x: NDArray[np.float64]) -> NDArray[np.float64]:
        """The constraints' jacobian's entries (of jacobianstructure())."""
        data: NDArray[np.float64] = _constraints_jacobian(x{passed}, out=self._j).data
        return data.copy()

    def hessianstructure(self) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
        """(rows, cols) of the Lagrangian's hessian's lower triangle."""
        return self._hess_rows.copy(), self._hess_cols.copy()

    def hessian(
        self, x: NDArray[np.float64], lagrange: NDArray[np.float64], obj_factor: float
    ) -> NDArray[np.float64]:
        """The entries (of hessianstructure()) of the hessian of obj_factor * f(x)
        + lagrange @ g(x)."""
        data: NDArray[np.float64] = _lagrangian_hessian(
            x{passed}, float(obj_factor), lagrange, out=self._h
        ).data
        return data.copy()


def _csr(
    indptr: NDArray[np.integer], indices: NDArray[np.integer], shape: tuple[int, int]
) -> sp.csr_array:
    """A CSR array of this pattern, its data zeros (what out= refills)."""
    data = np.zeros(indices.size, dtype=np.float64)
    return sp.csr_array((data, indices, indptr), shape=shape)


def _triplets(
    indptr: NDArray[np.integer], indices: NDArray[np.integer]
) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """(rows, cols) of a CSR pattern's entries, in the order of its .data."""
    rows = np.repeat(np.arange(indptr.size - 1, dtype=np.int64), np.diff(indptr))
    return rows, indices.astype(np.int64)'''
