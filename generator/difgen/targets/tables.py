"""Index tables whose source does not grow with the pattern.

A sparse derivative's module holds integer tables as long as its pattern (the CSR
``indices``, the colors of its compression, the positions of the nonzeros in the
compressed result): 786,432 entries each for a 256 x 256 Brusselator. Written out
as literals they made a 12.8 MB module that black took minutes to format. A large
table is printed as one of two things instead:

- **A formula**, when the table is made of a few *block runs*: blocks of ``p``
  consecutive entries, each the one before plus a fixed shift per position
  (``v[i + p] = v[i] + shift[i % p]``) -- affine runs are ``p = 1``, the arrow of an
  arrowhead Hessian (``0, k, 0, k + 1, ...``) is ``p = 2``, a banded or periodic
  stencil's rows repeat a block with one shift. :func:`block_runs` finds the
  period with the fewest numbers to print; :func:`formula` prints it as
  ``np.arange`` / ``block + np.arange(reps)[:, None] * shift`` pieces.
- **One compressed block** where no formula of at most :data:`MAX_FORMULA` numbers
  fits (a greedy coloring, the gather positions it implies): the differences of
  consecutive entries (or the entries, whichever compresses smaller), as
  little-endian integers of the narrowest width that holds them, deflated
  (``zlib``, level 9) and base64-encoded, decoded at import by
  ``np.frombuffer(zlib.decompress(base64.b64decode(...)))`` and a ``cumsum``.
  The standard library decodes it, the module stays a readable Python file (the
  block is a string of 64-character lines), and its bytes are a function of the
  table alone for a given zlib: deflate with fixed parameters is deterministic
  (another deflate library, such as zlib-ng, may write other bytes, which
  decompress to the same table). A delta or run-length code in NumPy alone
  would not depend on the library, but it found no repetition at a distance:
  a greedy coloring of the 256 x 256 Brusselator is 4.4 KB deflated and 67,775
  numbers as the best block runs. At 256 x 256 the Brusselator's module is
  104 KB instead of about 12.8 MB.

:func:`decode` evaluates a printed table as the module will, for tests.
"""

from __future__ import annotations

import base64
import zlib
from dataclasses import dataclass

import numpy as np

MAX_PERIOD = 32
"""Longest block tried by :func:`block_runs` (each period costs one pass)."""
MAX_FORMULA = 96
"""Most numbers a formula prints; a table needing more is a compressed block."""
CHUNK = 64
"""Characters of base64 per line of a compressed block."""


@dataclass(frozen=True)
class Run:
    """``reps`` blocks: ``first``, then each the previous plus ``shift``."""

    first: tuple[int, ...]
    shift: tuple[int, ...]
    reps: int

    @property
    def numbers(self) -> int:
        return len(self.first) + (len(self.shift) if self.reps > 1 else 0) + 1


