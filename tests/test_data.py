"""webgrad.data: datasets, DataLoader, collate, random_split, and the digits file."""
from __future__ import annotations

import collections
import importlib.util
import pathlib

import numpy as np
import pytest

import webgrad
from webgrad.data import (
    DataLoader,
    Dataset,
    Subset,
    TensorDataset,
    default_collate,
    random_split,
)

REPO = pathlib.Path(__file__).resolve().parents[1]


def values(tensor) -> np.ndarray:
    assert isinstance(tensor, webgrad.Tensor)
    return tensor.detach().numpy()


def labelled(n: int = 10):
    """x[i] = [i, 10 i] (float32), y[i] = i (int64)."""
    x = np.stack([np.arange(n), 10 * np.arange(n)], axis=1).astype(np.float32)
    return TensorDataset(webgrad.from_numpy(x), webgrad.from_numpy(np.arange(n, dtype=np.int64)))


def epoch_labels(loader) -> list[int]:
    return [int(label) for _, y in loader for label in values(y)]


class Pairs(Dataset):
    """Samples of any structure: the value made by ``make(i)``."""

    def __init__(self, n, make):
        self.n, self.make = n, make

    def __len__(self):
        return self.n

    def __getitem__(self, index):
        return self.make(index)


# ----------------------------------------------------------------------------- TensorDataset

def test_tensor_dataset_items_and_length():
    dataset = labelled(5)
    assert len(dataset) == 5
    x, y = dataset[3]
    np.testing.assert_array_equal(values(x), [3.0, 30.0])
    assert int(values(y)) == 3


def test_tensor_dataset_size_mismatch_names_sizes():
    with pytest.raises(ValueError, match=r"\[3, 4\]"):
        TensorDataset(webgrad.zeros(3, 2), webgrad.zeros(4))


def test_tensor_dataset_rejects_bad_arguments():
    with pytest.raises(ValueError, match="at least one"):
        TensorDataset()
    with pytest.raises(ValueError, match="0-d"):
        TensorDataset(webgrad.tensor(1.0))
    with pytest.raises(TypeError, match="argument 1"):
        TensorDataset(webgrad.zeros(3), np.zeros(3))


def test_base_dataset_needs_subclass_methods():
    with pytest.raises(NotImplementedError):
        len(Dataset())
    with pytest.raises(NotImplementedError):
        Dataset()[0]


# ----------------------------------------------------------------------------- DataLoader

def test_batches_in_order_with_last_partial_batch():
    loader = DataLoader(labelled(10), batch_size=4)
    batches = list(loader)
    assert len(loader) == len(batches) == 3
    assert [tuple(x.shape) for x, _ in batches] == [(4, 2), (4, 2), (2, 2)]
    assert epoch_labels(loader) == list(range(10))
    np.testing.assert_array_equal(values(batches[2][0]), [[8, 80], [9, 90]])
    assert batches[0][1].dtype == webgrad.int64


def test_drop_last():
    loader = DataLoader(labelled(10), batch_size=4, drop_last=True)
    assert len(loader) == 2
    assert [tuple(y.shape) for _, y in loader] == [(4,), (4,)]
    assert len(DataLoader(labelled(8), batch_size=4, drop_last=True)) == 2


def test_default_batch_size_is_one():
    batches = list(DataLoader(labelled(3)))
    assert [tuple(x.shape) for x, _ in batches] == [(1, 2)] * 3


def test_bad_batch_size():
    for batch_size in (0, -1, 2.5, True):
        with pytest.raises(ValueError, match="batch_size"):
            DataLoader(labelled(3), batch_size=batch_size)


def test_shuffle_is_reproducible_with_manual_seed():
    loader = DataLoader(labelled(50), batch_size=8, shuffle=True)
    webgrad.manual_seed(123)
    first, second = epoch_labels(loader), epoch_labels(loader)
    webgrad.manual_seed(123)
    assert epoch_labels(loader) == first
    assert epoch_labels(loader) == second
    assert sorted(first) == list(range(50))
    assert first != list(range(50))
    assert first != second  # a new order every epoch


def test_shuffled_batches_keep_rows_together():
    webgrad.manual_seed(0)
    for x, y in DataLoader(labelled(20), batch_size=6, shuffle=True):
        np.testing.assert_array_equal(values(x)[:, 0], values(y).astype(np.float32))


