"""Cross-file analysis, dependency manifests, CUDA sources and the kernel inventory."""

from __future__ import annotations

from pathlib import Path

import pytest

from portcheck import ctext, filekinds, inventory, manifests, readiness
from portcheck.api import scan_paths
from portcheck.config import Config
from portcheck.findings import Severity
from portcheck.project import ModulePath, Project
from portcheck.sources import module_path


def write(root: Path, files: dict[str, str | bytes]) -> None:
    for name, content in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content if isinstance(content, bytes) else content.encode())


def scan(root: Path, **overrides: object):
    return scan_paths([root], Config(root=root).with_overrides(**overrides), jobs=1)


# --- the second pass: facts from one file, findings in another ---------------------------------


def test_a_folder_named_like_a_package_holds_the_repository_s_own_modules(tmp_path: Path) -> None:
    """DeepLearningExamples' TFT: `triton/` holds Triton Inference Server scripts, run from the
    folder above; `from triton.deployment_toolkit.core import ...` is no import of Triton."""
    write(
        tmp_path,
        {
            "TFT/triton/deployment_toolkit/__init__.py": "",
            "TFT/triton/deployment_toolkit/core.py": "import torch\n",
            "TFT/triton/metrics.py": "import torch\nfrom triton.deployment_toolkit.core import BaseMetrics\n",
            "TFT/kernels.py": "import torch\nimport triton.language as tl\n",
        },
    )
    found = {(f.path, f.line) for f in scan(tmp_path).findings if f.code in ("PC610", "PC701")}
    assert found == {("TFT/kernels.py", 2)}


def test_an_extension_built_in_setup_py_is_reported_where_it_is_imported(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "setup.py": "from torch.utils.cpp_extension import CUDAExtension\next = CUDAExtension('pkg._ops', ['k.cu'])\n",
            "pkg/__init__.py": "",
            "pkg/layers.py": "from . import _ops\n\ndef f(x):\n    return _ops.run(x)\n",  # no CUDA word at all
            "pkg/other.py": "import pkg._ops as ops\n",
            "pkg/unrelated.py": "import json\n",
        },
    )
    found = {(f.path, f.line) for f in scan(tmp_path).findings if f.code == "PC607"}
    assert found == {("pkg/layers.py", 1), ("pkg/other.py", 1)}


def test_extensions_a_setup_helper_names_from_its_parameters_are_known_by_those_names(tmp_path: Path) -> None:
    """BasicSR's (and mmcv's) `make_cuda_ext(name, module, ...)` builds `f"{module}.{name}"`;
    each of setup.py's calls gives one module, whose import is then a kernel's."""
    setup = """\
import torch
from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CppExtension, CUDAExtension

def make_cuda_ext(name, module, sources, sources_cuda=None):
    if torch.cuda.is_available():
        extension = CUDAExtension
        sources += sources_cuda
    else:
        extension = CppExtension
    return extension(name=f'{module}.{name}', sources=sources)

setup(ext_modules=[
    make_cuda_ext(name='deform_conv_ext', module='pkg.ops.dcn', sources=['a.cpp'], sources_cuda=['k.cu']),
    make_cuda_ext('fused_act_ext', 'pkg.ops.fused_act', ['b.cpp'], ['f.cu']),
], cmdclass={'build_ext': BuildExtension})
"""
    write(
        tmp_path,
        {
            "setup.py": setup,
            "pkg/__init__.py": "",
            "pkg/ops/__init__.py": "",
            "pkg/ops/dcn/__init__.py": "",
            "pkg/ops/dcn/deform_conv.py": "try:\n    from . import deform_conv_ext\nexcept ImportError:\n    pass\n",
            "pkg/ops/fused_act/__init__.py": "",
            "pkg/ops/fused_act/fused_act.py": "from pkg.ops.fused_act import fused_act_ext\n",
        },
    )
    found = {(f.path, f.line) for f in scan(tmp_path).findings if f.code == "PC607"}
    assert found == {("pkg/ops/dcn/deform_conv.py", 2), ("pkg/ops/fused_act/fused_act.py", 1)}


def test_a_cuda_only_op_registered_in_cpp_is_reported_where_python_calls_it(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "csrc/ops.cpp": 'TORCH_LIBRARY_IMPL(lib, CUDA, m) {\n  m.impl("fast", &fast_cuda);\n  m.impl("both", &both_cuda);\n}\n'
            'TORCH_LIBRARY_IMPL(lib, CPU, m) {\n  m.impl("both", &both_cpu);\n}\n',
            "model.py": "import torch\n\ny = torch.ops.lib.fast(x)\nz = torch.ops.lib.both(x)\n",
        },
    )
    report = scan(tmp_path)
    assert [(f.path, f.line) for f in report.findings if f.code == "PC605"] == [("model.py", 3)]
    assert {(f.path, f.line) for f in report.findings if f.code == "PC604"} == {
        ("csrc/ops.cpp", 2),
        ("csrc/ops.cpp", 3),
    }


def test_without_project_facts_there_is_no_second_pass(tmp_path: Path) -> None:
    write(tmp_path, {"model.py": "import torch\ny = torch.ops.lib.fast(x)\nfrom pkg import _ops\n"})
    assert not [f for f in scan(tmp_path).findings if f.code in ("PC605", "PC607")]


def test_an_import_that_loads_triton_or_a_cuda_extension_is_reported_with_its_chain(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "setup.py": "from torch.utils.cpp_extension import CUDAExtension\next = CUDAExtension('lib._C', ['k.cu'])\n",
            "lib/__init__.py": "",
            "lib/kernels.py": "import torch\nimport triton\n",
            "lib/ops.py": "from lib import _C\n",  # PC607's
            "lib/guarded.py": "try:\n    from lib import kernels\nexcept ImportError:\n    kernels = None\n",
            "lib/lazy.py": "def run():\n    from lib.kernels import fused\n    return fused\n",
            "pkg/__init__.py": "from .layers import Block\n",  # no word any rule looks for: a later pass reads it
            "pkg/layers.py": "import torch\nfrom lib.kernels import fused\n",
            "app.py": "import json\nimport lib.ops\nfrom lib.guarded import kernels\nfrom lib import lazy\nimport pkg\n",
            "train.py": "import pkg\n",  # skipped by the first pass too
        },
    )
    found = {(f.path, f.line, f.message.split(": on a host")[0]) for f in scan(tmp_path).findings if f.code == "PC610"}
    assert found == {
        ("lib/kernels.py", 2, "`triton` is imported when the module is, outside try/except ImportError"),
        ("pkg/layers.py", 2, "`lib.kernels` imports Triton when it is imported (lib.kernels -> triton)"),
        ("pkg/__init__.py", 1, "`pkg.layers` imports Triton when it is imported (pkg.layers -> lib.kernels -> triton)"),
        ("app.py", 2, "`lib.ops` imports the CUDA extension `lib._C` when it is imported (lib.ops -> lib._C)"),
        ("train.py", 1, "`pkg` imports Triton when it is imported (pkg -> pkg.layers -> lib.kernels -> triton)"),
        ("app.py", 5, "`pkg` imports Triton when it is imported (pkg -> pkg.layers -> lib.kernels -> triton)"),
    }  # app.py stops at line 2, but loads only once line 5 is guarded too
    # where the imported module does not import the cause itself, it loads once that one is fixed: info
    levels = {(f.path, f.line): f.severity for f in scan(tmp_path).findings if f.code == "PC610"}
    assert {place for place, level in levels.items() if level is Severity.INFO} == {
        ("pkg/__init__.py", 1),
        ("train.py", 1),
        ("app.py", 5),
    }
    found_both = scan(tmp_path, targets=("tpu", "rocm")).findings
    both = {(f.path, f.line): dict(f.targets) for f in found_both if f.code == "PC610"}
    assert both[("lib/kernels.py", 2)] == {"tpu": Severity.ERROR}  # Triton runs on rocm
    assert both[("pkg/layers.py", 2)] == {"tpu": Severity.ERROR}
    assert both[("app.py", 2)] == {"tpu": Severity.ERROR, "rocm": Severity.WARNING}  # hipified: a build to make


def test_a_package_with_no_build_for_the_target_fails_the_modules_that_import_it(tmp_path: Path) -> None:
    """InternVL: `internvl.patch` re-exports packed-training patches that import flash-attn at the
    top, so the fine-tuning script stops at `from internvl.patch import ...` on a TPU host (ROCm
    has a build); a guarded import, or one of a package that installs anywhere, stops nothing."""
    write(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/patch/__init__.py": "from .flash_patch import replace_attention\nfrom .collate import pad_collate\n",
            "pkg/patch/flash_patch.py": "import torch\nfrom flash_attn.flash_attn_interface import flash_attn_varlen_func\n"
            "def replace_attention():\n    torch.nn.functional.scaled_dot_product_attention = flash_attn_varlen_func\n",
            "pkg/patch/collate.py": "import torch\ndef pad_collate(batch):\n    return torch.stack(batch)\n",
            "pkg/guarded.py": "try:\n    import flash_attn\nexcept ImportError:\n    flash_attn = None\n",
            "pkg/sparse.py": "import torch\nimport xformers.ops\n",  # xFormers installs on any host
            "train.py": "import torch\nimport pkg.guarded\nimport pkg.sparse\nfrom pkg.patch import pad_collate, replace_attention\n"
            "def main(packed):\n    if packed:\n        replace_attention()\n    return pad_collate([torch.zeros(2)])\n",
        },
    )
    findings = scan(tmp_path, targets=("tpu", "rocm")).findings
    chains = {
        (f.path, f.line): (dict(f.targets), f.message.split(": on a host")[0]) for f in findings if f.code == "PC610"
    }
    assert chains == {
        ("pkg/patch/__init__.py", 1): (
            {"tpu": Severity.ERROR},
            "`pkg.patch.flash_patch` imports `flash_attn` when it is imported "
            "(pkg.patch.flash_patch -> flash_attn.flash_attn_interface.flash_attn_varlen_func)",
        ),
        ("train.py", 4): (
            {"tpu": Severity.ERROR},
            "`pkg.patch` imports `flash_attn` when it is imported "
            "(pkg.patch -> pkg.patch.flash_patch -> flash_attn.flash_attn_interface.flash_attn_varlen_func)",
        ),
    }
    # what the failing module defines may or may not use flash-attn (the collate does not): its import is the finding
    calls = {(f.line, f.severity) for f in findings if f.code == "PC707" and f.path == "train.py"}
    assert calls == {(7, Severity.INFO), (8, Severity.INFO)}
    built = "from torch.utils.cpp_extension import CUDAExtension\next = CUDAExtension('rotary_emb', ['r.cu'])\n"
    write(
        tmp_path, {"setup.py": built, "pkg/rope.py": "import torch\nimport rotary_emb\n", "app.py": "import pkg.rope\n"}
    )
    messages = {f.message.split(": on a host")[0] for f in scan(tmp_path).findings if f.path == "app.py"}
    assert messages == {
        "`pkg.rope` imports the CUDA extension `rotary_emb` when it is imported (pkg.rope -> rotary_emb)"
    }


def test_a_failing_module_used_only_where_a_caller_turns_a_flag_on_is_the_callers_check(tmp_path: Path) -> None:
    """InternViT: `Attention(use_flash_attn=False)` builds the FlashAttention module of a sibling
    that imports flash-attn only `if use_flash_attn:`, a flag the model computes as
    `use_flash_attn and has_flash_attn`; a flag that is on by default checks nothing."""
    vit = (
        "import torch\ntry:\n    from .flash_attention import FlashAttention\n    has_flash_attn = True\n"
        "except ImportError:\n    has_flash_attn = False\n"
        "class Attention(torch.nn.Module):\n    def __init__(self, dim, use_flash_attn=False):\n"
        "        super().__init__()\n        if use_flash_attn:\n            self.inner = FlashAttention()\n"
        "class Fused(torch.nn.Module):\n    def __init__(self, dim, use_flash_attn=True):\n"
        "        super().__init__()\n        if use_flash_attn:\n            self.inner = FlashAttention()\n"
    )
    write(
        tmp_path,
        {
            "models/__init__.py": "",
            "models/flash_attention.py": "import torch\nfrom flash_attn.bert_padding import pad_input\n"
            "class FlashAttention(torch.nn.Module):\n    def forward(self, x):\n        return pad_input(x)\n",
            "models/vit.py": vit,
        },
    )
    found = {f.line for f in scan(tmp_path).findings if f.code == "PC707" and f.path == "models/vit.py"}
    assert found == {16}


def test_a_top_level_extension_fails_its_importers_and_the_calls_behind_a_none_fallback(tmp_path: Path) -> None:
    """Swin's shape: an extension named by setup.py alone (no file of the tree), imported at the
    top of a kernels module; a model imports that module optionally, leaving None."""
    write(
        tmp_path,
        {
            "setup.py": "from torch.utils.cpp_extension import CUDAExtension\next = CUDAExtension('fused_ext', ['k.cu'])\n",
            "pkg/__init__.py": "",
            "pkg/ops.py": "import torch\nimport fused_ext\nclass Fused(torch.autograd.Function):\n    pass\n",
            "pkg/user.py": "import torch\nfrom pkg.ops import Fused\n",
            "pkg/model.py": (
                "import torch\ntry:\n    from .ops import Fused\nexcept ImportError:\n    Fused = None\n"
                "def forward(x, fused):\n    return Fused.apply(x) if fused else x\n"
                "def checked(x):\n    return Fused.apply(x) if Fused is not None else x\n"
            ),
            "pkg/plain.py": "import torch\nimport numpy\ntry:\n    import scipy\nexcept ImportError:\n    scipy = None\n",
            # a folder without __init__.py: a namespace package once the program extends sys.path
            "kernels/window/process.py": "import torch\nimport fused_ext\nclass Window(torch.autograd.Function):\n    pass\n",
            "pkg/swin.py": (
                "import torch\ntry:\n    from kernels.window.process import Window\nexcept:\n    Window = None\n"
                "def forward(x):\n    return Window.apply(x)\n"
            ),
        },
    )
    found = {(f.path, f.line, f.code): f.severity for f in scan(tmp_path).findings if f.code in ("PC610", "PC707")}
    assert found == {
        ("pkg/user.py", 2, "PC610"): Severity.ERROR,
        ("pkg/model.py", 7, "PC707"): Severity.ERROR,
        ("pkg/swin.py", 7, "PC707"): Severity.ERROR,
    }
    messages = sorted(f.message for f in scan(tmp_path).findings if f.code == "PC707")
    assert "calls `Fused.apply` of `pkg.ops`" in messages[0] and "AttributeError" in messages[0]
    assert "calls `Window.apply` of `kernels.window.process`" in messages[1]


