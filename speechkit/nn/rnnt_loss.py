"""RNN-T (transducer) loss in pure PyTorch: log-space forward-backward with a closed-form gradient.

Graves, "Sequence Transduction with Recurrent Neural Networks" (ICML 2012 workshop, arXiv:1211.3711),
section 2.  For one utterance with ``T`` encoder frames and labels ``y_1..y_U`` the joint network
gives, at every lattice node ``(t, u)`` (``0 <= t < T``, ``0 <= u <= U``), a distribution over
``V`` outputs; write ``b(t,u)`` for the log-probability of blank and ``y(t,u)`` for that of label
``y_{u+1}``.  Then (eq. 7-10, in log space)::

    alpha(0,0) = 0
    alpha(t,u) = logaddexp(alpha(t-1,u) + b(t-1,u), alpha(t,u-1) + y(t,u-1))
    beta(T-1,U) = b(T-1,U)
    beta(t,u)  = logaddexp(beta(t+1,u) + b(t,u), beta(t,u+1) + y(t,u))
    log P(y|x) = alpha(T-1,U) + b(T-1,U) = beta(0,0)

and the gradient of ``L = -log P(y|x)`` w.r.t. the (unnormalised) joint output ``z(t,u,k)``
(eq. 15/16 combined with the log-softmax Jacobian)::

    dL/dz(t,u,k) = softmax(z(t,u))_k * exp(alpha(t,u) + beta(t,u) - log P)
                   - [k = blank]   * exp(alpha(t,u) + b(t,u) + beta(t+1,u) - log P)
                   - [k = y_{u+1}] * exp(alpha(t,u) + y(t,u) + beta(t,u+1) - log P)

Implementation notes:

* The blank and label log-probabilities are gathered from the joint output first (``(B, T, U+1)``
  each); with ``fused_log_softmax`` only the log-sum-exp normaliser ``(B, T, U+1)`` is computed
  from the ``(B, T, U+1, V)`` joint output, so the lattice itself costs ``O(B T U)`` memory.
* The recursions run over anti-diagonals ``n = t + u`` (all nodes of a diagonal depend only on the
  previous one), vectorised over the batch and over ``u``: the lattice is stored *skewed* as
  ``(B, T+U+1, U+1)`` with ``X_skew[b, n, u] = X[b, n-u, u]``, so each step is a few whole-row ops.
  ``T + U`` Python steps per direction instead of ``T * U``.
* A custom :class:`torch.autograd.Function` applies the closed-form gradient in ``backward``
  (one ``(B, T, U+1, V)`` tensor, the gradient itself), so autograd keeps no lattice graph.
* Variable lengths: the padded lattice is masked so that utterance ``b`` ends at node
  ``(T_b - 1, U_b)``; padded frames/labels get zero gradient.

:func:`rnnt_loss_reference` is a straightforward per-node loop (autograd through every node) kept
as an independent reference for tests and ``test/bench/bench_rnnt_loss.py``.
"""
from __future__ import annotations

import torch

# torchaudio is imported where used: optional (its rnnt_loss op is tried once per device type).

__all__ = ["rnnt_loss", "rnnt_loss_reference", "RNNTLoss", "IMPLS", "choose_impl", "torchaudio_rnnt_loss"]

_NEG_INF = float("-inf")


