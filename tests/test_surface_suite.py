"""The surface generator's types held to the official JSON Schema Test Suite (draft-07 and
2020-12, from the package pinned in tests/json_schema_suite.txt): for every case, the generated
type plus its fallback check accepts exactly the valid instances, and the type alone never
refuses a valid one (it is never stricter than the schema). The files left out and the cases
no validator here decides, and why, are listed in tests/_json_schema_suite.py and
docs/surface.md.

Each draft is scored in a process of its own (``python -m tests._json_schema_suite
--score-json DRAFT``): the hundreds of generated types it makes crash msgspec 0.22 when the
interpreter collects them at exit, so that process leaves without collecting them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests._json_schema_suite import DRAFTS, Score

ROOT = Path(__file__).resolve().parent.parent


def scored(draft: str) -> Score:
    done = subprocess.run(
        [sys.executable, "-m", "tests._json_schema_suite", "--score-json", draft],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return Score(**json.loads(done.stdout.splitlines()[-1]))


@pytest.mark.parametrize("draft", list(DRAFTS))
def test_every_case_is_decided_right_and_the_type_is_never_stricter(draft: str) -> None:
    s = scored(draft)
    assert s.wrong == [] and s.right + s.undecidable == s.total
    assert s.undecidable == {"draft7": 0, "draft2020-12": 5}[draft]  # (remote documents)
    assert s.stricter == 0
    assert s.total > 800 and s.exact_groups > s.groups / 3  # (the suite is there, and typed)
