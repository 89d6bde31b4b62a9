"""The public operators of a structured module: the user's arguments and results
around the flat operators (docs/design.md, "Structured arguments").

A module whose function takes several differentiated arguments or trees of arrays,
returns a tuple or a tree, or returns ``(value, aux)`` keeps its flat operators as
they are printed (renamed privately: ``gradient`` -> ``_gradient_flat``) and gets a
public operator of each name from ``templates/structured.py.j2``: it checks the
arguments' structure, lays the inputs end to end (one ``np.concatenate``; none for
one array), calls the flat operator and returns its results cut back into the
structure as views (:data:`RESULT_TREES`). This module computes what the template
writes: the trees as literals, the signatures, the bodies' calls, the module
docstring's layout.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from difgen import naming, precision, structure
from difgen.config import ModuleSpec
from difgen.interface import Interface
from difgen.operators import OPERATORS, Operator
from difgen.structure import Leaf, Node, Tree
from difgen.targets.parts import Function
from difgen.targets.signatures import context_annotation

AUX = "_aux_flat"
"""The private function computing the aux value from the flat input and contexts."""

TREE_NAMES = {"in": "_TREE_IN", "out": "_TREE_OUT", "aux": "_TREE_AUX"}
"""The module constants holding the trees the public operators walk."""

POINTS_IN = "_POINTS_IN"
"""With ``points = true``: the module constant saying, per leaf of the inputs in
flatten order, whether it carries the points axis."""

RESULT_TREES: dict[str, tuple[str, ...]] = {
    "value": ("out",),
    "jvp": ("out",),
    "derivative": ("out",),
    "second_derivative": ("out",),
    "vjp": ("in",),
    "gradient": ("in",),
    "hvp": ("in",),
    "jacobian": ("out", "in"),
    "hessian": ("in", "in"),
}
"""The trees each result kind is cut into, axis by axis: a jacobian is nested by
output then input (``jax.jacobian(f, argnums=(0, 1))``), a hessian by input and
input."""

SEED_TREES = {"dx": "in", "v": "in", "dy": "out"}
"""The structure of each seed: tangents and directions the inputs', cotangents the
output's."""


@dataclass(frozen=True)
class StructuredParts:
    """What a structured module adds to its printed parts: the interface traced,
    and the aux value's function (``has_aux``)."""

    interface: Interface
    aux: Function | None = None
    aux_points: tuple[Function, ...] = ()
    """With ``points = true``: the aux value's points variant and its block."""


@dataclass(frozen=True)
class Wrapper:
    """One public operator: signature, return annotation, docstring and body."""

    name: str
    signature: str
    returns: str
    doc: str
    body: tuple[str, ...]


def private(name: str) -> str:
    """The flat operator's name in a structured module.

    >>> private("gradient")
    '_gradient_flat'
    """
    return f"_{name}_flat"


def public_trees(
    spec: ModuleSpec, parts: StructuredParts, output_shape: tuple[int, ...]
) -> tuple[tuple[str, ...], tuple[Tree, ...], Tree]:
    """(argument names, their trees, output tree) of the public operators: the
    user's, or with ``flat = true`` the flat vectors' (``x`` and ``y``)."""
    face = parts.interface
    if spec.flat:
        return ("x",), (Leaf(tuple(spec.input.shape)),), Leaf(tuple(output_shape))
    return face.names, face.trees, face.output


def annotation(tree: Tree) -> str:
    """The annotation of a value of this tree."""
    if isinstance(tree, Leaf):
        return _real_annotation(tree.shape)
    return {
        "dict": "dict[str, Any]",
        "tuple": "tuple[Any, ...]",
        "list": "list[Any]",
    }.get(tree.kind, "Any")


def _result_annotation(trees: Sequence[Tree]) -> str:
    for tree in trees:
        if isinstance(tree, Node):
            return annotation(tree)
    shape = sum((t.shape for t in trees if isinstance(t, Leaf)), ())
    return _real_annotation(shape)


def _real_annotation(shape: tuple[int, ...]) -> str:
    """A float or an array of the module's float type (np.float32 values in a
    float32 module)."""
    if precision.is_float32():
        return "np.float32" if shape == () else precision.array_type()
    return "float" if shape == () else "NDArray[np.float64]"