def _validate(logits, targets, logit_lengths, target_lengths, blank, reduction):
    if logits.dim() != 4:
        raise ValueError(f"logits must be (B, T, U+1, V), got shape {tuple(logits.shape)}")
    if not logits.is_floating_point():
        raise ValueError(f"logits must be floating point, got {logits.dtype}")
    B, T, U1, V = logits.shape
    if targets.dim() != 2 or targets.size(0) != B:
        raise ValueError(f"targets must be (B={B}, U), got shape {tuple(targets.shape)}")
    for name, x in (("targets", targets), ("logit_lengths", logit_lengths), ("target_lengths", target_lengths)):
        if x.is_floating_point() or x.is_complex() or x.dtype == torch.bool:
            raise ValueError(f"{name} must be an integer tensor, got {x.dtype}")
    if logit_lengths.shape != (B,) or target_lengths.shape != (B,):
        raise ValueError(
            f"logit_lengths and target_lengths must be (B={B},), got {tuple(logit_lengths.shape)} "
            f"and {tuple(target_lengths.shape)}"
        )
    if not 0 <= blank < V:
        raise ValueError(f"blank={blank} is not a valid output index for V={V}")
    if reduction not in ("mean", "sum", "none"):
        raise ValueError(f"reduction must be 'mean', 'sum' or 'none', got {reduction!r}")
    if B == 0:
        return
    bad = ((logit_lengths < 1) | (logit_lengths > T)).nonzero().flatten()
    if bad.numel():
        i = int(bad[0])
        raise ValueError(f"utterance {i}: logit_lengths={int(logit_lengths[i])} not in [1, T={T}]")
    max_u = min(U1 - 1, targets.size(1))
    bad = ((target_lengths < 0) | (target_lengths > max_u)).nonzero().flatten()
    if bad.numel():
        i = int(bad[0])
        raise ValueError(
            f"utterance {i}: target_lengths={int(target_lengths[i])} not in [0, {max_u}] "
            f"(logits have U+1={U1} label positions, targets have {targets.size(1)} columns)"
        )
    if targets.size(1):
        valid = torch.arange(targets.size(1), device=targets.device)[None, :] < target_lengths[:, None]
        vals = targets[valid]
        if vals.numel():
            if int(vals.min()) < 0 or int(vals.max()) >= V:
                raise ValueError(f"targets must lie in [0, V={V}) within target_lengths")
            if bool((vals == blank).any()):
                b = int((valid & (targets == blank)).any(1).nonzero()[0])
                raise ValueError(f"utterance {b}: targets contain the blank id {blank} within target_lengths")


def _skew_index(T: int, U1: int, device):
    """Index tensors mapping the skewed layout ``(n, u)`` to ``(t = n - u, u)``."""
    N = T + U1
    n = torch.arange(N, device=device)[:, None]
    u = torch.arange(U1, device=device)[None, :]
    t = n - u
    valid = (t >= 0) & (t < T)
    return t.clamp(0, T - 1), u.expand(N, U1), valid


def _skew(x: torch.Tensor, tidx, uidx, valid) -> torch.Tensor:
    """(B, T, U1) -> (B, T+U1, U1) with out[b, n, u] = x[b, n-u, u] (-inf off the lattice)."""
    return x[:, tidx, uidx].masked_fill(~valid, _NEG_INF)


def _unskew(xs: torch.Tensor, T: int) -> torch.Tensor:
    """(B, T+U1, U1) -> (B, T, U1) with out[b, t, u] = xs[b, t+u, u]."""
    U1 = xs.size(2)
    t = torch.arange(T, device=xs.device)[:, None]
    u = torch.arange(U1, device=xs.device)[None, :]
    return xs[:, t + u, u.expand(T, U1)]


