"""Out-of-range and negative indices for every index-taking op, on every device.

One table: each row is an op that takes an index, the size ``n`` of the indexed
dim, and the rule PyTorch applies to that op — "wrap" (x[i], setitem, index_put,
narrow: -n <= i < n, negatives count from the end) or "nonneg" (index_select,
gather, scatter_add, index_add, embedding, one_hot, the losses' targets:
0 <= i < n). Each row runs at the boundaries -2n-1, -2n, -n-1, -n, -1, 0, n-1,
n and 2n: an index inside the rule gives numpy's answer, any other raises an
IndexError (or RuntimeError where PyTorch does) on the cpu at once and on webgpu
at the next read, and a write with a bad index leaves its target unchanged.
``test_rule_matches_torch`` checks each row's rule against torch itself.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np
import pytest

import webgrad
import webgrad.nn.functional as F
from conftest import assert_close, need_module
from webgrad.ops.indexing import index_add

X1 = np.arange(10, dtype=np.float32) * 1.5 - 4      # (10,)
X2 = np.arange(12, dtype=np.float32).reshape(3, 4)  # (3, 4)


@dataclass
class Row:
    name: str
    data: np.ndarray
    n: int                      # size of the indexed dim
    rule: str                   # "wrap" | "nonneg"
    fn: Callable                # (x tensor, i, device) -> tensor
    ref: Callable               # (x array, i) -> array, for indices inside the rule
    torch_fn: Callable          # (x torch tensor, i, torch) -> anything; raises outside the rule
    write: bool = False         # fn writes into x in place and returns x
    errors: tuple = (IndexError,)

    @property
    def message(self) -> str:
        """What the cpu's error must say: the op's name, or torch's words for x[key]."""
        for op in ("index_select", "index_add", "gather", "scatter_add", "take", "embedding", "one_hot",
                   "cross_entropy", "nll_loss", "narrow"):
            if self.name.startswith(op):
                return op
        return "out of bounds for dimension"  # getitem, setitem, index_put: as torch words it

    def valid(self, i: int) -> bool:
        return -self.n <= i < self.n if self.rule == "wrap" else 0 <= i < self.n


def _t(values, device):
    return webgrad.tensor(np.asarray(values, dtype=np.int64), device=device)


def _set(key_fn):
    """A write row's fn (x[key] = 100 in place, returning x) and its ref."""
    def fn(x, i, device):
        x[key_fn(i, lambda v: _t(v, device))] = 100.0
        return x

    def ref(x, i):
        y = x.copy()
        y[key_fn(i, np.asarray)] = 100.0
        return y
    return fn, ref


def _torch_set(key_fn):
    def run(x, i, torch):
        y = x.clone()
        y[key_fn(i, torch.tensor)] = 100.0
        return y
    return run


def _scatter_ref(x, i):
    out = x.copy()
    out[:, i] += 1.0  # one column of ones scattered into column i of every row
    return out


def _cross_entropy_ref(logits, i):
    shifted = logits - logits.max()
    return -(shifted[0, i] - np.log(np.exp(shifted[0]).sum()))


LOGITS = np.linspace(-1, 1, 4, dtype=np.float32).reshape(1, 4)


