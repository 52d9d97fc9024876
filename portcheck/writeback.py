"""Writing a fixed file back without losing what the file is.

`fix` writes through a symbolic link to its target, keeps hard links, the owner, the mode and
extended attributes (ACLs, SELinux labels), and never overwrites a file that changed on disk
since it was read. The new bytes always go first to a temporary copy beside the target, which
is read back: a full disk or a short write fails there, before the original is touched. Then:

* replace, when a new file can stand in for the old one exactly (one link, an owner and
  extended attributes this process can give it): the copy takes the target's mode, owner and
  attributes and is renamed over it. Atomic: a reader, a crash or a kill sees the old file or
  the new one.
* copy in place otherwise (hard links, another user's file, a label it cannot set): the copy's
  bytes are written into the original inode, which keeps its links, owner and attributes. That
  is not atomic. SIGINT, SIGTERM and SIGHUP are held until the write is done, so ^C or `kill`
  never leaves a half-written file, and the space is reserved first. Only SIGKILL or a power
  cut during the write (microseconds for a source file) can; the complete fixed file then stays
  beside it as `.NAME.*.portcheck`.
"""

from __future__ import annotations

import os
import signal
import stat
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

CHANGED = "changed on disk while portcheck was fixing it; not overwritten"
_HELD_SIGNALS = tuple(getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name))


class _Damaged(OSError):
    """The in-place write failed and the original bytes could not be put back either."""


def write_back(path: Path, expected: bytes, content: bytes) -> str:
    """Write `content` over the file (the target, for a symbolic link) that held `expected`.
    Returns why it was not written, or ''."""
    target = Path(os.path.realpath(path))
    try:
        if target.read_bytes() != expected:
            return CHANGED
        info = target.stat()
        copy = _verified_copy(target, content)
    except OSError as error:
        return f"cannot write: {error.strerror or error}"
    keep_copy = False
    try:
        if _stands_in(copy, target, info):
            if target.read_bytes() != expected:
                return CHANGED
            os.replace(copy, target)
            return ""
        return _copy_into(target, expected, content)
    except _Damaged as error:
        keep_copy = True
        return f"cannot write: {error.strerror}; the original may be damaged, the fixed file is {copy}"
    except OSError as error:
        return f"cannot write: {error.strerror or error}"
    finally:
        if not keep_copy and os.path.lexists(copy):
            os.unlink(copy)


def _verified_copy(target: Path, content: bytes) -> Path:
    """The new bytes in a temporary file beside the target, on disk and read back."""
    handle, name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".portcheck", dir=target.parent)
    copy = Path(name)
    try:
        with os.fdopen(handle, "wb") as stream:
            stream.write(content)
            stream.flush()
            os.fsync(stream.fileno())
        if copy.read_bytes() != content:
            raise OSError(0, "the temporary copy does not read back as written", name)
    except BaseException:
        copy.unlink()
        raise
    return copy


def _stands_in(copy: Path, target: Path, info: os.stat_result) -> bool:
    """Give the copy the target's owner, mode and extended attributes; whether it can then
    replace the target without anything being lost."""
    if info.st_nlink != 1:
        return False
    if hasattr(os, "chown"):
        try:
            os.chown(copy, info.st_uid, info.st_gid)
        except PermissionError:
            return False  # another user's file: only writing in place keeps its owner
    os.chmod(copy, stat.S_IMODE(info.st_mode))  # after chown, which clears set-id bits
    return _copied_attributes(target, copy)


def _copied_attributes(target: Path, copy: Path) -> bool:
    """Copy the extended attributes (after the mode: an ACL is one); False when one cannot be
    (a security label this process may not set)."""
    if not hasattr(os, "listxattr"):
        return True
    try:
        names = os.listxattr(target)
    except OSError:
        return True  # the file system has none
    try:
        for name in names:
            os.setxattr(copy, name, os.getxattr(target, name))
    except OSError:
        return False
    return True


def _copy_into(target: Path, expected: bytes, content: bytes) -> str:
    """Overwrite the target's own inode with `content`, unless it no longer holds `expected`."""
    with _signals_held():
        handle = os.open(target, os.O_RDWR)
        try:
            if _read_all(handle) != expected:
                return CHANGED
            if hasattr(os, "posix_fallocate") and len(content) > len(expected):
                os.posix_fallocate(handle, 0, len(content))  # a full disk fails here, nothing written
            try:
                _overwrite(handle, content)
            except OSError as error:
                try:
                    _overwrite(handle, expected)
                except OSError:
                    raise _Damaged(error.errno, error.strerror) from error
                raise
        finally:
            os.close(handle)
    return ""


def _read_all(handle: int) -> bytes:
    os.lseek(handle, 0, os.SEEK_SET)
    parts = []
    while part := os.read(handle, 1 << 20):
        parts.append(part)
    return b"".join(parts)


def _overwrite(handle: int, data: bytes) -> None:
    """Make the open file hold exactly `data`, on disk."""
    os.lseek(handle, 0, os.SEEK_SET)
    view = memoryview(data)
    while view:
        view = view[os.write(handle, view) :]
    os.ftruncate(handle, len(data))
    os.fsync(handle)


@contextmanager
def _signals_held() -> Iterator[None]:
    """Hold SIGINT, SIGTERM and SIGHUP (Python handles signals in the main thread only; from
    other threads nothing can be held), then deliver them once the block is done."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught: list[int] = []
    previous = {number: signal.getsignal(number) for number in _HELD_SIGNALS}
    held = {number: handler for number, handler in previous.items() if handler is not None}
    for number in held:
        signal.signal(number, lambda received, _frame: caught.append(received))
    try:
        yield
    finally:
        for number, handler in held.items():
            signal.signal(number, handler)
        for number in dict.fromkeys(caught):
            signal.raise_signal(number)