def test_fast_path_matches_generic_path_and_does_not_stack(monkeypatch):
    dataset = labelled(23)
    webgrad.manual_seed(7)
    generic = list(DataLoader(dataset, batch_size=5, shuffle=True,
                              collate_fn=lambda batch: default_collate(batch)))

    def no_stack(*args, **kwargs):
        raise AssertionError("the TensorDataset fast path must not stack items")

    monkeypatch.setattr(webgrad, "stack", no_stack)
    webgrad.manual_seed(7)
    fast = list(DataLoader(dataset, batch_size=5, shuffle=True))
    assert len(fast) == len(generic)
    for (fast_x, fast_y), (slow_x, slow_y) in zip(fast, generic):
        np.testing.assert_array_equal(values(fast_x), values(slow_x))
        np.testing.assert_array_equal(values(fast_y), values(slow_y))
        assert fast_x.dtype == slow_x.dtype and fast_y.dtype == slow_y.dtype


def test_fast_path_through_subsets():
    inner = Subset(labelled(10), [9, 8, 7, 6, 5])
    outer = Subset(inner, [4, 0, 2])
    assert epoch_labels(DataLoader(outer, batch_size=2)) == [5, 9, 7]


def test_custom_collate_fn_is_used():
    loader = DataLoader(labelled(5), batch_size=2, collate_fn=len)
    assert list(loader) == [2, 2, 1]


def test_custom_dataset_of_tuples():
    dataset = Pairs(5, lambda i: (webgrad.tensor([float(i), 0.0]), i))
    x, y = next(iter(DataLoader(dataset, batch_size=3)))
    assert tuple(x.shape) == (3, 2)
    np.testing.assert_array_equal(values(y), [0, 1, 2])
    assert y.dtype == webgrad.int64


# ----------------------------------------------------------------------------- collate

def test_collate_dict_samples():
    batch = default_collate([{"image": webgrad.zeros(2, 2), "label": i, "name": f"n{i}"}
                             for i in range(3)])
    assert set(batch) == {"image", "label", "name"}
    assert tuple(batch["image"].shape) == (3, 2, 2)
    np.testing.assert_array_equal(values(batch["label"]), [0, 1, 2])
    assert batch["name"] == ["n0", "n1", "n2"]


def test_collate_tuple_and_list_samples():
    as_tuple = default_collate([(1, 2.5), (3, 4.5)])
    assert isinstance(as_tuple, tuple) and len(as_tuple) == 2
    assert as_tuple[0].dtype == webgrad.int64
    assert as_tuple[1].dtype == webgrad.float64  # Python floats, as in PyTorch
    as_list = default_collate([[1, 2], [3, 4]])
    assert isinstance(as_list, list)
    np.testing.assert_array_equal(values(as_list[0]), [1, 3])


def test_collate_numbers_and_bools():
    assert values(default_collate([True, False])).tolist() == [True, False]
    np.testing.assert_array_equal(values(default_collate([1.5, 2.5])), [1.5, 2.5])


def test_collate_numpy_arrays_and_scalars():
    batch = default_collate([np.ones((2, 3), np.float32), np.zeros((2, 3), np.float32)])
    assert tuple(batch.shape) == (2, 2, 3) and batch.dtype == webgrad.float32
    scalars = default_collate([np.float32(1), np.float32(2)])
    np.testing.assert_array_equal(values(scalars), [1.0, 2.0])


def test_collate_namedtuple():
    Point = collections.namedtuple("Point", ["x", "y"])
    batch = default_collate([Point(1, 2), Point(3, 4)])
    assert isinstance(batch, Point)
    np.testing.assert_array_equal(values(batch.y), [2, 4])


def test_collate_errors():
    with pytest.raises(ValueError, match="different lengths"):
        default_collate([(1, 2), (3,)])
    with pytest.raises(TypeError, match="object"):
        default_collate([object(), object()])
    with pytest.raises(ValueError, match="empty"):
        default_collate([])


# ----------------------------------------------------------------------------- random_split

def test_random_split_with_lengths():
    dataset = labelled(10)
    webgrad.manual_seed(0)
    train, test = random_split(dataset, [7, 3])
    assert isinstance(train, Subset) and (len(train), len(test)) == (7, 3)
    assert sorted(train.indices + test.indices) == list(range(10))
    webgrad.manual_seed(0)
    again, _ = random_split(dataset, [7, 3])
    assert again.indices == train.indices
    assert train.indices != list(range(7))


