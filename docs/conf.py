"""Sphinx configuration for datamove's documentation.

Build: ``python -m sphinx -W --keep-going -b html docs docs/_build/html``
(``pip install -e ".[docs]"`` first). The pages' ``>>>`` examples are run as
doctests by ``tests/test_docs.py``.
"""

import json
from pathlib import Path

from docutils.parsers.rst import Directive

import datamove

project = "datamove"
author = "datamove developers"
copyright = "datamove developers"
version = release = datamove.__version__

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.intersphinx",
    "numpydoc",
]

root_doc = "index"
source_suffix = {".rst": "restructuredtext"}
exclude_patterns = ["_build", "api/generated/*.md"]
templates_path = ["_templates"]

# autosummary writes one page per object into api/generated/ at build time
autosummary_generate = True
autosummary_imported_members = False
autodoc_typehints = "none"  # numpydoc's Parameters sections already give the types
autodoc_member_order = "bysource"

# numpydoc renders the docstrings; the class pages list their members through autosummary
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
numpydoc_validation_checks = set()
numpydoc_xref_param_type = False

# no network at build time: intersphinx only resolves when an inventory is cached
intersphinx_mapping = {}

default_role = "py:obj"
# every cross-reference must resolve; these targets are named by docstrings in
# files other engineers own (threads.py, ir/__init__.py, ops.py) and have no page
nitpicky = True
nitpick_ignore = [
    ("py:data", "MAX_THREADS"),
    ("py:mod", "datamove.ir.reader"),
    ("py:mod", "datamove.ir.model"),
    ("py:mod", "datamove.engines"),
    ("py:class", "datamove.rules.dims.Dim"),  # datamove.Dim, as the type aliases spell it
]
# the type aliases of datamove.typing name the standard library's and NumPy's types, which have no page here
# (no intersphinx without the network)
nitpick_ignore_regex = [(r"py:.*", r"(typing|collections\.abc|numpy)\..*")]

html_theme = "pydata_sphinx_theme"
html_title = f"datamove {release}"
html_theme_options = {
    "navigation_with_keys": False,
    "show_toc_level": 2,
    "secondary_sidebar_items": ["page-toc"],
}
html_static_path = []
html_show_sourcelink = False


class BenchResults(Directive):
    """``.. bench-results:: bench/results-2core.json`` (a path from the repository's root): the table that
    ``datamove bench`` printed for that results file, made from the file when the page is built, so that the
    page shows the committed figures and holds no copy of them."""

    required_arguments = 1

    def run(self):
        env = self.state.document.settings.env
        path = Path(env.srcdir).parent / self.arguments[0]
        env.note_dependency(str(path))
        results = json.loads(path.read_text())
        if "device" in results:  # the GPU suite's file
            from datamove.benchmarks import gpu as bench_gpu

            peers = [p for p in bench_gpu.GPU_PEERS if any(p in row for row in results["rows"])]
            markdown = bench_gpu.table(results["rows"], peers)
        else:
            from datamove.benchmarks import suite as bench

            markdown = bench.table(results["rows"], results["peers"])
        rows = [[cell.strip() for cell in line.strip().strip("|").split("|")] for line in markdown.splitlines()]
        del rows[1]  # markdown's |---| line
        lines = [".. csv-table::", "   :header-rows: 1", ""]
        lines += ["   " + ",".join('"' + cell.replace('"', '""') + '"' for cell in row) for row in rows]
        self.state_machine.insert_input(lines, str(path))
        return []


def setup(app):
    app.add_directive("bench-results", BenchResults)
