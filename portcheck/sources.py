"""Reading a file: its path as reported, its place among packages, and its text."""

from __future__ import annotations

import codecs
import os
import stat
import tokenize
from dataclasses import replace
from functools import cache
from io import BytesIO
from pathlib import Path

from portcheck.project import ModulePath


def display_path(path: Path, root: Path) -> str:
    """The path relative to the project root, as walked: symbolic links are not followed here
    (a link's own location is what the user sees, and a link loop cannot be resolved)."""
    absolute = Path(os.path.abspath(path))
    if absolute.is_relative_to(root):
        return absolute.relative_to(root).as_posix()
    return path.as_posix()


class NotRegularFile(OSError):
    """A FIFO, socket or device named like a source file: opening or reading one can block
    forever, never end, or act on hardware, so it is reported without being opened."""


_SPECIAL_FILES = (
    (stat.S_ISFIFO, "a named pipe (FIFO)"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
)


def regular_file(path: Path) -> os.stat_result:
    """The file's status, following symbolic links. Raises OSError, and NotRegularFile for
    anything but a regular file, which is then never opened."""
    info = path.stat()
    if not stat.S_ISREG(info.st_mode):
        kind = next((f"{name}, " for test, name in _SPECIAL_FILES if test(info.st_mode)), "")
        raise NotRegularFile(0, f"{kind}not a regular file: not opened", str(path))
    return info


def read_file(path: Path, limit: int) -> tuple[bytes | None, int]:
    """A regular file's bytes (None when it is larger than `limit`) and its size."""
    size = regular_file(path).st_size
    return (path.read_bytes() if size <= limit else None), size


def module_path(path: Path, root: str = "") -> ModulePath:
    """The file's dotted name: its directory chain up to the first one without __init__.py; for
    a file in a folder without one below `root` (where the repository's scripts run), the
    folders from `root` (namespace packages: MAE's `import util.misc` beside main_pretrain.py).
    A package below such folders also gets the name an import from `root` gives it."""
    absolute = Path(os.path.abspath(path))
    parts = [absolute.stem]
    directory = absolute.parent
    if root and not _is_package(directory) and directory.is_relative_to(root):
        folders = directory.relative_to(root).parts
        if all(folder.isidentifier() for folder in folders):
            found = ModulePath.from_parts([*folders, absolute.stem])
            return replace(found, beside=_importable_in(directory)) if folders else found
    while _is_package(directory):
        parts.insert(0, directory.name)
        directory = directory.parent
    found = ModulePath.from_parts(parts)
    if root and len(parts) > 1 and directory.is_relative_to(root) and directory != Path(root):
        folders = directory.relative_to(root).parts
        if all(folder.isidentifier() for folder in folders):
            return replace(found, namespace=ModulePath.from_parts([*folders, *parts]).name)
    return found


@cache
def _importable_in(directory: Path) -> frozenset[str]:
    """The top-level names an import finds in a folder on sys.path: its modules, and its
    folders with Python files in them (packages, or namespace packages)."""
    try:
        entries = list(directory.iterdir())
    except OSError:
        return frozenset()
    names = {entry.stem for entry in entries if entry.suffix == ".py" and entry.stem.isidentifier()}
    names |= {entry.name for entry in entries if entry.name.isidentifier() and _holds_python(entry)}
    return frozenset(names)


def _holds_python(folder: Path) -> bool:
    try:
        return folder.is_dir() and any(entry.suffix == ".py" for entry in folder.iterdir())
    except OSError:
        return False


@cache
def _is_package(directory: Path) -> bool:
    return (directory / "__init__.py").is_file() and directory.name.isidentifier()


def decode_python(data: bytes) -> tuple[str | None, str]:
    """The source text, or why there is none (binary, undecodable, bad coding cookie)."""
    if b"\0" in data:
        return None, "binary file (contains NUL bytes), not Python source"
    try:
        encoding, _ = tokenize.detect_encoding(BytesIO(data).readline)
    except SyntaxError as error:
        return None, f"cannot decode: {error.msg}"
    try:
        return data.decode(encoding), ""
    except UnicodeDecodeError as error:
        return None, (
            f"not valid {encoding} at byte {error.start} ({error.reason}); "
            "convert the file or declare its encoding in a coding comment"
        )


def decode_text(data: bytes) -> str:
    """C++ sources and manifests: UTF-8 (or UTF-16 with a BOM); a stray byte in a comment
    must not hide a kernel, so undecodable bytes are replaced rather than refused."""
    if data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        return data.decode("utf-16", errors="replace")
    return data.decode("utf-8-sig", errors="replace")