def _lattice(lp_blank, lp_label, logit_lengths, target_lengths):
    """Alpha and beta over anti-diagonals.

    Args:
        lp_blank, lp_label: (B, T, U1) log-probs of blank / of the next label at each node,
            already -inf outside each utterance's lattice.
    Returns:
        (alpha_s, beta_s, lb_s, ly_s, loglik): skewed (B, N, U1) tensors (N = T + U1) and (B,).
    """
    B, T, U1 = lp_blank.shape
    N = T + U1
    tidx, uidx, valid = _skew_index(T, U1, lp_blank.device)
    lb = _skew(lp_blank, tidx, uidx, valid)
    ly = _skew(lp_label, tidx, uidx, valid)

    # Two kernels per diagonal each way. alpha is kept with a -inf column before u = 0, so that
    # alpha(n-1, u-1) and alpha(n-1, u) are one overlapping (B, 2, U1) view of diagonal n-1; the arc
    # log-probs are laid out to match (label, blank): one add, then one logaddexp into diagonal n.
    # logaddexp(x, -inf) == x exactly, so the borders need no special case.
    neg = lp_blank.new_full((B, N, 1), _NEG_INF)
    arcs_a = torch.stack([torch.cat([neg, ly[:, :, :-1]], 2), lb], 2)  # (B, N, 2, U1): [label into u, blank]
    alpha_p = lp_blank.new_full((B, N, U1 + 1), _NEG_INF)
    alpha_p[:, 0, 1] = 0.0
    sb, sn = alpha_p.stride(0), alpha_p.stride(1)
    for n in range(1, N):
        win = alpha_p.as_strided((B, 2, U1), (sb, 1, 1), alpha_p.storage_offset() + (n - 1) * sn)
        t = win + arcs_a[:, n - 1]
        torch.logaddexp(t[:, 1], t[:, 0], out=alpha_p[:, n, 1:])
    alpha = alpha_p[:, :, 1:]

    # beta is initialised at each utterance's virtual end node (T_b, U_b), reached from
    # (T_b - 1, U_b) by the final blank; all other cells start at -inf. Kept with a -inf column
    # after u = U1 - 1: beta(n+1, u) and beta(n+1, u+1) are one (B, 2, U1) view.
    bidx = torch.arange(B, device=lp_blank.device)
    end_n = logit_lengths.long() + target_lengths.long()
    init = lp_blank.new_full((B, N, U1), _NEG_INF)
    init[bidx, end_n, target_lengths.long()] = 0.0
    arcs_b = torch.stack([lb, torch.cat([ly[:, :, :-1], neg], 2)], 2)  # (B, N, 2, U1): [blank, label]
    beta_p = lp_blank.new_full((B, N + 1, U1 + 1), _NEG_INF)
    beta_p[:, :N, :U1] = init
    sb, sn = beta_p.stride(0), beta_p.stride(1)
    tmp = lp_blank.new_empty((B, U1))
    for n in range(N - 2, -1, -1):
        win = beta_p.as_strided((B, 2, U1), (sb, 1, 1), beta_p.storage_offset() + (n + 1) * sn)
        t = win + arcs_b[:, n]
        torch.logaddexp(t[:, 0], t[:, 1], out=tmp)
        torch.logaddexp(tmp, init[:, n], out=beta_p[:, n, :U1])
    beta = beta_p[:, :N, :U1]
    loglik = alpha[bidx, end_n, target_lengths.long()]
    return alpha, beta, lb, ly, loglik


