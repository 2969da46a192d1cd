"""Planted bugs (mutants) and the tests that must catch them: ``python tests/hostile/mutation.py``.

Each mutant is one small, realistic edit to the package source (an exact text
replacement) and the test subset that must fail with it. The script copies the
package (core/ as ``webgrad``, with wgsl_kernels/) into a temporary folder,
applies one mutant at a time there, and runs the subset against that copy via
PYTHONPATH, so the working tree is never touched. It prints each mutant as
caught or MISSED and the rate, and exits 1 if any is missed (or no longer
applies, which means the source moved and the mutant needs updating).

Not part of ``make test`` (it runs pytest once per mutant). ``-k WORD`` runs the
mutants whose name contains WORD.
"""
from __future__ import annotations

import argparse
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass

REPO = pathlib.Path(__file__).resolve().parents[2]
H = "tests/hostile/"


@dataclass(frozen=True)
class Mutant:
    name: str
    file: str   # in the repo: core/... or wgsl_kernels/...
    old: str    # exact text, must occur once
    new: str
    tests: tuple  # pytest node ids or files (with "::" / "-k" forms) that must fail


MUTANTS = [
    # -- issue 7's list of bugs the suite missed -------------------------------------------------------
    Mutant("pow_vjp_kink", "core/ops/elementwise.py", "log(where(x > 0, x, 1))", "log(where(x >= 0, x, 1))",
           (H + "test_planted_bugs.py::test_pow_gradient_for_the_exponent_at_a_zero_base",)),
    Mutant("sum_to_lead", "core/autograd/__init__.py", "grad.shape[i + lead] != 1", "grad.shape[i] != 1",
           (H + "test_planted_bugs.py::test_broadcast_gradient_over_a_leading_batch_of_one",)),
    Mutant("norm_inf_keepdim", "core/ops/reduce.py", "return amax(x.abs(), dim, keepdim)", "return amax(x.abs(), dim)",
           (H + "test_planted_bugs.py::test_norm_keepdim_shape",)),
    Mutant("layer_norm_eps", "core/nn/modules/norm.py",
           "F.layer_norm(input, self.normalized_shape, self.weight, self.bias, self.eps)",
           "F.layer_norm(input, self.normalized_shape, self.weight, self.bias)",
           (H + "test_planted_bugs.py::test_layer_norm_uses_its_eps",)),
    Mutant("max_pool_dilation", "core/nn/functional_conv.py", "rows = rows + (k // kernel[1]) * dilation[0]",
           "rows = rows + (k // kernel[1]) * dilation[1]",
           (H + "test_planted_bugs.py::test_max_pool_indices_with_asymmetric_dilation",)),
    Mutant("gather_bound", "wgsl_kernels/index.wgsl", "return j >= 0 && u32(j) < p.rows;",
           "return j >= 0 && u32(j) <= p.rows;",
           (H + "test_planted_bugs.py::test_webgpu_gather_rejects_an_index_equal_to_the_size",)),
    Mutant("no_grad_decorator", "core/autograd/__init__.py",
           "            with set_grad_enabled(mode):\n                return fn(*args, **kwargs)",
           "            prev = is_grad_enabled()\n            _mode.enabled = mode\n"
           "            result = fn(*args, **kwargs)\n            _mode.enabled = prev\n            return result",
           (H + "test_planted_bugs.py::test_no_grad_decorator_restores_grad_mode_when_the_function_raises",)),
    Mutant("clip_coefficient_cap", "core/nn/utils.py", "ops.clamp(max_norm / (total + 1e-6), max=1.0)",
           "(max_norm / (total + 1e-6))",
           (H + "test_planted_bugs.py::test_clip_grad_norm_leaves_small_gradients_unchanged",)),
    # -- the fixes of issue 7 -----------------------------------------------------------------------------
    Mutant("getitem_multi_index_check", "core/ops/indexing.py", "    if bad is not None:\n",
           "    if bad is not None and False:\n", (H + "test_indexing.py -k pair",)),
    # take used to wrap negatives itself: getitem's already wrapped index then wrapped twice.
    Mutant("getitem_double_wrap", "wgsl_kernels/index.wgsl",
           "  let j = index[u32(i32(p.offsets.x) + strided(i, 0u))];\n  var v = T(0);",
           "  var j = index[u32(i32(p.offsets.x) + strided(i, 0u))];\n"
           "  if (j < 0) { j = j + i32(p.rows); }\n  var v = T(0);",
           (H + "test_indexing.py -k getitem",)),
    Mutant("take_rejects_negatives", "core/ops/indexing.py", '    _check_range("take", index, x.shape[0], 0)\n',
           "", (H + "test_indexing.py -k take",)),
    Mutant("index_select_rejects_negatives", "core/ops/indexing.py",
           '        _check_range("index_select", index._host(), x.shape[d], d)\n', "        pass\n",
           (H + "test_indexing.py -k index_select",)),
    Mutant("embedding_rejects_negatives", "core/nn/functional.py",
           "bad = values[(values < 0) | (values >= weight.shape[0])]", "bad = values[values >= weight.shape[0]]",
           (H + "test_indexing.py -k embedding",)),
    Mutant("scatter_flags_scan", "wgsl_kernels/index.wgsl",
           "      atomicOr(&errors[0], 1u);  // row 0", "      // row 0", (H + "test_indexing.py -k scatter_add",)),
    Mutant("setitem_all_or_nothing", "wgsl_kernels/index.wgsl",
           "  if (atomicLoad(&errors[0]) != 0u) { return; }\n", "", (H + "test_indexing.py -k setitem_pair",)),
    Mutant("norm_nan", "core/ops/reduce.py", "nonzero = total != 0", "nonzero = total > 0",
           (H + "test_nan.py -k norm",)),
    Mutant("ne_nan", "core/ops/elementwise.py", '"u32(wg_isnan(a) || wg_isnan(b) || a != b)"', '"u32(a != b)"',
           (H + "test_nan.py::test_ne_with_nan",)),
    Mutant("truthy_nan", "wgsl_kernels/math.wgsl", "return wg_isnan(x) || x != 0.0;", "return x != 0.0;",
           ("tests/test_ops.py -k special",)),
    Mutant("isinf_bits", "wgsl_kernels/math.wgsl", "(bitcast<u32>(x) & 0x7fffffffu) == 0x7f800000u",
           "(bitcast<u32>(x) & 0x7fffffffu) >= 0x7f800000u", ("tests/test_ops.py -k isinf",)),
    Mutant("divide_by_zero_device", "core/ops/elementwise.py", '"wg_ifloordiv(a, wg_check_divisor(b))"',
           '"wg_ifloordiv(a, b)"', (H + "test_division.py",)),
    Mutant("divide_by_zero_cpu", "core/ops/elementwise.py", 'if x.dtype.kind != "f" and np.any(np.asarray(y) == 0):',
           "if False:", (H + "test_division.py",)),
    Mutant("nan_to_num_posinf", "core/ops/elementwise.py", "posinf = float(info.max) if posinf is None else posinf",
           "posinf = 0.0 if posinf is None else posinf", ("tests/test_ops.py -k nan_to_num",)),
    Mutant("one_hot_compare", "core/nn/functional.py",
           "return out.scatter_add(-1, index, creation.ones(index.shape, dtype=index.dtype, device=tensor.device))",
           "return (index == creation.arange(num_classes, device=tensor.device)).long()",
           (H + "test_indexing.py -k one_hot",)),
    Mutant("narrow_start", "core/ops/movement.py", "    if not -n <= start <= n:\n", "    if False:\n",
           (H + "test_indexing.py -k narrow",)),
]