def test_a_kernel_package_below_namespace_folders_fails_its_importers(tmp_path: Path) -> None:
    """CenterNet: models/networks/ has no __init__.py; its DCNv2 package builds `_ext` and its
    layer module `dcn_v2` imports `dcn_v2_func`, which loads it. A network beside DCNv2 imports
    the layer relatively, by the name a namespace import gives the package: the import fails
    through that chain (info: it loads once `dcn_v2_func` guards its import)."""
    write(
        tmp_path,
        {
            "src/lib/models/networks/DCNv2/setup.py": (
                "from torch.utils.cpp_extension import CUDAExtension\next = CUDAExtension('DCNv2._ext', ['k.cu'])\n"
            ),
            "src/lib/models/networks/DCNv2/__init__.py": "",
            "src/lib/models/networks/DCNv2/dcn_v2_func.py": "import torch\nfrom ._ext import dcn_v2 as _backend\n",
            "src/lib/models/networks/DCNv2/dcn_v2.py": (
                "import torch\nfrom .dcn_v2_func import DCNv2Function\nclass DCN(torch.nn.Module):\n    pass\n"
            ),
            "src/lib/models/networks/pose_dla_dcn.py": (
                "import torch\nfrom .DCNv2.dcn_v2 import DCN\ndef head(c):\n    return DCN(c, c)\n"
            ),
        },
    )
    found = {(f.path, f.line, f.code): f.severity for f in scan(tmp_path).findings if f.code in ("PC610", "PC707")}
    assert found[("src/lib/models/networks/pose_dla_dcn.py", 2, "PC610")] == Severity.INFO
    chain = next(f.message for f in scan(tmp_path).findings if f.code == "PC610" and "pose" in f.path)
    assert "(src.lib.models.networks.DCNv2.dcn_v2 -> DCNv2.dcn_v2_func -> DCNv2._ext.dcn_v2)" in chain


def test_what_a_step_loop_calls_in_another_module_runs_every_step(tmp_path: Path) -> None:
    utils = """\
import torch

class MetricLogger:
    def update(self, **kwargs):
        for k, v in kwargs.items():
            if isinstance(v, torch.Tensor):
                v = v.item()
            self.meters[k] = v

    def log(self, value):
        return value.item()

def clip_gradients(model, clip):
    norms = []
    for p in model.parameters():
        norms.append(p.grad.norm(2).item())
    return norms

def summary(t):
    return t.item()

def validate(model, loader):
    total = torch.zeros(())
    for x, y in loader:
        total += model(x, y)
    return total.item()
"""
    engine = """\
import torch
import utils
from utils import clip_gradients

def train_one_epoch(model, loader, optimizer):
    logger = utils.MetricLogger()
    for step, (x, y) in enumerate(loader):
        loss = model(x, y)
        loss.backward()
        clip_gradients(model, 3.0)
        optimizer.step()
        acc = (model(x).argmax(-1) == y).float().mean() if step else None
        logger.update(loss=loss.item(), acc=acc)
        optimizer.zero_grad()
        utils.validate(model, loader)  # an evaluation of its own: its loop is the step
    print(utils.summary(loss))
"""
    evaluate = """\
import torch
import utils

def evaluate(model, loader):
    logger = utils.MetricLogger()
    for x, y in loader:
        logger.update(loss=model(x, y).item())
        logger.log(model(x, y))
"""
    write(tmp_path, {"utils.py": utils, "engine.py": engine})
    found = {
        (f.path, f.line, f.message.split(" copies")[0].rstrip(","))
        for f in scan(tmp_path).findings
        if f.code == "PC503"
    }
    given = "`logger.update(...)`, whose `.item()` at utils.py:7 reads back the tensor given here,"
    assert found == {
        ("engine.py", 13, "`.item()` in a loop over a DataLoader"),
        ("engine.py", 13, f"{given} in a loop over a DataLoader"),  # `acc`, a tensor
        ("utils.py", 7, "`.item()` in `update()`, called from a loop over a DataLoader in engine.py"),
        ("utils.py", 16, "`.item()` in `clip_gradients()`, called from a loop over a DataLoader in engine.py"),
    }  # summary() runs once, after the loop
    write(tmp_path, {"engine.py": "import json\n", "evaluate.py": evaluate})  # floats reach update() now
    found = {(f.path, f.line) for f in scan(tmp_path).findings if f.code == "PC503"}
    assert found == {("evaluate.py", 7), ("utils.py", 11)}
    losses = evaluate.replace("logger.update(loss=model(x, y).item())", "logger.update(**scaled)")
    losses = losses.replace(
        "    for x, y in loader:\n",
        "    for x, y in loader:\n        scaled = {k: v * w[k] for k, v in model(x, y).items()}\n",
    )
    write(tmp_path, {"evaluate.py": losses})  # detr: a dict of losses passed as **kwargs
    found = {(f.path, f.line) for f in scan(tmp_path).findings if f.code == "PC503"}
    assert found == {("evaluate.py", 8), ("utils.py", 7), ("utils.py", 11)}  # the call, and the read
    numbers = losses.replace("{k: v * w[k] for", "{k: v.item() / world for")
    write(tmp_path, {"evaluate.py": numbers})  # dinov2: numbers read back once, here, then divided
    found = {(f.path, f.line) for f in scan(tmp_path).findings if f.code == "PC503"}
    assert found == {("evaluate.py", 7), ("utils.py", 11)}
    annotated = "from utils import MetricLogger\n\ndef train(logger: MetricLogger, loader):\n"
    annotated += "    for x in loader:\n        logger.log(x)\n"
    write(tmp_path, {"evaluate.py": annotated})  # the logger is a parameter, known by its annotation
    found = {(f.path, f.line) for f in scan(tmp_path).findings if f.code == "PC503"}
    assert found == {("utils.py", 11)}
    optional = annotated.replace("logger: MetricLogger", "logger: Optional[MetricLogger]")
    write(tmp_path, {"evaluate.py": "from typing import Optional\n" + optional})  # mistral-inference's cache
    found = {(f.path, f.line) for f in scan(tmp_path).findings if f.code == "PC503"}
    assert found == {("utils.py", 11)}


def test_a_class_built_on_a_declared_optional_packages_class_is_reported(tmp_path: Path) -> None:
    """lit-llama declares bitsandbytes; its 8-bit layer subclasses bitsandbytes' under `if bnb is
    not None:`, a check the import passes on the target, so the class is defined there."""
    quantization = """\
import torch
try:
    import bitsandbytes as bnb
except ImportError:
    bnb = None

if bnb is not None:
    class Linear8bitLt(bnb.nn.Linear8bitLt):
        def quantize(self, weight):
            return bnb.functional.double_quant(weight)
"""
    write(tmp_path, {"requirements.txt": "torch\nbitsandbytes\n", "quantization.py": quantization})
    found = {(f.line, f.message.split(", ")[0]) for f in scan(tmp_path).findings if f.code == "PC707"}
    assert found == {
        (8, "subclasses `bnb.nn.Linear8bitLt` of bitsandbytes"),
        (10, "calls `bnb.functional.double_quant` of bitsandbytes"),
    }


def test_a_call_leaving_out_a_length_another_module_fills_from_tensors_is_reported(tmp_path: Path) -> None:
    """CosyVoice: `make_pad_mask` (utils/mask.py) fills `max_len` from `lengths.max().item()`; the
    flow model's forward() (model/flow.py) calls it without one, as its inference does once."""
    mask = """\
import torch

def make_pad_mask(lengths: torch.Tensor, max_len: int = 0) -> torch.Tensor:
    max_len = max_len if max_len > 0 else lengths.max().item()
    seq_range = torch.arange(0, max_len, dtype=torch.int64, device=lengths.device)
    return seq_range.unsqueeze(0) >= lengths.unsqueeze(-1)
"""
    model = """\
import torch
from utils.mask import make_pad_mask as pad_mask

class Flow(torch.nn.Module):
    def forward(self, token, token_len):
        mask = (~pad_mask(token_len)).float().unsqueeze(-1)
        full = pad_mask(token_len, token.size(1))
        return token * mask * full

    @torch.inference_mode()
    def inference(self, token, token_len):
        return token * (~pad_mask(token_len)).unsqueeze(-1)
"""
    write(tmp_path, {"utils/__init__.py": "", "utils/mask.py": mask, "model/__init__.py": "", "model/flow.py": model})
    found = {
        (f.path, f.line): dict(f.targets)
        for f in scan(tmp_path, targets=("tpu", "neuron")).findings
        if f.code == "PC520"
    }
    assert found == {
        ("model/flow.py", 6): {"tpu": Severity.WARNING, "neuron": Severity.ERROR},
        ("model/flow.py", 12): {"tpu": Severity.INFO, "neuron": Severity.INFO},
    }


def test_a_call_through_the_module_giving_none_for_a_length_it_fills_is_reported(tmp_path: Path) -> None:
    """OpenVoice (a vits): `commons.sequence_mask(y_lengths, None)` in the generator's forward();
    `commons.py` fills `max_length` from `length.max()` when it is None. A length given is fine."""
    commons = """\
import torch

def sequence_mask(length, max_length=None):
    if max_length is None:
        max_length = length.max()
    x = torch.arange(max_length, dtype=length.dtype, device=length.device)
    return x.unsqueeze(0) < length.unsqueeze(1)
"""
    models = """\
import torch
from voice import commons

class Generator(torch.nn.Module):
    def forward(self, x, w):
        y_lengths = torch.clamp_min(torch.sum(w, [1, 2]), 1).long()
        y_mask = commons.sequence_mask(y_lengths, None)
        x_mask = commons.sequence_mask(y_lengths, x.size(2))
        return x * y_mask * x_mask * commons.sequence_mask(y_lengths)
"""
    write(tmp_path, {"voice/__init__.py": "", "voice/commons.py": commons, "voice/models.py": models})
    found = {(f.path, f.line, f.message.split("`")[2]) for f in scan(tmp_path).findings if f.code == "PC520"}
    assert found == {("voice/models.py", 7, " gives "), ("voice/models.py", 9, " leaves out ")}


def test_a_function_handed_to_another_modules_training_loop_runs_every_step(tmp_path: Path) -> None:
    """Megatron: `pretrain_gpt.py` hands `forward_step` to `pretrain()`, which passes it on to
    `train()`, whose training loop hands it to `train_step()` every iteration; the model
    provider it hands over too runs once."""
    training = """\
import torch

def train_step(forward_step_func, data_iterator, model, optimizer):
    loss = forward_step_func(data_iterator, model)
    loss.backward()
    optimizer.step()

def train(forward_step_func, model, optimizer, data_iterator, iters):
    iteration = 0
    while iteration < iters:
        train_step(forward_step_func, data_iterator, model, optimizer)
        iteration += 1

def pretrain(model_provider, forward_step_func, iters=10):
    model = model_provider()
    train(forward_step_func, model, torch.optim.AdamW(model.parameters()), iter([]), iters)
"""
    script = """\
import torch
from lib import pretrain

def model_provider():
    model = torch.nn.Linear(4, 4)
    print(model.weight.sum().item())
    return model

def forward_step(data_iterator, model):
    tokens, max_seqlen = next(data_iterator)
    return model(tokens[:, : int(max_seqlen.item())]).sum()

if __name__ == "__main__":
    pretrain(model_provider, forward_step_func=forward_step)
"""
    write(
        tmp_path,
        {"lib/__init__.py": "from .training import pretrain\n", "lib/training.py": training, "pretrain_gpt.py": script},
    )
    found = {(f.code, f.line, f.severity) for f in scan(tmp_path).findings if f.path == "pretrain_gpt.py"}
    assert found == {("PC505", 11, Severity.ERROR)}  # the model provider's read runs once


def test_a_function_called_through_a_namespace_of_its_module_runs_where_the_call_does(tmp_path: Path) -> None:
    """nanochat: `flash_attention.py` exports its functions as `flash_attn = SimpleNamespace(...)`,
    and the model's forward calls `flash_attn.flash_attn_with_kvcache(...)`: the SDPA fallback's
    `.item()` and the cache slices it bounds run every step. A member bound to no function of
    the module is no function to follow."""
    attention = """\
from types import SimpleNamespace
import torch

def flash_attn_with_kvcache(q, k_cache, cache_seqlens):
    pos = cache_seqlens[0].item()
    return q @ k_cache[:, :pos].transpose(-1, -2)

def unused(q, cache_seqlens):
    return q[:, : cache_seqlens[0].item()]

flash_attn = SimpleNamespace(flash_attn_with_kvcache=flash_attn_with_kvcache, unused=print)
"""
    model = """\
import torch
from pkg.attention import flash_attn

class Attention(torch.nn.Module):
    def forward(self, q, k_cache, cache_seqlens):
        return flash_attn.flash_attn_with_kvcache(q, k_cache, cache_seqlens)
"""
    write(tmp_path, {"pkg/__init__.py": "", "pkg/attention.py": attention, "pkg/model.py": model})
    found = {(f.code, f.line, f.severity) for f in scan(tmp_path).findings if f.path == "pkg/attention.py"}
    assert found == {
        ("PC503", 5, Severity.ERROR),
        ("PC505", 6, Severity.ERROR),
        ("PC505", 9, Severity.INFO),
    }


def test_a_collator_that_calls_another_modules_padding_helper_pads_to_the_longest(tmp_path: Path) -> None:
    """trl: `trainer/utils.py`'s `pad()` sizes its batch by the largest shape of the tensors it is
    given, and the trainers' collators call it for every batch, with a `pad_to_multiple_of` that
    defaults to None: each batch has its longest length. Given a multiple that leaves few
    lengths, the call is left alone, and so is a call outside a batch function."""
    utils = """\
import numpy as np
import torch

def pad(tensors, padding_value=0, pad_to_multiple_of=None):
    output_shape = np.max([t.shape for t in tensors], 0).tolist()
    if pad_to_multiple_of is not None:
        output_shape[0] += (-output_shape[0]) % pad_to_multiple_of
    output = torch.full((len(tensors), *output_shape), padding_value)
    for i, t in enumerate(tensors):
        output[i, : t.shape[0]] = t
    return output
"""
    collator = """\
from dataclasses import dataclass
import torch
from pkg.utils import pad

@dataclass
class DataCollatorForPreference:
    pad_token_id: int
    pad_to_multiple_of: int | None = None

    def __call__(self, examples):
        ids = [torch.tensor(e["input_ids"]) for e in examples]
        return {
            "input_ids": pad(ids, self.pad_token_id, pad_to_multiple_of=self.pad_to_multiple_of),
            "bucketed": pad(ids, self.pad_token_id, pad_to_multiple_of=128),
        }

def preview(examples):
    return pad([torch.tensor(e) for e in examples])
"""
    write(tmp_path, {"pkg/__init__.py": "", "pkg/utils.py": utils, "pkg/collate.py": collator})
    found = {(f.code, f.line) for f in scan(tmp_path).findings if f.path == "pkg/collate.py" and f.code == "PC507"}
    assert found == {("PC507", 13)}


