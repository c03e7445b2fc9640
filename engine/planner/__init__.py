"""VRAM planner: which file, context, KV cache types, GPU layers and MoE offload fit the devices.

    from engine.planner import Planner, PlanRequest, DeviceBudget, plan, request_for_devices
    request = request_for_devices(detect_devices(), target_ctx=32768)
    result = plan([read_model_info(path)], request)     # -> Plan
    result.settings.model_params()                       # what the worker loads with

Pure functions: headers and device figures in, a Plan out; nothing is loaded or probed here.
The memory model (profile, kv_cache, compute, memory, tables) follows llama.cpp's allocation
in llama-cpp-python 0.3.36; docs/planner-accuracy.md holds the measured accuracy.
"""

from engine.planner.memory import Config, DeviceMemory, MemoryEstimate, estimate
from engine.planner.planner import Planner, plan, plan_profiles, request_for_devices, safety_margin
from engine.planner.profile import ModelProfile
from engine.planner.profile_dims import build_profile
from engine.planner.records import (
    DOES_NOT_FIT,
    FITS,
    HIGH,
    LOW,
    PREFERENCES,
    Alternative,
    Choice,
    DeviceBudget,
    DeviceUsage,
    Plan,
    PlanRequest,
)
from engine.planner.settings import LoadSettings, expert_override_pattern

__all__ = [
    "DOES_NOT_FIT",
    "FITS",
    "HIGH",
    "LOW",
    "PREFERENCES",
    "Alternative",
    "Choice",
    "Config",
    "DeviceBudget",
    "DeviceMemory",
    "DeviceUsage",
    "LoadSettings",
    "MemoryEstimate",
    "ModelProfile",
    "Plan",
    "PlanRequest",
    "Planner",
    "build_profile",
    "estimate",
    "expert_override_pattern",
    "plan",
    "plan_profiles",
    "request_for_devices",
    "safety_margin",
]
