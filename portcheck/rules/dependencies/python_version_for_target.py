from __future__ import annotations

import libcst as cst
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import Version

from portcheck import filekinds, manifests, patterns
from portcheck import targets as target_data
from portcheck.rule import ERROR, OFF, Invalid, Rule, Span, Valid
from portcheck.rules.dependencies import SETUP_CALLS
from portcheck.rules.tool.unreadable_manifest import MANIFEST_KINDS

# The Python releases the comparison considers (3.6 to 3.15).
_PYTHONS = [Version(f"3.{minor}") for minor in range(6, 16)]


def _severity() -> dict:
    """An error where the backend's wheels need a Python the project may not declare."""
    return {name: ERROR if t.python_versions else OFF for name, t in target_data.all_targets().items()}


class PythonVersionForTarget(Rule):
    """## What it does
    Compares the Python a project declares (a conda environment's `python=3.7`, Cog's
    `python_version`, a `python:3.8` base image, `requires-python` in pyproject.toml,
    `python_requires` in setup.cfg or setup.py) with the Pythons the target's backend
    installs on: TorchTPU needs 3.11 or newer, the Neuron SDK 3.10 to 3.14, torch_xla's
    wheels 3.11 to 3.13. A range that admits one of those (`>=3.8`) says nothing.

    ## Why is this bad?
    The backend's wheels do not exist for that Python: `pip install torch_tpu` finds no
    distribution, and the environment the project describes cannot run on the target at all.
    The torch releases the backends need dropped old Pythons too (torch 2.9 needs 3.10).

    ## Example
    ```yaml
    dependencies:
      - python=3.8
    ```

    ## Use instead
    ```yaml
    dependencies:
      - python=3.12
    ```

    ## Targets
    An error on tpu, neuron and xla, whose wheels need a known range of Pythons; off elsewhere.

    ## Fix safety
    No automatic fix: moving to a newer Python is a decision (and moves other pins with it).
    """

    code = "PC711"
    name = "python-version-for-target"
    message = "declares Python `{declared}`, which {mismatches}"
    hint = "declare a Python the backend installs on (3.11 or 3.12 suits tpu, neuron and xla)"
    severity = _severity()
    file_kinds = (filekinds.PYTHON, *MANIFEST_KINDS)
    triggers = (b"python_requires",)

    VALID = [
        Valid("dependencies:\n  - python=3.12\n  - pytorch\n", path="environment.yml"),
        Valid('[project]\nname = "x"\nrequires-python = ">=3.8"\n', path="pyproject.toml"),
        Valid("build:\n  python_version: '3.11'\n", path="cog.yaml"),
        Valid("FROM python:3.8-slim\n", path="Dockerfile", options={"targets": ["mps", "cpu"]}),
        Valid("from setuptools import setup\nsetup(name='x', python_requires='>=3.7')\n"),
        Valid("def f(torch, setup):\n    setup(python_requires='==3.7.*')\n"),
        Valid(
            "import torch\nimport torch as T\nfrom torch import nn\nfrom torch.nn import Linear as L\nimport torch.cuda\n"
        ),
    ]
    INVALID = [
        Invalid(  # yolact
            "name: yolact-env\ndependencies:\n  - python==3.7\n  - pytorch::pytorch\n",
            lines=[3],
            path="environment.yml",
            message="declares Python `python==3.7`, which torch_tpu does not install on (it needs >=3.11)",
        ),
        Invalid(  # SwinIR
            'build:\n  gpu: true\n  python_version: "3.8"\n',
            lines=[3],
            path="cog.yaml",
            options={"targets": ["neuron"]},
        ),
        Invalid("FROM python:3.9-slim\nRUN pip install torch\n", lines=[1], path="Dockerfile"),
        Invalid('[project]\nname = "x"\nrequires-python = "<3.10"\n', lines=[3], path="pyproject.toml"),
        Invalid("[options]\npython_requires = ==3.8.*\n", lines=[2], path="setup.cfg", options={"targets": ["xla"]}),
        Invalid("import setuptools\nsetuptools.setup(name='x', python_requires='~=3.8.0')\n", lines=[2]),
    ]

    def visit_Call(self, node: cst.Call) -> None:
        if not self.ctx.qualified_names(node.func) & SETUP_CALLS:
            return
        given = patterns.keyword(node, "python_requires")
        written = patterns.string_value(given.value) if given is not None else None
        if given is not None and written:
            self._judge(manifests.Declared("python", written, 0, written), given.value)

    def check_text(self, text: str) -> None:
        manifest = manifests.read(self.ctx.kind, text)
        lines = text.splitlines()
        pythons = [each for each in manifest.requirements if each.name.lower() == "python"]
        for declared in (*pythons, *manifest.python):
            width = len(lines[declared.line - 1]) if 0 < declared.line <= len(lines) else 1
            self._judge(declared, (declared.line, 1, declared.line, width + 1))

    def _judge(self, declared: manifests.Declared, where: cst.CSTNode | Span) -> None:
        try:
            wanted = SpecifierSet(declared.specifier)
        except InvalidSpecifier:
            return
        admitted = {version for version in _PYTHONS if wanted.contains(version, prereleases=True)}
        severity = dict.fromkeys(target_data.TARGET_ORDER, OFF)
        mismatches = []
        for target in self.ctx.targets:
            facts = target_data.get(target)
            if facts.python_versions and not admitted & set(SpecifierSet(facts.python_versions).filter(_PYTHONS)):
                severity[target] = ERROR
                mismatches.append(f"{facts.package} does not install on (it needs {facts.python_versions})")
        if not mismatches:
            return
        self.report_at(where, severity=severity, declared=declared.text, mismatches="; ".join(mismatches))