def test_a_collate_function_of_another_module_that_pads_to_the_longest_is_reported_where_it_is_given(
    tmp_path: Path,
) -> None:
    """torchtune's recipes hand the library's `padded_collate_sft` to their DataLoaders by
    name, through `functools.partial`, and as a configured default string."""
    collate = """\
import torch
from torch.nn.utils.rnn import pad_sequence

def padded_collate_sft(batch, padding_idx=0):
    return pad_sequence([torch.tensor(x["tokens"]) for x in batch], batch_first=True, padding_value=padding_idx)
"""
    recipe = """\
from functools import partial
from torch.utils.data import DataLoader
from pkg.data import padded_collate_sft

def setup(cfg, ds, packed):
    name = cfg.get("collate_fn", "pkg.data.padded_collate_sft")
    loader = DataLoader(ds, collate_fn=partial(padded_collate_sft, padding_idx=0) if not packed else None)
    plain = DataLoader(ds, collate_fn=padded_collate_sft)
    return name, loader, plain
"""
    write(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/data/__init__.py": "from pkg.data._collate import padded_collate_sft\n",
            "pkg/data/_collate.py": collate,
            "recipes/train.py": recipe,
        },
    )
    found = {
        (f.line, f.message.split(" pads ")[0])
        for f in scan(tmp_path).findings
        if f.code == "PC507" and f.path == "recipes/train.py"
    }
    assert found == {
        (6, "the collate function `pkg.data.padded_collate_sft`"),
        (7, "`collate_fn=padded_collate_sft` (pkg.data.padded_collate_sft)"),
        (8, "`collate_fn=padded_collate_sft` (pkg.data.padded_collate_sft)"),
    }


def test_a_function_of_another_module_returning_a_pad_to_longest_collate_function_is_reported_where_called(
    tmp_path: Path,
) -> None:
    """litgpt's data modules: `collate_fn=get_sft_collate_fn(max_seq_length=...)`, which returns
    `partial(_sft_collate_fn, ...)`; a factory that may return something else is left alone."""
    base = """\
from functools import partial
import torch

def get_sft_collate_fn(max_seq_length=-1):
    return partial(_sft_collate_fn, max_seq_length=max_seq_length)

def get_other(kind):
    if kind == "sft":
        return _sft_collate_fn
    return None

def _sft_collate_fn(samples, max_seq_length=-1):
    return torch.nn.utils.rnn.pad_sequence([s["input_ids"] for s in samples], batch_first=True)
"""
    module = """\
from torch.utils.data import DataLoader
from pkg.base import get_other, get_sft_collate_fn

def loaders(ds):
    return DataLoader(ds, collate_fn=get_sft_collate_fn(max_seq_length=512)), DataLoader(ds, collate_fn=get_other("x"))
"""
    write(tmp_path, {"pkg/__init__.py": "", "pkg/base.py": base, "pkg/alpaca.py": module})
    found = {
        (f.line, f.message.split(" pads ")[0])
        for f in scan(tmp_path).findings
        if f.code == "PC507" and f.path == "pkg/alpaca.py"
    }
    assert found == {(5, "`collate_fn=get_sft_collate_fn(...)` (made by pkg.base.get_sft_collate_fn)")}


def test_a_package_below_a_folder_without_init_re_exports_by_its_full_name(tmp_path: Path) -> None:
    """Megatron-LM's layout: `megatron/` has no `__init__.py`, `megatron/training/__init__.py`
    re-exports `pretrain` from `training.py`, and the scripts beside `megatron/` import
    `from megatron.training import pretrain`."""
    training = """\
import torch

def train(forward_step_func, model, optimizer, data_iterator, iters):
    for _ in range(iters):
        loss = forward_step_func(data_iterator, model)
        loss.backward()
        optimizer.step()

def pretrain(model, optimizer, forward_step_func):
    train(forward_step_func, model, optimizer, iter([]), 10)
"""
    script = (
        "import torch\nfrom megatron.training import pretrain\n\ndef forward_step(data_iterator, model):\n"
        "    tokens, lengths = next(data_iterator)\n    n = int(lengths.max().item())\n"
        "    return model(tokens).sum() / n\n\npretrain(torch.nn.Linear(4, 4), None, forward_step)\n"
    )
    write(
        tmp_path,
        {
            "megatron/training/__init__.py": "from .training import pretrain\n",
            "megatron/training/training.py": training,
            "pretrain_gpt.py": script,
        },
    )
    found = {(f.line, f.message.split(",")[0]) for f in scan(tmp_path).findings if f.code == "PC503"}
    assert found == {(6, "`.item()` in `forward_step()`")}


def test_steps_reach_methods_of_objects_held_by_self_and_what_those_call(tmp_path: Path) -> None:
    """guided-diffusion: `self.mp_trainer.optimize()` every step runs `_norms()` through
    `_optimize()`; an `isinstance` check narrows `self.sampler` to the class whose method runs;
    a loss object called every step runs its `__call__`. What the first pass saw only as info
    (a mask outside any step of its own file) the second pass makes an error."""
    fp16 = """\
import torch

class Trainer:
    def optimize(self, opt):
        self._optimize(opt)

    def _optimize(self, opt):
        print(self._norms())
        opt.step()

    def _norms(self):
        return [p.grad.norm().item() for p in self.params]

    def unused(self, x):
        return x.item()
"""
    sampling = """\
import torch

class Sampler:
    def weights(self):
        return torch.ones(3)

class LossAware(Sampler):
    def update(self, losses):
        return [x.item() for x in losses]
"""
    losses = """\
import torch

class Loss:
    def __call__(self, pred, targets):
        return pred[targets > 0].sum()
"""
    train = """\
import torch
from fp16 import Trainer
from sampling import LossAware, Sampler
from losses import Loss

class Loop:
    def __init__(self, model, sampler=None):
        self.trainer = Trainer()
        self.sampler = sampler or Sampler()
        self.loss_fn = Loss()

    def run(self, loader, opt):
        for batch in loader:
            self.step(batch, opt)

    def step(self, batch, opt):
        loss = self.loss_fn(self.model(batch), batch)
        loss.backward()
        self.trainer.optimize(opt)
        if isinstance(self.sampler, LossAware):
            self.sampler.update(loss.detach())
"""
    write(tmp_path, {"fp16.py": fp16, "sampling.py": sampling, "losses.py": losses, "train.py": train})
    found = {(f.path, f.line, f.code): f for f in scan(tmp_path).findings if f.code in ("PC502", "PC503")}
    assert set(found) == {("fp16.py", 12, "PC503"), ("sampling.py", 9, "PC503"), ("losses.py", 5, "PC502")}
    assert "`_norms()`, called from `optimize()`, called from `step()`" in found[("fp16.py", 12, "PC503")].message
    mask = found[("losses.py", 5, "PC502")]
    assert mask.severity == Severity.ERROR and "info" not in mask.message
    write(tmp_path, {"train.py": "import json\n"})  # nothing runs the loss every step now
    (alone,) = [f for f in scan(tmp_path).findings if f.code == "PC502"]
    assert alone.severity == Severity.INFO and "(info: no step loop" in alone.message


def test_a_guarded_cuda_only_package_the_project_declares_is_called_on_the_target(tmp_path: Path) -> None:
    """dinov2: xFormers is in requirements.txt, so its guarded import succeeds on a TPU host
    and the call in forward() runs there; without the declaration the target takes the other path,
    without the fast kernel: a warning."""
    layer = (
        "import torch\ntry:\n    from xformers.ops import memory_efficient_attention\nexcept ImportError:\n"
        "    memory_efficient_attention = None\n\nclass Attention(torch.nn.Module):\n    def forward(self, q, k, v):\n"
        "        if memory_efficient_attention is None:\n            return q\n"
        "        return memory_efficient_attention(q, k, v)\n"
    )
    write(tmp_path, {"pkg/__init__.py": "", "pkg/layers.py": layer, "requirements.txt": "torch\nxformers==0.0.18\n"})
    (call,) = [f for f in scan(tmp_path).findings if f.code == "PC707"]
    assert (call.path, call.line, call.severity) == ("pkg/layers.py", 11, Severity.ERROR)
    assert "the project declares xformers" in call.message
    write(tmp_path, {"requirements.txt": "torch\n"})
    (call,) = [f for f in scan(tmp_path).findings if f.code == "PC707"]
    assert call.severity == Severity.WARNING and "the target takes the other path" in call.message


def test_a_library_api_the_repository_re_exports_keeps_its_cuda_default(tmp_path: Path) -> None:
    """yolov5: utils/torch_utils.py binds `smart_amp_autocast` to Ultralytics' `autocast`, whose
    device defaults to "cuda"; the training scripts call it from there, without a device."""
    utils = "import torch\nfrom ultralytics.utils.torch_utils import autocast as smart_amp_autocast  # noqa: F401\n"
    train = (
        "import torch\nfrom utils.torch_utils import smart_amp_autocast\n\n"
        "def step(model, x, amp, device):\n    with smart_amp_autocast(amp):\n        loss = model(x)\n"
        "    with smart_amp_autocast(amp, device=device.type):\n        return model(x)\n"
    )
    write(tmp_path, {"utils/__init__.py": "", "utils/torch_utils.py": utils, "train.py": train})
    found = [(f.path, f.line, f.severity) for f in scan(tmp_path).findings if f.code == "PC109"]
    assert found == [("train.py", 5, Severity.WARNING)]


def test_a_float64_numpy_array_another_module_returns_becomes_a_float64_buffer(tmp_path: Path) -> None:
    """score_sde: models/utils.py computes the noise levels in NumPy (float64), the models
    register them as a buffer through `from . import utils`, and it moves with the model. A
    cast on the way, or a function that returns float32, is fine."""
    utils = (
        "import numpy as np\nimport torch\n\ndef get_sigmas(config):\n"
        "    sigmas = np.exp(np.linspace(np.log(config.sigma_max), np.log(config.sigma_min), config.n))\n"
        "    return sigmas\n\ndef get_steps(config):\n    return np.linspace(0, 1, config.n, dtype=np.float32)\n"
    )
    model = (
        "import torch\nfrom . import utils\n\nclass NCSN(torch.nn.Module):\n    def __init__(self, config):\n"
        "        super().__init__()\n        self.register_buffer('sigmas', torch.tensor(utils.get_sigmas(config)))\n"
        "        self.register_buffer('cast', torch.tensor(utils.get_sigmas(config)).float())\n"
        "        self.register_buffer('steps', torch.tensor(utils.get_steps(config)))\n"
    )
    write(tmp_path, {"models/__init__.py": "", "models/utils.py": utils, "models/ncsn.py": model})
    found = [(f.path, f.line) for f in scan(tmp_path).findings if f.code == "PC307"]
    assert found == [("models/ncsn.py", 7)]


def test_a_library_function_another_module_passes_a_tensor_tests_it_every_step(tmp_path: Path) -> None:
    """k-diffusion: `sample.py` passes the schedule `get_sigmas_karras` returns to one sampler
    of `sampling.py`; every sampler there takes `sigmas` third and tests `sigmas[i + 1]` in its
    loop, a host sync each step. A parameter of another name or position, and a function
    only ever given numbers, stay unknown."""
    sampling = (
        "import torch\n\ndef get_sigmas(n, device='cpu'):\n    return torch.linspace(1, 0, n).to(device)\n\n"
        "def sample_lms(model, x, sigmas):\n    for i in range(len(sigmas) - 1):\n"
        "        if sigmas[i + 1] > 0:\n            x = model(x)\n    return x\n\n"
        "def sample_euler(model, x, sigmas):\n    for i in range(len(sigmas) - 1):\n"
        "        if sigmas[i + 1] == 0:\n            x = model(x)\n    return x\n\n"
        "def sample_other(model, sigmas, x):\n    for i in range(len(sigmas) - 1):\n"
        "        if sigmas[i + 1] == 0:\n            x = model(x)\n    return x\n\n"
        "def ramp(model, x, steps):\n    for i in range(len(steps) - 1):\n"
        "        if steps[i + 1] == 0:\n            x = model(x)\n    return x\n"
    )
    script = (
        "import torch\nimport kdiff as K\n\ndef main(model):\n    sigmas = K.sampling.get_sigmas(50, device='cuda')\n"
        "    x = K.sampling.sample_lms(model, torch.zeros(2), sigmas)\n"
        "    return K.sampling.ramp(model, x, [1.0, 0.5, 0.0])\n"
    )
    write(
        tmp_path, {"kdiff/__init__.py": "from . import sampling\n", "kdiff/sampling.py": sampling, "sample.py": script}
    )
    found = [(f.path, f.line) for f in scan(tmp_path).findings if f.code == "PC504"]
    assert found == [("kdiff/sampling.py", 8), ("kdiff/sampling.py", 14)]


