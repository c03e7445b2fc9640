"""From request fields to engine settings, with the server's bounds: every number a request
can send is checked here, and a value out of bounds gets a 400 saying the bound."""

from __future__ import annotations

import re
from pathlib import Path

from engine.paths import data_dir
from engine.runtime import protocol as p
from engine.server.config import Limits
from engine.server.errors import APIError


def max_tokens_of(value: int | None, limits: Limits, param: str = "max_tokens") -> int:
    if value is None:
        return limits.default_max_tokens
    if value < 1:
        raise APIError(400, f"{param} must be at least 1 (it was {value}).", param=param)
    if value > limits.max_tokens:
        raise APIError(
            400, f"{param} is {value}; this server allows at most {limits.max_tokens}.", param=param
        )
    return value


def n_of(value: int, limits: Limits) -> int:
    if not 1 <= value <= limits.max_n:
        raise APIError(400, f"n must be between 1 and {limits.max_n} (it was {value}).", param="n")
    return value


def stop_of(value: str | list[str] | None, limits: Limits) -> tuple[str, ...]:
    stops = [value] if isinstance(value, str) else list(value or [])
    if len(stops) > limits.max_stop_strings:
        raise APIError(
            400, f"At most {limits.max_stop_strings} stop strings are taken.", param="stop"
        )
    if any(len(s) > limits.max_stop_chars for s in stops):
        raise APIError(
            400, f"A stop string is over {limits.max_stop_chars} characters.", param="stop"
        )
    return tuple(s for s in stops if s)


def pooled_inputs_of(inputs: list[str], limits: Limits, param: str) -> tuple[str, ...]:
    """Texts to embed (or documents to rerank): 1 to the server's limit, none empty."""
    if not 1 <= len(inputs) <= limits.max_embedding_inputs:
        raise APIError(400, f"Send 1 to {limits.max_embedding_inputs} inputs.", param=param)
    if any(not text for text in inputs):
        raise APIError(400, f"An item of {param} is empty; send text.", param=param)
    return tuple(inputs)


def top_logprobs_of(wanted: bool, top: int | None, limits: Limits) -> int:
    """-1: none; otherwise how many alternatives per token."""
    if not wanted:
        return -1
    top = top or 0
    if not 0 <= top <= limits.max_top_logprobs:
        raise APIError(
            400,
            f"top_logprobs must be between 0 and {limits.max_top_logprobs}.",
            param="top_logprobs",
        )
    return top


def sampling_of(body, *, grammar: str = "", seed_offset: int = 0) -> p.SamplingParams:
    """Sampling settings from a request's fields; unset fields keep Hearth's defaults."""
    defaults = p.SamplingParams()
    seed = defaults.seed if body.seed is None else (body.seed + seed_offset) & 0xFFFFFFFF
    return p.SamplingParams(
        temperature=_given(body.temperature, defaults.temperature),
        top_k=_given(body.top_k, defaults.top_k),
        top_p=_given(body.top_p, defaults.top_p),
        min_p=_given(body.min_p, defaults.min_p),
        repeat_penalty=_given(body.repeat_penalty, defaults.repeat_penalty),
        presence_penalty=_given(body.presence_penalty, 0.0),
        frequency_penalty=_given(body.frequency_penalty, 0.0),
        seed=seed,
        grammar=grammar,
    )


def _given(value, default):
    return default if value is None else value


def served_model_id(model_path: str) -> str:
    """The name the API gives the loaded model: its file name without `.gguf`."""
    name = Path(model_path).name
    return name[: -len(".gguf")] if name.lower().endswith(".gguf") else name


_SPLIT_PART = re.compile(r"-\d{5}-of-\d{5}$", re.IGNORECASE)
_QUANT = re.compile(
    r"(?:^|[-_.])((?:IQ|Q)\d_[A-Z0-9_]+|Q\d_\d|F16|BF16|F32|MXFP4(?:_MOE)?)$", re.IGNORECASE
)


def model_names(model_path: str, library: Path | None = None) -> tuple[str, ...]:
    """Every name a client may use for the model at `model_path`, lower-cased, as the Library
    shows and people type them: the file name with or without `.gguf` (a split set's without its
    `-00001-of-00003`); for a file the Library downloaded (models/OWNER/REPO/FILE) or the Hugging
    Face cache holds (models--OWNER--REPO/snapshots/REV/FILE) also OWNER/REPO, OWNER/REPO/FILE and
    Ollama's REPO:QUANT and OWNER/REPO:QUANT. `library`: the models folder (the default one
    where None). Pure: the names are compared, never opened."""
    path = Path(model_path)
    stem = served_model_id(model_path)
    stem = _SPLIT_PART.sub("", stem)
    names = [stem, f"{stem}.gguf"]
    repo = _repo_of(path, library if library is not None else data_dir() / "models")
    if repo:
        names += [repo, f"{repo}/{path.name}", f"{repo}/{stem}"]
        quant = _QUANT.search(stem)
        if quant:
            names += [f"{repo}:{quant.group(1)}", f"{repo.split('/')[1]}:{quant.group(1)}"]
    return tuple(dict.fromkeys(n.lower() for n in names))


def _repo_of(path: Path, library: Path) -> str:
    """OWNER/REPO where the path's folders say it ("" where they do not)."""
    for part in path.parts:
        if part.startswith("models--") and part.count("--") == 2:
            _, owner, repo = part.split("--")
            return f"{owner}/{repo}"
    if len(path.parts) >= 3 and path.parent.parent.parent == library:
        return f"{path.parts[-3]}/{path.parts[-2]}"
    return ""


def check_model_name(requested: str, loaded: p.ModelLoaded) -> str:
    """The served model's id, if `requested` names it (or names nothing: model_names gives
    every name it goes by); 404 otherwise. A name is only ever compared with the loaded model's:
    never opened as a path."""
    served = served_model_id(loaded.path)
    name = requested.strip()
    if name.endswith(":latest"):  # Ollama clients add the tag
        name = name[: -len(":latest")]
    if not name or name.lower() in model_names(loaded.path):
        return served
    raise APIError(
        404,
        f"The model {requested[:100]!r} is not loaded here; this server runs {served!r}. Use "
        "that name (GET /v1/models lists it), or load the other model in Hearth.",
        param="model",
        code="model_not_found",
    )
