"""The planted bugs that scripts/mutation.py runs: small, realistic mistakes, one per
entry, each with the test subset that must fail on it. Issue 7 listed the first ten
(bugs that once passed every test); the rest cover the code around them.

A mutant's ``old`` must occur exactly once in its file; when the code moves on,
update the entry (the runner reports it as stale)."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Mutant:
    id: str
    file: str
    old: str
    new: str
    tests: tuple[str, ...]


M = Mutant
MUTANTS = [
    M("autograd-sum-to-leading-dims", "core/autograd.py",
      "grad.shape[i + lead] != 1)", "grad.shape[i] != 1)",
      ("tests/test_autograd.py", "tests/hostile")),
    M("layer-norm-drops-eps", "core/nn/modules/norm.py",
      "F.layer_norm(input, self.normalized_shape, self.weight, self.bias, self.eps)",
      "F.layer_norm(input, self.normalized_shape, self.weight, self.bias)",
      ("tests/test_nn_modules.py", "tests/hostile")),
    M("max-pool-indices-row-dilation", "core/nn/functional_conv.py",
      "rows = rows + (k // kernel[1]) * dilation[0]", "rows = rows + (k // kernel[1]) * dilation[1]",
      ("tests/test_nn_functional.py", "tests/hostile")),
]
