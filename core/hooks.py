"""``RemovableHandle``: what registering a hook returns (torch.utils.hooks' name)."""
from __future__ import annotations

import itertools


class RemovableHandle:
    """Returned by ``register_forward_hook`` and friends; ``handle.remove()`` unregisters the hook."""

    _next_id = itertools.count()

    def __init__(self, hooks: dict):
        self.hooks = hooks
        self.id = next(RemovableHandle._next_id)

    def remove(self) -> None:
        self.hooks.pop(self.id, None)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()
