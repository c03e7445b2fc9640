"""Load settings remembered per model file: one small JSON file, keyed by the model's full path.

What is remembered is what the person chose on the Model page (context, KV type, flash
attention, GPU layers, MoE experts in RAM, the VRAM budget), not a plan: at the next load the
planner checks that the choice still fits this machine as it is now.

A damaged file is set aside (renamed *.bad) rather than failing: settings are a convenience, and
the planner's best fit is always there to start from again.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from engine.enums import KV_TYPES, KVType
from engine.files import write_json_atomic
from engine.hearth.capabilities import K_FORMATS, V_FORMATS
from engine.paths import data_dir
from engine.planner.manual import ManualChoice

# (K types, V types) each engine holds
_KV_TYPES = {"llama": (KV_TYPES, KV_TYPES), "hearth": (K_FORMATS, V_FORMATS)}


def default_settings_path() -> Path:
    return data_dir() / "model-settings.json"


@dataclass(frozen=True)
class RememberedChoice:
    """A person's choice for one model, as stored."""

    n_ctx: int
    kv_type: str = KVType.F16
    flash_attn: bool = True
    n_gpu_layers: int | None = None  # None: as many as fit
    n_cpu_expert_layers: int = 0
    vram_budget_bytes: int | None = None  # None: the GPUs' free memory less the margin
    engine: str = "llama"  # "llama" or "hearth"
    type_v: str | None = None  # the V cache's type; None: as kv_type (K)

    @property
    def manual_choice(self) -> ManualChoice:
        return ManualChoice(
            n_ctx=self.n_ctx,
            kv_type=self.kv_type,
            flash_attn=self.flash_attn,
            n_gpu_layers=self.n_gpu_layers,
            n_cpu_expert_layers=self.n_cpu_expert_layers,
            type_v=self.type_v,
            engine=self.engine,
        )

    @property
    def kv_text(self) -> str:
        """ "q8_0", or "K q8 / V rot4" when K and V differ."""
        v = self.type_v or self.kv_type
        return self.kv_type if v == self.kv_type else f"K {self.kv_type} / V {v}"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RememberedChoice | None:
        """None for an entry that is not a usable choice (hand-edited, or from an old version)."""
        try:
            n_ctx = int(data["n_ctx"])
            kv_type = str(data.get("kv_type", KVType.F16))
            layers = data.get("n_gpu_layers")
            budget = data.get("vram_budget_bytes")
            choice = cls(
                n_ctx=n_ctx,
                kv_type=kv_type,
                flash_attn=bool(data.get("flash_attn", True)),
                n_gpu_layers=None if layers is None else int(layers),
                n_cpu_expert_layers=int(data.get("n_cpu_expert_layers", 0)),
                vram_budget_bytes=None if budget is None else int(budget),
                engine=str(data.get("engine", "llama")),
                type_v=None if data.get("type_v") is None else str(data["type_v"]),
            )
        except (KeyError, TypeError, ValueError):
            return None
        k_types, v_types = _KV_TYPES.get(choice.engine, ((), ()))
        if (
            choice.n_ctx <= 0
            or choice.kv_type not in k_types
            or (choice.type_v is not None and choice.type_v not in v_types)
            or choice.n_cpu_expert_layers < 0
        ):
            return None
        return choice


class _JsonMap:
    """One small JSON object keyed by the model's full path."""

    def __init__(self, path: Path):
        self.path = path

    def _read(self) -> dict[str, Any]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}
        except (OSError, ValueError):
            self.path.replace(self.path.with_suffix(".bad"))
            return {}
        return data if isinstance(data, dict) else {}

    def _value(self, model_path: str | Path) -> Any:
        return self._read().get(str(Path(model_path).resolve()))

    def _put(self, model_path: str | Path, value: Any) -> None:
        data = self._read()
        data[str(Path(model_path).resolve())] = value
        write_json_atomic(self.path, data)

    def forget(self, model_path: str | Path) -> None:
        data = self._read()
        if data.pop(str(Path(model_path).resolve()), None) is not None:
            write_json_atomic(self.path, data)


class RememberedSettings(_JsonMap):
    """The Model page's choice per model file."""

    def __init__(self, path: str | Path | None = None):
        super().__init__(Path(path) if path is not None else default_settings_path())

    def get(self, model_path: str | Path) -> RememberedChoice | None:
        value = self._value(model_path)
        return RememberedChoice.from_dict(value) if isinstance(value, dict) else None

    def put(self, model_path: str | Path, choice: RememberedChoice) -> None:
        self._put(model_path, choice.to_dict())


class ChatFormats(_JsonMap):
    """For models without a chat template: the format the person chose (a llama.cpp built-in's
    name, or plain completion), per model file."""

    def __init__(self, path: str | Path | None = None):
        super().__init__(Path(path) if path is not None else data_dir() / "chat-formats.json")

    def get(self, model_path: str | Path) -> str | None:
        value = self._value(model_path)
        return value if isinstance(value, str) and value else None

    def put(self, model_path: str | Path, chat_format: str) -> None:
        self._put(model_path, chat_format)
