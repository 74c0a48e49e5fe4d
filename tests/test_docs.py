"""The code in the README and the user guide runs as written.

Each document's ```python blocks are executed in order in one namespace, as a
reader would paste them.
"""

import pathlib
import re
import warnings

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
DOCUMENTS = ["README.md", "docs/user_guide.md"]


def python_blocks(path):
    return re.findall(r"```python\n(.*?)```", (ROOT / path).read_text(), flags=re.S)


@pytest.mark.parametrize("document", DOCUMENTS)
def test_document_code_runs(document, capsys):
    blocks = python_blocks(document)
    assert blocks, f"{document} has no python code block"
    namespace = {"__name__": "__docs__"}
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the documented code must not warn
        for block in blocks:
            exec(compile(block, document, "exec"), namespace)
