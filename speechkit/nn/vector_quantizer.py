"""Vector quantizer with an exponential-moving-average (EMA) codebook.

Quantization (van den Oord et al., "Neural Discrete Representation Learning", NeurIPS 2017, eq. (1)-(2);
Tjandra et al. 2020, eq. (4)-(6)): each encoder frame ``z_e(x)_t`` in ``R^De`` is replaced by its
nearest codebook row under the L2 distance, ``k_t = argmin_j ||z_e(x)_t - e_j||_2``, ``z_q(x)_t = e_{k_t}``;
the decoder gradient is copied straight through to the encoder (``z_e + sg(z_q - z_e)``).

Commitment loss (van den Oord 2017 eq. (3), third term; Tjandra 2020 eq. (7)):
``gamma * ||z_e(x) - sg(e)||_2^2``, here the squared L2 norm of each frame averaged over the valid
(unpadded) frames of the batch; ``gamma`` = ``commitment_cost`` (0.25 in both papers).

Codebook updates (van den Oord 2017, appendix A.1; Razavi et al., "Generating Diverse High-Fidelity
Images with VQ-VAE-2", NeurIPS 2019, sec. 3.1; Tjandra et al. 2020, sec. 3.1, update the codebook by EMA
after Kaiser et al., ICML 2018, without stating the decay), in training mode only, from the valid frames of
the batch:

    n_i = #frames assigned to code i,   s_i = sum of those frames            (this batch)
    N_i <- decay * N_i + (1 - decay) * n_i                                   (EMA cluster size)
    m_i <- decay * m_i + (1 - decay) * s_i                                   (EMA code sum)
    N_i' = (N_i + eps) / (n + K * eps) * n,   n = sum_i N_i                  (Laplace smoothing)
    e_i = m_i / N_i'

The codebook is a buffer, not a parameter: it gets no gradient. ``N`` starts at 1 and ``m`` at the
initial codebook (one pseudo-observation per code), so an unused code keeps its initial vector
instead of being divided by ~``eps`` on the first update (which happens with ``N = 0``, ``m = e``).

Dead-code restart (optional, off by default): a code unused for ``restart_unused_steps`` consecutive
training updates is moved onto a random encoder frame of the current batch (``N_i = 1``, ``m_i = e_i``).

Deferred updates (``defer_updates()``; :class:`speechkit.models.vqvae.VQVAE` turns them on): the EMA step
then belongs to the optimizer step, not to the forward pass. A training forward only accumulates its
batch statistics (summed over the micro-batches of a gradient-accumulation group); the statistics are
applied by the next ``optimizer.step()`` of an optimizer that holds the owner model's parameters (a
global optimizer step hook), and thrown away when the owner model starts a new group (its gradients
were cleared) without such a step -- e.g. when the trainer skipped the step for a non-finite gradient
norm. A NaN batch therefore never reaches the codebook, and the codebook that is checkpointed is always
the one of the last *applied* update. Without ``defer_updates()`` the update runs in the forward pass.

Distributed training: under ``torch.distributed`` the batch statistics ``n`` and ``s`` are summed over
ranks before the EMA step and restart vectors are broadcast from rank 0, so every rank holds the same
codebook (:func:`_all_reduce_sum`, :func:`_broadcast` -- the DDP hook).
"""
import logging
import weakref
from dataclasses import dataclass

import torch
import torch.distributed as dist
from torch import nn
from torch.optim.optimizer import register_optimizer_step_post_hook


log = logging.getLogger(__name__)

_DEFERRING: "weakref.WeakSet[EMAVectorQuantizer]" = weakref.WeakSet()
_STEP_HOOK = None


def _commit_on_optimizer_step(optimizer: torch.optim.Optimizer, args, kwargs) -> None:
    """Global optimizer step post-hook: apply the pending EMA statistics of every deferring quantizer
    whose owner model has a parameter in ``optimizer`` (all pending ones when no owner was given)."""
    param_ids = None
    for vq in list(_DEFERRING):
        if vq._pending is None:
            continue
        owner = vq._owner() if vq._owner is not None else None
        if owner is not None:
            first = next(owner.parameters(), None)
            if first is None:
                continue
            if param_ids is None:
                param_ids = {id(q) for group in optimizer.param_groups for q in group["params"]}
            if id(first) not in param_ids:
                continue
        vq.commit_update()


