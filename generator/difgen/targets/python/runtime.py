"""The helpers of scalar emission as real functions: NumPy's semantics on Python
floats (docs/design.md §10).

Python's float arithmetic and ``math`` raise where NumPy returns NaN or inf:
``1.0 / 0.0`` is a ZeroDivisionError, ``math.log(0.0)`` and ``math.sin(inf)`` a
ValueError, ``math.exp(1000.0)`` and ``1e200 ** 3`` an OverflowError, and
``(-8.0) ** (1 / 3)`` is a complex number. Each helper takes the fast ``math``
path and, only where it raises, returns what NumPy computes for the same float
(so NaN, inf and the sign of an infinity are NumPy's own).

This module is the helpers' one source: it is linted, typed and unit-tested as
code (tests/test_float_helpers.py), and :mod:`difgen.floats` copies the text of
each definition below (cut with :mod:`ast`, never imported for that) into the
generated modules that call it. So a definition here must read as it should in a
generated module: only ``math``, ``np`` (NumPy) and the other helpers in it, and
its comments and docstring are copied too. The order of the definitions is the
order helpers appear in a generated module.
"""

from __future__ import annotations

import math

import numpy as np


def _sin(a: float) -> float:
    try:
        return math.sin(a)
    except (ValueError, OverflowError):
        return float(np.sin(a))


def _cos(a: float) -> float:
    try:
        return math.cos(a)
    except (ValueError, OverflowError):
        return float(np.cos(a))


def _tan(a: float) -> float:
    try:
        return math.tan(a)
    except (ValueError, OverflowError):
        return float(np.tan(a))


def _asin(a: float) -> float:
    try:
        return math.asin(a)
    except (ValueError, OverflowError):
        return float(np.arcsin(a))


def _acos(a: float) -> float:
    try:
        return math.acos(a)
    except (ValueError, OverflowError):
        return float(np.arccos(a))


def _sinh(a: float) -> float:
    try:
        return math.sinh(a)
    except (ValueError, OverflowError):
        return float(np.sinh(a))


def _cosh(a: float) -> float:
    try:
        return math.cosh(a)
    except (ValueError, OverflowError):
        return float(np.cosh(a))


def _acosh(a: float) -> float:
    try:
        return math.acosh(a)
    except (ValueError, OverflowError):
        return float(np.arccosh(a))


def _atanh(a: float) -> float:
    try:
        return math.atanh(a)
    except (ValueError, OverflowError):
        return float(np.arctanh(a))


def _exp(a: float) -> float:
    try:
        return math.exp(a)
    except (ValueError, OverflowError):
        return float(np.exp(a))


def _expm1(a: float) -> float:
    try:
        return math.expm1(a)
    except (ValueError, OverflowError):
        return float(np.expm1(a))


def _log(a: float) -> float:
    try:
        return math.log(a)
    except (ValueError, OverflowError):
        return float(np.log(a))


def _log1p(a: float) -> float:
    try:
        return math.log1p(a)
    except (ValueError, OverflowError):
        return float(np.log1p(a))


def _sqrt(a: float) -> float:
    try:
        return math.sqrt(a)
    except (ValueError, OverflowError):
        return float(np.sqrt(a))


def _log2(a: float) -> float:
    return float(np.log2(a))


def _log10(a: float) -> float:
    return float(np.log10(a))


def _exp2(a: float) -> float:
    return float(np.exp2(a))


def _hypot(a: float, b: float) -> float:
    """np.hypot (math.hypot differs in the last bit on some floats)."""
    return float(np.hypot(a, b))


def _div(a: float, b: float) -> float:
    try:
        return a / b
    except ZeroDivisionError:
        return float(np.divide(a, b))


def _pow(a: float, b: float) -> float:
    try:
        return math.pow(a, b)
    except (ValueError, OverflowError):
        return float(np.power(a, b))


def _maximum(a: float, b: float) -> float:
    """np.maximum: NaN if either is NaN; the second of equal values."""
    return a if a > b or a != a else b