def wrappers(
    spec: ModuleSpec,
    parts: StructuredParts,
    names: Sequence[str],
    output_shape: tuple[int, ...],
) -> list[Wrapper]:
    """The public operator of each flat operator in ``names``."""
    args, trees, out_tree = public_trees(spec, parts, output_shape)
    in_tree = structure.tuple_of(trees)
    by_role: dict[str, Tree] = {"in": in_tree, "out": out_tree}
    sizes = {"in": structure.size(in_tree), "out": structure.size(out_tree)}
    aux = parts.interface.aux
    contexts = [c.name for c in spec.contexts]
    result: list[Wrapper] = []
    for name in names:
        if name.endswith(naming.POINTS_SUFFIX) and name not in OPERATORS:
            result.append(_points_wrapper(spec, parts, name, args, trees, by_role))
            continue
        op = OPERATORS[name]
        params = [f"{a}: {annotation(t)}" for a, t in zip(args, trees)]
        params += [f"{s}: {annotation(by_role[SEED_TREES[s]])}" for s in op.seeds]
        params += [
            f"{c.name}: {context_annotation(c.shape, c.dtype)}" for c in spec.contexts
        ]
        x = naming.flat(naming.INPUT)
        values = ", ".join(args)
        body = [
            f"{x} = "
            + _scalar(
                in_tree,
                f'_ravel("{name}", {tuple(args)!r}, {TREE_NAMES["in"]}, ({values},))',
            )
        ]
        for seed in op.seeds:
            role = SEED_TREES[seed]
            if seed in BATCHED_SEEDS and spec.batch > 1:
                body += _batched_seed(name, seed, TREE_NAMES[role], spec.batch)
                continue
            ravel = f'_ravel("{name}", ("{seed}",), {TREE_NAMES[role]}, ({seed},))'
            body.append(f"{naming.flat(seed)} = {_scalar(by_role[role], ravel)}")
        call = ", ".join([x, *map(naming.flat, op.seeds), *contexts])
        body.append(f"result = {private(name)}({call})")
        pieces, annotations = [], []
        for i, kind in enumerate(op.results):
            roles = RESULT_TREES[kind]
            shape = tuple(sizes[r] for r in roles)
            ref = "result" if len(op.results) == 1 else f"result[{i}]"
            tree_refs = ", ".join(TREE_NAMES[r] for r in roles)
            piece = f"_split(np.reshape({ref}, {shape!r}), ({tree_refs},))"
            if kind in BATCHED_RESULTS and spec.batch > 1:  # one per stacked seed
                stacked = ", ".join(str(n) for n in (spec.batch, *shape))
                piece = f"_split_points(np.reshape({ref}, ({stacked})), ({tree_refs},))"
            ann = _result_annotation([by_role[r] for r in roles])
            if kind == "value" and aux is not None:
                piece, ann = f"({piece}, aux)", f"tuple[{ann}, {annotation(aux)}]"
            pieces.append(piece)
            annotations.append(ann)
        if aux is not None:
            body.append(
                f"aux = _split(np.reshape({AUX}({', '.join([x, *contexts])}), "
                f"({structure.size(aux)},)), ({TREE_NAMES['aux']},))"
            )
            if "value" not in op.results:
                pieces.append("aux")
                annotations.append(annotation(aux))
        if len(pieces) == 1:
            returns = annotations[0]
            body += [f"value: {returns} = {pieces[0]}", "return value"]
        else:
            returns = f"tuple[{', '.join(annotations)}]"
            body.append(f"return ({', '.join(pieces)})")
        result.append(
            Wrapper(
                name,
                ", ".join(params),
                returns,
                _doc(op, spec, parts, args),
                tuple(body),
            )
        )
    return result


BATCHED_SEEDS = frozenset(["dx", "dy"])
"""The seeds that ``batch = B`` stacks: B tangents, or B cotangents."""

BATCHED_RESULTS = frozenset(["jvp", "vjp"])
"""The results that ``batch = B`` stacks, one per seed."""


def _batched_seed(name: str, seed: str, tree: str, batch: int) -> list[str]:
    """The lines laying ``batch`` stacked seeds end to end, each leaf of shape
    ``(batch, *leaf shape)`` (``jax.vmap`` over the tangents), and refusing
    another number of them, naming the operator, the seed and the option."""
    flat = naming.flat(seed)
    said = f"{name}: {seed}"
    return [
        f'count, {flat} = _ravel_points("{name}", ("{seed}",), {tree}, ({seed},), None, None)',
        f"if count is None or count[0] != {batch}:",
        (
            f'    raise ValueError(f"{said}: expected {batch} stacked seeds (batch = '
            f"{batch}), each leaf of shape ({batch}, *its shape), got "
            f'{{0 if count is None else count[0]}}")'
        ),
    ]


