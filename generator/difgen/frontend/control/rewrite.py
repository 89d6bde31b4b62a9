"""Rewriting a function whose branch reached a traced value, and swapping the
rewrite in while it is traced again.

:func:`rewrite_function` reads the function's source, has
:class:`~difgen.frontend.control.transformer.Rewriter` turn its branches into
helper calls, and compiles the result with the user's file and line numbers (so
every message still names the user's line); rewrites are cached by code object.
:func:`rewritten` swaps the rewritten code into the function objects for the
second trace, :func:`explain` says why a branch that still reached ``bool()``
could not be rewritten.
"""

from __future__ import annotations

import ast
import contextlib
import gc
import inspect
import sys
import textwrap
import types
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from difgen.core.builder import WATCHERS
from difgen.core.conversions import TracedBranch
from difgen.core.location import in_difgen_or_numpy
from difgen.errors import TraceError
from difgen.frontend.control import helpers
from difgen.frontend.control.transformer import HELPERS, Rewriter, locate, loopable


@dataclass
class Rewrite:
    """A function's rewritten code and why some branches were left as they are."""

    code: types.CodeType
    refused: dict[int, str]


_REWRITES: dict[types.CodeType, Rewrite] = {}
_REWRITTEN: set[types.CodeType] = set()  # rewritten code and the code nested in it


def _nested_codes(code: types.CodeType) -> Iterator[types.CodeType]:
    yield code
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from _nested_codes(const)


def is_rewritten(code: Any) -> bool:
    """Whether ``code`` comes from a rewrite (a second rewrite cannot help)."""
    return code in _REWRITTEN


def refusal(filename: str, line: int) -> str | None:
    """Why the branch at ``filename:line`` could not become a cond (None: unknown)."""
    for rewrite in _REWRITES.values():
        if rewrite.code.co_filename == filename and line in rewrite.refused:
            return rewrite.refused[line]
    return None


def function_of(code: Any) -> types.FunctionType | None:
    """The function object running ``code`` (the one to rewrite)."""
    for obj in gc.get_referrers(code):
        if isinstance(obj, types.FunctionType) and obj.__code__ is code:
            return obj
    return None


@contextlib.contextmanager
def rewritten(functions: list[types.FunctionType]) -> Iterator[None]:
    """Run with each function's code swapped for its rewrite, restored afterwards."""
    saved: list[tuple[types.FunctionType, types.CodeType, bool]] = []
    try:
        for fn in functions:
            rewrite = rewrite_function(fn)
            had = HELPERS in fn.__globals__
            saved.append((fn, fn.__code__, had))
            fn.__globals__[HELPERS] = _HELPERS_MODULE
            fn.__code__ = rewrite.code
        yield
    finally:
        for fn, code, had in reversed(saved):
            fn.__code__ = code
            if not had:
                fn.__globals__.pop(HELPERS, None)


def rewrite_function(fn: types.FunctionType) -> Rewrite:
    """The rewrite of ``fn`` (cached by its code object)."""
    code = fn.__code__
    if code in _REWRITES:
        return _REWRITES[code]
    where = f"{code.co_filename}:{code.co_firstlineno}"
    try:
        source = textwrap.dedent(inspect.getsource(fn))
    except (OSError, TypeError):
        raise TraceError(
            f"{where}: the function branches on a traced value, and difgen cannot "
            "read its source to turn the branch into a conditional"
        ) from None
    tree = ast.parse(source)
    node = tree.body[0]
    if not isinstance(node, ast.FunctionDef):
        raise TraceError(
            f"{where}: only a `def` function (not a lambda) can branch on a traced "
            "value"
        )
    ast.increment_lineno(tree, code.co_firstlineno - node.lineno)
    node.decorator_list = []
    loaded = {
        n.id
        for n in ast.walk(node)
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)
    }
    rewriter = Rewriter(code.co_filename, loaded)
    node.body = rewriter.block(node.body, tail=True) or [ast.Pass()]
    freevars = list(code.co_freevars)
    factory = ast.FunctionDef(
        name="__difgen_factory",
        args=ast.arguments(
            posonlyargs=[],
            args=[ast.arg(arg=n) for n in freevars],
            kwonlyargs=[],
            kw_defaults=[],
            defaults=[],
        ),
        body=[node, ast.Return(ast.Name(node.name, ast.Load()))],
        decorator_list=[],
    )
    module = ast.Module(body=[factory], type_ignores=[])
    ast.fix_missing_locations(module)
    locate(module, code.co_firstlineno)
    namespace: dict[str, Any] = {}
    compiled = compile(module, code.co_filename, "exec")
    exec(compiled, fn.__globals__.copy(), namespace)  # noqa: S102  (the user's code)
    new = namespace["__difgen_factory"](*([None] * len(freevars))).__code__
    if new.co_freevars != code.co_freevars:
        raise TraceError(
            f"{where}: the function branches on a traced value, and difgen cannot "
            "rewrite a closure whose rewrite changes the variables it closes over"
        )
    rewrite = Rewrite(new, rewriter.refused)
    _REWRITES[code] = rewrite
    _REWRITTEN.update(_nested_codes(new))
    return rewrite


