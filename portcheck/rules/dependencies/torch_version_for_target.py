from __future__ import annotations

import re
from typing import Any

import libcst as cst
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import Version

from portcheck import filekinds, manifests
from portcheck import targets as target_data
from portcheck.findings import Severity
from portcheck.rule import ERROR, INFO, OFF, Invalid, Rule, Valid
from portcheck.rules.dependencies import SETUP_CALLS, setup_requirements
from portcheck.rules.tool.unreadable_manifest import MANIFEST_KINDS
from portcheck.targets import packages

# Every torch release line the comparison considers (patch releases .0 to .3 of each minor).
_RELEASES = [
    Version(f"{major}.{minor}.{patch}")
    for major, minor in (*((1, m) for m in range(14)), *((2, m) for m in range(17)))
    for patch in range(4)
]
_TORCH = frozenset({"torch", "pytorch"})
# torchvision's and torchtext's minor release -> the torch minor release it is built for (0.5 for
# 1.4 ... 0.14 for 1.13, 0.15 for 2.0 ... 0.29 for 2.14; torchtext stopped at 0.18, for 2.3);
# torchaudio's -> torch's (0.13 for 1.13, then 2.m for 2.m): a pin of one pins torch too.
_BUILT_FOR = {(0, m): (1, m - 1) if m < 15 else (2, m - 15) for m in range(5, 32)}
_COMPANIONS = {
    "torchvision": _BUILT_FOR,
    "torchtext": _BUILT_FOR,
    "torchaudio": {(0, m): (1, m) for m in range(4, 14)} | {(2, m): (2, m) for m in range(17)},
}
_PINNING = _TORCH | _COMPANIONS.keys()
_COMPARED = _PINNING | {"numpy"}  # numpy: where the plugin requires a release line
_NUMPY_RELEASES = [Version(f"1.{m}.0") for m in range(27)] + [Version(f"2.{m}.0") for m in range(6)]
_REPLACEMENTS_NEED = ">=2.6"  # torch.accelerator, which most suggested replacements use


def _severity() -> dict:
    """An error where the backend is a plugin pinned to a torch range (TorchTPU, TorchNeuron,
    torch_xla...); info for built-in backends, where only portcheck's replacements care."""
    return {
        name: OFF if t.keeps_cuda_api else ERROR if t.torch_versions else INFO
        for name, t in target_data.all_targets().items()
    }


