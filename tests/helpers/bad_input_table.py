"""Print ``docs/bad-input.md``: every case of :mod:`bad_input_cases` run through the real CLI.

    python -m tests.helpers.bad_input_table > docs/bad-input.md
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from tests.helpers.bad_input_cases import CASES, render_table, run_case


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="ragexp-bad-input-") as tmp:
        results = {case.id: run_case(case, Path(tmp) / case.id) for case in CASES}
    sys.stdout.write(render_table(results))


if __name__ == "__main__":
    main()