# what rewritten code finds under HELPERS
_HELPERS_MODULE = types.SimpleNamespace(
    value=helpers.value,
    if_=helpers.if_,
    ifexp=helpers.ifexp,
    and_=helpers.and_,
    or_=helpers.or_,
    not_=helpers.not_,
    while_=helpers.while_,
    for_=helpers.for_,
    sequence=helpers.sequence,
)


class UnrolledLoop(TracedBranch):
    """A ``for`` loop over a ``range`` is being unrolled in a function not yet
    rewritten: :func:`difgen.frontend.trace` rewrites it (its loop becomes a
    call of ``for_``) and traces again, as for a branch on a traced value."""


_LOOP_SPANS: dict[types.CodeType, tuple[tuple[int, int], ...]] = {}
_DECLINED: set[types.CodeType] = set()  # code whose loops stay as Python runs them


def _loop_spans(code: types.CodeType) -> tuple[tuple[int, int], ...]:
    """The first and last lines of the ``for ... in range(...)`` loops of ``code``
    that the rewrite turns into ``for_`` calls (none when its source is unknown)."""
    spans = _LOOP_SPANS.get(code)
    if spans is not None:
        return spans
    spans = ()
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(code)))
    except (OSError, TypeError, SyntaxError, IndentationError):
        tree = None
    node = tree.body[0] if tree is not None and tree.body else None
    if isinstance(node, ast.FunctionDef) and node.name == code.co_name:
        offset = code.co_firstlineno - node.lineno
        spans = tuple(
            (loop.lineno + offset, (loop.end_lineno or loop.lineno) + offset)
            for loop in ast.walk(node)
            if isinstance(loop, ast.For) and loopable(loop)
        )
    _LOOP_SPANS[code] = spans
    return spans


def _watch_loops() -> None:
    """Raise :class:`UnrolledLoop` when a user's frame is inside a ``for`` loop
    over a ``range`` of a function that can be rewritten and is not yet."""
    frame: Any = sys._getframe(1)
    while frame is not None:
        code = frame.f_code
        if (
            code not in _DECLINED
            and not in_difgen_or_numpy(code.co_filename)
            and not is_rewritten(code)
            and any(a <= frame.f_lineno <= b for a, b in _loop_spans(code))
        ):
            function = function_of(code)
            try:
                if function is None:
                    raise TraceError("no function object")
                rewrite_function(function)
            except TraceError:
                _DECLINED.add(code)
            else:
                raise UnrolledLoop(
                    f"{code.co_filename}:{frame.f_lineno}: a loop is being unrolled",
                    code,
                    frame.f_lineno,
                    [code],
                )
        frame = frame.f_back


@contextlib.contextmanager
def watching_loops() -> Iterator[None]:
    """Trace with :func:`_watch_loops` called as the equations pile up, so a long
    ``for`` loop in any function of the user's becomes a loop, not its unrolling."""
    WATCHERS.append(_watch_loops)
    try:
        yield
    finally:
        WATCHERS.pop()


def explain(exc: TracedBranch) -> str:
    """The refusal message for a branch the rewrite could not turn into a cond."""
    filename = getattr(exc.code, "co_filename", "<unknown>")
    why = refusal(filename, exc.line)
    if why is None and exc.code in _REWRITES and not is_rewritten(exc.code):
        why = "it is in a nested function (or lambda), which difgen does not rewrite"
    if why:
        return (
            f"{filename}:{exc.line}: a branch on a traced value (bool() of a value "
            f"that depends on the input) cannot become a conditional: {why}. Use "
            "np.where(cond, a, b) for an elementwise choice."
        )
    return str(exc)
