"""kernels/step_to_host.py: a split's x, ids and weights written to the host's buffers in one
launch, converted, against the torch reference (the same bits). On a GPU the buffers are
pinned host memory, as the split experts' mailbox keeps them, and the host reads them after
the stream's work is done."""

import pytest
import torch

from kernels.step_to_host import write_to_host, write_to_host_torch


def _buffers(n: int, k: int, device: str):
    pin = device == "cuda"

    def host(width, dtype):
        return torch.zeros(1, width, dtype=dtype, pin_memory=pin)

    return host(n, torch.float32), host(k, torch.int32), host(k, torch.float32)


@pytest.mark.parametrize(
    ("dtype", "ids_dtype", "n", "k"),
    [(torch.float16, torch.int32, 2048, 8), (torch.bfloat16, torch.int64, 2880, 4),
     (torch.float32, torch.int32, 64, 1)],
)  # fmt: skip
def test_what_the_host_reads_is_the_references(device, dtype, ids_dtype, n, k):
    gen = torch.Generator().manual_seed(n + k)
    x = (torch.randn(1, n, generator=gen) * 3).to(dtype).to(device)
    ids = torch.randperm(128, generator=gen)[:k].view(1, k).to(ids_dtype).to(device)
    weights = torch.rand(1, k, generator=gen).to(device)
    got = _buffers(n, k, device)
    write_to_host(x, ids, weights, *got)
    if device == "cuda":
        torch.cuda.synchronize()
    want = _buffers(n, k, "cpu")
    write_to_host_torch(x.cpu(), ids.cpu(), weights.cpu(), *want)
    for g, w in zip(got, want, strict=True):
        assert torch.equal(g, w)
    assert torch.equal(want[0], x.cpu().float()) and torch.equal(want[1], ids.cpu().int())


def test_buffers_of_another_kind_are_refused():
    x, ids, weights = torch.ones(1, 8), torch.zeros(1, 2, dtype=torch.int32), torch.ones(1, 2)
    x_host, ids_host, weights_host = _buffers(8, 2, "cpu")
    with pytest.raises(ValueError, match="x float32, ids int32"):
        write_to_host_torch(x, ids, weights, x_host.half(), ids_host, weights_host)
    with pytest.raises(ValueError, match="shapes of x"):
        write_to_host_torch(x, ids, weights, torch.zeros(1, 9), ids_host, weights_host)
    with pytest.raises(ValueError, match="one token"):
        write_to_host_torch(torch.ones(2, 8), ids, weights, x_host, ids_host, weights_host)
