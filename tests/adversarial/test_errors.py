"""Class 4: every error is a message, never a traceback.

Whatever the user's function, its file or the config does wrong, ``difgen`` prints
one ``difgen: error:`` message naming the user's ``file:line`` (and only the user's
files: never difgen's own modules or its launcher), exits 1 and writes nothing.
Ctrl-C raised by the function exits 130 with "nothing was written"; a closed pipe
is not an error. Strings from the config and file names that end up in a generated
file are escaped so that the file always parses.
"""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

from .adversarial_support import (
    SOURCE,
    Project,
    assert_refused,
    config_text,
    import_file,
    line_of,
    module_block,
    rows,
    subprocess_env,
    toml_value,
)

HEADER = "import numpy as np\n\n\n"

# (id, function source with the failing line marked "# <-", phrase)
RAISES = [
    (
        "value_error",
        'def f(x):\n    raise ValueError("bad input")  # <-',
        "ValueError: bad input",
    ),
    (
        "python_zero_division",
        "def f(x):\n    return x.sum() * (1 / 0)  # <-",
        "ZeroDivisionError",
    ),
    ("attribute", "def f(x):\n    return x.no_such_attribute  # <-", "AttributeError"),
    (
        "assertion",
        'def f(x):\n    assert x.shape == (4,), "wrong shape"  # <-',
        "AssertionError",
    ),
    ("memory", "def f(x):\n    raise MemoryError  # <-", "MemoryError"),
    ("recursion", "def f(x):\n    return f(x) + 1.0  # <-", "RecursionError"),
    (
        "module_not_found",
        "def f(x):\n    import no_such_module_xyz  # <-",
        "ModuleNotFoundError",
    ),
    ("key_error", 'def f(x):\n    return {}["missing"]  # <-', "KeyError"),
    ("type_error", 'def f(x):\n    return x + "text"  # <-', "cannot use"),
    ("stop_iteration", "def f(x):\n    return next(iter([]))  # <-", "StopIteration"),
    (
        "not_implemented",
        "def f(x):\n    raise NotImplementedError  # <-",
        "NotImplementedError",
    ),
    ("empty_message", "def f(x):\n    raise RuntimeError()  # <-", "RuntimeError"),
    (
        "multiline_message",
        'def f(x):\n    raise ValueError("one\\ntwo")  # <-',
        "ValueError",
    ),
    ("index_out_of_range", "def f(x):\n    return x[10]  # <-", "10"),
    (
        "shape_mismatch",
        "def f(x):\n    return (x + np.ones(4)).sum()  # <-",
        "broadcast",
    ),
    (
        "branch_on_value",
        # an `if` on a traced value becomes a cond; a return inside a loop is refused
        (
            "def f(x):\n    for i in range(2):\n        if x[0] > i:  # <-\n"
            "            return x.sum()\n    return -x.sum()"
        ),
        "np.where",
    ),
    ("float_of_traced", "def f(x):\n    return float(x[0])  # <-", "float()"),
    (
        "math_on_traced",
        "import math\n\n\ndef f(x):\n    return math.erf(x[0])  # <-",
        "math.erf",
    ),
    ("tolist", "def f(x):\n    return x.tolist()  # <-", "tolist"),
    (
        "unsupported_function",
        "def f(x):\n    return np.unique(x)[0]  # <-",
        "np.unique",
    ),
    ("generator_exit", "def f(x):\n    raise GeneratorExit  # <-", "GeneratorExit"),
    (
        "custom_base_exception",
        "class Stop(BaseException):\n    pass\n\n\ndef f(x):\n    raise Stop('halt')  # <-",
        "Stop",
    ),
]


def _locations_are_the_users(err: str, project: Project) -> None:
    """Every ``path:line`` in the message is difgen.toml or a file of the project:
    never difgen's own code, its launcher or pytest."""
    for path, _ in re.findall(r"([^\s()'\"`,;]+):(\d+)", err):
        if path in ("difgen.toml", "error"):
            continue
        assert path.startswith(str(project.root)), f"{path} in {err!r}"


@pytest.mark.parametrize(("name", "body", "phrase"), rows(RAISES))
def test_function_that_raises_is_a_message(
    project: Project, name: str, body: str, phrase: str
) -> None:
    source = HEADER + body + "\n"
    project.write(SOURCE, source)
    project.config(module_block(backend="trace"))
    before = project.snapshot()
    result = project.build()
    where = f"{project.root / SOURCE}:{line_of(source, '# <-')}"
    assert_refused(result, where, phrase, before=before, after=project.snapshot())
    _locations_are_the_users(result.err, project)


