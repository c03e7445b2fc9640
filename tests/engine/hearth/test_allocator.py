"""The Hearth engine's process starts with torch's allocator on expandable segments, unless the
person set the allocator's variables themselves."""

from __future__ import annotations

import pytest

from engine.hearth import allocator
from engine.hearth.allocator import EXPANDABLE_SEGMENTS, with_expandable_segments
from engine.runtime import client


def test_expandable_segments_where_nothing_is_set():
    env = with_expandable_segments({"PATH": "/bin"}, "linux")
    assert env == {"PATH": "/bin", "PYTORCH_CUDA_ALLOC_CONF": EXPANDABLE_SEGMENTS}


@pytest.mark.parametrize("name", ["PYTORCH_ALLOC_CONF", "PYTORCH_CUDA_ALLOC_CONF"])
def test_a_persons_own_setting_is_kept(name):
    given = {name: "max_split_size_mb:128"}
    assert with_expandable_segments(given, "linux") == given


@pytest.mark.parametrize("platform", ["win32", "darwin"])
def test_nothing_set_where_torch_has_no_expandable_segments(platform):
    assert with_expandable_segments({"PATH": "/bin"}, platform) == {"PATH": "/bin"}


class _Started(Exception):
    pass


def test_the_worker_starts_with_expandable_segments(monkeypatch):
    """EngineClient.start hands the worker process the setting (torch reads it there)."""
    seen = {}

    def popen(command, **options):
        seen.update(options["env"])
        raise _Started

    monkeypatch.setattr(client.subprocess, "Popen", popen)
    monkeypatch.setattr(allocator.sys, "platform", "linux")
    with pytest.raises(_Started):
        client.EngineClient(lambda event: None, env={"HOME": "/tmp"}).start()
    assert seen["PYTORCH_CUDA_ALLOC_CONF"] == EXPANDABLE_SEGMENTS
