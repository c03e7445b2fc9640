"""Decode speed with the GUI attached: the real main window, bridge and engine worker, the reply
streaming into the chat view and rendered as markdown on every update, as a user sees it.

    python benchmarks/gui_decode.py MODEL [--tokens 1024] [--reps 3] [--kv f16]
        [--llama-bench PATH] [--json OUT] [--screenshot PNG]

All layers go to the GPU with flash attention on (a CPU-only build runs on the CPU). A short
untimed reply warms the engine up, then each measured reply is a new chat with the same prompt,
greedy, run to exactly `--tokens` tokens: the engine client used here asks the worker to ignore
end-of-generation tokens (a model with random weights may end a reply at once). Nothing the GUI
does or shows depends on that flag, and the app itself is unchanged: the bridge takes the client
through its `client_factory`.

Two decode rates come out of each reply:
- worker: GenerationStats, the worker's clocks around llama.cpp's calls (`hearth bench` reports
  the same figure);
- GUI: the text pieces the chat view took in, after the first update, over the time between the
  first and the last update in the GUI thread (each time taken once the view has the text and
  has rendered its markdown). A piece is one token's text; a token whose bytes end inside a
  UTF-8 character is counted with the piece that completes it, so this rate can only read low.
  The bridge joins text into at most one update per 33 ms, so the last update may come up to
  33 ms after the last token.

When llama-bench is on PATH (or given), `llama-bench -m MODEL -p 0 -n 128 -fa 1 -ngl 99 -r 3
-o json` runs on the same file after the GUI is closed, and the ratios are printed.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import platform
import re
import statistics
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from PySide6.QtCore import QEvent, QEventLoop, QObject, QTimer, qVersion  # noqa: E402
from PySide6.QtGui import QGuiApplication  # noqa: E402
from PySide6.QtWidgets import QApplication  # noqa: E402

import app.chat.message_delegate as message_delegate  # noqa: E402
from app.common.engine_bridge import EngineBridge  # noqa: E402
from app.shell.main_window import MainWindow  # noqa: E402
from engine.benchmark.llama_bench import (  # noqa: E402
    LlamaBenchError,
    find_llama_bench,
    run_llama_bench,
)
from engine.benchmark.report import Comparison, format_table  # noqa: E402
from engine.runtime import protocol as p  # noqa: E402
from engine.runtime.client import EngineClient  # noqa: E402

DEFAULT_PROMPT = (
    "Write a short guide to Python list comprehensions: a heading, a bulleted list of three "
    "tips, a small table, and a fenced code block with an example."
)
GREEDY = p.SamplingParams(temperature=0.0)
TARGET = ">= 0.95"
LOAD_TIMEOUT_S = 600.0
REPLY_TIMEOUT_S = 1800.0


@dataclass(frozen=True)
class GuiDecodeConfig:
    model: str
    tokens: int = 1024
    reps: int = 3
    kv: str = "f16"
    gpu_layers: int = -1  # all
    flash_attn: str = "on"
    prompt: str = DEFAULT_PROMPT
    ignore_eos: bool = True
    warmup_tokens: int = 16
    window_size: tuple[int, int] = (1100, 760)
    screenshot: str | None = None  # a PNG of the window after the last reply

    @property
    def n_ctx(self) -> int:
        need = max(self.tokens, self.warmup_tokens) + 512  # room for the prompt
        return -(-need // 256) * 256


class GuiBenchFailed(Exception):
    pass


class EosIgnoringClient(EngineClient):
    """The real engine client; every reply runs to its max_tokens."""

    def generate(self, **kwargs) -> int:
        return super().generate(**{**kwargs, "ignore_eos": True})


class _RenderCounter:
    """Counts and times the delegate's calls of render_markdown (restored by `remove`)."""

    def __init__(self) -> None:
        self.calls = 0
        self.seconds = 0.0
        self._original = message_delegate.render_markdown

        def counted(*args, **kwargs):
            started = time.perf_counter()
            try:
                return self._original(*args, **kwargs)
            finally:
                self.seconds += time.perf_counter() - started
                self.calls += 1

        message_delegate.render_markdown = counted

    def remove(self) -> None:
        message_delegate.render_markdown = self._original


class _PaintCounter(QObject):
    """Counts paint events of the transcript's viewport."""

    def __init__(self, watched: QObject) -> None:
        super().__init__(watched)
        self.paints = 0
        watched.installEventFilter(self)

    def eventFilter(self, _watched: QObject, event: QEvent) -> bool:
        if event.type() == QEvent.Type.Paint:
            self.paints += 1
        return False


