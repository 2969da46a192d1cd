"""webgrad.distributions against torch.distributions: log_prob, entropy, moments, cdf/icdf and
KL on the same parameters; sample statistics (seeded); rsample gradients; a REINFORCE step."""
import numpy as np
import pytest

import webgrad
from webgrad import distributions as D

RNG = np.random.default_rng(0)
LOC = RNG.normal(size=(2, 3))
SCALE = RNG.uniform(0.5, 2.0, size=(2, 3))
LOGITS = RNG.normal(size=(2, 4))
PROBS = RNG.uniform(0.1, 0.9, size=(2, 3))
CONC = RNG.uniform(0.6, 3.0, size=(2, 3))
A = RNG.normal(size=(2, 3, 3))
COV = A @ np.swapaxes(A, -1, -2) + 3 * np.eye(3)
MVN_LOC = RNG.normal(size=(2, 3))


def T(lib, array, dtype="float64"):
    return lib.tensor(np.asarray(array), dtype=getattr(lib, dtype))


# name -> (build(lib, dtype) -> distribution, value(lib, dtype) for log_prob/cdf, methods)
CASES = {
    "Normal": (lambda lib, d: lib.distributions.Normal(T(lib, LOC, d), T(lib, SCALE, d)),
               lambda lib, d: T(lib, LOC + 0.3, d), ("cdf", "icdf")),
    "Uniform": (lambda lib, d: lib.distributions.Uniform(T(lib, LOC, d), T(lib, LOC + SCALE, d)),
                lambda lib, d: T(lib, LOC + 0.4 * SCALE, d), ("cdf", "icdf")),
    "Laplace": (lambda lib, d: lib.distributions.Laplace(T(lib, LOC, d), T(lib, SCALE, d)),
                lambda lib, d: T(lib, LOC - 0.7, d), ("cdf", "icdf")),
    "Exponential": (lambda lib, d: lib.distributions.Exponential(T(lib, SCALE, d)),
                    lambda lib, d: T(lib, CONC, d), ("cdf", "icdf")),
    "Gamma": (lambda lib, d: lib.distributions.Gamma(T(lib, CONC, d), T(lib, SCALE, d)),
              lambda lib, d: T(lib, SCALE, d), ()),
    "Beta": (lambda lib, d: lib.distributions.Beta(T(lib, CONC, d), T(lib, SCALE + 0.5, d)),
             lambda lib, d: T(lib, PROBS, d), ()),
    "Dirichlet": (lambda lib, d: lib.distributions.Dirichlet(T(lib, CONC + 0.5, d)),
                  lambda lib, d: T(lib, PROBS / PROBS.sum(-1, keepdims=True), d), ()),
    "Poisson": (lambda lib, d: lib.distributions.Poisson(T(lib, SCALE * 3, d)),
                lambda lib, d: T(lib, np.array([[0, 1, 2], [3, 4, 5.0]]), d), ()),
    "Bernoulli-probs": (lambda lib, d: lib.distributions.Bernoulli(probs=T(lib, PROBS, d)),
                        lambda lib, d: T(lib, np.array([[0, 1, 1], [1, 0, 0.0]]), d), ()),
    "Bernoulli-logits": (lambda lib, d: lib.distributions.Bernoulli(logits=T(lib, LOC, d)),
                         lambda lib, d: T(lib, np.array([[0, 1, 1], [1, 0, 0.0]]), d), ()),
    "Categorical-logits": (lambda lib, d: lib.distributions.Categorical(logits=T(lib, LOGITS, d)),
                           lambda lib, d: lib.tensor([[3, 0], [1, 2], [0, 0]]), ()),
    "Categorical-probs": (lambda lib, d: lib.distributions.Categorical(probs=T(lib, np.exp(LOGITS), d)),
                          lambda lib, d: lib.tensor([3, 1]), ()),
    "OneHotCategorical": (lambda lib, d: lib.distributions.OneHotCategorical(logits=T(lib, LOGITS, d)),
                          lambda lib, d: T(lib, np.eye(4)[[1, 3]], d), ()),
    "MVN-cov": (lambda lib, d: lib.distributions.MultivariateNormal(
        T(lib, MVN_LOC, d), covariance_matrix=T(lib, COV, d)), lambda lib, d: T(lib, MVN_LOC * 0.5, d), ()),
    "MVN-tril": (lambda lib, d: lib.distributions.MultivariateNormal(
        T(lib, MVN_LOC, d), scale_tril=T(lib, np.linalg.cholesky(COV), d)), lambda lib, d: T(lib, MVN_LOC - 1, d), ()),
    "MVN-precision": (lambda lib, d: lib.distributions.MultivariateNormal(
        T(lib, MVN_LOC[0], d), precision_matrix=T(lib, np.linalg.inv(COV), d)), lambda lib, d: T(lib, MVN_LOC, d), ()),
    "Independent-Normal": (lambda lib, d: lib.distributions.Independent(
        lib.distributions.Normal(T(lib, LOC, d), T(lib, SCALE, d)), 1), lambda lib, d: T(lib, LOC + 0.3, d), ()),
}
STATS = ("mean", "variance", "stddev", "mode")
NO_ENTROPY = ("Poisson",)


