"""The documentation site: it builds with no warning, and its pages' examples run.

The build is ``python -m sphinx -W --keep-going -b html docs OUT`` (nitpicky:
every cross-reference must resolve). The ``>>>`` examples of every page under
``docs/`` run as doctests from the repository's root (the pages name
``examples/ir/...`` relative to it); the API pages' examples are the
docstrings', which ``--doctest-modules`` already runs.
"""

import doctest
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
PAGES = sorted(p for p in DOCS.rglob("*.rst") if "_build" not in p.parts and "generated" not in p.parts
               and "_templates" not in p.parts)
# the pages whose examples need more than NumPy
NEEDS = {"guide/arrays.rst": ("torch", "jax", "dask.array"), "guide/pytorch.rst": ("torch", "onnx", "onnxruntime"),
         "guide/verify.rst": ("openvino",), "guide/tensorflow.rst": ("tensorflow",), "guide/keras.rst": ("keras",)}


def test_pages_found():
    names = {p.relative_to(DOCS).as_posix() for p in PAGES}
    assert {"index.rst", "getting-started.rst", "guide/converters.rst", "guide/arrays.rst",
            "guide/cli.rst", "performance.rst", "design.rst", "api/index.rst"} <= names


def test_sphinx_build(tmp_path):
    pytest.importorskip("sphinx")
    pytest.importorskip("numpydoc")
    pytest.importorskip("pydata_sphinx_theme")
    out = tmp_path / "html"
    done = subprocess.run(
        [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-E", "-b", "html", str(DOCS), str(out),
         "-d", str(tmp_path / "doctrees")],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    for page in ("index.html", "getting-started.html", "guide/converters.html", "guide/arrays.html",
                 "guide/cli.html", "performance.html", "design.html", "api/index.html",
                 "api/generated/datamove.batch_to_space.html", "api/generated/datamove.shapes.space_to_depth.html",
                 "api/generated/datamove.compat.torch.pixel_shuffle.html", "api/generated/datamove.ir.Model.html",
                 "api/generated/datamove.Dim.html", "api/generated/datamove.DataMoveError.html"):
        assert (out / page).is_file(), page
    # the class pages document their methods (numpydoc_show_class_members is off)
    assert 'id="datamove.ir.Model.run"' in (out / "api/generated/datamove.ir.Model.html").read_text()


_RUN_PAGE = (
    "import doctest, sys\n"
    "result = doctest.testfile(sys.argv[1], module_relative=False, encoding='utf-8', report=True,\n"
    "                          optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)\n"
    "print(result.failed, result.attempted)\n"
)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(DOCS).as_posix())
def test_page_examples(page, monkeypatch):
    needs = NEEDS.get(page.relative_to(DOCS).as_posix(), ())
    for module in needs:
        pytest.importorskip(module)
    monkeypatch.chdir(ROOT)
    if needs:  # a process of its own: PyTorch's compiler (Triton) beside TensorFlow or jaxlib aborts the process
        done = subprocess.run([sys.executable, "-c", _RUN_PAGE, str(page)], cwd=ROOT, capture_output=True, text=True,
                              timeout=600)
        assert done.returncode == 0 and done.stdout.split()[-2:-1] == ["0"], done.stdout[-4000:] + done.stderr[-4000:]
        return
    result = doctest.testfile(str(page), module_relative=False, encoding="utf-8", report=True,
                              optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples failed in {page.name} (see the output)"
