"""The attention layer inside a pre-LayerNorm transformer block (lesson 07), in two residual steps::

    residual = x + dropout(attention(norm_1(x)))             # (B, N, d_model)
    out = residual + dropout(mlp(norm_2(residual)))          # (B, N, d_model)
    mlp(h) = linear_2(dropout(activation(linear_1(h))))      # d_model -> dim_feedforward -> d_model

This is PyTorch's ``nn.TransformerEncoderLayer(..., norm_first=True, batch_first=True)``, weights copied
either way by :meth:`TransformerBlock.from_torch` and :meth:`TransformerBlock.to_torch`.
"""

from __future__ import annotations

from typing import Callable

from torch import Tensor, nn
from torch.nn import functional as F

from .arguments import check_positive_int, check_probability, check_tokens
from .multihead import MultiHeadAttention
from .observers import Traceable

__all__ = ["TransformerBlock", "ACTIVATIONS"]

ACTIVATIONS: dict[str, Callable[[Tensor], Tensor]] = {"relu": F.relu, "gelu": F.gelu}


class TransformerBlock(Traceable):
    """A pre-LayerNorm transformer block built from :class:`MultiHeadAttention`, two ``LayerNorm`` and an MLP.

    ``x (B, N, d_model) -> (B, N, d_model)``. Arguments mirror ``nn.TransformerEncoderLayer`` (its ``nhead``
    is our ``num_heads``): ``dim_feedforward`` is the MLP's hidden width, ``dropout`` is used on the attention
    weights, after the attention, inside the MLP and after it (training mode only), ``activation`` is
    ``"relu"`` or ``"gelu"``, ``layer_norm_eps`` the LayerNorms' epsilon.

    ``forward(x, mask=None, return_intermediates=False)``; ``mask`` (``True`` = may attend) is shaped
    ``(N, N)``, ``(B, N, N)`` or ``(B, H, N, N)``.
    """

    AXES = {**dict.fromkeys(("x", "normed_1", "attended", "residual", "normed_2"), "batch tokens d_model"),
            "hidden": "batch tokens dim_feedforward", "mlp": "batch tokens d_model", "out": "batch tokens d_model"}

    def __init__(
        self,
        d_model: int,
        num_heads: int,
        dim_feedforward: int = 2048,
        dropout: float = 0.1,
        activation: str = "relu",
        layer_norm_eps: float = 1e-5,
        bias: bool = True,
    ) -> None:
        super().__init__()
        self.d_model = check_positive_int("d_model", d_model)
        self.dim_feedforward = check_positive_int("dim_feedforward", dim_feedforward)
        self.dropout_p = check_probability("dropout", dropout)
        if activation not in ACTIVATIONS:
            raise ValueError(f"activation must be one of {sorted(ACTIVATIONS)}, got {activation!r}")
        self.activation = activation
        self.attention = MultiHeadAttention(d_model, num_heads, bias=bias, dropout=dropout)  # checks num_heads
        self.num_heads, self.head_dim = self.attention.num_heads, self.attention.head_dim
        self.norm_1 = nn.LayerNorm(d_model, eps=layer_norm_eps, bias=bias)
        self.norm_2 = nn.LayerNorm(d_model, eps=layer_norm_eps, bias=bias)
        self.linear_1 = nn.Linear(d_model, dim_feedforward, bias=bias)
        self.linear_2 = nn.Linear(dim_feedforward, d_model, bias=bias)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: Tensor, mask: Tensor | None = None, *, return_intermediates: bool = False):
        """``x (B, N, d_model) -> out (B, N, d_model)``; with ``return_intermediates`` also a dict (see ``AXES``)."""
        x = check_tokens("x", x, self.d_model, "d_model")
        normed_1 = self.norm_1(x)  # (B, N, d_model)
        attended = self.attention(normed_1, mask=mask)  # (B, N, d_model)
        residual = x + self.dropout(attended)  # (B, N, d_model): the first skip connection
        normed_2 = self.norm_2(residual)  # (B, N, d_model)
        hidden = ACTIVATIONS[self.activation](self.linear_1(normed_2))  # (B, N, dim_feedforward)
        mlp = self.linear_2(self.dropout(hidden))  # (B, N, d_model)
        out = residual + self.dropout(mlp)  # (B, N, d_model): the second skip connection
        inter = dict(x=x, normed_1=normed_1, attended=attended, residual=residual, normed_2=normed_2,
                     hidden=hidden, mlp=mlp, out=out)
        return self._report(inter, return_intermediates)

    @classmethod
    def from_torch(cls, module: nn.TransformerEncoderLayer) -> "TransformerBlock":
        """Copy a ``nn.TransformerEncoderLayer(norm_first=True, batch_first=True)`` into a block with equal outputs."""
        if not isinstance(module, nn.TransformerEncoderLayer):
            raise TypeError(f"module must be a torch.nn.TransformerEncoderLayer, got {type(module).__name__}")
        if not module.norm_first:
            raise ValueError("module must be built with norm_first=True (a pre-LayerNorm block); got norm_first=False")
        if not module.self_attn.batch_first:
            raise ValueError("module must be built with batch_first=True (inputs (B, N, d_model)); got batch_first=False")
        names = {F.relu: "relu", F.gelu: "gelu"}
        activation = module.activation if isinstance(module.activation, str) else names.get(module.activation)
        if activation not in ACTIVATIONS:
            raise ValueError(f"module.activation must be relu or gelu, got {module.activation!r}")
        attention = MultiHeadAttention.from_torch(module.self_attn)
        has_bias = module.linear1.bias is not None
        new = cls(attention.d_model, attention.num_heads, module.linear1.out_features, module.dropout.p,
                  activation, module.norm1.eps, bias=has_bias)
        new = new.to(module.linear1.weight.device, module.linear1.weight.dtype)
        new.attention = attention
        for ours, theirs in ((new.norm_1, module.norm1), (new.norm_2, module.norm2),
                             (new.linear_1, module.linear1), (new.linear_2, module.linear2)):
            ours.load_state_dict(theirs.state_dict())
        new.train(module.training)  # an eval-mode copy must not apply dropout
        return new

    def to_torch(self) -> nn.TransformerEncoderLayer:
        """A ``nn.TransformerEncoderLayer(norm_first=True, batch_first=True)`` with this block's weights."""
        has_bias = self.linear_1.bias is not None
        ref = nn.TransformerEncoderLayer(self.d_model, self.num_heads, self.dim_feedforward, self.dropout_p,
                                         self.activation, self.norm_1.eps, batch_first=True, norm_first=True,
                                         bias=has_bias)
        ref = ref.to(self.linear_1.weight.device, self.linear_1.weight.dtype)
        ref.self_attn.load_state_dict(self.attention.to_torch().state_dict())
        for ours, theirs in ((self.norm_1, ref.norm1), (self.norm_2, ref.norm2),
                             (self.linear_1, ref.linear1), (self.linear_2, ref.linear2)):
            theirs.load_state_dict(ours.state_dict())
        ref.train(self.training)
        return ref

    def extra_repr(self) -> str:
        return (f"d_model={self.d_model}, num_heads={self.num_heads}, head_dim={self.head_dim}, "
                f"dim_feedforward={self.dim_feedforward}, dropout={self.dropout_p}, activation={self.activation!r}")