def test_exception_in_helper_module_names_the_helper_line(project: Project) -> None:
    """The innermost line of the user's code is named, in whichever file it is."""
    helper = 'def boom(x):\n    raise ValueError("from the helper")  # <-\n'
    project.write("helper.py", helper)
    project.write(SOURCE, "import helper\n\n\ndef f(x):\n    return helper.boom(x)\n")
    project.config(module_block(backend="trace"))
    result = project.build()
    where = f"{project.root / 'helper.py'}:{line_of(helper, '# <-')}"
    assert_refused(result, where, "from the helper")
    assert f"{project.root / SOURCE}:4" in result.err  # the function's definition


def test_keyboard_interrupt_in_function_exits_130(project: Project) -> None:
    """Ctrl-C while the function is traced: exit 130, nothing written."""
    project.write(SOURCE, "def f(x):\n    raise KeyboardInterrupt\n")
    project.config(module_block(backend="trace"))
    before = project.snapshot()
    result = project.build()
    assert result.status == 130
    assert "interrupted; nothing was written" in result.err
    assert "Traceback" not in result.err
    assert project.snapshot() == before


def test_keyboard_interrupt_in_second_module_writes_nothing(project: Project) -> None:
    """The first module was generated already; it is not written either."""
    project.write(
        SOURCE,
        "def f(x):\n    return x.sum()\n\n\ndef g(x):\n"
        "    raise KeyboardInterrupt\n",
    )
    project.config(
        module_block(name="first", backend="trace"),
        module_block(name="second", function="fn.py:g", backend="trace"),
    )
    before = project.snapshot()
    result = project.build()
    assert result.status == 130
    assert project.snapshot() == before


# (id, function body, phrase): what the function returns is no float64 array.
RETURNS = [
    ("none", "def f(x):\n    return None", "NoneType"),
    ("string", 'def f(x):\n    return "s"', "cannot use"),
    ("dict", 'def f(x):\n    return {"a": x, "b": "s"}', "str"),
    ("object", "def f(x):\n    return object()", "object"),
]


@pytest.mark.parametrize(("name", "body", "phrase"), rows(RETURNS))
def test_bad_return_value_is_a_message(
    project: Project, name: str, body: str, phrase: str
) -> None:
    source = HEADER + body + "\n"
    project.write(SOURCE, source)
    project.config(module_block(backend="trace"))
    before = project.snapshot()
    result = project.build()
    where = f"{project.root / SOURCE}:{line_of(source, 'def f')}"
    assert_refused(result, where, phrase, before=before, after=project.snapshot())
    _locations_are_the_users(result.err, project)


# (id, function body, phrase): a wrong kind of result is a config error at `function`.
RETURN_KINDS = [
    ("two_values", "def f(x):\n    return x.sum(), x.sum()", "returns 2 values"),
    ("bool", "def f(x):\n    return x.sum() > 0", "bool"),
    ("array_for_gradient", "def f(x):\n    return x * 2.0", "scalar output"),
]


@pytest.mark.parametrize(("name", "body", "phrase"), rows(RETURN_KINDS))
def test_wrong_kind_of_result_is_config_error(
    project: Project, name: str, body: str, phrase: str
) -> None:
    project.write(SOURCE, HEADER + body + "\n")
    text = project.config(module_block(backend="trace"))
    key = "operators = " if name == "array_for_gradient" else "function = "
    result = project.build()
    assert_refused(result, f"difgen.toml:{line_of(text, key)}:", phrase)


