"""Presets in the chat header: a menu of the person's presets (system prompt, sampling, and
optionally the model's context, KV cache and engine), the preset a model's new chats start from,
and the system prompt library.

Choosing a preset sets the chat's settings at once. Its load part, where it has one and it
differs from how the model is loaded, becomes the model's remembered load choice (the one the
Model page keeps) and the model is loaded again through the window's one load policy, which
checks that it fits; during a reply it waits for the next load.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from PySide6.QtCore import QObject, Qt
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QMenu,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from app.chat.settings import CUSTOM, PRESETS
from app.common import banner as b
from app.common.dialogs import answer_buttons
from app.common.file_text import plain_tooltip
from engine.chat.presets import ChatPreset, LoadSettings, PresetError, PresetLibrary
from engine.chat.setting_ranges import NUMBER_SETTINGS
from engine.runtime import protocol as p
from engine.session import RememberedChoice

if TYPE_CHECKING:
    from app.chat.settings import ChatSettingsPanel
    from app.common.engine_bridge import EngineBridge
    from app.common.page_host import PageHost


class PresetsPage(Protocol):
    """What presets use of the chat page (app/chat/view.py's ChatView)."""

    settings_panel: ChatSettingsPanel
    notice: b.Banner
    _bridge: EngineBridge

    @property
    def generating(self) -> bool: ...

    @property
    def system_prompt(self) -> str: ...

    def _on_settings_changed(self) -> None: ...


NO_PRESET = "No preset"


def loaded_settings(loaded: p.ModelLoaded) -> LoadSettings:
    """How `loaded` is loaded now, as a preset's load part."""
    engine = "hearth" if loaded.engine == "Hearth" else "llama"
    type_v = None if loaded.type_v == loaded.type_k else loaded.type_v
    return LoadSettings(loaded.n_ctx, loaded.type_k, type_v, engine)


def with_preset(values: dict[str, Any], preset: ChatPreset) -> dict[str, Any]:
    """Chat settings `values` with what `preset` sets, the sampling preset named to match."""
    out = {**values, **preset.chat_settings()}
    matching = (
        name
        for name, sampling in PRESETS.items()
        if all(abs(float(out.get(k, -1)) - v) < 1e-6 for k, v in sampling.items())
    )
    out["preset"] = next(matching, CUSTOM)
    return out


class SavePresetDialog(QDialog):
    """The name of a new preset, whether it holds the model's load settings, and whether the
    model's new chats start from it."""

    def __init__(self, parent: QWidget, loaded: p.ModelLoaded | None, name: str = ""):
        super().__init__(parent)
        self.setWindowTitle("Save preset")
        self.setObjectName("savePresetDialog")
        self.setAccessibleName("Save preset")
        self.name = QLineEdit(name)
        self.name.setObjectName("presetName")
        self.name.setAccessibleName("Preset name")
        self.name.setPlaceholderText("e.g. Terse coder")
        self.include_load = QCheckBox()
        self.include_load.setObjectName("presetIncludeLoad")
        self.include_load.setAccessibleName("Include how the model is loaded")
        self.for_model = QCheckBox()
        self.for_model.setObjectName("presetForModel")
        self.for_model.setAccessibleName("Use for new chats with this model")
        if loaded is not None:
            model = Path(loaded.path).name
            self.include_load.setText(f"Also load the model with {loaded_settings(loaded).text()}")
            self.for_model.setText(f"Start new chats with {model} from this preset")
            self.for_model.setChecked(True)
        else:
            for box in (self.include_load, self.for_model):
                box.setText("(load a model to tie a preset to it)")
                box.setEnabled(False)
        buttons = answer_buttons(self, QDialogButtonBox.StandardButton.Save)
        layout = QVBoxLayout(self)
        layout.addWidget(QLabel("The system prompt and sampling of this chat, under a name:"))
        layout.addWidget(self.name)
        layout.addWidget(self.include_load)
        layout.addWidget(self.for_model)
        layout.addWidget(buttons)


class PresetPicker(QWidget):
    """The header's preset menu and its actions button."""

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.setObjectName("presetPicker")
        self.combo = QComboBox()
        self.combo.setObjectName("presetCombo")
        self.combo.setAccessibleName("Chat preset")
        self.combo.setToolTip("A preset sets the system prompt and sampling (and, if it says so, "
                              "how the model is loaded)")  # fmt: skip
        # a long preset name must not widen the header: the box keeps ~6 characters
        self.combo.setSizeAdjustPolicy(
            QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon
        )
        self.combo.setMinimumContentsLength(6)
        self.actions_button = QToolButton()
        self.actions_button.setObjectName("presetActions")
        self.actions_button.setText("⋯")
        self.actions_button.setAccessibleName("Presets and system prompts")
        self.actions_button.setToolTip("Save or delete presets; the system prompt library")
        self.actions_button.setPopupMode(QToolButton.ToolButtonPopupMode.InstantPopup)
        self.menu = QMenu(self.actions_button)
        self.menu.setObjectName("presetMenu")
        self.menu.setAccessibleName("Presets and system prompts")
        self.actions_button.setMenu(self.menu)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(2)
        layout.addWidget(self.combo)
        layout.addWidget(self.actions_button)


class ChatPresets(QObject):
    """Presets for one chat page: the picker's contents and what choosing one does."""

    def __init__(
        self, view: PresetsPage, library: PresetLibrary, host: PageHost | None = None
    ) -> None:
        super().__init__(view)
        self._view = view
        self._host = host
        self.library = library
        self.picker = PresetPicker(view)
        self._filling = False
        self.picker.combo.activated.connect(self._on_chosen)
        self.picker.menu.aboutToShow.connect(self._fill_menu)
        self.refresh()

    # -- what the page asks ---------------------------------------------------------------------

    def for_new_chat(self, values: dict[str, Any], model_path: str | None) -> dict[str, Any]:
        """A new chat's settings: `values`, then the model's preset if it has one (shown)."""
        preset = self.library.preset_for_model(model_path) if model_path else None
        self.refresh(preset.name if preset else None)
        return with_preset(values, preset) if preset else values

    def show_none(self) -> None:
        """An existing chat was opened: its own settings stand, whatever preset made them."""
        self.refresh(None)

    def refresh(self, current: str | None = None) -> None:
        combo = self.picker.combo
        self._filling = True
        try:
            combo.clear()
            combo.addItem(NO_PRESET, None)
            for preset in self.library.presets():
                combo.addItem(preset.name, preset.name)
                if preset.load is not None:
                    combo.setItemData(
                        combo.count() - 1,
                        plain_tooltip(f"Loads the model with {preset.load.text()}"),
                        Qt.ItemDataRole.ToolTipRole,
                    )
            combo.setCurrentIndex(max(0, combo.findData(current)) if current else 0)
        finally:
            self._filling = False

    @property
    def current(self) -> str | None:
        return self.picker.combo.currentData()

    # -- choosing, saving, deleting -------------------------------------------------------------

    def apply(self, name: str) -> None:
        """Set this chat's settings from preset `name`, and its load part if it has one."""
        preset = self.library.preset(name)
        if preset is None:
            self.refresh()
            return
        panel = self._view.settings_panel
        panel.set_values(with_preset(panel.values(), preset))
        self._view._on_settings_changed()  # kept with the open chat, as a change by hand is
        self.refresh(name)
        self._apply_load(preset)

    def save_current(self, name: str, *, include_load: bool, for_model: bool) -> bool:
        """Save this chat's system prompt and sampling as preset `name`; True when saved."""
        values = self._view.settings_panel.values()
        loaded = self._view._bridge.model
        preset = ChatPreset(
            name=name,
            system_prompt=values["system_prompt"],
            sampling={k: values[k] for k in NUMBER_SETTINGS if k in values},
            load=loaded_settings(loaded) if include_load and loaded is not None else None,
        )
        try:
            saved = self.library.save_preset(preset)
            if for_model and loaded is not None:
                self.library.use_for_model(loaded.path, saved.name)
        except (PresetError, OSError) as exc:
            self._view.notice.show_message(b.ERROR, "The preset was not saved", _reason(exc))
            return False
        self.refresh(saved.name)
        return True

    def use_for_loaded_model(self, name: str | None) -> None:
        loaded = self._view._bridge.model
        if loaded is None:
            return
        try:
            self.library.use_for_model(loaded.path, name)
        except (PresetError, OSError) as exc:
            self._view.notice.show_message(b.ERROR, "The preset was not changed", _reason(exc))

    def delete(self, name: str) -> None:
        try:
            self.library.delete_preset(name)
        except OSError as exc:
            self._view.notice.show_message(b.ERROR, "The preset was not deleted", _reason(exc))
        self.refresh()

    def use_system_prompt(self, text: str) -> None:
        panel = self._view.settings_panel
        panel.set_values({**panel.values(), "system_prompt": text})
        self._view._on_settings_changed()

    def save_system_prompt(self, name: str) -> bool:
        try:
            self.library.save_system_prompt(name, self._view.system_prompt)
        except (PresetError, OSError) as exc:
            self._view.notice.show_message(b.ERROR, "The system prompt was not saved", _reason(exc))
            return False
        return True

    # -- the menu and the dialogs ---------------------------------------------------------------

    def _on_chosen(self, _index: int) -> None:
        if self._filling:
            return
        name = self.current
        if name is not None:
            self.apply(name)

    def _fill_menu(self) -> None:
        menu = self.picker.menu
        menu.clear()
        menu.addAction("Save these settings as a preset…", self.ask_save)
        name, loaded = self.current, self._view._bridge.model
        if loaded is not None:
            model = Path(loaded.path).name
            tied = self.library.preset_for_model(loaded.path)
            if name is not None:
                use = menu.addAction(f"Start new chats with {model} from “{name}”")
                use.setCheckable(True)
                use.setChecked(tied is not None and tied.name == name)
                use.toggled.connect(lambda on: self.use_for_loaded_model(name if on else None))
            elif tied is not None:
                menu.addAction(
                    f"Stop starting {model}'s chats from “{tied.name}”",
                    lambda: self.use_for_loaded_model(None),
                )
        if name is not None:
            menu.addAction(f"Delete preset “{name}”", lambda: self.delete(name))
        menu.addSeparator()
        prompts = menu.addMenu("System prompt library")
        prompts.setAccessibleName("System prompt library")
        for prompt in self.library.system_prompts():
            action = prompts.addAction(prompt.name, lambda t=prompt.text: self.use_system_prompt(t))
            action.setToolTip(prompt.text)
        prompts.setToolTipsVisible(True)
        menu.addAction("Save this system prompt to the library…", self.ask_save_prompt)

    def ask_save(self) -> None:
        dialog = SavePresetDialog(self._view, self._view._bridge.model, self.current or "")
        if dialog.exec() == QDialog.DialogCode.Accepted:
            self.save_current(
                dialog.name.text(),
                include_load=dialog.include_load.isChecked(),
                for_model=dialog.for_model.isChecked(),
            )

    def ask_save_prompt(self) -> None:
        from PySide6.QtWidgets import QInputDialog

        name, ok = QInputDialog.getText(self._view, "Save system prompt", "Name in the library:")
        if ok:
            self.save_system_prompt(name)

    # -- the load part --------------------------------------------------------------------------

    def _apply_load(self, preset: ChatPreset) -> None:
        loaded = self._view._bridge.model
        if preset.load is None or loaded is None or preset.load == loaded_settings(loaded):
            return
        if self._host is None:
            return  # a chat page alone (tests): nothing to load through
        remembered = self._host.opener.remembered
        current = remembered.get(loaded.path)
        base = current.to_dict() if current is not None else {}
        load = preset.load
        choice = RememberedChoice.from_dict(
            {**base, "n_ctx": load.n_ctx, "kv_type": load.kv_type, "type_v": load.type_v,
             "engine": load.engine}
        )  # fmt: skip
        if choice is None:
            self._view.notice.show_message(
                b.ERROR,
                f"“{preset.name}” cannot load this model as it says",
                f"The {'Hearth engine' if load.engine == 'hearth' else 'llama.cpp'} does not "
                f"hold a KV cache of {load.kv_type}/{load.type_v or load.kv_type}. Its chat "
                "settings were applied; save the preset again from a model loaded as you want.",
            )
            return
        remembered.put(loaded.path, choice)
        model = Path(loaded.path).name
        if self._view.generating:
            self._view.notice.show_message(
                b.INFO, f"“{preset.name}”: {load.text()}", f"{model} loads this way next time."
            )
            return
        self._host.open_model_file(loaded.path)
        self._view.notice.show_message(
            b.INFO, f"Loading {model} again for “{preset.name}”", f"With {load.text()}."
        )


def _reason(exc: Exception) -> str:
    if isinstance(exc, OSError):
        return f"{exc.strerror or exc}. Check that Hearth's data folder is writable."
    return str(exc)