class TorchVersionForTarget(Rule):
    """## What it does
    Compares the torch version a project declares (requirements, pyproject.toml, setup.cfg,
    setup.py, conda environment, a Dockerfile's `pytorch/pytorch` image or pip installs, Cog's
    python_packages) with the releases each target's backend supports: TorchNeuron needs torch
    2.14, TorchTPU supports 2.11 to 2.15, torch_npu and Gaudi track their own ranges. A
    torchvision, torchaudio or torchtext pin counts as a pin of the torch release it is built
    for (torchvision 0.11 for 1.10, 0.29 for 2.14; torchaudio 2.1 for 2.1), also beside a torch
    pin: it is a line the upgrade changes too (torchvision 0.12 does not load with torch 2.14).
    So does a NumPy pin that excludes what the plugin requires (TorchTPU: numpy>=2, so
    `numpy<2.0` cannot install beside it).

    ## Why is this bad?
    A backend plugin is built against specific torch releases: with another one it fails to
    load (or is not autoloaded at all), and the port never reaches the accelerator. The
    device-generic replacements portcheck suggests also need a recent torch (`torch.accelerator`
    appeared in 2.6, its memory API in 2.9).

    ## Example
    ```text
    torch==2.5.1
    ```

    ## Use instead
    ```text
    torch==2.14.*    # the release TorchNeuron 2.14 is built for
    ```

    ## Targets
    An error where the declared range and the plugin's supported range do not meet (neuron
    and tpu, whose ranges are known); info where they meet only in part, and info elsewhere
    when the declared torch predates `torch.accelerator` (2.6).

    ## Fix safety
    No automatic fix: changing the torch version is a decision.
    """

    code = "PC704"
    name = "torch-version-for-target"
    message = "declares `{declared}`, outside what the target backends support: {mismatches}"
    hint = "{remedy} (or keep one requirements file per target)"
    severity = _severity()
    file_kinds = (filekinds.PYTHON, *MANIFEST_KINDS)
    triggers = (b"setup",)

    VALID = [
        Valid("torch==2.14.1\ntorchvision==0.29.1\n", path="requirements.txt"),
        Valid("torch==2.14.0\n", path="requirements.txt"),
        Valid("numpy>=1.26\n", path="requirements.txt"),
        Valid("numpy<2.0\ntorchaudio==2.14.0\n", path="requirements.txt", options={"targets": ["neuron"]}),
        Valid("torch\ntorchvision\n", path="requirements.txt"),
        Valid("torch>=2.6\n", path="requirements.txt", options={"targets": ["mps", "xpu", "cpu"]}),
        Valid("def f(torch, setup):\n    setup(install_requires=['torch==1.0'])\n"),
        Valid(
            "import torch\nimport torch as T\nfrom torch import nn\nfrom torch.nn import Linear as L\nimport torch.cuda\n"
        ),
    ]
    INVALID = [
        Invalid('build:\n  python_packages:\n    - "torchvision==0.11.1"\n', lines=[3], path="cog.yaml"),
        Invalid(  # XCiT, AnimateDiff: each pin is a line the upgrade changes
            "torch==1.8.0\ntorchvision==0.9.0\ntimm==0.4.9\n", lines=[1, 2], path="requirements.txt"
        ),
        Invalid(  # audiocraft: a NumPy below what torch_tpu requires, torchaudio and torchtext built for torch 2.1
            "numpy<2.0.0\ntorchaudio>=2.1.0,<2.1.2\ntorchtext==0.16.0\n",
            lines=[1, 2, 3],
            path="requirements.txt",
            options={"targets": ["tpu"]},
        ),
        Invalid(  # torch in range, its torchvision built for 1.11
            "torch==2.14.1\ntorchvision==0.12.0\n", lines=[2], path="requirements.txt", options={"targets": ["neuron"]}
        ),
        Invalid("FROM pytorch/pytorch:2.1.0-cuda12.1-cudnn8-runtime\n", lines=[1], path="Dockerfile"),
        Invalid("dependencies:\n  - python=3.8.5\n  - pytorch=1.12.1\n", lines=[3], path="environment.yaml"),
        Invalid(
            "torch==2.5.1\n",
            lines=[1],
            path="requirements.txt",
            options={"targets": ["neuron"]},
            message="torch_neuronx needs >=2.14,<2.15",
        ),
        Invalid("torch>=2.0\n", lines=[1], path="requirements.txt", options={"targets": ["neuron"]}, message="in part"),
        Invalid(
            '[project]\nname = "x"\ndependencies = ["torch<2.10"]\n',
            lines=[3],
            path="pyproject.toml",
            options={"targets": ["tpu"]},
        ),
        Invalid(
            "from setuptools import setup\nsetup(install_requires=['torch==2.4'])\n",
            lines=[2],
            options={"targets": ["tpu"]},
        ),
        Invalid("dependencies:\n  - pytorch=2.1\n", lines=[2], path="environment.yml", options={"targets": ["neuron"]}),
        Invalid(
            "torch==2.3.0\n",
            lines=[1],
            path="requirements.txt",
            options={"targets": ["cpu"]},
            message="torch.accelerator (the portable replacements) needs >=2.6",
        ),
    ]

    def visit_Call(self, node: cst.Call) -> None:
        if self.ctx.qualified_names(node.func) & SETUP_CALLS:
            found = [
                (string, manifests.parse_requirement(text, 0)) for string, text in setup_requirements(node, self.ctx)
            ]
            declared = [(string, each) for string, each in found if isinstance(each, manifests.Declared)]
            for string, each in declared:
                fields = self._fields(each)
                if fields:
                    self.report(string, **fields)

    def check_text(self, text: str) -> None:
        lines = text.splitlines()
        requirements = manifests.read(self.ctx.kind, text).requirements
        for declared in requirements:
            fields = self._fields(declared)
            if fields:
                width = len(lines[declared.line - 1]) if 0 < declared.line <= len(lines) else 1
                self.report_span((declared.line, 1, declared.line, width + 1), **fields)

    def _fields(self, declared: manifests.Declared) -> dict[str, Any] | None:
        """What a report of the declaration says, where it is compared and does not fit."""
        verdict = self._verdict(declared) if packages.normalize(declared.name) in _COMPARED else None
        if verdict is None:
            return None
        severity, mismatches = verdict
        return {
            "severity": severity,
            "declared": declared.text,
            "mismatches": mismatches,
            "remedy": _remedy(declared.name),
        }

    def _verdict(self, declared: manifests.Declared) -> tuple[dict[str, Severity], str] | None:
        """The severity per target and a description of the mismatches, or None if none. An
        unconstrained `torch` says nothing to compare."""
        if not declared.specifier:
            return None
        try:
            wanted = SpecifierSet(re.sub(r"\+[\w.]+", "", declared.specifier))
        except InvalidSpecifier:
            return None
        if packages.normalize(declared.name) == "numpy":
            return self._numpy_verdict(wanted)
        allowed = _torch_allowed(declared.name, wanted)
        severity = dict.fromkeys(target_data.TARGET_ORDER, OFF)
        mismatches: dict[str, list[str]] = {}
        for target in self.ctx.targets:
            facts = target_data.get(target)
            plugin = bool(facts.torch_versions)
            needed = facts.torch_versions or _REPLACEMENTS_NEED
            supported = {v for v in _RELEASES if v in SpecifierSet(needed)}
            if facts.keeps_cuda_api or allowed <= supported:
                continue
            partly = bool(allowed & supported)
            severity[target] = ERROR if plugin and not partly else INFO
            who = facts.package if plugin else "torch.accelerator (the portable replacements)"
            mismatches.setdefault(f"{who} needs {needed}{' (met only in part)' if partly else ''}", []).append(target)
        if not mismatches:
            return None
        return severity, "; ".join(f"{'/'.join(names)}: {text}" for text, names in mismatches.items())

    def _numpy_verdict(self, wanted: SpecifierSet) -> tuple[dict[str, Severity], str] | None:
        """An error where the plugin requires NumPy releases the declaration excludes (torch_tpu
        requires numpy>=2: a `numpy<2` pin cannot install beside it)."""
        admitted = {v for v in _NUMPY_RELEASES if v in wanted}
        severity = dict.fromkeys(target_data.TARGET_ORDER, OFF)
        mismatches = []
        for target in self.ctx.targets:
            facts = target_data.get(target)
            if facts.numpy_versions and not admitted & set(SpecifierSet(facts.numpy_versions).filter(_NUMPY_RELEASES)):
                severity[target] = ERROR
                mismatches.append(f"{target}: {facts.package} needs numpy{facts.numpy_versions}")
        return (severity, "; ".join(mismatches)) if mismatches else None


def _remedy(name: str) -> str:
    normalized = packages.normalize(name)
    if normalized in _TORCH:
        return "pin torch within the supported range for this target"
    if normalized == "numpy":
        return "admit the NumPy releases the target's plugin requires"
    if normalized == "torchtext":
        return "drop torchtext: its last release, 0.18, is built for torch 2.3"
    return f"pin {normalized} to the release built for a torch the target supports"


def _torch_allowed(name: str, wanted: SpecifierSet) -> set[Version]:
    """The torch releases a declaration admits: of torch itself, or those the torchvision
    (torchaudio, torchtext) releases it admits are built for."""
    if packages.normalize(name) in _TORCH:
        return {v for v in _RELEASES if v in wanted}
    minors = {
        torch
        for (major, minor), torch in _COMPANIONS[packages.normalize(name)].items()
        for patch in range(4)
        if Version(f"{major}.{minor}.{patch}") in wanted
    }
    return {v for v in _RELEASES if (v.major, v.minor) in minors}