def _logsumexp_chunked(acts: torch.Tensor, cdt, max_elements: int = 1 << 20) -> torch.Tensor:
    """``logsumexp(acts, dim=-1)`` in ``cdt``, a block of rows at a time, so that the temporaries
    never exceed ``max_elements`` (a plain ``torch.logsumexp`` makes full-size copies)."""
    V = acts.size(-1)
    rows = acts.reshape(-1, V)  # a view for contiguous input
    out = torch.empty(rows.size(0), dtype=cdt, device=acts.device)
    step = max(1, max_elements // max(V, 1))
    for i in range(0, rows.size(0), step):
        torch.logsumexp(rows[i : i + step].to(cdt), dim=-1, out=out[i : i + step])
    return out.view(acts.shape[:-1])


def _gather(acts, targets, logit_lengths, target_lengths, blank, fused, cdt):
    """Blank / next-label log-probs (B, T, U1), masked to each utterance's lattice, and the
    log-softmax normaliser (B, T, U1) (None when not fused)."""
    B, T, U1, V = acts.shape
    U = min(U1 - 1, targets.size(1))
    tgt = torch.full((B, U1), blank, dtype=torch.long, device=acts.device)
    if U > 0:
        tgt[:, :U] = targets[:, :U].long()
    upos = torch.arange(U1, device=acts.device)
    tpos = torch.arange(T, device=acts.device)
    tgt = tgt.masked_fill(upos[None, :] >= target_lengths[:, None], blank)
    idx = tgt[:, None, :, None].expand(B, T, U1, 1)
    lp_blank = acts[..., blank].to(cdt)
    lp_label = torch.gather(acts, 3, idx).squeeze(3).to(cdt)
    lse = None
    if fused:
        lse = _logsumexp_chunked(acts, cdt)
        lp_blank = lp_blank - lse
        lp_label = lp_label - lse
    t_ok = tpos[None, :, None] < logit_lengths[:, None, None]
    lp_blank = lp_blank.masked_fill(~(t_ok & (upos[None, None, :] <= target_lengths[:, None, None])), _NEG_INF)
    lp_label = lp_label.masked_fill(~(t_ok & (upos[None, None, :] < target_lengths[:, None, None])), _NEG_INF)
    return lp_blank, lp_label, lse, idx


class _RNNTLossFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, acts, targets, logit_lengths, target_lengths, blank, fused, clamp):
        cdt = torch.float64 if acts.dtype == torch.float64 else torch.float32
        with torch.no_grad():
            lp_blank, lp_label, lse, idx = _gather(
                acts, targets, logit_lengths, target_lengths, blank, fused, cdt
            )
            alpha, beta, lb, ly, loglik = _lattice(lp_blank, lp_label, logit_lengths, target_lengths)
        ctx.blank, ctx.fused, ctx.clamp = blank, fused, clamp
        ctx.save_for_backward(acts, lse if lse is not None else acts.new_empty(0), idx, alpha, beta, lb, ly, loglik)
        return (-loglik).to(acts.dtype)

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad_out):
        acts, lse, idx, alpha, beta, lb, ly, loglik = ctx.saved_tensors
        B, T, U1, V = acts.shape
        cdt = alpha.dtype
        # Arc occupancies (posterior probability of taking the arc), skewed layout.
        beta_next = torch.cat([beta[:, 1:], beta.new_full((B, 1, U1), _NEG_INF)], dim=1)
        ll = loglik[:, None, None]
        g_blank = torch.exp(alpha + lb + beta_next - ll)
        g_label = torch.zeros_like(g_blank)
        if U1 > 1:
            g_label[:, :, :-1] = torch.exp(alpha[:, :, :-1] + ly[:, :, :-1] + beta_next[:, :, 1:] - ll)
        g_blank = _unskew(g_blank, T)
        g_label = _unskew(g_label, T)
        scale = grad_out.to(cdt)[:, None, None]
        if ctx.clamp <= 0:  # scale the (B, T, U1) occupancies, not the (B, T, U1, V) gradient
            g_blank = g_blank * scale
            g_label = g_label * scale
        if ctx.fused:
            # softmax * node occupancy, computed in place in the one (B, T, U1, V) buffer.
            grad = acts.to(cdt) if acts.dtype != cdt else acts.clone()
            grad.sub_(lse.unsqueeze(3)).exp_().mul_((g_blank + g_label).unsqueeze(3))
        else:
            grad = torch.zeros(acts.shape, dtype=cdt, device=acts.device)
        grad[..., ctx.blank] -= g_blank
        grad.scatter_add_(3, idx, -g_label.unsqueeze(3))
        if ctx.clamp > 0:  # torchaudio's order: clamp each utterance's gradient of its loss, then scale it
            grad.clamp_(-ctx.clamp, ctx.clamp).mul_(scale.unsqueeze(3))
        return grad.to(acts.dtype), None, None, None, None, None, None


IMPLS = ("auto", "torchaudio", "speechkit")
_INT32_ELEMENTS = 2**31  # torchaudio indexes the (B, T, U+1, V) logits with int32
_TORCHAUDIO: dict[str, tuple[object, str]] = {}  # device type -> (rnnt_loss or None, why not)


def torchaudio_rnnt_loss(device: torch.device | str = "cpu"):
    """``(torchaudio.functional.rnnt_loss, "")`` when torchaudio imports and its compiled op runs on
    ``device``'s type (tried once per process on a 1 x 2 x 2 x 3 input), else ``(None, reason)``."""
    dev = torch.device(device)
    if dev.type not in _TORCHAUDIO:
        try:
            from torchaudio.functional import rnnt_loss as ta_rnnt_loss

            x = torch.zeros(1, 2, 2, 3, device=dev)
            ta_rnnt_loss(x, torch.ones(1, 1, dtype=torch.int32, device=dev),
                         torch.tensor([2], dtype=torch.int32, device=dev),
                         torch.tensor([1], dtype=torch.int32, device=dev), blank=0)
            _TORCHAUDIO[dev.type] = (ta_rnnt_loss, "")
        except Exception as e:  # noqa: BLE001 - ImportError, OSError (its library), RuntimeError (no kernel)
            _TORCHAUDIO[dev.type] = (None, f"torchaudio's rnnt_loss does not run on {dev.type} here "
                                           f"({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''})")
    return _TORCHAUDIO[dev.type]


