"""NumPy's semantics for straight-line code on Python floats.

Python's float arithmetic and ``math`` raise where NumPy returns NaN or inf:
``1.0 / 0.0`` is a ZeroDivisionError, ``math.log(0.0)`` and ``math.sin(inf)`` a
ValueError, ``math.exp(1000.0)`` and ``1e200 ** 3`` an OverflowError, and
``(-8.0) ** (1 / 3)`` is a complex number. Scalar emission calls these helpers
instead: each takes the fast ``math`` path and, only where it raises, returns what
NumPy computes for the same float (so NaN, inf and the sign of an infinity are
NumPy's own). A generated module defines the helpers its code uses, and only those.

>>> sorted(used_helpers("t0 = _div(x_0, _log(x_1))"))
['_div', '_log']
"""

from __future__ import annotations

import math
import re

FAST_UNARY = {
    # SymPy name: (fast path, NumPy function)
    "sin": ("math.sin", "np.sin"),
    "cos": ("math.cos", "np.cos"),
    "tan": ("math.tan", "np.tan"),
    "asin": ("math.asin", "np.arcsin"),
    "acos": ("math.acos", "np.arccos"),
    "sinh": ("math.sinh", "np.sinh"),
    "cosh": ("math.cosh", "np.cosh"),
    "acosh": ("math.acosh", "np.arccosh"),
    "atanh": ("math.atanh", "np.arctanh"),
    "exp": ("math.exp", "np.exp"),
    "expm1": ("math.expm1", "np.expm1"),
    "log": ("math.log", "np.log"),
    "log1p": ("math.log1p", "np.log1p"),
    "sqrt": ("math.sqrt", "np.sqrt"),
}
"""Functions whose ``math`` version raises on some floats (domain, overflow)."""

SAFE = {"atan": "math.atan", "tanh": "math.tanh", "asinh": "math.asinh"}
"""Functions whose ``math`` version never raises: printed as they are."""


NUMPY_UNARY = {"log2": "np.log2", "log10": "np.log10", "exp2": "np.exp2"}
"""Functions whose ``math`` version (or ``2.0 ** x``) differs from NumPy's in the
last bit on some floats (``math.log10`` on about one in seven): scalar code calls
NumPy itself, one float at a time."""


def helper(name: str) -> str:
    """The generated name of the safe version of ``name`` (``log`` -> ``_log``)."""
    return f"_{name}"


def _unary_source(name: str) -> str:
    fast, slow = FAST_UNARY[name]
    return (
        f"def {helper(name)}(a: float) -> float:\n"
        f"    try:\n"
        f"        return {fast}(a)\n"
        f"    except (ValueError, OverflowError):\n"
        f"        return float({slow}(a))\n"
    )


HELPERS: dict[str, str] = {helper(name): _unary_source(name) for name in FAST_UNARY}
for _name, _numpy in NUMPY_UNARY.items():
    HELPERS[helper(_name)] = (
        f"def {helper(_name)}(a: float) -> float:\n    return float({_numpy}(a))\n"
    )
HELPERS["_hypot"] = (
    "def _hypot(a: float, b: float) -> float:\n"
    '    """np.hypot (math.hypot differs in the last bit on some floats)."""\n'
    "    return float(np.hypot(a, b))\n"
)
HELPERS["_div"] = (
    "def _div(a: float, b: float) -> float:\n"
    "    try:\n"
    "        return a / b\n"
    "    except ZeroDivisionError:\n"
    "        return float(np.divide(a, b))\n"
)
HELPERS["_pow"] = (
    "def _pow(a: float, b: float) -> float:\n"
    "    try:\n"
    "        return math.pow(a, b)\n"
    "    except (ValueError, OverflowError):\n"
    "        return float(np.power(a, b))\n"
)
HELPERS["_maximum"] = (
    "def _maximum(a: float, b: float) -> float:\n"
    '    """np.maximum: NaN if either is NaN; the second of equal values."""\n'
    "    return a if a > b or a != a else b\n"
)
HELPERS["_minimum"] = (
    "def _minimum(a: float, b: float) -> float:\n"
    '    """np.minimum: NaN if either is NaN; the second of equal values."""\n'
    "    return a if a < b or a != a else b\n"
)
HELPERS["_sign"] = (
    "def _sign(a: float) -> float:\n"
    '    """np.sign: NaN stays NaN."""\n'
    "    return float((a > 0.0) - (a < 0.0)) if a == a else a\n"
)
"""Each helper's source, by its generated name."""


