"""``webgrad.sparse``: sparse COO tensors, as PyTorch's ``torch.sparse_coo_tensor``.

A ``SparseTensor`` holds ``indices`` (int64, ``(sparse_dim, nnz)``) and ``values``
(``(nnz, *dense_dims)``) of a tensor of ``size``; every other entry is zero. It is
made of two ordinary Tensors, so it lives on cpu or webgpu and every operation here is
composed from dense ops that run on both (``index_select``, ``scatter_add``,
``index_put`` with accumulation): gradients reach the dense operand and the sparse
values, as in PyTorch, e.g. for graph networks (an adjacency matrix times features)::

    >>> adjacency = webgrad.sparse_coo_tensor([[0, 1, 1], [1, 0, 2]], [1.0, 1.0, 0.5], (2, 3))
    >>> features = webgrad.randn(3, 4, requires_grad=True)
    >>> webgrad.sparse.mm(adjacency, features).sum().backward()

What is supported: ``sparse_coo_tensor``, ``Tensor.to_sparse()``, ``to_dense()``,
``indices()``/``values()`` (and ``_indices``/``_values``), ``coalesce()``,
``is_coalesced()``, ``_nnz()``, ``sparse_dim()``/``dense_dim()``, ``sparse.mm`` /
``spmm`` / ``sparse @ dense`` (2-D sparse times dense), ``sparse.sum``, ``t()``, scalar
``*`` and ``/``, sparse ``+`` sparse, ``neg``, ``to``/``cpu``, ``requires_grad`` and
``.grad`` (sparse, on the values' pattern). Any other Tensor operation on a sparse
tensor raises an error naming the op; nothing silently densifies (call ``to_dense()``).
Unlike PyTorch, a SparseTensor is not an instance of ``webgrad.Tensor``.
"""
from __future__ import annotations

import numbers

import numpy as np

from . import creation, dtypes
from .ops import cat
from .tensor import Size, Tensor

__all__ = ["SparseTensor", "sparse_coo_tensor", "mm", "spmm", "sum"]


