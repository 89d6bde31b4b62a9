"""A printed C operator renamed after the private function it became
(:func:`difgen.targets.c.glue.renamed`), as an ipopt module's parts are: its
file-scope symbols, error labels and helper keys take the new name, so that it
shares one extension with the operator it was printed as."""

from __future__ import annotations

import re

import pytest

from difgen.targets.c.glue import renamed
from difgen.targets.parts import Function

NATIVE = """static const double dg_hessian_t0[2] = {1.0, 2.0};
static const dg_pattern dg_hessian_pattern = {2, 2, 3, 4, dg_hessian_pattern_indices};
static PyObject *
dg_op_hessian(PyObject *dg_self, PyObject *const *dg_args)
{
    if (dg_parse("hessian", dg_args, dg_nargs, dg_kwnames, dg_names, 2, 1) < 0) ...
    dg_a_x = dg_array(dg_argv[0], "hessian: x", dg_hessian_t0);
    dg_sdata = dg_csr_data(out, "hessian.out", &dg_hessian_pattern);
    dg_res[0] = dg_wrap(dg_res[0], "hessian");
    dg_new(1, dg_dims_hessian, &dg_r0);  /* a runtime name is no operator's */
}
"""


def _function(native: str, wrappers: tuple[tuple[str, str], ...]) -> Function:
    return Function(
        name="_lagrangian_hessian",
        signature="x",
        returns="sp.csr_array",
        doc="",
        body=(),
        native=native,
        native_doc="hessian(x, out=None)\\n--\\n\\nHessian.",
        wrappers=wrappers,
    )


def test_every_name_of_the_operator_becomes_the_functions() -> None:
    wrappers = (("hessian", "lambda data: data"), ("hessian.out", "lambda out: out"))
    done = renamed(_function(NATIVE, wrappers), "hessian")
    assert not re.search(
        r"\bdg_op_hessian\b|\bdg_hessian_|\"hessian[\":.]", done.native
    )
    assert "dg_op__lagrangian_hessian(" in done.native
    assert "dg__lagrangian_hessian_t0[2]" in done.native
    assert "dg__lagrangian_hessian_pattern_indices" in done.native
    assert 'dg_parse("_lagrangian_hessian"' in done.native
    assert '"_lagrangian_hessian: x"' in done.native
    assert '"_lagrangian_hessian.out"' in done.native
    assert 'dg_wrap(dg_res[0], "_lagrangian_hessian")' in done.native
    assert "dg_dims_hessian" in done.native  # not the operator's own prefix
    assert done.native_doc.startswith("_lagrangian_hessian(x, out=None)")
    assert [key for key, _ in done.wrappers] == [
        "_lagrangian_hessian",
        "_lagrangian_hessian.out",
    ]


def test_a_helper_named_otherwise_is_refused() -> None:
    with pytest.raises(ValueError, match="'value'"):
        renamed(_function(NATIVE, (("value", "lambda data: data"),)), "hessian")


def test_python_only_functions_are_left_alone() -> None:
    plain = _function("", ())
    assert renamed(plain, "hessian") is plain