def test_a_module_given_tensors_is_read_again_only_where_its_rules_asked_about_them(tmp_path: Path) -> None:
    """What another module passes a function can change a step rule's answer only where the
    first pass asked about that parameter of a function its module never calls (a sampler's
    `sigmas`): a module whose questions were all answered at home (an annotated `x`) is not
    read a second time for it."""
    sampling = (
        "import torch\n\ndef sample_lms(model, x, sigmas):\n    for i in range(len(sigmas) - 1):\n"
        "        if sigmas[i + 1] > 0:\n            x = model(x)\n    return x\n"
    )
    layers = (
        "import torch\n\ndef scale(x: torch.Tensor, factor: float):\n    for _ in range(3):\n"
        "        if x.max() > factor:\n            x = x / 2\n    return x\n"
    )
    script = (
        "import torch\nfrom kdiff import layers, sampling\n\ndef main(model):\n"
        "    sigmas = torch.linspace(1, 0, 50)\n    x = sampling.sample_lms(model, torch.zeros(2), sigmas)\n"
        "    return layers.scale(torch.ones(3) * x, 0.5)\n"
    )
    write(
        tmp_path, {"kdiff/__init__.py": "", "kdiff/sampling.py": sampling, "kdiff/layers.py": layers, "run.py": script}
    )
    report = scan(tmp_path)
    known = Project().with_facts(report.facts)
    assert known.tensor_parameters_in("kdiff.layers") and known.tensor_parameters_in("kdiff.sampling")
    assert known.passes_asked_tensors("kdiff.sampling") and not known.passes_asked_tensors("kdiff.layers")
    assert [(f.path, f.line) for f in report.findings if f.code == "PC504"] == [("kdiff/sampling.py", 5)]


def test_a_helper_a_model_inherits_from_another_module_runs_every_step(tmp_path: Path) -> None:
    """LLaVA: the models' forward() calls `self.prepare_inputs(...)`, which a mixin of another
    module defines; what it reads back to the host, it reads every step. A class that defines
    the method itself, or holds an object under that name, is not the mixin's."""
    arch = (
        "import torch\n\nclass MetaForCausalLM:\n    def prepare_inputs(self, ids):\n"
        "        return torch.where(ids == -200)[0].tolist()\n\n"
        "    def unused(self, ids):\n        return ids.sum().item()\n"
    )
    model = (
        "import torch\nfrom ..arch import MetaForCausalLM\n\nclass Llava(torch.nn.Module, MetaForCausalLM):\n"
        "    def forward(self, ids):\n        return self.prepare_inputs(ids)\n"
    )
    write(
        tmp_path,
        {"pkg/__init__.py": "", "pkg/arch.py": arch, "pkg/models/__init__.py": "", "pkg/models/llava.py": model},
    )
    found = [(f.path, f.line) for f in scan(tmp_path).findings if f.code == "PC503" and f.severity > Severity.INFO]
    assert found == [("pkg/arch.py", 5)]


def test_basicsr_in_its_own_repository_reports_its_step_hazards_where_they_are_written(tmp_path: Path) -> None:
    """BasicSR itself: Real-ESRGAN's `feed_data()` degrades each batch with a function whose
    grey-noise test is a tensor where the noise is one (a number in the `isinstance` branch),
    and SRModel, whose base comes by a relative import, logs `reduce_loss_dict()`'s `.item()`
    every step. The hazards are reported where they are written, not as an installed
    library's calls (PC515)."""
    degradations = (
        "import torch\n\ndef generate_noise_pt(img, gray_noise=0):\n    if isinstance(gray_noise, (float, int)):\n"
        "        cal_gray_noise = gray_noise > 0\n    else:\n        gray_noise = gray_noise.view(-1, 1, 1, 1)\n"
        "        cal_gray_noise = torch.sum(gray_noise) > 0\n"
        "    if cal_gray_noise:\n        img = img + torch.randn_like(img) * gray_noise\n    return img\n\n"
        "def random_add_gaussian_noise_pt(img, gray_prob=0):\n"
        "    return generate_noise_pt(img, torch.rand(img.size(0)) < gray_prob)\n"
    )
    base = (
        "import torch\n\nclass BaseModel:\n    def reduce_loss_dict(self, loss_dict):\n"
        "        return {name: value.mean().item() for name, value in loss_dict.items()}\n"
    )
    sr_model = (
        "import torch\nfrom .base_model import BaseModel\n\nclass SRModel(BaseModel):\n"
        "    def optimize_parameters(self, current_iter):\n        loss = self.cri_pix(self.net_g(self.lq), self.gt)\n"
        "        loss.backward()\n        self.log_dict = self.reduce_loss_dict({'l_pix': loss})\n"
    )
    realesrgan = (
        "import torch\nfrom basicsr.data.degradations import random_add_gaussian_noise_pt\n"
        "from basicsr.models.sr_model import SRModel\n\nclass RealESRGANModel(SRModel):\n"
        "    def feed_data(self, data):\n        self.lq = random_add_gaussian_noise_pt(data['gt'], gray_prob=0.4)\n"
    )
    write(
        tmp_path,
        {
            "basicsr/__init__.py": "",
            "basicsr/data/__init__.py": "",
            "basicsr/data/degradations.py": degradations,
            "basicsr/models/__init__.py": "",
            "basicsr/models/base_model.py": base,
            "basicsr/models/sr_model.py": sr_model,
            "basicsr/models/realesrgan_model.py": realesrgan,
        },
    )
    found = sorted((f.path, f.line, f.code) for f in scan(tmp_path).findings if f.severity > Severity.INFO)
    assert found == [("basicsr/data/degradations.py", 9, "PC504"), ("basicsr/models/base_model.py", 5, "PC503")]


def test_what_follows_an_exit_unless_every_n_steps_runs_every_n_steps(tmp_path: Path) -> None:
    """imagen's trainer: `if total_steps % self.checkpoint_every: return`, then the checkpoint
    is saved; what follows the exit, and the helper it calls, run every N steps, not every step
    (the count itself is read every step)."""
    trainer = (
        "import torch\n\nclass Trainer:\n    def save(self):\n"
        "        torch.save({'steps': self.steps.cpu()}, 'ckpt.pt')\n\n"
        "    def train_step(self, model, batch, opt):\n        loss = model(batch).mean()\n"
        "        loss.backward()\n        opt.step()\n        total_steps = int(self.steps.sum().item())\n"
        "        if total_steps % self.checkpoint_every:\n            return loss\n        self.save()\n"
        "        print(loss.item())\n        return loss\n\n"
        "def train(trainer, model, loader, opt):\n    for batch in loader:\n"
        "        trainer.train_step(model, batch, opt)\n"
    )
    write(tmp_path, {"trainer.py": trainer})
    found = [(f.line, f.code) for f in scan(tmp_path).findings if f.severity > Severity.INFO]
    assert found == [(11, "PC503")]


def test_a_loop_over_the_samples_of_a_batch_is_part_of_the_step_that_calls_it(tmp_path: Path) -> None:
    """yolov7: the training loop calls the loss, whose `build_targets()` loops over the batch's
    images with a `topk` per image, and first calls `find_3_positive()`. That loop matches
    targets, it decodes nothing: `build_targets()` and what it calls run every step. A loop over
    a length of its own with a `topk` in it still decodes, and what calls it runs once."""
    loss = (
        "import torch\n\nclass ComputeLossOTA:\n    def __call__(self, p, targets):\n"
        "        return self.build_targets(p, targets)\n\n"
        "    def build_targets(self, p, targets):\n        indices = self.find_3_positive(p, targets)\n"
        "        for batch_idx in range(p[0].shape[0]):\n            this = targets[targets[:, 0] == batch_idx]\n"
        "            num_gt = targets.shape[0]\n            for gt_idx in range(num_gt):\n"
        "                _, pos = torch.topk(p[0][gt_idx], k=10)\n        return indices\n\n"
        "    def find_3_positive(self, p, targets):\n        j = targets[:, 4] < 4.0\n        return targets[j]\n\n"
        "def decode(model, ids):\n    first = ids[ids > 0]\n    for _ in range(32):\n"
        "        ids = torch.topk(model(ids), 1).indices\n    return first\n"
    )
    train = (
        "import torch\nfrom pkg.loss import ComputeLossOTA, decode\n\ndef train(model, loader, opt):\n"
        "    compute_loss = ComputeLossOTA()\n    for imgs, targets in loader:\n"
        "        loss = compute_loss(model(imgs), targets)\n        loss.backward()\n        opt.step()\n"
        "        decode(model, imgs)\n"
    )
    write(tmp_path, {"pkg/__init__.py": "", "pkg/loss.py": loss, "pkg/train.py": train})
    found = {(f.line, f.severity > Severity.INFO) for f in scan(tmp_path).findings if f.code == "PC502"}
    assert found == {(10, True), (18, True), (21, False)}


def test_a_helper_that_batches_a_network_in_chunks_does_not_make_its_caller_a_driver(tmp_path: Path) -> None:
    """facenet: MTCNN's forward() calls detect_face() of another module, which runs a network
    through fixed_batch_process() (`for i in range(0, len(x), batch_size):`, chunks of one call's
    work) and filters the boxes with a mask in a helper: that runs with every forward. A helper
    with a decoding loop of its own still makes its caller run once per decoding."""
    detect = (
        "import torch\n\ndef fixed_batch_process(im_data, model):\n    batch_size, out = 512, []\n"
        "    for i in range(0, len(im_data), batch_size):\n        out.append(model(im_data[i : i + batch_size]))\n"
        "    return torch.cat(out)\n\n"
        "def detect_face(imgs, pnet):\n    probs = fixed_batch_process(imgs, pnet)\n    return boxes_of(probs)\n\n"
        "def boxes_of(probs):\n    mask = probs >= 0.6\n    return probs[mask]\n\n"
        "def decode(model, ids):\n    for _ in range(32):\n        ids = torch.argmax(model(ids), -1)\n    return ids\n\n"
        "def sample(model, ids):\n    out = decode(model, ids)\n    return first_of(out)\n\n"
        "def first_of(out):\n    return out[out > 0]\n"
    )
    mtcnn = (
        "import torch\nfrom pkg.detect import detect_face, sample\n\nclass MTCNN(torch.nn.Module):\n"
        "    def forward(self, imgs):\n        return detect_face(imgs, self.pnet), sample(self.pnet, imgs)\n"
    )
    write(tmp_path, {"pkg/__init__.py": "", "pkg/detect.py": detect, "pkg/mtcnn.py": mtcnn})
    found = {(f.line, f.severity > Severity.INFO) for f in scan(tmp_path).findings if f.code == "PC502"}
    assert found == {(15, True), (27, False)}


def test_a_model_class_of_the_repository_loads_in_float16_like_a_library_one(tmp_path: Path) -> None:
    """MiniGPT-4 subclasses transformers' LlamaForCausalLM in its own package and loads it with
    `torch_dtype=torch.float16`: the repository's classes count like transformers' own."""
    loader = (
        "import torch\nfrom minigpt4.models.modeling_llama import LlamaForCausalLM\n\n"
        "def load(path):\n    return LlamaForCausalLM.from_pretrained(path, torch_dtype=torch.float16)\n"
    )
    write(tmp_path, {"minigpt4/__init__.py": "", "minigpt4/models/__init__.py": "",
                     "minigpt4/models/modeling_llama.py": "class LlamaForCausalLM:\n    pass\n",
                     "minigpt4/models/base_model.py": loader})  # fmt: skip
    found = [(f.path, f.line) for f in scan(tmp_path).findings if f.code == "PC308"]
    assert found == [("minigpt4/models/base_model.py", 5)]


def test_a_checkpoint_loaded_where_the_repository_trains_on_cuda_gets_a_map_location(tmp_path: Path) -> None:
    """stylegan2-pytorch: train.py trains on CUDA and saves checkpoints; another script loads
    one without map_location, which restores its tensors onto CUDA. So does a module in another
    folder, such as segment-anything's builder, whose load goes into the model's state. Datasets,
    what a module saves itself (from the host) and files of a repository that puts nothing on
    CUDA are left alone."""
    train = 'import torch\nmodel = Generator().to("cuda")\ntorch.save({"g": model.state_dict()}, "ckpt/010000.pt")\n'
    factorize = (
        "import torch\nckpt = torch.load(args.ckpt)\nfeatures = torch.load('data/features.pt')\n"
        "state = torch.load(args.ckpt, map_location='cpu')\n"
    )
    build = (
        "import torch\ndef build(checkpoint):\n    sam = Sam()\n    with open(checkpoint, 'rb') as f:\n"
        "        state_dict = torch.load(f)\n    sam.load_state_dict(state_dict)\n    return sam\n"
    )
    own = "import torch\ntorch.save(torch.zeros(3), 'ckpt/host.pt')\nback = torch.load('ckpt/host.pt')\n"
    files = {"train.py": train, "closed_form_factorization.py": factorize, "tools/build.py": build, "own.py": own}
    write(tmp_path, files)
    found = [(f.path, f.line, f.severity, f.message) for f in scan(tmp_path).findings if f.code == "PC104"]
    unmapped = "`torch.load` without map_location loads the checkpoint onto a CUDA device if it was saved from one:"
    assert found == [
        ("closed_form_factorization.py", 2, Severity.WARNING, f"{unmapped} `train.py` beside it runs on CUDA"),
        ("tools/build.py", 5, Severity.WARNING, f"{unmapped} `train.py` in this repository runs on CUDA"),
    ]
    write(tmp_path, {"train.py": train.replace('"cuda"', '"cpu"')})
    assert not [f for f in scan(tmp_path).findings if f.code == "PC104"]


def test_module_paths_follow_the_package_layout(tmp_path: Path) -> None:
    write(
        tmp_path, {"src/pkg/__init__.py": "", "src/pkg/sub/__init__.py": "", "src/pkg/sub/mod.py": "", "script.py": ""}
    )
    assert module_path(tmp_path / "src/pkg/sub/mod.py") == ModulePath("pkg.sub.mod", "pkg.sub")
    assert module_path(tmp_path / "src/pkg/sub/__init__.py") == ModulePath("pkg.sub", "pkg.sub")
    assert module_path(tmp_path / "script.py") == ModulePath("script", "")
    assert ModulePath("pkg.sub.mod", "pkg.sub").absolute("..ops.k") == "pkg.ops.k"
    assert ModulePath.guess("src/pkg/mod.py") == ModulePath("pkg.mod", "pkg")


def test_a_src_layout_names_its_modules_from_below_src(tmp_path: Path) -> None:
    """F5-TTS: `src/f5_tts/model/` is a package, `src/f5_tts/` has no __init__.py, and the
    model imports `f5_tts.model.utils`: a step that calls its function there reaches it."""
    utils = (
        "import torch\ndef span_mask(seq_len, start):\n    longest = seq_len.max().item()\n"
        "    return torch.arange(longest, device=start.device)[None, :] >= start[:, None]\n"
    )
    cfm = (
        "import torch\nfrom f5_tts.model.utils import span_mask\nclass CFM(torch.nn.Module):\n"
        "    def forward(self, x, lens):\n        return x * span_mask(lens, lens // 2)\n"
    )
    write(
        tmp_path,
        {"src/f5_tts/model/__init__.py": "", "src/f5_tts/model/utils.py": utils, "src/f5_tts/model/cfm.py": cfm},
    )
    assert module_path(tmp_path / "src/f5_tts/model/utils.py", str(tmp_path)).import_names == (
        "model.utils",
        "src.f5_tts.model.utils",
        "f5_tts.model.utils",
    )
    found = [(f.path, f.line) for f in scan(tmp_path).findings if f.code == "PC503"]
    assert found == [("src/f5_tts/model/utils.py", 3)]