def _points_wrapper(
    spec: ModuleSpec,
    parts: StructuredParts,
    name: str,
    args: Sequence[str],
    trees: Sequence[Tree],
    by_role: dict[str, Tree],
) -> Wrapper:
    """The public points variant ``<op>_points``: every leaf of the inputs that
    carries the points axis (all but the ``per_point = false`` ones) and every
    seed leaf with a leading axis of points, each result leaf too
    (``jax.vmap(op, in_axes=...)``, whose unbatched leaves come out batched)."""
    op = OPERATORS[name[: -len(naming.POINTS_SUFFIX)]]
    params = [f"{a}: {annotation(t)}" for a, t in zip(args, trees)]
    params += [f"{s}: {annotation(by_role[SEED_TREES[s]])}" for s in op.seeds]
    params += [
        f"{c.name}: "
        + context_annotation((1, *c.shape) if c.per_point else c.shape, c.dtype)
        for c in spec.contexts
    ]
    x = naming.flat(naming.INPUT)
    carries = "None" if spec.flat else POINTS_IN
    values = ", ".join(args)
    body = [
        (
            f'count, {x} = _ravel_points("{name}", {tuple(args)!r}, '
            f'{TREE_NAMES["in"]}, ({values},), {carries}, None)'
        )
    ]
    for seed in op.seeds:
        role = SEED_TREES[seed]
        body.append(
            f'count, {naming.flat(seed)} = _ravel_points("{name}", ("{seed}",), '
            f"{TREE_NAMES[role]}, ({seed},), None, count)"
        )
    contexts = [c.name for c in spec.contexts]
    body += [
        f'_count_points("{name}: {c.name}", {c.name}, count)'
        for c in spec.contexts
        if c.per_point
    ]
    call = ", ".join([x, *map(naming.flat, op.seeds), *contexts])
    body.append(f"result = {private(name)}({call})")
    sizes = {r: structure.size(t) for r, t in by_role.items()}
    aux = parts.interface.aux
    pieces, annotations = [], []
    for i, kind in enumerate(op.results):
        roles = RESULT_TREES[kind]
        ref = "result" if len(op.results) == 1 else f"result[{i}]"
        shape = ", ".join(str(sizes[r]) for r in roles)
        tree_refs = ", ".join(TREE_NAMES[r] for r in roles)
        piece = (
            f"_split_points(np.reshape({ref}, ({ref}.shape[0], {shape})), "
            f"({tree_refs},))"
        )
        found = [by_role[r] for r in roles]
        ann = next(
            (annotation(t) for t in found if isinstance(t, Node)),
            precision.array_type(),
        )
        if kind == "value" and aux is not None:
            piece, ann = f"({piece}, aux)", f"tuple[{ann}, {_points_annotation(aux)}]"
        pieces.append(piece)
        annotations.append(ann)
    if aux is not None:
        # each point's aux value, stacked on the points axis (never differentiated)
        body += [
            f"aux_flat = {naming.points(AUX)}({', '.join([x, *contexts])})",
            (
                "aux = _split_points(np.reshape(aux_flat, (aux_flat.shape[0], "
                f"{structure.size(aux)})), ({TREE_NAMES['aux']},))"
            ),
        ]
        if "value" not in op.results:
            pieces.append("aux")
            annotations.append(_points_annotation(aux))
    if len(pieces) == 1:
        returns = annotations[0]
        body += [f"value: {returns} = {pieces[0]}", "return value"]
    else:
        returns = f"tuple[{', '.join(annotations)}]"
        body.append(f"return ({', '.join(pieces)})")
    doc = (
        f"{op.doc}, over {', '.join(args)}, at k points. Returns "
        f"{', '.join(op.results)}, each leaf with a leading axis of points "
        "(structured as the module docstring says). Per point: every leaf of "
        f"{', '.join(args)} but the per_point = false ones, the seeds, the "
        "per-point contexts."
        + (
            " With each point's aux value, stacked on the points axis: each value "
            "as (value, aux), else aux last."
            if aux is not None
            else ""
        )
    )
    return Wrapper(name, ", ".join(params), returns, doc, tuple(body))


def _points_annotation(tree: Tree) -> str:
    """The annotation of a points result of this tree: each leaf an array."""
    return precision.array_type() if isinstance(tree, Leaf) else annotation(tree)


def points_constant(spec: ModuleSpec) -> list[tuple[str, str]]:
    """The ``_POINTS_IN`` constant of a structured points module (none else)."""
    if not spec.points or spec.flat:
        return []
    flags = tuple(c for i in spec.inputs for c in i.carries_points())
    if not spec.inputs:
        flags = (spec.input.per_point,)
    return [(POINTS_IN, repr(flags))]


