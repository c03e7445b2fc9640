import pytest

pytest.importorskip("torch", reason="the Hearth engine needs torch (the kernels extra)")