def _distributed() -> bool:
    return dist.is_available() and dist.is_initialized()


def _all_reduce_sum(*tensors: torch.Tensor) -> None:
    """DDP hook: sum EMA batch statistics over all ranks, in place (no-op without torch.distributed)."""
    if _distributed():
        for t in tensors:
            dist.all_reduce(t, op=dist.ReduceOp.SUM)


def _broadcast(tensor: torch.Tensor) -> None:
    """DDP hook: make every rank use rank 0's ``tensor`` (no-op without torch.distributed)."""
    if _distributed():
        dist.broadcast(tensor, src=0)


def code_perplexity(counts: torch.Tensor) -> torch.Tensor:
    """Perplexity ``exp(-sum_i p_i log p_i)`` of a code histogram ``counts (K,)`` (``0 log 0 = 0``).

    Equals the number of codes in use when they are used equally often; 1 for a single code,
    and 1 for an empty histogram.
    """
    counts = counts.float()
    total = counts.sum()
    if total <= 0:
        return torch.ones((), device=counts.device)
    p = counts / total
    return torch.exp(-(torch.where(p > 0, p * torch.log(p.clamp_min(1e-30)), torch.zeros_like(p))).sum())


@dataclass
class VQOutput:
    """Output of :class:`EMAVectorQuantizer`.

    Attributes:
        z_q: ``(B, T, De)`` quantized frames with the straight-through gradient
            (value ``e_{k_t}``, gradient to ``z_e``); zero at padded frames.
        codes: ``(B, T)`` long code indices; 0 at padded frames.
        commitment_loss: scalar, ``gamma * mean_valid ||z_e - sg(e)||^2``.
        perplexity: scalar, :func:`code_perplexity` of ``counts``.
        codes_used: scalar long, number of codes with a non-zero count.
        counts: ``(K,)`` float histogram of the codes of the valid frames (summed over ranks in training).
    """

    z_q: torch.Tensor
    codes: torch.Tensor
    commitment_loss: torch.Tensor
    perplexity: torch.Tensor
    codes_used: torch.Tensor
    counts: torch.Tensor


