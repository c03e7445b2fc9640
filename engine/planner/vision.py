"""What a vision projector (mmproj) costs a plan: its memory on the device it sits on, and the
context its images take.

llama.cpp's multimodal library puts the projector on the main GPU when the model has layers
there (mtmd's use_gpu), else in system RAM; its weights and one image's compute buffer are set
aside from that device's budget before the model is planned, so the model's plan leaves room
for it. Each image then takes `image_tokens` positions of the context, as text does.
Pure: data in, data out.

    cost = projector_cost(projector_info(header), on_gpu=True)
    request = reserve_projector(request, cost)        # before planning
    devices = with_projector(plan.devices, cost)      # what the memory bar and `hearth plan` show
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from engine.gguf.projector import ProjectorInfo
from engine.planner.records import DeviceUsage, PlanRequest
from engine.units import format_bytes

HOST = "host"


@dataclass(frozen=True)
class ProjectorCost:
    weights_bytes: int
    compute_bytes: int  # one image's encoding
    image_tokens: int  # the context one image takes, at most
    on_gpu: bool  # on the first GPU of the plan; else in system RAM

    @property
    def total_bytes(self) -> int:
        return self.weights_bytes + self.compute_bytes


def projector_cost(projector: ProjectorInfo, *, on_gpu: bool) -> ProjectorCost:
    """The projector's weights, and a compute buffer for one image: the attention over its
    patches (an f32 score matrix of patches², one head at a time) and a few f32 rows a patch
    up to a 4,096-wide feed-forward. A bound that errs high; llama.cpp reports the real buffer
    when it loads the projector."""
    patch = max(1, projector.patch_size)
    patches = (projector.image_size // patch) ** 2
    if projector.max_pixels:
        patches = max(patches, projector.max_pixels // (patch * patch))
    compute = 4 * patches * patches * 2 + 4 * patches * 4096 * 4
    return ProjectorCost(projector.weights_bytes, compute, projector.image_tokens, on_gpu)


def _device_of(request_or_gpus, cost: ProjectorCost) -> str:
    gpus = request_or_gpus
    return gpus[0].id if cost.on_gpu and gpus else HOST


def reserve_projector(request: PlanRequest, cost: ProjectorCost) -> PlanRequest:
    """`request` with the projector's memory taken out of the budget of the device it sits on."""
    where = _device_of(request.gpus, cost)
    if where == HOST:
        host = request.host_budget_bytes
        if host is not None:
            host = max(0, host - cost.total_bytes)
        return replace(request, host_budget_bytes=host)
    gpus = tuple(
        replace(g, budget_bytes=max(0, g.budget_bytes - cost.total_bytes)) if g.id == where else g
        for g in request.gpus
    )
    return replace(request, gpus=gpus)


def with_projector(devices: tuple[DeviceUsage, ...], cost: ProjectorCost) -> tuple:
    """A plan's devices with the projector's memory counted where it sits, and the budget it
    was set aside from given back (the plan was made on the reduced budget)."""
    gpu_ids = [d.id for d in devices if d.id != HOST]
    where = gpu_ids[0] if cost.on_gpu and gpu_ids else HOST
    out = []
    for d in devices:
        if d.id == where:
            budget = None if d.budget_bytes is None else d.budget_bytes + cost.total_bytes
            d = replace(d, budget_bytes=budget, projector_bytes=cost.total_bytes)
        out.append(d)
    return tuple(out)


def projector_note(cost: ProjectorCost, n_ctx: int, device_name: str) -> str:
    """One line for the decision's notes: the memory, and what images take of the context."""
    images = n_ctx // max(1, cost.image_tokens)
    return (
        f"The vision projector takes {format_bytes(cost.total_bytes, 2)} on {device_name}; "
        f"an image takes up to {cost.image_tokens:,} tokens of the {n_ctx:,}-token context "
        f"(room for about {images:,} with no text)."
    )
