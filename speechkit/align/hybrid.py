"""The hybrid refinement of the forced aligner: an MLP frame classifier whose scaled likelihoods
replace the GMMs' (Bourlard & Morgan 1994)."""
from __future__ import annotations

import numpy as np
import torch

from speechkit.align.config import AlignerConfig
from speechkit.align.transforms import splice


class FrameClassifier:
    """An MLP from spliced frames to HMM-state (pdf) posteriors, used as a hybrid acoustic model:
    ``log p(x | s) ~ log p(s | x) - log p(s)`` (Bourlard & Morgan 1994, "scaled likelihoods").

    Attributes:
        layers: ``[(W (in, out), b (out,)), ...]`` float32; ReLU between layers.
        context: frames each side of the input.
        log_prior: ``(P,)`` log state priors (training frame frequencies, smoothed).
    """

    def __init__(self, layers: list[tuple[np.ndarray, np.ndarray]], context: int, log_prior: np.ndarray):
        self.layers = [(np.asarray(w, np.float32), np.asarray(b, np.float32)) for w, b in layers]
        self.context = int(context)
        self.log_prior = np.asarray(log_prior, np.float32)
        self.train_accuracy = float("nan")

    def log_likelihood(self, x: np.ndarray) -> np.ndarray:
        """``(T, P)`` scaled log-likelihoods of frames ``x`` ``(T, D)``."""
        h = torch.from_numpy(splice(np.asarray(x, np.float32), self.context))
        with torch.no_grad():
            for i, (w, b) in enumerate(self.layers):
                h = h @ torch.from_numpy(w) + torch.from_numpy(b)
                if i + 1 < len(self.layers):
                    h = torch.relu(h)
            out = torch.log_softmax(h, dim=1).numpy()
        return out - self.log_prior[None]

    def arrays(self) -> dict[str, np.ndarray]:
        out = {"mlp_log_prior": self.log_prior, "mlp_context": np.array(self.context)}
        for i, (w, b) in enumerate(self.layers):
            out[f"mlp_w{i}"], out[f"mlp_b{i}"] = w, b
        return out

    @classmethod
    def from_arrays(cls, z) -> "FrameClassifier":
        n = sum(1 for k in z.keys() if k.startswith("mlp_w"))
        return cls([(z[f"mlp_w{i}"], z[f"mlp_b{i}"]) for i in range(n)], int(z["mlp_context"]), z["mlp_log_prior"])

    @classmethod
    def train(cls, feats: list[np.ndarray], targets: list[np.ndarray], num_pdfs: int, config: AlignerConfig,
              seed: int = 0) -> "FrameClassifier":
        """Train on frames ``feats`` (list of ``(T, D)``) labelled with pdf ids ``targets`` (cross-entropy, Adam)."""
        g = torch.Generator().manual_seed(seed)
        torch.manual_seed(seed)
        X = torch.from_numpy(np.concatenate([splice(f.astype(np.float32), config.mlp_context) for f in feats]))
        Y = torch.from_numpy(np.concatenate(targets).astype(np.int64))
        dims = [X.shape[1]] + [config.mlp_hidden] * config.mlp_layers + [num_pdfs]
        mods: list[torch.nn.Module] = []
        for i in range(len(dims) - 1):
            mods.append(torch.nn.Linear(dims[i], dims[i + 1]))
            if i + 2 < len(dims):
                mods.append(torch.nn.ReLU())
        net = torch.nn.Sequential(*mods)
        opt = torch.optim.Adam(net.parameters(), lr=config.mlp_lr)
        bs = 256
        for _ in range(config.mlp_epochs):
            perm = torch.randperm(len(X), generator=g)
            for b in range(0, len(X), bs):
                idx = perm[b:b + bs]
                loss = torch.nn.functional.cross_entropy(net(X[idx]), Y[idx])
                opt.zero_grad()
                loss.backward()
                opt.step()
        counts = np.bincount(Y.numpy(), minlength=num_pdfs).astype(np.float64) + 1.0
        lin = [m for m in net if isinstance(m, torch.nn.Linear)]
        clf = cls([(m.weight.detach().numpy().T.copy(), m.bias.detach().numpy().copy()) for m in lin],
                  config.mlp_context, np.log(counts / counts.sum()))
        with torch.no_grad():
            clf.train_accuracy = float((net(X).argmax(1) == Y).float().mean())
        return clf
