"""The AST rewriter: a function body's branches become calls of the run-time
helpers (:mod:`difgen.frontend.control.helpers`).

- ``if``/``elif``/``else`` statements become two nested functions (one per branch)
  taking the variables either branch assigns, and a call of ``if_``;
- an ``if`` containing a ``return`` takes the statements after it into its
  branches (both then end in a ``return``), so an early return is one ``cond`` of
  the returned values;
- ``while`` becomes a condition function, a body function and a call of
  ``while_``; ``for NAME in range(...)`` a body function of (item, loop variables)
  and a call of ``for_``; a loop's ``break`` and ``continue`` are lowered to flags
  first (:meth:`Rewriter.lower_exits`);
- ``a if c else b`` becomes ``ifexp``, ``and``/``or`` ``and_``/``or_`` (Python's
  short-circuit values: ``a and b`` is ``b if a else a``), ``not`` ``not_``, and a
  chained comparison ``a < b < c`` the ``and`` of its pairs.

What cannot be rewritten is recorded with the reason (:attr:`Rewriter.refused`, by
line) and keeps the ``bool()`` error: a ``break``/``continue`` inside a ``with`` or
``try`` of a loop, a ``return`` inside a loop, branches that change a Python
container, an attribute or a global.
"""

from __future__ import annotations

import ast

_EXIT = "a `break` or `continue` in it leaves a loop"
HELPERS = "__difgen_control__"  # the global name rewritten code calls through
MUTATORS = frozenset(
    ("append", "extend", "insert", "pop", "remove", "clear", "update")
    + ("setdefault", "add", "discard", "popitem", "sort", "reverse")
)


def locate(module: ast.Module, line: int) -> None:
    """Nodes made by the rewrite without a location get the function's line."""
    for node in ast.walk(module):
        if "lineno" in node._attributes and not hasattr(node, "lineno"):
            node.lineno = line  # type: ignore[attr-defined]


def _helper(name: str) -> ast.expr:
    return ast.Attribute(ast.Name(HELPERS, ast.Load()), name, ast.Load())


def _thunk(expr: ast.expr) -> ast.Lambda:
    return ast.Lambda(
        ast.arguments(
            posonlyargs=[], args=[], kwonlyargs=[], kw_defaults=[], defaults=[]
        ),
        expr,
    )