def choose_impl(impl: str, logits: torch.Tensor, logit_lengths: torch.Tensor | None = None,
                target_lengths: torch.Tensor | None = None, clamp: float = -1.0) -> tuple[str, str]:
    """The implementation :func:`rnnt_loss` uses for ``logits`` under ``impl``, and why.

    ``auto``: torchaudio's compiled op for CUDA logits where it runs there, the logits are float32 or
    float16, ``B * T * (U+1) * V < 2**31`` (its int32 indexing) and, when the lengths are given, no
    utterance has a single frame or an empty target; speechkit's otherwise (the CPU, where torchaudio's op
    took 2.0 s against this module's 0.25 s at B, T, U, V = 8, 200, 50, 256 on one thread; no
    torchaudio; float64/bfloat16 logits; larger inputs; such short utterances). The last rule: on an H200
    with torchaudio 2.11 + CUDA 13, torchaudio's CUDA op gave other losses than its CPU op and this module
    (which agree to 1e-5) for 2 of 5 utterances of a batch that held one with ``target_length`` 0 and one
    with ``logit_length`` = ``target_length`` = 1 (test_rnnt_loss.py's agreement test; pytorch/audio
    issue 3048 reports the same for lengths of 1); the rest of the batch agreed. Nor is torchaudio's CUDA
    op used with ``clamp > 0``, under ``auto`` or ``torchaudio``: on the same machine it ignored ``clamp``
    (gradients up to 0.22 where ``clamp=0.05``; its CPU op and this module clamp, and agree to 1e-6).
    Only the device, shape and dtype of ``logits``, the lengths' minima and ``clamp`` are read.

    Raises:
        ValueError: an unknown ``impl``; ``impl="torchaudio"`` where it cannot be used (says why), which
            includes CUDA logits with ``clamp > 0``.
    """
    if impl not in IMPLS:
        raise ValueError(f"impl must be one of {', '.join(IMPLS)}, got {impl!r}")
    if impl == "speechkit":
        return "speechkit", "asked for"
    why = ""
    if impl == "auto" and logits.device.type != "cuda":
        why = f"on {logits.device.type}, this module's loss is faster than torchaudio's"
    elif logits.dtype not in (torch.float32, torch.float16):
        why = f"torchaudio's rnnt_loss takes float32/float16 logits, not {logits.dtype}"
    elif logits.numel() >= _INT32_ELEMENTS:
        why = (f"{' x '.join(map(str, logits.shape))} = {logits.numel()} logits exceed torchaudio's int32 indexing "
               f"(< 2**31)")
    elif logits.device.type == "cuda" and clamp > 0:
        why = f"clamp={clamp:g}: torchaudio's CUDA op ignores clamp (see choose_impl)"
    elif impl == "auto" and logits.device.type == "cuda" and (short := _short_utterances(logit_lengths,
                                                                                         target_lengths)):
        why = f"{short}: torchaudio's CUDA op gets such utterances wrong (see choose_impl)"
    else:
        fn, why = torchaudio_rnnt_loss(logits.device)
    if not why:
        return "torchaudio", "its compiled op runs here and the input fits"
    if impl == "torchaudio":
        raise ValueError(f"impl='torchaudio': {why}; use impl='auto' or 'speechkit'")
    return "speechkit", why


def _short_utterances(logit_lengths: torch.Tensor | None, target_lengths: torch.Tensor | None) -> str:
    """'' or what makes a batch unsafe for torchaudio's CUDA op: utterances of one frame / no label."""
    out = []
    if logit_lengths is not None and len(logit_lengths):
        n = int((logit_lengths < 2).sum())
        if n:
            out.append(f"{n} utterance(s) of one frame")
    if target_lengths is not None and len(target_lengths):
        n = int((target_lengths < 1).sum())
        if n:
            out.append(f"{n} with an empty target")
    return ", ".join(out)


