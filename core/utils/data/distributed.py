"""``DistributedSampler``: each rank's share of a dataset, as ``torch.utils.data.distributed``."""
from __future__ import annotations

import math

import numpy as np

from ... import distributed as dist
from .sampler import Sampler

__all__ = ["DistributedSampler"]


class DistributedSampler(Sampler):
    """The indices rank ``rank`` of ``num_replicas`` visits: every ``num_replicas``-th of one
    permutation shared by all ranks (seeded by ``seed + epoch``; call ``set_epoch`` each
    epoch for a new order). The ranks' shares have equal length: padded by repeating the
    first indices, or, with ``drop_last=True``, cut to a multiple of ``num_replicas``.

    Example:
        >>> sampler = DistributedSampler(dataset)          # rank and world from webgrad.distributed
        >>> loader = DataLoader(dataset, batch_size=32, sampler=sampler)
        >>> for epoch in range(3):
        ...     sampler.set_epoch(epoch)
    """

    def __init__(self, dataset, num_replicas=None, rank=None, shuffle=True, seed=0, drop_last=False):
        if num_replicas is None or rank is None:
            if not (dist.is_available() and dist.is_initialized()):
                raise RuntimeError("DistributedSampler: pass num_replicas= and rank=, or call "
                                   "webgrad.distributed.init_process_group first")
            num_replicas = dist.get_world_size() if num_replicas is None else num_replicas
            rank = dist.get_rank() if rank is None else rank
        if not isinstance(num_replicas, int) or num_replicas < 1:
            raise ValueError(f"DistributedSampler: num_replicas must be a positive int, got {num_replicas!r}")
        if not isinstance(rank, int) or not 0 <= rank < num_replicas:
            raise ValueError(f"DistributedSampler: invalid rank {rank!r}, rank should be in the interval "
                             f"[0, {num_replicas - 1}]")
        self.dataset, self.num_replicas, self.rank = dataset, num_replicas, rank
        self.shuffle, self.seed, self.drop_last, self.epoch = shuffle, seed, drop_last, 0
        n = len(dataset)
        if drop_last and n % num_replicas:
            self.num_samples = math.ceil((n - num_replicas) / num_replicas)
        else:
            self.num_samples = math.ceil(n / num_replicas)
        self.total_size = self.num_samples * num_replicas

    def __iter__(self):
        n = len(self.dataset)
        if self.shuffle:  # the same order on every rank: the seed is all they share
            indices = np.random.default_rng(self.seed + self.epoch).permutation(n)
        else:
            indices = np.arange(n)
        if self.drop_last:
            indices = indices[:self.total_size]
        elif self.total_size > n:
            indices = np.resize(indices, self.total_size)  # repeats from the start
        return iter(indices[self.rank:self.total_size:self.num_replicas].tolist())

    def __len__(self) -> int:
        return self.num_samples

    def set_epoch(self, epoch: int) -> None:
        """Use ``epoch`` in the seed: a new order each epoch, the same on every rank."""
        self.epoch = epoch
