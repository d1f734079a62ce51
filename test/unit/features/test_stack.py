"""Frame stacking: layout, lengths, causality, streaming == whole utterance."""
import pytest
import torch

from speechkit.features.stack import FrameStacker, num_stacked_frames, stack_frames


def test_paper_layout_640_dims_30ms():
    T, D = 50, 80
    x = torch.arange(T, dtype=torch.float32)[:, None].repeat(1, D)  # row t holds value t
    y, _ = stack_frames(x, num_stack=8, stride=3)
    assert y.shape == ((T - 8) // 3 + 1, 640)
    for t in range(y.size(0)):
        # block k of output frame t is input frame 3t + k
        blocks = y[t].view(8, D)[:, 0]
        assert blocks.tolist() == [3 * t + k for k in range(8)]


@pytest.mark.parametrize("T,expected", [(0, 0), (7, 0), (8, 1), (10, 1), (11, 2), (14, 3)])
def test_num_frames(T, expected):
    assert num_stacked_frames(T) == expected
    assert stack_frames(torch.randn(T, 4))[0].shape == (expected, 32)
    assert int(num_stacked_frames(torch.tensor([T]))[0]) == expected


def test_causal_output_uses_only_frames_up_to_3t_plus_7():
    x = torch.randn(40, 5)
    y, _ = stack_frames(x)
    x2 = x.clone()
    t = 4
    x2[3 * t + 8:] = 1e6  # changing frames after 3t+7 must not change output frames <= t
    y2, _ = stack_frames(x2)
    assert torch.equal(y[: t + 1], y2[: t + 1])


def test_batch_lengths():
    x = torch.randn(3, 30, 4)
    y, lens = stack_frames(x, torch.tensor([30, 8, 5]))
    assert y.shape == (3, 8, 32)
    assert lens.tolist() == [8, 1, 0]
    assert torch.equal(y[1], stack_frames(x[1])[0])


@pytest.mark.parametrize("num_stack,stride", [(8, 3), (3, 3), (1, 1), (2, 5)])
@pytest.mark.parametrize("chunk", [1, 2, 7, 100])
def test_streaming_equals_full(num_stack, stride, chunk):
    torch.manual_seed(0)
    x = torch.randn(57, 6)
    full, _ = stack_frames(x, num_stack=num_stack, stride=stride)
    st = FrameStacker(num_stack, stride)
    parts = [st.accept(x[i : i + chunk]) for i in range(0, x.size(0), chunk)]
    assert torch.equal(torch.cat(parts), full)
    assert st.num_input_frames == 57 and st.num_output_frames == full.size(0)


def test_bad_input():
    with pytest.raises(ValueError):
        stack_frames(torch.randn(5), num_stack=2)
    with pytest.raises(ValueError):
        stack_frames(torch.randn(5, 2), num_stack=0)
    st = FrameStacker()
    st.accept(torch.randn(3, 4))
    with pytest.raises(ValueError, match="dims"):
        st.accept(torch.randn(3, 5))