def test_folders_without_init_below_the_root_are_namespace_packages(tmp_path: Path) -> None:
    """MAE's `import util.misc as misc` beside main_pretrain.py, with no util/__init__.py: below
    the folder the scripts run from, a file's folders name its module; a package keeps its own
    chain (`src/pkg/mod.py` is `pkg.mod`), and also has the name an import from that folder
    gives it (`src.pkg.mod`)."""
    write(tmp_path, {"util/misc.py": "", "src/pkg/__init__.py": "", "src/pkg/mod.py": "", "my-tools/run.py": ""})
    root = str(tmp_path)
    assert module_path(tmp_path / "util/misc.py", root) == ModulePath("util.misc", "util", beside=frozenset({"misc"}))
    assert module_path(tmp_path / "util/misc.py") == ModulePath("misc", "")
    assert module_path(tmp_path / "src/pkg/mod.py", root) == ModulePath("pkg.mod", "pkg", "src.pkg.mod")
    assert module_path(tmp_path / "src/pkg/mod.py") == ModulePath("pkg.mod", "pkg")
    assert module_path(tmp_path / "src/pkg/__init__.py", root) == ModulePath("pkg", "pkg", "src.pkg")
    assert module_path(tmp_path / "my-tools/run.py", root) == ModulePath("run", "")


def test_a_step_loop_reaches_a_function_of_a_namespace_package(tmp_path: Path) -> None:
    """MAE: engine_pretrain.py's loop calls misc.all_reduce_mean every step, from util/, a folder
    without __init__.py."""
    write(
        tmp_path,
        {
            "util/misc.py": "import torch\nimport torch.distributed as dist\n\ndef all_reduce_mean(x):\n"
            "    x_reduce = torch.tensor(x).to('tpu')\n    dist.all_reduce(x_reduce)\n    return x_reduce.item()\n",
            "engine_pretrain.py": "import util.misc as misc\n\ndef train(model, data_loader, opt):\n"
            "    for samples in data_loader:\n        loss = model(samples)\n        loss.backward()\n"
            "        opt.step()\n        misc.all_reduce_mean(loss)\n",
        },
    )
    found = [(f.path, f.line, f.message) for f in scan(tmp_path).findings if f.code == "PC503"]
    assert found == [
        (
            "util/misc.py",
            7,
            "`.item()` in `all_reduce_mean()`, called from a loop over a DataLoader in engine_pretrain.py,"
            " copies a tensor to the host and waits for the device every step",
        )
    ]


def test_a_script_in_a_folder_imports_the_modules_beside_it(tmp_path: Path) -> None:
    """Depth-Anything-V2's metric_depth/train.py runs from its own folder: `from util.metric
    import eval_depth` is metric_depth/util/metric.py, which its validation loop calls every
    step; a package at the root of the same name would be another module."""
    write(
        tmp_path,
        {
            "run.py": "import torch\n",
            "metric_depth/util/metric.py": "import torch\n\ndef eval_depth(pred, target):\n"
            "    return {'d1': (pred - target).abs().mean().item()}\n",
            "metric_depth/train.py": "import torch\nfrom util.metric import eval_depth\n\n"
            "def validate(model, loader):\n    for img, depth in loader:\n"
            "        results = eval_depth(model(img), depth)\n",
        },
    )
    assert module_path(tmp_path / "metric_depth/train.py", str(tmp_path)).absolute("util.metric") == (
        "metric_depth.util.metric"
    )
    found = [(f.path, f.line, f.message.split(" copies")[0]) for f in scan(tmp_path).findings if f.code == "PC503"]
    assert found == [
        (
            "metric_depth/util/metric.py",
            4,
            "`.item()` in `eval_depth()`, called from a loop over a DataLoader in metric_depth/train.py,",
        )
    ]


def test_a_step_loop_reaches_a_function_a_star_import_brings(tmp_path: Path) -> None:
    """StyleTTS2: train_second.py does `from utils import *` and calls maximum_path every step;
    a name bound nowhere can only come from a module the star import reads. A name the module
    binds itself is its own."""
    utils = (
        "import torch\n\ndef maximum_path(neg_cent, mask):\n    path = neg_cent.data.cpu().numpy()\n"
        "    return torch.from_numpy(path).to(neg_cent.device)\n\ndef log_value(x):\n    return x.item()\n"
    )
    train = (
        "from models import *\nfrom utils import *\n\ndef log_value(x):\n    return x\n\n"
        "def main(model, loader, device):\n    for batch in loader:\n        x = batch.to(device)\n"
        "        attn = maximum_path(model(x), x)\n        log_value(attn)\n"
    )
    write(tmp_path, {"utils.py": utils, "models.py": "import torch\n", "train.py": train})
    found = [(f.path, f.line, f.message.split(" copies")[0]) for f in scan(tmp_path).findings if f.code == "PC503"]
    assert found == [
        ("utils.py", 4, "`.numpy()` in `maximum_path()`, called from a loop over a DataLoader in train.py,")
    ]


# --- manifests ---------------------------------------------------------------------------------


def test_requirements_with_continuations_options_markers_and_garbage() -> None:
    text = "torch==2.13.0 \\\n    --hash=sha256:abc\n-r base.txt\n--extra-index-url=https://x/cu121\nnumpy ; python_version<'3.12'\n!!\n"
    manifest = manifests.read(filekinds.REQUIREMENTS, text)
    assert [(d.name, d.specifier, d.line) for d in manifest.requirements] == [
        ("torch", "==2.13.0", 1),
        ("numpy", "", 5),
    ]
    assert [(i.text, i.line) for i in manifest.indexes] == [("https://x/cu121", 4)]
    assert [p.line for p in manifest.problems] == [6]


@pytest.mark.parametrize(
    ("constraint", "specifier"),
    [("^2.1", ">=2.1,<3"), ("^0.4.1", ">=0.4.1,<0.5"), ("~2.1", ">=2.1,<2.2"), ("2.5.1", "==2.5.1"), ("*", "")],
)
def test_poetry_constraints_become_pep_440(constraint: str, specifier: str) -> None:
    text = f'[tool.poetry.dependencies]\npython = "^3.10"\ntorch = "{constraint}"\n'
    (torch,) = manifests.read(filekinds.PYPROJECT, text).requirements
    assert (torch.name, torch.specifier, torch.line) == ("torch", specifier, 3)


def test_a_package_from_its_repository_is_named_after_the_repository() -> None:
    """torch-ngp's `git+https://.../tiny-cuda-nn/#subdirectory=bindings/torch`: the fragment's
    path is not the name."""
    text = (
        "git+https://github.com/NVIDIA/apex.git@main#egg=apex\ngit+https://github.com/org/megablocks.git\n"
        "git+https://github.com/NVlabs/tiny-cuda-nn/#subdirectory=bindings/torch\n"
    )
    names = [d.name for d in manifests.read(filekinds.REQUIREMENTS, text).requirements]
    assert names == ["apex", "megablocks", "tiny-cuda-nn"]


def test_conda_environments_with_pip_sections_and_channels() -> None:
    text = "name: env\nchannels:\n  - nvidia\ndependencies:\n  - python=3.11\n  - pytorch::pytorch=2.5\n  - pip:\n    - xformers\n"
    manifest = manifests.read(filekinds.CONDA, text)
    assert [(d.name, d.specifier, d.line) for d in manifest.requirements] == [
        ("python", "==3.11.*", 5),
        ("pytorch", "==2.5.*", 6),
        ("xformers", "", 8),
    ]
    assert [(i.text, i.line) for i in manifest.indexes] == [("nvidia", 3)]


def test_a_conda_environment_under_another_name_is_read_as_one(tmp_path: Path) -> None:
    """mdlm's requirements.yaml is a conda environment: its CUDA packages are reported; a YAML
    config with a `dependencies:` key but no channels or name stays a config."""
    write(
        tmp_path,
        {
            "requirements.yaml": "name: mdlm\nchannels:\n  - nvidia\ndependencies:\n  - pytorch-cuda=12.1\n"
            "  - pip:\n      - flash-attn==2.5.6\n",
            "conf/model.yaml": "dependencies:\n  - pytorch-cuda=12.1\n",
        },
    )
    assert filekinds.by_content(filekinds.CONFIG, "dependencies:\n  - x\n") == filekinds.CONFIG
    found = sorted((f.path, f.line, f.code) for f in scan(tmp_path).findings if f.code.startswith("PC70"))
    assert found == [
        ("requirements.yaml", 3, "PC703"),
        ("requirements.yaml", 5, "PC702"),
        ("requirements.yaml", 7, "PC702"),
    ]


def test_a_kernel_package_fails_to_import_through_its_own_modules(tmp_path: Path) -> None:
    """torch-ngp: `import raymarching` loads `raymarching.raymarching`, whose fallback imports
    `raymarching.backend`, which builds the extension: the package imports it itself (an
    error), while a script importing a module that imports the package is info."""
    write(
        tmp_path,
        {
            "raymarching/__init__.py": "from .raymarching import *\n",
            "raymarching/raymarching.py": (
                "try:\n    import _rm as _backend\nexcept ImportError:\n    from .backend import _backend\n"
                "def march(x):\n    return _backend.march(x)\n"
            ),
            "raymarching/backend.py": (
                "from torch.utils.cpp_extension import load\n_backend = load(name='_rm', sources=['k.cu'])\n"
            ),
            "nerf/__init__.py": "",
            "nerf/renderer.py": "import torch\nimport raymarching\n",
            "main.py": "import torch\nfrom nerf.renderer import march\n",
        },
    )
    found = {(f.path, f.severity) for f in scan(tmp_path).findings if f.code == "PC610"}
    assert {("nerf/renderer.py", Severity.ERROR), ("main.py", Severity.INFO)} <= found


def test_a_setup_py_that_only_works_when_executed_is_read_not_run(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "setup.py": "import os\nfrom setuptools import setup\nreqs = open('requirements.txt').read().split()\n"
            "os.system('rm -rf /')\nsetup(install_requires=reqs + ['apex'], extras_require=make_extras())\n",
            "requirements.txt": "flash-attn\n",
        },
    )
    found = sorted((f.path, f.code) for f in scan(tmp_path).findings if f.code.startswith("PC7"))
    # the literal part of `reqs + ['apex']` is read; what `reqs` holds would need running the file
    assert found == [("requirements.txt", "PC702"), ("setup.py", "PC702")]


def test_malformed_manifests_are_reported_and_the_run_goes_on(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "pyproject.toml": "[project\n",
            "setup.cfg": "[options\ninstall_requires = x\n",
            "environment.yml": "dependencies: [\n",
            "requirements.txt": "apex\n%%%\n",
            "model.py": "import torch\ntorch.cuda.synchronize()\n",
        },
    )
    report = scan(tmp_path)
    found = sorted((f.path, f.code) for f in report.findings)
    assert found == [
        ("environment.yml", "PC005"),
        ("model.py", "PC203"),
        ("pyproject.toml", "PC005"),
        ("requirements.txt", "PC005"),
        ("requirements.txt", "PC702"),
        ("setup.cfg", "PC005"),
    ]
    assert report.internal_errors == ()


# --- CUDA and C++ sources ------------------------------------------------------------------------


def test_comments_are_blanked_and_lines_kept() -> None:
    text = 'int a; // __global__ void x()\n/* __global__\n void y() */ const char* s = "// not a comment";\n'
    code = ctext.without_comments(text)
    assert "__global__" not in code and code.count("\n") == text.count("\n")
    assert '"// not a comment"' in code


def test_cuda_sources_in_odd_encodings_are_scanned(tmp_path: Path) -> None:
    source = "// \u00e9t\u00e9\n__global__ void k(float* x) { x[0] = 1; }\n"
    write(
        tmp_path,
        {
            "utf16.cu": source.encode("utf-16"),
            "latin1.cu": source.encode("latin-1"),
            "binaryish.cuh": b"\x89\xc3\x28 stray bytes\n__global__ void k() {}\n",
        },
    )
    report = scan(tmp_path, select=["PC603"])
    assert sorted(f.path for f in report.findings) == ["binaryish.cuh", "latin1.cu", "utf16.cu"]
    assert report.internal_errors == ()


def test_inventory_counts_an_extension_without_its_kernels_twice(tmp_path: Path) -> None:
    kernel = "__global__ void k(float* x) {\n  x[0] = 1;\n}\n"
    host = "void launch(float* x) {\n  k<<<1, 1>>>(x);\n}\n"
    write(
        tmp_path,
        {
            "setup.py": "from torch.utils.cpp_extension import CUDAExtension\nCUDAExtension('pkg._C', ['csrc/k.cu'])\n",
            "csrc/k.cu": kernel + host,
        },
    )
    found = {k.name: k for k in inventory.build(scan(tmp_path).facts)}
    assert found["csrc/k.cu::k"].lines_of_code == 3
    assert found["csrc/k.cu::k"].call_sites == ("csrc/k.cu:5",)
    assert found["pkg._C"].lines_of_code == 3  # the host code only
    assert [w.lines_of_code for w in inventory.work(list(found.values()), ["tpu"])] == [6]


def test_a_launch_guarded_by_availability_counts_as_a_fallback(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "ops.py": "import torch\nimport triton\n\n@triton.jit\ndef scale_kernel(x):\n    pass\n\n"
            "def scale(x):\n    if HAS_TRITON and x.is_cuda:\n        scale_kernel[(1,)](x)\n    else:\n        x = x * 2\n    return x\n\n"
            "def shortcut(x):\n    if x.numel() == 0:\n        pass\n    else:\n        scale_kernel[(1,)](x)\n",
        },
    )
    (kernel,) = inventory.build(scan(tmp_path).facts)
    assert kernel.call_sites == ("ops.py:10", "ops.py:19")
    assert kernel.fallback == "ops.py:10 in an if/else on availability"


