"""The adversarial suite of issue 8: difgen used as a hostile user would use it.

difgen promises two things. What it accepts, it reproduces exactly: the generated
module computes what the user's NumPy function computes (NaN and inf included) and
exact derivatives where the function is differentiable. What it cannot reproduce, it
refuses: exit 1, one ``difgen: error: FILE:LINE: ...`` line on stderr, no Python
traceback, and nothing written. Every case below checks one of those two outcomes,
never just "it did not crash".

One file per class of the issue; each case is one row of a table:

1. ``test_names.py``: context and module names that clash with names the generated
   code uses (``K0``, ``x_0``, ``value``, ``JACOBIAN_INDICES``, ``np``, ``os``...)
   are refused at ``difgen.toml:LINE``; names that do not clash build and give the
   exact gradient.
2. ``test_numpy_semantics.py``: ``f`` and every ``value_and_*`` value equal NumPy's
   for NaN, +-inf, 0 and negatives, on the sympy backend and on the trace backend's
   scalar and vector emissions; derivatives are exact where the function is finite
   and differentiable; zero-size shapes keep NumPy's shapes.
3. ``test_refusals.py``: complex numbers, impure functions (``np.random``, state),
   value-changing dtypes and process exits are refused naming the user's
   ``file:line``; writes through views and aliases are reproduced exactly (value
   and gradient compared with NumPy and finite differences).
4. ``test_errors.py``: every way the user's function, config or pipe can fail is a
   ``difgen: error:`` message with ``file:line``, never a traceback.
5. ``test_runtime_contract.py``: generated operators check every argument's shape
   (ValueError naming the argument, the expected and the actual shape), ``out=``
   dtype and shape, complex input (TypeError), and treat lists alike in both
   emissions.
6. ``test_check.py``: ``difgen check`` reports stale, edited, truncated and foreign
   modules instead of "up to date".
7. ``test_writes.py``: builds are all-or-nothing, never overwrite a file difgen did
   not write, never hang on a FIFO, never lose a file saved during the build.
8. ``test_bounded_builds.py``: ``--timeout`` and per-module ``timeout`` stop slow
   builds naming module and stage; Ctrl-C exits 130 with nothing written; dense
   results over the memory budget are refused with the size and a hint.
9. ``test_trust.py`` (issue 20): no wrong "up to date" or success around builds,
   ``check``, compiling and loading (an extension truncated, a FIFO or directory,
   from another or an edited C source, older or newer by mtime; ``$CFLAGS``
   fast-math; the pre-commit build hook; an edited helper in ``sys.modules``; a
   ``json.py`` function file; reverse mode through ``s = f(s) + x`` in a
   ``while``), no traceback (bad timeouts and seeds, a dead
   ``--jobs`` worker, a compiler without output, ``arctan2`` in C), no hang or
   leftover (SIGTERM, a killed compiler, ``while True`` under the default limit).
10. ``test_masked_singularities.py`` (issue 20): entries a function discards
    (``tril``/``triu``, constant ``where`` masks, slices) keep their NaN and inf out
    of every derivative, against mpmath, in every backend, mode and emission.
11. ``test_no_traceback_grid.py`` (issue 20): every primitive in compositions of
    quotients, ``abs``, ``maximum`` and ``where``, every result kind, both backends:
    a module or a ``file:line`` refusal, never a traceback.
12. ``test_messages.py`` (issue 20): refusals name the module, the line and the
    config key the user wrote.
13. ``test_wrong_numbers.py`` (issue 20): derivatives that were plausible wrong
    floats (``tanh'`` in its tails, ``hypot``'s at subnormal inputs, SymPy's of
    ``sign(x) * x`` at 9e307) are exact to a few ulps against mpmath, and
    ``np.cbrt``'s value is within 4 ulps of NumPy's, on both backends, both modes
    and every emission; an int64 index out of bounds raises NumPy's IndexError,
    naming the argument, in every operator and points variant, also where the
    derivative never reads the index (the hessian of ``np.sum(x[idx])``).
14. ``test_argument_kinds.py`` (issue 20): masked arrays, ``np.matrix``, object
    arrays, lists holding None, strings, bools or complex numbers, and bool,
    string, complex and long double values are refused with a TypeError naming the
    operator and the argument, in every position of every operator and every emission; what NumPy
    converts exactly (ints, float16, float32, tuples) still gives the float64
    array's numbers.
15. ``test_points_rows.py`` (issue 20): every row of ``<op>_points`` over 300
    hostile points (NaN, +-inf, +-0, +-1e308, subnormals) and over several blocks
    is the one-point operator at that point, NaN and inf in the same places, for
    every operator with a points variant, both backends, every emission (vector,
    scalar, compiled C and its Python fallback).
16. ``test_extreme_second_order.py`` (issue 20): ``hypot``'s, ``arctan2``'s and
    ``logaddexp``'s second derivatives at huge, tiny and subnormal inputs (1e300,
    3e-160, 3e-320, (1000, 1000)) are within 8 ulps of mpmath, or non-finite
    where the exact value overflows, on both backends, both modes and every
    emission; third order on the graph.

Every case passes: none is marked xfail and none is skipped. A case that fails is a
broken promise, to be fixed in difgen, not marked.

How the guarantees are checked:

- a refusal: exit status 1, stderr starting ``difgen: error:``, the ``file:line``
  (``difgen.toml:LINE`` or the user's ``fn.py:LINE``, not followed by another
  digit) and a key phrase, no ``Traceback``, and a snapshot of every file of the
  project unchanged;
- a value: the user's function run by NumPy on a copy of the input, compared with
  NaN, infinities and zeros exactly;
- a derivative: hand-computed where that is short, central finite differences of
  the NumPy function otherwise;
- the CLI runs in-process (``difgen.cli.main`` under capsys; an exception escaping
  ``main`` fails the case as the traceback a user would see), and as a subprocess
  only where the case needs a real process: Ctrl-C, a closed pipe, ``os._exit``,
  a build killed half-way.

Helpers live in ``adversarial_support.py``: ``Project`` writes a project in
``tmp_path`` and runs the CLI; the session-scoped ``build`` fixture below caches the
generated modules that many cases share, so the suite stays well under a minute.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from .adversarial_support import Builder, Project, make_builder


@pytest.fixture
def project(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> Iterator[Project]:
    """An empty project directory, which is also the working directory.

    Modules the project's code imported (``helper``, ``pkg``...) are dropped from
    sys.modules afterwards: the next test's ``import helper`` must find its own.
    """
    monkeypatch.chdir(tmp_path)
    imported = set(sys.modules)
    yield Project(tmp_path, capsys)
    for name in set(sys.modules) - imported:
        if str(getattr(sys.modules[name], "__file__", "")).startswith(str(tmp_path)):
            del sys.modules[name]


@pytest.fixture(scope="session")
def build(tmp_path_factory: pytest.TempPathFactory) -> Builder:
    """``build(source, function, shape, operators, contexts, **options)``: a
    generated module built once per session per distinct arguments (see
    :func:`adversarial_support.make_builder`)."""
    return make_builder(tmp_path_factory)
