"""Config reading: every error names the file, the line and what was expected."""

from __future__ import annotations

import dataclasses
import inspect
import sys
import textwrap
from pathlib import Path

import pytest

from difgen.config import (
    ArraySpec,
    ContextSpec,
    ModuleSpec,
    check_output_fit,
    load_config,
    split_function_ref,
)
from difgen.errors import ConfigError
from difgen.load import function_source_files, load_function
from difgen.operators import REQUESTABLE
from difgen.toml_lines import Locator

# A valid module table; cases below append to it or replace one of its lines.
MODULE = """\
[[module]]
name = "seed"
function = "fn.py:f"
operators = ["derivative"]
input = { shape = [] }
"""


@pytest.fixture(autouse=True)
def forget_user_modules(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test imports its own ``fnmod`` from its own directory."""
    monkeypatch.delitem(sys.modules, "fnmod", raising=False)
    yield
    sys.modules.pop("fnmod", None)


FN_SOURCE = "import numpy as np\n\n\ndef f(x):\n    return np.sin(x)\n\n\nvalue = 3\n"


def with_line(old: str, new: str) -> str:
    """MODULE with one line replaced."""
    assert old in MODULE
    return MODULE.replace(old, new)


# (id, config text, expected line or None, expected text in the message)
BAD_CONFIGS = [
    ("top-level-key", "foo = 1\n" + MODULE, 1, "unknown key 'foo' at top level"),
    (
        "difgen-key",
        '[difgen]\noutputdir = "out"\n\n' + MODULE,
        2,
        "unknown key 'outputdir' in [difgen]; did you mean 'output_dir'?",
    ),
    (
        "module-key",
        MODULE + "bach = 2\n",
        6,
        "unknown key 'bach' in [[module]]; did you mean 'batch'? expected one of:",
    ),
    (
        "input-key",
        with_line("input = { shape = [] }", 'input = { shape = [], dtyp = "float64" }'),
        5,
        "unknown key 'dtyp' in input; did you mean 'dtype'?",
    ),
    (
        "context-key",
        MODULE + 'contexts = [\n  { name = "a", shape = [2] },\n'
        '  { name = "b", shap = [3] },\n]\n',
        8,
        "unknown key 'shap' in contexts[1]; did you mean 'shape'?",
    ),
    (
        "context-key-subtable",
        MODULE + '\n[[module.contexts]]\nname = "a"\nshape = [2]\nsize = 3\n',
        10,
        "unknown key 'size' in contexts[0]",
    ),
    (
        "input-subtable-key",
        MODULE.replace("input = { shape = [] }\n", "")
        + "[module.input]\nshape = []\nfoo = 1\n",
        7,
        "unknown key 'foo' in input",
    ),
    ("bad-type", with_line('name = "seed"', "name = 3"), 2, "'name' must be a string"),
    (
        "bool-as-int",
        MODULE + "batch = true\n",
        6,
        "'batch' must be an integer >= 1; got true (boolean)",
    ),
    ("bad-batch", MODULE + "batch = 0\n", 6, "'batch' must be an integer >= 1; got 0"),
    (
        "float-batch",
        MODULE + "batch = 2.0\n",
        6,
        "'batch' must be an integer >= 1; got 2.0 (float)",
    ),
    (
        "unknown-operator",
        with_line('["derivative"]', '["derivative", "gradeint"]'),
        4,
        (
            "unknown operator 'gradeint'; did you mean 'gradient'? expected one of: "
            "pushforward, "
        ),
    ),
    (
        "operator-not-string",
        with_line('["derivative"]', '["derivative", 1]'),
        4,
        "'operators' must contain strings; got 1 (integer)",
    ),
    (
        "operators-empty",
        with_line('["derivative"]', "[]"),
        4,
        "'operators' must be a non-empty array of operator names",
    ),
    (
        "derivative-of-vector",
        with_line("shape = []", "shape = [3]"),
        4,
        (
            "operator 'derivative' needs a scalar input (input.shape = []), but "
            "input.shape is [3]"
        ),
    ),
    (
        "non-identifier-name",
        with_line('name = "seed"', 'name = "my-seed"'),
        2,
        (
            "'name' names the generated module NAME.py, and 'my-seed' is not an ASCII "
            'Python identifier that is not a keyword; got "my-seed"'
        ),
    ),
    (
        "keyword-name",
        with_line('name = "seed"', 'name = "class"'),
        2,
        (
            "'class' is not an ASCII Python identifier that is not a keyword; "
            'got "class"'
        ),
    ),
    (
        "duplicate-name",
        MODULE + "\n" + MODULE,
        8,
        "duplicate module name 'seed' (first defined in the [[module]] at line 1)",
    ),
    (
        "bad-dtype",
        with_line("{ shape = [] }", '{ shape = [], dtype = "float16" }'),
        5,
        "'input.dtype' is \"float16\" (string), but expected one of float64, float32",
    ),
    (
        "float32-sympy",
        with_line("{ shape = [] }", '{ shape = [], dtype = "float32" }'),
        5,
        'input.dtype = "float32" needs backend = "trace": the sympy backend prints',
    ),
    (
        "float32-sympy-named",
        with_line("{ shape = [] }", '{ shape = [], dtype = "float32" }')
        + 'backend = "sympy"\n',
        6,
        'input.dtype = "float32" needs backend = "trace"',
    ),
    (
        "float32-scalar",
        with_line("{ shape = [] }", '{ shape = [], dtype = "float32" }')
        + 'backend = "trace"\nemit = "scalar"\n',
        7,
        "straight-line scalar code computes with Python floats, which are float64",
    ),
    (
        "float32-sparse",
        MODULE.replace('["derivative"]', '["jacobian"]').replace(
            "{ shape = [] }", '{ shape = [3], dtype = "float32" }'
        )
        + 'backend = "trace"\nsparse = true\n',
        7,
        "sparse = true is float64 only in this version",
    ),
    (
        "accumulate-float64-module",
        MODULE + 'backend = "trace"\naccumulate = "float64"\n',
        7,
        'accumulate = "float64" applies to float32 modules',
    ),
    (
        "accumulate-value",
        with_line("{ shape = [] }", '{ shape = [], dtype = "float32" }')
        + 'backend = "trace"\naccumulate = "float16"\n',
        7,
        "'accumulate' must be \"float64\"",
    ),
    (
        "float32-float64-context",
        with_line("{ shape = [] }", '{ shape = [], dtype = "float32" }')
        + 'backend = "trace"\ncontexts = [{ name = "c", shape = [2] }]\n',
        7,
        (
            "context 'c' is float64 in a float32 module: NumPy would promote the "
            "float32 input to float64"
        ),
    ),
    (
        "context-dtype",
        MODULE + 'contexts = [{ name = "c", shape = [], dtype = "int64" }]\n',
        6,
        (
            "run-time integer or boolean data (indices, masks) cannot be lowered to "
            'scalar code; use backend = "trace"'
        ),
    ),
    (
        "context-dtype-unknown",
        MODULE + 'contexts = [{ name = "c", shape = [], dtype = "int32" }]\n',
        6,
        (
            "'contexts[0].dtype' is \"int32\" (string), but expected one of "
            "float64, float32, int64, bool"
        ),
    ),
    (
        "sparse-without-matrix-operator",
        MODULE + "sparse = true\n",
        6,
        "sparse = true applies to the jacobian and hessian operators",
    ),
    ("sparse-type", MODULE + 'sparse = "no"\n', 6, "'sparse' must be true or false"),
    (
        "bad-shape",
        with_line("shape = []", "shape = [-1]"),
        5,
        "'input.shape' must be an array of non-negative integers ([] for a scalar)",
    ),
    (
        "shape-of-bools",
        with_line("shape = []", "shape = [true]"),
        5,
        "'input.shape' must be an array of non-negative integers",
    ),
    (
        "shape-missing",
        with_line("{ shape = [] }", '{ dtype = "float64" }'),
        5,
        "input is missing the required key 'shape'",
    ),
    (
        "input-not-table",
        with_line("{ shape = [] }", "[]"),
        5,
        "'input' must be a table like { shape = [3] }",
    ),
    (
        "backend",
        MODULE + 'backend = "jax"\n',
        6,
        '\'backend\' must be "sympy" or "trace"; got "jax" (string)',
    ),
    (
        "mode-suggestion",
        MODULE + 'mode = "forwards"\n',
        6,
        (
            '\'mode\' must be "auto" or "forward" or "reverse"; got "forwards" (string); '
            "did you mean 'forward'?"
        ),
    ),
    ("emit", MODULE + 'emit = "fast"\n', 6, '\'emit\' must be "auto" or "scalar"'),
    (
        "missing-required",
        with_line('operators = ["derivative"]\n', ""),
        1,
        "[[module]] is missing the required key 'operators'",
    ),
    (
        "reserved-context",
        MODULE + 'contexts = [{ name = "out", shape = [] }]\n',
        6,
        (
            "'contexts[0].name' becomes a parameter of every generated function, and "
            "'out' is a name the generated code uses itself"
        ),
    ),
    (
        "duplicate-context",
        MODULE + 'contexts = [\n  { name = "c", shape = [] },\n'
        '  { name = "c", shape = [] }\n]\n',
        8,
        "duplicate context name 'c'",
    ),
    (
        "contexts-not-array",
        MODULE + 'contexts = { name = "c", shape = [] }\n',
        6,
        "'contexts' must be an array of tables",
    ),
    (
        "module-not-array",
        MODULE.replace("[[module]]", "[module]"),
        1,
        "'module' must be an array of tables: [[module]]",
    ),
    ("no-modules", "[difgen]\n", None, "no [[module]] tables: nothing to build"),
    (
        "output-dir-type",
        "[difgen]\noutput_dir = 1\n" + MODULE,
        2,
        "'output_dir' must be a non-empty string",
    ),
    (
        "toml-syntax",
        with_line('name = "seed"', 'name = "seed'),
        2,
        "(at line 2, column",
    ),
    (
        "function-syntax",
        with_line('"fn.py:f"', '"fn"'),
        3,
        (
            '\'function\' must be "package.module:attr" or "path/to/file.py:attr"; '
            'got "fn"'
        ),
    ),
    (
        "function-not-importable",
        with_line('"fn.py:f"', '"no_such_module_xyz.sub:f"'),
        3,
        (
            "cannot load function 'no_such_module_xyz.sub:f': no module named "
            "'no_such_module_xyz'"
        ),
    ),
    (
        "function-file-missing",
        with_line('"fn.py:f"', '"models/missing.py:f"'),
        3,
        "cannot load function 'models/missing.py:f': file ",
    ),
    (
        "function-attribute-missing",
        with_line('"fn.py:f"', '"fn.py:g"'),
        3,
        "cannot load function 'fn.py:g': fn.py has no attribute 'g'",
    ),
    (
        "function-module-attribute-missing",
        with_line('"fn.py:f"', '"fnmod:g"'),
        3,
        "cannot load function 'fnmod:g': fnmod has no attribute 'g'",
    ),
    (
        "function-not-callable",
        with_line('"fn.py:f"', '"fn.py:value"'),
        3,
        (
            "cannot load function 'fn.py:value': 'value' is not a function (it has "
            "type int)"
        ),
    ),
    (
        "checkpoint-zero",
        MODULE + "checkpoint = 0\n",
        6,
        "'checkpoint' must be a positive number of steps",
    ),
    (
        "checkpoint-unknown",
        MODULE + 'checkpoint = "binomial"\n',
        6,
        '"revolve" (binomial checkpointing, keeping `snapshots` states); got',
    ),
    (
        "snapshots-without-revolve",
        MODULE + "checkpoint = 10\nsnapshots = 4\n",
        7,
        'snapshots applies to checkpoint = "revolve"',
    ),
    (
        "snapshots-one",
        MODULE + 'checkpoint = "revolve"\nsnapshots = 1\n',
        7,
        "'snapshots' must be a number of states of at least 2; got 1",
    ),
    (
        "function-import-raises",
        with_line('"fn.py:f"', '"broken.py:f"'),
        3,
        "importing ",
    ),
]


@pytest.mark.parametrize(
    "text, line, expected",
    [case[1:] for case in BAD_CONFIGS],
    ids=[case[0] for case in BAD_CONFIGS],
)
def test_bad_config(tmp_path: Path, text: str, line: int | None, expected: str) -> None:
    (tmp_path / "fn.py").write_text(FN_SOURCE)
    (tmp_path / "fnmod.py").write_text(FN_SOURCE)
    (tmp_path / "broken.py").write_text("x = 1\ny = 1 / 0\n")
    path = tmp_path / "difgen.toml"
    path.write_text(text)
    with pytest.raises(ConfigError) as info:
        for spec in load_config(path).modules:
            load_function(spec)
    message = str(info.value)
    where = f"{path}:{line}: " if line is not None else f"{path}: "
    assert message.startswith(where), message
    assert expected in message, message
    assert info.value.line == line


def test_missing_config_file(tmp_path: Path) -> None:
    path = tmp_path / "nope.toml"
    with pytest.raises(ConfigError, match="config file not found") as info:
        load_config(path)
    assert str(info.value).startswith(f"{path}: ")


def test_import_error_names_the_user_line(tmp_path: Path) -> None:
    (tmp_path / "broken.py").write_text("x = 1\ny = 1 / 0\n")
    path = tmp_path / "difgen.toml"
    path.write_text(with_line('"fn.py:f"', '"broken.py:f"'))
    (spec,) = load_config(path).modules
    with pytest.raises(ConfigError) as info:
        load_function(spec)
    assert "raised ZeroDivisionError: division by zero" in str(info.value)
    assert "broken.py:2)" in str(info.value)


FULL = """\
# the seed example
[difgen]
output_dir = "../generated"

[[module]]
name = "seed"
function = "fn.py:f"
backend = "trace"
mode = "reverse"
operators = ["pullback", "f", "derivative", "pullback", "pushforward"]
input = { shape = [], dtype = "float64" }
contexts = [
  { name = "data", shape = [100, 3] },
  { name = "w", shape = [3], dtype = "float64" },
]
batch = 2
sparse = false
emit = "scalar"

[[module]]
name = "vec"
function = "fnmod:f"
operators = [
    "hessian",
    "jacobian",
]

[module.input]
shape = [3, 2]

[[module.contexts]]
name = "c"
shape = []
"""


def test_good_config(tmp_path: Path) -> None:
    root = tmp_path / "proj"
    root.mkdir()
    path = root / "difgen.toml"
    path.write_text(FULL)
    config = load_config(path)
    assert config.path == path
    assert config.output_dir == tmp_path / "generated"
    seed, vec = config.modules
    assert dataclasses.replace(seed, key_lines=()) == ModuleSpec(
        name="seed",
        function="fn.py:f",
        backend="trace",
        mode="reverse",
        operators=("pushforward", "pullback", "derivative"),
        input=ArraySpec(shape=()),
        contexts=(ContextSpec("data", (100, 3)), ContextSpec("w", (3,))),
        batch=2,
        sparse=False,
        emit="scalar",
        config_path=path,
        line=5,
    )
    assert dataclasses.replace(vec, key_lines=()) == ModuleSpec(
        name="vec",
        function="fnmod:f",
        backend="sympy",
        mode="auto",
        operators=("jacobian", "hessian"),
        input=ArraySpec(shape=(3, 2)),
        contexts=(ContextSpec("c", ()),),
        config_path=path,
        line=20,
    )
    lines = {
        key: seed.line_of(key)
        for key in ("name", "operators", "input.shape", "contexts.1.name", "batch")
    }
    assert lines == {
        "name": 6,
        "operators": 10,
        "input.shape": 11,
        "contexts.1.name": 14,
        "batch": 16,
    }
    assert seed.line_of("not-a-key") == 5
    assert vec.line_of("operators") == 23
    assert vec.line_of("input") == 28
    assert vec.line_of("input.shape") == 29
    assert vec.line_of("contexts.0.name") == 32
    with pytest.raises(dataclasses.FrozenInstanceError):
        seed.name = "other"  # type: ignore[misc]


def test_defaults_and_all_operators(tmp_path: Path) -> None:
    path = tmp_path / "difgen.toml"
    ops = ", ".join(f'"{op}"' for op in reversed(REQUESTABLE))
    path.write_text(with_line('["derivative"]', f"[{ops}]"))
    config = load_config(path)
    assert config.output_dir == tmp_path / "generated"
    (spec,) = config.modules
    assert spec.operators == REQUESTABLE
    assert (spec.backend, spec.mode, spec.emit, spec.batch) == (
        "sympy",
        "auto",
        "auto",
        1,
    )
    assert spec.contexts == () and spec.sparse is False


def test_only_f_is_accepted(tmp_path: Path) -> None:
    path = tmp_path / "difgen.toml"
    path.write_text(with_line('["derivative"]', '["f"]'))
    assert load_config(path).modules[0].operators == ()


def test_check_output_fit(tmp_path: Path) -> None:
    path = tmp_path / "difgen.toml"
    path.write_text(
        MODULE.replace("shape = []", "shape = [3]").replace(
            '["derivative"]', '["jacobian", "gradient", "hvp"]'
        )
    )
    (spec,) = load_config(path).modules
    check_output_fit(spec, ())
    with pytest.raises(ConfigError) as info:
        check_output_fit(spec, (2,))
    message = str(info.value)
    assert message.startswith(f"{path}:4: ")
    assert "operator 'gradient', 'hvp' needs a scalar output" in message
    assert "returns an array of shape (2,)" in message
    jacobian_only = dataclasses.replace(spec, operators=("jacobian",))
    check_output_fit(jacobian_only, (2, 5))


def test_load_function_and_source_files(tmp_path: Path) -> None:
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "helper.py").write_text("def twice(x):\n    return 2 * x\n")
    (tmp_path / "models" / "user fn.py").write_text(
        "from helper import twice\n\n\ndef f(x):\n    return twice(x)\n"
    )
    path = tmp_path / "difgen.toml"
    path.write_text(with_line('"fn.py:f"', '"models/user fn.py:f"'))
    (spec,) = load_config(path).modules
    fn = load_function(spec)
    assert fn(2.0) == 4.0
    assert fn.__module__ == "_difgen_user_user_fn"
    assert function_source_files(fn) == [tmp_path / "models" / "user fn.py"]
    assert "twice(x)" in inspect.getsource(fn)


@pytest.mark.parametrize(
    "ref, parts",
    [
        ("pkg.mod:attr", ("pkg.mod", "attr")),
        ("a/b.py:Cls.method", ("a/b.py", "Cls.method")),
        ("C:/x/b.py:f", ("C:/x/b.py", "f")),
        ("pkg.mod", None),
        ("pkg.mod:", None),
        (":f", None),
        ("pkg-x:f", None),
        ("pkg:1f", None),
    ],
)
def test_split_function_ref(ref: str, parts: tuple[str, str] | None) -> None:
    assert split_function_ref(ref) == parts


def test_locator_ignores_values_that_look_like_tables() -> None:
    text = textwrap.dedent('''\
        doc = """
        [[module]]
        name = "fake"
        """
        grid = [
          [1, 2],
        [3]
        ]
        [[module]]  # the real one
        "name" = "a"
        input.shape = [2]
        ''')
    locator = Locator(text)
    assert locator.line(("module", 0)) == 9
    assert locator.line(("module", 0, "name")) == 10
    assert locator.line(("module", 0, "input", "shape")) == 11
    assert locator.line(("module", 0, "input")) == 11
    assert ("module", 1) not in locator.lines
    assert locator.line(("grid",)) == 5
