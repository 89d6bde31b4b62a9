"""Functions whose derivatives have a removable singularity (0/0 at a point where the
function is smooth): written as plain NumPy, traced by tests/test_singularities.py and
built into generated modules there."""

import numpy as np


def sinc_scalar(x):
    return np.sinc(x)


def sinc_array(x):
    return np.sinc(x)


def sinc_sum(x):
    return np.sum(np.sinc(x))
