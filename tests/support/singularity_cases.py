"""Functions whose derivatives have a removable singularity (0/0 at a point where the
function is smooth): written as plain NumPy, traced by tests/primitives/test_singularities.py and
built into generated modules there."""

import numpy as np


def sinc_scalar(x):
    return np.sinc(x)


def sinc_array(x):
    return np.sinc(x)


def sinc_sum(x):
    return np.sum(np.sinc(x))


# The audit's other candidates: a point where a where or a constant branch decides
# the value, and the derivatives must not come from that branch.
def power_at_zero(x):
    # _pow_jvp reads log(where(a == 0, 1, a)): 0 ** b is 0 for b > 0
    return x[0] ** x[1]


def logaddexp_tie(x):
    # the value's helper returns a + log 2 on a == b; the weights exp(a - y) do not
    return np.logaddexp(x[0], x[1])


def logaddexp2_tie(x):
    return np.logaddexp2(x[0], x[1])


def linspace_flat(x):
    # the where(step == 0, (i / div) * delta, i * step) of NumPy's formula
    return np.sum(np.linspace(x[0], x[1], 5) ** 2 * np.arange(1.0, 6.0))
