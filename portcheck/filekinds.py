"""Which kind of source a file is, from its name: rules declare the kinds they read.

Python files are parsed with libcst, and so are the code cells of Jupyter notebooks, which the
Python rules read as one module (portcheck.notebooks); the others (CUDA and C++ sources, dependency
manifests, Dockerfiles, YAML configs) are read as text by the rules that understand them. Nothing is ever
executed or imported.
"""

from __future__ import annotations

import fnmatch
import re
from pathlib import PurePosixPath

PYTHON = "python"
CUDA = "cuda"  # .cu / .cuh
CPP = "cpp"  # C++ sources and headers (op registrations, inline PTX)
REQUIREMENTS = "requirements"  # pip requirement files
PYPROJECT = "pyproject"
SETUP_CFG = "setup-cfg"
CONDA = "conda"  # environment.yml
NOTEBOOK = "notebook"  # .ipynb: its code cells are read by the rules that read Python
DOCKERFILE = "dockerfile"  # Dockerfile, Containerfile: base images and what RUN installs
COG = "cog"  # Replicate's cog.yaml: a CUDA version and Python packages
CONFIG = "config"  # other YAML: training recipes, launcher configs (portcheck.configs)
ALL = (PYTHON, CUDA, CPP, REQUIREMENTS, PYPROJECT, SETUP_CFG, CONDA, NOTEBOOK, DOCKERFILE, COG, CONFIG)

_BY_SUFFIX = {
    ".py": PYTHON,
    ".pyi": PYTHON,
    ".ipynb": NOTEBOOK,
    ".cu": CUDA,
    ".cuh": CUDA,
    ".cpp": CPP,
    ".cc": CPP,
    ".cxx": CPP,
    ".h": CPP,
    ".hpp": CPP,
    ".hh": CPP,
    ".yaml": CONFIG,
    ".yml": CONFIG,
}
# YAML that configures tools around the code (CI, hooks, docs, containers), not the program.
_TOOL_CONFIGS = (
    ".pre-commit-config.yaml",
    ".pre-commit-hooks.yaml",
    "mkdocs.y*ml",
    ".readthedocs.y*ml",
    "readthedocs.y*ml",
    "*compose*.y*ml",
    ".gitlab-ci.yml",
    "*codecov.y*ml",
    "dependabot.y*ml",
    "*-lock.yaml",
)
_TOOL_FOLDERS = frozenset({".github", ".gitlab", ".circleci", ".azure-pipelines"})
_BY_NAME = (
    ("pyproject.toml", PYPROJECT),
    ("setup.cfg", SETUP_CFG),
    ("requirement*.txt", REQUIREMENTS),  # requirement.txt too (LoRA's examples)
    ("requirement*.in", REQUIREMENTS),
    ("*-requirements.txt", REQUIREMENTS),
    ("*_requirements.txt", REQUIREMENTS),
    ("constraints*.txt", REQUIREMENTS),
    ("environment*.yml", CONDA),
    ("environment*.yaml", CONDA),
    ("*conda*.yml", CONDA),  # conda.yaml, conda-extras.yaml (dinov2)
    ("*conda*.yaml", CONDA),
    ("env.yml", CONDA),  # SimCLR's
    ("env.yaml", CONDA),
    *(
        (f"{prefix}{name}{suffix}", DOCKERFILE)
        for name in ("Dockerfile", "dockerfile")
        for prefix, suffix in (("", ""), ("", ".*"), ("", "-*"), ("*.", ""))
    ),
    ("Containerfile", DOCKERFILE),
    ("cog.yaml", COG),
)


def kind_of(path: str) -> str | None:
    """The kind of a file, or None for files portcheck does not read."""
    pure = PurePosixPath(path)
    name = pure.name
    for pattern, kind in _BY_NAME:
        if fnmatch.fnmatchcase(name, pattern):
            return kind
    if pure.parent.name == "requirements" and pure.suffix in (".txt", ".in"):
        return REQUIREMENTS
    kind = _BY_SUFFIX.get(pure.suffix)
    if kind == CONFIG and (
        any(fnmatch.fnmatchcase(name, pattern) for pattern in _TOOL_CONFIGS) or _TOOL_FOLDERS & set(pure.parts)
    ):
        return None
    return kind


# A conda environment file under another name (mdlm's requirements.yaml): its top-level
# `dependencies:` list, beside `channels:` or `name:`.
_CONDA_KEYS = re.compile(r"^dependencies:[ \t]*(#.*)?$", re.MULTILINE)
_CONDA_BESIDE = re.compile(r"^(channels|name):", re.MULTILINE)


def by_content(kind: str, text: str) -> str:
    """The kind a YAML config's text shows it to be: a conda environment, whatever its name."""
    if kind == CONFIG and _CONDA_KEYS.search(text) and _CONDA_BESIDE.search(text):
        return CONDA
    return kind


def given_kind(path: str) -> str:
    """The kind of a file named on the command line that `kind_of` does not recognise: a
    script without a suffix is Python, any other `.txt` a requirements file, a tool's YAML
    (`.pre-commit-config.yaml`, which a hook may be handed) a config."""
    if path.endswith(".txt"):
        return REQUIREMENTS
    return CONFIG if path.endswith((".yaml", ".yml")) else PYTHON
