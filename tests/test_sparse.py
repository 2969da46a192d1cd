"""webgrad.sparse (COO) against torch: construction, coalesce, to_sparse/to_dense, sparse.mm with
gradients to the dense operand and the sparse values (on every device), sparse.sum, and the
errors that name an unsupported op instead of densifying."""
import numpy as np
import pytest

import webgrad

INDICES = [[0, 2, 1, 0, 2], [1, 0, 3, 1, 3]]  # (0, 1) twice: coalesce sums it
VALUES = [1.5, -2.0, 0.5, 3.0, 4.0]
DENSE = np.random.default_rng(0).normal(size=(4, 3))


def _coo(lib, device=None, requires_grad=False):
    kwargs = {} if device is None else {"device": device}
    values = lib.tensor(VALUES, **kwargs).requires_grad_(requires_grad)
    return lib.sparse_coo_tensor(lib.tensor(INDICES, **kwargs), values, (3, 4)), values


def test_construction_and_coalesce_match_torch(torch_ref):
    def parts(lib):
        s, _ = _coo(lib)
        c = s.coalesce()
        inferred = lib.sparse_coo_tensor(lib.tensor(INDICES), lib.tensor(VALUES))
        return (s.to_dense().numpy(), c.indices().numpy(), c.values().numpy(), np.array([s._nnz(), c._nnz()]),
                np.array([s.is_coalesced(), c.is_coalesced(), s.is_sparse, s.sparse_dim(), s.dense_dim()]),
                np.array(tuple(inferred.shape)), s._indices().numpy(), s._values().numpy())

    for ours, theirs in zip(parts(webgrad), torch_ref(parts)):
        np.testing.assert_array_equal(ours, theirs)


def test_to_sparse_and_hybrid_match_torch(torch_ref):
    array = np.array([[0.0, 1.0, 0.0], [0.0, 0.0, 0.0], [2.0, 0.0, -3.0]])

    def parts(lib):
        x = lib.tensor(array)
        s = x.to_sparse()
        hybrid = x.to_sparse(1)
        return (s.indices().numpy(), s.values().numpy(), hybrid.indices().numpy(), hybrid.values().numpy(),
                hybrid.to_dense().numpy(), np.array([hybrid.sparse_dim(), hybrid.dense_dim(), s._nnz()]))

    for ours, theirs in zip(parts(webgrad), torch_ref(parts)):
        np.testing.assert_array_equal(ours, theirs)
    assert webgrad.tensor(array).to_dense() is not None and not webgrad.tensor(array).is_sparse


def test_sparse_mm_forward_and_gradients_match_torch(device, torch_ref):
    def run(lib, dev=None):
        s, values = _coo(lib, dev, requires_grad=True)
        kwargs = {} if dev is None else {"device": dev}
        dense = lib.tensor(DENSE.astype(np.float32), **kwargs).requires_grad_()
        weight = lib.tensor(np.linspace(-1, 1, 3).astype(np.float32), **kwargs)
        out = lib.sparse.mm(s, dense)
        (out * weight).sum().backward()
        also = lib.spmm(s, dense)
        return out.detach().numpy(), dense.grad.numpy(), values.grad.numpy(), also.detach().numpy()

    ours = run(webgrad, device)
    for got, want in zip(ours, torch_ref(run)):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    s, _ = _coo(webgrad, device)
    np.testing.assert_allclose((s @ webgrad.tensor(DENSE.astype(np.float32), device=device)).numpy(), ours[0],
                               rtol=1e-6)


def test_graph_convolution_step_matches_torch(device, torch_ref):
    """One GCN layer: relu(A @ X @ W) with a sparse normalized adjacency A; gradient w.r.t. W."""
    edges = np.array([[0, 1, 1, 2, 2, 3, 0, 1, 2, 3], [1, 0, 2, 1, 3, 2, 0, 1, 2, 3]])
    degree = np.bincount(edges[0], minlength=4).astype(np.float32)
    norm = (1 / np.sqrt(degree[edges[0]] * degree[edges[1]])).astype(np.float32)
    rng = np.random.default_rng(1)
    features, weight0 = rng.normal(size=(4, 5)).astype(np.float32), rng.normal(size=(5, 2)).astype(np.float32)

    def run(lib, dev=None):
        kwargs = {} if dev is None else {"device": dev}
        adjacency = lib.sparse_coo_tensor(lib.tensor(edges, **kwargs), lib.tensor(norm, **kwargs), (4, 4))
        weight = lib.tensor(weight0, **kwargs).requires_grad_()
        hidden = lib.sparse.mm(adjacency, lib.tensor(features, **kwargs) @ weight).relu()
        hidden.pow(2).sum().backward()
        return hidden.detach().numpy(), weight.grad.numpy()

    for got, want in zip(run(webgrad, device), torch_ref(run)):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_sparse_grad_is_sparse_on_the_values_pattern(torch_ref):
    def run(lib):
        s = lib.sparse_coo_tensor(lib.tensor(INDICES), lib.tensor(VALUES), (3, 4), requires_grad=True)
        lib.sparse.mm(s, lib.tensor(DENSE, dtype=lib.float32)).sum().backward()
        return s.grad.is_sparse, s.grad.to_dense().numpy()

    ours, theirs = run(webgrad), torch_ref(run)
    assert ours[0] and bool(theirs[0])
    np.testing.assert_allclose(ours[1], theirs[1], rtol=1e-6)


def test_sparse_sum_matches_torch(torch_ref):
    def run(lib):
        s, _ = _coo(lib)
        by_rows = lib.sparse.sum(s, 1)
        by_cols = lib.sparse.sum(s, 0)
        return (lib.sparse.sum(s).numpy(), by_rows.to_dense().numpy(), by_cols.to_dense().numpy(),
                lib.sparse.sum(s, (0, 1)).numpy())

    for got, want in zip(run(webgrad), torch_ref(run)):
        np.testing.assert_allclose(got, want, rtol=1e-6)


def test_scalar_arithmetic_add_and_transpose():
    s, _ = _coo(webgrad)
    dense = s.to_dense().numpy()
    np.testing.assert_allclose((2 * s).to_dense().numpy(), 2 * dense)
    np.testing.assert_allclose((s / 2).to_dense().numpy(), dense / 2)
    np.testing.assert_allclose((s + s).to_dense().numpy(), 2 * dense)
    np.testing.assert_allclose((s - s).to_dense().numpy(), 0 * dense)
    np.testing.assert_allclose(s.t().to_dense().numpy(), dense.T)


def test_unsupported_ops_are_named_not_densified():
    s, _ = _coo(webgrad)
    with pytest.raises(NotImplementedError, match="exp"):
        s.exp()
    with pytest.raises(NotImplementedError, match="add of a sparse and a dense"):
        s + webgrad.ones(3, 4)
    with pytest.raises(NotImplementedError, match="two sparse"):
        webgrad.sparse.mm(s, s.t())
    with pytest.raises(NotImplementedError, match="reshape"):
        s.reshape(12)
    with pytest.raises(RuntimeError, match="coalesce"):
        s.indices()
    with pytest.raises(RuntimeError, match="inner dimensions"):
        webgrad.sparse.mm(s, webgrad.ones(3, 2))
    with pytest.raises(RuntimeError, match="inconsistent"):
        webgrad.sparse_coo_tensor([[0, 5]], [1.0, 2.0], (3,))
    with pytest.raises(RuntimeError, match="same nnz"):
        webgrad.sparse_coo_tensor([[0, 1]], [1.0], (3,))