def _runs_at(values: np.ndarray, p: int, budget: int) -> list[Run] | None:
    """``values`` as block runs of period ``p`` (None past ``budget`` numbers)."""
    n = len(values)
    m = -(-n // p)
    padded = np.zeros(m * p, dtype=np.int64)
    padded[:n] = values
    if m * p > n:  # the last block continues the one before it where it can
        padded[n:] = padded[n - p : m * p - p] + (
            padded[n - p : m * p - p] - padded[n - 2 * p : m * p - 2 * p]
            if n >= 2 * p
            else 0
        )
    blocks = padded.reshape(m, p)
    steps = blocks[1:] - blocks[:-1]  # steps[j]: block j + 1 minus block j
    # a run starting at block s takes shift steps[s] and lasts while it holds
    changes = np.flatnonzero(np.any(steps[1:] != steps[:-1], axis=1)) + 1
    if (len(changes) // 2) * (p + 1) > budget:
        return None
    runs: list[Run] = []
    numbers = 0
    s = 0
    while s < m:
        if s == m - 1:
            run = Run(tuple(int(v) for v in blocks[s]), (0,) * p, 1)
        else:
            k = int(np.searchsorted(changes, s, side="right"))
            end = int(changes[k]) if k < len(changes) else m - 1
            shift = tuple(int(v) for v in steps[s])
            run = Run(tuple(int(v) for v in blocks[s]), shift, end - s + 1)
        runs.append(run)
        numbers += run.numbers
        if numbers > budget:
            return None
        s += run.reps
    return runs


def block_runs(values: np.ndarray) -> tuple[int, list[Run]] | None:
    """(period, runs) printing ``values`` with the fewest numbers, at most
    :data:`MAX_FORMULA` (None: no such formula; a smaller period wins ties).

    >>> p, runs = block_runs(np.array([0, 1, 0, 2, 0, 3, 0, 4]))
    >>> p, runs
    (2, [Run(first=(0, 1), shift=(0, 1), reps=4)])
    """
    return block_runs_within(values, MAX_FORMULA)


def block_runs_within(
    values: np.ndarray, budget: int, max_period: int = MAX_PERIOD
) -> tuple[int, list[Run]] | None:
    """(period, runs) of ``values`` with the fewest numbers, at most ``budget``
    (the C target decodes a table's runs once, and allows many more numbers
    than a formula printed in Python), periods up to ``max_period``."""
    flat = np.asarray(values, dtype=np.int64).ravel()
    best: tuple[int, int, list[Run]] | None = None
    limit = budget
    for p in range(1, min(max_period, max(len(flat) // 2, 1)) + 1):
        budget = limit if best is None else best[0] - 1
        runs = _runs_at(flat, p, budget)
        if runs is not None:
            best = (sum(r.numbers for r in runs), p, runs)
    return None if best is None else (best[1], best[2])


def _piece(run: Run) -> str:
    first, shift, reps = run.first, run.shift, run.reps
    if len(first) == 1:
        (start,), (step,) = first, shift
        if reps == 1:
            return f"np.array([{start}])"
        if step == 0:
            return f"np.full({reps}, {start})"
        stop = start + step * reps
        if step == 1:
            return f"np.arange({start}, {stop})" if start else f"np.arange({stop})"
        return f"np.arange({start}, {stop}, {step})"
    block = f"np.array({list(first)!r})"
    if reps == 1:
        return block
    step = first[1] - first[0]
    p = len(first)
    affine = all(b == first[0] + j * step for j, b in enumerate(first))
    if step and affine and all(s == p * step for s in shift):  # one arithmetic run
        return _piece(Run((first[0],), (step,), p * reps))
    if not any(shift):
        return f"np.tile({block}, {reps})"
    ramp = f"np.arange({reps})[:, None]"
    if all(s == shift[0] for s in shift):
        term = f"{shift[0]} * {ramp}"
    else:
        term = f"{ramp} * np.array({list(shift)!r})"
    return f"({block} + {term}).ravel()"


def formula(values: np.ndarray) -> str | None:
    """NumPy source computing the flat ``values`` from its block runs, or None.

    >>> formula(np.array([3, 1, 2, 3, 1, 2, 3, 1, 2]))
    'np.tile(np.array([3, 1, 2]), 3)'
    >>> print(formula(np.array([0, 1, 2, 3, 0, 2, 0, 3, 0, 4, 0, 5])))
    np.concatenate((np.arange(4), (np.array([0, 2]) + np.arange(4)[:, None] * np.array([0, 1])).ravel()))
    """
    flat = np.asarray(values, dtype=np.int64).ravel()
    found = block_runs(flat)
    if found is None:
        return None
    p, runs = found
    # blocks of one element that continue an arithmetic run join it
    pieces = [_piece(r) for r in _joined(runs)]
    text = pieces[0] if len(pieces) == 1 else f"np.concatenate(({', '.join(pieces)}))"
    if sum(r.reps for r in runs) * p > len(flat):
        text += f"[:{len(flat)}]"
    return text


def _joined(runs: list[Run]) -> list[Run]:
    """Runs of period 1 whose single-block neighbours continue them, merged."""
    out: list[Run] = []
    for r in runs:
        if out and len(r.first) == 1 and len(out[-1].first) == 1:
            last = out[-1]
            step = last.shift[0] if last.reps > 1 else r.first[0] - last.first[0]
            expected = last.first[0] + step * last.reps
            if r.first[0] == expected and (r.reps == 1 or r.shift[0] == step):
                out[-1] = Run(last.first, (step,), last.reps + r.reps)
                continue
        out.append(r)
    return out


def _width(values: np.ndarray) -> int:
    """Bytes of the narrowest signed integer holding every entry."""
    lo, hi = (int(values.min()), int(values.max())) if values.size else (0, 0)
    for width in (1, 2, 4):
        bound = 1 << (8 * width - 1)
        if -bound <= lo and hi < bound:
            return width
    return 8


def _deflated(values: np.ndarray) -> tuple[bytes, int]:
    width = _width(values)
    return zlib.compress(values.astype(f"<i{width}").tobytes(), 9), width


def packed(values: np.ndarray) -> str:
    """NumPy source decoding the flat ``values`` from one compressed block (int64;
    names ``zlib`` and ``base64``).

    >>> packed(np.array([5, 6, 7]))
    'np.cumsum(np.frombuffer(zlib.decompress(base64.b64decode((\\n"eNpjZWQEAAAVAAg="\\n))), dtype="<i1"), dtype=np.int64)'
    """
    flat = np.asarray(values, dtype=np.int64).ravel()
    delta = np.diff(flat, prepend=np.int64(0))
    as_delta, width_d = _deflated(delta)
    as_is, width_v = _deflated(flat)
    cumulative = len(as_delta) <= len(as_is)
    data, width = (as_delta, width_d) if cumulative else (as_is, width_v)
    text = base64.b64encode(data).decode("ascii")
    lines = "\n".join(f'"{text[i : i + CHUNK]}"' for i in range(0, len(text), CHUNK))
    raw = f'np.frombuffer(zlib.decompress(base64.b64decode((\n{lines}\n))), dtype="<i{width}")'
    return (
        f"np.cumsum({raw}, dtype=np.int64)" if cumulative else f"{raw}.astype(np.int64)"
    )


def decode(source: str) -> np.ndarray:
    """The table a printed source computes, evaluated as the module does."""
    value = eval(source, {"np": np, "zlib": zlib, "base64": base64})
    return np.asarray(value)
