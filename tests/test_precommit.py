"""The real pre-commit hooks: `pre-commit try-repo <this checkout> portcheck` in a scratch repository,
and `pre-commit run portcheck-fix` with a configuration that passes the fix hook its `--device`.

pre-commit builds the hook's environment itself (a fresh virtualenv, `pip install` of this
repository and its dependencies from the package index), so these tests take tens of seconds.

`try-repo` with a local path installs the checkout's HEAD plus uncommitted changes to tracked
files, in a throwaway store under a temporary directory (pre_commit/commands/try_repo.py:
`Store(tempdir)`), not under PRE_COMMIT_HOME, and deletes it afterwards. So what went into the
hook's environment is read from pip's own log (PIP_LOG), which outlives the run.

try-repo cannot pass a hook its `args`, so the fix hook runs from a `.pre-commit-config.yaml`
that names a committed snapshot of this working tree (a configuration needs a revision).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from portcheck.filekinds import kind_of

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
PRE_COMMIT = Path(sys.executable).with_name("pre-commit")
TIMEOUT_S = 900  # building the hook's environment downloads and installs packages

CUDA_BOUND = "import torch\ntorch.cuda.synchronize()\n"
CLEAN = "import torch\nx = torch.zeros(1).to('cpu')\n"
NOTEBOOK = (ROOT / "tests" / "fixtures" / "notebooks" / "cross_cells.ipynb").read_text(encoding="utf-8")

# Variables that would point git (ours or pre-commit's) at another repository or environment.
_LEAKY = ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_OBJECT_DIRECTORY", "VIRTUAL_ENV", "PYTHONHOME", "PIP_LOG")


def _env(**extra: str) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if key not in _LEAKY}
    env.update(extra)
    return env


def _git(*args: str, cwd: Path, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", *args], cwd=cwd, env=_env(), capture_output=True, text=True, check=check, timeout=120)


def _init_repository(path: Path, files: dict[str, str]) -> None:
    path.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (path / name).parent.mkdir(parents=True, exist_ok=True)
        (path / name).write_text(text, encoding="utf-8")
    _git("init", "-q", cwd=path)
    _git("config", "user.name", "portcheck tests", cwd=path)
    _git("config", "user.email", "portcheck-tests@example.invalid", cwd=path)
    _git("config", "commit.gpgsign", "false", cwd=path)
    _git("add", "-A", cwd=path)
    _git("commit", "-q", "-m", "initial", cwd=path)


def _hook_repository(scratch: Path) -> Path:
    """The repository to try: this checkout, unless try-repo would miss part of its working tree.

    try-repo carries uncommitted changes to tracked files over, but not untracked files: when the
    hook definition or a package file is not tracked yet, try a committed snapshot of the working
    tree (tracked and untracked files that .gitignore does not exclude) instead.
    """
    if _git("rev-parse", "--is-inside-work-tree", cwd=ROOT, check=False).returncode != 0:
        pytest.skip(f"{ROOT} is not a git checkout; pre-commit try-repo needs one")
    hooks_tracked = _git("ls-files", "--error-unmatch", ".pre-commit-hooks.yaml", cwd=ROOT, check=False).returncode == 0
    untracked = _git("ls-files", "--others", "--exclude-standard", "--", "portcheck", "pyproject.toml", cwd=ROOT).stdout
    if hooks_tracked and not untracked.strip():
        return ROOT
    return _snapshot(scratch / "portcheck-snapshot")


def _snapshot(snapshot: Path) -> Path:
    """A repository holding this working tree (tracked and untracked files that .gitignore does
    not exclude) in one commit."""
    listed = _git("ls-files", "-z", "--cached", "--others", "--exclude-standard", cwd=ROOT).stdout.split("\0")
    for name in filter(None, listed):
        source = ROOT / name
        if source.is_file():  # deleted but still tracked files are skipped
            (snapshot / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, snapshot / name)
    _init_repository(snapshot, {})
    return snapshot


@dataclass(frozen=True)
class Sandbox:
    project: Path  # a git repository holding the files the hook is run on
    hook_repository: Path
    pre_commit_home: Path
    scratch: Path


@pytest.fixture(scope="module")
def sandbox(tmp_path_factory: pytest.TempPathFactory) -> Sandbox:
    assert PRE_COMMIT.is_file(), f"pre-commit is not installed next to {sys.executable} (pip install -e '.[dev]')"
    scratch = tmp_path_factory.mktemp("precommit")
    project = scratch / "project"
    _init_repository(project, {"cuda_bound.py": CUDA_BOUND, "clean.py": CLEAN, "analysis.ipynb": NOTEBOOK})
    return Sandbox(project, _hook_repository(scratch), scratch / "pre-commit-home", scratch)


def _try_repo(sandbox: Sandbox, file: str, pip_log: Path) -> subprocess.CompletedProcess[str]:
    command = [
        str(PRE_COMMIT),
        "try-repo",
        str(sandbox.hook_repository),
        "portcheck",
        "--color",
        "never",
        "--files",
        file,
    ]
    env = _env(PRE_COMMIT_HOME=str(sandbox.pre_commit_home), PIP_LOG=str(pip_log))
    completed = subprocess.run(command, cwd=sandbox.project, env=env, capture_output=True, text=True, timeout=TIMEOUT_S)
    assert "portcheck....." in completed.stdout, f"the hook did not run:\n{completed.stdout}\n{completed.stderr}"
    return completed


def _installed(pip_log: Path) -> set[str]:
    """Distribution names from pip's "Successfully installed name-version ..." lines."""
    names = set()
    for line in pip_log.read_text(encoding="utf-8", errors="replace").splitlines():
        _, found, listed = line.partition("Successfully installed ")
        if found:
            names.update(re.sub(r"-[^-]+$", "", item).lower().replace("_", "-") for item in listed.split())
    return names


