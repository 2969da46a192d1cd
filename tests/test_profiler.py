"""webgrad.profiler: events, nesting, ranges, FLOPs, memory, tables, Chrome traces, schedules."""
from __future__ import annotations

import json
import re

import pytest

import webgrad
import webgrad.nn.functional as F
from webgrad import nn
from webgrad.backend.webgpu import matmul as gpu_matmul
from webgrad.ops import registry
from webgrad.profiler import ProfilerActivity, profile, record_function, schedule

from conftest import requires_webgpu


def names(prof):
    return [e.name for e in prof.events()]


def by_name(prof, name):
    return [e for e in prof.events() if e.name == name]


def table_rows(table):
    """The rows of a printed table as {column: cell} (cells are separated by two or more spaces)."""
    lines = table.splitlines()
    rules = [i for i, line in enumerate(lines) if line and set(line) == {"-"}]
    header = re.split(r"\s{2,}", lines[rules[0] + 1].strip())
    return [dict(zip(header, re.split(r"\s{2,}", line.strip()))) for line in lines[rules[1] + 1:rules[2]]]


def mlp_step(device):
    webgrad.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 3)).to(device)
    opt = webgrad.optim.Adam(model.parameters(), lr=1e-3)
    x = webgrad.randn(5, 6, device=device)
    y = webgrad.tensor([0, 1, 2, 0, 1], device=device)

    def step():
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss
    return step


def test_a_profile_observes_only_while_it_records():
    assert registry.OBSERVERS == ()
    with profile() as prof:
        assert registry.OBSERVERS == (prof,)
    assert registry.OBSERVERS == ()
    with pytest.raises(ZeroDivisionError):
        with profile():
            raise ZeroDivisionError("inside the profile")
    assert registry.OBSERVERS == ()


def test_profiles_do_not_nest():
    with profile():
        with pytest.raises(RuntimeError, match="another webgrad.profiler.profile is recording"):
            with profile():
                pass
    assert registry.OBSERVERS == ()


def test_exact_op_counts(device):
    a, b, c = (webgrad.randn(*s, device=device) for s in ((4, 3), (3, 5), (5, 2)))
    with profile() as prof:
        y = (a @ b) @ c
        y = y + 1.0
        (y @ y.mT).sum()
    averages = {a.key: a for a in prof.key_averages()}
    assert averages["matmul"].count == 3
    assert averages["add"].count == 1
    assert averages["sum"].count == 1
    assert [e.name for e in prof.events() if e.kind == "op" and e.name == "matmul"] == ["matmul"] * 3


def test_self_and_total_times_are_consistent(device):
    step = mlp_step(device)
    step()
    with profile() as prof:
        step()
    events = [e for e in prof.events() if e.kind != "kernel"]
    assert events
    for e in events:
        assert e.end_ns >= e.start_ns
        assert 0 <= e.self_cpu_time_total <= e.cpu_time_total + 1e-9, e
        assert e.cpu_time_total + 1e-9 >= sum(c.cpu_time_total for c in e.children), e
        for c in e.children:
            assert e.start_ns <= c.start_ns and c.end_ns <= e.end_ns
    top = [e for e in events if e.parent is None]
    assert sum(e.self_cpu_time_total for e in events) == pytest.approx(sum(e.cpu_time_total for e in top))
    total = prof.key_averages().total_average()
    assert total.self_cpu_time_total == pytest.approx(sum(e.cpu_time_total for e in top))


def test_backward_events_are_named_like_torch(device):
    a = webgrad.randn(4, 3, device=device, requires_grad=True)
    b = webgrad.randn(3, 2, device=device)
    with profile() as prof:
        (a @ b).mul(2.0).sum().backward()
    backward = [e for e in prof.events() if e.kind == "backward"]
    assert {"SumBackward", "MulBackward", "MatmulBackward"} <= {e.name for e in backward}
    mm_back = by_name(prof, "MatmulBackward")[0]
    assert any(c.name == "matmul" for c in mm_back.children)  # its vjp's ops nest under it
    assert mm_back.cpu_time_total >= sum(c.cpu_time_total for c in mm_back.children)


def test_record_function_ranges_nest_and_decorate(device):
    x = webgrad.ones(3, device=device)

    @record_function("decorated")
    def double(t):
        return t * 2.0

    with profile() as prof:
        with record_function("outer"):
            with record_function("inner"):
                x + x
            double(x)
    outer, inner, decorated = by_name(prof, "outer")[0], by_name(prof, "inner")[0], by_name(prof, "decorated")[0]
    assert inner.parent is outer and decorated.parent is outer and outer.parent is None
    assert by_name(prof, "add")[0].parent is inner
    assert by_name(prof, "mul")[0].parent is decorated
    assert outer.kind == inner.kind == "user"
    assert double(x).shape == (3,)  # without a profile the range does nothing


