"""Patches of transformers' continuous-batching modules, applied right after each is first imported
(`import ttnn_eager` does not import transformers: it stays cheap). memory.py and paged.py register theirs."""
from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys

_patches: dict = {}  # module name -> [patch(module)]


class _Hook(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name not in _patches:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None:
            return spec
        exec_module = spec.loader.exec_module

        def exec_and_patch(module):
            exec_module(module)
            for patch in _patches[name]:
                patch(module)
        spec.loader.exec_module = exec_and_patch
        return spec


_HOOK = _Hook()


def after_import(name: str, patch) -> None:
    """patch(module) once module `name` is imported (now, if it already is)."""
    _patches.setdefault(name, []).append(patch)
    if name in sys.modules:
        patch(sys.modules[name])
    elif _HOOK not in sys.meta_path:
        sys.meta_path.insert(0, _HOOK)
