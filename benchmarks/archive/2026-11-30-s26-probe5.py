"""Session 26's fifth probe: how fast the device machine's disk gives a model file to a cold
page cache, by reading strategy (the Hearth loader's today: 8 threads of buffered 8 MiB preads,
engine/hearth/upload.py; issue 35 asks its cold load no slower than llama.cpp's).

    python benchmarks/archive/2026-11-30-s26-probe5.py MODEL.gguf OUT.json

Each strategy reads the whole file once after `sync; echo 3 > /proc/sys/vm/drop_caches`, into
page-aligned buffers (one per thread, reused), and reports GB/s.
"""

import json
import mmap
import os
import sys
import threading
import time
from pathlib import Path

MIB = 1 << 20
path, out_path = sys.argv[1], sys.argv[2]
size = os.path.getsize(path)


def drop_caches() -> None:
    os.system("sync")
    Path("/proc/sys/vm/drop_caches").write_text("3\n")


def read_all(threads: int, chunk: int, direct: bool = False, willneed: bool = False) -> float:
    drop_caches()
    flags = os.O_RDONLY | (os.O_DIRECT if direct else 0)
    started = time.perf_counter()
    fd = os.open(path, flags)
    if willneed:
        os.posix_fadvise(fd, 0, size, os.POSIX_FADV_WILLNEED)
    pieces = list(range(0, size, chunk))
    lock = threading.Lock()
    nxt = [0]
    errors = []

    def reader():
        buf = mmap.mmap(-1, chunk)
        view = memoryview(buf)
        while True:
            with lock:
                if nxt[0] >= len(pieces):
                    return
                offset = pieces[nxt[0]]
                nxt[0] += 1
            want = min(chunk, size - offset)
            if direct:  # whole 4 KiB blocks: the file's tail read short
                want = -(-want // 4096) * 4096
            got = 0
            try:
                while got < want:
                    n = os.preadv(fd, [view[got:want]], offset + got)
                    if n == 0:
                        break
                    got += n
            except OSError as exc:
                errors.append(repr(exc))
                return

    ts = [threading.Thread(target=reader) for _ in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    os.close(fd)
    seconds = time.perf_counter() - started
    if errors:
        raise RuntimeError(errors[0])
    return size / seconds / 1e9


out = {"bytes": size}
configs = [
    ("buffered 8 x 8 MiB (today)", 8, 8 * MIB, False, False),
    ("buffered 16 x 8 MiB", 16, 8 * MIB, False, False),
    ("buffered 4 x 32 MiB", 4, 32 * MIB, False, False),
    ("buffered 16 x 32 MiB", 16, 32 * MIB, False, False),
    ("buffered 1 x 64 MiB", 1, 64 * MIB, False, False),
    ("willneed + buffered 8 x 8 MiB", 8, 8 * MIB, False, True),
    ("direct 8 x 8 MiB", 8, 8 * MIB, True, False),
    ("direct 16 x 16 MiB", 16, 16 * MIB, True, False),
    ("direct 32 x 8 MiB", 32, 8 * MIB, True, False),
    ("direct 8 x 64 MiB", 8, 64 * MIB, True, False),
    ("buffered 8 x 8 MiB (today), again", 8, 8 * MIB, False, False),
    ("direct 16 x 16 MiB, again", 16, 16 * MIB, True, False),
]
for name, threads, chunk, direct, willneed in configs:
    try:
        out[name] = read_all(threads, chunk, direct, willneed)
    except Exception as exc:  # a filesystem without O_DIRECT, say
        out[name] = repr(exc)
    print(f"{name}: {out[name]}", flush=True)
Path(out_path).write_text(json.dumps(out, indent=1))
