"""Opening a model: the machine as it is, the person's remembered choice, and the one load policy
that turns them into what the engine worker loads. Qt-free; used by the window, the CLI and the
server alike.

    machine = snapshot_machine()                          # once; the window shares one
    decision = plan_load(path, machine, RememberedSettings().get(path))
    decision.params                                       # ModelParams, or None: nothing fits
"""

from engine.session.load_policy import (
    DEFAULT_CONTEXT,
    MIN_CONTEXT,
    LoadDecision,
    LoadOption,
    PlanSource,
    best_fit,
    choice_from,
    plan_load,
    same_model,
    sibling_files,
)
from engine.session.machine import MachineSnapshot, snapshot_machine
from engine.session.model_file import UnusableModelFile, check_model_file
from engine.session.remembered import (
    ChatFormats,
    RememberedChoice,
    RememberedSettings,
    default_settings_path,
)

__all__ = [
    "DEFAULT_CONTEXT",
    "MIN_CONTEXT",
    "ChatFormats",
    "LoadDecision",
    "LoadOption",
    "MachineSnapshot",
    "PlanSource",
    "RememberedChoice",
    "RememberedSettings",
    "UnusableModelFile",
    "best_fit",
    "check_model_file",
    "choice_from",
    "default_settings_path",
    "plan_load",
    "same_model",
    "sibling_files",
    "snapshot_machine",
]
