from __future__ import annotations

import re

from portcheck import manifests
from portcheck.rule import WARNING, Invalid, Rule, Valid, per_target
from portcheck.rules.tool.unreadable_manifest import MANIFEST_KINDS

_CUDA_INDEX = re.compile(r"/whl/(nightly/)?cu\d+|pypi\.nvidia\.com|developer\.download\.nvidia|/cuda\d*|^nvidia$", re.I)
_CUDA_LOCAL = re.compile(r"\+cu\d+")
_CUDA_BUILD = re.compile(r"cuda|(^|[_.])cu\d{2,3}", re.I)  # conda's `py3.7_cuda10.1_0`, `py37_cu101`, `cuda`


class CudaPackageIndex(Rule):
    """## What it does
    Reports package sources that serve CUDA builds: `--index-url` / `--extra-index-url` /
    `--find-links` options (on a line of their own or after a requirement) pointing at
    `download.pytorch.org/whl/cu121` and the like or at `pypi.nvidia.com`, uv and Poetry
    indexes of the same kind in pyproject.toml, the `nvidia`
    conda channel, and requirements pinned to a CUDA build (`torch==2.5.1+cu121`, conda's
    `pytorch=1.4.0=py3.7_cuda10.1.243_cudnn7.6.3_0` and `pytorch-mutex=1.0=cuda`, also in a
    requirements file that `conda list --export` wrote).

    ## Why is this bad?
    On the target host, the environment installs CUDA builds of torch and several gigabytes of
    CUDA libraries that nothing there can use, and the target's PyTorch plugin needs its own
    build of torch (TorchTPU and TorchNeuron publish theirs on their own indexes).

    ## Example
    ```text
    --extra-index-url https://download.pytorch.org/whl/cu121
    torch==2.5.1+cu121
    ```

    ## Use instead
    Keep the CUDA index in a CUDA-only requirements file, and install the target's torch from
    the index its plugin documents (the CPU index `download.pytorch.org/whl/cpu` for CPU hosts).

    ## Targets
    A warning on every target.

    ## Fix safety
    No automatic fix.
    """

    code = "PC703"
    name = "cuda-package-index"
    message = "{what}"
    hint = "keep CUDA sources in a CUDA-only requirements file; install the target plugin's torch from its own index"
    severity = per_target(WARNING)
    file_kinds = MANIFEST_KINDS

    VALID = [
        Valid("--extra-index-url https://download.pytorch.org/whl/cpu\ntorch==2.13.0\n", path="requirements.txt"),
        Valid("channels:\n  - conda-forge\ndependencies:\n  - numpy\n", path="environment.yml"),
    ]
    INVALID = [
        Invalid(
            "FROM python:3.11\nRUN pip install torch --index-url https://download.pytorch.org/whl/cu121\n"
            "RUN conda install -y pytorch -c nvidia\n",
            lines=[2, 3],
            path="Dockerfile.train",
        ),
        Invalid(
            "--extra-index-url https://download.pytorch.org/whl/cu121\ntorch==2.5.1+cu121\n",
            lines=[1, 2],
            path="requirements.txt",
        ),
        Invalid(
            '[[tool.uv.index]]\nname = "pytorch"\nurl = "https://download.pytorch.org/whl/cu124"\n',
            lines=[3],
            path="pyproject.toml",
        ),
        Invalid("channels:\n  - pytorch\n  - nvidia\ndependencies:\n  - pytorch\n", lines=[3], path="environment.yml"),
        Invalid("-i https://pypi.nvidia.com\ntensorrt\n", lines=[1], path="requirements-trt.txt"),
        Invalid(  # seed-vc's: the index named on the requirement's own line
            "torch --pre --index-url https://download.pytorch.org/whl/nightly/cu126\nnumpy --hash=sha256:0f\n",
            lines=[1],
            path="requirements.txt",
        ),
        Invalid(  # SimCLR's: what `conda list --export` wrote, builds for CUDA 10.1
            "# This file may be used to create an environment using:\n# $ conda create --name <env> --file <this file>\n"
            "# platform: linux-64\n_libgcc_mutex=0.1=main\nnumpy=1.18.1=py37h4f9e942_0\n"
            "pytorch=1.4.0=py3.7_cuda10.1.243_cudnn7.6.3_0\ntorchvision=0.5.0=py37_cu101\n",
            lines=[6, 7],
            path="requirements.txt",
        ),
        Invalid(  # GroundingDINO's environment.yaml: the mutex that selects CUDA builds of pytorch
            "name: dino\ndependencies:\n  - pytorch=2.0.1=py3.9_cpu_0\n  - pytorch-mutex=1.0=cuda\n",
            lines=[4],
            path="environment.yaml",
        ),
    ]

    def check_text(self, text: str) -> None:
        manifest = manifests.read(self.ctx.kind, text)
        lines = text.splitlines()
        for index in manifest.indexes:
            if _CUDA_INDEX.search(index.text):
                self._report(lines, index.line, f"the package source `{index.text}` serves CUDA builds")
        for declared in manifest.requirements:
            if _CUDA_LOCAL.search(declared.specifier) or _CUDA_BUILD.search(declared.build):
                self._report(lines, declared.line, f"`{declared.text}` pins a CUDA build")

    def _report(self, lines: list[str], line: int, what: str) -> None:
        width = len(lines[line - 1]) if 0 < line <= len(lines) else 1
        self.report_span((line, 1, line, width + 1), what=what)
