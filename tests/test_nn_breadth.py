"""nn breadth (issue 22): activations, normalizations, losses, distances, dropouts,
embedding_bag, padding modes and nn.init, each compared with torch itself.

A case is ``(id, fn, inputs)``: ``fn(lib, F, *tensors)`` runs with ``lib = webgrad``
and with ``lib = torch`` (``F`` is ``lib.nn.functional``). Float inputs become float64
tensors that require grad (float32 on webgpu); values and gradients must match torch's,
including at the kinks (the activations' inputs hold the exact break points).
"""
from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

import webgrad
import webgrad.nn.functional as WF
from conftest import assert_close, gradcheck, need_module
from webgrad import nn

RNG = np.random.default_rng(2022)
KINKS = np.array([-4.0, -3.0, -1.0, -0.5, 0.0, 0.5, 1.0, 3.0, 6.0, 7.0, -20.0, 20.0, 0.25, -0.25])


@pytest.fixture(autouse=True)
def _fresh_draws():
    """Draws made inside a test depend on that test alone, not on which tests ran before it."""
    global RNG
    tables = RNG
    RNG = np.random.default_rng(7)
    yield
    RNG = tables


def R(*shape, low=-2.0, high=2.0):
    return RNG.uniform(low, high, size=shape)


def P(*shape):  # positive
    return RNG.uniform(0.1, 2.0, size=shape)


def I(*values):  # noqa: E743  (int64 indices)
    return np.array(values, dtype=np.int64)


def _flat(out):
    return [y for x in out for y in _flat(x)] if isinstance(out, (tuple, list)) else [out]


def _weights(n):
    return np.cos(np.arange(n) * 0.7)


def _torch_side(torch, fn, arrays, grad):
    tensors = [torch.tensor(a, requires_grad=grad and a.dtype.kind == "f") for a in arrays]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        outs = _flat(fn(torch, torch.nn.functional, *tensors))
    values = [o.detach().numpy() for o in outs]
    leaves = [t for t in tensors if t.requires_grad]
    floats = [o for o in outs if o.requires_grad]
    grads = []
    if grad and floats and leaves:
        found = torch.autograd.grad(floats, leaves, [torch.tensor(_weights(o.numel()).reshape(o.shape))
                                                     for o in floats], allow_unused=True)
        grads = [np.zeros(t.shape) if g is None else g.numpy() for t, g in zip(leaves, found)]
    return tuple(values) + tuple(grads)


def check(device, torch_ref, fn, *arrays, grad=True, tol=None):
    """fn(webgrad, ...) matches fn(torch, ...): values and the gradient of a weighted sum."""
    expected = torch_ref(lambda torch: _torch_side(torch, fn, arrays, grad))
    dtype = webgrad.float32 if device == "webgpu" else webgrad.float64
    tensors = [webgrad.tensor(a, dtype=dtype if a.dtype.kind == "f" else None, device=device,
                              requires_grad=grad and a.dtype.kind == "f") for a in arrays]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        outs = _flat(fn(webgrad, WF, *tensors))
    tol = tol or (2e-4 if device == "webgpu" else 1e-7)
    for got, want in zip(outs, expected):
        assert_close(got.detach(), want, rtol=tol, atol=tol, dtype=None)
    want_grads = expected[len(outs):]
    leaves = [t for t in tensors if t.requires_grad]
    floats = [o for o in outs if o.requires_grad]
    if want_grads and floats:
        total = sum((o * webgrad.tensor(_weights(o.numel()).reshape(tuple(o.shape)), dtype=o.dtype,
                                        device=device)).sum() for o in floats)
        total.backward()
        for leaf, want in zip(leaves, want_grads):
            got = leaf.grad if leaf.grad is not None else webgrad.zeros(*leaf.shape, dtype=leaf.dtype)
            assert_close(got, want, rtol=tol * 10, atol=tol * 10, msg="gradient", dtype=None)