class _TextProbe:
    """When each text update reached the chat view, and how many pieces it carried."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.updates: list[tuple[float, int]] = []
        self.text: list[str] = []

    def __call__(self, _request_id: int, text: str, n_pieces: int) -> None:
        self.updates.append((time.perf_counter(), n_pieces))
        self.text.append(text)


def _wait(done, failed, timeout_s: float, what: str):
    """Run the event loop until one of the `done` or `failed` signals fires; its argument."""
    loop = QEventLoop()
    outcome: list = []

    def slot_for(ok: bool):
        def slot(*args):
            if not outcome:
                outcome.append((ok, args))
            loop.quit()

        return slot

    slots = [(s, slot_for(True)) for s in done] + [(s, slot_for(False)) for s in failed]
    for signal, slot in slots:
        signal.connect(slot)
    timer = QTimer()
    timer.setSingleShot(True)
    timer.timeout.connect(loop.quit)
    timer.start(int(timeout_s * 1000))
    try:
        loop.exec()
    finally:
        timer.stop()
        for signal, slot in slots:
            signal.disconnect(slot)
    if not outcome:
        raise GuiBenchFailed(f"{what}: nothing happened within {timeout_s:.0f} s")
    ok, args = outcome[0]
    if not ok:
        event = args[0] if args else None
        lines = "\n".join(getattr(event, "last_lines", ())[-8:])
        raise GuiBenchFailed(f"{what} failed: {getattr(event, 'message', event)}\n{lines}")
    return args[0] if args else None


def run_gui_decode(config: GuiDecodeConfig) -> dict:
    """Open the main window on `config.model` and measure its replies (needs a QApplication)."""
    if QApplication.instance() is None:
        raise GuiBenchFailed("create the QApplication first")
    bridge = EngineBridge(client_factory=EosIgnoringClient if config.ignore_eos else EngineClient)
    window = MainWindow(bridge)
    window.resize(*config.window_size)
    window.show()
    chat = window.chat_view
    renders = _RenderCounter()
    paints = _PaintCounter(chat.transcript.viewport())
    probe = _TextProbe()
    bridge.token_text.connect(probe)  # after the chat view's own slot: runs once it has the text
    ready: list[p.Ready] = []
    bridge.ready.connect(ready.append)
    try:
        loaded = load_and_warm_up(
            window,
            config,
            p.ModelParams(
                path=config.model,
                n_ctx=config.n_ctx,
                n_gpu_layers=config.gpu_layers,
                flash_attn=config.flash_attn,
                type_k=config.kv,
                type_v=config.kv,
            ),
        )
        runs = []
        for rep in range(config.reps):
            chat.new_chat()
            QApplication.processEvents()
            probe.reset()
            before = (renders.calls, renders.seconds, paints.paints, bridge.flush_count)
            layouts_before = chat.delegate.layouts_built
            sent, done = _reply(chat, bridge, config, config.tokens)
            runs.append(_figures(done, probe, sent, before, renders, paints, bridge))
            runs[-1]["layouts_built"] = chat.delegate.layouts_built - layouts_before
            shown = chat.model.entries()[-1].text
            if shown != "".join(probe.text):
                raise GuiBenchFailed(f"rep {rep}: the chat view's text is not what arrived")
        for _ in range(5):  # the last repaints (the stats line), for the screenshot
            QApplication.processEvents()
        if config.screenshot:
            window.grab().save(config.screenshot)
        return {
            "model": config.model,
            "config": {k: v for k, v in asdict(config).items() if k != "model"},
            "devices": list(loaded.runs_on),
            "gpu_layers": f"{loaded.n_gpu_layers}/{loaded.n_layers}",
            "flash_attn": loaded.flash_attn,
            "cpu": cpu_name(),
            "qt": f"Qt {qVersion()}, platform {QGuiApplication.platformName()}",
            "llama_system_info": ready[0].llama_system_info if ready else "",
            "runs": runs,
            "worker_decode_tok_s": statistics.median(r["worker_tok_s"] for r in runs),
            "gui_decode_tok_s": statistics.median(r["gui_tok_s"] for r in runs),
            "markdown_in_last_reply": _markdown_tags(shown, chat),
        }
    finally:
        renders.remove()
        bridge.token_text.disconnect(probe)
        bridge.shutdown()
        window.close()
        window.deleteLater()


def load_and_warm_up(window, config: GuiDecodeConfig, params: p.ModelParams) -> p.ModelLoaded:
    """Load through the window's bridge, then one short untimed greedy reply (as llama-bench
    warms up); what the worker loaded."""
    bridge, chat = window.bridge, window.chat_view
    bridge.load(params)
    loaded: p.ModelLoaded = _wait(
        [bridge.model_loaded], [bridge.load_failed, bridge.engine_crashed], LOAD_TIMEOUT_S, "load"
    )
    chat.sampling = GREEDY
    _reply(chat, bridge, config, config.warmup_tokens)
    return loaded


def _reply(chat, bridge, config: GuiDecodeConfig, tokens: int) -> tuple[float, p.GenerationDone]:
    """Send the prompt as a user would and wait for the whole reply; (when sent, its end)."""
    chat.max_tokens = tokens
    chat.input.setPlainText(config.prompt)
    sent = time.perf_counter()
    chat.send()
    if not chat.generating:
        raise GuiBenchFailed(f"the chat did not start a reply: {chat.model.entries()[-1].footer}")
    failures = [bridge.generation_failed, bridge.command_failed, bridge.engine_crashed]
    done: p.GenerationDone = _wait([bridge.generation_done], failures, REPLY_TIMEOUT_S, "reply")
    if config.ignore_eos and done.stats.n_generated != tokens:
        raise GuiBenchFailed(
            f"the reply ended after {done.stats.n_generated} of {tokens} tokens "
            f"({done.stop_reason})"
        )
    return sent, done


def _figures(done, probe: _TextProbe, sent: float, before, renders, paints, bridge) -> dict:
    renders_0, render_s_0, paints_0, flushes_0 = before
    (first_at, first_pieces), (last_at, _) = probe.updates[0], probe.updates[-1]
    pieces = sum(n for _, n in probe.updates)
    span = last_at - first_at
    stats: p.GenerationStats = done.stats
    return {
        "worker_tokens": stats.n_generated,
        "worker_tok_s": stats.decode_tokens_per_second,
        "worker_decode_s": stats.decode_seconds,
        "gui_pieces": pieces,
        "gui_first_update_pieces": first_pieces,
        "gui_tok_s": (pieces - first_pieces) / span if span > 0 else 0.0,
        "gui_span_s": span,
        "gui_first_text_s": first_at - sent,  # from the send to the first text in the view
        "gui_updates": len(probe.updates),
        "bridge_flushes": bridge.flush_count - flushes_0,
        "markdown_renders": renders.calls - renders_0,
        "markdown_render_s": renders.seconds - render_s_0,
        "transcript_repaints": paints.paints - paints_0,
        "stop_reason": done.stop_reason,
        "prompt_tokens": stats.n_prompt_tokens,
    }


def _markdown_tags(text: str, chat) -> dict[str, int]:
    """The HTML elements the final reply renders to: whether the reply held markdown at all."""
    rendered = message_delegate.render_markdown(
        text, message_delegate.colors_for(chat.transcript.palette())
    )
    return dict(collections.Counter(re.findall(r"<([a-z][a-z0-9]*)", rendered.html)))


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return f"{line.split(':', 1)[1].strip()} ({os.cpu_count()} threads)"
    except OSError:
        pass
    return platform.processor() or platform.machine()


# -- command line -------------------------------------------------------------------------------


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model", help="GGUF file")
    parser.add_argument("--tokens", type=int, default=1024, help="tokens per measured reply")
    parser.add_argument("--reps", type=int, default=3, help="measured replies (median)")
    parser.add_argument("--kv", default="f16", choices=["f16", "q8_0", "q4_0"])
    parser.add_argument("--gpu-layers", type=int, default=-1)
    parser.add_argument("--prompt", default=DEFAULT_PROMPT)
    parser.add_argument(
        "--stop-at-eos", action="store_true", help="let replies end at the model's end token"
    )
    parser.add_argument("--llama-bench", help="path of llama-bench (default: search PATH)")
    parser.add_argument("--llama-bench-tokens", type=int, default=128, help="its -n")
    parser.add_argument("--no-llama-bench", action="store_true")
    parser.add_argument("--json", metavar="OUT", help="write every figure to this file")
    parser.add_argument("--screenshot", metavar="PNG", help="the window after the last reply")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    # The worker is `python -m engine.runtime.worker`: it must find the repository from any cwd.
    os.environ["PYTHONPATH"] = os.pathsep.join(
        filter(None, [str(REPO), os.environ.get("PYTHONPATH")])
    )
    # Chats and settings go to a folder of their own, never the user's history.
    data = tempfile.TemporaryDirectory(prefix="hearth-gui-bench-")
    os.environ["HEARTH_DATA_DIR"] = data.name
    config = GuiDecodeConfig(
        model=args.model,
        tokens=args.tokens,
        reps=args.reps,
        kv=args.kv,
        gpu_layers=args.gpu_layers,
        prompt=args.prompt,
        ignore_eos=not args.stop_at_eos,
        screenshot=args.screenshot,
    )
    app = QApplication.instance() or QApplication([sys.argv[0]])
    app.setApplicationName("Hearth")
    from app.common.theme import apply_theme

    apply_theme(app)
    try:
        report = run_gui_decode(config)
    except GuiBenchFailed as exc:
        print(f"The GUI benchmark could not run: {exc}", file=sys.stderr)
        return 1
    finally:
        data.cleanup()
    report["llama_bench"] = llama_bench_figures(args, config)
    rows = comparison_rows(report)
    report["rows"] = [r.to_dict() for r in rows]
    print(format_report(report, rows))
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2) + "\n")
    return 0


def llama_bench_figures(args: argparse.Namespace, config: GuiDecodeConfig) -> dict:
    binary = None if args.no_llama_bench else find_llama_bench(args.llama_bench)
    if binary is None:
        return {"note": "llama-bench not found: no ratios"}
    try:
        row = run_llama_bench(
            binary,
            config.model,
            gen=args.llama_bench_tokens,
            reps=3,
            flash_attn=config.flash_attn == "on",
            gpu_layers=99 if config.gpu_layers < 0 else config.gpu_layers,
            type_k=config.kv,
            type_v=config.kv,
        )
    except LlamaBenchError as exc:
        return {"note": f"llama-bench failed: {exc}"}
    return {
        "note": binary,
        "test": row.label,
        "tok_s": row.tokens_per_second,
        "stddev": row.stddev,
    }


def comparison_rows(report: dict) -> list[Comparison]:
    reference = report["llama_bench"].get("tok_s")
    return [
        Comparison("GUI decode", report["gui_decode_tok_s"], "tok/s", reference, TARGET),
        # The engine's own rate while the GUI runs: no target of its own, it shows where a
        # shortfall of the GUI-side rate comes from.
        Comparison("worker decode", report["worker_decode_tok_s"], "tok/s", reference),
    ]


def format_report(report: dict, rows: list[Comparison]) -> str:
    c = report["config"]
    lb = report["llama_bench"]
    header = {
        "model": report["model"],
        "runs on": ", ".join(report["devices"]) or "?",
        "cpu": report["cpu"],
        "gui": report["qt"],
        "settings": f"flash attention {report['flash_attn']}, KV {c['kv']}, layers on GPU "
        f"{report['gpu_layers']}, greedy, {c['tokens']} tokens a reply, median of {c['reps']}",
        "llama-bench": lb["note"]
        + (f" ({lb['test']} ± {lb['stddev']:.1f})" if "test" in lb else ""),
    }
    extra: dict = {}
    for i, r in enumerate(report["runs"]):
        extra[f"reply {i + 1}"] = (
            f"worker {r['worker_tok_s']:.1f} tok/s ({r['worker_tokens']} tokens), "
            f"GUI {r['gui_tok_s']:.1f} tok/s ({r['gui_pieces']} pieces in {r['gui_updates']} "
            f"updates over {r['gui_span_s']:.3f} s), {r['markdown_renders']} markdown renders "
            f"({r['markdown_render_s'] * 1000:.0f} ms), {r['transcript_repaints']} repaints, "
            f"{r['layouts_built']} layouts, first text {r['gui_first_text_s']:.3f} s after send"
        )
    tags = report["markdown_in_last_reply"]
    rendered = ", ".join(f"{k}×{v}" for k, v in sorted(tags.items())) or "-"
    if set(tags) <= {"p", "br"}:
        rendered += " (the model wrote no markdown; it was rendered on every update all the same)"
    extra["last reply renders to"] = rendered
    return format_table(header, rows, extra)


if __name__ == "__main__":
    sys.exit(main())
