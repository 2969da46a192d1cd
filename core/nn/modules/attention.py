"""MultiheadAttention, with PyTorch's parameter names, masks and defaults."""
from __future__ import annotations

import math

from ... import creation, dtypes, ops
from ...ops._helpers import describe
from ...ops.registry import OpError
from .. import functional as F
from .. import init
from ..parameter import Parameter
from .linear import NonDynamicallyQuantizableLinear
from .module import Module


def _additive_mask(mask, dtype):
    """A bool mask (True = masked out) as 0 / -inf; a float mask as it is."""
    if mask.dtype is dtypes.bool_:
        return ops.where(mask, float("-inf"), 0.0).type(dtype)
    if not mask.dtype.is_floating_point:
        raise OpError(f"MultiheadAttention: masks must be bool or floating point, got {describe(mask)}")
    return mask.type(dtype)


class MultiheadAttention(Module):
    """Attention over ``num_heads`` heads of size embed_dim / num_heads, like ``torch.nn.MultiheadAttention``.

    Parameters ``in_proj_weight`` (3E, E), ``in_proj_bias`` (3E) and ``out_proj``
    (or ``q/k/v_proj_weight`` when kdim/vdim differ from embed_dim) carry
    PyTorch's names, so state dicts load across. Masks: True means "do not attend".

    Shape: query (L, N, E) or (N, L, E) with batch_first; returns (output, weights)
    with weights (N, L, S) averaged over heads, or None when need_weights=False.

    Example:
        >>> mha = nn.MultiheadAttention(16, 4, batch_first=True)
        >>> x = webgrad.randn(2, 5, 16)
        >>> out, weights = mha(x, x, x)   # (2, 5, 16), (2, 5, 5)
    """

    def __init__(self, embed_dim, num_heads, dropout=0.0, bias=True, add_bias_kv=False, add_zero_attn=False,
                 kdim=None, vdim=None, batch_first=False, device=None, dtype=None):
        super().__init__()
        if embed_dim <= 0 or num_heads <= 0:
            raise ValueError(f"MultiheadAttention: embed_dim and num_heads must be greater than 0, got "
                             f"embed_dim={embed_dim} and num_heads={num_heads}")
        if embed_dim % num_heads:
            raise ValueError(f"MultiheadAttention: embed_dim ({embed_dim}) must be divisible by num_heads "
                             f"({num_heads})")
        if add_bias_kv or add_zero_attn:
            raise NotImplementedError("MultiheadAttention: add_bias_kv and add_zero_attn are not supported")
        self.embed_dim, self.num_heads, self.dropout = embed_dim, num_heads, dropout
        self.kdim = kdim if kdim is not None else embed_dim
        self.vdim = vdim if vdim is not None else embed_dim
        self._qkv_same_embed_dim = self.kdim == embed_dim and self.vdim == embed_dim
        self.head_dim = embed_dim // num_heads
        self.batch_first = batch_first

        def empty(*shape):
            return Parameter(creation.empty(*shape, dtype=dtype, device=device))
        if self._qkv_same_embed_dim:
            self.in_proj_weight = empty(3 * embed_dim, embed_dim)
            self.register_parameter("q_proj_weight", None)
            self.register_parameter("k_proj_weight", None)
            self.register_parameter("v_proj_weight", None)
        else:
            self.q_proj_weight = empty(embed_dim, embed_dim)
            self.k_proj_weight = empty(embed_dim, self.kdim)
            self.v_proj_weight = empty(embed_dim, self.vdim)
            self.register_parameter("in_proj_weight", None)
        if bias:
            self.in_proj_bias = empty(3 * embed_dim)
        else:
            self.register_parameter("in_proj_bias", None)
        self.out_proj = NonDynamicallyQuantizableLinear(embed_dim, embed_dim, bias=bias, device=device, dtype=dtype)
        self._reset_parameters()

    def _reset_parameters(self) -> None:
        if self._qkv_same_embed_dim:
            init.xavier_uniform_(self.in_proj_weight)
        else:
            init.xavier_uniform_(self.q_proj_weight)
            init.xavier_uniform_(self.k_proj_weight)
            init.xavier_uniform_(self.v_proj_weight)
        if self.in_proj_bias is not None:
            init.constant_(self.in_proj_bias, 0.0)
            init.constant_(self.out_proj.bias, 0.0)

    def _projections(self, query, key, value, query_is_key, key_is_value):
        """q, k, v; as torch, one product with the packed weight when query, key and value are one
        tensor (self-attention: x is cast and saved once, not three times), two when key is value."""
        bias = self.in_proj_bias
        if self._qkv_same_embed_dim and key_is_value:
            if query_is_key:
                return F.linear(query, self.in_proj_weight, bias).chunk(3, -1)
            e = self.embed_dim
            wq, wkv = self.in_proj_weight.split([e, 2 * e])
            bq, bkv = bias.split([e, 2 * e]) if bias is not None else (None, None)
            return (F.linear(query, wq, bq), *F.linear(key, wkv, bkv).chunk(2, -1))
        if self._qkv_same_embed_dim:
            wq, wk, wv = self.in_proj_weight.chunk(3)
        else:
            wq, wk, wv = self.q_proj_weight, self.k_proj_weight, self.v_proj_weight
        bq, bk, bv = bias.chunk(3) if bias is not None else (None, None, None)
        return F.linear(query, wq, bq), F.linear(key, wk, bk), F.linear(value, wv, bv)

    def forward(self, query, key, value, key_padding_mask=None, need_weights=True, attn_mask=None,
                average_attn_weights=True, is_causal=False):
        batched = query.ndim == 3
        query_is_key, key_is_value = query is key, key is value  # before the transposes below
        if query.ndim not in (2, 3) or key.ndim != query.ndim or value.ndim != query.ndim:
            raise OpError(f"MultiheadAttention: query, key and value must all be 2-D (unbatched) or 3-D, "
                          f"got {describe(query, key, value)}")
        if batched and self.batch_first:
            query, key, value = query.transpose(0, 1), key.transpose(0, 1), value.transpose(0, 1)
        if not batched:
            query, key, value = query.unsqueeze(1), key.unsqueeze(1), value.unsqueeze(1)
            if key_padding_mask is not None:
                key_padding_mask = key_padding_mask.unsqueeze(0)
        length, batch, embed = query.shape
        source = key.shape[0]
        heads, head_dim = self.num_heads, self.head_dim
        if embed != self.embed_dim or key.shape[:2] != value.shape[:2] or key.shape[1] != batch:
            raise OpError(f"MultiheadAttention: expected query (L, N, {self.embed_dim}), key (S, N, {self.kdim}) "
                          f"and value (S, N, {self.vdim}) (sequence first), got {describe(query, key, value)}")

        q, k, v = self._projections(query, key, value, query_is_key, key_is_value)  # (L or S, N, E)
        q = q.reshape(length, batch, heads, head_dim).permute(1, 2, 0, 3)  # (N, H, L, D)
        k = k.reshape(source, batch, heads, head_dim).permute(1, 2, 0, 3)
        v = v.reshape(source, batch, heads, head_dim).permute(1, 2, 0, 3)

        mask = None
        if attn_mask is not None:
            mask = _additive_mask(attn_mask, q.dtype)
            if mask.ndim == 2 and tuple(mask.shape) == (length, source):
                mask = mask.reshape(1, 1, length, source)
            elif mask.ndim == 3 and tuple(mask.shape) == (batch * heads, length, source):
                mask = mask.reshape(batch, heads, length, source)
            else:
                raise OpError(f"MultiheadAttention: attn_mask of shape {tuple(attn_mask.shape)} should be "
                              f"({length}, {source}) or ({batch * heads}, {length}, {source})")
        elif is_causal:
            mask = _additive_mask(~F._causal_mask(length, source, q.device), q.dtype)
        if key_padding_mask is not None:
            if tuple(key_padding_mask.shape) != (batch, source):
                raise OpError(f"MultiheadAttention: key_padding_mask of shape {tuple(key_padding_mask.shape)} "
                              f"should be ({batch}, {source})")
            padding = _additive_mask(key_padding_mask, q.dtype).reshape(batch, 1, 1, source)
            mask = padding if mask is None else mask + padding

        dropout = self.dropout if self.training else 0.0
        if need_weights:
            scores = ops.matmul(q * math.sqrt(1.0 / head_dim), k.mT)  # (N, H, L, S)
            if mask is not None:
                scores = scores + mask
            weights = ops.softmax(scores, -1)
            if dropout > 0.0:
                weights = F.dropout(weights, dropout)
            out = ops.matmul(weights, v)
        else:  # as torch: one scaled_dot_product_attention, under autocast all in its dtype
            out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout)
        out = out.permute(2, 0, 1, 3).reshape(length, batch, embed)
        out = self.out_proj(out)
        if batched and self.batch_first:
            out = out.transpose(0, 1)
        if not batched:
            out = out.squeeze(1)
        if not need_weights:
            return out, None
        if average_attn_weights:
            weights = weights.mean(1)
        return out, (weights if batched else weights.squeeze(0))