ACTIVATIONS = [
    ("relu", lambda t, F, x: F.relu(x)),
    ("relu6", lambda t, F, x: F.relu6(x)),
    ("hardtanh", lambda t, F, x: F.hardtanh(x)),
    ("hardtanh_bounds", lambda t, F, x: F.hardtanh(x, -3.0, 0.5)),
    ("elu", lambda t, F, x: F.elu(x)),
    ("elu_alpha", lambda t, F, x: F.elu(x, alpha=2.0)),
    ("leaky_relu", lambda t, F, x: F.leaky_relu(x, 0.2)),
    ("hardswish", lambda t, F, x: F.hardswish(x)),
    ("selu", lambda t, F, x: F.selu(x)),
    ("celu", lambda t, F, x: F.celu(x, alpha=2.0)),
    ("softsign", lambda t, F, x: F.softsign(x)),
    ("threshold", lambda t, F, x: F.threshold(x, 0.5, -2.0)),
    ("softmin", lambda t, F, x: F.softmin(x.reshape(2, 7), dim=1)),
    ("tanhshrink", lambda t, F, x: F.tanhshrink(x)),
    ("softshrink", lambda t, F, x: F.softshrink(x, 0.5)),
    ("hardshrink", lambda t, F, x: F.hardshrink(x, 1.0)),
    ("rrelu_eval", lambda t, F, x: F.rrelu(x)),
    ("logsigmoid", lambda t, F, x: F.logsigmoid(x)),
    ("mish", lambda t, F, x: F.mish(x)),
    ("silu", lambda t, F, x: F.silu(x)),
    ("softplus", lambda t, F, x: F.softplus(x, beta=2.0, threshold=6.0)),
    ("gelu_tanh", lambda t, F, x: F.gelu(x, approximate="tanh")),
    ("glu", lambda t, F, x: F.glu(x.reshape(7, 2), dim=1)),
    ("prelu", lambda t, F, x: F.prelu(x.reshape(2, 7), t.tensor([0.25], dtype=x.dtype, device=x.device))),
]


@pytest.mark.parametrize("case", ACTIVATIONS, ids=[c[0] for c in ACTIVATIONS])
def test_activations_match_torch_at_the_kinks(device, torch_ref, case):
    check(device, torch_ref, case[1], KINKS.copy())


def test_hardsigmoid_matches_torch(device, torch_ref):
    # torch's backward uses a float32 1/6 even in float64: compare to 1e-7.
    check(device, torch_ref, lambda t, F, x: F.hardsigmoid(x), KINKS.copy(), tol=1e-6)


def test_prelu_per_channel_weight_gradient(device, torch_ref):
    check(device, torch_ref, lambda t, F, x, w: F.prelu(x, w), R(2, 3, 4), P(3))


@pytest.mark.parametrize("name,args", [("relu", ()), ("relu6", ()), ("elu", (1.5,)), ("leaky_relu", (0.1,)),
                                       ("hardtanh", (-0.5, 0.5)), ("hardswish", ()), ("hardsigmoid", ()),
                                       ("selu", ()), ("celu", (0.5,)), ("silu", ()), ("mish", ()),
                                       ("threshold", (0.1, 9.0)), ("rrelu", (0.1, 0.3)), ("dropout", (0.0,))])
def test_inplace_writes_into_the_input_and_differentiates(name, args):
    x = webgrad.tensor(KINKS.copy(), dtype=webgrad.float64, requires_grad=True)
    expected = getattr(WF, name)(x, *args)
    h = x * 1.0  # not a leaf: may change in place
    out = getattr(WF, name)(h, *args, inplace=True)
    assert out is h
    assert_close(h.detach(), expected.detach().numpy())
    (g_in,) = webgrad.autograd.grad(out.sum(), x)
    (g_ref,) = webgrad.autograd.grad(expected.sum(), x)
    assert_close(g_in, g_ref.numpy())


def test_activation_modules_match_torch_modules():
    torch = need_module("torch")
    pairs = [("Hardswish", ()), ("Hardsigmoid", ()), ("SELU", ()), ("CELU", (0.5,)), ("GLU", (0,)),
             ("Softsign", ()), ("Threshold", (0.1, 20.0)), ("Softmin", (1,)), ("Tanhshrink", ()),
             ("Softshrink", (0.3,)), ("Hardshrink", ()), ("RReLU", (0.1, 0.2)), ("PReLU", (3, 0.1)), ("Softmax2d", ())]
    x = R(2, 3, 4, 4)
    for name, args in pairs:
        ours, theirs = getattr(nn, name)(*args).eval(), getattr(torch.nn, name)(*args).eval()
        assert repr(ours) == repr(theirs)
        assert list(ours.state_dict()) == list(theirs.state_dict())
        got = ours.double()(webgrad.tensor(x, dtype=webgrad.float64)).detach().numpy()
        want = theirs.double()(torch.tensor(x)).detach().numpy()
        np.testing.assert_allclose(got, want, rtol=1e-7, atol=1e-9, err_msg=name)


def test_rrelu_training_draws_slopes_between_lower_and_upper():
    webgrad.manual_seed(0)
    x = -webgrad.ones(1000, dtype=webgrad.float64)
    slopes = -WF.rrelu(x, 0.1, 0.3, training=True).numpy()
    assert slopes.min() >= 0.1 and slopes.max() <= 0.3 and slopes.std() > 0.03
    assert np.array_equal(WF.rrelu(-x, 0.1, 0.3, training=True).numpy(), np.ones(1000))


