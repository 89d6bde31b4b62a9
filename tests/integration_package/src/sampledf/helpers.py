"""Helpers of the model."""

import numpy as np


def softplus(x):
    """log(1 + e^x), elementwise."""
    return np.log1p(np.exp(x))