def _numbers(dist, value, methods, name):
    out = {"log_prob": dist.log_prob(value)}
    if name not in NO_ENTROPY:
        out["entropy"] = dist.entropy()
    for stat in STATS:
        out[stat] = getattr(dist, stat)
    for method in methods:
        out[method] = getattr(dist, method)(value if method == "cdf" else dist.cdf(value))
    out["shapes"] = np.array([*dist.batch_shape, -1, *dist.event_shape])
    return {k: np.asarray(v.detach().numpy() if hasattr(v, "detach") else v, dtype=np.float64) for k, v in out.items()}


@pytest.mark.parametrize("name", sorted(CASES))
def test_distribution_matches_torch(name, torch_ref):
    build, value, methods = CASES[name]
    ours = _numbers(build(webgrad, "float64"), value(webgrad, "float64"), methods, name)
    keys = sorted(ours)
    theirs = torch_ref(lambda torch: tuple(_numbers(build(torch, "float64"), value(torch, "float64"), methods, name)[k]
                                           for k in keys))
    for key, expected in zip(keys, theirs):
        np.testing.assert_allclose(ours[key], expected, rtol=1e-9, atol=1e-12, err_msg=f"{name}.{key}")


@pytest.mark.parametrize("name", ["Normal", "Categorical-logits", "MVN-cov", "Bernoulli-logits", "Laplace"])
def test_log_prob_on_each_device(name, device, torch_ref):
    build, value, _ = CASES[name]

    def ours_on(dev):
        with webgrad.device(dev):
            dist = build(webgrad, "float32")
            v = value(webgrad, "float32")
            return dist.log_prob(v).numpy(), dist.entropy().numpy()

    def theirs(torch):
        dist = build(torch, "float32")
        return dist.log_prob(value(torch, "float32")).numpy(), dist.entropy().numpy()

    expected = torch_ref(theirs)
    for got, want in zip(ours_on(device), expected):
        np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-5)


KL_PAIRS = [("Normal", "Normal"), ("Uniform", "Uniform"), ("Laplace", "Laplace"), ("Exponential", "Exponential"),
            ("Gamma", "Gamma"), ("Beta", "Beta"), ("Dirichlet", "Dirichlet"), ("Poisson", "Poisson"),
            ("Bernoulli-probs", "Bernoulli-logits"), ("Categorical-logits", "Categorical-probs"),
            ("OneHotCategorical", "OneHotCategorical"), ("MVN-cov", "MVN-tril"), ("MVN-tril", "MVN-precision"),
            ("Independent-Normal", "Independent-Normal"), ("Uniform", "Normal"), ("Exponential", "Gamma"),
            ("Exponential", "Normal"), ("Laplace", "Normal"), ("Gamma", "Normal")]