def _scalar(tree: Tree, expression: str) -> str:
    """A flat argument as the flat operators take it: a float for one scalar
    (an np.float32 in a float32 module)."""
    if not (isinstance(tree, Leaf) and tree.shape == ()):
        return expression
    return (
        f"np.float32({expression})"
        if precision.is_float32()
        else f"float({expression})"
    )


def _doc(
    op: Operator, spec: ModuleSpec, parts: StructuredParts, args: Sequence[str]
) -> str:
    kinds = ", ".join(op.results)
    said = f"{op.doc}, over {', '.join(args)}. Returns {kinds}"
    if parts.interface.aux is not None:
        said += (
            " with the aux value: each value as (value, aux), else aux last"
            if "value" in op.results
            else ", and the aux value"
        )
    return said + " (structured as the module docstring says)."


def tree_constants(
    spec: ModuleSpec, parts: StructuredParts, output_shape: tuple[int, ...]
) -> list[tuple[str, str]]:
    """The module constants of the trees the public operators walk."""
    _, trees, out_tree = public_trees(spec, parts, output_shape)
    items = [
        (TREE_NAMES["in"], structure.literal(structure.tuple_of(trees))),
        (TREE_NAMES["out"], structure.literal(out_tree)),
    ]
    if parts.interface.aux is not None:
        items.append((TREE_NAMES["aux"], structure.literal(parts.interface.aux)))
    return items + points_constant(spec)


def classes(
    spec: ModuleSpec, parts: StructuredParts, output_shape: tuple[int, ...]
) -> list[tuple[str, str, tuple[str, ...]]]:
    """(kind, class name, fields) of each NamedTuple and dataclass the public
    operators build: the module defines its own (it imports nothing of the
    user's project), and takes any object with those fields."""
    _, trees, out_tree = public_trees(spec, parts, output_shape)
    nodes = structure.classes(
        Node(
            "tuple",
            tuple(range(len(trees) + 2)),
            (*trees, out_tree, parts.interface.aux or Leaf(())),
        )
    )
    return [(n.kind, n.type_name, tuple(map(str, n.keys))) for n in nodes]


def describe_tree(name: str, tree: Tree) -> str:
    """A tree in words, for the module docstring: ``params (dict: W (3, 2), b (2,))``."""
    if isinstance(tree, Leaf):
        return f"{name} {_shape_words(tree.shape)}"
    return f"{name} ({_node_words(tree)})"


def _shape_words(shape: tuple[int, ...]) -> str:
    return "scalar" if shape == () else str(shape)


def _node_words(tree: Node) -> str:
    kind = tree.type_name or tree.kind
    items = []
    for key, child in zip(tree.keys, tree.children):
        label = str(key) if tree.kind != "tuple" and tree.kind != "list" else f"[{key}]"
        if isinstance(child, Leaf):
            items.append(f"{label} {_shape_words(child.shape)}")
        else:
            items.append(f"{label} ({_node_words(child)})")
    return f"{kind}: {', '.join(items)}"


def layout_lines(name: str, vector: str, tree: Tree) -> list[str]:
    """Which slice of the flat vector is which leaf, one line each."""
    lines = []
    for path, leaf, start, stop in structure.layout(tree):
        lines.append(
            f"{vector}[{start}:{stop}]: {structure.path_text(name, path)} "
            f"{_shape_words(leaf.shape)}"
        )
    return lines


def docstring_parts(
    spec: ModuleSpec, parts: StructuredParts, output_shape: tuple[int, ...]
) -> tuple[str, str, list[str]]:
    """(inputs in words, output in words, layout lines) for the module docstring."""
    face = parts.interface
    inputs = ", ".join(describe_tree(n, t) for n, t in zip(face.names, face.trees))
    output = describe_tree("y", face.output)
    if face.aux is not None:
        output += f"; aux (not differentiated): {describe_tree('aux', face.aux)}"
    layout: list[str] = []
    for path, leaf, start, stop in structure.layout(face.input):
        name, rest = (
            (face.names[0], path)
            if len(face.names) == 1
            else (
                face.names[int(path[0])],
                path[1:],
            )
        )
        layout.append(
            f"x[{start}:{stop}]: {structure.path_text(name, rest)} "
            f"{_shape_words(leaf.shape)}"
        )
    layout += layout_lines("y", "y", face.output)
    return inputs, output, layout
