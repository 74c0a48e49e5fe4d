"""Docstrings assembled from shared blocks of text."""

import re


def format_doc(doc, **blocks):
    """``doc.format(**blocks)``, each block re-indented to ``doc``'s indentation.

    The blocks are written for a class docstring indented by 4 spaces (their
    lines after the first start with 4 spaces or more).  From Python 3.13 the
    compiler strips the common indentation of docstrings, so the blocks are
    shifted to match the "Parameters" header; otherwise they would be 4
    spaces too deep, and ``help()`` and numpydoc would misread the sections.
    """
    match = re.search(r"^([ \t]*)Parameters\n", doc, re.M)
    indent = match.group(1) if match else "    "
    if indent != "    ":
        blocks = {name: _reindent(text, indent) if isinstance(text, str) else text
                  for name, text in blocks.items()}
    return doc.format(**blocks)


def _reindent(text, indent):
    first, *rest = text.split("\n")
    return "\n".join([first] + [indent + line[4:] if line.startswith("    ") else line
                                for line in rest])