class SparseTensor:
    """A sparse COO tensor: ``indices`` (sparse_dim, nnz) int64 and ``values`` (nnz, *dense_shape)."""

    is_sparse = True
    is_sparse_csr = False
    layout = "sparse_coo"

    def __init__(self, indices: Tensor, values: Tensor, size, coalesced: bool = False):
        self._coo_indices, self._coo_values, self.shape = indices, values, Size(tuple(int(s) for s in size))
        self._coalesced = coalesced

    # -- what it is ------------------------------------------------------------------------------
    @property
    def dtype(self):
        return self._coo_values.dtype

    @property
    def device(self):
        return self._coo_values.device

    @property
    def is_cuda(self) -> bool:
        return False

    @property
    def is_cpu(self) -> bool:
        return self.device == "cpu"

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def dim(self) -> int:
        return len(self.shape)

    def size(self, dim=None):
        return self.shape if dim is None else self.shape[dim]

    def numel(self) -> int:
        return self.shape.numel()

    def sparse_dim(self) -> int:
        return self._coo_indices.shape[0]

    def dense_dim(self) -> int:
        return self._coo_values.ndim - 1

    def _nnz(self) -> int:
        return self._coo_values.shape[0]

    def is_coalesced(self) -> bool:
        return self._coalesced

    def is_floating_point(self) -> bool:
        return self.dtype.is_floating_point

    # -- autograd (through the values) ---------------------------------------------------------------
    @property
    def requires_grad(self) -> bool:
        return self._coo_values.requires_grad

    def requires_grad_(self, requires_grad: bool = True) -> "SparseTensor":
        self._coo_values.requires_grad_(requires_grad)
        return self

    @property
    def grad(self):
        """The gradient as a sparse tensor on the values' pattern (None before a backward)."""
        grad = self._coo_values.grad
        if grad is None:
            return None
        if self._coalesced or not self._nnz():
            return SparseTensor(self._coo_indices, grad, self.shape, self._coalesced)
        # Every result depends on repeated entries only through their sum, so their gradients are
        # equal: one per coalesced index, as PyTorch's gradient on the coalesced pattern.
        linear, sparse_shape = self._linear_indices()
        unique, first = np.unique(linear, return_index=True)
        indices = creation.tensor(np.stack(np.unravel_index(unique, sparse_shape)).astype(np.int64)
                                  .reshape(len(sparse_shape), -1), device=self.device)
        picked = grad.index_select(0, creation.tensor(first.astype(np.int64), device=self.device))
        return SparseTensor(indices, picked, self.shape, True)

    def _linear_indices(self):
        index = self._coo_indices.detach().cpu().numpy()
        sparse_shape = tuple(self.shape[:self.sparse_dim()])
        return np.ravel_multi_index(tuple(index), sparse_shape), sparse_shape

    def detach(self) -> "SparseTensor":
        return SparseTensor(self._coo_indices, self._coo_values.detach(), self.shape, self._coalesced)

    # -- the parts -------------------------------------------------------------------------------
    def indices(self) -> Tensor:
        if not self._coalesced:
            raise RuntimeError("Cannot get indices on an uncoalesced tensor, please call .coalesce() first")
        return self._coo_indices

    def values(self) -> Tensor:
        if not self._coalesced:
            raise RuntimeError("Cannot get values on an uncoalesced tensor, please call .coalesce() first")
        return self._coo_values

    def _indices(self) -> Tensor:
        """The indices as stored, coalesced or not (``torch.Tensor._indices``)."""
        return self._coo_indices

    def _values(self) -> Tensor:
        """The values as stored, coalesced or not (``torch.Tensor._values``)."""
        return self._coo_values

    def coalesce(self) -> "SparseTensor":
        """Indices sorted (row-major) and unique; the values of repeated indices summed."""
        if self._coalesced:
            return self
        if not self._nnz():
            return SparseTensor(self._coo_indices, self._coo_values, self.shape, True)
        linear, sparse_shape = self._linear_indices()
        unique, inverse = np.unique(linear, return_inverse=True)
        device = self.device
        new_indices = creation.tensor(np.stack(np.unravel_index(unique, sparse_shape)).astype(np.int64)
                                      .reshape(len(sparse_shape), -1), device=device)
        summed = creation.zeros((len(unique), *self._coo_values.shape[1:]), dtype=self.dtype, device=device)
        summed = summed.index_put((creation.tensor(inverse.astype(np.int64), device=device),), self._coo_values,
                                  accumulate=True)
        return SparseTensor(new_indices, summed, self.shape, True)

    def to_dense(self, dtype=None, *, masked_grad=None) -> Tensor:
        """The dense tensor (differentiable w.r.t. the values); repeated indices add up."""
        dense = creation.zeros(tuple(self.shape), dtype=self.dtype, device=self.device)
        if self._nnz():
            rows = tuple(self._coo_indices[d] for d in range(self.sparse_dim()))
            dense = dense.index_put(rows, self._coo_values, accumulate=True)
        return dense if dtype is None else dense.type(dtype)

    def to_sparse(self, *args, **kwargs) -> "SparseTensor":
        return self

    # -- moves and conversions ---------------------------------------------------------------------
    def to(self, *args, **kwargs) -> "SparseTensor":
        values = self._coo_values.to(*args, **kwargs)
        indices = self._coo_indices.to(values.device)
        return SparseTensor(indices, values, self.shape, self._coalesced)

    def cpu(self) -> "SparseTensor":
        return self.to("cpu")

    def type(self, dtype) -> "SparseTensor":
        return SparseTensor(self._coo_indices, self._coo_values.type(dtype), self.shape, self._coalesced)

    def float(self) -> "SparseTensor":
        return self.type(dtypes.float32)

    def double(self) -> "SparseTensor":
        return self.type(dtypes.float64)

    # -- arithmetic ----------------------------------------------------------------------------------
    def t(self) -> "SparseTensor":
        if self.sparse_dim() != 2 or self.dense_dim():
            raise RuntimeError(f"t(): expects a 2-D sparse tensor, got sparse_dim {self.sparse_dim()} and "
                               f"dense_dim {self.dense_dim()}")
        return SparseTensor(self._coo_indices.flip((0,)), self._coo_values, (self.shape[1], self.shape[0]))

    def __mul__(self, other):
        if isinstance(other, numbers.Number) or (isinstance(other, Tensor) and other.ndim == 0):
            return SparseTensor(self._coo_indices, self._coo_values * other, self.shape, self._coalesced)
        raise _unsupported("mul (by anything but a scalar)")

    __rmul__ = __mul__

    def __truediv__(self, other):
        if isinstance(other, numbers.Number) or (isinstance(other, Tensor) and other.ndim == 0):
            return SparseTensor(self._coo_indices, self._coo_values / other, self.shape, self._coalesced)
        raise _unsupported("div (by anything but a scalar)")

    def __neg__(self):
        return SparseTensor(self._coo_indices, -self._coo_values, self.shape, self._coalesced)

    def __add__(self, other):
        if not isinstance(other, SparseTensor):
            raise _unsupported("add of a sparse and a dense tensor")
        if other.shape != self.shape:
            raise RuntimeError(f"add: sparse tensors of sizes {tuple(self.shape)} and {tuple(other.shape)} differ")
        indices = cat([self._coo_indices, other._coo_indices.to(self.device)], 1)
        return SparseTensor(indices, cat([self._coo_values, other._coo_values], 0), self.shape).coalesce()

    def __sub__(self, other):
        if not isinstance(other, SparseTensor):
            raise _unsupported("sub of a sparse and a dense tensor")
        return self + (-other)

    def __matmul__(self, other):
        return mm(self, other)

    def mm(self, other):
        return mm(self, other)

    def matmul(self, other):
        return mm(self, other)

    def sum(self, dim=None, keepdim=False, dtype=None):
        return sum(self, dim, dtype=dtype) if not keepdim else _raise_keepdim()

    def __len__(self) -> int:
        return self.shape[0]

    def __repr__(self) -> str:
        return (f"tensor(indices={self._coo_indices!r},\n       values={self._coo_values!r},\n       "
                f"size={tuple(self.shape)}, nnz={self._nnz()}, layout=webgrad.sparse_coo)")

    def __getattr__(self, name):
        # Anything Tensor has that is not implemented above: say so, never densify silently.
        if hasattr(Tensor, name):
            raise _unsupported(name)
        raise AttributeError(f"'SparseTensor' object has no attribute {name!r}")


