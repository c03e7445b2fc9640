"""Chat: turning a conversation into prompt text.

- `format_chat_prompt`: what the engine worker calls; the model's template, else a llama.cpp
  built-in, and a description of which was used (`explain_chat_prompt`: and why the model's
  own was refused; `check_model_template`: the same for a sample chat, when a model loads).
- `render_chat_template`: a GGUF's Jinja chat template, rendered sandboxed and bounded.
- `builtin_template_*`, `apply_builtin_template`: llama.cpp's built-in chat formats.
- `strip_leading_bos`: the BOS convention (see engine.chat.prompt).

Nothing here imports llama_cpp until a built-in format is needed.
"""

from engine.chat.builtin import (
    apply_builtin_template,
    apply_matching_builtin,
    builtin_choice,
    builtin_template_for,
    builtin_template_matching,
    builtin_template_names,
)
from engine.chat.errors import ChatTemplateError
from engine.chat.prompt import (
    ChatPrompt,
    check_model_template,
    explain_chat_prompt,
    format_chat_prompt,
    strip_leading_bos,
)
from engine.chat.template import render_chat_template

__all__ = [
    "ChatPrompt",
    "ChatTemplateError",
    "apply_builtin_template",
    "apply_matching_builtin",
    "builtin_choice",
    "builtin_template_for",
    "builtin_template_matching",
    "builtin_template_names",
    "check_model_template",
    "explain_chat_prompt",
    "format_chat_prompt",
    "render_chat_template",
    "strip_leading_bos",
]