SECOND = {  # q differs from p where the same builder would give KL 0
    "Normal": lambda lib, d: lib.distributions.Normal(T(lib, LOC * 0.5, d), T(lib, SCALE + 1, d)),
    "Uniform": lambda lib, d: lib.distributions.Uniform(T(lib, LOC - 1, d), T(lib, LOC + SCALE + 1, d)),
    "Laplace": lambda lib, d: lib.distributions.Laplace(T(lib, LOC + 1, d), T(lib, SCALE * 2, d)),
    "Exponential": lambda lib, d: lib.distributions.Exponential(T(lib, CONC, d)),
    "Gamma": lambda lib, d: lib.distributions.Gamma(T(lib, SCALE, d), T(lib, CONC, d)),
    "Beta": lambda lib, d: lib.distributions.Beta(T(lib, SCALE, d), T(lib, CONC, d)),
    "Dirichlet": lambda lib, d: lib.distributions.Dirichlet(T(lib, SCALE, d)),
    "Poisson": lambda lib, d: lib.distributions.Poisson(T(lib, CONC, d)),
    "OneHotCategorical": lambda lib, d: lib.distributions.OneHotCategorical(probs=T(lib, np.exp(LOGITS[::-1]), d)),
    "Independent-Normal": lambda lib, d: lib.distributions.Independent(
        lib.distributions.Normal(T(lib, LOC * 0.5, d), T(lib, SCALE + 1, d)), 1),
}


@pytest.mark.parametrize("p_name,q_name", KL_PAIRS, ids=lambda v: v)
def test_kl_divergence_matches_torch(p_name, q_name, torch_ref):
    def kl(lib):
        q = SECOND[q_name] if q_name == p_name else CASES[q_name][0]
        return lib.distributions.kl_divergence(CASES[p_name][0](lib, "float64"), q(lib, "float64")).numpy()

    np.testing.assert_allclose(kl(webgrad), torch_ref(kl), rtol=1e-9, atol=1e-12)


def test_register_kl_picks_the_most_specific_and_unknown_pairs_raise():
    class MyNormal(D.Normal):
        pass

    @D.register_kl(MyNormal, D.Normal)
    def _kl(p, q):
        return webgrad.tensor(42.0)

    assert D.kl_divergence(MyNormal(0.0, 1.0), D.Normal(0.0, 1.0)).item() == 42.0
    assert D.kl_divergence(D.Normal(0.0, 1.0), MyNormal(0.0, 1.0)).item() == 0.0
    with pytest.raises(NotImplementedError, match="Normal.*Gamma"):
        D.kl_divergence(D.Normal(0.0, 1.0), D.Gamma(1.0, 1.0))


def test_validate_args_raises_value_error_as_torch():
    with pytest.raises(ValueError, match="scale"):
        D.Normal(0.0, -1.0)
    with pytest.raises(ValueError, match="probs"):
        D.Bernoulli(probs=webgrad.tensor([1.5]))
    with pytest.raises(ValueError, match="support"):
        D.Exponential(webgrad.tensor(1.0)).log_prob(webgrad.tensor(-1.0))
    with pytest.raises(ValueError, match="low"):
        D.Uniform(1.0, 0.0)
    with pytest.raises(ValueError, match="covariance_matrix"):
        D.MultivariateNormal(webgrad.zeros(2), webgrad.tensor([[1.0, 2.0], [2.0, 1.0]]))
    with pytest.raises(ValueError, match="either"):
        D.Categorical()
    assert D.Normal(0.0, -1.0, validate_args=False).scale.item() == -1.0
    assert D.Uniform(0.0, 1.0, validate_args=False).log_prob(webgrad.tensor(2.0)).item() == float("-inf")