def _raise_keepdim():
    raise _unsupported("sum with keepdim=True")


def _unsupported(op: str) -> NotImplementedError:
    return NotImplementedError(f"sparse COO tensors do not support {op} in webgrad; call .to_dense() first "
                               f"(that makes a dense tensor of the full size)")


def sparse_coo_tensor(indices, values, size=None, *, dtype=None, device=None, requires_grad=False,
                      check_invariants=None, is_coalesced=None) -> SparseTensor:
    """A sparse COO tensor with ``values[k]`` at ``indices[:, k]`` (``torch.sparse_coo_tensor``).

    Args:
        indices: int (sparse_dim, nnz): where the values go.
        values: (nnz, *dense_dims): the values (a Tensor keeps its autograd history).
        size: the full shape (default: the smallest that holds the indices).
        dtype, device, requires_grad: of the values.
        is_coalesced: promise the indices are sorted and unique (default: not assumed).

    Example:
        >>> s = webgrad.sparse_coo_tensor([[0, 1], [2, 0]], [3.0, 4.0], (2, 3))
        >>> s.to_dense()
        tensor([[0., 0., 3.],
                [4., 0., 0.]])
    """
    values = values if isinstance(values, Tensor) else creation.tensor(values, dtype=dtype, device=device)
    if dtype is not None and values.dtype is not dtypes.to_dtype(dtype):
        values = values.type(dtype)
    if device is not None:
        values = values.to(device)
    index = indices if isinstance(indices, Tensor) else creation.tensor(np.asarray(indices, dtype=np.int64))
    if index.dtype.category != "int":
        raise RuntimeError(f"sparse_coo_tensor: indices must be an int64 tensor, got {index.dtype.name}")
    index = index.long().to(values.device)
    if index.ndim != 2:
        if index.ndim == 1 and index.shape[0] == 0:
            index = index.reshape(1, 0)
        else:
            raise RuntimeError(f"sparse_coo_tensor: indices must be sparse_dim x nnz, but got: {tuple(index.shape)}")
    if values.ndim < 1 or values.shape[0] != index.shape[1]:
        raise RuntimeError(f"sparse_coo_tensor: indices and values must have the same nnz, but got nnz from "
                           f"indices: {index.shape[1]}, nnz from values: {values.shape[0] if values.ndim else 0}")
    host_index = index.cpu().numpy()
    if host_index.size and host_index.min() < 0:
        raise RuntimeError("sparse_coo_tensor: found a negative index")
    if size is None:
        sparse = [int(m) + 1 for m in host_index.max(1)] if host_index.size else [0] * index.shape[0]
        size = (*sparse, *values.shape[1:])
    size = tuple(int(s) for s in size)
    sparse_dim = index.shape[0]
    if len(size) != sparse_dim + values.ndim - 1:
        raise RuntimeError(f"sparse_coo_tensor: number of dimensions must be sparse_dim ({sparse_dim}) + dense_dim "
                           f"({values.ndim - 1}), but got {len(size)}")
    if tuple(values.shape[1:]) != size[sparse_dim:]:
        raise RuntimeError(f"sparse_coo_tensor: values have dense shape {tuple(values.shape[1:])}, expected "
                           f"{size[sparse_dim:]}")
    if host_index.size:
        too_big = host_index.max(1) >= np.asarray(size[:sparse_dim])
        if too_big.any():
            d = int(np.argmax(too_big))
            raise RuntimeError(f"sparse_coo_tensor: size is inconsistent with indices: for dim {d}, size is "
                               f"{size[d]} but found index {int(host_index[d].max())}")
    if requires_grad:
        values.requires_grad_(True)
    return SparseTensor(index, values, size, bool(is_coalesced))


