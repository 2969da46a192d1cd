"""``webgrad.distributions``: probability distributions, as ``torch.distributions``.

Parameters are Tensors (or numbers); samples come from webgrad's generator, so
``webgrad.manual_seed`` reproduces them. ``rsample`` (reparameterized, differentiable)
exists for every continuous distribution here (Gamma, Beta and Dirichlet by implicit
reparameterization, see ``gamma_grad.py``); the discrete ones and Poisson have only
``sample``, as in PyTorch.

Example (REINFORCE):
    >>> from webgrad.distributions import Categorical
    >>> policy = Categorical(logits=logits)           # logits from a network
    >>> action = policy.sample()
    >>> loss = -(policy.log_prob(action) * reward).sum()
    >>> loss.backward()
"""
from . import constraints  # noqa: F401
from .continuous import Beta, Dirichlet, Exponential, Gamma, Laplace, Normal, Uniform  # noqa: F401
from .discrete import Bernoulli, Categorical, OneHotCategorical, Poisson  # noqa: F401
from .distribution import Distribution, ExponentialFamily  # noqa: F401
from .kl import kl_divergence, register_kl  # noqa: F401
from .multivariate import Independent, MultivariateNormal  # noqa: F401

__all__ = ["Bernoulli", "Beta", "Categorical", "Dirichlet", "Distribution", "ExponentialFamily", "Exponential",
           "Gamma", "Independent", "Laplace", "MultivariateNormal", "Normal", "OneHotCategorical", "Poisson",
           "Uniform", "constraints", "kl_divergence", "register_kl"]
