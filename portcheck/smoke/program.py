"""One process of `portcheck run`: the program, run as `python` runs it, on an emulated device.

`python -m portcheck.smoke.program JOB`, started by portcheck.smoke.launch. `emulate(TARGET)`
is entered before the program's first line, so module-level code (`device = "tpu"`, a check of
`torch.accelerator.is_available()`) already sees the device. The program gets `sys.argv`,
`__name__ == "__main__"` and `sys.path[0]` as under `python`; its exit code is this process's.
A refusal of the emulated target ends it with one paragraph at the user's file:line and the
static rule for it, instead of a traceback through torch. Distributed programs get gloo on the
CPU for the target's own backend (and NCCL), since the emulated device's tensors live there.
"""

from __future__ import annotations

import functools
import json
import linecache
import os
import runpy
import sys
import sysconfig
import traceback
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from types import TracebackType
from typing import Any

import torch

from portcheck import targets
from portcheck.smoke.cuda_calls import Refusal, patched
from portcheck.smoke.emulate import emulate
from portcheck.smoke.frames import TOOLING
from portcheck.smoke.launch import Program
from portcheck.targets import Target

# Frames in these folders are not the user's program: a refusal points past them.
_LIBRARIES = TOOLING + tuple(
    {str(Path(sysconfig.get_path(name)).resolve()) + os.sep for name in ("stdlib", "platstdlib", "purelib", "platlib")}
)


def main(argv: list[str]) -> int:
    job = Program(**json.loads(argv[0]))
    target = targets.get(job.target)
    with emulate(target.name) as log, _distributed_on_gloo(target):
        code, error = _execute(job, target)
    if job.report:
        rank = int(os.environ.get("RANK", "0"))
        outcome = {"rank": rank, "exit_code": code, "error": error, "emulation": log.summary()}
        Path(job.report).write_text(json.dumps(outcome, default=str), encoding="utf-8")
    return code


def _execute(job: Program, target: Target) -> tuple[int, dict[str, str] | None]:
    """Run the program as `python` would; (exit code, the error that ended it or None)."""
    sys.argv = [job.name, *job.args]
    try:
        if job.module:
            sys.path[0] = os.getcwd()
            runpy.run_module(job.name, run_name="__main__", alter_sys=True)
        else:
            sys.path[0] = os.path.dirname(os.path.realpath(job.name))
            runpy.run_path(job.name, run_name="__main__")
    except SystemExit as exit:
        return _exit_code(exit.code), None
    except Exception as error:  # what `python` prints a traceback for
        refusal = _refusal(error)
        where = (_user_frame(refusal.__traceback__) if refusal else "") or _user_frame(error.__traceback__)
        if refusal is None:
            traceback.print_exception(type(error), error, _without_launcher(error.__traceback__))
            return 1, {
                "kind": "exception",
                "op": type(error).__name__,
                "where": where,
                "rule": "",
                "detail": _one_line(error),
            }
        print(_paragraph(refusal, target, where), file=sys.stderr)
        return 1, {
            "kind": refusal.kind,
            "op": refusal.op,
            "where": where,
            "rule": refusal.rule,
            "detail": refusal.detail,
        }
    return 0, None


def _exit_code(code: Any) -> int:
    """SystemExit's code as `python` turns it into an exit status."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


def _refusal(error: BaseException) -> Refusal | None:
    """The emulator's refusal behind an error, also when the program wrapped it in its own."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        if isinstance(current, Refusal):
            return current
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return None


def _user_frame(tb: TracebackType | None) -> str:
    """The innermost frame that is the user's program (not torch, portcheck, the standard
    library or an installed package), as `file:line`; "" when there is none."""
    where = ""
    for frame in traceback.extract_tb(tb):
        path = os.path.realpath(frame.filename)
        if not frame.filename.startswith("<") and not path.startswith(_LIBRARIES):
            where = f"{frame.filename}:{frame.lineno}"
    return where


def _without_launcher(tb: TracebackType | None) -> TracebackType | None:
    """The traceback from the program's first frame on, as `python` prints it (no runpy, no portcheck)."""
    while tb is not None and (
        tb.tb_frame.f_code.co_filename.startswith("<frozen")
        or os.path.realpath(tb.tb_frame.f_code.co_filename).startswith(_LIBRARIES)
    ):
        tb = tb.tb_next
    return tb


def _paragraph(refusal: Refusal, target: Target, where: str) -> str:
    path, _, line = where.rpartition(":")
    source = linecache.getline(path, int(line)).strip() if where else ""
    rule = f" ({refusal.rule}; see `portcheck explain {refusal.rule}`)" if refusal.rule else ""
    return (
        f"portcheck run: {where or 'the program'}: the emulated {target.name} refused "
        f"{refusal.op or refusal.kind}{rule}" + (f"\n    {source}\n" if source else ": ") + refusal.detail
    )


def _one_line(error: BaseException) -> str:
    message = str(error).strip().splitlines()
    return f"{type(error).__name__}: {message[0]}" if message else type(error).__name__


@contextmanager
def _distributed_on_gloo(target: Target) -> Iterator[None]:
    """init_process_group with the target's backend, NCCL or none at all runs gloo: tensors of
    the emulated device are CPU tensors underneath, and their collectives reach gloo's CPU
    kernels through the stand-in's dispatch. get_default_backend_for_device(the device) names
    the target's backend, as the real plugin registers it."""
    import torch.distributed as dist

    if not dist.is_available():
        yield
        return
    from torch.distributed import distributed_c10d as c10d

    replaced = {"nccl", target.distributed_backend}
    init, default_for = c10d.init_process_group, c10d.get_default_backend_for_device

    @functools.wraps(init)
    def init_on_gloo(backend: str | None = None, *args: Any, **kwargs: Any) -> None:
        if backend is None or str(backend).lower() in replaced:
            backend = "gloo"
        init(backend, *args, **kwargs)

    @functools.wraps(default_for)
    def default_backend(device: Any) -> str:
        device_type = device if isinstance(device, str) else torch.device(device).type
        return target.distributed_backend if device_type.split(":")[0] == target.device_type else default_for(device)

    with ExitStack() as stack:
        for owner in (dist, c10d):
            stack.enter_context(
                patched(owner, init_process_group=init_on_gloo, get_default_backend_for_device=default_backend)
            )
        yield


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
