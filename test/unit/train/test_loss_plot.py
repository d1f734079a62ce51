"""loss.png (speechkit.train.report.plot_losses): fixed margins that keep every label inside the figure."""
from __future__ import annotations

import json

import pytest

from speechkit.train.report import _loss_figure, plot_losses


def _metrics(tmp_path, title_lr_scale: float = 1.0):
    recs = []
    for step in range(1, 201):
        lr = title_lr_scale * 3e-3 * min(step / 50, (50 / step) ** 0.5)
        recs.append({"kind": "train", "step": step, "loss": 300.0 / step ** 1.2 + 0.4, "lr": lr})
        if step % 40 == 0:
            recs.append({"kind": "epoch", "step": step, "train/loss": 250.0 / step + 0.5,
                         "valid/loss": 260.0 / step + 0.7})
    path = tmp_path / "metrics.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in recs))
    return recs, path


@pytest.mark.parametrize("lr_scale", [1.0, 1e-3, 1e4])
def test_labels_ticks_and_title_lie_inside_the_figure(tmp_path, lr_scale):
    """No layout solver (constrained_layout cost ~0.2 s per training): the fixed margins must still
    hold the tick labels (small, scientific and large learning rates), the axis labels and the title,
    and the two panels must not overlap."""
    recs, path = _metrics(tmp_path, lr_scale)
    train = [r for r in recs if r["kind"] == "train"]
    ep = [r for r in recs if r["kind"] == "epoch"]
    fig = _loss_figure([r["step"] for r in train], [r["loss"] for r in train], [r["step"] for r in train],
                       [r["lr"] for r in train], [r["step"] for r in ep], [r["train/loss"] for r in ep],
                       [r["step"] for r in ep], [r["valid/loss"] for r in ep], title="vqvae: exp/tiny")
    assert fig.get_layout_engine() is None
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    canvas = FigureCanvasAgg(fig)  # what savefig draws with
    canvas.draw()
    renderer = canvas.get_renderer()
    ax, ax_lr = fig.axes
    assert ax.get_yscale() == "log"
    page = fig.bbox
    for a in (ax, ax_lr):
        box = a.get_tightbbox(renderer)
        assert box.x0 >= page.x0 - 0.5 and box.y0 >= page.y0 - 0.5, (a.get_ylabel(), box, page)
        assert box.x1 <= page.x1 + 0.5 and box.y1 <= page.y1 + 0.5, (a.get_ylabel(), box, page)
    assert ax_lr.get_tightbbox(renderer).y1 <= ax.get_window_extent(renderer).y0 + 0.5
    assert plot_losses(path, tmp_path / "loss.png") and (tmp_path / "loss.png").stat().st_size > 10_000


def test_nothing_to_plot_writes_nothing(tmp_path):
    (tmp_path / "metrics.jsonl").write_text('{"kind": "train", "step": 1, "loss": NaN}\n')
    assert not plot_losses(tmp_path / "metrics.jsonl", tmp_path / "loss.png")
    assert not (tmp_path / "loss.png").exists()
