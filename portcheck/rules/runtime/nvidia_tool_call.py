from __future__ import annotations

import shlex

import libcst as cst

from portcheck import patterns
from portcheck.rule import ERROR, WARNING, Invalid, Rule, Valid, per_target
from portcheck.walk import descendants

# NVIDIA's driver and toolkit programs: absent from TPU, Trainium, Apple, Gaudi, ROCm and
# CPU hosts alike.
_TOOLS = frozenset({"nvidia-smi", "nvcc", "nvidia-debugdump", "ncu", "nsys", "dcgmi", "nvidia-settings"})
# Functions that start a program from an argument list (or from a string with `shell=True`),
# and those that always run a command line in the shell.
_RUNNERS = frozenset(
    {"subprocess.run", "subprocess.call", "subprocess.check_call", "subprocess.check_output", "subprocess.Popen"}
)
_SHELL_RUNNERS = frozenset(
    {"os.system", "os.popen", "subprocess.getoutput", "subprocess.getstatusoutput", "commands.getoutput"}
)
# What a `try` around the call may catch to carry on without the program.
_COPES = frozenset(
    {
        "FileNotFoundError",
        "OSError",
        "Exception",
        "BaseException",
        "subprocess.CalledProcessError",
        "CalledProcessError",
    }
)


class NvidiaToolCall(Rule):
    """## What it does
    Reports running one of NVIDIA's command-line tools (`nvidia-smi`, `nvcc`, `nsys`, `ncu`,
    `nvidia-debugdump`, `dcgmi`, `nvidia-settings`) through `subprocess` (`run`, `call`,
    `check_call`, `check_output`, `Popen`, with an argument list or a shell command line) or
    `os.system` / `os.popen`, outside a `try` that copes with its absence
    (`except FileNotFoundError:`, `except OSError:`, `except Exception:`).

    ## Why is this bad?
    These programs come with NVIDIA's driver and toolkit: TPU, Trainium, ROCm, Apple and CPU
    hosts do not have them. Started from an argument list, Python raises `FileNotFoundError`
    (a training script that logs `nvidia-smi` at start-up dies there); through the shell, the
    command fails with "not found" and whatever parses its output reads nothing.

    ## Example
    ```python
    print(subprocess.run(["nvidia-smi"], capture_output=True, text=True).stdout)
    ```

    ## Use instead
    ```python
    print(torch.accelerator.current_accelerator(), torch.accelerator.device_count())
    ```
    or run the tool only where it exists (`if shutil.which("nvidia-smi"):`).

    ## Targets
    An error where Python raises (an argument list, `check_output`, `check=True`); a warning
    where the shell reports the failure and the program goes on (`os.system`, `os.popen`,
    `shell=True` without a check). On every target, ROCm and the CPU included.

    ## Fix safety
    No automatic fix: what the program wanted from the tool (a log line, a device count, a
    compiler) decides what replaces it.
    """

    code = "PC217"
    name = "nvidia-tool-call"
    message = "runs `{tool}`, an NVIDIA driver tool absent on other hosts: {effect}"
    hint = "log torch.accelerator facts instead, or run it only where `shutil.which({tool!r})` finds it"
    severity = per_target(ERROR)
    triggers = tuple(tool.encode() for tool in sorted(_TOOLS))

    VALID = [
        Valid("import subprocess\nimport torch\nsubprocess.run(['rocm-smi'])\n"),
        Valid(
            "import subprocess\ntry:\n    out = subprocess.check_output(['nvidia-smi'])\n"
            "except FileNotFoundError:\n    out = b''\n"
        ),
        Valid("import shutil, subprocess\nif shutil.which('nvidia-smi'):\n    subprocess.run(['nvidia-smi'])\n"),
        Valid("def run(subprocess, torch):\n    subprocess.run(['nvidia-smi'])\n"),
        Valid("import subprocess\nsubprocess.run(['echo', 'nvidia-smi is missing'])\n"),
    ]
    INVALID = [
        Invalid(  # modded-nanogpt logs the GPUs at start-up
            "import subprocess\nimport torch as T\nresult = subprocess.run(['nvidia-smi'], stdout=subprocess.PIPE, text=True)\n",
            lines=[3],
            message="raises FileNotFoundError",
        ),
        Invalid(
            "import os\nfrom torch import cuda\nos.system('nvidia-smi -L')\n", lines=[3], message="the shell reports"
        ),
        Invalid(
            "from subprocess import check_output as out\nfrom torch.utils import cpp_extension as ext\n"
            "gpus = out('nvcc --version', shell=True)\n",
            lines=[3],
        ),
        Invalid(
            "import subprocess as sp\nimport torch.cuda\nsp.Popen(['nsys', 'profile', 'python', 'train.py'])\n",
            lines=[3],
        ),
    ]

    def visit_Call(self, node: cst.Call) -> None:
        names = self.ctx.qualified_names(node.func)
        if not names & (_RUNNERS | _SHELL_RUNNERS) or not node.args or node.args[0].keyword is not None:
            return
        tool = _program(node.args[0].value)
        if tool is None or self._copes() or self._looked_up_first():
            return
        shell = bool(names & _SHELL_RUNNERS) or _given_true(patterns.keyword(node, "shell"))
        checked = "subprocess.check_output" in names or "subprocess.check_call" in names
        checked = checked or _given_true(patterns.keyword(node, "check"))
        if shell and not checked:
            effect = "the shell reports 'not found' and the program reads no output"
            self.report(node, severity=per_target(WARNING), tool=tool, effect=effect)
        else:
            effect = "raises FileNotFoundError" if not shell else "raises CalledProcessError"
            self.report(node, tool=tool, effect=effect)

    def _copes(self) -> bool:
        """Inside the body of a `try` whose handler catches the failure (and goes on)."""
        ancestors = self.ctx.ancestors
        for parent, child in zip(ancestors, ancestors[1:]):
            if isinstance(parent, cst.Try) and child is parent.body:
                for handler in parent.handlers:
                    names = patterns.caught_names(handler)
                    if names is None or names & _COPES:
                        return True
        return False

    def _looked_up_first(self) -> bool:
        """Under an `if` that asks `shutil.which(...)` first."""
        ancestors = self.ctx.ancestors
        for parent, child in zip(ancestors, ancestors[1:]):
            if isinstance(parent, cst.If) and child is parent.body:
                calls = [n for n in (parent.test, *descendants(parent.test)) if isinstance(n, cst.Call)]
                if any("shutil.which" in self.ctx.qualified_names(call.func) for call in calls):
                    return True
        return False


def _program(command: cst.BaseExpression) -> str | None:
    """The NVIDIA tool a command starts: the first element of `["nvidia-smi", ...]`, or the
    first word of `"nvidia-smi -L"`."""
    if isinstance(command, (cst.List, cst.Tuple)):
        first = command.elements[0].value if command.elements else None
        word = patterns.string_value(first) if first is not None else None
    else:
        line = patterns.string_value(command)
        try:
            words = shlex.split(line) if line else []
        except ValueError:
            words = line.split() if line else []
        word = words[0] if words else None
    return word if word in _TOOLS else None


def _given_true(arg: cst.Arg | None) -> bool:
    return arg is not None and patterns.is_true(arg.value)