def test_random_split_with_fractions():
    train, test = random_split(labelled(10), [0.8, 0.2])
    assert (len(train), len(test)) == (8, 2)
    parts = random_split(labelled(5), [0.5, 0.5])
    assert [len(p) for p in parts] == [3, 2]  # remainder to the first, like PyTorch
    parts = random_split(labelled(10), [0.34, 0.33, 0.33])
    assert [len(p) for p in parts] == [4, 3, 3]


def test_random_split_integer_lengths_are_never_fractions():
    parts = random_split(labelled(1), [1, 0])
    assert [len(p) for p in parts] == [1, 0]


def test_random_split_errors():
    with pytest.raises(ValueError, match="sum to 9"):
        random_split(labelled(10), [5, 4])
    with pytest.raises(ValueError, match="sum to 1"):
        random_split(labelled(10), [0.5, 0.4])
    with pytest.raises(ValueError, match="non-negative"):
        random_split(labelled(10), [11, -1])


def test_subset_items_and_loader():
    subset = random_split(labelled(10), [4, 6])[0]
    loaded = epoch_labels(DataLoader(subset, batch_size=3))
    assert loaded == subset.indices
    x, y = subset[0]
    assert int(values(y)) == subset.indices[0]


# ----------------------------------------------------------------------------- import paths

def test_torch_style_import_path():
    import webgrad.utils.data

    assert webgrad.utils.data.DataLoader is DataLoader
    from webgrad.utils.data import TensorDataset as Alias, random_split as split_alias

    assert Alias is TensorDataset and split_alias is random_split


# ----------------------------------------------------------------------------- digits

