"""Every op in function form. Tensor methods and ``webgrad.xxx`` both land here."""
from ._helpers import normalize_dim  # noqa: F401
from .elementwise import (  # noqa: F401
    abs, add, cast, ceil, clamp, cos, div, eq, erf, exp, floor, floor_divide, ge, gt, le,
    log, log1p, logical_and, logical_not, logical_or, logical_xor, lt, masked_fill, maximum,
    minimum, mul, ne, neg, pow, promote, reciprocal, relu, remainder, round, rsqrt, sigmoid,
    sign, sin, sqrt, sub, tanh, true_divide, where,
)
from .elementwise import isfinite, isinf, isnan, nan_to_num  # noqa: F401
from .reduce import (  # noqa: F401
    all, amax, amin, any, argmax, argmin, cross_entropy, log_softmax, logsumexp, max, mean, min, norm,
    prod, softmax, std, sum, var,
)
from .movement import (  # noqa: F401
    cat, chunk, clone, concatenate, contiguous, expand, flatten, flip, movedim, narrow, pad,
    permute, repeat, reshape, split, squeeze, stack, transpose, unbind, unflatten, unslice,
    unsqueeze, view,
)
from .linalg import bmm, matmul, mm  # noqa: F401
from .normalization import layer_norm_core  # noqa: F401
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
from .products import (  # noqa: F401,E402
    addbmm, addmm, addmv, addr, baddbmm, chain_matmul, cross, dot, inner, kron, mv, tensordot, vdot,
)
