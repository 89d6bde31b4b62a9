"""scipy.special as statistics code calls it: traced and built into generated
modules by tests/primitives/test_special.py. Each output slot is one function of
its own input slots (see ``SLOTS`` there)."""

import numpy as np
import scipy.special
from scipy import special as sc
from scipy.special import gammaln, log_softmax, logsumexp, softmax


def elementwise(x):
    return np.stack(
        [
            gammaln(x[0]),
            sc.psi(x[1]),
            scipy.special.polygamma(1, x[2]),
            sc.erf(x[3]),
            sc.erfc(x[4]),
            sc.ndtr(x[5]),
            sc.log_ndtr(x[6]),
            sc.expit(x[7]),
            sc.logit(x[8]),
            sc.xlogy(x[9], x[10]),
            sc.xlog1py(x[11], x[12]),
            sc.betaln(x[13], x[14]),
            sc.erfcx(x[15]),
            sc.gamma(x[16]),
        ]
    )


def summed(x):
    return np.sum(elementwise(x))


def c_able(x):
    """Only functions with a C form (C99's erf, erfc, lgamma; difgen's expit,
    xlogy, xlog1py), and first derivatives that have one too."""
    return np.stack(
        [
            sc.erf(x[0]),
            sc.erfc(x[1]),
            sc.ndtr(x[2]),
            sc.expit(x[3]),
            sc.logit(x[4]),
            sc.xlogy(x[5], x[6]),
            sc.xlog1py(x[7], x[8]),
        ]
    )


def c_able_values(x):
    return gammaln(x) + sc.betaln(x, 2.0 * x) + sc.gamma(x / 4.0)


def gammaln_only(x):
    return gammaln(x)


def gamma_only(x):
    return sc.gamma(x)


def xlogy_pair(x):
    return sc.xlogy(x[0], x[1])


def xlog1py_pair(x):
    return sc.xlog1py(x[0], x[1])


def log_ndtr_only(x):
    return sc.log_ndtr(x)


def expit_only(x):
    return sc.expit(x)


def logit_only(x):
    return sc.logit(x)


def lse_all(x):
    return logsumexp(x)


def lse_rows(x):
    return logsumexp(x, axis=1)


def lse_columns_keep(x):
    return logsumexp(x, axis=0, keepdims=True)


def lse_weighted(x):
    return logsumexp(x, axis=-1, b=np.array([0.5, 2.0, 0.0, 1.0]))


def softmax_rows(x):
    return softmax(x, axis=1)


def log_softmax_rows(x):
    return log_softmax(x, axis=1)


def softmax_all(x):
    return sc.softmax(x)


def helpers_pair(x):
    """The special functions with a C form, on two arguments (the C runtime's
    helpers against their Python twins and SciPy)."""
    a, b = x[0], x[1]
    return np.stack(
        [
            gammaln(a),
            sc.gamma(a),
            sc.expit(a),
            sc.xlogy(a, b),
            sc.xlog1py(a, b),
            sc.erf(a),
            sc.erfc(a),
        ]
    )