def load_digits_module():
    path = REPO / "demos" / "data" / "digits.py"
    spec = importlib.util.spec_from_file_location("demo_digits", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_digits_file_is_small_and_loads():
    path = REPO / "demos" / "data" / "digits.npz"
    assert path.stat().st_size < 100_000
    digits = load_digits_module()
    images, labels = digits.load_digits()
    assert images.shape == (1797, 64) and images.dtype == np.float32
    assert 0.0 == images.min() and images.max() == 1.0
    assert labels.shape == (1797,) and labels.dtype == np.int64
    assert sorted(set(labels.tolist())) == list(range(10))
    assert np.bincount(labels.astype(np.intp)).min() > 150  # wasm32's intp is 32-bit: cast first


def test_digits_split_is_deterministic_and_disjoint():
    digits = load_digits_module()
    images, labels = digits.load_digits()
    x_train, y_train, x_test, y_test = digits.train_test_split(images, labels)
    assert (len(x_train), len(x_test)) == (1437, 360)
    assert len(y_train) == 1437 and len(y_test) == 360
    again = digits.train_test_split(images, labels)
    np.testing.assert_array_equal(again[3], y_test)
    rows = {row.tobytes() for row in x_train}
    overlap = sum(row.tobytes() in rows for row in x_test)
    assert overlap < 5  # a few digits are pixel-identical duplicates in the source data


def test_digits_through_a_data_loader():
    digits = load_digits_module()
    images, labels = digits.load_digits()
    dataset = TensorDataset(webgrad.from_numpy(images), webgrad.from_numpy(labels))
    webgrad.manual_seed(0)
    x, y = next(iter(DataLoader(dataset, batch_size=64, shuffle=True)))
    assert tuple(x.shape) == (64, 64) and tuple(y.shape) == (64,)
    assert x.dtype == webgrad.float32 and y.dtype == webgrad.int64


# ----------------------------------------------------------------------------- samplers and torch's arguments

def test_submodules_import_like_torch():
    from webgrad.utils.data.dataloader import DataLoader as FromLoader
    from webgrad.utils.data.dataset import ConcatDataset, IterableDataset  # noqa: F401
    from webgrad.utils.data.sampler import BatchSampler, RandomSampler  # noqa: F401

    assert FromLoader is DataLoader


def test_deterministic_samplers_match_torch():
    from conftest import need_module

    torch = need_module("torch")
    tdata, wdata = torch.utils.data, webgrad.utils.data
    for drop_last in (False, True):
        t = list(tdata.BatchSampler(tdata.SequentialSampler(range(10)), 3, drop_last))
        w = list(wdata.BatchSampler(wdata.SequentialSampler(range(10)), 3, drop_last))
        assert w == t
        assert len(wdata.BatchSampler(wdata.SequentialSampler(range(10)), 3, drop_last)) == len(t)
    # random_split lengths from fractions, as torch hands out the remainders
    for fractions in ([0.8, 0.2], [0.33, 0.33, 0.34], [0.5, 0.25, 0.25]):
        t_lengths = [len(s) for s in tdata.random_split(range(11), fractions)]
        assert [len(s) for s in random_split(list(range(11)), fractions)] == t_lengths
    both_t = tdata.ConcatDataset([list(range(3)), list(range(10, 14))])
    both_w = wdata.ConcatDataset([list(range(3)), list(range(10, 14))])
    assert [both_w[i] for i in range(-7, 7)] == [both_t[i] for i in range(-7, 7)]
    # batch_size=None: unbatched samples, numpy converted to tensors
    loader = DataLoader([np.array([1.0, 2.0]), np.array([3.0, 4.0])], batch_size=None)
    assert [values(x).tolist() for x in loader] == [[1.0, 2.0], [3.0, 4.0]] and len(loader) == 2


def test_random_samplers_cover_and_follow_generator():
    webgrad.manual_seed(0)
    data = list(range(20))
    assert sorted(webgrad.utils.data.RandomSampler(data)) == data
    assert sorted(webgrad.utils.data.SubsetRandomSampler([4, 9, 13])) == [4, 9, 13]
    drawn = list(webgrad.utils.data.RandomSampler(data, replacement=True, num_samples=50))
    assert len(drawn) == 50 and set(drawn) <= set(data)
    assert len(list(webgrad.utils.data.RandomSampler(data, num_samples=45))) == 45
    weighted = list(webgrad.utils.data.WeightedRandomSampler([0.0, 1.0, 3.0], 400))
    counts = collections.Counter(weighted)
    assert counts[0] == 0 and 2 < counts[2] / counts[1] < 4.5
    webgrad.manual_seed(5)
    first = list(DataLoader(labelled(10), batch_size=4, shuffle=True))
    webgrad.manual_seed(5)
    again = list(DataLoader(labelled(10), batch_size=4, shuffle=True))
    assert all(np.array_equal(values(a[1]), values(b[1])) for a, b in zip(first, again))
    if hasattr(webgrad, "Generator"):
        g1, g2 = webgrad.Generator().manual_seed(3), webgrad.Generator().manual_seed(3)
        a = [s.indices for s in random_split(labelled(10), [0.5, 0.5], generator=g1)]
        b = [s.indices for s in random_split(labelled(10), [0.5, 0.5], generator=g2)]
        assert a == b


def test_loader_with_sampler_batch_sampler_and_workers():
    dataset = labelled(10)
    by_sampler = epoch_labels(DataLoader(dataset, batch_size=4, sampler=[9, 8, 7, 1, 2]))
    assert by_sampler == [9, 8, 7, 1, 2]
    batches = [[0, 5], [3], [9, 1, 2]]
    loader = DataLoader(dataset, batch_sampler=batches)
    assert [values(y).tolist() for _, y in loader] == batches and len(loader) == 3
    slow = DataLoader(dataset, batch_sampler=batches, collate_fn=lambda b: default_collate(b))
    assert [values(y).tolist() for _, y in slow] == batches
    webgrad.utils.data.dataloader._warned_workers = False
    with pytest.warns(UserWarning, match="num_workers=2.*main process"):
        loaded = epoch_labels(DataLoader(dataset, batch_size=3, num_workers=2, pin_memory=True,
                                         persistent_workers=True, prefetch_factor=2))
    assert loaded == list(range(10))
    with pytest.raises(ValueError, match="mutually exclusive with shuffle"):
        DataLoader(dataset, sampler=[0, 1], shuffle=True)
    with pytest.raises(ValueError, match="batch_sampler option is mutually exclusive"):
        DataLoader(dataset, batch_sampler=batches, batch_size=4)
    with pytest.raises(ValueError, match="prefetch_factor"):
        DataLoader(dataset, prefetch_factor=2)
    with pytest.raises(IndexError, match="index 12"):
        list(DataLoader(dataset, sampler=[1, 12], batch_size=2))


def test_iterable_dataset_batches_in_order():
    class Stream(webgrad.utils.data.IterableDataset):
        def __iter__(self):
            return iter(range(7))

    assert [values(b).tolist() for b in DataLoader(Stream(), batch_size=3)] == [[0, 1, 2], [3, 4, 5], [6]]
    assert len(list(DataLoader(Stream(), batch_size=3, drop_last=True))) == 2
    with pytest.raises(ValueError, match="shuffle"):
        DataLoader(Stream(), shuffle=True)
