"""Property test: the indexing family gives the same answer on webgpu as on the cpu.

Hypothesis draws a shape, a view of it (plain, transposed, stepped, offset: strided
inputs), an op (x[idx] along any dim, x[idx0, idx1], a write through the view,
index_select, gather, scatter_add, index_put) and indices in [-2n - 1, 2n], so about
half the draws are out of range. Both devices must agree: the same values, or both
raise an IndexError (webgpu at the next read). Bounded and derandomized, so CI runs
the same examples every time.
"""
from __future__ import annotations

import numpy as np
import pytest

import webgrad
from conftest import need_module, requires_webgpu

hypothesis = need_module("hypothesis")
from hypothesis import HealthCheck, example, given, settings, strategies as st  # noqa: E402

pytestmark = requires_webgpu

VIEWS = ("plain", "transpose", "step", "offset")
OPS = ("getitem", "getitem_pair", "setitem", "index_select", "gather", "scatter_add", "index_put")


def _base_shape(shape, view):
    if view == "transpose":
        return tuple(reversed(shape))
    if view == "step":
        return (2 * shape[0],) + tuple(shape[1:])
    if view == "offset":
        return (shape[0] + 1,) + tuple(shape[1:])
    return tuple(shape)


def _view(base, view):
    if view == "transpose":
        return base.permute(*reversed(range(base.ndim)))
    if view == "step":
        return base[::2]
    if view == "offset":
        return base[1:]
    return base


def _indices(n, count):
    """Index values in [-2n - 1, 2n], the boundaries -2n, -n - 1, -n, -1, n - 1, n drawn often."""
    values = st.one_of(st.sampled_from([-2 * n, -n - 1, -n, -1, 0, n - 1, n]), st.integers(-2 * n - 1, 2 * n))
    return st.lists(values, min_size=count, max_size=count)


@st.composite
def cases(draw):
    shape = tuple(draw(st.lists(st.integers(1, 5), min_size=1, max_size=3)))
    view = draw(st.sampled_from(VIEWS))
    op = draw(st.sampled_from(OPS))
    dim = draw(st.integers(0, len(shape) - 1))
    count = draw(st.integers(1, 4))
    n = shape[dim]
    index = draw(_indices(n, count))
    second = draw(_indices(shape[(dim + 1) % len(shape)], count))  # the other dim of getitem_pair
    seed = draw(st.integers(0, 2 ** 16))
    return shape, view, op, dim, index, second, seed


def _run(device, shape, view, op, dim, index, second, seed):
    """The op's result as a numpy array, or the exception type it raised (at once or at the read)."""
    rng = np.random.default_rng(seed)
    base_data = rng.integers(-50, 50, size=_base_shape(shape, view)).astype(np.float32)
    base = webgrad.tensor(base_data, device=device)
    x = _view(base, view)
    lead = (slice(None),) * dim

    def idx(values):
        return webgrad.tensor(np.asarray(values, dtype=np.int64), device=device)

    try:
        if op == "getitem":
            out = x[lead + (idx(index),)]
        elif op == "getitem_pair":
            other = (dim + 1) % len(shape)
            key = [slice(None)] * len(shape)
            key[dim], key[other] = idx(index), idx(second)
            out = x[tuple(key)] if other != dim else x[lead + (idx(index),)]
        elif op == "setitem":
            written = base.clone()
            target = _view(written, view)
            target[lead + (idx(index),)] = 7.0
            out = written
        elif op == "index_select":
            out = x.index_select(dim, idx(index))
        elif op in ("gather", "scatter_add"):
            index_shape = list(shape)
            index_shape[dim] = len(index)
            values = rng.choice(np.asarray(index), size=index_shape)
            if op == "gather":
                out = x.gather(dim, idx(values))
            else:
                out = x.scatter_add(dim, idx(values), webgrad.ones(*index_shape, device=device))
        else:
            out = x.index_put(lead + (idx(index),), webgrad.tensor(3.0, device=device))
        return out.numpy()
    except IndexError:
        return IndexError


@given(cases())
# The reproductions: x[[-11]] and x[[-20]] on 10 elements, x2[[-4]] on 3 rows,
# x2[:, [-5]] on 4 columns, a write at -11, and a bad column that flattens into the next row.
@example(((10,), "plain", "getitem", 0, [-11], [0], 0))
@example(((10,), "step", "getitem", 0, [-20], [0], 0))
@example(((3, 4), "plain", "getitem", 0, [-4], [0], 0))
@example(((3, 4), "transpose", "getitem", 1, [-5], [0], 0))
@example(((10,), "offset", "setitem", 0, [-11], [0], 0))
@example(((3, 4), "plain", "getitem_pair", 1, [4], [0], 0))
@settings(max_examples=80, derandomize=True, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow])
def test_webgpu_agrees_with_cpu(case):
    cpu = _run("cpu", *case)
    gpu = _run("webgpu", *case)
    if cpu is IndexError or gpu is IndexError:
        assert cpu is gpu, f"{case}: cpu gave {cpu if cpu is IndexError else 'values'}, webgpu " \
                           f"{gpu if gpu is IndexError else 'values'}"
    else:
        np.testing.assert_array_equal(gpu, cpu, err_msg=str(case))


@pytest.mark.parametrize("view", VIEWS)
def test_views_have_the_drawn_shape(view):
    """The property's inputs really are the views they claim (strided, same shape)."""
    x = _view(webgrad.zeros(*_base_shape((2, 3, 4), view)), view)
    assert tuple(x.shape) == (2, 3, 4)