ROWS = [
    # -- reads that wrap negatives (x[key]) ------------------------------------------------------
    Row("getitem_int", X1, 10, "wrap", lambda x, i, d: x[i], lambda x, i: x[i], lambda x, i, torch: x[i]),
    Row("getitem_list", X1, 10, "wrap", lambda x, i, d: x[[i]], lambda x, i: x[[i]], lambda x, i, torch: x[[i]]),
    Row("getitem_tensor", X1, 10, "wrap", lambda x, i, d: x[_t([i, 0], d)], lambda x, i: x[[i, 0]],
        lambda x, i, torch: x[torch.tensor([i, 0])]),
    Row("getitem_0d_tensor", X1, 10, "wrap", lambda x, i, d: x[_t(i, d)], lambda x, i: x[i],
        lambda x, i, torch: x[torch.tensor(i)]),
    Row("getitem_2d_tensor", X1, 10, "wrap", lambda x, i, d: x[_t([[0, i], [1, 2]], d)],
        lambda x, i: x[np.array([[0, i], [1, 2]])], lambda x, i, torch: x[torch.tensor([[0, i], [1, 2]])]),
    Row("getitem_rows", X2, 3, "wrap", lambda x, i, d: x[[i]], lambda x, i: x[[i]], lambda x, i, torch: x[[i]]),
    Row("getitem_columns", X2, 4, "wrap", lambda x, i, d: x[:, [i]], lambda x, i: x[:, [i]],
        lambda x, i, torch: x[:, [i]]),
    Row("getitem_int_then_list", X2, 4, "wrap", lambda x, i, d: x[1, [i]], lambda x, i: x[1, [i]],
        lambda x, i, torch: x[1, [i]]),
    # Two advanced indices are flattened into one: a bad column must not land in the next row.
    Row("getitem_pair_column", X2, 4, "wrap", lambda x, i, d: x[_t([0, 1], d), _t([i, 0], d)],
        lambda x, i: x[[0, 1], [i, 0]], lambda x, i, torch: x[torch.tensor([0, 1]), torch.tensor([i, 0])]),
    Row("getitem_pair_row", X2, 3, "wrap", lambda x, i, d: x[_t([i], d), _t([3], d)],
        lambda x, i: x[[i], [3]], lambda x, i, torch: x[torch.tensor([i]), torch.tensor([3])]),
    Row("narrow", X1, 10, "wrap", lambda x, i, d: x.narrow(0, i, 1), lambda x, i: x[i:i + 1 if i != -1 else None],
        lambda x, i, torch: x.narrow(0, i, 1), errors=(IndexError, RuntimeError)),
    # -- writes that wrap negatives -----------------------------------------------------------------
    Row("setitem_int", X1, 10, "wrap", *_set(lambda i, t: i), _torch_set(lambda i, t: i), write=True),
    Row("setitem_list", X1, 10, "wrap", *_set(lambda i, t: t([i])), _torch_set(lambda i, t: t([i])), write=True),
    Row("setitem_rows", X2, 3, "wrap", *_set(lambda i, t: t([i])), _torch_set(lambda i, t: t([i])), write=True),
    Row("setitem_columns", X2, 4, "wrap", *_set(lambda i, t: (slice(None), t([i]))),
        _torch_set(lambda i, t: (slice(None), t([i]))), write=True),
    Row("setitem_pair", X2, 4, "wrap", *_set(lambda i, t: (t([2, 0]), t([i, 1]))),
        _torch_set(lambda i, t: (t([2, 0]), t([i, 1]))), write=True),
    Row("index_put", X1, 10, "wrap",
        lambda x, i, d: webgrad.index_put(x, (_t([i], d),), webgrad.tensor(7.0, device=d)),
        lambda x, i: np.where(np.arange(10) == i % 10, np.float32(7.0), x),
        lambda x, i, torch: x.index_put((torch.tensor([i]),), torch.tensor(7.0))),
    Row("index_put_pair", X2, 3, "wrap",
        lambda x, i, d: x.index_put((_t([i], d), _t([2], d)), webgrad.tensor(7.0, device=d)),
        lambda x, i: _put(x, (i, 2), 7.0),
        lambda x, i, torch: x.index_put((torch.tensor([i]), torch.tensor([2])), torch.tensor(7.0))),
    # -- ops that reject negatives, as PyTorch does -------------------------------------------------
    Row("index_select_rows", X2, 3, "nonneg", lambda x, i, d: x.index_select(0, _t([i, 0], d)),
        lambda x, i: x[[i, 0]], lambda x, i, torch: x.index_select(0, torch.tensor([i, 0]))),
    Row("index_select_columns", X2, 4, "nonneg", lambda x, i, d: webgrad.index_select(x, 1, _t([i], d)),
        lambda x, i: x[:, [i]], lambda x, i, torch: torch.index_select(x, 1, torch.tensor([i]))),
    Row("take_rows", X2, 3, "nonneg", lambda x, i, d: webgrad.ops.take(x, _t([[i], [1]], d)),  # the primitive itself
        lambda x, i: x[np.array([[i], [1]])], lambda x, i, torch: x.index_select(0, torch.tensor([i, 1]))),
    Row("gather_rows", X2, 3, "nonneg", lambda x, i, d: x.gather(0, _t([[i, 0, 1, 2]], d)),
        lambda x, i: np.take_along_axis(x, np.array([[i, 0, 1, 2]]), 0),
        lambda x, i, torch: x.gather(0, torch.tensor([[i, 0, 1, 2]]))),
    Row("gather_columns", X2, 4, "nonneg", lambda x, i, d: x.gather(1, _t([[0], [i], [3]], d)),
        lambda x, i: np.take_along_axis(x, np.array([[0], [i], [3]]), 1),
        lambda x, i, torch: x.gather(1, torch.tensor([[0], [i], [3]]))),
    Row("scatter_add", X2, 4, "nonneg",
        lambda x, i, d: x.scatter_add(1, _t([[i]] * 3, d), webgrad.ones(3, 1, device=d)),
        _scatter_ref, lambda x, i, torch: x.scatter_add(1, torch.tensor([[i]] * 3), torch.ones(3, 1))),
    Row("index_add", X2, 3, "nonneg",
        lambda x, i, d: index_add(x, _t([i], d), webgrad.ones(1, 4, device=d)),
        lambda x, i: x + (np.arange(3)[:, None] == i),
        lambda x, i, torch: x.index_add(0, torch.tensor([i]), torch.ones(1, 4))),
    Row("embedding", X2, 3, "nonneg", lambda w, i, d: F.embedding(_t([[i, 1]], d), w),
        lambda w, i: w[np.array([[i, 1]])],
        lambda w, i, torch: torch.nn.functional.embedding(torch.tensor([[i, 1]]), w)),
    Row("one_hot", X1, 10, "nonneg", lambda x, i, d: F.one_hot(_t([i, 2], d), 10),
        lambda x, i: (np.arange(10) == np.array([[i], [2]])).astype(np.int64),
        lambda x, i, torch: torch.nn.functional.one_hot(torch.tensor([i, 2]), 10),
        errors=(IndexError, RuntimeError)),
    Row("cross_entropy_target", LOGITS, 4, "nonneg",
        lambda x, i, d: F.cross_entropy(x, _t([i], d)), _cross_entropy_ref,
        lambda x, i, torch: torch.nn.functional.cross_entropy(x, torch.tensor([i]))),
    Row("nll_loss_target", LOGITS, 4, "nonneg",
        lambda x, i, d: F.nll_loss(x, _t([i], d)), lambda x, i: -x[0, i],
        lambda x, i, torch: torch.nn.functional.nll_loss(x, torch.tensor([i]))),
]