def test_composites_nest_their_primitives_and_are_restored(device):
    original = F.cross_entropy
    logits = webgrad.randn(4, 3, device=device)
    target = webgrad.tensor([0, 1, 2, 1], device=device)
    with profile() as prof:
        F.cross_entropy(logits, target)
    assert F.cross_entropy is original
    composite = by_name(prof, "F.cross_entropy")[0]
    assert composite.kind == "composite"
    assert "cross_entropy_total" in [c.name for c in composite.children]


def test_an_op_that_raises_leaves_no_open_parent(device):
    a, b = webgrad.ones(2, 3, device=device), webgrad.ones(2, 3, device=device)
    with profile() as prof:
        with record_function("outer"):
            with pytest.raises(Exception, match="mul"):
                a * webgrad.ones(4, device=device)  # raises inside apply, after its event began
            a + b
        a - b
    assert by_name(prof, "add")[0].parent is by_name(prof, "outer")[0]
    assert by_name(prof, "sub")[0].parent is None
    assert "mul" not in names(prof)  # it never finished


def test_chrome_trace_is_valid_json_with_shapes(tmp_path, device):
    a, b = webgrad.randn(4, 3, device=device), webgrad.randn(3, 5, device=device)
    with profile(record_shapes=True) as prof:
        with record_function("block"):
            a @ b
    path = tmp_path / "trace.json"
    prof.export_chrome_trace(str(path))
    trace = json.loads(path.read_text())
    complete = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    mm = [e for e in complete if e["name"] == "matmul"][0]
    assert mm["args"]["Input Dims"] == [[4, 3], [3, 5]]
    assert mm["args"]["FLOPs"] == 2 * 4 * 5 * 3
    assert isinstance(mm["ts"], float) and mm["dur"] >= 0 and "pid" in mm and "tid" in mm
    block = [e for e in complete if e["name"] == "block"][0]
    assert block["ts"] <= mm["ts"] and mm["ts"] + mm["dur"] <= block["ts"] + block["dur"] + 1e-3

    with profile() as prof:
        a @ b
    prof.export_chrome_trace(str(path))
    mm = [e for e in json.loads(path.read_text())["traceEvents"] if e.get("name") == "matmul"][0]
    assert "Input Dims" not in mm["args"]


@pytest.mark.parametrize("case", ["matmul", "batched", "vector", "linear", "conv2d", "conv2d_groups", "conv1d",
                                  "attention"])
def test_flops_are_exact(case, device):
    r = lambda *s: webgrad.randn(*s, device=device)  # noqa: E731
    run, name, expected = {
        "matmul": (lambda: r(4, 3) @ r(3, 5), "matmul", 2 * 4 * 5 * 3),
        "batched": (lambda: r(2, 4, 3) @ r(3, 5), "matmul", 2 * 2 * 4 * 5 * 3),
        "vector": (lambda: r(3) @ r(3, 5), "matmul", 2 * 5 * 3),
        "linear": (lambda: F.linear(r(8, 3), r(5, 3), r(5)), "F.linear", 2 * 8 * 5 * 3),
        "conv2d": (lambda: F.conv2d(r(2, 3, 6, 6), r(4, 3, 3, 3), padding=1), "F.conv2d", 2 * 2 * 4 * 6 * 6 * 27),
        "conv2d_groups": (lambda: F.conv2d(r(1, 4, 5, 5), r(6, 2, 3, 3), groups=2), "F.conv2d",
                          2 * 6 * 3 * 3 * 2 * 9),
        "conv1d": (lambda: F.conv1d(r(2, 3, 10), r(4, 3, 5)), "F.conv1d", 2 * 2 * 4 * 6 * 15),
        # batch 2, L 4, S 6 scores, each from E 8 and into Ev 3
        "attention": (lambda: F.scaled_dot_product_attention(r(2, 4, 8), r(2, 6, 8), r(2, 6, 3)),
                      "F.scaled_dot_product_attention", 2 * 48 * 8 + 2 * 48 * 3),
    }[case]
    with profile() as prof:
        run()
    event = by_name(prof, name)[0]
    assert event.flops == expected
    assert prof.key_averages().total_average().flops >= expected


