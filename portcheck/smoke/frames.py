"""Whose code a frame runs: a smoke finding or refusal points at the innermost frame that is
neither torch nor portcheck (a model's forward, whether the user's file or a library's)."""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

import torch

import portcheck

TOOLING = tuple(
    {str(Path(package.__file__).parent.resolve()) + os.sep for package in (torch, portcheck)}
    | {str(Path(package.__file__).parent) + os.sep for package in (torch, portcheck)}
)


def is_tooling(filename: str) -> bool:
    """Whether `filename` is torch's or portcheck's own code (or code Python made up: `<string>`
    is the user's, `<frozen ...>` the import system's)."""
    return filename.startswith(TOOLING) or filename.startswith("<frozen")


def innermost_outside_tooling(frames: Iterable[tuple[str, int]]) -> tuple[str, int]:
    """The last (file, line) of `frames`, outermost first, that is not torch's or portcheck's;
    ("", 0) when there is none."""
    found = ("", 0)
    for path, line in frames:
        if not is_tooling(path):
            found = (path, line)
    return found
