"""Sphinx configuration for datamove's documentation.

Build: ``python -m sphinx -W --keep-going -b html docs docs/_build/html``
(``pip install -e ".[docs]"`` first). The pages' ``>>>`` examples are run as
doctests by ``tests/test_docs.py``.
"""

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
    ("py:class", "datamove.dims.Dim"),  # datamove.Dim, as the type aliases spell it
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
