"""`hearth plan --load` on the CPU: the worker loads as planned and llama.cpp's own buffer sizes
come back beside the prediction."""

import argparse
import io
import re

from engine.cli import plan_cmd
from engine.cli.plan_apply import load_and_report
from engine.planner import Planner
from engine.starter_model import starter_model_path


def test_the_planned_load_allocates_what_the_plan_predicts():
    args = argparse.Namespace(
        models=[str(starter_model_path())], vram=None, ram=None, ctx=4096, min_ctx=2048,
        prefer="quality", kv="f16,q8_0,q4_0", flash_attn="auto", backend="cuda",
        bandwidth=None, json=False, load=True,
    )  # fmt: skip
    infos = [plan_cmd.read(m) for m in args.models]
    plan = Planner(infos).plan(plan_cmd.build_request(args))
    assert plan.fits
    out = io.StringIO()
    assert load_and_report(plan, out) == 0
    text = out.getvalue()
    rows = dict(re.findall(r"^  (CPU\S*)\s+(.+)$", text, flags=re.M))
    model, kv, compute, _ = (float(x) for x in rows["CPU"].split())
    mapped_model = float(rows["CPU_Mapped"].split()[0])
    host = plan.devices[0]
    mib = 1024 * 1024
    assert abs(kv - host.kv_bytes / mib) < 0.5
    assert abs(compute - host.compute_bytes / mib) < 0.5
    assert abs(model + mapped_model - host.weights_bytes / mib) < 0.5