def _put(x, key, value):
    y = x.copy()
    y[key] = value
    return y


def boundaries(n):
    return [-2 * n - 1, -2 * n, -n - 1, -n, -1, 0, n - 1, n, 2 * n]


CASES = [(row, i) for row in ROWS for i in boundaries(row.n)]


def _read(out):
    return out.numpy() if isinstance(out, webgrad.Tensor) else out


@pytest.mark.parametrize("row, i", CASES, ids=[f"{row.name}[{i}]" for row, i in CASES])
def test_index_bounds(row, i, device):
    x = webgrad.tensor(row.data, device=device)
    target = x.clone() if row.write else x
    if row.valid(i):
        expected = np.asarray(row.ref(row.data.copy(), i))
        assert_close(row.fn(target, i, device), expected, 1e-6, 1e-6, msg=f"{row.name}[{i}]")
        return
    # The cpu raises in fn, naming the op; webgpu at this read, naming the kernel that saw it.
    with pytest.raises(row.errors, match=row.message if device == "cpu" else None):
        _read(row.fn(target, i, device))
    # A bad write writes nothing (webgpu skips it in the kernel), and the error is not raised twice.
    np.testing.assert_array_equal(target.numpy(), row.data, err_msg=f"{row.name}[{i}] changed its target")
    np.testing.assert_array_equal(x.numpy(), row.data, err_msg=f"{row.name}[{i}] changed its input")


@pytest.mark.parametrize("row", ROWS, ids=lambda r: r.name)
def test_rule_matches_torch(row):
    """Each row's rule (which indices are valid) is PyTorch's own."""
    torch = need_module("torch")
    for i in boundaries(row.n):
        x = torch.tensor(row.data)
        try:
            row.torch_fn(x, i, torch)
            accepted = True
        except (IndexError, RuntimeError):
            accepted = False
        assert accepted == row.valid(i), f"{row.name}[{i}]: torch {'accepts' if accepted else 'rejects'} it"


def test_every_index_taking_op_has_a_row():
    """New index-taking functions need rows here: the list of covered names is checked."""
    covered = {r.name.split("_")[0] for r in ROWS}
    for name in ("getitem", "setitem", "index", "take", "gather", "scatter", "narrow", "embedding", "one", "cross",
                 "nll"):
        assert name in covered, name