# (id, function reference, source of fn.py or None, phrase): loading fails.
LOADS = [
    ("builtin_print", "builtins:print", None, "builtin"),
    ("builtin_math_sin", "math:sin", None, "builtin"),
    ("numpy_ufunc", "numpy:sin", None, "builtin"),
    (
        "class",
        "fn.py:K",
        "class K:\n    def __init__(self, x):\n        pass\n",
        "a class",
    ),
    ("integer", "fn.py:N", "N = 3\n", "not a function"),
    (
        "missing_attribute",
        "fn.py:nothere",
        "def f(x):\n    return x.sum()\n",
        "no attribute",
    ),
    ("missing_file", "missing.py:f", None, "not found"),
    ("missing_package", "no_such_pkg_xyz.mod:f", None, "no module named"),
    ("malformed_ref", "fn.py", "def f(x):\n    return x.sum()\n", "must be"),
    ("double_colon", "fn.py:f:g", "def f(x):\n    return x.sum()\n", "must be"),
    (
        "import_raises",
        "fn.py:f",
        "X = 1 / 0\n\n\ndef f(x):\n    return x.sum()\n",
        "ZeroDivisionError",
    ),
    ("import_exits", "fn.py:f", "import sys\n\nsys.exit(4)\n", "SystemExit"),
    (
        "import_interrupt_free",
        "fn.py:f",
        "import missing_dependency_xyz\n",
        "ModuleNotFoundError",
    ),
    ("syntax_error", "fn.py:f", "def f(x):\n    return (x.sum()\n", "SyntaxError"),
    ("import_generator_exit", "fn.py:f", "raise GeneratorExit\n", "GeneratorExit"),
]


@pytest.mark.parametrize(("name", "ref", "source", "phrase"), rows(LOADS))
def test_unloadable_function_is_config_error(
    project: Project, name: str, ref: str, source: str | None, phrase: str
) -> None:
    """The error names ``difgen.toml:LINE`` of ``function`` and why."""
    if source is not None:
        project.write(SOURCE, source)
    text = project.config(module_block(function=ref, backend="trace"))
    before = project.snapshot()
    result = project.build()
    assert_refused(
        result,
        f"difgen.toml:{line_of(text, 'function = ')}:",
        phrase,
        before=before,
        after=project.snapshot(),
    )
    _locations_are_the_users(result.err, project)


def test_os_exit_at_import_is_an_error(project: Project) -> None:
    """``os._exit(0)`` while difgen imports the function file must not end the
    build with exit 0 and nothing written (subprocess: it would end pytest)."""
    project.write(SOURCE, "import os\n\nos._exit(0)\n")
    project.config(module_block(backend="trace"))
    result = project.run("build", "difgen.toml")
    assert result.status == 1, (result.status, result.out, result.err)
    assert "difgen: error:" in result.err and "Traceback" not in result.err


# (id, function signature, contexts, key whose line is named)
ARITY = [
    ("missing_context", "def f(x, p):", [], "function = "),
    ("extra_context", "def f(x):", [("p", (3,))], "contexts = "),
    (
        "two_contexts_one_parameter",
        "def f(x, p):",
        [("p", (3,)), ("q", (3,))],
        "contexts = ",
    ),
    ("keyword_only", "def f(*, x):", [], "function = "),
    ("keyword_only_context", "def f(x, *, p):", [("p", (3,))], "contexts = "),
    ("no_parameters", "def f():", [], "function = "),
]


@pytest.mark.parametrize(("name", "signature", "contexts", "key"), rows(ARITY))
def test_context_parameter_mismatch_is_config_error(
    project: Project, name: str, signature: str, contexts: list, key: str
) -> None:
    """Not a raw TypeError: the line of ``function`` or ``contexts`` and a hint."""
    project.write(SOURCE, f"{signature}\n    return 0.0\n")
    text = project.config(module_block(contexts=contexts, backend="trace"))
    result = project.build()
    assert_refused(
        result, f"difgen.toml:{line_of(text, key)}:", "one context per parameter"
    )


# (id, input line, phrase): shapes refused at config load, before any allocation.
SHAPES = [
    ("input_over_limit", "input = { shape = [100000, 10000] }", "limit of 134,217,728"),
    ("input_just_over", f"input = {{ shape = [{2**27 + 1}] }}", "limit of 134,217,728"),
    ("input_huge", "input = { shape = [4294967296, 4294967296] }", "limit"),
    ("negative", "input = { shape = [-1] }", "non-negative"),
    ("float", "input = { shape = [3.0] }", "non-negative integers"),
    ("string", 'input = { shape = "3" }', "non-negative integers"),
    ("bool", "input = { shape = [true] }", "non-negative integers"),
    ("dtype", 'input = { shape = [3], dtype = "float16" }', "float64"),
]


@pytest.mark.parametrize(("name", "line", "phrase"), rows(SHAPES))
def test_bad_shape_refused_at_config_load(
    project: Project, name: str, line: str, phrase: str
) -> None:
    project.write(SOURCE, "def f(x):\n    return x.sum()\n")
    block = module_block(backend="trace").replace("input = { shape = [3] }", line)
    text = project.config(block)
    result = project.build()
    assert_refused(result, f"difgen.toml:{line_of(text, 'input = ')}:", phrase)