def test_a_file_named_like_a_notebook_that_is_not_one_gets_a_clear_finding(tmp_path: Path) -> None:
    write(tmp_path, {"analysis.ipynb": '{"cells": []}'})
    report = scan_paths([tmp_path / "analysis.ipynb"], Config(root=tmp_path), jobs=1)
    (finding,) = report.findings
    assert (report.files, report.errors, finding.code) == (1, (), "PC002")
    assert finding.message == "not a readable Jupyter notebook: it names no nbformat version"


def test_optional_imports_are_listed_but_block_no_target(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "attention.py": "try:\n    from flash_attn import flash_attn_func\nexcept ImportError:\n"
            "    flash_attn_func = None\n",
            "deploy.py": "def export_tensorrt(model):\n    import tensorrt\n    return tensorrt.Builder(model)\n",
            "train.py": "import sys\ntry:\n    import apex\nexcept ImportError: sys.exit('pip install apex')\n",
        },
    )
    report = scan(tmp_path, targets=["tpu"])
    (row,) = readiness.assess(report, inventory.build(report.facts))
    assert row.verdict == readiness.BLOCKED and row.reason == "1 CUDA-only dependency"  # apex: its handler exits
    assert [item.split(":")[0] for item in row.dependencies] == ["apex"]
    assert row.optional_dependencies == (
        "flash_attn: optional: guarded by try/except ImportError at attention.py:2",
        "tensorrt: optional: only in the export function `export_tensorrt` at deploy.py:2",
    )
    assert row.errors == 1  # the optional imports are info


def test_an_optional_import_of_a_declared_requirement_still_blocks(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "requirements.txt": "flash-attn==2.5.0\n",
            "attention.py": "try:\n    import flash_attn\nexcept ImportError:\n    flash_attn = None\n",
        },
    )
    report = scan(tmp_path, targets=["tpu"])
    (row,) = readiness.assess(report, inventory.build(report.facts))
    assert row.verdict == readiness.BLOCKED and row.optional_dependencies == ()


def test_kernels_in_tests_and_vendored_code_are_listed_but_not_counted(tmp_path: Path) -> None:
    triton = "import triton\n\n@triton.jit\ndef {name}(x):\n    pass\n"
    write(
        tmp_path,
        {
            "pkg/ops.py": triton.format(name="own_kernel"),
            "tests/test_ops.py": triton.format(name="test_kernel"),
            "pkg/ops_test.py": triton.format(name="other_test_kernel"),
            "third_party/flash/kernels.py": triton.format(name="vendored_kernel"),
            "pkg/_vendor/lib.cu": "__global__ void k(float* x) {\n  x[0] = 1;\n}\n",
        },
    )
    facts = scan(tmp_path).facts
    found = {k.path: k for k in inventory.build(facts)}
    assert {path: k.origin for path, k in found.items()} == {
        "pkg/ops.py": "",
        "tests/test_ops.py": "test",
        "pkg/ops_test.py": "test",
        "third_party/flash/kernels.py": "vendored",
        "pkg/_vendor/lib.cu": "vendored",
    }
    assert [w.kernels for w in inventory.work(list(found.values()), ["tpu"])] == [1]
    assert [w.kernels for w in inventory.work(inventory.build(facts, all_kernels=True), ["tpu"])] == [5]
    report = scan(tmp_path, targets=["tpu"])
    (row,) = readiness.assess(report, inventory.build(report.facts))
    assert row.kernels == 1 and row.reason == "1 custom kernel to rewrite"


def test_an_extension_built_when_its_module_is_imported_fails_that_import(tmp_path: Path) -> None:
    """rosinality's stylegan2: op/fused_act.py builds its kernels with `load(...)` at import
    time and calls them through the name it binds; the model imports the package."""
    fused_act = (
        "import torch\nfrom torch.utils.cpp_extension import load\nfused = load('fused', sources=['k.cu'])\n"
        "def act(x):\n    return fused.fused_bias_act(x, 3)\n"
    )
    write(
        tmp_path,
        {
            "op/__init__.py": "from .fused_act import act\n",
            "op/fused_act.py": fused_act,
            "model.py": "from op import act\n",
            "train.py": "import model\n",
        },
    )
    found = {(f.path, f.line, f.code): f.severity for f in scan(tmp_path).findings if f.code in ("PC607", "PC610")}
    assert found == {
        ("op/fused_act.py", 5, "PC607"): Severity.ERROR,
        ("op/__init__.py", 1, "PC610"): Severity.ERROR,
        ("model.py", 1, "PC610"): Severity.ERROR,  # through op's own re-export
        ("train.py", 1, "PC610"): Severity.INFO,  # loads once op guards its kernels
    }


def test_a_function_a_package_re_exports_runs_every_step_where_a_loop_calls_it_by_that_name(tmp_path: Path) -> None:
    """vq-vae-2's `import distributed as dist` and `dist.all_gather(comm)` every step, where
    `distributed/__init__.py` re-exports `all_gather` from `.distributed`: its syncs are the step's."""
    write(
        tmp_path,
        {
            "distributed/__init__.py": "from .distributed import all_gather, get_rank\n",
            "distributed/distributed.py": (
                "import torch\ndef all_gather(data):\n    size = torch.tensor([len(data)], device='cuda')\n"
                "    return int(size.item())\ndef get_rank():\n    return 0\n"
            ),
            "train.py": (
                "import torch\nimport distributed as dist\ndef train(model, loader, optimizer):\n"
                "    for x, y in loader:\n        loss = model(x, y)\n        loss.backward()\n        optimizer.step()\n"
                "        dist.all_gather({'loss': loss.detach()})\n"
            ),
        },
    )
    found = {(f.path, f.line, f.message.split(" copies")[0]) for f in scan(tmp_path).findings if f.code == "PC503"}
    assert found == {
        (
            "distributed/distributed.py",
            4,
            "`.item()` in `all_gather()`, called from a loop over a DataLoader in train.py,",
        ),
    }


def test_a_model_a_factory_of_the_module_returns_runs_its_methods_every_step(tmp_path: Path) -> None:
    """tacotron2: `model = load_model(hparams)` returns `Tacotron2(hparams).cuda()`, the name is
    rebound by unpacking later, and `model.parse_batch(batch)` runs every step in train.py."""
    write(
        tmp_path,
        {
            "model.py": (
                "import torch\nclass Tacotron2(torch.nn.Module):\n    def parse_batch(self, batch):\n"
                "        lengths = batch[1]\n        longest = torch.max(lengths.data).item()\n        return batch, longest\n"
            ),
            "train.py": (
                "import torch\nfrom model import Tacotron2\ndef load_model(hparams):\n"
                "    model = Tacotron2(hparams).cuda()\n    return model\n"
                "def train(hparams, loader, optimizer):\n    model = load_model(hparams)\n"
                "    model, optimizer = initialize(model, optimizer)\n    for batch in loader:\n"
                "        x, y = model.parse_batch(batch)\n        loss = model(x).sum()\n        loss.backward()\n"
            ),
        },
    )
    found = {(f.path, f.line, f.message.split(" copies")[0]) for f in scan(tmp_path).findings if f.code == "PC503"}
    assert found == {("model.py", 5, "`.item()` in `parse_batch()`, called from a loop over a DataLoader in train.py,")}


def test_a_method_called_on_an_object_of_unknown_class_is_the_repository_s_one_of_that_name(tmp_path: Path) -> None:
    """The SSD tutorial: `model = checkpoint["model"]` says nothing of its class, and
    `model.detect_objects(...)` in eval.py's loop runs SSD300's, the one method of that name.
    Where two classes define it, or the name is one torch's objects answer to (`meter.update`),
    no loop is linked."""
    method = "        if scores.sum().item() == 0:\n            return []\n        return scores\n"
    write(
        tmp_path,
        {
            "model.py": f"import torch\nclass SSD300(torch.nn.Module):\n    def detect_objects(self, scores):\n{method}"
            f"    def update(self, scores):\n{method}    def initialize(self, scores):\n{method}",
            "other.py": f"import torch\nclass A:\n    def decode(self, scores):\n{method}"
            f"class B:\n    def decode(self, scores):\n{method}",
            "eval.py": (
                "import torch\ncheckpoint = torch.load('ssd.pth.tar')\nmodel = checkpoint['model']\n"
                "def evaluate(loader, meter, codec):\n    for images in loader:\n"
                "        predicted = model(images.to('cuda'))\n        found = model.detect_objects(predicted)\n"
                "        meter.update(predicted)\n        codec.decode(predicted)\n"
            ),
            "norm.py": (  # its own `initialize`, not the one SSD300 would have
                "import torch\nclass ActNorm(torch.nn.Module):\n    def forward(self, x):\n"
                "        self.initialize(x)\n        return x\n    def initialize(self, x):\n        pass\n"
            ),
        },
    )
    found = {(f.path, f.line, f.message.split(" depends")[0]) for f in scan(tmp_path).findings if f.code == "PC504"}
    assert found == {("model.py", 4, "`if` in `detect_objects()`, called from a loop over a DataLoader in eval.py,")}


def test_a_property_read_in_a_step_loop_runs_every_step(tmp_path: Path) -> None:
    """efficientvit: `train_loss.avg`, read for the progress bar every step, is an AverageMeter
    property that calls `.item()` on the sum `update(loss)` adds to (it starts as the number 0).
    A method read without a call (`show = train_loss.report`) runs where it is called."""
    write(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/metric.py": (
                "import torch\nclass AverageMeter:\n    def __init__(self):\n        self.sum = 0\n"
                "        self.count = 0\n    def update(self, val, n=1):\n        self.sum += val * n\n"
                "        self.count += n\n    @property\n    def avg(self):\n        avg = self.sum / self.count\n"
                "        return avg.item() if isinstance(avg, torch.Tensor) else avg\n"
                "    def report(self):\n        return self.sum.item()\n"
            ),
            "pkg/train.py": (
                "import torch\nfrom pkg.metric import AverageMeter\ndef train(model, loader, opt):\n"
                "    train_loss = AverageMeter()\n    for x, y in loader:\n        loss = model(x.cuda(), y.cuda())\n"
                "        loss.backward()\n        opt.step()\n        train_loss.update(loss)\n"
                "        print({'loss': train_loss.avg})\n        show = train_loss.report\n"
            ),
        },
    )
    found = {(f.path, f.line, f.message.split(" copies")[0]) for f in scan(tmp_path).findings if f.code == "PC503"}
    assert found == {
        ("pkg/metric.py", 12, "`.item()` in `avg()`, called from a loop over a DataLoader in pkg/train.py,")
    }


def test_what_a_step_loop_passes_in_host_memory_is_read_there_without_a_sync(tmp_path: Path) -> None:
    """torchvision's detection evaluation: the outputs are copied to the CPU, then a dict of
    them goes to `CocoEvaluator.update`, whose helpers call `.tolist()` (also on what a helper
    of theirs returns): host work. Given the outputs as they come from the model, it syncs."""
    evaluator = (
        "import torch\nclass Evaluator:\n    def update(self, predictions):\n"
        "        return self.prepare(predictions)\n    def prepare(self, predictions):\n"
        "        results = []\n        for image_id, prediction in predictions.items():\n"
        "            boxes = prediction['boxes']\n            boxes = to_xywh(boxes).tolist()\n"
        "            results.append((image_id, boxes, prediction['scores'].tolist()))\n        return results\n"
        "def to_xywh(boxes):\n    xmin, ymin, xmax, ymax = boxes.unbind(1)\n"
        "    return torch.stack((xmin, ymin, xmax - xmin, ymax - ymin), dim=1)\n"
    )
    engine = (
        "import torch\nfrom coco_eval import Evaluator\ndef evaluate(model, loader):\n"
        "    cpu_device = torch.device('cpu')\n    evaluator = Evaluator()\n    for images, targets in loader:\n"
        "        outputs = model(images)\n"
        "        outputs = [{k: v.to(cpu_device) for k, v in t.items()} for t in outputs]\n"
        "        res = {target['image_id'].item(): output for target, output in zip(targets, outputs)}\n"
        "        evaluator.update(res)\n"
    )
    write(tmp_path, {"coco_eval.py": evaluator, "engine.py": engine})
    assert not [f for f in scan(tmp_path).findings if f.code == "PC503" and f.path == "coco_eval.py"]
    write(
        tmp_path,
        {
            "engine.py": engine.replace(
                "        outputs = [{k: v.to(cpu_device) for k, v in t.items()} for t in outputs]\n", ""
            )
        },
    )
    found = {(f.line, f.message.split(" copies")[0]) for f in scan(tmp_path).findings if f.path == "coco_eval.py"}
    called = "called from `update()`, called from a loop over a DataLoader in engine.py,"
    assert found == {
        (9, f"`.tolist()` in `prepare()`, {called}"),
        (10, f"`.tolist()` in `prepare()`, {called}"),
    }


def test_calls_of_a_kernels_module_of_the_repository_are_listed(tmp_path: Path) -> None:
    """mamba itself (a package portcheck lists, scanned as the repository's own): a module that
    imports Triton defines the kernels' wrappers, whose calls are info (the wrapper may take a
    portable path, or each call needs a replacement); a
    module further away loads once that one is fixed, and a kernels module importing another
    is ported whole (its own `import triton` says so)."""
    write(
        tmp_path,
        {
            "mamba_ssm/__init__.py": "",
            "mamba_ssm/ops/__init__.py": "",
            "mamba_ssm/ops/layer_norm.py": (
                "import torch\nimport triton\n@triton.jit\ndef _fwd_kernel(x):\n    pass\n"
                "def layer_norm_fn(x):\n    return x\n"
            ),
            "mamba_ssm/ops/combined.py": (
                "import torch\nimport triton\nfrom mamba_ssm.ops.layer_norm import layer_norm_fn\n"
                "@triton.jit\ndef _chunk_kernel(x):\n    pass\n"
            ),
            "mamba_ssm/block.py": (
                "import torch\nfrom mamba_ssm.ops.layer_norm import layer_norm_fn\nclass Block(torch.nn.Module):\n"
                "    def forward(self, x):\n        return layer_norm_fn(x)\n"
            ),
            "mamba_ssm/model.py": "import torch\nfrom mamba_ssm.block import Block\nblock = Block()\n",
        },
    )
    found = {(f.path, f.line, f.code): f.severity for f in scan(tmp_path).findings if f.code in ("PC610", "PC707")}
    assert found == {
        ("mamba_ssm/ops/layer_norm.py", 2, "PC610"): Severity.ERROR,
        ("mamba_ssm/ops/combined.py", 2, "PC610"): Severity.ERROR,
        ("mamba_ssm/ops/combined.py", 3, "PC610"): Severity.INFO,
        ("mamba_ssm/block.py", 2, "PC610"): Severity.ERROR,
        ("mamba_ssm/block.py", 5, "PC707"): Severity.INFO,
        ("mamba_ssm/model.py", 2, "PC610"): Severity.INFO,
    }
    message = next(f.message for f in scan(tmp_path).findings if f.code == "PC707")
    assert message.startswith("calls `layer_norm_fn` of `mamba_ssm.ops.layer_norm`, whose module fails to import")


