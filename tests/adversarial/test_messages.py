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