def test_context_over_limit_refused_at_config_load(project: Project) -> None:
    project.write(SOURCE, "def f(x, p):\n    return x.sum()\n")
    text = project.config(
        module_block(contexts=[("p", (1000000, 1000))], backend="trace")
    )
    result = project.build()
    assert_refused(result, f"difgen.toml:{line_of(text, 'contexts = ')}:", "limit")


def test_shape_at_the_limit_loads(project: Project) -> None:
    """Exactly 2**27 elements is allowed: ``check`` loads it without tracing."""
    project.write(SOURCE, "def f(x):\n    return x.sum()\n")
    project.config(module_block(shape=(2**27,), backend="trace"))
    result = project.check()
    assert result.status == 1 and "missing" in result.out, result
    assert result.err == ""


# (id, config text, key or None, phrase): config mistakes at their line.
CONFIGS = [
    ("key_typo", 'operator = ["gradient"]\n', "operator", "unknown key 'operator'"),
    ("operator_typo", None, None, "did you mean 'gradient'"),
    ("empty_operators", None, None, "non-empty"),
    ("unknown_backend", 'backend = "jax"\n', "backend", "must be"),
    ("unknown_emit", 'emit = "simd"\n', "emit", "must be"),
    ("batch_zero", "batch = 0\n", "batch", ">= 1"),
    ("batch_string", 'batch = "2"\n', "batch", ">= 1"),
    ("sparse_without_jacobian", "sparse = true\n", "sparse", "sparse = true applies"),
    ("sparse_string", 'sparse = "yes"\n', "sparse", "true or false"),
    ("mode_typo", 'mode = "revers"\n', "mode", "did you mean 'reverse'"),
]
_OPERATOR_LINES = {"operator_typo": '["gradiant"]', "empty_operators": "[]"}


@pytest.mark.parametrize(("name", "extra", "key", "phrase"), rows(CONFIGS))
def test_config_mistake_is_located(
    project: Project, name: str, extra: str | None, key: str | None, phrase: str
) -> None:
    project.write(SOURCE, "def f(x):\n    return x.sum()\n")
    block = module_block()
    if name in _OPERATOR_LINES:
        block = block.replace('["gradient"]', _OPERATOR_LINES[name])
        key = "operators"
    if name == "key_typo":
        block = block.replace('operators = ["gradient"]\n', "")
    text = project.config(block + (extra or ""))
    result = project.build()
    assert_refused(result, f"difgen.toml:{line_of(text, f'{key} = ')}:", phrase)


def test_toml_syntax_error_is_located(project: Project) -> None:
    project.write(
        "difgen.toml", '[difgen]\noutput_dir = "out"\n\n[[module]]\nname = "m\n'
    )
    result = project.build()
    assert_refused(result, "difgen.toml:5", "")


def test_missing_config_file(project: Project) -> None:
    result = project.build()
    assert_refused(result, "difgen.toml", "not found")


def test_config_is_a_directory(project: Project) -> None:
    (project.root / "difgen.toml").mkdir()
    result = project.build()
    assert_refused(result, "difgen.toml", "cannot read")


def test_config_not_utf8(project: Project) -> None:
    (project.root / "difgen.toml").write_bytes(b'[difgen]\noutput_dir = "\xff\xfe"\n')
    result = project.build()
    assert_refused(result, "difgen.toml", "cannot read")


def test_unknown_module_on_command_line(project: Project) -> None:
    project.write(SOURCE, "def f(x):\n    return x.sum()\n")
    project.config(module_block(name="alpha", backend="trace"))
    result = project.build("--module", "beta")
    assert_refused(result, "difgen.toml", "no module named 'beta'", "alpha")


# --------------------------------------------------------------------- closed pipes


def _closed_stdout(project: Project, *argv: str) -> tuple[int, str]:
    """Run difgen with stdout a pipe whose reader is gone before it writes."""
    process = project.popen(*argv)
    assert process.stdout is not None
    process.stdout.close()
    _, err = process.communicate(timeout=60)
    return process.returncode, err


LONG_FUNCTION = (
    "import numpy as np\n\n\ndef f(x):\n"
    + "".join(f"    x = np.sin(x) * {i}.0 + x\n" for i in range(300))
    + "    return x.sum()\n"
)