def _package_copy(root: pathlib.Path) -> pathlib.Path:
    """core/ copied as <root>/webgrad with wgsl_kernels/ inside, as the wheel lays them out."""
    package = root / "webgrad"
    shutil.copytree(REPO / "core", package, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(REPO / "wgsl_kernels", package / "wgsl_kernels", ignore=shutil.ignore_patterns("__pycache__"))
    return package


def _target(package: pathlib.Path, file: str) -> pathlib.Path:
    if file.startswith("core/"):
        return package / file[len("core/"):]
    return package / file  # wgsl_kernels/...


def _find(package: pathlib.Path, mutant: Mutant):
    """The mutant's file, or, if the code moved, the one file that holds its text once."""
    target = _target(package, mutant.file)
    if target.is_file() and target.read_text().count(mutant.old) == 1:
        return target
    holders = [f for f in package.rglob("*") if f.suffix in (".py", ".wgsl") and mutant.old in f.read_text()]
    return holders[0] if len(holders) == 1 and holders[0].read_text().count(mutant.old) == 1 else None


def _pytest_args(spec: str) -> list[str]:
    path, _, keyword = spec.partition(" -k ")
    return [path] + (["-k", keyword] if keyword else [])


def _fresh_copy(root: pathlib.Path) -> pathlib.Path:
    package = root / "webgrad"
    if package.exists():
        shutil.rmtree(package)
    return _package_copy(root)


def _pytest(spec: str, root: pathlib.Path) -> int:
    env = dict(os.environ, PYTHONPATH=str(root), PYTHONDONTWRITEBYTECODE="1")
    done = subprocess.run([sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", *_pytest_args(spec)],
                          cwd=REPO, env=env, capture_output=True, text=True)
    return done.returncode


def run(mutant: Mutant, root: pathlib.Path) -> str:
    package = _fresh_copy(root)
    target = _find(package, mutant)
    if target is None:
        return "STALE (the text is not in the package exactly once)"
    target.write_text(target.read_text().replace(mutant.old, mutant.new))
    for spec in mutant.tests:
        code = _pytest(spec, root)
        if code == 1:  # tests ran and one failed: caught
            return "caught"
        if code != 0:
            return f"ERROR (pytest exit {code})"
    return "MISSED"


def control(chosen, root: pathlib.Path) -> bool:
    """Every test subset passes on the unchanged copy (else 'caught' would mean nothing)."""
    _fresh_copy(root)
    failing = [spec for spec in sorted({spec for m in chosen for spec in m.tests}) if _pytest(spec, root) != 0]
    for spec in failing:
        print(f"control: {spec} fails without any mutant", flush=True)
    return not failing


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-k", default="", help="only mutants whose name contains this")
    parser.add_argument("--no-control", action="store_true", help="skip running the subsets unmutated first")
    args = parser.parse_args()
    chosen = [m for m in MUTANTS if args.k in m.name]
    caught = 0
    with tempfile.TemporaryDirectory(prefix="webgrad-mutants-") as tmp:
        root = pathlib.Path(tmp)
        if not args.no_control and not control(chosen, root):
            print("the test subsets fail without any mutant: fix them first")
            return 2
        for mutant in chosen:
            verdict = run(mutant, root)
            caught += verdict == "caught"
            print(f"{mutant.name:32s} {verdict}", flush=True)
    print(f"caught {caught} of {len(chosen)} mutants ({100 * caught / max(len(chosen), 1):.0f}%)")
    return 0 if caught == len(chosen) else 1


if __name__ == "__main__":
    sys.exit(main())