def test_conv_passes_count_their_flops(device):
    """The forward and both backward kernels each do the forward's multiply-adds."""
    x = webgrad.randn(2, 4, 6, 6, device=device, requires_grad=True)
    w = webgrad.randn(6, 2, 3, 3, device=device, requires_grad=True)
    with profile() as prof:
        F.conv2d(x, w, stride=2, groups=2).sum().backward()
    expected = 2 * (2 * 6 * 2 * 2) * (2 * 3 * 3)  # out (2, 6, 2, 2), each from Cg*kh*kw = 18 terms
    for name in ("conv2d", "conv2d_backward_input", "conv2d_backward_weight"):
        assert [e.flops for e in by_name(prof, name)] == [expected], name


def test_pooling_counts_one_flop_per_window_element(device):
    x = webgrad.randn(2, 3, 7, 7, device=device, requires_grad=True)
    with profile() as prof:
        F.max_pool2d(x, 3, stride=2).sum().backward()  # 3x3 windows, out 3x3
    for name in ("max_pool2d_select", "max_pool2d_backward"):
        assert [e.flops for e in by_name(prof, name)] == [2 * 3 * 9 * 9], name


def test_bytes_moved_count_inputs_and_output(device):
    a, b = webgrad.randn(4, 3, device=device), webgrad.randn(3, 5, device=device)
    with profile() as prof:
        a @ b
    assert by_name(prof, "matmul")[0].bytes == 4 * (12 + 15 + 20)
    row = [r for r in table_rows(prof.key_averages().table()) if r["Name"] == "matmul"][0]
    assert row["Bytes Moved"] == "188 b" and row["Total FLOPs"] == "120"
    # Bytes as the device stores them: float16 is 2 bytes (packed on an adapter without 'shader-f16').
    with profile() as prof:
        a.half() @ b.half()
    assert by_name(prof, "matmul")[0].bytes == 2 * (12 + 15 + 20)


def test_memory_fields(device):
    a, b = webgrad.randn(4, 3, device=device), webgrad.randn(3, 5, device=device)
    with profile(profile_memory=True) as prof:
        keep = a @ b
    mm = by_name(prof, "matmul")[0]
    if device == "cpu":
        assert mm.self_cpu_memory_usage == 4 * 5 * 4
        assert prof.memory_stats()["cpu"] >= 80
    else:
        assert mm.self_device_memory_usage >= 4 * 5 * 4
        assert prof.memory_stats()["webgpu"] > 0
    table = prof.key_averages().table()
    assert "Self CPU Mem" in table
    with profile() as prof:
        keep = a @ b
    assert "Self CPU Mem" not in prof.key_averages().table()
    del keep


def test_table_sorts_and_limits(device):
    x = webgrad.ones(3, device=device)
    with profile() as prof:
        for _ in range(3):
            x = x + 1.0
        x = x * 2.0
        x.sum()
    averages = prof.key_averages()
    ops = type(averages)([a for a in averages if a.kind == "op"], info=averages.info)  # webgpu adds kernels
    rows = table_rows(ops.table(sort_by="count", row_limit=2))
    assert len(rows) == 2 and rows[0]["Name"] == "add" and rows[0]["# of Calls"] == "3"
    assert len(table_rows(averages.table(sort_by="self_cpu_time_total"))) == len(averages) > 2
    counts = [int(r["# of Calls"]) for r in table_rows(ops.table(sort_by="count"))]
    assert counts == sorted(counts, reverse=True) and len(counts) == 3
    with pytest.raises(ValueError, match="unknown sort_by='nope'.*self_cpu_time_total"):
        prof.key_averages().table(sort_by="nope")
    for key in ("self_cpu_time_total", "cpu_time_total", "self_device_time_total", "cuda_time_total", "flops"):
        prof.key_averages().table(sort_by=key)
    html = prof.key_averages()._repr_html_()
    assert html.startswith("<table") and "<td>add</td>" in html
    assert "<table" in prof._repr_html_()


def test_group_by_input_shape(device):
    with profile(record_shapes=True) as prof:
        webgrad.ones(2, device=device) + 1.0
        webgrad.ones(3, device=device) + 1.0
        webgrad.ones(3, device=device) + 1.0
    grouped = [a for a in prof.key_averages(group_by_input_shape=True) if a.key == "add"]
    assert sorted(a.count for a in grouped) == [1, 2]
    assert "Input Shapes" in prof.key_averages(group_by_input_shape=True).table()
    with profile() as prof:
        pass
    with pytest.raises(ValueError, match="record_shapes=True"):
        prof.key_averages(group_by_input_shape=True)


