"""The planted bugs that ``scripts/mutation.py`` runs (``make mutation``): small, realistic
mistakes, one per entry, each with the test subsets that must fail on it. Issue 7 listed
the first ten (bugs that once passed every test); the rest cover the hardening of issue 7
(indices, NaN, integer division, atomic loads, the server's guards) and the code around it.

A mutant's ``old`` must occur exactly once in its file; when the code moves on, update
the entry (the runner reports it as stale). A test subset is ``"path[::node] [-k EXPR]"``.
"""
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
H = "tests/hostile/"
NN = ("tests/test_nn_modules.py", "tests/test_nn_functional.py")
OPTIM = ("tests/test_optim.py", "tests/test_optim_more.py")
SERVER = ("tests/test_server.py", H + "test_server_hostile.py")
LOAD = (H + "test_load_state_dict.py", "tests/test_serialize.py")
IR = ("tests/test_graph_ir.py",)

MUTANTS = [
    # -- issue 7's list of bugs the suite missed -------------------------------------------------------
    M("pow_vjp_kink", "core/ops/elementwise.py", "log(where(x > 0, x, 1))", "log(where(x >= 0, x, 1))",
      (H + "test_planted_bugs.py::test_pow_gradient_for_the_exponent_at_a_zero_base",)),
    M("sum_to_lead", "core/autograd/__init__.py", "grad.shape[i + lead] != 1", "grad.shape[i] != 1",
      (H + "test_planted_bugs.py::test_broadcast_gradient_over_a_leading_batch_of_one",)),
    M("norm_inf_keepdim", "core/ops/reduce.py", "return amax(x.abs(), dim, keepdim)", "return amax(x.abs(), dim)",
      (H + "test_planted_bugs.py::test_norm_keepdim_shape",)),
    M("layer_norm_eps", "core/nn/modules/norm.py",
           "F.layer_norm(input, self.normalized_shape, self.weight, self.bias, self.eps)",
           "F.layer_norm(input, self.normalized_shape, self.weight, self.bias)",
      (H + "test_planted_bugs.py::test_layer_norm_uses_its_eps",)),
    M("max_pool_dilation", "core/nn/functional_conv.py", "rows = rows + (k // kernel[1]) * dilation[0]",
           "rows = rows + (k // kernel[1]) * dilation[1]",
      (H + "test_planted_bugs.py::test_max_pool_indices_with_asymmetric_dilation",)),
    M("gather_bound", "wgsl_kernels/index.wgsl", "return j >= 0 && u32(j) < p.rows;",
           "return j >= 0 && u32(j) <= p.rows;",
      (H + "test_planted_bugs.py::test_webgpu_gather_rejects_an_index_equal_to_the_size",)),
    M("no_grad_decorator", "core/autograd/__init__.py",
           "            with set_grad_enabled(mode):\n                return fn(*args, **kwargs)",
           "            prev = is_grad_enabled()\n            _mode.enabled = mode\n"
           "            result = fn(*args, **kwargs)\n            _mode.enabled = prev\n            return result",
      (H + "test_planted_bugs.py::test_no_grad_decorator_restores_grad_mode_when_the_function_raises",)),
    M("clip_coefficient_cap", "core/nn/utils.py", "ops.clamp(max_norm / (total + 1e-6), max=1.0)",
           "(max_norm / (total + 1e-6))",
      (H + "test_planted_bugs.py::test_clip_grad_norm_leaves_small_gradients_unchanged",)),
    # -- the fixes of issue 7 -----------------------------------------------------------------------------
    M("getitem_multi_index_check", "core/ops/indexing.py", "    if bad is not None:\n",
           "    if bad is not None and False:\n", (H + "test_indexing.py -k pair",)),
    # take used to wrap negatives itself: getitem's already wrapped index then wrapped twice.
    M("getitem_double_wrap", "wgsl_kernels/index.wgsl",
           "  let j = index[u32(i32(p.offsets.x) + strided(i, 0u))];\n  var v = T(0);",
           "  var j = index[u32(i32(p.offsets.x) + strided(i, 0u))];\n"
           "  if (j < 0) { j = j + i32(p.rows); }\n  var v = T(0);",
      (H + "test_indexing.py -k getitem",)),
    M("take_rejects_negatives", "core/ops/indexing.py", '    _check_range("take", index, x.shape[0], 0)\n',
           "", (H + "test_indexing.py -k take",)),
    M("index_select_rejects_negatives", "core/ops/indexing.py",
           '        _check_range("index_select", index._host(), x.shape[d], d)\n', "        pass\n",
      (H + "test_indexing.py -k index_select",)),
    M("embedding_rejects_negatives", "core/nn/functional.py",
           "bad = values[(values < 0) | (values >= count)]", "bad = values[values >= count]",
      (H + "test_indexing.py -k embedding",)),
    M("scatter_flags_scan", "wgsl_kernels/index.wgsl",
           "      atomicOr(&errors[0], 1u);  // row 0", "      // row 0", (H + "test_indexing.py -k scatter_add",)),
    M("setitem_all_or_nothing", "wgsl_kernels/index.wgsl",
           "  if (atomicLoad(&errors[0]) != 0u) { return; }\n", "", (H + "test_indexing.py -k setitem_pair",)),
    M("norm_nan", "core/ops/reduce.py", "nonzero = total != 0", "nonzero = total > 0",
      (H + "test_nan.py -k norm",)),
    M("ne_nan", "core/ops/elementwise.py", '"u32(wg_isnan(a) || wg_isnan(b) || a != b)"', '"u32(a != b)"',
      (H + "test_nan.py::test_ne_with_nan",)),
    M("truthy_nan", "wgsl_kernels/math.wgsl", "return wg_isnan(x) || x != 0.0;", "return x != 0.0;",
      ("tests/test_ops.py -k special",)),
    M("isinf_bits", "wgsl_kernels/math.wgsl", "(bitcast<u32>(x) & 0x7fffffffu) == 0x7f800000u",
           "(bitcast<u32>(x) & 0x7fffffffu) >= 0x7f800000u", ("tests/test_ops.py -k isinf",)),
    M("divide_by_zero_device", "core/ops/elementwise.py", '"wg_ifloordiv(a, wg_check_divisor(b))"',
           '"wg_ifloordiv(a, b)"', (H + "test_division.py",)),
    M("divide_by_zero_cpu", "core/ops/elementwise.py", 'if x.dtype.kind != "f" and np.any(np.asarray(y) == 0):',
           "if False:", (H + "test_division.py",)),
    M("nan_to_num_posinf", "core/ops/elementwise.py", "posinf = float(info.max) if posinf is None else posinf",
           "posinf = 0.0 if posinf is None else posinf", ("tests/test_ops.py -k nan_to_num",)),
    M("one_hot_compare", "core/nn/functional.py",
           "return out.scatter_add(-1, index, creation.ones(index.shape, dtype=index.dtype, device=tensor.device))",
           "return (index == creation.arange(num_classes, device=tensor.device)).long()",
      (H + "test_indexing.py -k one_hot",)),
    M("narrow_start", "core/ops/movement.py", "    if not -n <= start <= n:\n", "    if False:\n",
      (H + "test_indexing.py -k narrow",)),

    M("static-segment-check-lets-dotdot-through", "server/static.py",
      'if part in ("", ".", "..") or part.startswith(".") or ":" in part:',
      'if part in ("", ".") or ":" in part:', SERVER),
    M("static-containment-as-string-prefix", "server/static.py",
      "return os.path.commonpath([real, root_real]) == root_real",
      "return real.startswith(root_real)", SERVER),
    # -- optimizers and schedulers --------------------------------------------------------
    M("adam-no-bias-correction", "core/optim/adam.py",
      "step_size = lr / (1 - beta1 ** step)", "step_size = lr", OPTIM),
    M("sgd-nesterov-ignored", "core/optim/updates.py",
      "        update = np.multiply(momentum_buffer, momentum)\n        update += d_p",
      "        update = np.multiply(momentum_buffer, 1.0)", OPTIM),
    M("sgd-dampening-ignored", "core/optim/updates.py",
      "            momentum_buffer += (1 - dampening) * d_p", "            momentum_buffer += d_p", OPTIM),
    M("steplr-exponent-off-by-one", "core/optim/schedulers.py",
      "base_lr * self.gamma ** (self.last_epoch // self.step_size)",
      "base_lr * self.gamma ** (self.last_epoch // self.step_size + 1)", OPTIM),
    M("zero-grad-set-to-none-ignored", "core/optim/optimizer.py",
      "                if set_to_none:\n                    p.grad = None\n                    continue\n",
      "", OPTIM),
    # -- nn ------------------------------------------------------------------------------
    M("dropout-no-rescale", "core/nn/functional.py",
      "return ops.where(keep, input * (1.0 / (1.0 - p)), 0.0)", "return ops.where(keep, input, 0.0)", NN),
    M("batch-norm-running-var-biased", "core/nn/functional.py",
      "unbiased = var.detach().reshape(channels) * (count / (count - 1))",
      "unbiased = var.detach().reshape(channels)", NN),
    M("leaky-relu-slope-on-positive-side", "core/nn/functional.py",
      "return ops.where(input > 0, input, input * negative_slope)",
      "return ops.where(input >= 0, input * negative_slope, input)", NN),
    M("gelu-tanh-constant", "core/nn/functional.py",
      "(input + 0.044715 * input * input * input)", "(input + 0.04715 * input * input * input)", NN),
    M("loss-mean-as-sum", "core/nn/functional_loss.py",
      '    if reduction == "mean":\n        return loss.mean()',
      '    if reduction == "mean":\n        return loss.sum()', NN),
    M("train-mode-not-recursive", "core/nn/modules/module.py",
      '        for module in self.modules():\n            object.__setattr__(module, "training", mode)',
      '        object.__setattr__(self, "training", mode)', NN),
    M("linear-bias-init-bound", "core/nn/modules/linear.py",
      "bound = 1 / math.sqrt(fan_in) if fan_in > 0 else 0", "bound = 1 / fan_in if fan_in > 0 else 0", NN),
    # -- data ----------------------------------------------------------------------------
    M("batch-sampler-drop-last-ignored", "core/utils/data/sampler.py",
      "        if batch and not self.drop_last:\n            yield batch",
      "        if batch:\n            yield batch", ("tests/test_data.py",)),
    # -- loads (issue 7) -----------------------------------------------------------------
    M("load-state-dict-writes-before-checking", "core/nn/modules/module.py",
      "                    if problem is None:\n                        plan.append((target, value))",
      "                    if problem is None:\n                        target.copy_(value)", LOAD),
    M("load-state-dict-non-strict-swallows-shape-errors", "core/nn/modules/module.py",
      "        errors += problems\n", "        errors += problems if strict else []\n", LOAD),
    # -- compile (issue 10): view writes and the replay's optimizer updates ------------------
    M("reinplace-while-the-old-value-is-read-later", "core/graph/passes/reinplace.py",
      " and last.get(old.id, -1) == i\n", "\n", ("tests/test_graph_passes.py -k reinplace",)),
    M("reinplace-while-a-view-is-read-later", "core/graph/passes/reinplace.py",
      "all(last.get(a, -1) < i for a in shared - {old.id})", "True", ("tests/test_graph_passes.py -k reinplace",)),
    M("functionalize-a-value-viewed-before-the-write", "core/graph/passes/functionalize.py",
      " or target.id in viewed)", ")", ("tests/test_graph_passes.py -k functionalize",)),
    M("replayed-updates-keep-the-recorded-scalars", "core/backend/webgpu/optim.py",
      "        struct.pack_into(\"<12f\", out, 32, *(float(values.get(name, 0.0)) for name in FIELDS), 0.0)\n",
      "        pass\n", ("tests/test_compile.py -k learning_rate",)),
    # -- the IR's facts and its verifier (issue 20) ---------------------------------------------
    M("graph-ir-last-use-forgets-results", "core/graph/analysis.py", "        df.last_use[v.id] = end\n", "", IR),
    M("graph-ir-written-every-input", "core/graph/analysis.py",
      "writer.inputs[:writer.op.mutates]", "writer.inputs", IR),
    M("graph-ir-written-first-group-member", "core/graph/analysis.py",
      "for writer in node.members or [node]:", "for writer in [node]:", IR + ("tests/test_graph_passes.py -k bumps",)),
    M("graph-ir-inplace-reads-do-not-escape", "core/graph/analysis.py",
      "            df.escaping.update(v.id for v in node.inputs)\n", "", IR),
    M("graph-ir-aliases-not-transitive", "core/graph/analysis.py",
      "                if base in members:", "                if False:", IR),
    M("graph-ir-single-use-of-an-escaping-value", "core/graph/analysis.py",
      " and value_id not in self.escaping", "", IR),
    M("graph-ir-verify-use-before-def", "core/graph/verify.py",
      "            if v.id not in defined:\n", "            if False:\n", IR),
    M("graph-ir-verify-value-made-twice", "core/graph/verify.py",
      "            if node.output.id in defined:\n", "            if False:\n", IR),
    M("graph-ir-verify-inplace-with-output", "core/graph/verify.py",
      "    if op.inplace != (node.output is None):\n", "    if False:\n", IR),
    M("graph-ir-verify-dtype-unchecked", "core/graph/verify.py", " or dtype is not out.dtype", "", IR),
    M("graph-ir-verify-fused-members-unchecked", "core/graph/verify.py",
      "        _check_node(member, here, fail, device)\n", "", IR),
    M("graph-ir-verify-grouped-inputs-unchecked", "core/graph/verify.py",
      "    if [v.id for v in node.inputs] != [v.id for m in members for v in m.inputs]:", "    if False:", IR),
    M("graph-ir-verify-outputs-unchecked", "core/graph/verify.py",
      "            fail(f\"output {k}\", f\"returns", "            (f\"output {k}\", f\"returns", IR),
    M("graph-ir-verify-foreign-values", "core/graph/verify.py", " or graph.values[v.id] is not v", "", IR),
    # -- server (issue 7) ----------------------------------------------------------------
    M("stale-temporaries-of-live-savers-removed", "core/serialize.py",
      "dead = host == _HOST and pid != os.getpid() and not _process_alive(pid)",
      "dead = host == _HOST and pid != os.getpid()", (H + "test_load_killed_saves.py",)),
    M("load-huge-empty-dims-reach-numpy", "core/_safetensors.py",
      "    if numel == 0:\n", "    if False:\n", (H + "test_load_corpus.py", "tests/test_serialize.py")),
    M("upload-tensor-count-unbounded", "server/api.py",
      "    check_tensor_count(data, max_tensors, name)\n", "", SERVER),
    M("guard-accepts-any-host", "server/guard.py",
      "return self.any_host or is_loopback(name) or name in self.hosts", "return True", SERVER),
    M("guard-writes-without-client-header", "server/guard.py",
      "        if headers.get(CLIENT_HEADER.lower()) != \"1\":", "        if False:", SERVER),
    M("guard-cross-origin-writes", "server/guard.py",
      "        if origin is not None and not (self.same_origin(origin, scheme, host) or self.origin_listed(origin)):",
      "        if False:", SERVER),
    M("metadata-accepts-infinity", "server/store.py",
      "        elif isinstance(value, float) and not math.isfinite(value):",
      "        elif isinstance(value, float) and math.isnan(value):", SERVER),
]