class _Names(ast.NodeVisitor):
    """What a branch's statements assign and write, and what stops a rewrite."""

    def __init__(self) -> None:
        self.assigned: list[str] = []
        self.written: list[str] = []
        self.reason: str | None = None
        self.returns = False
        self.loops = 0

    def _name(self, name: str) -> None:
        if name not in self.assigned:
            self.assigned.append(name)

    def target(self, node: ast.expr) -> None:
        if isinstance(node, ast.Name):
            self._name(node.id)
        elif isinstance(node, (ast.Tuple, ast.List)):
            for elt in node.elts:
                self.target(elt)
        elif isinstance(node, ast.Starred):
            self.target(node.value)
        elif isinstance(node, ast.Subscript):
            base = node.value
            while isinstance(base, ast.Subscript):
                base = base.value
            if isinstance(base, ast.Name):
                if base.id not in self.written:
                    self.written.append(base.id)
            else:
                self.reason = "it writes into an item of an expression"
        elif isinstance(node, ast.Attribute):
            self.reason = "it assigns an attribute"

    def visit_Assign(self, node: ast.Assign) -> None:
        for t in node.targets:
            self.target(t)
        self.visit(node.value)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        self.target(node.target)
        self.visit(node.value)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        self.target(node.target)
        if node.value is not None:
            self.visit(node.value)

    def visit_NamedExpr(self, node: ast.NamedExpr) -> None:
        self.target(node.target)
        self.visit(node.value)

    def _loop(self, node: ast.For | ast.While) -> None:
        if isinstance(node, ast.For):
            self.target(node.target)
        self.loops += 1
        for stmt in [*node.body, *node.orelse]:
            self.visit(stmt)
        self.loops -= 1

    def visit_For(self, node: ast.For) -> None:
        self._loop(node)

    def visit_While(self, node: ast.While) -> None:
        self._loop(node)

    def visit_Break(self, node: ast.Break) -> None:
        if not self.loops:
            self.reason = _EXIT

    def visit_Continue(self, node: ast.Continue) -> None:
        if not self.loops:
            self.reason = _EXIT

    def visit_Return(self, node: ast.Return) -> None:
        if self.loops:
            self.reason = "it returns from inside a loop"
        self.returns = True

    def visit_Yield(self, node: ast.AST) -> None:
        self.reason = "it yields"

    visit_YieldFrom = visit_Yield
    visit_Await = visit_Yield

    def visit_Global(self, node: ast.AST) -> None:
        self.reason = "it declares a global or nonlocal variable"

    visit_Nonlocal = visit_Global

    def visit_Delete(self, node: ast.AST) -> None:
        self.reason = "it deletes a variable"

    def visit_With(self, node: ast.With) -> None:
        for item in node.items:
            if item.optional_vars is not None:
                self.target(item.optional_vars)
        self.generic_visit(node)

    def visit_Import(self, node: ast.Import | ast.ImportFrom) -> None:
        for alias in node.names:
            self._name((alias.asname or alias.name).split(".")[0])

    visit_ImportFrom = visit_Import

    def visit_ExceptHandler(self, node: ast.ExceptHandler) -> None:
        if node.name:
            self._name(node.name)
        self.generic_visit(node)

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        self._name(node.name)

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        self._name(node.name)

    def visit_Lambda(self, node: ast.Lambda) -> None:
        return

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr in MUTATORS:
            self.reason = f"it calls .{func.attr}(), which may change a Python object"
        self.generic_visit(node)


def _scan(stmts: list[ast.stmt]) -> _Names:
    names = _Names()
    for stmt in stmts:
        names.visit(stmt)
    return names