def _rounding_source(name: str, fast: str) -> str:
    """``np.floor``-like: ``math`` returns an int (raising on inf and NaN, which
    NumPy returns unchanged) and loses the sign of a zero result (``np.ceil(-0.5)``
    is ``-0.0``), which the sign of the argument restores."""
    return (
        f"def {helper(name)}(a: float) -> float:\n"
        f"    if a - a != 0.0:  # inf or NaN: unchanged, as in NumPy\n"
        f"        return a\n"
        f"    r = float({fast}(a))\n"
        f"    return r if r != 0.0 else math.copysign(0.0, a)\n"
    )


for _name, _fast in {
    "floor": "math.floor",
    "ceil": "math.ceil",
    "trunc": "math.trunc",
    "rint": "round",
}.items():
    HELPERS[helper(_name)] = _rounding_source(_name, _fast)
HELPERS["_remainder"] = (
    "def _remainder(a: float, b: float) -> float:\n"
    '    """np.remainder: Python\'s % where it does not raise (the same sign rule)."""\n'
    "    if b != 0.0 and a - a == 0.0 and b - b == 0.0:\n"
    "        return a % b\n"
    "    return float(np.remainder(a, b))\n"
)
for _name, _same, _exp, _scale in (
    ("_logaddexp", "0.6931471805599453", "math.exp", ""),
    ("_logaddexp2", "1.0", "math.exp2", "1.4426950408889634 * "),
):
    # NumPy's npy_logaddexp(2), with the same libm calls, so the same float
    HELPERS[_name] = (
        f"def {_name}(a: float, b: float) -> float:\n"
        f"    if a == b:\n"
        f"        return a + {_same}\n"
        f"    d = a - b\n"
        f"    if d > 0.0:\n"
        f"        return a + {_scale}math.log1p({_exp}(-d))\n"
        f"    if d <= 0.0:\n"
        f"        return b + {_scale}math.log1p({_exp}(d))\n"
        f"    return d\n"
    )
HELPERS["_fmod"] = (
    "def _fmod(a: float, b: float) -> float:\n"
    '    """np.fmod: C\'s fmod, as math.fmod where it does not raise."""\n'
    "    try:\n"
    "        return math.fmod(a, b)\n"
    "    except ValueError:\n"
    "        return float(np.fmod(a, b))\n"
)


CONSTANTS = {"_INF": "math.inf", "_NINF": "-math.inf", "_NAN": "math.nan"}
"""Non-finite constants of the user's computation (``x * np.inf``, ``np.log(0.0)``),
named: in symbolic expressions they are opaque symbols, so SymPy cannot fold them
as if they were ordinary numbers."""
for _name, _value in CONSTANTS.items():
    HELPERS[_name] = f"{_name} = {_value}\n"

NAMES = tuple(HELPERS)
_USE = re.compile(r"\b(" + "|".join(map(re.escape, NAMES)) + r")\b")


def used_helpers(source: str) -> list[str]:
    """The helpers and constants ``source`` uses, in a fixed order."""
    found = set(_USE.findall(source))
    return [name for name in NAMES if name in found]


def constant_name(value: float) -> str:
    """The name of a non-finite constant (``inf`` -> ``_INF``)."""
    if math.isnan(value):
        return "_NAN"
    return "_INF" if value > 0 else "_NINF"


def definitions(source: str) -> list[str]:
    """The source of every helper ``source`` calls."""
    return [HELPERS[name] for name in used_helpers(source)]
