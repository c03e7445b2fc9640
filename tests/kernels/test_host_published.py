"""kernels/host_published.py: a host-computed sum added on the GPU once its flag is up, against
the torch reference; the flag lowered after, or left at TIMED_OUT when it never came up. On a
GPU the sum and flag live in pinned host memory, as the split experts' mailbox keeps them."""

import pytest
import torch

from kernels.host_published import TIMED_OUT, add_published, add_published_torch


def _host(values: torch.Tensor, device: str) -> torch.Tensor:
    return values.pin_memory() if device == "cuda" else values


@pytest.mark.parametrize("dtype, n", [(torch.float16, 2048), (torch.float32, 2880)])
def test_a_published_sum_is_added_and_the_flag_lowered(device, dtype, n):
    gen = torch.Generator().manual_seed(n)
    gpu_part = torch.randn(1, n, generator=gen).to(dtype).to(device)
    host_sum = _host(torch.randn(1, n, generator=gen), device)
    flag = _host(torch.ones(1, dtype=torch.int32), device)
    got = add_published(gpu_part, host_sum, flag)
    torch.cuda.synchronize() if device == "cuda" else None
    expected = add_published_torch(gpu_part.cpu(), host_sum.cpu(), torch.ones(1, dtype=torch.int32))
    assert got.dtype == dtype
    assert torch.equal(got.cpu(), expected)
    assert int(flag[0]) == 0


def test_a_flag_that_never_comes_up_ends_the_wait_as_timed_out(device):
    gpu_part = torch.ones(1, 64, device=device)
    host_sum = _host(torch.full((1, 64), 2.0), device)
    flag = _host(torch.zeros(1, dtype=torch.int32), device)
    got = add_published(gpu_part, host_sum, flag, max_polls=3)
    torch.cuda.synchronize() if device == "cuda" else None
    assert int(flag[0]) == TIMED_OUT
    assert torch.equal(got.cpu(), torch.full((1, 64), 3.0))


def test_the_reference_lowers_the_flag_and_checks_its_inputs():
    flag = torch.ones(1, dtype=torch.int32)
    out = add_published_torch(torch.ones(1, 4, dtype=torch.bfloat16), torch.full((1, 4), 0.5), flag)
    assert out.dtype == torch.bfloat16 and torch.equal(out.float(), torch.full((1, 4), 1.5))
    assert int(flag[0]) == 0
    with pytest.raises(ValueError, match="float32"):
        add_published_torch(torch.ones(1, 4), torch.ones(1, 4, dtype=torch.float16), flag)
    with pytest.raises(ValueError, match="a sum of 3 for a part of 4"):
        add_published_torch(torch.ones(1, 4), torch.ones(1, 3), flag)