def test_precommit_hook_fails_on_a_cuda_bound_file(sandbox: Sandbox) -> None:
    completed = _try_repo(sandbox, "cuda_bound.py", sandbox.scratch / "pip-fail.log")
    assert completed.returncode != 0, completed.stdout
    assert re.search(r"^portcheck\.+Failed$", completed.stdout, re.MULTILINE), completed.stdout
    assert "cuda_bound.py:2:1: PC203" in completed.stdout


def test_precommit_hook_passes_on_a_clean_file_and_its_environment_has_no_torch(sandbox: Sandbox) -> None:
    pip_log = sandbox.scratch / "pip-pass.log"
    completed = _try_repo(sandbox, "clean.py", pip_log)
    assert completed.returncode == 0, f"{completed.stdout}\n{completed.stderr}"
    assert re.search(r"^portcheck\.+Passed$", completed.stdout, re.MULTILINE), completed.stdout
    installed = _installed(pip_log)
    assert {"portcheck", "libcst", "click", "rich", "pathspec"} <= installed, installed  # the log is the hook's install
    assert not {name for name in installed if name == "torch" or name.startswith(("torch-", "nvidia-"))}, installed


def test_precommit_hook_reports_a_notebook_by_cell(sandbox: Sandbox) -> None:
    completed = _try_repo(sandbox, "analysis.ipynb", sandbox.scratch / "pip-notebook.log")
    assert completed.returncode != 0, completed.stdout
    assert "analysis.ipynb:cell 5:4:1: PC203" in completed.stdout


def _run_fix_hook(sandbox: Sandbox, project: Path) -> subprocess.CompletedProcess[str]:
    command = [str(PRE_COMMIT), "run", "portcheck-fix", "--color", "never", "--files", "cuda_bound.py", "clean.py"]
    env = _env(PRE_COMMIT_HOME=str(sandbox.pre_commit_home))
    completed = subprocess.run(command, cwd=project, env=env, capture_output=True, text=True, timeout=TIMEOUT_S)
    assert "portcheck fix....." in completed.stdout, f"the hook did not run:\n{completed.stdout}\n{completed.stderr}"
    return completed


def test_the_fix_hook_rewrites_for_the_device_given_in_args(sandbox: Sandbox) -> None:
    hooks = _snapshot(sandbox.scratch / "fix-hook-snapshot")
    revision = _git("rev-parse", "HEAD", cwd=hooks).stdout.strip()
    config = {
        "repos": [
            {"repo": str(hooks), "rev": revision, "hooks": [{"id": "portcheck-fix", "args": ["--device", "tpu"]}]}
        ]
    }
    project = sandbox.scratch / "fix-project"
    _init_repository(
        project, {"cuda_bound.py": CUDA_BOUND, "clean.py": CLEAN, ".pre-commit-config.yaml": yaml.safe_dump(config)}
    )

    first = _run_fix_hook(sandbox, project)
    assert first.returncode != 0, first.stdout  # pre-commit fails a hook that changed files
    assert re.search(r"^portcheck fix\.+Failed$", first.stdout, re.MULTILINE), first.stdout
    assert "Fixed 1 finding in 1 file for tpu (PC203 x1)." in first.stdout
    assert (project / "cuda_bound.py").read_text(encoding="utf-8") == "import torch\ntorch.accelerator.synchronize()\n"
    assert (project / "clean.py").read_text(encoding="utf-8") == CLEAN

    second = _run_fix_hook(sandbox, project)
    assert second.returncode == 0, f"{second.stdout}\n{second.stderr}"
    assert re.search(r"^portcheck fix\.+Passed$", second.stdout, re.MULTILINE), second.stdout


def _hooks() -> dict[str, dict]:
    return {hook["id"]: hook for hook in yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text(encoding="utf-8"))}


@pytest.mark.parametrize(
    "name",
    [
        "train.py",
        "nb/analysis.ipynb",
        "csrc/kernel.cu",
        "requirements-dev.txt",
        "examples/requirement.txt",
        "dev-requirements.txt",
        "constraints.txt",
        "pyproject.toml",
        "recipes/sft.yaml",
    ],
)
def test_the_hooks_take_every_kind_of_file_portcheck_reads(name: str) -> None:
    assert kind_of(name) is not None
    for hook in _hooks().values():
        assert re.search(hook["files"], name), hook["id"]


def test_the_fix_hook_applies_only_the_safe_fixes_and_serially() -> None:
    hook = _hooks()["portcheck-fix"]
    assert hook["entry"].startswith("portcheck fix ") and "--unsafe-fixes" not in hook["entry"]
    assert hook["require_serial"]  # the project's facts need every file in one run
