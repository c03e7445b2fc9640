import sys
from pathlib import Path

# The runtime tests' helpers (RunningEngine) are shared with these backend checks.
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