@pytest.mark.parametrize("name,n,sample_stats", [
    ("Normal", 40_000, True), ("Uniform", 40_000, True), ("Laplace", 40_000, True), ("Exponential", 40_000, True),
    ("Gamma", 40_000, True), ("Beta", 40_000, True), ("Dirichlet", 40_000, True), ("Poisson", 40_000, True),
    ("Bernoulli-probs", 40_000, True), ("OneHotCategorical", 40_000, True), ("MVN-cov", 40_000, True),
    ("Categorical-logits", 40_000, False)])
def test_sample_statistics_and_seeding(name, n, sample_stats):
    dist = CASES[name][0](webgrad, "float64")
    webgrad.manual_seed(7)
    samples = dist.sample((n,))
    webgrad.manual_seed(7)
    assert np.array_equal(samples.numpy(), dist.sample((n,)).numpy())
    assert tuple(samples.shape) == (n, *dist.batch_shape, *dist.event_shape)
    x = samples.numpy().astype(np.float64)
    if sample_stats:
        mean, var = dist.mean.numpy(), dist.variance.numpy()
        # 6 standard errors of the sample mean; the variance within 10% (plus a little).
        np.testing.assert_array_less(np.abs(x.mean(0) - mean), 6 * np.sqrt(var / n) + 1e-12)
        np.testing.assert_allclose(x.var(0), var, rtol=0.1, atol=1e-4)
    else:  # Categorical: the frequencies of each class
        freq = np.stack([(x == k).mean(0) for k in range(4)], -1)
        p = dist.probs.numpy()
        np.testing.assert_array_less(np.abs(freq - p), 6 * np.sqrt(p * (1 - p) / n))


@pytest.mark.parametrize("name", ["Normal", "Uniform", "Laplace", "Exponential", "MVN-cov", "Independent-Normal",
                                  "Gamma", "Beta", "Dirichlet"])
def test_rsample_gradient_estimates_torchs_mean_gradient(name, torch_ref):
    # Gradients flow through rsample: averaged over many draws they estimate d(mean)/d(parameters).
    def grads(lib):
        lib.manual_seed(0)
        leaves = []

        def leaf(array):
            t = T(lib, array).requires_grad_()
            leaves.append(t)
            return t

        dist = {"Normal": lambda: lib.distributions.Normal(leaf(LOC), leaf(SCALE)),
                "Uniform": lambda: lib.distributions.Uniform(leaf(LOC), leaf(LOC + SCALE)),
                "Laplace": lambda: lib.distributions.Laplace(leaf(LOC), leaf(SCALE)),
                "Exponential": lambda: lib.distributions.Exponential(leaf(SCALE)),
                "MVN-cov": lambda: lib.distributions.MultivariateNormal(leaf(MVN_LOC), covariance_matrix=leaf(COV)),
                "Independent-Normal": lambda: lib.distributions.Independent(
                    lib.distributions.Normal(leaf(LOC), leaf(SCALE)), 1),
                "Gamma": lambda: lib.distributions.Gamma(leaf(CONC), leaf(SCALE + 1)),
                "Beta": lambda: lib.distributions.Beta(leaf(CONC), leaf(SCALE + 0.5)),
                "Dirichlet": lambda: lib.distributions.Dirichlet(leaf(CONC + 0.5))}[name]()
        # The expectation of the sample mean is the distribution's mean: d/dparams of the rsample mean
        # over many draws approaches d(mean)/dparams; compare our rsample gradient with torch's mean gradient.
        return dist, leaves

    dist, leaves = grads(webgrad)
    assert dist.has_rsample
    dist.rsample((20_000,)).mean(0).sum().backward()
    ours = [leaf.grad.numpy() for leaf in leaves]

    def expected(torch):
        d, ls = grads(torch)
        d.mean.sum().backward()
        return tuple(np.zeros(tuple(leaf.shape)) if leaf.grad is None else leaf.grad.numpy() for leaf in ls)

    for got, want in zip(ours, torch_ref(expected)):
        np.testing.assert_allclose(got, want, atol=0.06)


