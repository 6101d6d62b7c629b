"""The README's example runs as written: the first ```python block under its
``## Example`` heading is extracted and executed on the CPU, in a fresh
namespace (the block imports what it needs and asserts its own results).
A README without that heading or block fails here, as does a block that
raises."""
import os
import re

import pytest

README = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "README.md")
HEADING = "## Example"


def example_block(text, heading=HEADING):
    """The first ```python block between ``heading`` (a line of its own) and
    the next heading of the same level; fails the test where there is none."""
    lines = text.splitlines()
    try:
        start = next(i for i, line in enumerate(lines) if line.rstrip() == heading)
    except StopIteration:
        pytest.fail(f"README.md has no `{heading}` heading")
    level = heading.split(" ", 1)[0] + " "
    section = []
    for line in lines[start + 1:]:
        if line.startswith(level):
            break
        section.append(line)
    m = re.search(r"^```python[ \t]*\n(.*?)^```[ \t]*$", "\n".join(section) + "\n", re.S | re.M)
    if m is None or not m.group(1).strip():
        pytest.fail(f"README.md's `{heading}` section has no ```python block")
    return m.group(1)


def test_extractor_finds_the_block_of_its_own_section():
    text = "# t\n## Example\nprose\n```bash\nls\n```\n```python\nx = 1\n```\n```python\nx = 2\n```\n## Next\n"
    assert example_block(text) == "x = 1\n"


@pytest.mark.parametrize("text", [
    "# t\n## Quick start\n```python\nx = 1\n```\n",            # no heading
    "# t\n## Examples\n```python\nx = 1\n```\n",                # another heading
    "# t\n## Example\nprose only\n## Next\n```python\nx = 1\n```\n",  # the block is in the next section
    "# t\n## Example\n```python\n```\n",                          # an empty block
])
def test_extractor_fails_without_a_block(text):
    with pytest.raises(pytest.fail.Exception):
        example_block(text)


def test_readme_example_runs_on_cpu(capsys):
    with open(README, encoding="utf-8") as f:
        code = example_block(f.read())
    exec(compile(code, f"{README} ({HEADING})", "exec"), {"__name__": "readme_example"})
    assert capsys.readouterr().out.strip(), "the example prints its result"