def _torchaudio_loss(logits, targets, logit_lengths, target_lengths, blank, reduction, fused, clamp):
    """torchaudio's rnnt_loss on our arguments: it wants T = max(logit_lengths), U+1 = max(target_lengths) + 1,
    int32 targets/lengths on the logits' device, contiguous tensors."""
    fn, _ = torchaudio_rnnt_loss(logits.device)
    dev = logits.device
    tl = logit_lengths.to(device=dev, dtype=torch.int32)
    ul = target_lengths.to(device=dev, dtype=torch.int32)
    t_max, u_max = (int(v) for v in torch.stack([tl.max(), ul.max()]).tolist()) if len(tl) else (0, 0)
    x = logits[:, :t_max, : u_max + 1]
    if not x.is_contiguous():
        x = x.contiguous()
    y = targets[:, :u_max].to(device=dev, dtype=torch.int32)
    y = y.masked_fill(torch.arange(u_max, device=dev)[None, :] >= ul[:, None], blank).contiguous()
    return fn(x, y, tl, ul, blank=blank, clamp=clamp, reduction=reduction, fused_log_softmax=fused)


def rnnt_loss(
    logits: torch.Tensor,
    targets: torch.Tensor,
    logit_lengths: torch.Tensor,
    target_lengths: torch.Tensor,
    blank: int = 0,
    reduction: str = "mean",
    fused_log_softmax: bool = True,
    clamp: float = -1.0,
    impl: str = "speechkit",
) -> torch.Tensor:
    """RNN-T loss ``-log P(y | x)`` (Graves 2012), same conventions as ``torchaudio.functional.rnnt_loss``.

    Args:
        logits: ``(B, T, U+1, V)`` joint network output.  Unnormalised logits when
            ``fused_log_softmax`` (log-softmax applied inside, gradient w.r.t. the logits), else
            already-normalised log-probabilities (the loss treats them as given).
            float32/float64 (float16/bfloat16 are computed in float32).
        targets: ``(B, U)`` integer labels (padding past ``target_lengths`` is ignored); must not
            contain ``blank`` within ``target_lengths``.
        logit_lengths: ``(B,)`` encoder frames per utterance, each in ``[1, T]``.
        target_lengths: ``(B,)`` labels per utterance, each in ``[0, U]`` and ``< logits.size(2)``.
        blank: index of the blank output.
        reduction: ``"mean"`` (average over utterances), ``"sum"`` or ``"none"`` (``(B,)``), in nats.
        fused_log_softmax: see ``logits``.
        clamp: if > 0, clamp the gradient of each utterance's loss w.r.t. its ``logits`` element-wise to
            ``[-clamp, clamp]``, before the upstream gradient (e.g. ``1/B`` of ``reduction="mean"``)
            scales it: torchaudio's order.
        impl: ``speechkit`` (this module's, exact in any size, memory ``O(B T U)`` beyond the input and
            its gradient), ``torchaudio`` (``torchaudio.functional.rnnt_loss``, its compiled CPU/CUDA
            op: several times faster on CUDA, slower on the CPU, int32 indexing, float32/float16 only)
            or ``auto`` (torchaudio for CUDA logits that fit it, where it runs, unless the batch holds
            an utterance of one frame or with an empty target, which its CUDA op gets wrong; this
            module's otherwise: :func:`choose_impl`). Both give the same loss to 1e-5 relative and the
            same gradient to float rounding on the CPU (test_rnnt_loss.py); ``impl="torchaudio"``
            on CUDA does not avoid torchaudio's short-utterance bug, and refuses ``clamp > 0`` (its CUDA
            op ignores it).

    Returns:
        The loss: a scalar, or ``(B,)`` with ``reduction="none"``.

    Raises:
        ValueError: inconsistent shapes, lengths out of range (an utterance with no frames), labels
        outside ``[0, V)`` or equal to ``blank``, unknown ``reduction`` or ``impl``,
        ``impl="torchaudio"`` where torchaudio's op cannot run or the input does not fit it.
    """
    _validate(logits, targets, logit_lengths, target_lengths, blank, reduction)
    if impl != "speechkit" and logits.size(0) and \
            choose_impl(impl, logits, logit_lengths, target_lengths, clamp)[0] == "torchaudio":
        return _torchaudio_loss(logits, targets, logit_lengths, target_lengths, int(blank), reduction,
                                bool(fused_log_softmax), float(clamp))
    losses = _RNNTLossFunction.apply(
        logits, targets, logit_lengths.to(logits.device), target_lengths.to(logits.device),
        int(blank), bool(fused_log_softmax), float(clamp),
    )
    return _reduce(losses, reduction)


