"""The public API's shape: every public function has a docstring, and the extension's type
stubs (_commfuse.pyi) list exactly what the extension defines."""

import ast
import inspect
import pathlib

import commfuse
from commfuse import _commfuse


def test_public_names_have_docstrings():
    for name in commfuse.__all__:
        obj = getattr(commfuse, name)
        if name.startswith("__"):
            continue
        assert inspect.getdoc(obj), name
        if inspect.isclass(obj):
            for member, value in vars(obj).items():
                if not member.startswith("_") and callable(value) or isinstance(value, property):
                    if not member.startswith("_"):
                        assert inspect.getdoc(value), f"{name}.{member}"


def test_extension_stubs_match_the_extension():
    stub = pathlib.Path(_commfuse.__file__).with_name("_commfuse.pyi")
    tree = ast.parse(stub.read_text())
    stubbed = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    defined = {n for n in dir(_commfuse) if not n.startswith("__")}
    assert stubbed == defined
    for cls in ("Comm", "TensorRef"):
        node = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == cls)
        members = {n.name for n in node.body if isinstance(n, ast.FunctionDef)} - {"__init__"}
        assert members == {m for m in dir(getattr(_commfuse, cls)) if not m.startswith("_")}, cls