# -- normalization ---------------------------------------------------------------------------------------
NORMS = [
    ("group_norm", lambda t, F, x, w, b: F.group_norm(x, 2, w, b), R(2, 4, 5), R(4), R(4)),
    ("group_norm_4d", lambda t, F, x: F.group_norm(x, 1, eps=1e-3), R(2, 3, 2, 2)),
    ("instance_norm", lambda t, F, x, w, b: F.instance_norm(x, weight=w, bias=b), R(2, 3, 5), R(3), R(3)),
    ("instance_norm_2d", lambda t, F, x: F.instance_norm(x), R(2, 3, 2, 3)),
    ("instance_norm_eval", lambda t, F, x, m, v: F.instance_norm(x, m.detach(), v.detach(), use_input_stats=False),
     R(2, 3, 4), R(3), P(3)),
    ("rms_norm", lambda t, F, x, w: F.rms_norm(x, (5,), w), R(2, 3, 5), R(5)),
    ("rms_norm_two_dims", lambda t, F, x: F.rms_norm(x, [3, 5], eps=1e-3), R(2, 3, 5)),
    ("local_response_norm", lambda t, F, x: F.local_response_norm(x, 3, alpha=0.1), R(2, 5, 4)),
    ("local_response_norm_even", lambda t, F, x: F.local_response_norm(x, 2, alpha=0.2, k=2.0), R(2, 5, 3, 2)),
    ("local_response_norm_5d", lambda t, F, x: F.local_response_norm(x, 4, beta=0.5), R(1, 5, 2, 2, 2)),
    ("normalize_p0", lambda t, F, x: F.normalize(x, p=0), R(3, 4)),
    ("normalize_inf", lambda t, F, x: F.normalize(x, p=float("inf"), dim=0), R(3, 4)),
    ("normalize_zero_row", lambda t, F, x: F.normalize(x * t.tensor([[1.0], [0.0]], dtype=x.dtype,
                                                                   device=x.device)), R(2, 3)),
]


@pytest.mark.parametrize("case", NORMS, ids=[c[0] for c in NORMS])
def test_normalizations(device, torch_ref, case):
    check(device, torch_ref, case[1], *case[2:])


def test_instance_norm_updates_running_stats_like_torch(torch_ref):
    x = R(4, 3, 6)
    want = torch_ref(lambda torch: _instance_running(torch, x))
    got = _instance_running(webgrad, x)
    for a, b in zip(got, want):
        assert_close(webgrad.tensor(a), b, rtol=1e-6, atol=1e-6)


def _instance_running(lib, x):
    m = lib.nn.InstanceNorm1d(3, affine=True, track_running_stats=True, momentum=0.3).double()
    m(lib.tensor(x))
    m.eval()
    out = m(lib.tensor(x[:2] * 2))
    return m.running_mean.numpy(), m.running_var.numpy(), out.detach().numpy()


def test_norm_modules_match_torch_modules():
    torch = need_module("torch")
    cases = [("GroupNorm", (2, 4), {}), ("GroupNorm", (1, 4), {"affine": False}),
             ("InstanceNorm1d", (4,), {}), ("InstanceNorm2d", (4,), {"affine": True}),
             ("InstanceNorm3d", (4,), {"track_running_stats": True}), ("RMSNorm", (5,), {}),
             ("RMSNorm", ([2, 5],), {"eps": 1e-3, "elementwise_affine": False}), ("LocalResponseNorm", (3,), {}),
             ("BatchNorm3d", (4,), {})]
    for name, args, kwargs in cases:
        ours, theirs = getattr(nn, name)(*args, **kwargs), getattr(torch.nn, name)(*args, **kwargs)
        assert repr(ours) == repr(theirs)
        assert list(ours.state_dict()) == list(theirs.state_dict()), name


def test_unbatched_instance_norm_and_its_warning():
    x = webgrad.randn(3, 5)
    assert_close(nn.InstanceNorm1d(3)(x), WF.instance_norm(x.unsqueeze(0)).squeeze(0).numpy())
    with pytest.warns(UserWarning, match="num_features"):
        nn.InstanceNorm1d(4)(webgrad.randn(2, 3, 5))
    with pytest.raises(ValueError, match="num_features"):
        nn.InstanceNorm1d(4, affine=True)(webgrad.randn(2, 3, 5))


def test_batch_norm_on_an_empty_batch_is_empty_like_torch():
    layer = nn.BatchNorm1d(3)
    out = layer(webgrad.zeros(0, 3))
    assert tuple(out.shape) == (0, 3)
    assert layer.running_mean.numpy().tolist() == [0.0, 0.0, 0.0]
    assert int(layer.num_batches_tracked.item()) == 1
    assert tuple(layer.eval()(webgrad.zeros(0, 3, 4)).shape) == (0, 3, 4)


