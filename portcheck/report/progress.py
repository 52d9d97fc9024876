"""A progress bar for long runs, on a terminal only: a bar in a pipe, a log or a JSON report
would be noise, so the command line asks `wanted` first."""

from __future__ import annotations

import sys
import time
from types import TracebackType
from typing import TYPE_CHECKING

from rich.console import Console

if TYPE_CHECKING:
    from rich.progress import Progress

# Runs shorter than this never show a bar (it would only flicker).
DELAY_SECONDS = 0.5


def wanted(output_format: str, to_file: bool) -> bool:
    """Only human-readable output going to a terminal, with the bar on a terminal too."""
    return output_format == "text" and not to_file and sys.stdout.isatty() and sys.stderr.isatty()


class FileProgress:
    """Counts files as they are done (`__call__(done, total)`); draws a transient bar on stderr
    once the run has lasted `DELAY_SECONDS`, and erases it when the run ends."""

    def __init__(self, verb: str, console: Console | None = None) -> None:
        self._verb = verb
        self._console = console or Console(stderr=True)
        self._started = time.monotonic()
        self._bar: Progress | None = None
        self._task = 0

    def __call__(self, done: int, total: int) -> None:
        if self._bar is None:
            if time.monotonic() - self._started < DELAY_SECONDS or done >= total:
                return
            # Imported only when a bar is drawn: most runs never need it, and every run pays imports.
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

            self._bar = Progress(
                TextColumn(f"{self._verb} files"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeRemainingColumn(),
                console=self._console,
                transient=True,
            )
            self._bar.start()
            self._task = self._bar.add_task(self._verb, total=total, completed=done)
        self._bar.update(self._task, completed=done, total=total)

    def __enter__(self) -> FileProgress:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        if self._bar is not None:
            self._bar.stop()