def to_sparse(dense: Tensor, sparse_dim=None, *, layout=None, blocksize=None, dense_dim=None) -> SparseTensor:
    """``Tensor.to_sparse()``: the nonzero entries of ``dense`` (differentiable w.r.t. ``dense``)."""
    if layout not in (None, "sparse_coo") or blocksize is not None:
        raise _unsupported(f"to_sparse(layout={layout!r}, blocksize={blocksize!r}) (only COO)")
    sparse_dim = dense.ndim if sparse_dim is None else int(sparse_dim)
    if not 0 < sparse_dim <= dense.ndim:
        raise RuntimeError(f"to_sparse: sparse_dim must be in [1, {dense.ndim}], got {sparse_dim}")
    array = dense.detach().cpu().numpy()
    flat = array.reshape(*array.shape[:sparse_dim], -1)
    nonzero = np.nonzero(flat.any(-1))
    indices = creation.tensor(np.stack(nonzero).astype(np.int64).reshape(sparse_dim, -1), device=dense.device)
    values = dense[tuple(indices[d] for d in range(sparse_dim))]
    return SparseTensor(indices, values, dense.shape, True)


def mm(sparse: SparseTensor, dense: Tensor, reduce: str | None = None) -> Tensor:
    """``sparse @ dense`` for a 2-D sparse (n, m) and a dense (m, p) matrix: a dense (n, p) result
    (``torch.sparse.mm``); gradients reach ``dense`` and the sparse values.

    Shape:
        sparse (n, m) COO, dense (m, p) -> (n, p).
    """
    if not isinstance(sparse, SparseTensor):
        raise TypeError(f"sparse.mm: the first argument must be a sparse COO tensor, got {type(sparse).__name__}")
    if reduce not in (None, "sum"):
        raise _unsupported(f"sparse.mm(reduce={reduce!r}) (only the sum)")
    if isinstance(dense, SparseTensor):
        raise _unsupported("sparse.mm of two sparse tensors")
    if sparse.sparse_dim() != 2 or sparse.dense_dim() or dense.ndim != 2:
        raise RuntimeError(f"sparse.mm: expects a 2-D sparse and a 2-D dense matrix, got sizes {tuple(sparse.shape)}"
                           f" (sparse_dim {sparse.sparse_dim()}) and {tuple(dense.shape)}")
    n, m = sparse.shape
    if dense.shape[0] != m:
        raise RuntimeError(f"sparse.mm: ({n}, {m}) @ {tuple(dense.shape)}: inner dimensions differ "
                           f"({m} != {dense.shape[0]})")
    p = dense.shape[1]
    rows, cols = sparse._coo_indices[0], sparse._coo_indices[1]
    gathered = dense.index_select(0, cols) * sparse._coo_values.unsqueeze(-1)  # (nnz, p)
    out = creation.zeros((n, p), dtype=gathered.dtype, device=dense.device)
    return out.scatter_add(0, rows.unsqueeze(-1).expand(sparse._nnz(), p), gathered)


spmm = mm


def sum(input: SparseTensor, dim=None, dtype=None):  # noqa: A001  (torch.sparse.sum)
    """Sum of a sparse tensor (``torch.sparse.sum``): all of it (a 0-d dense tensor), or over ``dim``s;
    the result is sparse while some sparse dims remain, dense otherwise."""
    if not isinstance(input, SparseTensor):
        raise TypeError(f"sparse.sum: expects a sparse COO tensor, got {type(input).__name__}")
    values = input._coo_values if dtype is None else input._coo_values.type(dtype)
    if dim is None:
        return values.sum()
    dims = sorted({d % input.ndim for d in ((dim,) if isinstance(dim, int) else dim)})
    sparse_dim = input.sparse_dim()
    sparse_dims = [d for d in dims if d < sparse_dim]
    dense_dims = [d - sparse_dim + 1 for d in dims if d >= sparse_dim]
    if dense_dims:
        values = values.sum(dense_dims)
    keep = [d for d in range(sparse_dim) if d not in sparse_dims]
    if not keep:
        return values.sum(0)
    shape = [input.shape[d] for d in keep] + [s for d, s in enumerate(input.shape) if d >= sparse_dim and d not in dims]
    indices = input._coo_indices[keep] if len(keep) < sparse_dim else input._coo_indices
    return SparseTensor(indices, values, shape).coalesce()