# -- losses ----------------------------------------------------------------------------------------------
LABELS = np.array([1.0, -1.0, -1.0, 1.0, -1.0, 1.0])
HINGE_IN = np.array([0.3, 1.0, -0.5, 2.0, 0.0, -1.0])  # 1.0 with y = -1 sits on the margin
LOSSES = []
for _red in ("none", "mean", "sum"):
    LOSSES += [
        (f"kl_div_{_red}", lambda t, F, x, y, r=_red: F.kl_div(x, y, reduction=r), R(3, 4), P(3, 4)),
        (f"kl_div_log_target_{_red}", lambda t, F, x, y, r=_red: F.kl_div(x, y, reduction=r, log_target=True),
         R(3, 4), R(3, 4)),
        (f"margin_ranking_{_red}", lambda t, F, a, b, r=_red: F.margin_ranking_loss(
            a, b, t.tensor(LABELS, dtype=a.dtype, device=a.device), 0.5, reduction=r), R(6), R(6)),
        (f"hinge_embedding_{_red}", lambda t, F, x, r=_red: F.hinge_embedding_loss(
            x, t.tensor(LABELS, dtype=x.dtype, device=x.device), reduction=r), HINGE_IN.copy()),
        (f"soft_margin_{_red}", lambda t, F, x, r=_red: F.soft_margin_loss(
            x, t.tensor(LABELS, dtype=x.dtype, device=x.device), reduction=r), R(6)),
        (f"multilabel_soft_margin_{_red}", lambda t, F, x, w, r=_red: F.multilabel_soft_margin_loss(
            x, t.tensor([[1.0, 0, 1, 0], [0, 0, 1, 1], [1, 1, 1, 0]], dtype=x.dtype, device=x.device), w,
            reduction=r), R(3, 4), P(4)),
        (f"multi_margin_{_red}", lambda t, F, x, y, r=_red: F.multi_margin_loss(x, y, margin=0.7, reduction=r),
         R(3, 4), I(1, 0, 3)),
        (f"multi_margin_p2_weight_{_red}", lambda t, F, x, y, r=_red: F.multi_margin_loss(
            x, y, p=2, weight=t.tensor([0.5, 1.0, 2.0, 1.5], dtype=x.dtype, device=x.device), reduction=r),
         R(3, 4), I(2, 2, 0)),
        (f"multilabel_margin_{_red}", lambda t, F, x, y, r=_red: F.multilabel_margin_loss(x, y, reduction=r),
         R(3, 4), np.array([[3, 0, -1, 1], [1, 2, 3, -1], [2, 2, -1, -1]], dtype=np.int64)),
        (f"triplet_margin_{_red}", lambda t, F, a, p, n, r=_red: F.triplet_margin_loss(a, p, n, p=3, reduction=r),
         R(4, 5), R(4, 5), R(4, 5)),
        (f"triplet_margin_swap_{_red}", lambda t, F, a, p, n, r=_red: F.triplet_margin_loss(
            a, p, n, swap=True, margin=2.0, reduction=r), R(4, 5), R(4, 5), R(4, 5)),
        (f"triplet_distance_{_red}", lambda t, F, a, p, n, r=_red: F.triplet_margin_with_distance_loss(
            a, p, n, distance_function=lambda u, v: 1.0 - F.cosine_similarity(u, v), swap=True, reduction=r),
         R(4, 5), R(4, 5), R(4, 5)),
        (f"cosine_embedding_{_red}", lambda t, F, a, b, r=_red: F.cosine_embedding_loss(
            a, b, t.tensor([1, -1, 1], device=a.device), margin=0.1, reduction=r), R(3, 4), R(3, 4)),
        (f"poisson_nll_{_red}", lambda t, F, x, y, r=_red: F.poisson_nll_loss(x, y, reduction=r), R(3, 4), P(3, 4)),
        (f"poisson_nll_full_rate_{_red}", lambda t, F, x, y, r=_red: F.poisson_nll_loss(
            x, y * 3, log_input=False, full=True, reduction=r), P(3, 4), P(3, 4)),
        (f"gaussian_nll_{_red}", lambda t, F, x, y, v, r=_red: F.gaussian_nll_loss(x, y, v, full=True, reduction=r),
         R(3, 4), R(3, 4), P(3, 4)),
        (f"gaussian_nll_per_sample_var_{_red}", lambda t, F, x, y, v, r=_red: F.gaussian_nll_loss(
            x, y, v, reduction=r), R(3, 4), R(3, 4), P(3)),
    ]


@pytest.mark.parametrize("case", LOSSES, ids=[c[0] for c in LOSSES])
def test_losses(device, torch_ref, case):
    check(device, torch_ref, case[1], *case[2:])