def _minimum(a: float, b: float) -> float:
    """np.minimum: NaN if either is NaN; the second of equal values."""
    return a if a < b or a != a else b


def _sign(a: float) -> float:
    """np.sign: NaN stays NaN."""
    return float((a > 0.0) - (a < 0.0)) if a == a else a


def _floor(a: float) -> float:
    if a - a != 0.0:  # inf or NaN: unchanged, as in NumPy
        return a
    r = float(math.floor(a))
    return r if r != 0.0 else math.copysign(0.0, a)


def _ceil(a: float) -> float:
    if a - a != 0.0:  # inf or NaN: unchanged, as in NumPy
        return a
    r = float(math.ceil(a))
    return r if r != 0.0 else math.copysign(0.0, a)


def _trunc(a: float) -> float:
    if a - a != 0.0:  # inf or NaN: unchanged, as in NumPy
        return a
    r = float(math.trunc(a))
    return r if r != 0.0 else math.copysign(0.0, a)


def _rint(a: float) -> float:
    if a - a != 0.0:  # inf or NaN: unchanged, as in NumPy
        return a
    r = float(round(a))
    return r if r != 0.0 else math.copysign(0.0, a)


def _remainder(a: float, b: float) -> float:
    """np.remainder: Python's % where it does not raise (the same sign rule)."""
    if b != 0.0 and a - a == 0.0 and b - b == 0.0:
        return a % b
    return float(np.remainder(a, b))


def _logaddexp(a: float, b: float) -> float:
    if a == b:
        return a + 0.6931471805599453
    d = a - b
    if d > 0.0:
        return a + math.log1p(math.exp(-d))
    if d <= 0.0:
        return b + math.log1p(math.exp(d))
    return d


def _logaddexp2(a: float, b: float) -> float:
    if a == b:
        return a + 1.0
    d = a - b
    if d > 0.0:
        return a + 1.4426950408889634 * math.log1p(math.exp2(-d))
    if d <= 0.0:
        return b + 1.4426950408889634 * math.log1p(math.exp2(d))
    return d


def _fmod(a: float, b: float) -> float:
    """np.fmod: C's fmod, as math.fmod where it does not raise."""
    try:
        return math.fmod(a, b)
    except ValueError:
        return float(np.fmod(a, b))


def _gammaln(a: float) -> float:
    """scipy.special.gammaln: math.lgamma, +inf at the poles (0, -1, -2...) and
    where it overflows, -inf at -inf (SciPy's value there)."""
    if a == -math.inf:
        return a
    try:
        return math.lgamma(a)
    except (ValueError, OverflowError):
        return math.inf


def _gamma(a: float) -> float:
    """scipy.special.gamma: math.gamma; +-inf at +-0, NaN at the negative integers
    and -inf, inf where it overflows (SciPy's values, and C99 tgamma's)."""
    try:
        return math.gamma(a)
    except ValueError:
        return math.copysign(math.inf, a) if a == 0.0 else math.nan
    except OverflowError:
        return math.inf


def _expit(a: float) -> float:
    """scipy.special.expit, 1 / (1 + exp(-a)), never overflowing: exp of -|a|."""
    if a >= 0.0:
        return 1.0 / (1.0 + math.exp(-a))
    e = math.exp(a)  # NaN stays NaN
    return e / (1.0 + e)


def _xlogy(a: float, b: float) -> float:
    """scipy.special.xlogy: 0 where a is 0 and b is not NaN, else a * log(b)."""
    if a == 0.0 and b == b:
        return 0.0
    try:
        return a * math.log(b)
    except (ValueError, OverflowError):
        return a * float(np.log(b))


def _xlog1py(a: float, b: float) -> float:
    """scipy.special.xlog1py: 0 where a is 0 and b is not NaN, else a * log1p(b)."""
    if a == 0.0 and b == b:
        return 0.0
    try:
        return a * math.log1p(b)
    except (ValueError, OverflowError):
        return a * float(np.log1p(b))


_INF = math.inf
_NINF = -math.inf
_NAN = math.nan