class EMAVectorQuantizer(nn.Module):
    """Nearest-neighbour vector quantizer with an EMA codebook (see the module docstring for the equations).

    Args:
        codebook_size: ``K``, number of codes (>= 1).
        dim: ``De``, code vector size (>= 1).
        commitment_cost: ``gamma`` of the commitment loss (0.25 in van den Oord 2017 / Tjandra 2020).
        decay: EMA decay in ``[0, 1)`` (0.99 in van den Oord 2017, appendix A.1).
        epsilon: Laplace smoothing constant ``eps`` (> 0).
        restart_unused_steps: restart a code unused for this many training updates; 0 disables restarts.

    Raises:
        ValueError: a value out of range (the message names the argument).

    Buffers: ``codebook (K, De)``, ``ema_count (K,)``, ``ema_weight (K, De)``, ``unused_steps (K,)``.
    """

    def __init__(self, codebook_size: int, dim: int, commitment_cost: float = 0.25, decay: float = 0.99,
                 epsilon: float = 1e-5, restart_unused_steps: int = 0) -> None:
        super().__init__()
        if codebook_size < 1:
            raise ValueError(f"codebook_size must be >= 1, got {codebook_size}")
        if dim < 1:
            raise ValueError(f"dim must be >= 1, got {dim}")
        if not 0.0 <= decay < 1.0:
            raise ValueError(f"decay must be in [0, 1), got {decay}")
        if epsilon <= 0:
            raise ValueError(f"epsilon must be > 0, got {epsilon}")
        if commitment_cost < 0:
            raise ValueError(f"commitment_cost must be >= 0, got {commitment_cost}")
        if restart_unused_steps < 0:
            raise ValueError(f"restart_unused_steps must be >= 0, got {restart_unused_steps}")
        self.codebook_size, self.dim = codebook_size, dim
        self.commitment_cost, self.decay, self.epsilon = commitment_cost, decay, epsilon
        self.restart_unused_steps = restart_unused_steps
        # Codes start near the origin (uniform in [-1/K, 1/K], as in van den Oord et al.'s reference code),
        # so the first assignments follow the direction of z_e and spread over the codebook.
        codebook = torch.empty(codebook_size, dim).uniform_(-1.0 / codebook_size, 1.0 / codebook_size)
        self.register_buffer("codebook", codebook)
        self.register_buffer("ema_count", torch.ones(codebook_size))
        self.register_buffer("ema_weight", codebook.clone())
        self.register_buffer("unused_steps", torch.zeros(codebook_size, dtype=torch.long))
        self._defer = False
        self._owner: weakref.ref | None = None
        self._pending: dict[str, torch.Tensor] | None = None  # counts (K,), sums (K, De), candidates (N, De)
        self._pending_backward = False

    def defer_updates(self, owner: nn.Module | None = None) -> None:
        """Apply the EMA update at the optimizer step instead of in the forward pass (module docstring).

        Args:
            owner: the model trained with this quantizer; only an ``optimizer.step()`` of an optimizer
                holding ``owner``'s first parameter applies the update (None: any optimizer step).
        """
        global _STEP_HOOK
        if _STEP_HOOK is None:
            _STEP_HOOK = register_optimizer_step_post_hook(_commit_on_optimizer_step)
        self._defer = True
        self._owner = weakref.ref(owner) if owner is not None else None
        _DEFERRING.add(self)

    @property
    def has_pending_update(self) -> bool:
        """True when training forwards have accumulated statistics that no optimizer step applied yet."""
        return self._pending is not None

    @property
    def pending_saw_backward(self) -> bool:
        """True when a backward pass ran through a forward whose statistics are pending."""
        return self._pending is not None and self._pending_backward

    @torch.no_grad()
    def commit_update(self) -> bool:
        """Apply the pending EMA statistics (one EMA step); returns False when there were none."""
        if self._pending is None:
            return False
        pending, self._pending, self._pending_backward = self._pending, None, False
        self._ema_update(pending["counts"], pending["sums"], pending["candidates"])
        return True

    def discard_update(self) -> bool:
        """Drop the pending EMA statistics (a skipped step); returns False when there were none."""
        had = self._pending is not None
        self._pending, self._pending_backward = None, False
        return had

    def _mark_backward(self, grad: torch.Tensor) -> None:
        self._pending_backward = True

    def extra_repr(self) -> str:
        return (f"codebook_size={self.codebook_size}, dim={self.dim}, commitment_cost={self.commitment_cost}, "
                f"decay={self.decay}, epsilon={self.epsilon}, restart_unused_steps={self.restart_unused_steps}")

    @torch.no_grad()
    def set_codebook(self, codebook: torch.Tensor) -> None:
        """Replace the codebook ``(K, De)`` and reset the EMA state to it (``N = 1``, ``m = e``)."""
        if codebook.shape != self.codebook.shape:
            raise ValueError(f"set_codebook: expected shape {tuple(self.codebook.shape)}, got {tuple(codebook.shape)}")
        self.codebook.copy_(codebook)
        self.ema_weight.copy_(codebook)
        self.ema_count.fill_(1.0)
        self.unused_steps.zero_()

    @torch.no_grad()
    def quantize(self, z: torch.Tensor) -> torch.Tensor:
        """Nearest code index under the L2 distance: ``z (..., De)`` -> ``(...)`` long (ties: lowest index)."""
        flat = z.reshape(-1, self.dim).float()
        e = self.codebook.float()
        # ||z - e||^2 = ||z||^2 - 2 z.e + ||e||^2; ||z||^2 does not change the argmin.
        dist2 = e.pow(2).sum(1).unsqueeze(0) - 2.0 * flat @ e.t()
        return dist2.argmin(dim=1).view(z.shape[:-1])

    def embed(self, codes: torch.Tensor) -> torch.Tensor:
        """Codebook lookup: ``codes (...)`` long -> ``(..., De)``."""
        return self.codebook[codes]

    def forward(self, z_e: torch.Tensor, mask: torch.Tensor | None = None) -> VQOutput:
        """Quantize ``z_e (B, T, De)``; ``mask (B, T)`` bool, True at valid frames (default: all valid).

        In training mode the codebook is updated (EMA) from the valid frames after quantization, or,
        after :meth:`defer_updates`, at the next optimizer step; the returned ``z_q`` uses the codebook
        as it was before the update.
        """
        if z_e.dim() != 3 or z_e.size(-1) != self.dim:
            raise ValueError(f"EMAVectorQuantizer: expected z_e of shape (B, T, {self.dim}), got {tuple(z_e.shape)}")
        B, T, D = z_e.shape
        if mask is None:
            mask = torch.ones(B, T, dtype=torch.bool, device=z_e.device)
        codes = self.quantize(z_e)  # (B, T)
        quantized = self.codebook[codes].to(z_e.dtype)  # (B, T, De), a copy: later EMA steps don't touch it
        maskf = mask.unsqueeze(-1).to(z_e.dtype)
        n_valid = mask.sum().clamp_min(1)
        commitment = self.commitment_cost * (((z_e - quantized) ** 2) * maskf).sum() / n_valid

        with torch.no_grad():
            valid_codes = codes[mask]
            counts = torch.bincount(valid_codes, minlength=self.codebook_size).float()
            if self.training:
                valid_z = z_e.detach()[mask].float()
                sums = torch.zeros(self.codebook_size, D, device=z_e.device).index_add_(0, valid_codes, valid_z)
                _all_reduce_sum(counts, sums)
                if not self._defer:
                    self._ema_update(counts, sums, valid_z)
                elif self._pending is None:
                    self._pending = {"counts": counts.clone(), "sums": sums, "candidates": valid_z}
                else:  # another micro-batch of the same accumulation group
                    self._pending["counts"] += counts
                    self._pending["sums"] += sums
                    self._pending["candidates"] = valid_z
            perplexity = code_perplexity(counts)
            codes_used = (counts > 0).sum()
        if self.training and self._defer and z_e.requires_grad:
            z_e.register_hook(self._mark_backward)

        z_q = (z_e + (quantized - z_e).detach()) * maskf
        return VQOutput(z_q=z_q, codes=codes.masked_fill(~mask, 0), commitment_loss=commitment,
                        perplexity=perplexity, codes_used=codes_used, counts=counts)

    @torch.no_grad()
    def _ema_update(self, counts: torch.Tensor, sums: torch.Tensor, candidates: torch.Tensor) -> None:
        """One EMA step from batch statistics ``counts (K,)``, ``sums (K, De)`` (already summed over ranks).

        ``candidates (N, De)``: this rank's valid encoder frames, used for dead-code restarts.
        """
        d, eps, K = self.decay, self.epsilon, self.codebook_size
        self.ema_count.mul_(d).add_(counts, alpha=1.0 - d)
        self.ema_weight.mul_(d).add_(sums, alpha=1.0 - d)
        n = self.ema_count.sum()
        smoothed = (self.ema_count + eps) / (n + K * eps) * n
        self.codebook.copy_(self.ema_weight / smoothed.unsqueeze(1))

        if self.restart_unused_steps > 0:
            self.unused_steps.add_(1).masked_fill_(counts > 0, 0)
            dead = (self.unused_steps >= self.restart_unused_steps).nonzero().squeeze(1)
            if dead.numel():
                if candidates.size(0):
                    pick = torch.randint(candidates.size(0), (dead.numel(),), device=candidates.device)
                    new = candidates[pick].to(self.codebook.dtype)
                else:
                    new = self.codebook[dead].clone()
                _broadcast(new)  # every rank restarts onto rank 0's choice
                self.codebook[dead] = new
                self.ema_weight[dead] = new
                self.ema_count[dead] = 1.0
                self.unused_steps[dead] = 0