@pytest.mark.parametrize("command", ["ir", "build"])
def test_closed_pipe_is_not_an_error(project: Project, command: str) -> None:
    """``difgen ir ... | head`` and ``difgen build ... | head``: exit 0, no
    traceback, and the build still wrote its module."""
    project.write(SOURCE, "def f(x):\n    return (x * x).sum()\n")
    project.config(module_block(backend="trace", emit="vector"))
    argv = (
        ["ir", "difgen.toml", "--module", "mod"]
        if command == "ir"
        else ["build", "difgen.toml"]
    )
    status, err = _closed_stdout(project, *argv)
    assert status == 0, err
    assert "Traceback" not in err and "BrokenPipe" not in err, err
    if command == "build":
        assert project.output().is_file()


def test_ir_piped_to_head(project: Project) -> None:
    """The shell form itself: ``difgen ir difgen.toml --module mod | head -n 1``."""
    project.write(SOURCE, LONG_FUNCTION)
    project.config(module_block(backend="trace"))
    command = (
        f"{shlex.quote(sys.executable)} -m difgen ir difgen.toml --module mod "
        "| head -n 1"
    )
    completed = subprocess.run(  # noqa: PLW1510 - the status is asserted
        ["bash", "-o", "pipefail", "-c", command],
        cwd=project.root,
        capture_output=True,
        text=True,
        timeout=60,
        env=subprocess_env(),
    )
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout.startswith("{ lambda")
    assert "Traceback" not in completed.stderr


# ----------------------------------------------------------- escaping in the output


# (id, name of the function file): it appears in the generated docstring.
FILE_NAMES = [
    ("backslash_x", "a\\xb.py"),
    ("backslash_n_name", "a\\N.py"),
    ("backslash_b", "a\\b.py"),
    ("triple_quote", 'q"""q.py'),
    ("single_triple_quote", "q'''q.py"),
    ("newline", "new\nline.py"),
    ("tab", "t\tab.py"),
    ("braces", "{{x}}.py"),
    ("unicode", "fün.py"),
    ("trailing_backslash", "end\\.py"),
]


def _compiles_cleanly(path: Path) -> None:
    """The generated file compiles with warnings as errors: an invalid escape
    sequence is a warning today and a SyntaxError in a later Python."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        compile(path.read_text(encoding="utf-8"), str(path), "exec")


@pytest.mark.parametrize(("name", "filename"), rows(FILE_NAMES))
def test_file_name_in_generated_module_is_escaped(
    project: Project, name: str, filename: str
) -> None:
    """The module builds, imports, names the function verbatim in its docstring and
    computes the gradient."""
    project.write(filename, "def f(x):\n    return (x * x).sum()\n")
    ref = f"{filename}:f"
    project.config(module_block(function=ref, backend="trace"))
    result = project.build()
    assert result.status == 0, result.err
    _compiles_cleanly(project.output())
    module = import_file(project.output())
    assert ref in (module.__doc__ or "")
    np.testing.assert_array_equal(
        module.gradient(np.array([1.0, 2.0, 3.0])), [2.0, 4.0, 6.0]
    )


CONFIG_NAMES = [
    ("triple_quote", 'c"""c.toml'),
    ("backslash", "c\\d.toml"),
    ("single_triple_quote", "c'''.toml"),
]


@pytest.mark.parametrize(("name", "config_name"), rows(CONFIG_NAMES))
def test_config_file_name_in_generated_module_is_escaped(
    project: Project, name: str, config_name: str
) -> None:
    """The config path appears in the "Regenerate with" line."""
    project.write(SOURCE, "def f(x):\n    return (x * x).sum()\n")
    project.write(config_name, config_text(module_block(backend="trace")))
    result = project.cli("build", config_name)
    assert result.status == 0, result.err
    _compiles_cleanly(project.output())
    module = import_file(project.output())
    assert config_name in (module.__doc__ or "")


def test_output_dir_with_quotes_and_backslashes(project: Project) -> None:
    """output_dir is a path relative to the config; odd characters are fine."""
    project.write(SOURCE, "def f(x):\n    return (x * x).sum()\n")
    output_dir = 'o"u\\t'
    project.write(
        "difgen.toml",
        f"[difgen]\noutput_dir = {toml_value(output_dir)}\n\n"
        + module_block(backend="trace"),
    )
    result = project.build()
    assert result.status == 0, result.err
    module = import_file(project.root / output_dir / "mod.py")
    np.testing.assert_array_equal(
        module.gradient(np.array([1.0, 2.0, 3.0])), [2.0, 4.0, 6.0]
    )
