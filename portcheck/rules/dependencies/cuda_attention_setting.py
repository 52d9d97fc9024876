from __future__ import annotations

import re

from portcheck import configs, filekinds, project
from portcheck.rule import Invalid, Rule, Valid
from portcheck.targets import packages

# Settings that pick an attention implementation by name: `attn_type`, `attn_mode`,
# `spatial_transformer_attn_type`, `attention_backend`... (not transformers' `attn_implementation`,
# whose FlashAttention values hf-flash-attention, PC705, reports).
_SETTING = re.compile(r"(^|_)(attn|attention)_(type|mode|backend|kernel)$")
# The CUDA-only attention packages (packages.toml keys) by the word a setting's value names them with.
_PACKAGE_WORDS = {"xformers": "xformers", "sageattention": "sageattention", "flashinfer": "flashinfer"}
_FLASH_ATTN = ("flash", "attn")  # `flash_attn`, `flash-attn`: the FlashAttention package


def _package(value: str) -> packages.Package | None:
    """The CUDA-only package a setting's value names (`softmax-xformers`, `vanilla-xformers`,
    `flash-attn`), by its words; None for other values (`softmax`, `sdpa`, `flash_attention_2`)."""
    words = re.split(r"[-_.|/ ]+", value.lower())
    for word in words:
        if word in _PACKAGE_WORDS:
            return packages.by_key(_PACKAGE_WORDS[word])
    pairs = zip(words, words[1:])
    return packages.by_key("flash_attn") if _FLASH_ATTN in pairs else None


class CudaAttentionSetting(Rule):
    """## What it does
    Reports config settings that pick a CUDA-only attention implementation by name: a value
    naming xFormers, FlashAttention, SageAttention or FlashInfer (`softmax-xformers`,
    `vanilla-xformers`, `flash-attn`) given to a setting named for the attention type, mode or
    backend (`attn_type`, `attn_mode`, `spatial_transformer_attn_type`, `attention_backend`) in
    a YAML config: Stability's generative-models and latent-diffusion recipes
    (`spatial_transformer_attn_type: softmax-xformers`, `attn_type: vanilla-xformers`). The
    defaults and choices in the code are left alone: what runs is what the configs choose, and
    the code's calls into the package are reported where they are (cuda-only-package-call,
    PC707).

    ## Why is this bad?
    The setting sends every attention layer to the package's kernels, which only run on NVIDIA
    GPUs: on TPU and Trainium the model fails where it builds the layers (the package does not
    install, or the layer asserts it is there) or at its first attention call ("No operator
    found for `memory_efficient_attention_forward`"). The setting is where the port chooses
    another path.

    ## Example
    ```yaml
    network_config:
      params:
        spatial_transformer_attn_type: softmax-xformers
    ```

    ## Use instead
    ```yaml
    network_config:
      params:
        spatial_transformer_attn_type: softmax
    ```
    The implementation the project offers on PyTorch's scaled_dot_product_attention, which runs
    everywhere (TorchTPU routes it to its splash attention kernel).

    ## Targets
    The package's severity (packages.toml): an error on tpu and neuron, a warning on ROCm where
    the package has builds.

    ## Fix safety
    No automatic fix: which name means the portable implementation is the project's own.
    """

    code = "PC709"
    name = "cuda-attention-setting"
    message = "{what} selects {package}'s attention kernels, which need CUDA"
    hint = "choose the project's scaled_dot_product_attention implementation instead ({instead})"
    severity = packages.by_key("xformers").severities()
    triggers = (b"xformers", b"flash_attn", b"flash-attn", b"sageattention", b"flashinfer")
    file_kinds = (filekinds.CONFIG,)

    VALID = [
        Valid(  # a config that asks for PyTorch's attention, and a note that names the package
            "model:\n  params:\n    spatial_transformer_attn_type: softmax\n    attn_type: vanilla\n"
            "    note: 'softmax-xformers is faster on CUDA'\n    attn_implementation: flash_attention_2\n",
            path="configs/inference/sd_xl_base.yaml",
        ),
        Valid(  # a template is not YAML: no settings, no finding
            "attn_type: {% if cuda %}vanilla-xformers{% endif %}\n", path="templates/model.yaml"
        ),
    ]
    INVALID = [
        Invalid(  # generative-models' recipes
            "model:\n  params:\n    network_config:\n      params:\n"
            "        spatial_transformer_attn_type: softmax-xformers\n"
            "    first_stage_config:\n      params:\n        ddconfig:\n          attn_type: vanilla-xformers\n",
            lines=[5, 9],
            path="configs/inference/sd_xl_base.yaml",
            message="selects xformers's attention kernels",
        ),
        Invalid(
            "model:\n  attention_backend: flash-attn\n  attn_mode: sageattention\n",
            lines=[2, 3],
            path="configs/model.yaml",
        ),
    ]

    def check_text(self, text: str) -> None:
        for setting in configs.settings(text):
            package = _package(setting.value) if _SETTING.search(setting.key) else None
            if package is None:
                continue
            self.record(project.DEPENDENCY, package.key, setting.span, written=package.key)
            what = f"`{setting.key}: {setting.value}`"
            self.report_span(
                setting.span, severity=package.severities(), what=what, package=package.key, instead=package.instead
            )