def test_gamma_implicit_gradient_matches_torch(torch_ref):
    """d(sample)/d(concentration) of a standard gamma sample, at the same samples, vs torch's."""
    from webgrad.distributions.gamma_grad import gamma_cdf, standard_gamma_grad

    a = np.array([0.3, 0.5, 1.0, 2.5, 10.0, 100.0, 3.0])
    x = np.array([0.01, 0.3, 2.0, 2.5, 12.0, 95.0, 9.0])
    expected_grad, expected_cdf = torch_ref(lambda torch: (
        torch._standard_gamma_grad(torch.tensor(a), torch.tensor(x)).numpy(),
        torch.special.gammainc(torch.tensor(a), torch.tensor(x)).numpy()))
    np.testing.assert_allclose(gamma_cdf(a, x), expected_cdf, rtol=1e-8)
    # torch computes it by approximations good to about 1e-4 relative; ours is the exact one (finite
    # differences of an accurate CDF), so they agree to that.
    np.testing.assert_allclose(standard_gamma_grad(a, x), expected_grad, rtol=5e-4)


def test_poisson_has_no_rsample_as_torch():
    assert not D.Poisson(2.0).has_rsample
    with pytest.raises(NotImplementedError, match="rsample"):
        D.Poisson(2.0).rsample()


def test_expand_and_shapes():
    dist = D.Normal(webgrad.zeros(3), 1.0).expand((2, 3))
    assert tuple(dist.batch_shape) == (2, 3) and tuple(dist.sample((4,)).shape) == (4, 2, 3)
    cat = D.Categorical(logits=webgrad.zeros(4)).expand((5,))
    assert tuple(cat.sample().shape) == (5,) and tuple(cat.log_prob(webgrad.tensor([0, 1, 2, 3, 0])).shape) == (5,)
    mvn = D.MultivariateNormal(webgrad.zeros(2), webgrad.eye(2)).expand((3,))
    assert tuple(mvn.sample().shape) == (3, 2) and tuple(mvn.log_prob(webgrad.zeros(2)).shape) == (3,)
    with pytest.raises(ValueError, match="event_shape"):
        mvn.log_prob(webgrad.zeros(3))


def test_reinforce_policy_gradient_matches_torch(device, torch_ref):
    """A policy-gradient step: loss = -(log_prob(action) * reward).mean(), backward to the policy weights."""
    rng = np.random.default_rng(5)  # local: the values must not depend on which tests ran before
    weight0 = rng.normal(size=(5, 4)).astype(np.float32)
    states = rng.normal(size=(8, 5)).astype(np.float32)
    rewards = rng.normal(size=(8,)).astype(np.float32)
    webgrad.manual_seed(1)
    weight = webgrad.tensor(weight0, device=device).requires_grad_()
    policy = D.Categorical(logits=webgrad.tensor(states, device=device) @ weight)
    sampled = policy.sample()
    assert sampled.dtype is webgrad.int64 and tuple(sampled.shape) == (8,) and set(sampled.tolist()) <= set(range(4))
    # The gradient is compared at fixed actions (the draws differ between devices and from torch's).
    action_list = [int(a) for a in rng.integers(0, 4, size=8)]
    actions = webgrad.tensor(action_list, device=device)
    loss = -(policy.log_prob(actions) * webgrad.tensor(rewards, device=device)).mean()
    loss.backward()

    def torch_side(torch):
        w = torch.tensor(weight0, requires_grad=True)
        pi = torch.distributions.Categorical(logits=torch.tensor(states) @ w)
        (-(pi.log_prob(torch.tensor(action_list)) * torch.tensor(rewards)).mean()).backward()
        return w.grad.numpy()

    np.testing.assert_allclose(weight.grad.numpy(), torch_ref(torch_side), rtol=1e-4, atol=1e-5)