KERNELS_MODULE = (
    "import torch\nimport triton\n@triton.jit\ndef _fwd_kernel(x):\n    pass\n"
    "def _fwd(x):\n    _fwd_kernel[(1,)](x)\n    return x\n"
    "class LayerNormFn(torch.autograd.Function):\n    @staticmethod\n    def forward(ctx, x):\n        return _fwd(x)\n"
    "def layer_norm_fn(x):\n    return LayerNormFn.apply(x)\n"
    "def add(x, y):\n    if x.is_cuda:\n        _fwd_kernel[(1,)](x)\n        return x\n    return x + y\n"
)


def test_calls_of_a_wrapper_that_always_launches_a_kernel_are_warnings(tmp_path: Path) -> None:
    """mamba's `layer_norm_fn` -> `LayerNormFn.apply` -> `_fwd` -> `_fwd_kernel[grid](...)`: no
    PyTorch path on the way, so each call needs a replacement (a warning: the import is the
    error); `add` has one beside its launch, and stays info. The launches are reported too."""
    write(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/ops.py": KERNELS_MODULE,
            "pkg/block.py": (
                "import torch\nfrom pkg.ops import layer_norm_fn, add, LayerNormFn\n"
                "def forward(x):\n    return add(layer_norm_fn(x), LayerNormFn.apply(x))\n"
            ),
        },
    )
    findings = scan(tmp_path).findings
    found = {(f.path, f.line, f.code): f.severity for f in findings if f.code in ("PC611", "PC707")}
    assert found == {
        ("pkg/ops.py", 7, "PC611"): Severity.ERROR,
        ("pkg/block.py", 4, "PC707"): Severity.WARNING,
    }
    calls = sorted((f.column, f.severity, f.message) for f in findings if f.code == "PC707")
    assert [(severity, message.split(" ")[1]) for _, severity, message in calls] == [
        (Severity.INFO, "`add`"),
        (Severity.WARNING, "`layer_norm_fn`"),
        (Severity.WARNING, "`LayerNormFn.apply`"),
    ]
    assert "launches Triton kernel `_fwd_kernel` whenever it is called" in calls[1][2]


def test_calls_of_a_wrapper_that_always_calls_a_cuda_only_package_are_warnings(tmp_path: Path) -> None:
    """TinyLlama's `apply_rotary_emb_func = ApplyRotaryEmb.apply`, whose forward calls flash-attn's
    `rotary_emb` extension, and `FusedCrossEntropyLoss`, re-exported by its package: each call
    needs a replacement (a warning); `scale`, which the module defines beside them without the
    package, stays info, and so does `Net`, a model built of such a layer."""
    rotary = """\
import rotary_emb
import torch

class ApplyRotaryEmb(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, cos, sin):
        out = torch.empty_like(x)
        rotary_emb.apply_rotary(x, cos, sin, out)
        return out

apply_rotary_emb_func = ApplyRotaryEmb.apply

def scale(x):
    return x * 2
"""
    xentropy = """\
import torch
import xentropy_cuda_lib

class SoftmaxCrossEntropyLossFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, logits, labels):
        return xentropy_cuda_lib.forward(logits, labels, 0.0)

class FusedCrossEntropyLoss(torch.nn.Module):
    def forward(self, logits, labels):
        return SoftmaxCrossEntropyLossFn.apply(logits, labels)

class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.loss = FusedCrossEntropyLoss()
"""
    model = """\
import torch
from pkg import FusedCrossEntropyLoss
from pkg.rotary import apply_rotary_emb_func, scale
from pkg.xentropy import Net

def forward(q, cos, sin):
    loss = FusedCrossEntropyLoss()
    return apply_rotary_emb_func(scale(q), cos, sin), loss, Net()
"""
    write(
        tmp_path,
        {
            "pkg/__init__.py": "from pkg.xentropy import FusedCrossEntropyLoss\n",
            "pkg/rotary.py": rotary,
            "pkg/xentropy.py": xentropy,
            "model.py": model,
        },
    )
    calls = {
        (f.line, f.message.split(" ")[1]): (f.severity, f.message)
        for f in scan(tmp_path, targets=("tpu",)).findings
        if f.code == "PC707" and f.path == "model.py"
    }
    assert {key: severity for key, (severity, _) in calls.items()} == {
        (7, "`FusedCrossEntropyLoss`"): Severity.WARNING,
        (8, "`apply_rotary_emb_func`"): Severity.WARNING,
        (8, "`scale`"): Severity.INFO,
        (8, "`Net`"): Severity.INFO,  # built of a layer that calls the package: fixed in the layer
    }
    assert "which calls `rotary_emb.apply_rotary` whenever it is called" in calls[(8, "`apply_rotary_emb_func`")][1]
    assert "which calls `xentropy_cuda_lib.forward` whenever" in calls[(7, "`FusedCrossEntropyLoss`")][1]


def test_a_module_that_writes_kernels_chains_other_kernel_modules_without_a_finding_per_call(tmp_path: Path) -> None:
    """mamba's `ssd_combined.py` defines a Triton kernel of its own and chains the launchers of
    its other kernel modules: rewritten whole with its kernels (its imports are reported), so
    its calls of them are not each a finding; the model's call of the same launcher is."""
    write(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/ops.py": KERNELS_MODULE,
            "pkg/combined.py": (
                "import torch\nimport triton\nfrom pkg.ops import layer_norm_fn\n"
                "@triton.jit\ndef _scan_kernel(X):\n    pass\n"
                "def combined(x):\n    _scan_kernel[(1,)](x)\n    return layer_norm_fn(x)\n"
            ),
            "pkg/block.py": "import torch\nfrom pkg.ops import layer_norm_fn\ndef forward(x):\n    return layer_norm_fn(x)\n",
        },
    )
    found = [(f.path, f.line, f.severity) for f in scan(tmp_path).findings if f.code == "PC707"]
    assert found == [("pkg/block.py", 4, Severity.WARNING)]


def test_the_second_pass_visits_only_step_callees_whose_hazards_wait_for_a_caller(tmp_path: Path) -> None:
    """`log_loss` reads a loss back and only train.py's loop runs it: its module is visited again
    and the read reported; `scale` reads nothing back, so its module is not visited again."""
    write(
        tmp_path,
        {
            "utils.py": "import torch\ndef log_loss(loss):\n    print(loss.item())\n",
            "plain.py": "import torch\ndef scale(x):\n    return x * 2\n",
            "train.py": (
                "import torch\nfrom utils import log_loss\nfrom plain import scale\n"
                "for x, y in loader:\n    loss = model(scale(x), y)\n    loss.backward()\n    log_loss(loss)\n"
            ),
        },
    )
    result = scan(tmp_path)
    read = [f for f in result.findings if f.path == "utils.py" and f.code == "PC503"]
    assert [(f.line, f.severity) for f in read] == [(3, Severity.ERROR)]
    assert "called from a loop over a DataLoader in train.py" in read[0].message
    known = Project().with_facts(result.facts)
    assert {name for name, *_ in known.step_calls} == {"utils.log_loss", "plain.scale"}
    assert known.pending_step_files == {"utils.py"}
    assert known.step_callee_triggers == (b"def log_loss",)


def test_the_second_pass_reads_only_the_file_of_a_re_exported_step_callee(tmp_path: Path) -> None:
    """diffusers: a loop calls `step` of a scheduler its package re-exports; only that
    scheduler's file is read again, not every module of the package with a `def step`."""
    scheduler = "import torch\nclass {0}:\n    def step(self, x):\n        print(x.item())\n"
    write(
        tmp_path,
        {
            "pkg/__init__.py": "from .a import A\nfrom .b import B\n",
            "pkg/a.py": scheduler.format("A"),
            "pkg/b.py": scheduler.format("B"),
            "train.py": "import torch\nfrom pkg import A\ns = A()\nfor x, y in loader:\n    s.step(model(x))\n",
        },
    )
    result = scan(tmp_path)
    errors = [(f.path, f.line) for f in result.findings if f.code == "PC503" and f.severity == Severity.ERROR]
    assert errors == [("pkg/a.py", 4)]
    assert Project().with_facts(result.facts).pending_step_files == {"pkg/a.py"}


def test_a_step_method_of_an_object_the_repository_builds_by_name_runs_every_step(tmp_path: Path) -> None:
    """stylegan3: `loss = dnnlib.util.construct_class_by_name(**loss_kwargs)` holds no class the
    call names; the loop's `loss.accumulate_gradients(...)` is the one method of that name
    with hazards, and `run_G`'s style-mixing slice runs every step."""
    write(
        tmp_path,
        {
            "dnnlib/__init__.py": "from . import util\n",
            "dnnlib/util.py": "def construct_class_by_name(class_name, **kwargs):\n    return find(class_name)(**kwargs)\n",
            "training/__init__.py": "",
            "training/loss.py": (
                "import torch\nclass Loss:\n    def accumulate_gradients(self, phase, z):\n"
                "        raise NotImplementedError()\nclass StyleGAN2Loss(Loss):\n    def run_G(self, z):\n"
                "        ws = self.G(z)\n        cutoff = torch.empty([], dtype=torch.int64, device=ws.device).random_(1, 8)\n"
                "        ws[:, cutoff:] = 0\n        return ws\n    def accumulate_gradients(self, phase, z):\n"
                "        self.run_G(z).sum().backward()\n"
            ),
            "training/training_loop.py": (
                "import torch\nimport dnnlib\ndef training_loop(loss_kwargs, phases, device):\n"
                "    loss = dnnlib.util.construct_class_by_name(**loss_kwargs)\n    batch_idx = 0\n    while True:\n"
                "        z = torch.randn([4, 512], device=device)\n        for phase in phases:\n"
                "            if batch_idx % phase.interval != 0:\n                continue\n"
                "            loss.accumulate_gradients(phase=phase.name, z=z)\n            phase.opt.step()\n"
                "        batch_idx += 1\n"
            ),
        },
    )
    found = [(f.path, f.line, f.severity) for f in scan(tmp_path).findings if f.code == "PC505"]
    assert found == [("training/loss.py", 9, Severity.ERROR)]


def test_a_package_below_a_folder_without_init_is_called_by_its_namespace_name(tmp_path: Path) -> None:
    """RIFE: `from model.pytorch_msssim import ssim_matlab`, where `model/` has no __init__.py;
    the benchmark's loop runs it every step, and its tests of tensor values sync each time."""
    write(
        tmp_path,
        {
            "model/pytorch_msssim/__init__.py": (
                "import torch\ndef ssim_matlab(img1, img2):\n    if torch.max(img1) > 128:\n        max_val = 255\n"
                "    else:\n        max_val = 1\n    return ((img1 - img2) ** 2).mean() / max_val\n"
            ),
            "benchmark.py": (
                "import torch\nfrom model.pytorch_msssim import ssim_matlab\nfor x, y in loader:\n"
                "    pred = model(x.to(device))\n    print(ssim_matlab(pred, y.to(device)))\n"
            ),
        },
    )
    found = [(f.path, f.line, f.severity) for f in scan(tmp_path).findings if f.code == "PC504"]
    assert found == [("model/pytorch_msssim/__init__.py", 3, Severity.ERROR)]


def test_a_library_default_is_not_reported_at_the_calls_of_the_library_itself(tmp_path: Path) -> None:
    """GFPGAN: its scripts call its own `GFPGANer`, whose CUDA-or-CPU default the scan reports
    in gfpgan/utils.py; Real-ESRGAN's, a dependency, is reported where it is called."""
    write(
        tmp_path,
        {
            "gfpgan/__init__.py": "from .utils import GFPGANer\n",
            "gfpgan/utils.py": (
                "import torch\nclass GFPGANer:\n    def __init__(self, model_path, upscale=2, arch='clean',"
                " channel_multiplier=2, bg_upsampler=None, device=None):\n        self.device = device\n"
            ),
            "inference.py": (
                "import torch\nfrom gfpgan import GFPGANer\nfrom realesrgan import RealESRGANer\n"
                "bg = RealESRGANer(scale=2, model_path='x.pth')\nrestorer = GFPGANer(model_path='y.pth', bg_upsampler=bg)\n"
            ),
        },
    )
    found = [(f.path, f.line) for f in scan(tmp_path).findings if f.code == "PC109"]
    assert found == [("inference.py", 4)]


def test_a_mixup_another_module_returns_runs_cutmix_in_the_step(tmp_path: Path) -> None:
    """Swin Transformer: `data.build.build_loader` returns timm's Mixup last in a tuple; main.py
    unpacks it and gives it to the epoch's function, whose loop runs it every step."""
    build = (
        "from timm.data import Mixup\ndef build_loader(config):\n    mixup_fn = None\n    if config.MIXUP > 0:\n"
        "        mixup_fn = Mixup(mixup_alpha=config.MIXUP, cutmix_alpha={})\n    return loader, mixup_fn\n"
    )
    main = (
        "import torch\nfrom data import build_loader\ndef main(config, model):\n"
        "    data_loader_train, mixup_fn = build_loader(config)\n    train_one_epoch(model, data_loader_train, mixup_fn)\n"
        "def train_one_epoch(model, data_loader, mixup_fn):\n    for samples, targets in data_loader:\n"
        "        if mixup_fn is not None:\n            samples, targets = mixup_fn(samples, targets)\n"
        "        model(samples).sum().backward()\n"
    )
    for cutmix, expected in (("config.CUTMIX", [("main.py", 9)]), ("0.0", [])):
        write(
            tmp_path,
            {
                "data/__init__.py": "from .build import build_loader\n",
                "data/build.py": build.format(cutmix),
                "main.py": main,
            },
        )
        found = [(f.path, f.line) for f in scan(tmp_path).findings if f.code == "PC512"]
        assert found == expected


