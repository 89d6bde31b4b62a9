"""The corpus: each function of ``ml_functions`` with seeded example arguments, what
it is differentiated in, the difgen features it exercises and whether its hessian is
checked too (the small ones)."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import ml_functions as f
import numpy as np


@dataclass(frozen=True)
class Case:
    name: str
    function: Callable[..., Any]
    make_args: Callable[[np.random.Generator], tuple[Any, ...]]
    features: tuple[str, ...]
    wrt: int | tuple[int, ...] = 0
    hessian: bool = True
    options: dict[str, Any] = field(default_factory=dict)
    twin: Callable[..., Any] | None = None
    """The JAX twin when swapping ``np`` and ``special`` is not enough."""
    has_aux: bool = False
    seed: int = 0

    def args(self) -> tuple[Any, ...]:
        return self.make_args(np.random.default_rng(self.seed))


def _glm(rng: np.random.Generator, n: int = 12, p: int = 3) -> tuple[Any, Any]:
    X = np.column_stack([np.ones(n), rng.normal(size=(n, p - 1))])
    return 0.3 * rng.normal(size=p), X


def _poisson(rng: np.random.Generator) -> tuple[Any, ...]:
    beta, X = _glm(rng)
    return beta, X, rng.poisson(2.0, size=12).astype(float)


def _poisson_offset(rng: np.random.Generator) -> tuple[Any, ...]:
    beta, X = _glm(rng)
    y = rng.poisson(3.0, size=12).astype(float)
    return beta, X, y, rng.uniform(0.5, 2.0, size=12), 0.1


def _binary(rng: np.random.Generator) -> tuple[Any, ...]:
    beta, X = _glm(rng, 15)
    return beta, X, (rng.uniform(size=15) < 0.4).astype(float)


def _negbin(rng: np.random.Generator) -> tuple[Any, ...]:
    beta, X = _glm(rng)
    y = rng.negative_binomial(3, 0.4, size=12).astype(float)
    return {"beta": beta, "log_r": 0.7}, X, y


def _gamma(rng: np.random.Generator) -> tuple[Any, ...]:
    beta, X = _glm(rng)
    return {"beta": beta, "log_shape": np.array(0.4)}, X, rng.gamma(2.0, 1.5, size=12)


def _beta_reg(rng: np.random.Generator) -> tuple[Any, ...]:
    beta, X = _glm(rng)
    return {"beta": beta, "log_phi": 1.5}, X, rng.beta(2.0, 3.0, size=12)


def _softmax_reg(rng: np.random.Generator) -> tuple[Any, ...]:
    X = rng.normal(size=(10, 3))
    return 0.5 * rng.normal(size=(3, 4)), X, rng.integers(0, 4, size=10)


def _ordinal(rng: np.random.Generator) -> tuple[Any, ...]:
    y = rng.integers(0, 4, size=9)
    return (
        {"w": 0.6, "cuts": np.array([-1.0, 0.1, -0.3])},
        rng.normal(size=9),
        np.eye(4)[y],
    )


def _gmm_1d(rng: np.random.Generator) -> tuple[Any, ...]:
    x = np.concatenate([rng.normal(-2.0, 0.7, 8), rng.normal(1.5, 1.0, 10)])
    params = {
        "mu": np.array([-1.5, 0.2, 1.0]),
        "log_sigma": np.array([-0.2, 0.1, 0.0]),
        "logits": np.array([0.3, -0.1, 0.0]),
    }
    return params, x


def _gmm_diag(rng: np.random.Generator) -> tuple[Any, ...]:
    X = rng.normal(size=(20, 2)) + np.repeat([[2.0, 0.0], [-1.0, 1.0]], 10, axis=0)
    params = {
        "mu": rng.normal(size=(3, 2)),
        "log_sigma": 0.1 * rng.normal(size=(3, 2)),
        "logits": rng.normal(size=3),
    }
    return params, X


def _mixture_b(rng: np.random.Generator) -> tuple[Any, ...]:
    return np.array([-1.0, 0.5, 2.0]), rng.normal(size=10), np.array([0.2, 0.5, 0.3])


def _zip(rng: np.random.Generator) -> tuple[Any, ...]:
    y = np.where(rng.uniform(size=14) < 0.3, 0, rng.poisson(2.5, size=14)).astype(float)
    return {"logit_pi": -0.4, "log_lam": 0.8}, y, y == 0


def _poisson_mixture(rng: np.random.Generator) -> tuple[Any, ...]:
    y = np.concatenate([rng.poisson(1.0, 8), rng.poisson(6.0, 8)]).astype(float)
    return {"log_rates": np.array([0.1, 1.6]), "logits": np.array([0.2, -0.2])}, y


def _survival(rng: np.random.Generator) -> tuple[Any, ...]:
    beta, X = _glm(rng)
    return beta, X, rng.exponential(1.0, size=12), (rng.uniform(size=12) < 0.7) * 1.0


def _weibull(rng: np.random.Generator) -> tuple[Any, ...]:
    beta, X, t, event = _survival(rng)
    return {"beta": beta, "log_k": 0.3}, X, t, event


def _lognormal(rng: np.random.Generator) -> tuple[Any, ...]:
    beta, X, t, event = _survival(rng)
    return {"beta": beta, "log_sigma": np.array(-0.2)}, X, np.log(t), event


def _discrete_hazard(rng: np.random.Generator) -> tuple[Any, ...]:
    beta, X = _glm(rng, 16)
    return beta, X, (rng.uniform(size=16) < 0.25).astype(float)


def _cox(rng: np.random.Generator) -> tuple[Any, ...]:
    beta, X, t, event = _survival(rng)
    at_risk = (t[None, :] >= t[:, None]).astype(float)
    return beta[1:], X[:, 1:], event, at_risk


def _tobit(rng: np.random.Generator) -> tuple[Any, ...]:
    beta, X = _glm(rng)
    y = np.maximum(X @ beta + rng.normal(size=12), 0.0)
    return {"beta": beta, "log_sigma": 0.1}, X, y, y == 0.0


def _gp(rng: np.random.Generator) -> tuple[Any, ...]:
    X = rng.uniform(-2.0, 2.0, size=(7, 1))
    y = np.sin(2.0 * X[:, 0]) + 0.1 * rng.normal(size=7)
    return {"log_ell": np.log(0.8), "log_sf": 0.1, "log_sn": np.log(0.2)}, X, y


def _gp_ard(rng: np.random.Generator) -> tuple[Any, ...]:
    X = rng.normal(size=(6, 2))
    y = X[:, 0] - np.cos(X[:, 1]) + 0.1 * rng.normal(size=6)
    return {"log_ell": np.array([0.2, -0.1]), "log_sf": 0.0, "log_sn": -1.5}, X, y


def _gp_periodic(rng: np.random.Generator) -> tuple[Any, ...]:
    t = np.sort(rng.uniform(0.0, 4.0, size=6))
    y = np.sin(np.pi * t) + 0.1 * rng.normal(size=6)
    return np.array([0.0, np.log(2.1), np.log(0.3)]), t, y


def _mlp(
    rng: np.random.Generator, d: int = 3, h: int = 4, k: int = 1, n: int = 8
) -> Any:
    return {
        "W1": 0.5 * rng.normal(size=(d, h)),
        "b1": 0.1 * rng.normal(size=h),
        "W2": 0.5 * rng.normal(size=(h, k)) if k > 1 else 0.5 * rng.normal(size=h),
        "b2": 0.1 * rng.normal(size=k) if k > 1 else 0.1,
    }


def _mlp_mse(rng: np.random.Generator) -> tuple[Any, ...]:
    return _mlp(rng), rng.normal(size=(8, 3)), rng.normal(size=8)


def _mlp_cls(rng: np.random.Generator) -> tuple[Any, ...]:
    return _mlp(rng, 4, 5, 3), rng.normal(size=(10, 4)), rng.integers(0, 3, size=10)


def _mlp_relu(rng: np.random.Generator) -> tuple[Any, ...]:
    params, X, labels = _mlp_cls(rng)
    return params, X, labels, 1e-3


def _layers(rng: np.random.Generator) -> tuple[Any, ...]:
    sizes = [3, 5, 4, 2]
    layers = [
        (0.5 * rng.normal(size=(a, b)), 0.1 * rng.normal(size=b))
        for a, b in itertools.pairwise(sizes)
    ]
    return layers, rng.normal(size=(6, 3)), rng.normal(size=(6, 2))


def _layernorm(rng: np.random.Generator) -> tuple[Any, ...]:
    params = {
        "W": 0.5 * rng.normal(size=(3, 4)),
        "g": 1.0 + 0.1 * rng.normal(size=4),
        "b": 0.1 * rng.normal(size=4),
        "v": rng.normal(size=4),
    }
    return params, rng.normal(size=(7, 3)), rng.normal(size=7)


def _autoencoder(rng: np.random.Generator) -> tuple[Any, ...]:
    params = {
        "W": 0.3 * rng.normal(size=(5, 2)),
        "b": np.zeros(2),
        "c": 0.1 * rng.normal(size=5),
    }
    return params, rng.normal(size=(8, 5))


def _rnn(rng: np.random.Generator) -> tuple[Any, ...]:
    params = {
        "Wx": 0.5 * rng.normal(size=(3, 2)),
        "Wh": 0.4 * rng.normal(size=(3, 3)),
        "b": 0.1 * rng.normal(size=3),
        "v": rng.normal(size=3),
    }
    return params, rng.normal(size=(5, 2)), 0.7


def _attention(rng: np.random.Generator) -> tuple[Any, ...]:
    params = {k: 0.5 * rng.normal(size=(3, 2)) for k in ("Wq", "Wk", "Wv")}
    return params, rng.normal(size=(4, 3)), rng.normal(size=(4, 2))


def _metrics(rng: np.random.Generator) -> tuple[Any, ...]:
    params = {"W": 0.5 * rng.normal(size=(3, 4)), "b": np.zeros(4)}
    return params, rng.normal(size=(9, 3)), rng.integers(0, 4, size=9)


def _nig(rng: np.random.Generator) -> tuple[Any, ...]:
    return (
        {"mu": 0.3, "log_s2": np.array(0.2)},
        rng.normal(0.5, 1.2, size=15),
        np.array([0.0, 1.0, 2.0, 2.0]),
    )


def _dirichlet(rng: np.random.Generator) -> tuple[Any, ...]:
    return np.log(np.array([1.5, 2.0, 0.8])), rng.dirichlet([2.0, 3.0, 1.0], size=10)


def _dirmult(rng: np.random.Generator) -> tuple[Any, ...]:
    counts = np.array([rng.multinomial(12, [0.2, 0.5, 0.3]) for _ in range(6)])
    return np.log(np.array([1.0, 2.0, 1.5])), counts.astype(float)


def _betabin(rng: np.random.Generator) -> tuple[Any, ...]:
    n = rng.integers(5, 15, size=10).astype(float)
    k = np.floor(n * rng.beta(2.0, 3.0, size=10))
    return {"log_a": 0.5, "log_b": 1.0}, k, n


def _student(rng: np.random.Generator) -> tuple[Any, ...]:
    beta, X = _glm(rng)
    y = X @ beta + rng.standard_t(4.0, size=12)
    return {"beta": beta, "log_sigma": 0.0, "log_nu": np.log(4.0)}, X, y


def _schools(rng: np.random.Generator) -> tuple[Any, ...]:
    y = np.array([28.0, 8.0, -3.0, 7.0, -1.0, 1.0, 18.0, 12.0])
    sigma = np.array([15.0, 10.0, 16.0, 11.0, 9.0, 11.0, 10.0, 18.0])
    return {"mu": 4.0, "log_tau": 1.0, "eta": rng.normal(size=8)}, y, sigma


def _bayes_logistic(rng: np.random.Generator) -> tuple[Any, ...]:
    beta, X, y = _binary(rng)
    return beta, X, y, 2.5


def _dirichlet_kl(rng: np.random.Generator) -> tuple[Any, ...]:
    return rng.normal(size=4) * 0.5, rng.normal(size=4) * 0.5


def _gamma_poisson(rng: np.random.Generator) -> tuple[Any, ...]:
    return {"la": np.array([1.0, 0.5]), "lb": np.array([0.0, 0.2])}, rng.poisson(
        3.0, size=6
    ).astype(float)


def _trigamma(rng: np.random.Generator) -> tuple[Any, ...]:
    return np.array([0.4]), rng.gamma(1.5, 1.0, size=10)


def _logit_normal(rng: np.random.Generator) -> tuple[Any, ...]:
    return {"mu": 0.2, "log_sigma": -0.3}, rng.beta(2.0, 2.0, size=10)


def _erf_link(rng: np.random.Generator) -> tuple[Any, ...]:
    return _binary(rng)


def _huber(rng: np.random.Generator) -> tuple[Any, ...]:
    X = rng.normal(size=(12, 2))
    y = X @ np.array([1.0, -2.0]) + rng.standard_t(2.0, size=12)
    return f.Linear(np.array([0.5, -1.0]), 0.2), X, y


def _hierarchical(rng: np.random.Generator) -> tuple[Any, ...]:
    group = rng.integers(0, 4, size=14)
    y = rng.normal(size=14) + group
    return rng.normal(size=4), np.array([0.5, 0.1]), y, group


def _kepler(rng: np.random.Generator) -> tuple[Any, ...]:
    return np.array([1.3, 0.4]), rng.uniform(0.0, 2.0 * np.pi, size=6)


def _budget(rng: np.random.Generator) -> tuple[Any, ...]:
    return rng.normal(size=6), rng.uniform(size=6), 2.5


GLM, MIX, SURV, GP, NN, BAYES = "GLM", "mixture", "survival", "GP", "NN", "Bayes"

CASES: tuple[Case, ...] = (
    Case("poisson_glm", f.poisson_glm, _poisson, (GLM, "gammaln")),
    Case(
        "poisson_offset_ridge",
        f.poisson_offset_ridge,
        _poisson_offset,
        (GLM, "xlogy", "gammaln", "float context"),
    ),
    Case("logistic_glm", f.logistic_glm, _binary, (GLM, "expit", "xlogy", "xlog1py")),
    Case("logistic_logaddexp", f.logistic_logaddexp, _binary, (GLM, "logaddexp")),
    Case("probit_glm", f.probit_glm, _binary, (GLM, "log_ndtr")),
    Case("negbin_glm", f.negbin_glm, _negbin, (GLM, "dict", "gammaln", "xlogy")),
    Case("gamma_glm", f.gamma_glm, _gamma, (GLM, "dict", "gammaln")),
    Case("beta_regression", f.beta_regression, _beta_reg, (GLM, "dict", "betaln")),
    Case(
        "softmax_regression",
        f.softmax_regression,
        _softmax_reg,
        (GLM, "log_softmax", "int64 labels"),
    ),
    Case("ordinal_logit", f.ordinal_logit, _ordinal, (GLM, "dict", "expit", "cumsum")),
    Case("gmm_1d", f.gmm_1d, _gmm_1d, (MIX, "dict", "logsumexp", "log_softmax")),
    Case("gmm_diag", f.gmm_diag, _gmm_diag, (MIX, "dict", "logsumexp"), hessian=False),
    Case("mixture_weights_b", f.mixture_weights_b, _mixture_b, (MIX, "logsumexp b=")),
    Case(
        "zero_inflated_poisson",
        f.zero_inflated_poisson,
        _zip,
        (MIX, "dict", "bool mask", "logaddexp", "gammaln"),
    ),
    Case(
        "mixture_of_poissons",
        f.mixture_of_poissons,
        _poisson_mixture,
        (MIX, "dict", "logsumexp", "gammaln"),
    ),
    Case(
        "exponential_survival",
        f.exponential_survival,
        _survival,
        (SURV, "censoring"),
    ),
    Case("weibull_survival", f.weibull_survival, _weibull, (SURV, "dict", "censoring")),
    Case(
        "lognormal_aft",
        f.lognormal_aft,
        _lognormal,
        (SURV, "dict", "censoring", "log_ndtr"),
    ),
    Case(
        "discrete_time_hazard",
        f.discrete_time_hazard,
        _discrete_hazard,
        (SURV, "expit", "xlogy", "xlog1py"),
    ),
    Case("cox_partial", f.cox_partial, _cox, (SURV, "risk sets")),
    Case("tobit", f.tobit, _tobit, (SURV, "dict", "bool mask", "erfc")),
    Case(
        "gp_rbf_cholesky",
        f.gp_rbf_cholesky,
        _gp,
        (GP, "dict", "cholesky", "solve"),
    ),
    Case("gp_ard_slogdet", f.gp_ard_slogdet, _gp_ard, (GP, "dict", "slogdet", "solve")),
    Case("gp_periodic_inv", f.gp_periodic_inv, _gp_periodic, (GP, "inv", "det")),
    Case("mlp_tanh_mse", f.mlp_tanh_mse, _mlp_mse, (NN, "dict W1 b1 W2 b2")),
    Case(
        "mlp_softmax",
        f.mlp_softmax,
        _mlp_cls,
        (NN, "dict W1 b1 W2 b2", "logsumexp keepdims", "int64 labels"),
        hessian=False,
    ),
    Case(
        "mlp_relu_l2",
        f.mlp_relu_l2,
        _mlp_relu,
        (NN, "dict", "relu", "take_along_axis", "int64 labels"),
        hessian=False,
    ),
    Case(
        "mlp_layers_list",
        f.mlp_layers_list,
        _layers,
        (NN, "list of tuples"),
        hessian=False,
    ),
    Case("layernorm_mlp", f.layernorm_mlp, _layernorm, (NN, "dict", "var", "sqrt")),
    Case("tied_autoencoder", f.tied_autoencoder, _autoencoder, (NN, "dict", "expit")),
    Case("rnn_tanh", f.rnn_tanh, _rnn, (NN, "dict", "unrolled loop")),
    Case(
        "attention_head",
        f.attention_head,
        _attention,
        (NN, "dict", "softmax"),
        hessian=False,
    ),
    Case(
        "mlp_with_metrics",
        f.mlp_with_metrics,
        _metrics,
        (NN, "dict", "has_aux", "argmax", "int64 labels"),
        hessian=False,
        has_aux=True,
        options={"has_aux": True},
    ),
    Case(
        "softplus_poisson",
        f.softplus_poisson,
        _poisson,
        (GLM, "custom_jvp"),
        twin=f.softplus_poisson_jax,
    ),
    Case(
        "normal_inverse_gamma",
        f.normal_inverse_gamma,
        _nig,
        (BAYES, "dict", "gammaln"),
    ),
    Case("dirichlet_logpdf", f.dirichlet_logpdf, _dirichlet, (BAYES, "gammaln")),
    Case(
        "dirichlet_multinomial",
        f.dirichlet_multinomial,
        _dirmult,
        (BAYES, "gammaln"),
    ),
    Case(
        "beta_binomial",
        f.beta_binomial,
        _betabin,
        (BAYES, "dict", "betaln"),
        twin=f.beta_binomial_jax,
    ),
    Case(
        "student_t_regression",
        f.student_t_regression,
        _student,
        (BAYES, "dict", "gammaln", "log1p"),
    ),
    Case("eight_schools", f.eight_schools, _schools, (BAYES, "dict", "non-centred")),
    Case(
        "bayes_logistic_prior",
        f.bayes_logistic_prior,
        _bayes_logistic,
        (BAYES, "logaddexp", "Student-t prior"),
    ),
    Case(
        "dirichlet_kl",
        f.dirichlet_kl,
        _dirichlet_kl,
        (BAYES, "digamma", "gammaln", "wrt=(0, 1)"),
        wrt=(0, 1),
    ),
    Case(
        "gamma_poisson_elbo",
        f.gamma_poisson_elbo,
        _gamma_poisson,
        (BAYES, "dict", "digamma", "gammaln"),
    ),
    Case("trigamma_fisher", f.trigamma_fisher, _trigamma, (BAYES, "polygamma")),
    Case(
        "logit_normal", f.logit_normal, _logit_normal, (BAYES, "dict", "logit", "ndtr")
    ),
    Case("erf_link", f.erf_link, _erf_link, (GLM, "erf")),
    Case(
        "huber_regression",
        f.huber_regression,
        _huber,
        (GLM, "NamedTuple", "where"),
    ),
    Case(
        "hierarchical_normal",
        f.hierarchical_normal,
        _hierarchical,
        (BAYES, "wrt=(0, 1)", "int64 gather"),
        wrt=(0, 1),
    ),
    Case(
        "kepler_rv",
        f.kepler_rv,
        _kepler,
        ("implicit", "while loop", "Newton"),
        options={"implicit": True},
        twin=f.kepler_rv_jax,
    ),
    Case(
        "sigmoid_budget",
        f.sigmoid_budget,
        _budget,
        ("implicit", "brentq", "expit"),
        hessian=False,
        twin=f.sigmoid_budget_jax,
    ),
)
