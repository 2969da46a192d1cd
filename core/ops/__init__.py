"""Every op in function form. Tensor methods and ``webgrad.xxx`` both land here."""
from ._helpers import normalize_dim  # noqa: F401
from .elementwise import (  # noqa: F401
    abs, add, cast, ceil, clamp, cos, div, eq, erf, exp, floor, floor_divide, ge, gt, le,
    log, log1p, logical_and, logical_not, logical_or, logical_xor, lt, masked_fill, maximum,
    minimum, mul, ne, neg, pow, promote, reciprocal, relu, remainder, round, rsqrt, sigmoid,
    sign, sin, sqrt, sub, tanh, true_divide, where,
)
from .elementwise import isfinite, isinf, isnan, nan_to_num  # noqa: F401
from .elementwise import (  # noqa: F401
    acos, acosh, asin, asinh, atan, atan2, atanh, copysign, cosh, erfc, erfinv, expm1, fmod, sinh, tan, trunc,
)
from .elementwise import (  # noqa: F401
    bitwise_and, bitwise_left_shift, bitwise_not, bitwise_or, bitwise_right_shift, bitwise_xor,
)
from .pointwise import (  # noqa: F401
    addcdiv, addcmul, allclose, clamp_max, clamp_min, deg2rad, digamma, entr, equal, exp2, float_power, frac,
    hypot, isclose, isneginf, isposinf, isreal, lerp, lgamma, log2, log10, logaddexp, logaddexp2, logit,
    mvlgamma, polygamma, positive, rad2deg, sinc, square, xlog1py, xlogy, zeta,
)
from .pointwise import i0, i0e, i1, i1e  # noqa: F401
from .reduce import (  # noqa: F401
    all, amax, amin, any, argmax, argmin, cross_entropy, log_softmax, logsumexp, max, mean, min, norm,
    prod, softmax, std, sum, var,
)
from .movement import (  # noqa: F401
    cat, chunk, clone, concatenate, contiguous, expand, flatten, flip, movedim, narrow, pad,
    permute, repeat, reshape, split, squeeze, stack, transpose, unbind, unflatten, unslice,
    unsqueeze, view,
)
from .linalg import bmm, linear, matmul, mm  # noqa: F401
from .normalization import batch_norm, batch_norm_stats, layer_norm, layer_norm_core  # noqa: F401
from .conv import conv2d_core  # noqa: F401
from .pooling import max_pool2d_backward, max_pool2d_select  # noqa: F401
from .indexing import (  # noqa: F401
    copy_, gather, getitem, index_add, index_put, index_select, nonzero, scatter_add, setitem, take,
    update_,
)
from .device import to_device  # noqa: F401
from ..creation import rand_like, randn_like  # noqa: F401
from .registry import OPS, OpError, apply, apply_inplace, bind, defop  # noqa: F401
from .scan import cumprod, cumsum  # noqa: F401,E402
from .sorting import argsort, bucketize, searchsorted, sort, topk, unique  # noqa: F401,E402
from .linalg import ger, outer, tril, triu  # noqa: F401,E402
from .einsum import einsum  # noqa: F401,E402
from .sampling import multinomial  # noqa: F401,E402
from .index_ops import (  # noqa: F401,E402  (torch's take and index_add: index_ops.take/.index_add)
    diagonal_scatter, index_copy, index_fill, masked_scatter, masked_select, scatter, scatter_reduce, select,
    select_scatter, slice_scatter, take_along_dim,
)
from .shape_ops import (  # noqa: F401,E402  (Tensor.unfold is shape_ops.unfold)
    atleast_1d, atleast_2d, atleast_3d, broadcast_shapes, broadcast_tensors, broadcast_to, column_stack, diag,
    diag_embed, diagflat, diagonal, dstack, fliplr, flipud, hstack, meshgrid, moveaxis, ravel, roll, rot90,
    row_stack, split_with_sizes, swapaxes, swapdims, tensor_split, tile, trace, tril_indices, triu_indices,
    vstack,
)
from .shape_ops import repeat_interleave  # noqa: F401,E402
from .statistics import (  # noqa: F401,E402
    aminmax, bincount, count_nonzero, cummax, cummin, histc, kthvalue, logcumsumexp, median, mode, nanmean,
    nanmedian, nanquantile, nansum, quantile, std_mean, var_mean,
)
from .index_ops import put  # noqa: F401,E402
from .shape_ops import diff  # noqa: F401,E402
from .random_ops import bernoulli, normal, poisson  # noqa: F401,E402  (the in-place draws: random_ops.*_)
from .products import (  # noqa: F401,E402
    addbmm, addmm, addmv, addr, baddbmm, chain_matmul, cross, dot, inner, kron, mv, tensordot, vdot,
)
