"""The test suite never imports benchmarks/: what tests and benchmarks share lives in testkit/,
and a benchmark script's own checks live beside it (benchmarks/tests, run by hand). import-linter
cannot see tests/ (not a package it is given), so this reads the files."""

import re
from pathlib import Path

TESTS = Path(__file__).resolve().parent
IMPORT = re.compile(r"^\s*(from|import)\s+benchmarks(\.|\s|$)", re.MULTILINE)
PATH_HACK = re.compile(r"sys\.path\.\w+\(.*benchmarks", re.MULTILINE)


def offenders(root: Path) -> list[str]:
    found = []
    for path in sorted(root.rglob("*.py")):
        if path == Path(__file__).resolve():  # this file names what it looks for
            continue
        text = path.read_text(encoding="utf-8")
        if IMPORT.search(text) or PATH_HACK.search(text):
            found.append(str(path.relative_to(root)))
    return found


def test_no_test_imports_a_benchmark():
    assert offenders(TESTS) == []


def test_the_check_finds_each_way_in(tmp_path):
    cases = {
        "a.py": "from benchmarks.kernels import attention\n",
        "b.py": "import os\n    import benchmarks\n",
        "c.py": 'sys.path.insert(0, str(root / "benchmarks/backends"))\n',
        "d.py": "from testkit.rpc_helpers import local_helper  # was benchmarks.rpc_helpers\n",
        "e.py": "import benchmarks_like_name\n",
    }
    for name, text in cases.items():
        (tmp_path / name).write_text(text)
    assert offenders(tmp_path) == ["a.py", "b.py", "c.py"]
