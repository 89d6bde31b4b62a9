"""``difgen.generate``: a module generated and loaded in this process, for notebooks
and tests.

:func:`generate` traces the user's function at example arguments instead of shapes
written in a config file, and goes through what ``difgen build`` goes through: the
options become the table of one ``[[module]]`` (:func:`_module_table`), validated by
the config's own reader (:class:`difgen.config._Reader`), so every keyword means
and checks exactly what the TOML key of its name does; then the pipeline generates
the module's text, which is loaded from that text. Nothing is written unless
``output_dir`` is given; an ``emit = "c"`` module is compiled in difgen's cache
(:func:`cache_directory`), outside the user's tree.

A mistake is reported as the config's would be, located at the argument or the
keyword at fault instead of a file line::

    difgen.generate(..., sparse=...): 'sparse' must be true or false; got 1 (integer)

The reader and the pipeline locate errors by ``(config path, line)``; here the
path is :data:`PLACEHOLDER` and each "line" numbers one argument or keyword
(:class:`_Places`), and :func:`_located` turns them back into their names.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import linecache
import os
import re
import threading
import types
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from difgen import api, budget, naming, structure
from difgen.budget import reporting, time_limit
from difgen.config import _MODULE_KEYS, Config, ModuleSpec, _Reader
from difgen.errors import ConfigError, DifgenError, UsageError
from difgen.hashing import body_hash
from difgen.load import _untraceable
from difgen.toml_lines import Key, Locator
from difgen.write import WriteTransaction

GENERATE = "difgen.generate"
PLACEHOLDER = "<difgen.generate>"
"""The config path of a module made by :func:`generate`: errors carrying it are
located at an argument or keyword by :func:`_located`."""

DERIVED_KEYS = ("function", "input", "inputs", "contexts")
"""The ``[[module]]`` keys that the function and its example arguments give."""
EXPLICIT_KEYS = ("operators", "backend", "emit")
"""The ``[[module]]`` keys that are named parameters of :func:`generate`."""
CONFIG_ONLY_KEYS = ("constraints",)
"""``[[module]]`` keys naming a second function by reference: an ipopt module's
constraints are built from a config file (``difgen build``) only."""
MODULE_OPTIONS = tuple(
    key
    for key in _MODULE_KEYS
    if key not in DERIVED_KEYS + EXPLICIT_KEYS + CONFIG_ONLY_KEYS
)
"""The other ``[[module]]`` keys, which :func:`generate` takes as keywords."""

CACHE_ENV = "DIFGEN_CACHE_DIR"
"""Where :func:`cache_directory` keeps compiled modules, when set."""


def generate(
    f: Callable[..., Any],
    *example_args: Any,
    operators: Sequence[str],
    wrt: int | tuple[int, ...] = 0,
    backend: str = "trace",
    emit: str = "auto",
    output_dir: str | os.PathLike[str] | None = None,
    **module_options: Any,
) -> types.ModuleType:
    """Generate the derivative module of ``f`` at ``example_args`` and load it.

    ``f`` is traced at the example arguments, whose shapes and dtypes (float64,
    int64 or bool arrays; Python floats, ints and bools as 0-d arrays) are the
    module's: argument ``wrt`` (an index) is the differentiated input ``x``, every
    other one a context named after its parameter of ``f``. The operators take
    ``x`` first, then the contexts in ``f``'s order, as for a ``[[module]]`` of
    ``difgen.toml`` whose ``input`` and ``contexts`` say the same. ``wrt`` a tuple
    of indices (JAX's ``argnums``), or a differentiated argument that is a tree
    (dict, tuple, list, NamedTuple, dataclass of arrays and numbers), make the
    module of the config's ``inputs``: the operators take those arguments first,
    in ``wrt``'s order, and return their structure (a float32 module when every
    leaf with a dtype is float32, as for a float32 ``x``). ``operators``,
    ``backend``, ``emit`` and every keyword of ``module_options`` (``name``,
    ``mode``, ``batch``, ``sparse``, ``points``, ``timeout``) mean, and are checked,
    exactly as the key of that name in ``difgen.toml`` (one of ``module_options``
    given as None is left out: the key's default); ``backend`` defaults to
    ``"trace"`` here.

    Returns the module, loaded from its text and not put in ``sys.modules``; its
    source is ``module.__source__``. With ``emit = "c"`` the extension is compiled
    (in :func:`cache_directory`, or in ``output_dir``), loaded by the module, and
    its C source is ``module.__c_source__``. Nothing is written unless
    ``output_dir`` is given: then the module is written there as ``NAME.py`` (and
    ``NAME__c.c`` with its extension), as ``difgen build`` with that
    ``output_dir`` writes it (all files or none, never over a file difgen did not
    write), and the module returned is loaded from that file.

    Raises :class:`~difgen.errors.DifgenError` (the config's errors, located at
    the argument or keyword at fault; the tracer's, naming the user's line), and
    :class:`~difgen.targets.c.compiling.CompileError` if the C compiler fails.

    >>> import numpy as np
    >>> import difgen
    >>> def energy(x, a):
    ...     return np.sum(a * np.sin(x))
    >>> module = difgen.generate(energy, np.zeros(3), np.ones(3), operators=["gradient"])
    >>> module.gradient(np.zeros(3), np.ones(3))
    array([1., 1., 1.])
    >>> first_line = module.__source__.splitlines()[0]
    >>> print(first_line[3:22])
    Generated by difgen
    """
    options = {
        "operators": list(operators) if type(operators) is tuple else operators,
        "backend": backend,
        "emit": emit,
        **module_options,
    }
    module = _module_table(f, example_args, wrt, options)
    places = _Places(module.places)
    with _located(places):
        spec = _read(module.table, places)
        pipeline = api.load_pipeline()
        limit: float | None = (
            spec.timeout if spec.timeout is not None else budget.DEFAULT_TIMEOUT
        )
        if threading.current_thread() is not threading.main_thread():
            limit = None  # the time limit's timer signal works in the main thread only
        with reporting(spec.name, None), time_limit(limit, spec.name):
            files: list[tuple[str, str]] = pipeline.generate_files(
                spec, None, module.function
            )
    return _load_files(spec, files, output_dir)


@dataclass(frozen=True)
class ModuleTable:
    """What :func:`generate`'s arguments make: one ``[[module]]`` table as the
    config reader takes it, where each of its keys came from, and ``f`` as the
    pipeline calls it (the differentiated argument first)."""

    table: dict[str, Any]
    places: dict[Key, str]
    """For each key of ``table`` (a path inside it: ``("input",)``, ``("contexts",
    1)``; ``()`` for the call itself), the argument or keyword that gave it."""
    function: Callable[..., Any]


def _module_table(
    f: Callable[..., Any], args: Sequence[Any], wrt: Any, options: dict[str, Any]
) -> ModuleTable:
    """The ``[[module]]`` table of ``generate(f, *args, wrt=wrt, **options)``.

    The one place that maps the call to the config's schema: several
    differentiated arguments (``wrt`` a tuple) and pytree arguments are refused
    here until the schema has keys for them.
    """
    if not callable(f):
        raise UsageError(f"{GENERATE}: expected a function first; got {f!r:.60}")
    problem = _untraceable(f)
    if problem is not None:
        raise UsageError(
            f"{GENERATE}: the function is {problem}; difgen traces Python functions"
        )
    title = re.sub(r"\W", "_", getattr(f, "__name__", type(f).__name__))
    call = f"{GENERATE}({title}, ...)"
    indices = _wrt_indices(wrt, len(args), title)
    names = _parameter_names(f, args, call)
    params = _module_parameters(names)
    trees = {
        i: _tree(args[i], _argument(call, i, names[i]))
        for i in indices
        if isinstance(wrt, tuple) or structure.is_container(args[i])
    }
    examples = {
        i: _example(value, _argument(call, i, n))
        for i, (value, n) in enumerate(zip(args, names))
        if i not in trees
    }
    for key in options:
        if key in DERIVED_KEYS:
            raise UsageError(
                f"{GENERATE}(..., {key}=...): '{key}' is given by the function and "
                "its example arguments, not by a keyword"
            )
    places: dict[Key, str] = {(): call, ("function",): call, ("name",): call}
    places.update({(key,): f"{GENERATE}(..., {key}=...)" for key in options})
    table: dict[str, Any] = {"name": _default_name(f), "function": _reference(f)}
    table.update(
        {
            key: value
            for key, value in options.items()
            if value is not None or key not in MODULE_OPTIONS  # None: the default
        }
    )
    if trees:  # several inputs or trees: the config's `inputs`
        dtype = _trees_float(trees, args)
        table["inputs"] = []
        for index in indices:
            places[("inputs", len(table["inputs"]))] = _argument(
                call, index, names[index]
            )
            table["inputs"].append(
                {"name": params[index], **_input_entry(trees[index], call, dtype)}
            )
    else:
        shape, dtype = examples[indices[0]]
        table["input"] = {"shape": shape, "dtype": dtype}
        places[("input",)] = _argument(call, indices[0], names[indices[0]])
    if dtype == "float32":  # a Python float is weak, as NumPy 2 and JAX take it
        examples.update(
            {
                i: (shape_i, "float32")
                for i, (shape_i, dtype_i) in examples.items()
                if type(args[i]) is float and i not in indices
            }
        )
    contexts: list[dict[str, Any]] = []
    for index, (shape, dtype) in examples.items():
        if index not in indices:
            places[("contexts", len(contexts))] = _argument(call, index, names[index])
            contexts.append({"name": params[index], "shape": shape, "dtype": dtype})
    if contexts:
        table["contexts"] = contexts
    return ModuleTable(table, places, _differentiated_first(f, indices))


def _module_parameters(names: Sequence[str]) -> list[str]:
    """The generated operators' parameter names for ``f``'s: each its own, or with
    ``_`` (then ``_arg``, ``_arg2``, ...) after it where the generated code uses
    the name itself (``x``, ``v``, ``out``) or Python does (``input``): the user
    chose the function's names, not the module's, and the operators take their
    arguments by position."""
    chosen: list[str] = []
    for name in names:
        candidates = [name, f"{name}_", *(f"{name}_arg{k or ''}" for k in range(9))]
        for candidate in candidates:
            taken = candidate in chosen or candidate in names[len(chosen) + 1 :]
            if not taken and naming.context_name_problem(candidate, names) is None:
                break
        chosen.append(candidate)  # the last one tried: the reader then says why
    return chosen


def _argument(call: str, index: int, name: str) -> str:
    return f"{call}, example argument {index} ({name!r})"


def _parameter_names(
    f: Callable[..., Any], args: Sequence[Any], call: str
) -> list[str]:
    """The parameter of ``f`` each example argument binds to: contexts are named
    after them."""
    try:
        signature = inspect.signature(f)
    except (TypeError, ValueError):
        raise UsageError(
            f"{call}: the function has no signature to read, and its contexts are "
            "named after its parameters"
        ) from None
    try:
        bound = signature.bind(*args)
    except TypeError as exc:
        raise UsageError(
            f"{call}: the function takes {signature}, which {len(args)} example "
            f"argument(s) do not fit ({exc})"
        ) from None
    names = []
    for name in bound.arguments:
        if signature.parameters[name].kind is inspect.Parameter.VAR_POSITIONAL:
            raise UsageError(
                f"{call}: example arguments given to *{name} have no parameter name "
                "to name their contexts; give the function one parameter per argument"
            )
        names.append(name)
    return names


def _example(value: Any, where: str) -> tuple[list[int], str]:
    """The shape and dtype name of an example argument."""
    if structure.is_container(value):
        raise UsageError(
            f"{where}: a {type(value).__name__}; a context is one array: "
            "differentiate this argument (list its index in wrt=) or pass its "
            "arrays as arguments of their own"
        )
    try:
        array = np.asarray(value)
    except (TypeError, ValueError) as exc:
        raise UsageError(
            f"{where}: NumPy cannot convert it to an array ({exc})"
        ) from None
    if array.dtype.kind not in "biufc":
        raise UsageError(
            f"{where}: a {type(value).__name__} (dtype {array.dtype}); difgen takes "
            "NumPy arrays or Python numbers"
        )
    return list(array.shape), array.dtype.name


def _reference(f: Callable[..., Any]) -> str:
    """``module:qualified.name`` of ``f`` as the generated header names it, with
    what is not an identifier (``<locals>``, ``<lambda>``) spelled as one."""
    module = getattr(f, "__module__", None) or "__main__"
    qualname = getattr(f, "__qualname__", None) or type(f).__qualname__
    parts = [re.sub(r"\W", "_", part).strip("_") or "f" for part in qualname.split(".")]
    dotted = ".".join(re.sub(r"\W", "_", p) or "m" for p in str(module).split("."))
    return f"{dotted}:{'.'.join(parts)}"


def _default_name(f: Callable[..., Any]) -> str:
    """The module's name when ``name=`` is not given: the function's, or with
    ``_derivatives`` after it when that cannot name a module (``<lambda>``,
    ``random``). A ``name=`` given is checked as the TOML key is."""
    name = re.sub(r"\W", "_", getattr(f, "__name__", "")).strip("_")
    if name and naming.module_name_problem(name) is None:
        return name
    return f"{name or 'f'}_derivatives"


def _differentiated_first(
    f: Callable[..., Any], indices: tuple[int, ...]
) -> Callable[..., Any]:
    """``f`` as the pipeline calls it, with the differentiated arguments first (in
    ``wrt``'s order), then the contexts: ``f`` itself when they already are. The
    wrapper's ``__wrapped__`` makes signatures and messages name ``f``."""
    if indices == tuple(range(len(indices))):
        return f

    def differentiated_first(*arguments: Any) -> Any:
        given = dict(zip(indices, arguments))
        contexts = iter(arguments[len(indices) :])
        total = len(arguments)
        return f(*(given[i] if i in given else next(contexts) for i in range(total)))

    return functools.update_wrapper(differentiated_first, f)


def _wrt_indices(wrt: Any, count: int, title: str) -> tuple[int, ...]:
    """``wrt`` as the indices of the differentiated arguments: one index, or a
    tuple of distinct ones (JAX's ``argnums``)."""
    items = wrt if isinstance(wrt, tuple) else (wrt,)
    bad = not items or any(type(i) is not int or not 0 <= i < count for i in items)
    if bad or len(set(items)) != len(items):
        raise UsageError(
            f"{GENERATE}({title}, ..., wrt={wrt!r}): wrt must be the index of one "
            f"of the {count} example arguments (0 to {count - 1}) or a tuple of "
            "distinct ones"
        )
    return items


def _tree(value: Any, where: str) -> structure.Tree:
    """The tree of a differentiated example argument (:func:`structure.describe`),
    its errors located at the argument."""
    try:
        return structure.describe(value, "value")
    except structure.StructureError as exc:
        raise UsageError(f"{where}: {exc}") from None


def _trees_float(trees: dict[int, structure.Tree], args: Sequence[Any]) -> str:
    """The float type of the differentiated trees' leaves: float32 when every
    leaf that has a dtype (an array, a NumPy scalar) is float32 (Python numbers
    are weak, as NumPy 2 and JAX take them), else float64, as NumPy promotes a
    mix (float32 leaves of a float64 module are converted exactly)."""
    typed = [
        np.asarray(leaf).dtype
        for i, tree in trees.items()
        for leaf in structure.flatten(tree, args[i])
        if isinstance(leaf, (np.ndarray, np.generic))
    ]
    return "float32" if typed and all(d == np.float32 for d in typed) else "float64"


def _input_entry(
    tree: structure.Tree, call: str, dtype: str = "float64"
) -> dict[str, Any]:
    """One entry of the config's ``inputs`` spelling ``tree`` (the keys besides
    ``name``), its leaves of float type ``dtype``: ``shape``, or ``tree`` with
    ``kind = "tuple"`` or the ``type`` of a NamedTuple or a dataclass."""
    if isinstance(tree, structure.Leaf):
        return {"shape": list(tree.shape), "dtype": dtype}
    entry: dict[str, Any] = {"tree": _toml_tree(tree, call, dtype, top=True)}
    if tree.kind == "tuple":
        entry["kind"] = "tuple"
    if tree.cls is not None:
        entry["type"] = f"{tree.cls.__module__}:{tree.cls.__qualname__}"
    return entry


def _toml_tree(
    tree: structure.Tree, call: str, dtype: str = "float64", top: bool = False
) -> Any:
    """A tree as the config's ``tree`` value: a leaf ``{shape, dtype}``, a table
    for a dict (or a class's fields), an array for a list or a tuple."""
    if isinstance(tree, structure.Leaf):
        return {"shape": list(tree.shape), "dtype": dtype}
    if tree.cls is not None and not top:
        raise UsageError(
            f"{call}: a {tree.cls.__name__} inside another container: a NamedTuple "
            "or a dataclass can only be a whole argument"
        )
    children = [_toml_tree(child, call, dtype) for child in tree.children]
    if tree.kind in ("list", "tuple"):
        return children
    return dict(zip((str(k) for k in tree.keys), children))


class _Places(Locator):
    """The "lines" of a module made by :func:`generate`: the number of the
    argument or keyword each key came from (the reader asks for keys
    ``("module", 0, ...)``; a key inside an argument's table, ``input.shape``, is
    at that argument)."""

    def __init__(self, places: dict[Key, str]) -> None:  # no text to scan
        self.texts = list(places.values())
        self.numbers = {key: number for number, key in enumerate(places, start=1)}

    def line(self, key: Key) -> int | None:
        inside = key[2:]
        while inside not in self.numbers:
            inside = inside[:-1]
        return self.numbers[inside]

    def text(self, line: int | None) -> str:
        """The argument or keyword at "line" ``line`` (the call for None)."""
        if line is None or not 0 < line <= len(self.texts):
            return self.texts[0]
        return self.texts[line - 1]


def _read(table: dict[str, Any], places: _Places) -> ModuleSpec:
    """The table validated by the config's reader, as ``[[module]]`` 0."""
    reader = _Reader(Path(PLACEHOLDER), places)
    reader.module_table = f"{GENERATE}()"
    unknown = {
        key: table[key]
        for key in table
        if key not in _MODULE_KEYS or key in CONFIG_ONLY_KEYS
    }
    reader.check_keys(unknown, ("module", 0), MODULE_OPTIONS)
    adapters = table.get("adapters")
    if isinstance(adapters, list) and "ipopt" in adapters:
        raise reader.error(
            ("module", 0, "adapters"),
            "the ipopt adapter is built from a config entry naming its constraint "
            'function (constraints = { function = "file.py:g", size = M }): '
            "build it with difgen build",
        )
    return reader.module(table, 0)


_PLACE_RE = re.compile(re.escape(PLACEHOLDER) + r":(\d+)")


@contextlib.contextmanager
def _located(places: _Places) -> Iterator[None]:
    """Errors of the reader and the pipeline located at the arguments and keywords
    of the call instead of at :data:`PLACEHOLDER`'s "lines"."""
    try:
        yield
    except ConfigError as exc:
        if exc.path != PLACEHOLDER:
            raise
        raise ConfigError(
            places.text(exc.line), None, _named(exc.message, places)
        ) from None
    except DifgenError as exc:
        text = str(exc)
        if PLACEHOLDER not in text:
            raise
        exc.args = (_named(text, places),)
        raise


def _named(text: str, places: _Places) -> str:
    """``text`` with each ``<difgen.generate>:N`` (a trace error's note on the
    configured shapes) replaced by the argument it names."""
    return _PLACE_RE.sub(lambda match: places.text(int(match[1])), text)


def cache_directory() -> Path:
    """Where :func:`generate` compiles ``emit = "c"`` modules written nowhere else:
    ``$DIFGEN_CACHE_DIR``, else ``$XDG_CACHE_HOME/difgen``, else
    ``~/.cache/difgen``; each module in ``generate/BODY_HASH/``, so that the same
    module is compiled once, and a changed one goes to a new directory (a process
    loads an extension of one path once)."""
    root = os.environ.get(CACHE_ENV)
    if not root:
        xdg = os.environ.get("XDG_CACHE_HOME") or os.path.join(
            os.path.expanduser("~"), ".cache"
        )
        root = os.path.join(xdg, "difgen")
    return Path(root, "generate")


def _load_files(
    spec: ModuleSpec, files: list[tuple[str, str]], output_dir: Any
) -> types.ModuleType:
    """The generated module loaded from its text: from the text alone when nothing
    is written, else from the file written (with its extension compiled beside it,
    ``emit = "c"``)."""
    text = files[0][1]
    c_text = files[1][1] if len(files) > 1 else None
    if output_dir is None and c_text is None:
        module = _load(text, spec.name, None)
    else:
        if output_dir is not None:
            directory = Path(os.fspath(output_dir))
        else:
            directory = cache_directory() / body_hash(text)
        WriteTransaction(
            [(directory / f"{spec.name}{suffix}", data) for suffix, data in files]
        ).commit()
        if c_text is not None:
            config = Config(Path(PLACEHOLDER), directory, (spec,))
            api.compile_extensions(config)
        module = _load(text, spec.name, directory / f"{spec.name}.py")
    module.__source__ = text  # type: ignore[attr-defined]
    if c_text is not None:
        module.__c_source__ = c_text  # type: ignore[attr-defined]
    return module


def _load(text: str, name: str, path: Path | None) -> types.ModuleType:
    """Run a module's text as a new module (not in ``sys.modules``); without a
    file, its text goes to :mod:`linecache` so that tracebacks and ``inspect``
    show its lines."""
    module = types.ModuleType(name)
    if path is None:
        filename = f"<{GENERATE} {name} {body_hash(text)}>"
        linecache.cache[filename] = (len(text), None, text.splitlines(True), filename)
    else:
        filename = str(path)
        module.__file__ = filename
    code = compile(text, filename, "exec", dont_inherit=True)
    exec(code, module.__dict__)  # noqa: S102  (difgen's own generated text)
    return module
