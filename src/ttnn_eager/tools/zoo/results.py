"""Where the zoo's files are (the sources a worker runs, docs/) and its JSON of results (docs/zoo*.json): read,
and written whole through a temporary file (a sweep interrupted mid-write leaves the previous file)."""
from __future__ import annotations

import json
import os

SRC = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))  # src/
DOCS = os.path.join(os.path.dirname(SRC), "docs")


def load(path: str) -> dict:
    if path and os.path.exists(path):
        with open(path) as f:
            return json.load(f)
    return {"meta": {}, "results": {}}


def save(data: dict, path: str) -> None:
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(data, f, indent=1, sort_keys=True)
        f.write("\n")
    os.replace(tmp, path)
