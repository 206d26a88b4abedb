"""The package's layers and the one direction of its imports (ttnn_eager/__init__.py's docstring), read from
the source with `ast` (module-level and function-level imports alike): a layer imports only the layers
before it, nothing outside tools/ imports a tool, and only the device layer imports ttnn."""
import ast
import pathlib

import ttnn_eager

PACKAGE = pathlib.Path(ttnn_eager.__file__).parent
LEAVES = {"ttnn_eager.config", "ttnn_eager.counters"}  # settings and statistics: everyone reads them

# layer -> the layers it may import (besides itself and LEAVES)
ALLOWED = {
    "leaves": set(),
    "device": set(),
    "core": {"device"},
    "lowerings": {"core", "device"},
    "features": {"core", "device"},
    "tools": {"core", "device", "lowerings", "features", "root"},
    "root": {"core", "device", "lowerings", "features"},  # the package's wiring (__init__, _autoload)
}


def _layer(module: str) -> str:
    if module in LEAVES:
        return "leaves"
    parts = module.split(".")
    if len(parts) > 1 and parts[1] in ALLOWED:
        return parts[1]
    return "root"


def _modules():
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE.parent).with_suffix("")
        name = ".".join(rel.parts)
        is_package = path.name == "__init__.py"
        yield (name[: -len(".__init__")] if is_package else name), is_package, path


def _imports(module: str, is_package: bool, path: pathlib.Path):
    """(imported module, line) of every import of a ttnn_eager module (or of ttnn) in the file."""
    package = module if is_package else module.rsplit(".", 1)[0]
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node.lineno
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if not target.startswith("ttnn_eager"):
                yield target, node.lineno
                continue
            for alias in node.names:  # `from . import x` imports the submodule x when there is one
                sub = f"{target}.{alias.name}"
                has_sub = (PACKAGE.parent / (sub.replace(".", "/") + ".py")).exists() or \
                    (PACKAGE.parent / sub.replace(".", "/") / "__init__.py").exists()
                yield (sub if has_sub else target), node.lineno


def _violations():
    found = []
    for module, is_package, path in _modules():
        layer = _layer(module)
        for target, line in _imports(module, is_package, path):
            where = f"{path.relative_to(PACKAGE)}:{line} imports {target}"
            if target == "ttnn" or target.startswith("ttnn."):
                if _layer(module) != "device":
                    found.append(f"{where}: only the device layer imports ttnn")
                continue
            if not target.startswith("ttnn_eager"):
                continue
            other = _layer(target)
            if layer == "leaves":
                found.append(f"{where}: config and counters import nothing of the package")
            elif other not in (layer, "leaves") and other not in ALLOWED[layer]:
                found.append(f"{where}: the {layer} layer may not import the {other} layer")
    return found


def test_imports_flow_one_way():
    assert _violations() == []


def test_the_rule_reader_sees_imports():
    """The reader is not vacuous: it finds the core's import of the device layer, a lowering's import of the
    registry, and a function-level import."""
    seen = {(m, t) for m, p, path in _modules() for t, _ in _imports(m, p, path)}
    assert ("ttnn_eager.core.dispatch", "ttnn_eager.device.api") in seen
    assert ("ttnn_eager.lowerings.views", "ttnn_eager.core.registry") in seen
    assert ("ttnn_eager.core.dispatch", "ttnn_eager.core.tensor") in seen
    assert ("ttnn_eager.device.base", "ttnn") in seen


# rooms of features/ whose imports are narrower than the layer's: room -> what of the package it may import
ROOMS = {
    "ttnn_eager.features.mesh": ("ttnn_eager.core", "ttnn_eager.device", "ttnn_eager.features.mesh",
                                 "ttnn_eager.features.distributed"),
}


def test_rooms_of_features_keep_to_their_imports():
    found = []
    for module, is_package, path in _modules():
        room = next((r for r in ROOMS if module == r or module.startswith(r + ".")), None)
        if room is None:
            continue
        for target, line in _imports(module, is_package, path):
            if target.startswith("ttnn_eager") and target not in LEAVES and not target.startswith(ROOMS[room]):
                found.append(f"{path.relative_to(PACKAGE)}:{line} imports {target}")
    assert found == []


def test_every_folder_says_what_it_owns_and_may_import():
    for folder in ("core", "device", "lowerings", "features", "features/mesh", "tools"):
        doc = ast.get_docstring(ast.parse((PACKAGE / folder / "__init__.py").read_text()))
        assert doc and "import" in doc.lower(), folder


def test_lowerings_are_named_after_their_ops():
    """One def per op, named after it; a trailing underscore only for in-place ops (PyTorch's convention)."""
    from ttnn_eager.lowerings import REGISTRY
    for op, entry in REGISTRY.items():
        name = entry.fn.__name__
        if name.endswith("_") and not name.startswith("_"):
            assert any(o.fn is entry.fn and o.op._schema.name.endswith("_") for o in REGISTRY.values()), (
                f"{name} (for {op}) reads as an in-place op but lowers no in-place op")


SERVING = "ttnn_eager.features.serving"
SERVING_MAY_IMPORT = ("ttnn_eager.core", "ttnn_eager.device", "ttnn_eager.features.device_module", SERVING)
SERVING_LAZY = ("transformers", "fastapi", "uvicorn", "openai", "httpx")  # imported only where used


def test_serving_imports_its_layers_and_its_libraries_lazily():
    """features/serving (its __init__.py map): the core, the device layer, config, counters and the device
    module, never a lowering or a tool; transformers and the server's dependencies only inside functions, so
    `import ttnn_eager` (which installs the serving hook) imports none of them."""
    found = []
    for module, is_package, path in _modules():
        if not (module == SERVING or module.startswith(SERVING + ".")):
            continue
        tree = ast.parse(path.read_text())
        for target, line in _imports(module, is_package, path):
            if target.startswith("ttnn_eager") and target not in LEAVES and \
                    not any(target == m or target.startswith(m + ".") for m in SERVING_MAY_IMPORT):
                found.append(f"{module}:{line} imports {target}")
        for node in tree.body:
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            for name in names:
                if name.split(".")[0] in SERVING_LAZY:
                    found.append(f"{module}:{node.lineno} imports {name} at module level")
    assert found == []
    assert any(m.startswith(SERVING) for m, _, _ in _modules())


def _lowering_imports() -> dict:
    """lowerings module -> the lowerings modules it imports (module-level and function-level)."""
    graph = {}
    for path in sorted((PACKAGE / "lowerings").glob("*.py")):
        if path.name == "__init__.py":
            continue
        deps = graph.setdefault(path.stem, set())
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level == 1:
                deps.update([node.module.split(".")[0]] if node.module else [a.name for a in node.names])
    return graph


def test_the_lowerings_import_each_other_without_a_cycle():
    """The lowerings form one direction too (complex.py, the complex forms of the factories, views and padding,
    sits above them; factory.py's complex -> bool cast tests the parts itself instead of importing complex's
    abs): an import cycle, even through a function-level import, is reported with its path."""
    graph = _lowering_imports()
    assert "factory" in graph["complex"] and "complex" not in graph["factory"]

    def cycle_from(start):
        stack = [(start, [start])]
        while stack:
            node, path = stack.pop()
            for nxt in sorted(graph.get(node, ())):
                if nxt == start:
                    return path + [start]
                if nxt in graph and nxt not in path:
                    stack.append((nxt, path + [nxt]))
        return None

    cycles = [c for c in map(cycle_from, sorted(graph)) if c]
    assert not cycles, " ; ".join(" -> ".join(c) for c in cycles)