CTC = [
    ("padded", lambda t, F, x: F.ctc_loss(x.log_softmax(2), t.tensor([[1, 2, 2], [3, 1, 0], [4, 0, 0]]),
                                          t.tensor([7, 6, 5]), t.tensor([3, 2, 1]))),
    ("concatenated_sum", lambda t, F, x: F.ctc_loss(x.log_softmax(2), t.tensor([1, 2, 2, 3, 1, 4]), [7, 6, 5],
                                                    [3, 2, 1], reduction="sum")),
    ("blank_last_empty_target", lambda t, F, x: F.ctc_loss(
        x.log_softmax(2), t.tensor([[1, 2, 3], [0, 0, 0], [3, 3, 1]]), [7, 4, 7], [3, 0, 3], blank=4,
        reduction="none")),
    ("impossible_zero_infinity", lambda t, F, x: F.ctc_loss(
        x.log_softmax(2), t.tensor([[1, 2, 2], [3, 1, 0], [4, 0, 0]]), [2, 6, 0], [3, 2, 1], zero_infinity=True,
        reduction="none")),
    ("unbatched", lambda t, F, x: F.ctc_loss(x[:, 0].log_softmax(1), t.tensor([1, 2]), t.tensor(6),
                                             t.tensor(2))),
]


@pytest.mark.parametrize("case", CTC, ids=[c[0] for c in CTC])
def test_ctc_loss(device, torch_ref, case):
    check(device, torch_ref, case[1], R(7, 3, 5), tol=1e-6 if device == "cpu" else None)


def test_ctc_loss_is_infinite_where_no_alignment_exists():
    lp = webgrad.randn(2, 1, 4, dtype=webgrad.float64).log_softmax(2)
    assert math.isinf(WF.ctc_loss(lp, webgrad.tensor([[1, 1]]), [2], [2], reduction="sum").item())


def test_loss_modules_match_torch_modules():
    torch = need_module("torch")
    cases = [("KLDivLoss", {"reduction": "batchmean"}), ("MarginRankingLoss", {"margin": 0.5}),
             ("HingeEmbeddingLoss", {}), ("SoftMarginLoss", {}), ("MultiLabelSoftMarginLoss", {"weight": "w"}),
             ("MultiMarginLoss", {"p": 2, "weight": "w"}), ("MultiLabelMarginLoss", {}),
             ("TripletMarginLoss", {"swap": True}), ("TripletMarginWithDistanceLoss", {}),
             ("CosineEmbeddingLoss", {}), ("PoissonNLLLoss", {"full": True}), ("GaussianNLLLoss", {"eps": 1e-3}),
             ("CTCLoss", {"blank": 1, "zero_infinity": True})]
    for name, kwargs in cases:
        ours = getattr(nn, name)(**{k: webgrad.ones(4) if v == "w" else v for k, v in kwargs.items()})
        theirs = getattr(torch.nn, name)(**{k: torch.ones(4) if v == "w" else v for k, v in kwargs.items()})
        assert list(ours.state_dict()) == list(theirs.state_dict()), name
        assert ours.reduction == theirs.reduction
    x, y = R(3, 4), I(1, 0, 3)
    got = nn.MultiMarginLoss(margin=0.5)(webgrad.tensor(x), webgrad.tensor(y)).item()
    want = torch.nn.MultiMarginLoss(margin=0.5)(torch.tensor(x), torch.tensor(y)).item()
    assert got == pytest.approx(want, rel=1e-12)


def test_kl_div_mean_warns_like_torch():
    with pytest.warns(UserWarning, match="batchmean"):
        WF.kl_div(webgrad.zeros(2, 2), webgrad.ones(2, 2))


# -- distances -------------------------------------------------------------------------------------------
DISTANCES = [
    ("cosine_similarity", lambda t, F, a, b: F.cosine_similarity(a, b), R(3, 4), R(3, 4)),
    ("cosine_similarity_broadcast", lambda t, F, a, b: F.cosine_similarity(a, b, dim=-1), R(2, 1, 4), R(3, 4)),
    ("pairwise_distance", lambda t, F, a, b: F.pairwise_distance(a, b), R(3, 4), R(3, 4)),
    ("pairwise_distance_p1_keepdim", lambda t, F, a, b: F.pairwise_distance(a, b, 1.0, keepdim=True),
     R(3, 4), R(4)),
    ("pairwise_distance_inf", lambda t, F, a, b: F.pairwise_distance(a, b, float("inf")), R(3, 4), R(3, 4)),
    ("pdist", lambda t, F, x: F.pdist(x), R(4, 3)),
    ("pdist_p1", lambda t, F, x: F.pdist(x, 1), R(4, 3)),
    ("pdist_p3", lambda t, F, x: F.pdist(x, 3), R(3, 2)),
    ("cdist", lambda t, F, a, b: t.cdist(a, b), R(2, 3, 4), R(2, 5, 4)),
    ("cdist_p1", lambda t, F, a, b: t.cdist(a, b, p=1.0), R(3, 4), R(2, 4)),
    ("cdist_inf", lambda t, F, a, b: t.cdist(a, b, p=float("inf")), R(3, 4), R(2, 4)),
    ("cdist_p3_mode", lambda t, F, a, b: t.cdist(a, b, 3.0, "donot_use_mm_for_euclid_dist"), R(3, 4), R(2, 4)),
]


@pytest.mark.parametrize("case", DISTANCES, ids=[c[0] for c in DISTANCES])
def test_distances(device, torch_ref, case):
    check(device, torch_ref, case[1], *case[2:], tol=1e-6 if device == "cpu" else None)


