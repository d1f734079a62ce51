"""Frame stacking with subsampling (low frame rate features for streaming RNN-T).

Joshi et al., "Multiple Softmax Architecture for Streaming Multilingual End-to-End ASR Systems"
(Interspeech 2021), section 5: 80-dim log-mel every 10 ms, 8 frames stacked to 640 dims with a
30 ms shift.  Output frame ``t`` is the concatenation of input frames ``stride*t .. stride*t +
num_stack - 1`` (oldest first), so it needs *no* input frame later than ``stride*t + num_stack - 1``
(``3t + 7`` with the defaults): the only look-ahead a streaming encoder sees is the stack itself.

Number of output frames for ``T`` input frames (no padding, as in the streaming case)::

    T' = floor((T - num_stack) / stride) + 1   if T >= num_stack else 0

:func:`stack_frames` does a whole (batch of) utterance(s); :class:`FrameStacker` does the same
incrementally on chunks of any size and gives bit-identical output (tested).
"""
from __future__ import annotations

import torch

__all__ = ["num_stacked_frames", "stack_frames", "FrameStacker"]


def _check(num_stack: int, stride: int) -> None:
    if int(num_stack) < 1 or int(stride) < 1:
        raise ValueError(f"num_stack and stride must be >= 1, got num_stack={num_stack}, stride={stride}")


def num_stacked_frames(num_frames, num_stack: int = 8, stride: int = 3):
    """Output frame count ``T'`` for ``num_frames`` input frames (int or integer tensor).

    ``T' = (T - num_stack) // stride + 1`` for ``T >= num_stack``, else 0.
    """
    _check(num_stack, stride)
    if isinstance(num_frames, torch.Tensor):
        return torch.div(num_frames - num_stack, stride, rounding_mode="floor").add(1).clamp(min=0)
    return max(0, (int(num_frames) - num_stack) // stride + 1)


def stack_frames(
    feats: torch.Tensor,
    lengths: torch.Tensor | None = None,
    num_stack: int = 8,
    stride: int = 3,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Stack ``num_stack`` consecutive frames every ``stride`` frames.

    Args:
        feats: ``(T, D)`` or ``(B, T, D)`` features (e.g. 80-dim log-mel at 10 ms).
        lengths: ``(B,)`` valid input frame counts for a padded batch (``None``: all ``T``).
        num_stack: frames per output frame (paper: 8).
        stride: input frames between consecutive output frames (paper: 3, i.e. 30 ms).

    Returns:
        ``(stacked, out_lengths)``: stacked is ``(T', num_stack*D)`` or ``(B, T', num_stack*D)``;
        ``stacked[..., t, k*D:(k+1)*D] == feats[..., stride*t + k, :]``.  ``out_lengths`` is
        ``(B,)`` (:func:`num_stacked_frames` of ``lengths``), or ``None`` if ``lengths`` was None.
        Output frames of a padded utterance past its ``out_lengths`` are padding.

    Raises:
        ValueError: bad ``num_stack``/``stride``, or ``feats`` not 2-D/3-D.
    """
    _check(num_stack, stride)
    if feats.dim() not in (2, 3):
        raise ValueError(f"feats must be (T, D) or (B, T, D), got shape {tuple(feats.shape)}")
    squeeze = feats.dim() == 2
    x = feats.unsqueeze(0) if squeeze else feats
    B, T, D = x.shape
    n_out = num_stacked_frames(T, num_stack, stride)
    if n_out == 0:
        out = x.new_zeros(B, 0, num_stack * D)
    else:
        # unfold: (B, T', D, num_stack) -> (B, T', num_stack, D) -> (B, T', num_stack*D)
        out = x.unfold(1, num_stack, stride).transpose(2, 3).reshape(B, n_out, num_stack * D)
    out_lengths = None if lengths is None else num_stacked_frames(lengths, num_stack, stride)
    return (out[0] if squeeze else out), out_lengths


class FrameStacker:
    """Streaming frame stacker: feed chunks of input frames, get the stacked frames now complete.

    Keeps the last ``num_stack - stride`` (or fewer) input frames that later output frames still
    need.  Concatenating the outputs of :meth:`accept` over any chunking of an utterance equals
    :func:`stack_frames` on the whole utterance.

    Example::

        st = FrameStacker(8, 3)
        for chunk in chunks:            # chunk: (n, 80)
            y = st.accept(chunk)        # (n', 640), n' may be 0
    """

    def __init__(self, num_stack: int = 8, stride: int = 3):
        _check(num_stack, stride)
        self.num_stack = int(num_stack)
        self.stride = int(stride)
        self.reset()

    def reset(self) -> None:
        """Forget buffered frames (start a new utterance)."""
        self._buf: torch.Tensor | None = None
        self._skip = 0  # input frames still to drop (only when stride > num_stack)
        self.num_input_frames = 0
        self.num_output_frames = 0

    def accept(self, chunk: torch.Tensor) -> torch.Tensor:
        """Add ``chunk`` ``(n, D)`` input frames; return the newly complete ``(n', num_stack*D)`` frames.

        Raises:
            ValueError: chunk not 2-D, or its feature dimension differs from earlier chunks.
        """
        if chunk.dim() != 2:
            raise ValueError(f"chunk must be (n, D), got shape {tuple(chunk.shape)}")
        if self._buf is not None and chunk.size(1) != self._buf.size(1):
            raise ValueError(f"chunk has {chunk.size(1)} dims, earlier chunks had {self._buf.size(1)}")
        self.num_input_frames += chunk.size(0)
        if self._skip:
            drop = min(self._skip, chunk.size(0))
            chunk, self._skip = chunk[drop:], self._skip - drop
        buf = chunk if self._buf is None else torch.cat([self._buf, chunk], dim=0)
        out, _ = stack_frames(buf, None, self.num_stack, self.stride)
        n = out.size(0)
        # The next output frame starts at input frame stride*n of buf; keep from there on.
        if n:
            self._skip = max(0, self.stride * n - buf.size(0))
            buf = buf[self.stride * n:]
        self._buf = buf
        self.num_output_frames += n
        return out
