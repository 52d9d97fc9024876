from __future__ import annotations

import re

import libcst as cst

from portcheck import filekinds, manifests, project
from portcheck.rule import ERROR, Invalid, Rule, Valid, per_target
from portcheck.rules.dependencies import SETUP_CALLS, setup_requirements
from portcheck.rules.tool.unreadable_manifest import MANIFEST_KINDS
from portcheck.targets import packages

# A base image that ships CUDA: NVIDIA's own and NGC's, and tags that name a CUDA or cuDNN build
# (`pytorch/pytorch:2.1.0-cuda12.1-cudnn8-runtime`, `...:2.2.2-cu121`); Cog's `CUDA 11.8`.
_CUDA_IMAGE = re.compile(r"^(?:nvidia/|nvcr\.io/nvidia/)|\bcuda\b|cuda\d|cudnn|[:-]cu\d{2,3}\b|^CUDA ", re.IGNORECASE)


class CudaOnlyDependency(Rule):
    """## What it does
    Reports CUDA-only packages declared as dependencies: in requirements files, pyproject.toml
    (project dependencies, optional dependencies, dependency groups, build requirements,
    Poetry), setup.cfg, `setup(install_requires=..., extras_require=...)` in setup.py (also
    through a name, and Hugging Face's table `install_requires = [deps["bitsandbytes"]]`), conda
    environment files, what a Dockerfile's `RUN pip/uv/conda install` installs (also from a
    repository, `git+https://github.com/NVIDIA/apex.git`, named by the repository; from a
    project folder, `submodules/simple-knn` or `-e ./ext`, named by the folder), clones to
    build (`git clone https://github.com/NVIDIA/apex`) or builds with apex's `--cuda_ext`, and
    Cog's `python_packages`; including the `nvidia-*` runtime wheels, `cupy-cuda*`,
    `pytorch-cuda` and the nvidia conda channel's toolkit packages (`cuda-cudart`, `libcublas`,
    `libnvjpeg`...), also in a requirements file that `conda list --export` wrote.
    A Dockerfile's CUDA base image (`FROM nvidia/cuda:...`, `pytorch/pytorch:...-cuda12.1-...`,
    NVIDIA's NGC images) and Cog's `build.cuda` count as the CUDA runtime libraries.

    ## Why is this bad?
    The environment for the target cannot be built from these declarations: the wheels either
    do not exist for the platform or install CUDA libraries that nothing there can load.

    ## Example
    ```text
    torch==2.5.1
    flash-attn==2.6.3
    nvidia-cudnn-cu12
    ```

    ## Use instead
    Move CUDA-only packages to an optional extra (`pip install mypkg[cuda]`) or an environment
    marker, and let the target's PyTorch plugin bring its own runtime.

    ## Targets
    Per package, as for imports (PC701): an error where the package has no backend, a warning
    where a partial one exists.

    ## Fix safety
    No automatic fix.
    """

    code = "PC702"
    name = "cuda-only-dependency"
    message = "depends on `{name}`: {what}"
    hint = "move it to an optional CUDA extra; instead: {instead}"
    severity = per_target(ERROR)
    file_kinds = (filekinds.PYTHON, *MANIFEST_KINDS)
    triggers = (b"setup",)

    VALID = [
        Valid(
            "FROM python:3.11-slim\nRUN pip install -r requirements.txt && pip install -e .[train] $EXTRA\n"
            "FROM rocm/pytorch:rocm6.2_ubuntu22.04_py3.10_pytorch_release_2.3.0\n",
            path="Dockerfile",
        ),
        Valid("torch>=2.1\nnumpy\n", path="requirements.txt"),
        Valid("from setuptools import setup\nsetup(name='x', install_requires=['torch', 'numpy'])\n"),
        Valid("def setup(**kwargs):\n    pass\nsetup(install_requires=['flash-attn'])\n"),
        Valid("def configure(torch, setup):\n    setup(install_requires=['apex'])\n"),
        Valid(
            "import torch\nimport torch as T\nfrom torch import nn\nfrom torch.nn import Linear as L\nimport torch.cuda\n"
        ),
    ]
    INVALID = [
        Invalid(
            "FROM nvidia/cuda:12.1.0-cudnn8-runtime-ubuntu22.04\n"
            "RUN pip install --no-cache-dir -U pip && pip install torch==2.5.1 \\\n"
            "    flash-attn==2.6.3 --no-build-isolation\n",
            lines=[1, 3],
            path="Dockerfile",
        ),
        Invalid(
            'build:\n  gpu: true\n  cuda: "11.8"\n  python_packages:\n    - "torch==2.1.0"\n    - "xformers==0.0.22"\n',
            lines=[3, 6],
            path="cog.yaml",
        ),
        Invalid(  # dinov2's conda.yaml: a channel-qualified spec, a pip section, a RAPIDS CUDA build
            "dependencies:\n  - pytorch::pytorch-cuda=11.7.0\n  - pip:\n"
            "    - git+https://github.com/facebookincubator/submitit\n    - cuml-cu11\n",
            lines=[2, 5],
            path="conda.yaml",
        ),
        Invalid(  # ZoeDepth's environment.yml: conda's CUDA toolkit meta-package
            "name: zoe\nchannels:\n  - pytorch\ndependencies:\n  - cuda=11.7.1\n  - h5py=3.7.0\n",
            lines=[5],
            path="environment.yml",
            message="depends on `cuda`",
        ),
        Invalid("torch==2.5.1\nflash-attn==2.6.3\nnvidia-cudnn-cu12>=9\n", lines=[2, 3], path="requirements.txt"),
        Invalid(  # CosyVoice: TensorRT's wheels for CUDA 12, in parts
            "tensorrt-cu12==10.13.3.9; sys_platform == 'linux'\ntensorrt-cu12-bindings==10.13.3.9\ntensorrt-cu12-libs==10.13.3.9\n",
            lines=[1, 2, 3],
            path="requirements.txt",
            message="TensorRT",
        ),
        Invalid(  # installed from their repositories, named by them
            "git+https://github.com/NVIDIA/apex.git#egg=apex\ngit+https://github.com/facebookresearch/xformers.git@main\n"
            "git+https://github.com/openai/CLIP.git\n",
            lines=[1, 2],
            path="requirements.txt",
        ),
        Invalid(  # mistral-inference's and tacotron2's images: built from a clone, or with apex's CUDA option
            'FROM python:3.11\nRUN pip3 install "git+https://github.com/stanford-futuredata/megablocks.git"\n'
            "RUN git clone https://github.com/NVIDIA/apex && \\\n    cd apex && python3 setup.py install --cpp_ext --cuda_ext\n"
            'ADD apex /apex/\nRUN pip install -v --global-option="--cuda_ext" /apex\n',
            lines=[2, 3, 4, 6],
            path="Dockerfile",
        ),
        Invalid(  # DALLE-pytorch's image: the CUDA tag given by an ARG's default, reported where it is chosen
            "ARG IMG_TAG=1.8.1-cuda10.2-cudnn7-devel\nARG IMG_REPO=pytorch\nFROM pytorch/${IMG_REPO}:$IMG_TAG\n"
            "ARG BASE_IMAGE=nvidia/cuda:12.1.0-runtime-ubuntu22.04\nFROM ${BASE_IMAGE}\n",
            lines=[1, 4],
            message="CUDA runtime libraries",
            path="Dockerfile",
        ),
        Invalid(
            '[project]\nname = "x"\ndependencies = ["torch"]\n[project.optional-dependencies]\nfast = ["xformers>=0.0.25"]\n',
            lines=[5],
            path="pyproject.toml",
        ),
        Invalid(
            "import setuptools\nsetuptools.setup(\n    install_requires=['torch', 'apex'],\n"
            "    extras_require={'q': ['bitsandbytes']},\n)\n",
            lines=[3, 4],
        ),
        Invalid("[options]\ninstall_requires =\n    torch\n    mamba-ssm\n", lines=[4], path="setup.cfg"),
        Invalid(  # alignment-handbook's setup.py: Hugging Face's dependency table
            "import re\nfrom setuptools import setup\n_deps = ['bitsandbytes>=0.46.1', 'black', 'torch>=2.6.0']\n"
            "deps = {b: a for a, b in (re.findall(r'^(([^!=<>~ ]+)(?:[!=<>~ ].*)?$)', x)[0] for x in _deps)}\n"
            "install_requires = [\n    deps['bitsandbytes'],\n    deps['torch'],\n]\n"
            "setup(name='alignment', install_requires=install_requires + ['liger-kernel'])\n",
            lines=[6, 9],
        ),
        Invalid(
            "dependencies:\n  - pytorch=2.1\n  - pytorch-cuda=12.1\n  - pip:\n    - deepspeed\n    - liger-kernel\n",
            lines=[3, 5, 6],
            path="environment.yml",
        ),
        Invalid(  # gaussian-splatting: its CUDA extensions, installed from the folders of its submodules
            "dependencies:\n  - pip:\n    - submodules/diff-gaussian-rasterization\n    - ./submodules/simple-knn/\n"
            "    - -e submodules/fused-ssim\n    - submodules/plyfile-utils\n",
            lines=[3, 4, 5],
            path="environment.yml",
        ),
        Invalid(  # the nvidia channel's toolkit pieces (GroundingDINO), in SimCLR's env.yml
            "name: simclr\ndependencies:\n  - cudatoolkit=10.1\n  - numpy=1.18.1\n  - cuda-cudart=11.8.89=0\n"
            "  - libnvjpeg-dev=11.9.0.86=0\n  - nvidia-apex=0.1\n",
            lines=[3, 5, 6, 7],
            path="env.yml",
        ),
        Invalid(  # what `conda list --export` wrote, named requirements.txt
            "# platform: linux-64\ncudatoolkit=10.1.243=h6bb024c_0\nnumpy=1.18.1=py37h4f9e942_0\n",
            lines=[2],
            path="requirements.txt",
        ),
    ]

    def visit_Call(self, node: cst.Call) -> None:
        if self.ctx.qualified_names(node.func) & SETUP_CALLS:
            for string, text in setup_requirements(node, self.ctx):
                found = manifests.parse_requirement(text, 0)
                package = packages.by_distribution(found.name) if isinstance(found, manifests.Declared) else None
                if package is not None:
                    self.record(project.DEPENDENCY, package.key, string, written=found.name, declared="yes")
                    self.report(string, severity=package.severities(), **_fields(found.name, package))

    def check_text(self, text: str) -> None:
        lines = text.splitlines()
        manifest = manifests.read(self.ctx.kind, text)
        found = [(d.name, d.line, packages.by_distribution(d.name)) for d in manifest.requirements]
        runtime = packages.by_key("cuda_runtime_wheels")
        found += [(image.text, image.line, runtime) for image in manifest.images if _CUDA_IMAGE.search(image.text)]
        for name, line, package in found:
            if package is not None:
                width = len(lines[line - 1]) if 0 < line <= len(lines) else 1
                self.record(project.DEPENDENCY, package.key, (line, line), written=name, declared="yes")
                self.report_span((line, 1, line, width + 1), severity=package.severities(), **_fields(name, package))


def _fields(name: str, package: packages.Package) -> dict[str, str]:
    return {"name": name, "what": package.what, "instead": package.instead}
