"""kernels/tickets.py: one zeroed buffer per device, grown only when too small."""

import torch

from kernels.tickets import TicketCounters


def test_a_buffer_is_kept_until_a_launch_needs_more_counters():
    tickets = TicketCounters(minimum=8)
    cpu = torch.device("cpu")
    first = tickets.get(cpu, 3)
    assert first.numel() == 8 and first.dtype == torch.int32 and int(first.abs().sum()) == 0
    assert tickets.get(cpu, 8) is first  # what a CUDA graph captured stays the buffer
    grown = tickets.get(cpu, 20)
    assert grown.numel() == 20 and tickets.get(cpu, 1) is grown
    assert TicketCounters(minimum=8).get(cpu, 3) is not first  # each user has its own