class Rewriter(ast.NodeTransformer):
    """Rewrites a function body: branches to helper calls (see the module doc)."""

    def __init__(self, filename: str, loaded: set[str] | None = None) -> None:
        self.filename = filename
        self.refused: dict[int, str] = {}
        self.count = 0
        self.loaded = loaded  # the names the function reads anywhere (None: unknown)

    def unread(self, target: ast.expr) -> bool:
        """Whether ``target`` is a name the function never reads."""
        return (
            self.loaded is not None
            and isinstance(target, ast.Name)
            and target.id not in self.loaded
        )

    def where(self, node: ast.AST) -> ast.Constant:
        return ast.Constant(f"{self.filename}:{getattr(node, 'lineno', 0)}")

    # -- expressions
    def visit_IfExp(self, node: ast.IfExp) -> ast.expr:
        self.generic_visit(node)
        call = ast.Call(
            _helper("ifexp"),
            [node.test, _thunk(node.body), _thunk(node.orelse), self.where(node)],
            [],
        )
        return ast.copy_location(call, node)

    def visit_BoolOp(self, node: ast.BoolOp) -> ast.expr:
        self.generic_visit(node)
        name = "and_" if isinstance(node.op, ast.And) else "or_"
        args = [self.where(node), *(_thunk(v) for v in node.values)]
        return ast.copy_location(ast.Call(_helper(name), args, []), node)

    def visit_UnaryOp(self, node: ast.UnaryOp) -> ast.expr:
        self.generic_visit(node)
        if not isinstance(node.op, ast.Not):
            return node
        call = ast.Call(_helper("not_"), [node.operand, self.where(node)], [])
        return ast.copy_location(call, node)

    def visit_Compare(self, node: ast.Compare) -> ast.expr:
        self.generic_visit(node)
        if len(node.ops) == 1:
            return node
        operands = [node.left, *node.comparators]
        pairs: list[ast.expr] = [
            ast.copy_location(ast.Compare(a, [op], [b]), node)
            for a, op, b in zip(operands, node.ops, operands[1:])
        ]
        args = [self.where(node), *(_thunk(p) for p in pairs)]
        return ast.copy_location(ast.Call(_helper("and_"), args, []), node)

    def visit_FunctionDef(self, node: ast.FunctionDef) -> ast.FunctionDef:
        return node  # a nested function is its own code: not rewritten here

    def visit_Lambda(self, node: ast.Lambda) -> ast.Lambda:
        return node

    # -- statements
    def block(self, stmts: list[ast.stmt], tail: bool) -> list[ast.stmt]:
        """Rewrite a block; ``tail``: falling off its end returns from the function."""
        out: list[ast.stmt] = []
        for i, stmt in enumerate(stmts):
            if isinstance(stmt, ast.Return):
                out.append(self.visit(stmt))
                return out  # what follows a return never runs
            if not isinstance(stmt, ast.If):
                done = self.statement(stmt)
                out += done if isinstance(done, list) else [done]
                continue
            names = _scan([stmt])
            if names.reason is not None or (names.returns and not tail):
                why = names.reason or "it returns from inside a loop or a `with`"
                self.refused[stmt.lineno] = why
                done = self.statement(stmt)
                out += done if isinstance(done, list) else [done]
                continue
            if names.returns:
                out += self.returning_if(stmt, stmts[i + 1 :])
                return out
            out += self.assigning_if(stmt, names)
        return out

    def statement(self, stmt: ast.stmt) -> ast.stmt | list[ast.stmt]:
        """A statement other than a rewritten ``if``: its expressions are rewritten,
        and its blocks too (loops, ``with`` and ``try`` bodies are never tails)."""
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            return stmt
        if isinstance(stmt, (ast.For, ast.While)) and _has_exit(stmt.body):
            lowered = self.lower_exits(stmt)
            if lowered is not None:
                return self.block(lowered, tail=False)
            self.refused[stmt.lineno] = (
                "a `break` or `continue` inside a `with` or `try` block of a loop is "
                "not supported"
            )
        if isinstance(stmt, ast.For) and _range_loop(stmt):
            names = _scan(stmt.body)
            if names.reason is None and not names.returns:
                return self.for_loop(stmt, names)
            self.refused.setdefault(
                stmt.lineno,
                "a `for` loop over a range with "
                + (names.reason or "a `return`")
                + " stays unrolled",
            )
        if isinstance(stmt, ast.For) and _sequence_loop(stmt):
            loop = self.named_target(stmt)
            names = _scan(loop.body)
            if names.reason is None and not names.returns:
                return self.for_loop(loop, names)
        if isinstance(stmt, ast.While):
            names = _scan(stmt.body)
            if names.reason is None and not names.returns and not stmt.orelse:
                return self.while_loop(stmt, names)
            self.refused[stmt.lineno] = (
                "a loop on a traced condition with "
                + ("an `else` clause" if stmt.orelse else names.reason or "a `return`")
                + " is not supported yet"
            )
        if isinstance(stmt, (ast.For, ast.While)):
            self.refuse_loop(stmt)
        for name in ("body", "orelse", "finalbody"):
            block = getattr(stmt, name, None)
            if isinstance(block, list) and block and isinstance(block[0], ast.stmt):
                setattr(stmt, name, self.block(block, tail=False) or [ast.Pass()])
        if isinstance(stmt, ast.Try):
            for handler in stmt.handlers:
                handler.body = self.block(handler.body, tail=False) or [ast.Pass()]
        for name, value in ast.iter_fields(stmt):
            if isinstance(value, ast.expr):
                setattr(stmt, name, self.visit(value))
            elif isinstance(value, list) and value and isinstance(value[0], ast.expr):
                setattr(stmt, name, [self.visit(v) for v in value])
        return stmt

    def lower_exits(self, stmt: ast.For | ast.While) -> list[ast.stmt] | None:
        """A loop's ``break`` and ``continue`` as flags that guard the rest of the
        body (AutoGraph's lowering), so a traced exit is a ``cond`` of the flag:

        - ``for``: each iteration runs under ``if not broke:`` (the trip count stays
          the iterable's, unrolled as before), the target assigned inside it;
        - ``while``: the condition becomes ``not broke and <test>``;
        - statements after an ``if`` that may exit run under ``if not (broke or
          skipped):``; an ``else`` clause runs under ``if not broke:``.
        """
        self.count += 1
        broke = f"__difgen_break_{self.count}"
        skipped = f"__difgen_continue_{self.count}"
        body = _lower_exits(stmt.body, broke, skipped)
        if body is None:
            return None
        reset = _assign(skipped, False)
        not_broke = ast.UnaryOp(ast.Not(), ast.Name(broke, ast.Load()))
        loop: ast.stmt
        if isinstance(stmt, ast.For):
            item = f"__difgen_item_{self.count}"
            bind = ast.Assign([stmt.target], ast.Name(item, ast.Load()))
            if self.unread(stmt.target):
                # a target the function never reads (`for _ in ...`) may take
                # every item: the loop passes it through, not a choice of ints
                guarded = ast.If(not_broke, body, [])
                steps: list[ast.stmt] = [reset, bind, guarded]
            else:
                steps = [reset, ast.If(not_broke, [bind, *body], [])]
            loop = ast.For(ast.Name(item, ast.Store()), stmt.iter, steps, [])
        else:
            test = ast.BoolOp(ast.And(), [not_broke, stmt.test])
            loop = ast.While(test, [reset, *body], [])
        out: list[ast.stmt] = [_assign(broke, False), _assign(skipped, False), loop]
        if stmt.orelse:
            not_broke = ast.UnaryOp(ast.Not(), ast.Name(broke, ast.Load()))
            out.append(ast.If(not_broke, stmt.orelse, []))
        for made in out:
            ast.copy_location(made, stmt)
        ast.fix_missing_locations(ast.Module(body=out, type_ignores=[]))
        return out

    def while_loop(self, stmt: ast.While, names: _Names) -> list[ast.stmt]:
        """``while test: body`` as a condition function, a body function returning
        the loop variables, and a call of :func:`while_`."""
        params = names.assigned + [w for w in names.written if w not in names.assigned]
        self.count += 1
        result = ast.Tuple([ast.Name(p, ast.Load()) for p in params], ast.Load())
        args = ast.arguments(
            posonlyargs=[],
            args=[ast.arg(arg=p) for p in params],
            kwonlyargs=[],
            kw_defaults=[],
            defaults=[],
        )
        test = ast.FunctionDef(
            name=f"__difgen_cond_{stmt.lineno}_{self.count}",
            args=args,
            body=[ast.Return(self.visit(stmt.test))],
            decorator_list=[],
        )
        body = ast.FunctionDef(
            name=f"__difgen_body_{stmt.lineno}_{self.count}",
            args=args,
            body=[*self.block(stmt.body, tail=False), ast.Return(result)],
            decorator_list=[],
        )
        values: list[ast.expr] = [
            ast.Call(
                _helper("value"),
                [_thunk(ast.Name(p, ast.Load())), ast.Constant(p)],
                [],
            )
            for p in params
        ]
        written = [params.index(w) for w in names.written]
        call = ast.Call(
            _helper("while_"),
            [
                ast.Name(test.name, ast.Load()),
                ast.Name(body.name, ast.Load()),
                ast.Tuple(values, ast.Load()),
                ast.Tuple([ast.Constant(i) for i in written], ast.Load()),
                self.where(stmt),
                ast.Tuple([ast.Constant(p) for p in params], ast.Load()),
            ],
            [],
        )
        target = ast.Tuple([ast.Name(p, ast.Store()) for p in params], ast.Store())
        assign = ast.Assign([target], call) if params else ast.Expr(call)
        return [
            ast.copy_location(test, stmt),
            ast.copy_location(body, stmt),
            ast.copy_location(assign, stmt),
        ]

    def named_target(self, stmt: ast.For) -> ast.For:
        """``for a, b in items: body`` as ``for item in items: a, b = item; body``
        (a loop over a static sequence whose items unpack: ``enumerate``,
        ``zip``), so that :meth:`for_loop` sees one name."""
        if isinstance(stmt.target, ast.Name):
            return stmt
        self.count += 1
        item = f"__difgen_item_{self.count}"
        bind = ast.copy_location(
            ast.Assign([stmt.target], ast.Name(item, ast.Load())), stmt
        )
        loop = ast.For(ast.Name(item, ast.Store()), stmt.iter, [bind, *stmt.body], [])
        ast.copy_location(loop, stmt)
        ast.fix_missing_locations(ast.Module(body=[loop], type_ignores=[]))
        return loop

    def for_loop(self, stmt: ast.For, names: _Names) -> list[ast.stmt]:
        """``for i in range(args): body`` as a body function of (item, loop
        variables) and a call of :func:`for_`, which gives the loop variables and
        the final value of ``i``. ``range`` and its arguments are evaluated as
        Python does, once, before the loop; :func:`for_` iterates over anything
        that is not the builtin ``range`` natively."""
        target = stmt.target
        assert isinstance(target, ast.Name)
        if _plain_call(stmt.iter):
            assert isinstance(stmt.iter, ast.Call)
            func, arguments = stmt.iter.func, stmt.iter.args
        else:  # any other iterable: evaluated once, as Python does
            func, arguments = _helper("sequence"), [stmt.iter]
        params = [
            p for p in names.assigned + names.written if p != target.id
        ]  # the target is the item: for_ gives its final value separately
        params = list(dict.fromkeys(params))
        self.count += 1
        item = f"__difgen_item_{self.count}"
        result = ast.Tuple([ast.Name(p, ast.Load()) for p in params], ast.Load())
        args = ast.arguments(
            posonlyargs=[],
            args=[ast.arg(arg=item), *(ast.arg(arg=p) for p in params)],
            kwonlyargs=[],
            kw_defaults=[],
            defaults=[],
        )
        bind = ast.Assign(
            [ast.Name(target.id, ast.Store())], ast.Name(item, ast.Load())
        )
        body = ast.FunctionDef(
            name=f"__difgen_for_{stmt.lineno}_{self.count}",
            args=args,
            body=[bind, *self.block(stmt.body, tail=False), ast.Return(result)],
            decorator_list=[],
        )
        values: list[ast.expr] = [
            ast.Call(
                _helper("value"),
                [_thunk(ast.Name(p, ast.Load())), ast.Constant(p)],
                [],
            )
            for p in [*params, target.id]
        ]
        written = [params.index(w) for w in names.written if w != target.id]
        call = ast.Call(
            _helper("for_"),
            [
                ast.Name(body.name, ast.Load()),
                self.visit(func),
                ast.Tuple([self.visit(a) for a in arguments], ast.Load()),
                ast.Tuple(values, ast.Load()),
                ast.Tuple([ast.Constant(i) for i in written], ast.Load()),
                self.where(stmt),
                ast.Tuple([ast.Constant(p) for p in params], ast.Load()),
            ],
            [],
        )
        out = ast.Tuple(
            [ast.Name(p, ast.Store()) for p in [*params, target.id]], ast.Store()
        )
        return [
            ast.copy_location(body, stmt),
            ast.copy_location(ast.Assign([out], call), stmt),
        ]

    def refuse_loop(self, stmt: ast.For | ast.While) -> None:
        """Loops stay loops: a traced condition in one keeps the bool() error."""
        if isinstance(stmt, ast.While):
            self.refused.setdefault(
                stmt.lineno,
                "a `while` loop on a traced condition is not supported yet (its "
                "trip count would depend on the input)",
            )
        for node in ast.walk(stmt):
            if isinstance(node, ast.If) and _scan([node]).reason is None:
                continue
            if isinstance(node, ast.If):
                self.refused.setdefault(node.lineno, str(_scan([node]).reason))

    def functions(
        self, stmt: ast.If, bodies: list[list[ast.stmt]], params: list[str]
    ) -> list[ast.stmt]:
        """The two branch functions (taking ``params``)."""
        self.count += 1
        defs: list[ast.stmt] = []
        for kind, body in zip(("true", "false"), bodies):
            fn = ast.FunctionDef(
                name=f"__difgen_{kind}_{stmt.lineno}_{self.count}",
                args=ast.arguments(
                    posonlyargs=[],
                    args=[ast.arg(arg=p) for p in params],
                    kwonlyargs=[],
                    kw_defaults=[],
                    defaults=[],
                ),
                body=body or [ast.Pass()],
                decorator_list=[],
            )
            defs.append(ast.copy_location(fn, stmt))
        return defs

    def call(
        self, stmt: ast.If, defs: list[ast.stmt], params: list[str], written: list[str]
    ) -> ast.Call:
        values: list[ast.expr] = [
            ast.Call(
                _helper("value"),
                [_thunk(ast.Name(p, ast.Load())), ast.Constant(p)],
                [],
            )
            for p in params
        ]
        writes: list[ast.expr] = [
            ast.Call(
                _helper("value"),
                [_thunk(ast.Name(w, ast.Load())), ast.Constant(w)],
                [],
            )
            for w in written
            if w not in params
        ]
        return ast.Call(
            _helper("if_"),
            [
                self.visit(stmt.test),
                ast.Name(defs[0].name, ast.Load()),  # type: ignore[attr-defined]
                ast.Name(defs[1].name, ast.Load()),  # type: ignore[attr-defined]
                ast.Tuple(values, ast.Load()),
                ast.Tuple(writes, ast.Load()),
                self.where(stmt),
            ],
            [],
        )

    def assigning_if(self, stmt: ast.If, names: _Names) -> list[ast.stmt]:
        """``if`` without ``return``: branches return what they assign."""
        params = names.assigned
        result = ast.Tuple([ast.Name(p, ast.Load()) for p in params], ast.Load())
        bodies = [
            [*self.block(body, tail=False), ast.Return(result)]
            for body in (stmt.body, stmt.orelse)
        ]
        defs = self.functions(stmt, bodies, params)
        call = self.call(stmt, defs, params, names.written)
        if params:
            target = ast.Tuple([ast.Name(p, ast.Store()) for p in params], ast.Store())
            assign: ast.stmt = ast.Assign([target], call)
        else:
            assign = ast.Expr(call)
        return [*defs, ast.copy_location(assign, stmt)]

    def returning_if(self, stmt: ast.If, rest: list[ast.stmt]) -> list[ast.stmt]:
        """``if`` with a ``return``: the rest of the block goes into the branches
        that may fall through, and the ``if`` returns the ``cond`` of the results."""
        bodies = []
        for body in (stmt.body, stmt.orelse):
            full = body if _always_returns(body) else [*body, *rest]
            block = self.block(full, tail=True)
            if not _always_returns(block):
                block.append(ast.Return(ast.Constant(None)))
            bodies.append(block)
        names = _scan([stmt, *rest])
        params = names.assigned
        defs = self.functions(stmt, bodies, params)
        call = self.call(stmt, defs, params, names.written)
        return [*defs, ast.copy_location(ast.Return(call), stmt)]


