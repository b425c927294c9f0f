"""CNTK's AttentionModel (Bahdanau's additive attention, C.layers.AttentionModel) over loom's
layers::AdditiveAttention and layers::attention_memory."""

from __future__ import annotations

from typing import Any, List

from . import _loom
from ._graph import _variable

Variable = _loom.Variable


class AttentionModel:
    """CNTK's AttentionModel(attention_dim): model(h_enc, h_dec) is the context, the sum of the
    encoder's steps h_enc (a sequence) weighted by softmax_j(v . tanh(h_enc_j W_enc + h_dec W_dec)).

    h_dec is the query: a batch value (one per item) or a sequence on another axis, the decoder's
    state inside its own recurrence included (the step function of a Recurrence may call it on its
    delayed state). The encoder's steps are unpacked once per item, outside any loop, and each step
    reads them in place; padding gets no weight. W_enc [dim of h_enc, attention_dim] and W_dec are
    made at the first call (glorot_uniform, no bias, as CNTK's), v at once; the parameters are shared
    by later calls.

    loom differs from CNTK: the whole encoder sequence is attended (attention_span and
    attention_axis are not supported), and there is no self-stabilization
    (enable_self_stabilization is ignored).
    """

    def __init__(self, attention_dim: int, attention_span: Any = None, attention_axis: Any = None,
                 init: Any = None, go_backwards: bool = False, enable_self_stabilization: bool = True,
                 name: str = "AttentionModel") -> None:
        for what, given in (("attention_span", attention_span), ("attention_axis", attention_axis),
                            ("init", init)):
            if given is not None:
                raise _loom.UserError(f"AttentionModel: loom's has no {what} (it attends over the whole "
                                      f"encoder sequence, glorot_uniform weights); got {given!r}")
        if go_backwards:
            raise _loom.UserError("AttentionModel: loom's has no go_backwards")
        if int(attention_dim) < 1:
            raise _loom.UserError(f"AttentionModel: attention_dim is at least 1; got {attention_dim!r}")
        self._attention = _loom.layers.AdditiveAttention(int(attention_dim), name)
        self._name = name

    def __call__(self, h_enc: Any, h_dec: Any) -> Variable:
        """The context of h_dec's attention over h_enc's steps (the shape of one step of h_enc), on
        h_dec's dynamic axes."""
        return self.attention(h_enc, h_dec)[0]

    def attention(self, h_enc: Any, h_dec: Any) -> tuple:
        """(context, weights): the weights, [T_max] on h_dec's axes, are 0 on each item's padding.
        loom's."""
        return _loom.layers._additive_over_memory(self._attention, _variable(h_enc), _variable(h_dec))

    @property
    def parameters(self) -> List[_loom.Parameter]:
        """W_enc, W_dec (once called) and v."""
        return list(self._attention.parameters)

    @property
    def name(self) -> str:
        """The name given (its parameters' prefix)."""
        return self._name


__all__ = ["AttentionModel"]