def test_distance_modules():
    torch = need_module("torch")
    for name, kwargs in [("CosineSimilarity", {"dim": 0, "eps": 1e-6}), ("PairwiseDistance", {"p": 1.0})]:
        ours, theirs = getattr(nn, name)(**kwargs), getattr(torch.nn, name)(**kwargs)
        assert repr(ours) == repr(theirs)
        a, b = R(3, 4), R(3, 4)
        np.testing.assert_allclose(ours(webgrad.tensor(a), webgrad.tensor(b)).numpy(),
                                   theirs(torch.tensor(a), torch.tensor(b)).numpy(), rtol=1e-10)


def test_cdist_and_pdist_gradients_at_zero_distance_are_zero_like_torch():
    x = webgrad.tensor([[1.0, 2.0], [1.0, 2.0]], dtype=webgrad.float64, requires_grad=True)
    webgrad.cdist(x, x).sum().backward()
    assert np.isfinite(x.grad.numpy()).all()


# -- padding and embedding_bag ---------------------------------------------------------------------------
PADS = []
for _mode in ("reflect", "replicate", "circular"):
    for _shape, _pad in [((2, 3, 4), (1, 2)), ((2, 3, 4), (-1, 1)), ((3, 4), (2, 0)), ((2, 3, 4, 5), (2, 2, 1, 3)),
                         ((3, 4, 5), (0, 1, 2, 2)), ((1, 2, 3, 4, 5), (1, 2, 1, 1, 2, 0))]:
        PADS.append((f"{_mode}-{len(_shape)}d-{_pad}", _mode, _shape, _pad))


@pytest.mark.parametrize("case", PADS, ids=[c[0] for c in PADS])
def test_pad_modes(device, torch_ref, case):
    _, mode, shape, pad = case
    check(device, torch_ref, lambda t, F, x: F.pad(x, pad, mode=mode), R(*shape))


def test_pad_mode_errors_match_torch():
    with pytest.raises(RuntimeError, match="Padding size should be less"):
        WF.pad(webgrad.zeros(1, 2, 3), (3, 3), mode="reflect")
    with pytest.raises(NotImplementedError, match="Padding size 2 is not supported for 1D"):
        WF.pad(webgrad.zeros(3), (1, 1), mode="replicate")


BAGS = []
for _mode in ("sum", "mean", "max"):
    for _pad in (None, 4):
        BAGS += [
            (f"offsets-{_mode}-{_pad}", lambda t, F, w, m=_mode, p=_pad: F.embedding_bag(
                t.tensor([1, 2, 4, 5, 4, 3, 2, 9], device=w.device), w, t.tensor([0, 4, 4, 6], device=w.device),
                mode=m, padding_idx=p)),
            (f"2d-{_mode}-{_pad}", lambda t, F, w, m=_mode, p=_pad: F.embedding_bag(
                t.tensor([[1, 4, 4], [4, 4, 4]], device=w.device), w, mode=m, padding_idx=p)),
            (f"last_offset-{_mode}-{_pad}", lambda t, F, w, m=_mode, p=_pad: F.embedding_bag(
                t.tensor([1, 2, 4, 5, 4, 3], device=w.device), w, t.tensor([0, 2, 6], device=w.device), mode=m,
                padding_idx=p, include_last_offset=True)),
        ]


@pytest.mark.parametrize("case", BAGS, ids=[c[0] for c in BAGS])
def test_embedding_bag(device, torch_ref, case):
    check(device, torch_ref, case[1], R(10, 3))


def test_embedding_bag_per_sample_weights(device, torch_ref):
    check(device, torch_ref, lambda t, F, w, s: F.embedding_bag(
        t.tensor([1, 2, 4, 5, 4], device=w.device), w, t.tensor([0, 2], device=w.device), mode="sum",
        per_sample_weights=s), R(10, 3), R(5))


def test_embedding_bag_module():
    torch = need_module("torch")
    ours, theirs = nn.EmbeddingBag(10, 3, mode="max", padding_idx=2), torch.nn.EmbeddingBag(10, 3, mode="max",
                                                                                           padding_idx=2)
    assert repr(ours) == repr(theirs) and list(ours.state_dict()) == list(theirs.state_dict())
    assert ours.weight.detach().numpy()[2].tolist() == [0.0, 0.0, 0.0]
    w = R(5, 2)
    bag = nn.EmbeddingBag.from_pretrained(webgrad.tensor(w), mode="sum")
    got = bag(webgrad.tensor([0, 1, 4]), webgrad.tensor([0, 1])).detach().numpy()
    np.testing.assert_allclose(got, [w[0], w[1] + w[4]], rtol=1e-6)


