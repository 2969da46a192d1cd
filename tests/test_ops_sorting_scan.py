"""What the op table cannot say about scans, sorting and sampling: second
derivatives, multinomial's statistics, the errors, and agreement with torch where
semantics are subtle (NaN order, ties, unique's outputs)."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import webgrad
from conftest import assert_close, gradcheck, gradgradcheck, need_module


def _leaf(values):
    return webgrad.tensor(np.asarray(values, dtype=np.float64), requires_grad=True)


@pytest.mark.parametrize("fn", [
    lambda x: x.cumsum(1) ** 2,
    lambda x: x.cumprod(1),
    lambda x: x.cumprod(0) * x,
    lambda x: x.sort(1).values ** 3,
    lambda x: x.topk(2, dim=1).values.exp(),
    lambda x: webgrad.einsum("ij,kj->ik", x, x),
    lambda x: x.tril(1) * x.triu(),
], ids=["cumsum", "cumprod", "cumprod_dim0", "sort", "topk", "einsum", "tril_triu"])
def test_second_derivatives(fn):
    rng = np.random.default_rng(3)
    gradgradcheck(fn, [_leaf(rng.permutation(12).reshape(3, 4) * 0.3 - 1.6)])


def test_cumprod_gradient_at_zeros_matches_torch():
    torch = need_module("torch")
    values = [[2.0, 0.0, 3.0, 0.0, 5.0], [0.0, 1.5, -2.0, 1.0, 0.5], [1.0, 2.0, 3.0, 4.0, 0.0]]
    x = _leaf(values)
    (x.cumprod(1) * webgrad.arange(5.0, dtype=webgrad.float64)).sum().backward()
    tx = torch.tensor(values, dtype=torch.float64, requires_grad=True)
    (tx.cumprod(1) * torch.arange(5.0, dtype=torch.float64)).sum().backward()
    assert_close(x.grad, tx.grad.numpy(), 1e-12, 1e-12)
    gradcheck(lambda t: t.cumprod(1), [_leaf(values)])


def test_sort_and_topk_match_torch_on_nan_ties_and_signed_zeros(device):
    torch = need_module("torch")
    data = [1.0, float("nan"), 3.0, -0.0, 0.0, float("-inf"), 1.0, float("inf")]
    x, tx = webgrad.tensor(data, device=device), torch.tensor(data)
    for descending in (False, True):
        ours, theirs = x.sort(descending=descending, stable=True), tx.sort(descending=descending, stable=True)
        assert ours.indices.tolist() == theirs.indices.tolist()
        np.testing.assert_array_equal(ours.values.numpy(), theirs.values.numpy())
    assert x.topk(3).indices.tolist() == tx.topk(3).indices.tolist()


def test_unique_matches_torch(device):
    torch = need_module("torch")
    data = [[3, 1], [1, 2], [3, 1]]
    ours = webgrad.unique(webgrad.tensor(data, device=device), return_inverse=True, return_counts=True)
    theirs = torch.unique(torch.tensor(data), return_inverse=True, return_counts=True)
    assert [t.tolist() for t in ours] == [t.tolist() for t in theirs]
    ours = webgrad.unique(webgrad.tensor(data, device=device), dim=0, return_inverse=True)
    theirs = torch.unique(torch.tensor(data), dim=0, return_inverse=True)
    assert [t.tolist() for t in ours] == [t.tolist() for t in theirs]
    assert all(t.device == device for t in ours)


def test_searchsorted_scalar_and_sorter_match_torch():
    torch = need_module("torch")
    seq = [5.0, 1.0, 3.0]
    order = webgrad.argsort(webgrad.tensor(seq))
    ours = webgrad.searchsorted(webgrad.tensor(seq), webgrad.tensor([3.0, 4.0]), sorter=order)
    theirs = torch.searchsorted(torch.tensor(seq), torch.tensor([3.0, 4.0]), sorter=torch.argsort(torch.tensor(seq)))
    assert ours.tolist() == theirs.tolist()
    assert webgrad.searchsorted(webgrad.tensor([1, 3, 5]), 3).tolist() == torch.searchsorted(
        torch.tensor([1, 3, 5]), 3).tolist()


def test_einsum_matches_torch_on_a_few_equations():
    torch = need_module("torch")
    rng = np.random.default_rng(0)
    a, b, c = rng.standard_normal((2, 3, 4)), rng.standard_normal((4, 5)), rng.standard_normal((2, 3, 3))
    for eq, arrays in [("bij,jk->bik", (a, b)), ("bij->j", (a,)), ("...ij,jk->...ik", (a, b)), ("bij,jk", (a, b)),
                       ("bii->bi", (c,)), ("bij,bkj->bik", (a, a)), ("ij,ij->", (b, b))]:
        ours = webgrad.einsum(eq, *[webgrad.tensor(x) for x in arrays])
        theirs = torch.einsum(eq, *[torch.tensor(x) for x in arrays])
        assert_close(ours, theirs.numpy(), 1e-12, 1e-12, msg=eq)


# -- multinomial: bounded statistical checks (seeded, so never flaky) -----------------------
def _frequencies(samples, n):
    return np.bincount(np.asarray(samples).reshape(-1), minlength=n) / np.asarray(samples).size


def test_multinomial_with_replacement_follows_the_weights(device):
    webgrad.manual_seed(1)
    weights = webgrad.tensor([[1.0, 2.0, 3.0, 4.0, 0.0]] * 4, device=device)  # unnormalized, one zero
    samples = webgrad.multinomial(weights, 2000, replacement=True)
    assert tuple(samples.shape) == (4, 2000) and samples.dtype is webgrad.int64 and samples.device == device
    freq = _frequencies(samples.tolist(), 5)
    p = np.array([0.1, 0.2, 0.3, 0.4, 0.0])
    bound = 5 * np.sqrt(p * (1 - p) / 8000) + 1e-12  # five standard errors
    assert np.all(np.abs(freq - p) <= bound), (freq, p)
    assert freq[4] == 0.0


def test_multinomial_without_replacement_draws_distinct_categories_in_proportion(device):
    webgrad.manual_seed(2)
    weights = webgrad.tensor([[0.5, 0.25, 0.25, 0.0]] * 3000, device=device)
    samples = webgrad.multinomial(weights, 2).numpy()
    assert np.all(samples[:, 0] != samples[:, 1]) and not np.any(samples == 3)
    first = _frequencies(samples[:, 0], 4)
    assert np.all(np.abs(first - [0.5, 0.25, 0.25, 0.0]) <= 5 * np.sqrt(0.25 / 3000))
    all_three = webgrad.multinomial(webgrad.tensor([0.2, 0.3, 0.5], device=device), 3)
    assert sorted(all_three.tolist()) == [0, 1, 2]


def test_multinomial_of_a_sharp_distribution_warns_of_nothing(device):
    # A low sampling temperature gives weights like 1e-30 next to 1: the race's keys must not
    # overflow (numpy said "overflow encountered in divide" to every sampling script).
    webgrad.manual_seed(4)
    weights = webgrad.tensor([[1.0, 1e-30, 1e-35, 0.0]] * 200, device=device)  # all normal floats
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        samples = webgrad.multinomial(weights, 3).numpy()
    assert np.all(samples[:, 0] == 0) and not np.any(samples == 3)
    assert np.all(samples[:, 1] == 1) and np.all(samples[:, 2] == 2)


def test_multinomial_is_reproducible_with_a_seed_or_generator(device):
    probs = webgrad.tensor([0.1, 0.6, 0.3], device=device)
    webgrad.manual_seed(7)
    first = webgrad.multinomial(probs, 20, replacement=True).tolist()
    webgrad.manual_seed(7)
    assert webgrad.multinomial(probs, 20, replacement=True).tolist() == first
    draws = [probs.multinomial(20, True, generator=webgrad.Generator().manual_seed(3)).tolist() for _ in range(2)]
    assert draws[0] == draws[1]


def test_multinomial_errors_name_the_problem():
    with pytest.raises(webgrad.OpError, match="without replacement from 2 categories"):
        webgrad.multinomial(webgrad.tensor([0.5, 0.5]), 3)
    with pytest.raises(webgrad.OpError, match="invalid weights"):
        webgrad.multinomial(webgrad.tensor([0.5, -0.1]), 1)
    with pytest.raises(webgrad.OpError, match="invalid weights"):
        webgrad.multinomial(webgrad.tensor([[0.0, 0.0]]), 1, replacement=True)
    with pytest.raises(webgrad.OpError, match="1-D or 2-D float"):
        webgrad.multinomial(webgrad.tensor([1, 2]), 1)


# -- errors ------------------------------------------------------------------------------
def test_errors_name_the_op_and_the_fix():
    x = webgrad.ones(3, 4)
    with pytest.raises(webgrad.OpError, match=r"topk: k \(5\) must be an int in \[0, 4\]"):
        x.topk(5)
    with pytest.raises(IndexError, match="cumsum: dimension out of range"):
        x.cumsum(2)
    with pytest.raises(webgrad.OpError, match="tril: expected a tensor with at least 2 dims"):
        webgrad.ones(3).tril()
    with pytest.raises(webgrad.OpError, match="outer: expected two 1-D tensors"):
        webgrad.outer(x, x)
    with pytest.raises(webgrad.OpError, match="einsum: subscript 'j' has sizes 4 and 3"):
        webgrad.einsum("ij,jk->ik", x, x)
    with pytest.raises(webgrad.OpError, match="einsum: equation 'ij,jk->ik' names 2 operands but 1"):
        webgrad.einsum("ij,jk->ik", x)
    with pytest.raises(webgrad.OpError, match="output subscript 'z'"):
        webgrad.einsum("ij->z", x)
    with pytest.raises(webgrad.OpError, match="searchsorted: the leading dims"):
        webgrad.searchsorted(webgrad.ones(2, 3), webgrad.ones(3, 3))
    with pytest.raises(webgrad.OpError, match="bucketize: boundaries must be 1-D"):
        webgrad.bucketize(x, webgrad.ones(2, 2))