def test_schedule_records_only_active_steps():
    x = webgrad.ones(3)
    traces = []

    def ready(prof):
        traces.append([e.name for e in prof.events()])
    with profile(schedule=schedule(wait=1, warmup=1, active=2, repeat=1), on_trace_ready=ready) as prof:
        for _ in range(6):
            x + 1.0
            prof.step()
    assert len(traces) == 1
    assert traces[0].count("add") == 2
    assert [n for n in traces[0] if n.startswith("ProfilerStep")] == ["ProfilerStep#2", "ProfilerStep#3"]


def test_events_before_the_end_is_an_error():
    prof = profile()
    with pytest.raises(RuntimeError, match="after the `with` block"):
        prof.events()


def test_cpu_activity_alone_has_no_device_columns():
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        webgrad.ones(3) + 1.0
    assert "WebGPU" not in prof.key_averages().table()


@requires_webgpu
def test_webgpu_kernels_timed_and_dispatches_counted(tmp_path):
    a, b = webgrad.randn(16, 8, device="webgpu"), webgrad.randn(8, 4, device="webgpu")
    (a @ b).numpy()
    device = webgrad.backend.get_backend("webgpu").device
    with profile() as prof:
        y = (a @ b).relu()
        y.numpy()
    assert device.timer is None  # detached after the profile
    mm = by_name(prof, "matmul")[0]
    assert mm.dispatches == 1
    table = prof.key_averages().table()
    assert "Dispatches" in table
    if not device.timestamps:
        pytest.fail("llvmpipe offers timestamp-query; this adapter does not: " + str(device.adapter_info))
    kernels = [e for e in prof.events() if e.kind == "kernel"]
    entry = gpu_matmul.choose_blocking(webgrad.backend.get_backend("webgpu"), 16, 4).entry
    assert [k.name for k in kernels if k.parent is mm] == [f"matmul.wgsl:{entry}"]
    assert all(k.device_time_total > 0 for k in kernels)
    assert mm.device_time_total == pytest.approx(sum(k.device_time_total for k in kernels if k.parent is mm))
    assert "timestamp queries" in table
    total_kernels = sum(k.self_device_time_total for k in kernels)
    assert prof.key_averages().total_average().self_device_time_total == pytest.approx(total_kernels)
    path = tmp_path / "trace.json"
    prof.export_chrome_trace(str(path))
    on_gpu = [e for e in json.loads(path.read_text())["traceEvents"] if e["ph"] == "X" and e["pid"] == 1]
    assert f"matmul.wgsl:{entry}" in [e["name"] for e in on_gpu] and all(e["dur"] > 0 for e in on_gpu)


@requires_webgpu
def test_webgpu_sync_timing_and_no_timing():
    a = webgrad.randn(64, 64, device="webgpu")
    with profile(device_timing="sync") as prof:
        (a @ a).numpy()
    mm = by_name(prof, "matmul")[0]
    assert mm.device_time_total > 0 and mm.self_device_time_total == mm.device_time_total
    assert not [e for e in prof.events() if e.kind == "kernel"]
    assert "synchronization at op boundaries" in prof.key_averages().table()
    with profile(device_timing=None) as prof:
        (a @ a).numpy()
    assert by_name(prof, "matmul")[0].device_time_total == 0
    assert "not measured" in prof.key_averages().table()


def test_torch_arguments_webgrad_does_not_record_warn():
    with pytest.warns(UserWarning, match="with_stack is not recorded"):
        profile(with_stack=True)
    assert ProfilerActivity.CUDA is ProfilerActivity.WEBGPU  # CUDA scripts profile the accelerator here


def test_bad_arguments_are_named():
    with pytest.raises(ValueError, match="device_timing='fast'"):
        profile(device_timing="fast")
    with pytest.raises(ValueError, match="active=0"):
        schedule(wait=0, warmup=0, active=0)


def test_a_compiled_replay_shows_its_ops(device):
    w = webgrad.randn(3, 4, device=device)

    @webgrad.compile
    def f(x):
        return (x @ w).relu()
    x = webgrad.randn(5, 3, device=device)
    f(x)  # traces (eagerly)
    f(x)  # replays (on webgpu recording its dispatch list, which a profiled call does not use)
    with profile() as prof:
        with record_function("replay"):
            f(x)
    # on webgpu the relu runs in the product's stores (a matmul epilogue): one event, named for both
    mm = by_name(prof, "matmul_relu" if device == "webgpu" else "matmul")
    assert len(mm) == 1 and mm[0].flops == 2 * 5 * 4 * 3 and mm[0].kind == "op"
    assert mm[0].parent is by_name(prof, "replay")[0]
    with profile() as prof:  # eager ops are not counted twice (apply times them, not the backend)
        (x @ w).relu()
    assert len(by_name(prof, "matmul")) == 1