# -- dropout ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("fn,shape,mask_shape", [(WF.dropout1d, (4, 6, 50), (4, 6, 1)),
                                                 (WF.dropout1d, (6, 50), (6, 1)),
                                                 (WF.dropout3d, (3, 4, 5, 5, 2), (3, 4, 1, 1, 1)),
                                                 (WF.dropout3d, (4, 5, 5, 2), (4, 1, 1, 1)),
                                                 (WF.dropout2d, (5, 6, 40), (5, 6, 1))])
def test_feature_dropouts_drop_whole_channels(device, fn, shape, mask_shape):
    webgrad.manual_seed(1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = fn(webgrad.ones(*shape, device=device), 0.5).cpu().numpy()
    assert set(np.unique(out)) <= {0.0, 2.0}
    lead = len(mask_shape) - mask_shape.count(1) if mask_shape[-1] == 1 else len(shape)
    per_channel = out.reshape(*shape[:lead], -1)
    assert (per_channel.min(-1) == per_channel.max(-1)).all()


def test_dropout2d_warns_for_other_ranks_and_proceeds():
    with pytest.warns(UserWarning, match="dropout2d: Received a 2-D input"):
        out = nn.Dropout2d(0.5)(webgrad.ones(4, 5))
    assert tuple(out.shape) == (4, 5)
    with pytest.raises(RuntimeError, match="dropout1d: Expected 2D or 3D input"):
        WF.dropout1d(webgrad.ones(2, 3, 4, 5))


@pytest.mark.parametrize("fn", [WF.alpha_dropout, WF.feature_alpha_dropout])
def test_alpha_dropouts_keep_selu_statistics(fn):
    webgrad.manual_seed(3)
    x = webgrad.randn(200, 500, dtype=webgrad.float64)
    out = fn(x, 0.3, training=True).numpy()
    assert abs(out.mean()) < 0.05 and abs(out.std() - 1.0) < 0.05
    assert np.array_equal(fn(x, 0.3).numpy(), x.numpy())  # training=False by default, as torch
    kept = fn(webgrad.zeros(2, 3, 4, dtype=webgrad.float64), 1.0, training=True).numpy()
    assert np.array_equal(kept, np.zeros((2, 3, 4)))


def test_dropout_modules_state_and_repr():
    torch = need_module("torch")
    for name in ("Dropout3d", "AlphaDropout", "FeatureAlphaDropout"):
        assert repr(getattr(nn, name)(0.2)) == repr(getattr(torch.nn, name)(0.2))
        layer = getattr(nn, name)(0.2).eval()
        x = webgrad.randn(2, 3, 4, 4, 4)
        assert np.array_equal(layer(x).numpy(), x.numpy())


# -- gradients by finite differences (float64, cpu) --------------------------------------------------------
GRADCHECKS = [
    ("group_norm", lambda x, w: WF.group_norm(x, 2, w), (2, 4, 3), (4,)),
    ("rms_norm", lambda x, w: WF.rms_norm(x, (3,), w), (2, 4, 3), (3,)),
    ("local_response_norm", lambda x: WF.local_response_norm(x, 3, alpha=0.5), (2, 4, 3)),
    ("cosine_similarity", lambda a, b: WF.cosine_similarity(a, b), (3, 4), (3, 4)),
    ("cdist", lambda a, b: webgrad.cdist(a, b, p=3), (3, 4), (2, 4)),
    ("pdist", lambda x: WF.pdist(x), (4, 3)),
    ("pad_reflect", lambda x: WF.pad(x, (2, 1, 1, 2), mode="reflect"), (1, 3, 4)),
    ("pad_circular", lambda x: WF.pad(x, (2, 1), mode="circular"), (2, 3)),
    ("embedding_bag_mean", lambda w: WF.embedding_bag(webgrad.tensor([1, 2, 1, 0]), w, webgrad.tensor([0, 3])),
     (3, 2)),
    ("ctc", lambda x: WF.ctc_loss(x.log_softmax(2), webgrad.tensor([[1, 2], [1, 1]]), [5, 4], [2, 2]), (5, 2, 3)),
    ("gaussian_nll", lambda x, v: WF.gaussian_nll_loss(x, webgrad.zeros(3, 2, dtype=webgrad.float64), v.abs() + 0.1),
     (3, 2), (3, 2)),
    ("glu_prelu", lambda x, w: WF.prelu(WF.glu(x, 1), w), (2, 4, 3), (2,)),
    ("bilinear", lambda a, b, w: WF.bilinear(a, b, w), (2, 3), (2, 4), (2, 3, 4)),
]


@pytest.mark.parametrize("case", GRADCHECKS, ids=[c[0] for c in GRADCHECKS])
def test_gradients_by_finite_differences(case):
    _, fn, *shapes = case
    gradcheck(fn, [webgrad.tensor(R(*s), dtype=webgrad.float64, requires_grad=True) for s in shapes])


# -- nn.init ---------------------------------------------------------------------------------------------
def test_calculate_gain_matches_torch():
    torch = need_module("torch")
    for name in ("linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d",
                 "sigmoid", "tanh", "relu", "leaky_relu", "selu"):
        assert nn.init.calculate_gain(name) == torch.nn.init.calculate_gain(name)
    assert nn.init.calculate_gain("leaky_relu", 0.2) == torch.nn.init.calculate_gain("leaky_relu", 0.2)
    with pytest.raises(ValueError, match="Unsupported nonlinearity"):
        nn.init.calculate_gain("swish")


def test_dirac_matches_torch():
    torch = need_module("torch")
    for shape, groups in [((6, 4, 3, 3), 2), ((3, 5, 4), 1), ((2, 2, 3, 3, 3), 1)]:
        want = torch.nn.init.dirac_(torch.empty(shape), groups).numpy()
        assert np.array_equal(nn.init.dirac_(webgrad.empty(*shape), groups).numpy(), want)


@pytest.mark.parametrize("shape", [(3, 5), (5, 3), (6, 2, 2)])
def test_orthogonal_is_orthogonal(shape):
    q = nn.init.orthogonal_(webgrad.empty(*shape, dtype=webgrad.float64), gain=2.0).numpy().reshape(shape[0], -1)
    small = min(q.shape)
    gram = q @ q.T if q.shape[0] == small else q.T @ q
    np.testing.assert_allclose(gram, 4 * np.eye(small), atol=1e-12)


def test_sparse_zeroes_the_same_count_in_every_column():
    w = nn.init.sparse_(webgrad.empty(10, 4), sparsity=0.25, std=0.5).numpy()
    assert ((w == 0).sum(0) == 3).all()
    assert 0.2 < w[w != 0].std() < 1.0


def test_trunc_normal_stays_in_bounds_with_torch_moments():
    torch = need_module("torch")
    webgrad.manual_seed(0)
    got = nn.init.trunc_normal_(webgrad.empty(200000), mean=1.0, std=2.0, a=-1.0, b=2.0).numpy()
    want = torch.nn.init.trunc_normal_(torch.empty(200000), mean=1.0, std=2.0, a=-1.0, b=2.0).numpy()
    assert got.min() >= -1.0 and got.max() <= 2.0
    assert abs(got.mean() - want.mean()) < 0.02 and abs(got.std() - want.std()) < 0.02


@pytest.mark.parametrize("name,args", [("uniform_", (-1.0, 1.0)), ("normal_", (0.0, 2.0)), ("xavier_uniform_", ()),
                                       ("xavier_normal_", ()), ("kaiming_uniform_", (0.1, "fan_out", "relu")),
                                       ("kaiming_normal_", (0, "fan_in", "leaky_relu")),
                                       ("trunc_normal_", (0.0, 1.0)), ("orthogonal_", ()), ("sparse_", (0.5,))])
def test_init_generator_makes_draws_reproducible(name, args):
    def draw():
        gen = webgrad.Generator().manual_seed(7)
        return getattr(nn.init, name)(webgrad.empty(6, 5), *args, generator=gen).numpy()
    first = draw()
    webgrad.manual_seed(123)  # the global stream does not matter
    assert np.array_equal(first, draw())


def test_kaiming_scale_matches_torch_formula():
    w = nn.init.kaiming_normal_(webgrad.empty(400, 300), mode="fan_out", nonlinearity="relu").numpy()
    assert abs(w.std() - math.sqrt(2.0 / 400)) < 0.002
    with pytest.warns(UserWarning, match="zero-element"):
        nn.init.kaiming_uniform_(webgrad.empty(0, 3))


def test_lazy_linear_infers_in_features_and_becomes_linear():
    torch = need_module("torch")
    ours, theirs = nn.LazyLinear(4), torch.nn.LazyLinear(4)
    assert repr(ours) == repr(theirs) and list(ours.state_dict()) == list(theirs.state_dict())
    out = ours(webgrad.ones(2, 3))
    assert tuple(out.shape) == (2, 4) and type(ours) is nn.Linear and ours.in_features == 3
    assert [tuple(p.shape) for p in ours.parameters()] == [(4, 3), (4,)]
    bound = 1 / math.sqrt(3)
    assert np.abs(ours.bias.detach().numpy()).max() <= bound


def test_bilinear_matches_torch(device, torch_ref):
    check(device, torch_ref, lambda t, F, a, b, w, c: F.bilinear(a, b, w, c), R(2, 5, 3), R(2, 5, 4), R(6, 3, 4), R(6))


def test_bilinear_module_matches_torch_module():
    torch = need_module("torch")
    ours, theirs = nn.Bilinear(3, 4, 5), torch.nn.Bilinear(3, 4, 5)
    assert repr(ours) == repr(theirs) and list(ours.state_dict()) == list(theirs.state_dict())
    assert np.abs(ours.weight.detach().numpy()).max() <= 1 / math.sqrt(3)