def _assign(name: str, value: bool) -> ast.Assign:
    return ast.Assign([ast.Name(name, ast.Store())], ast.Constant(value))


def loopable(stmt: ast.For) -> bool:
    """Whether the rewrite turns ``stmt`` into a call of ``for_``."""
    if not (_range_loop(stmt) or _sequence_loop(stmt)):
        return False
    names = _scan(stmt.body)
    exits = names.reason == _EXIT and _has_exit(stmt.body)  # lowered to flags
    return (names.reason is None or exits) and not names.returns


def _range_loop(stmt: ast.For) -> bool:
    """``for NAME in range(...):`` with positional arguments and no ``else``: a
    loop :func:`for_` may trace once (after :meth:`Rewriter.lower_exits`, a
    ``break``/``continue`` are flags and the target a fresh name)."""
    call = stmt.iter
    return (
        isinstance(stmt.target, ast.Name)
        and not stmt.orelse
        and isinstance(call, ast.Call)
        and isinstance(call.func, ast.Name)
        and call.func.id == "range"
        and not call.keywords
        and 1 <= len(call.args) <= 3
        and not any(isinstance(a, ast.Starred) for a in call.args)
    )


def _plain_call(node: ast.expr) -> bool:
    """A call with positional arguments only (``range(n)``, ``zip(a, b)``)."""
    return (
        isinstance(node, ast.Call)
        and not node.keywords
        and not any(isinstance(a, ast.Starred) for a in node.args)
    )