def test_a_tensor_test_on_the_objects_own_state_does_not_wait_for_a_tensor_argument(tmp_path: Path) -> None:
    """segment-anything: MaskData.filter indexes each tensor it holds (`isinstance(v,
    torch.Tensor)` over `self._stats`) with the mask it is given; the loop in another module
    that calls it every batch passes a mask the analysis cannot type, and the indexing still
    runs every batch."""
    write(
        tmp_path,
        {
            "amg.py": (
                "import torch\nclass MaskData:\n    def filter(self, keep):\n        for k, v in self._stats.items():\n"
                "            if isinstance(v, torch.Tensor):\n                self._stats[k] = v[torch.as_tensor(keep, device=v.device)]\n"
                "            elif isinstance(v, list) and keep.dtype == torch.bool:\n"
                "                self._stats[k] = [a for i, a in enumerate(v) if keep[i]]\n"
            ),
            "generator.py": (
                "import torch\nfrom amg import MaskData\nclass Generator:\n    def generate(self, loader):\n"
                "        for batch in loader:\n            data = self.process(batch)\n"
                "            data.filter(data['iou'] > self.thresh)\n"
            ),
        },
    )
    (found,) = [f for f in scan(tmp_path, targets=("neuron",)).findings if f.code == "PC502"]
    assert (found.path, found.line, found.severity) == ("amg.py", 6, Severity.ERROR)


def test_a_method_a_base_class_loop_calls_on_self_runs_every_step_where_a_subclass_overrides_it(
    tmp_path: Path,
) -> None:
    """audiocraft: StandardSolver's loop over `lp = self.log_progress(stage, loader)` calls
    `self.run_step(...)`; MusicGenSolver, in another module, overrides it with a host sync, and
    so do MagnetSolver, which derives from MusicGenSolver, and a class beside it derived from it."""
    write(
        tmp_path,
        {
            "solvers/__init__.py": "",
            "solvers/base.py": (
                "import torch\nclass StandardSolver:\n    def run_step(self, idx, batch, metrics):\n"
                "        raise NotImplementedError\n    def common_train_valid(self, loader):\n"
                "        lp = self.log_progress('train', loader, total=10)\n"
                "        for idx, batch in enumerate(lp):\n            metrics = self.run_step(idx, batch, {})\n"
            ),
            "solvers/musicgen.py": (
                "import torch\nfrom . import base\nclass MusicGenSolver(base.StandardSolver):\n"
                "    def run_step(self, idx, batch, metrics):\n        loss = self.model(batch).mean()\n"
                "        if not loss.isfinite().all():\n            raise RuntimeError('diverged')\n        return metrics\n"
            ),
            "solvers/magnet.py": (
                "import torch\nfrom .musicgen import MusicGenSolver\nclass MagnetSolver(MusicGenSolver):\n"
                "    def run_step(self, idx, batch, metrics):\n        loss = self.model(batch).sum()\n"
                "        if not loss.isfinite().all():\n            raise RuntimeError('diverged')\n        return metrics\n"
                "class Unrelated:\n    def run_step(self, loss):\n        return loss.item()\n"
                # LAVIS' `GQATask(VQATask)`: a subclass of a class of the same module
                "class MagnetLMSolver(MagnetSolver):\n    def run_step(self, idx, batch, metrics):\n"
                "        return {'loss': self.model(batch).mean().item()}\n"
            ),
        },
    )
    found = [f for f in scan(tmp_path, targets=("neuron",)).findings if f.code in ("PC503", "PC504")]
    assert [(f.path, f.line, f.severity) for f in found] == [
        ("solvers/magnet.py", 6, Severity.ERROR),
        ("solvers/magnet.py", 14, Severity.ERROR),
        ("solvers/musicgen.py", 6, Severity.ERROR),
    ]
    assert all("called from a loop over a DataLoader in solvers/base.py" in f.message for f in found)


def test_calls_of_an_extensions_autograd_function_are_warnings(tmp_path: Path) -> None:
    """Deformable-DETR: `MSDeformAttnFunction.apply` comes from the module that imports the CUDA
    extension the repository builds, so each call runs its kernels (a warning: the import is
    the error); the module's PyTorch reference, called beside it, stays info."""
    write(
        tmp_path,
        {
            "setup.py": (
                "from setuptools import setup\nfrom torch.utils.cpp_extension import CUDAExtension\n"
                "setup(ext_modules=[CUDAExtension('MultiScaleDeformableAttention', ['src/k.cu'])])\n"
            ),
            "ops/__init__.py": "",
            "ops/functions/__init__.py": "from .attn_func import AttnFunction, attn_core_pytorch\n",
            "ops/functions/attn_func.py": (
                "import torch\nimport MultiScaleDeformableAttention as MSDA\n"
                "class AttnFunction(torch.autograd.Function):\n    @staticmethod\n    def forward(ctx, v):\n"
                "        return MSDA.ms_deform_attn_forward(v)\ndef attn_core_pytorch(v):\n    return v * 2\n"
            ),
            "ops/modules.py": (
                "import torch\nfrom ops.functions import AttnFunction, attn_core_pytorch\n"
                "def forward(v):\n    return AttnFunction.apply(v) + attn_core_pytorch(v)\n"
            ),
        },
    )
    calls = sorted((f.column, f.severity, f.message) for f in scan(tmp_path).findings if f.code == "PC707")
    assert [(severity, message.split(" ")[1]) for _, severity, message in calls] == [
        (Severity.WARNING, "`AttnFunction.apply`"),
        (Severity.INFO, "`attn_core_pytorch`"),
    ]
    assert "runs kernels of the repository's CUDA extension `MultiScaleDeformableAttention`" in calls[0][2]


def test_calls_of_what_the_module_building_an_extension_defines_are_warnings(tmp_path: Path) -> None:
    """stylegan2-pytorch: `op/fused_act.py` builds `fused` with `load(...)` when imported, and
    `op` re-exports its `fused_leaky_relu` and `FusedLeakyReLU`; each call runs the extension on
    every device but the CPU (a warning). `op.conv2d_gradfix` is plain PyTorch that fails only
    with its package, and a reference function beside the kernels is PyTorch too: info."""
    write(
        tmp_path,
        {
            "op/__init__.py": "from .fused_act import FusedLeakyReLU, fused_leaky_relu, leaky_relu_ref\n",
            "op/fused_act.py": (
                "import torch\nfrom torch.utils.cpp_extension import load\n"
                "fused = load('fused', sources=['fused_bias_act.cpp', 'fused_bias_act_kernel.cu'])\n"
                "class FusedLeakyReLU(torch.nn.Module):\n    def forward(self, x):\n"
                "        return fused_leaky_relu(x)\ndef fused_leaky_relu(x):\n"
                "    if x.device.type == 'cpu':\n        return leaky_relu_ref(x)\n    return fused.fused_bias_act(x)\n"
                "def leaky_relu_ref(x):\n    return torch.nn.functional.leaky_relu(x, 0.2)\n"
            ),
            "op/conv2d_gradfix.py": "import torch\ndef conv2d(x, w):\n    return torch.nn.functional.conv2d(x, w)\n",
            "model.py": (
                "import torch\nfrom op import FusedLeakyReLU, fused_leaky_relu, leaky_relu_ref, conv2d_gradfix\n"
                "class Layer(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n"
                "        self.act = FusedLeakyReLU()\n    def forward(self, x, w):\n"
                "        x = conv2d_gradfix.conv2d(x, w)\n        return fused_leaky_relu(x) + leaky_relu_ref(x)\n"
            ),
        },
    )
    found = {(f.line, f.message.split(" ")[1]): f.severity for f in scan(tmp_path).findings if f.code == "PC707"}
    assert found == {
        (6, "`FusedLeakyReLU`"): Severity.WARNING,
        (8, "`conv2d_gradfix.conv2d`"): Severity.INFO,
        (9, "`fused_leaky_relu`"): Severity.WARNING,
        (9, "`leaky_relu_ref`"): Severity.INFO,
    }


def test_a_module_level_alias_of_a_launcher_is_called_as_the_launcher(tmp_path: Path) -> None:
    """modded-nanogpt's `ReLUSqrdMLP = FusedLinearReLUSquareFunction.apply`, called in forward;
    a local of the alias's name is something else."""
    write(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/ops.py": KERNELS_MODULE,
            "pkg/model.py": (
                "import torch\nfrom pkg.ops import LayerNormFn\nnorm = LayerNormFn.apply\n"
                "def forward(x):\n    return norm(x)\n"
                "def other(x, norm):\n    return norm(x)\n"
            ),
        },
    )
    (call,) = [f for f in scan(tmp_path).findings if f.code == "PC707"]
    assert (call.path, call.line, call.severity) == ("pkg/model.py", 5, Severity.WARNING)
    assert call.message.startswith("calls `norm` of `pkg.ops`")


def test_a_checked_optional_import_of_a_kernels_module_runs_where_the_project_installs_triton(
    tmp_path: Path,
) -> None:
    """mamba's `selective_state_update` is None where the import fails, and checked; but mamba
    requires triton, which installs on a TPU host, so the import succeeds and the launch fails."""
    model = (
        "import torch\ntry:\n    from pkg.ops import layer_norm_fn\nexcept ImportError:\n    layer_norm_fn = None\n"
        "def forward(x):\n    if layer_norm_fn is None:\n        return torch.nn.functional.layer_norm(x, x.shape[-1:])\n"
        "    return layer_norm_fn(x)\n"
    )
    files = {"pkg/__init__.py": "", "pkg/ops.py": KERNELS_MODULE, "pkg/model.py": model}
    write(tmp_path, files)
    assert not [f for f in scan(tmp_path).findings if f.code == "PC707"]
    write(tmp_path, {"requirements.txt": "torch\ntriton>=3.0\n"})
    (call,) = [f for f in scan(tmp_path).findings if f.code == "PC707"]
    assert (call.path, call.line, call.severity) == ("pkg/model.py", 9, Severity.ERROR)
    assert "the project declares triton" in call.message


def test_another_file_calling_every_n_steps_runs_shape_hazards_but_not_host_syncs(tmp_path: Path) -> None:
    """gaussian-splatting's `gaussians.densify_and_prune(...)` under `if iteration % 100 == 0:`
    in train.py: the masks that resize the model compile a new graph each time (PC502 at its
    severity), while the loss read back there is the remedy for a sync (no PC503)."""
    model = (
        'import torch\nclass GaussianModel:\n    def __init__(self):\n        self.xyz = torch.zeros(10, 3, device="cuda")\n'
        "    def prune(self, keep):\n        print(self.xyz.sum().item())\n"
        "        self.xyz = self.xyz[keep > 0]\n"
    )
    train = (
        "import torch\nfrom scene.model import GaussianModel\ndef training(model, opt, iterations):\n"
        "    gaussians = GaussianModel()\n    for iteration in range(iterations):\n"
        "        loss = model(gaussians.xyz).sum()\n        loss.backward()\n        opt.step()\n"
        "        if iteration % 100 == 0:\n            gaussians.prune(loss.detach())\n"
    )
    write(tmp_path, {"scene/__init__.py": "", "scene/model.py": model, "train.py": train})
    found = {(f.path, f.line, f.code): f for f in scan(tmp_path, targets=("neuron",)).findings}
    assert found[("scene/model.py", 7, "PC502")].severity == Severity.ERROR
    assert ("scene/model.py", 6, "PC503") not in found


def test_a_device_module_imported_from_another_module(tmp_path: Path) -> None:
    """torchtitan: tools/utils.py binds `device_module` from what its own function returns, and
    the trainer, the metrics and the distributed helpers import it: their calls of functions
    TorchTPU refuses or lacks are reported once, where they are made."""
    utils = (
        "import torch\nfrom torch._utils import _get_available_device_type, _get_device_module\n\n"
        "def get_device_info():\n    device_type = _get_available_device_type() or 'cuda'\n"
        "    device_module = _get_device_module(device_type)\n    return device_type, device_module\n\n"
        "device_type, device_module = get_device_info()\n\ndef sync():\n    device_module.synchronize()\n"
    )
    metrics = (
        "from pkg.tools.utils import device_module, device_type\n\nclass Monitor:\n"
        "    def reset(self):\n        device_module.reset_peak_memory_stats()\n"
        "        return device_module.get_device_name()\n"
    )
    trainer = (
        "from pkg.tools import utils\n\ndef init(device):\n"
        "    device_module, device_type = utils.device_module, utils.device_type\n"
        "    device_module.set_device(device)\n"
    )
    write(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/tools/__init__.py": "",
            "pkg/tools/utils.py": utils,
            "pkg/metrics.py": metrics,
            "pkg/trainer.py": trainer,
        },
    )
    found = [(f.path, f.line, f.message) for f in scan(tmp_path, targets=("tpu",)).findings if f.code == "PC220"]
    assert found == [
        (
            "pkg/metrics.py",
            5,
            "`device_module.reset_peak_memory_stats()` calls the device's runtime module, which has no"
            " `reset_peak_memory_stats` on tpu (AttributeError)",
        ),
        (
            "pkg/tools/utils.py",
            12,
            "`device_module.synchronize()` calls the device's runtime module, which raises RuntimeError from"
            " user code on tpu",
        ),
        (
            "pkg/trainer.py",
            5,
            "`device_module.set_device()` calls the device's runtime module, which raises RuntimeError from"
            " user code on tpu",
        ),
    ]


def test_a_model_called_in_another_module_gets_tensors_in_its_forward(tmp_path: Path) -> None:
    """StyleTTS2: the training script calls `slmadv(...)`, an instance of a module of another
    file, with the batch's lengths; its forward slices by them, also through the items of
    `zip(d, ref_lengths)`. A parameter the call passes a number stays a number."""
    loss = (
        "import torch\n\nclass SLMAdversarialLoss(torch.nn.Module):\n"
        "    def forward(self, d, ref_lengths, iters):\n        out = []\n"
        "        for pred, n in zip(d, ref_lengths):\n            out.append(pred[:n])\n"
        "        return out[:iters]\n"
    )
    train = (
        "import torch\nfrom slmadv import SLMAdversarialLoss\n\ndef main(model, loader, device):\n"
        "    slmadv = SLMAdversarialLoss()\n    for texts, lengths in loader:\n"
        "        lengths = lengths.to(device)\n        out = slmadv(model(texts), lengths, 3)\n"
    )
    write(tmp_path, {"slmadv.py": loss, "train.py": train})
    found = [(f.path, f.line, f.message.split(",")[0]) for f in scan(tmp_path).findings if f.code == "PC505"]
    assert found == [("slmadv.py", 7, "slice bound `n` comes from tensor values")]