def _reduce(losses: torch.Tensor, reduction: str) -> torch.Tensor:
    return losses.mean() if reduction == "mean" else losses.sum() if reduction == "sum" else losses


class RNNTLoss(torch.nn.Module):
    """Module wrapper of :func:`rnnt_loss` (``blank``, ``reduction``, ``fused_log_softmax``, ``clamp``, ``impl``)."""

    def __init__(self, blank: int = 0, reduction: str = "mean", fused_log_softmax: bool = True, clamp: float = -1.0,
                 impl: str = "speechkit"):
        super().__init__()
        if impl not in IMPLS:
            raise ValueError(f"impl must be one of {', '.join(IMPLS)}, got {impl!r}")
        self.blank, self.reduction, self.fused_log_softmax, self.clamp = blank, reduction, fused_log_softmax, clamp
        self.impl = impl

    def forward(self, logits, targets, logit_lengths, target_lengths):
        return rnnt_loss(logits, targets, logit_lengths, target_lengths, self.blank, self.reduction,
                         self.fused_log_softmax, self.clamp, self.impl)


def rnnt_loss_reference(
    logits: torch.Tensor,
    targets: torch.Tensor,
    logit_lengths: torch.Tensor,
    target_lengths: torch.Tensor,
    blank: int = 0,
    reduction: str = "mean",
    fused_log_softmax: bool = True,
) -> torch.Tensor:
    """Straightforward RNN-T loss: a Python loop over every lattice node, autograd for the gradient.

    Same arguments and result as :func:`rnnt_loss` (``O(T U)`` Python steps, each vectorised over
    the batch only).  Slow; it exists as an independent reference for tests and the benchmark.
    """
    _validate(logits, targets, logit_lengths, target_lengths, blank, reduction)
    B, T, U1, V = logits.shape
    lp = torch.log_softmax(logits, dim=-1) if fused_log_softmax else logits
    U = U1 - 1
    tgt = torch.full((B, U1), blank, dtype=torch.long, device=logits.device)
    if min(U, targets.size(1)) > 0:
        k = min(U, targets.size(1))
        tgt[:, :k] = targets[:, :k].long()
    tgt = tgt.masked_fill(torch.arange(U1, device=logits.device)[None] >= target_lengths[:, None].to(logits.device), blank)
    lp_blank = lp[..., blank]  # (B, T, U1)
    lp_label = torch.gather(lp, 3, tgt[:, None, :, None].expand(B, T, U1, 1)).squeeze(3)
    # Per-node views (unbind keeps autograd cheap: its backward is one stack).
    blank_nodes = [row.unbind(1) for row in lp_blank.unbind(1)]  # [t][u] -> (B,)
    label_nodes = [row.unbind(1) for row in lp_label.unbind(1)]
    alpha = [[None] * U1 for _ in range(T)]
    for t in range(T):
        for u in range(U1):
            if t == 0 and u == 0:
                alpha[t][u] = lp_blank.new_zeros(B)
                continue
            terms = []
            if t > 0:
                terms.append(alpha[t - 1][u] + blank_nodes[t - 1][u])
            if u > 0:
                terms.append(alpha[t][u - 1] + label_nodes[t][u - 1])
            alpha[t][u] = terms[0] if len(terms) == 1 else torch.logaddexp(terms[0], terms[1])
    losses = []
    for b in range(B):
        tb, ub = int(logit_lengths[b]) - 1, int(target_lengths[b])
        losses.append(-(alpha[tb][ub][b] + blank_nodes[tb][ub][b]))
    return _reduce(torch.stack(losses), reduction)
