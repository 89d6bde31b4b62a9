"""Messages that say what is wrong, where, in the user's terms (issue 20, items 4-5).

Each case is met as a new user would meet it; each asserts the key parts of the
text: the user's ``file:line`` (never a library's or difgen's), the module the
unsupported function belongs to, the config key.
"""

from __future__ import annotations

import pytest

from difgen.core import location

from .adversarial_support import SOURCE, Project, assert_refused, line_of, module_block


def test_a_library_call_is_named_at_the_users_line(
    project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A library written in NumPy that reaches an unsupported function: the message
    names the user's line that called it and the library function by its public
    name (the package that exports it), not the library's own line."""
    package = project.root / "fancylib"
    monkeypatch.setattr(location, "_LIBRARY_DIRS", (str(package) + "/",))
    monkeypatch.setattr(location, "_LIBRARY", {})
    project.write("fancylib/__init__.py", "from fancylib._impl import smooth\n")
    project.write(
        "fancylib/_impl.py",
        "import numpy as np\n\n\ndef smooth(x):\n    return np.histogram(x)[0]\n",
    )
    source = (
        "import numpy as np\nimport fancylib\n\n\ndef f(x):\n"
        "    y = x * 2.0\n    return fancylib.smooth(y).sum()  # <-\n"
    )
    project.write(SOURCE, source)
    project.config(module_block(backend="trace"))
    result = project.build()
    where = f"{project.root / SOURCE}:{line_of(source, '# <-')}"
    assert_refused(
        result, f"{where} (in fancylib.smooth): np.histogram is not supported"
    )
    assert "_impl.py" not in result.err


def test_an_exception_inside_a_library_names_the_users_call(
    project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A library raising (not a refusal of difgen's): the message also names the
    library function and the user's line that called it."""
    package = project.root / "fancylib"
    monkeypatch.setattr(location, "_LIBRARY_DIRS", (str(package) + "/",))
    monkeypatch.setattr(location, "_LIBRARY", {})
    project.write("fancylib/__init__.py", "from fancylib._impl import smooth\n")
    project.write(
        "fancylib/_impl.py",
        "def smooth(x):\n    return _check(x)\n\n\ndef _check(x):\n"
        '    raise ValueError("bad window")\n',
    )
    source = (
        "import numpy as np\nimport fancylib\n\n\ndef f(x):\n"
        "    return fancylib.smooth(x * 2.0).sum()  # <-\n"
    )
    project.write(SOURCE, source)
    project.config(module_block(backend="trace"))
    result = project.build()
    where = f"{project.root / SOURCE}:{line_of(source, '# <-')}"
    assert_refused(result, "ValueError: bad window")
    assert f", inside fancylib.smooth called at {where}" in result.err


def _refused(project: Project, body: str, **options: object) -> tuple[str, str]:
    """Build ``body`` (its failing line marked ``# <-``): the message and the
    ``file:line`` it must name."""
    source = "import numpy as np\nimport scipy.special\n\nBOUND = np.zeros((4, 4))\n"
    source += "\n\n" + body + "\n"
    project.write(SOURCE, source)
    project.config(module_block(backend="trace", **options))  # type: ignore[arg-type]
    result = project.build()
    where = f"{project.root / SOURCE}:{line_of(source, '# <-')}"
    assert_refused(result, where)
    return result.err, where


# gammaln and expit are supported now: j0 is not (yet), and SciPy's exp2 is not
# NumPy's exp2, which a lookup by the ufunc's name alone would have traced
@pytest.mark.parametrize("name", ["j0", "exp2"])
def test_a_scipy_ufunc_is_named_by_its_module(project: Project, name: str) -> None:
    err, where = _refused(
        project, f"def f(x):\n    return scipy.special.{name}(x).sum()  # <-"
    )
    assert f"{where}: scipy.special.{name} is not supported by difgen's tracer" in err
    assert f"np.{name}" not in err


@pytest.mark.parametrize(
    "store",
    [
        "U[1:-1, 1:-1] = x.reshape(2, 2)  # <-",
        "U[0, 0] = x[0]  # <-",
        "U[1] = x  # <-",
    ],
)
def test_a_store_into_an_untraced_copy_says_what_to_write(
    project: Project, store: str
) -> None:
    """``BOUND.copy()`` of a module's array is a plain NumPy array (difgen cannot
    see ``ndarray.copy``): storing a traced value into it is refused with the
    spelling that traces, never NumPy's 'setting an array element with a
    sequence' alone."""
    err, where = _refused(
        project,
        f"def f(x):\n    U = BOUND.copy()\n    {store}\n    return U.sum()",
        shape=[4],
    )
    assert f"{where}: a traced value is " in err
    assert "np.copy(ARRAY) or np.array(ARRAY)" in err
    assert "calling the function at build time raised" not in err


@pytest.mark.parametrize("call", ["float(x[0])", "int(x[0])"])
def test_a_conversion_to_a_python_number_does_not_blame_branches(
    project: Project, call: str
) -> None:
    """Branches on traced values are traced now: the message about ``float()``
    and ``int()`` no longer tells the user to replace them with np.where."""
    err, where = _refused(project, f"def f(x):\n    return x * {call}  # <-")
    kind = call.split("(")[0]
    assert f"{where}: {kind}() " in err
    assert "cannot become a Python number" in err
    assert "np.where" not in err and "cannot be traced" not in err


def test_a_wrong_input_shape_names_the_config_key_and_line(project: Project) -> None:
    """The function expects 4 values, the config says 3: the broadcasting error at
    the user's line goes on to name ``input.shape`` and its line in difgen.toml."""
    source = (
        "import numpy as np\n\n\ndef f(x):\n    return (x * np.ones(4)).sum()  # <-\n"
    )
    project.write(SOURCE, source)
    config = project.config(module_block(backend="trace", shape=[3]))
    result = project.build()
    where = f"{project.root / SOURCE}:{line_of(source, '# <-')}"
    assert_refused(result, where, "broadcast")
    assert f"input.shape = [3] at difgen.toml:{line_of(config, 'input =')}" in (
        result.err
    )


def test_a_method_numpy_arrays_lack_is_refused(project: Project) -> None:
    """``x.cos()`` fails under NumPy (ndarray has no ``cos``): difgen refuses it
    too, naming the user's line and what to write."""
    err, where = _refused(project, "def f(x):\n    return x.cos().sum()  # <-")
    assert f"{where}: NumPy arrays have no method cos: use np.cos(x)" in err