def _sequence_loop(stmt: ast.For) -> bool:
    """``for TARGET in ITERABLE:`` with no ``else``, the target a name or a tuple
    of names (``for i, w in enumerate(ws)``): :func:`for_` loops over the items
    of a static sequence (a tuple or list of arrays or numbers, an array along
    its first axis, ``enumerate`` and ``zip`` of them) and runs any other
    iterable natively."""
    target = stmt.target
    names = target.elts if isinstance(target, ast.Tuple) else [target]
    return (
        not stmt.orelse
        and bool(names)
        and all(isinstance(n, ast.Name) for n in names)
        and not _range_loop(stmt)
    )


def _has_exit(stmts: list[ast.stmt]) -> bool:
    """Whether a ``break``/``continue`` of this loop level is among ``stmts``."""
    todo: list[ast.AST] = list(stmts)
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.Break, ast.Continue)):
            return True
        skip = (ast.For, ast.While, ast.FunctionDef, ast.Lambda, ast.ClassDef)
        if not isinstance(node, skip):
            todo.extend(ast.iter_child_nodes(node))
        elif isinstance(node, (ast.For, ast.While)):
            todo.extend(node.orelse)  # a loop's else belongs to the outer level
    return False


def _lower_exits(
    stmts: list[ast.stmt], broke: str, skipped: str
) -> list[ast.stmt] | None:
    """``stmts`` with this loop's exits set as flags (None: an exit sits where the
    lowering cannot reach it, inside a ``with`` or ``try``)."""
    out: list[ast.stmt] = []
    for i, stmt in enumerate(stmts):
        if isinstance(stmt, ast.Break):
            out.append(ast.copy_location(_assign(broke, True), stmt))
            return out
        if isinstance(stmt, ast.Continue):
            out.append(ast.copy_location(_assign(skipped, True), stmt))
            return out
        if not _has_exit([stmt]):
            out.append(stmt)
            continue
        if not isinstance(stmt, ast.If):
            return None
        body = _lower_exits(stmt.body, broke, skipped)
        orelse = _lower_exits(stmt.orelse, broke, skipped)
        if body is None or orelse is None:
            return None
        out.append(ast.copy_location(ast.If(stmt.test, body, orelse), stmt))
        rest = stmts[i + 1 :]
        if rest:
            lowered = _lower_exits(rest, broke, skipped)
            if lowered is None:
                return None
            flags: list[ast.expr] = [
                ast.Name(broke, ast.Load()),
                ast.Name(skipped, ast.Load()),
            ]
            go_on = ast.UnaryOp(ast.Not(), ast.BoolOp(ast.Or(), flags))
            out.append(ast.copy_location(ast.If(go_on, lowered, []), rest[0]))
        return out
    return out


def _always_returns(block: list[ast.stmt]) -> bool:
    return bool(block) and isinstance(block[-1], ast.Return)
