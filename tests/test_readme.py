"""The usage example in the README runs as written."""

import re

from codegen.paths import REPO_ROOT


def test_readme_usage_examples_run_verbatim():
    text = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    assert blocks, "README has no python example"
    assert "@app.tool" in blocks[0] and "Client(" in blocks[0], "the README opens with an App"
    assert any("ClientSession" in block for block in blocks), "the README shows a session"
    for block in blocks:
        exec(compile(block, "README.md", "exec"), {})


def test_readme_commands_are_the_ones_ci_runs():
    readme = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    ci = (REPO_ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert "make generate" in readme and "make test" in readme
    assert re.search(r"^make test$", ci, flags=re.M)


def test_the_guides_examples_run_verbatim():
    for guide in ("docs/projection.md",):
        text = (REPO_ROOT / guide).read_text(encoding="utf-8")
        blocks = re.findall(r"```python\n(.*?)```", text, flags=re.S)
        assert blocks, f"{guide} has no python example"
        for block in blocks:
            exec(compile(block, guide, "exec"), {})
