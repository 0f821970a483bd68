"""Record the golden outputs: ``python -m tests.golden.record [--shared DIR] [--only SUBSTRING]``.

Writes ``tests/golden/outputs/<input>.json`` (one object per input: command -> output). Commit
a change to these files only with a message that says which number changed and why.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

from tests.golden.cases import GOLDEN, cases, golden_file, run_case


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    repo = Path(__file__).resolve().parents[2]
    parser.add_argument("--shared", type=Path,
                        default=Path(os.environ.get("TRACE_REPORT_SHARED", repo.parent / "shared")))
    parser.add_argument("--only", default="", help="Only cases whose key contains this text.")
    args = parser.parse_args(argv)
    shared = args.shared.resolve()
    GOLDEN.mkdir(parents=True, exist_ok=True)
    files: dict[Path, dict[str, object]] = {}
    for key, case_argv in cases(shared):
        if args.only not in key:
            continue
        path = golden_file(key)
        if path not in files:
            files[path] = json.loads(path.read_text()) if path.is_file() else {}
        t0 = time.perf_counter()
        files[path][key] = {"argv": case_argv, **run_case(case_argv, shared)}
        print(f"{time.perf_counter() - t0:6.2f}s {key}", file=sys.stderr)
    for path, data in files.items():
        path.write_text(json.dumps(dict(sorted(data.items())), indent=1, sort_keys=False) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
