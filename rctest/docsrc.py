"""The document's own code, taken from docs/control-page.md as it is."""
import os
import re

from . import ROOT

DOC = os.path.join(ROOT, "docs", "control-page.md")


def example_source():
    """The one ```python block under "### A complete executor"."""
    with open(DOC) as f:
        text = f.read()
    part = text.split("### A complete executor", 1)[1]
    blocks = re.findall(r"```python\n(.*?)```", part, re.S)
    assert blocks, "no python block under 'A complete executor'"
    return blocks[0]
