from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from portcheck import patterns
from portcheck import targets as target_data
from portcheck.findings import FixSafety, Severity
from portcheck.resolve import Scope
from portcheck.rewrites import placement
from portcheck.rewrites.edits import Edit, Spelling, with_parentheses_of
from portcheck.rule import ERROR, OFF, WARNING, FileContext, Invalid, Report, Valid
from portcheck.rules.placement.cuda_device_string import describe
from portcheck.setting_rule import SettingValueRule
from portcheck.wording import verb

_PIPELINE_FUNCTIONS = frozenset({"transformers.pipeline", "transformers.pipelines.pipeline"})
# The device types transformers' Pipeline turns an int `device` into (pipelines/base.py: mlu,
# musa, cuda, npu, hpu, xpu, mps); anywhere else recent releases fall back to the CPU and
# older ones raise.
_PIPELINE_INDEX_TYPES = frozenset({"cuda", "npu", "hpu", "xpu", "mps"})
# The device strings Transformers documents for `device_map=` and a pipeline's `device=`
# (docs v5.22, "Hardware": cpu, cuda, neuron, tpu, xpu, mps, hpu, npu, mlu, musa). A placement
# is rewritten only to one of them: torch_xla's "xla" is not among them.
_HF_DEVICE_TYPES = frozenset({"cpu", "cuda", "neuron", "tpu", "xpu", "mps", "hpu", "npu", "mlu", "musa"})

# A "cuda" string raises without CUDA. An index in a device_map reaches torch, which reads it
# as an index of the current accelerator (torch >= 2.8 docs; `deviceFromLong`): it raises where
# torch.accelerator has none, as on a CPU-only host or under torch_xla, and where a process owns
# one device (TPU) any index but its own names a device the process lacks.
_CUDA_STRING = {name: OFF if t.keeps_cuda_api else ERROR for name, t in target_data.all_targets().items()}
_MAP_INDEX = {
    name: ERROR if not t.accelerator_api else WARNING if t.one_device_per_process else OFF
    for name, t in target_data.all_targets().items()
}
# device_map="auto" and the balanced and sequential maps are filled from accelerate's
# `get_max_memory` (accelerate/utils/modeling.py), which measures the memory of CUDA, NPU, MLU,
# MUSA and XPU devices (HPU and MPS in recent releases) and of the CPU: a device it does not know
# gets no layer, so where the target is none of those every layer stays on the CPU.
_AUTO_MAPS = frozenset({"auto", "balanced", "balanced_low_0", "sequential"})
_AUTO = {
    name: WARNING if t.device_type in ("tpu", "neuron", "xla") else OFF for name, t in target_data.all_targets().items()
}
_PIPELINE_INDEX = {
    name: OFF if t.device_type in _PIPELINE_INDEX_TYPES else WARNING if t.device_type == "cpu" else ERROR
    for name, t in target_data.all_targets().items()
}


def is_hf_pipeline(names: frozenset[str]) -> bool:
    """`transformers.pipeline(...)` or one of transformers' `...Pipeline` classes."""
    return any(
        name in _PIPELINE_FUNCTIONS or (name.startswith("transformers.") and name.endswith("Pipeline"))
        for name in names
    )


def _is_index(node: cst.CSTNode) -> bool:
    return isinstance(node, cst.Integer)


def _is_placement(node: cst.CSTNode) -> bool:
    """A literal placement, or an expression that may hold an index (`local_rank`,
    `Accelerator().process_index`): the device flow says which do."""
    return _is_index(node) or patterns.is_cuda_device_literal(node) or _may_hold_index(node)


def _is_auto_map(node: cst.CSTNode) -> bool:
    return patterns.string_value(node) in _AUTO_MAPS


def _may_hold_index(node: cst.CSTNode) -> bool:
    return isinstance(node, (cst.Name, cst.Attribute, cst.Call, cst.BinaryOperation, cst.UnaryOperation))


class HfCudaDeviceMap(SettingValueRule):
    """## What it does
    Reports CUDA placements in Hugging Face loading calls: a `device_map` that is `"cuda"`,
    `"cuda:N"`, a device index (`device_map=0`) or, on tpu, neuron and xla, `"auto"`, dict values that are (`{"": "cuda:1"}`,
    `{"": 0}`, `{"": local_rank}`, `{"": Accelerator().process_index}`), and an int `device=` of
    `transformers.pipeline(...)` or a transformers `...Pipeline` class. A `device_map` is found
    as a keyword, a parameter default, a variable, attribute, subscript or dict key named
    `device_map`, and through a name bound once; an index also as a rank the device flow
    follows (`int(os.environ["LOCAL_RANK"])`, a parameter named `local_rank`).

    ## Why is this bad?
    A `"cuda"` value raises without CUDA. An int is not a device but an index whose device
    type someone else guesses: transformers' pipeline maps it to CUDA, NPU, HPU, XPU or MPS
    and otherwise silently runs on the CPU (older releases raise), so on TPU, Trainium and
    XLA the model never reaches the chip. In a device_map the index reaches torch, which
    takes it as an index of the current accelerator: it raises where there is none (a CPU
    host; torch_xla is not a torch.accelerator), and where a process owns one device (TPU)
    a rank names a device the process lacks.

    ## Example
    ```python
    model = AutoModelForCausalLM.from_pretrained(name, device_map={"": local_rank})
    classifier = pipeline("text-classification", device=0)
    ```

    ## Use instead
    ```python
    model = AutoModelForCausalLM.from_pretrained(name, device_map="tpu")
    classifier = pipeline("text-classification", device=device)
    ```
    with the target's device string (Transformers documents `"tpu"`, `"neuron"`, `"xpu"`,
    `"mps"`, `"hpu"`, `"npu"`) or one device chosen once, e.g.
    `torch.accelerator.current_accelerator()`.

    ## Targets
    A "cuda" value is an error everywhere but ROCm. An index in a device_map is an error on
    xla and cpu, whose device torch.accelerator does not know, and a warning on tpu, where a
    process owns one device. A pipeline index is an error on tpu, neuron and xla, a warning on
    cpu, and off where transformers maps it (rocm, xpu, npu, hpu, mps). `device_map="auto"`
    (and `"balanced"`, `"balanced_low_0"`, `"sequential"`) is a warning on tpu, neuron and xla:
    accelerate fills those maps from the memory of the devices it knows (CUDA, NPU, MLU, MUSA,
    XPU, and the CPU), so there every layer stays on the CPU; not rewritten, since a map over
    several GPUs may need a person's choice of one device or a sharding. Under a CUDA check (`{"": 0} if torch.cuda.is_available() else "cpu"`) the
    placement runs only on CUDA: info, the check is the finding.

    ## Fix safety
    Safe, and only to a device string Transformers documents for device maps and pipelines
    (not for xla, whose `"xla"` it does not list): a `"cuda"` / `"cuda:N"` value becomes the
    target's device as cuda-device-string writes it (`"tpu"`, `{"": "xpu:1"}`). An index, where
    it is reported, becomes the device it means there: `{"": 0}` -> `{"": "cpu"}` on cpu,
    `{"": local_rank}` -> `{"": "tpu"}` where a process owns one device and
    `{"": f"xpu:{local_rank}"}` where indexes are kept, `pipeline(device=0)` -> `device="tpu"`.
    The rank itself stays for what else uses it. With `--device auto` it is the type of the
    module's device binding (`DEVICE.type`, a string, since Hugging Face compares device-map
    values with `"cpu"` and `"disk"`); an index is kept only where there is an accelerator
    (`f"{DEVICE.type}:0" if DEVICE.type != "cpu" else "cpu"`), because on a host with none it
    would read `"cpu:0"`, which those comparisons miss.

    Not fixed: an int reached through a name bound elsewhere (`GPU = 1` ...
    `pipeline(device=GPU)`), which other code may use as a number.
    """

    code = "PC106"
    name = "hf-cuda-device-map"
    message = "{subject} {problem}"
    hint = "{advice}"
    severity = {
        name: max(_CUDA_STRING[name], _MAP_INDEX[name], _PIPELINE_INDEX[name], _AUTO[name])
        for name in target_data.TARGET_ORDER
    }
    fix_safety = FixSafety.SAFE
    triggers = (b"device_map", b"pipeline", b"Pipeline")
    cuda_only = True

    VALID = [
        Valid(
            'from transformers import AutoModel\nmodel = AutoModel.from_pretrained("bert", device_map="auto")\n',
            options={"targets": ["cpu", "rocm", "xpu", "npu", "hpu", "mps"]},
        ),
        Valid('from transformers import pipeline\nclf = pipeline("text-classification", device=-1)\n'),
        Valid('import torch\nfrom transformers import pipeline\nclf = pipeline("ner", device=torch.device("cpu"))\n'),
        Valid('import torch\nm = AutoModel.from_pretrained("x", device_map={"": "cpu", "lm_head": "disk"})\n'),
        Valid("def load(torch, pipeline):\n    return pipeline('ner', device=0)\n"),
        Valid("import torch\nx = torch.zeros(3).to(0)\nmax_memory = {0: '10GiB', 'cpu': '30GiB'}\n"),
        Valid(
            'from transformers import AutoModel\nm = AutoModel.from_pretrained("x", device_map={"": 0})\n',
            options={"targets": ["neuron", "xpu", "rocm"]},
        ),
        Valid(
            'from transformers import pipeline\nclf = pipeline("ner", device=0)\n',
            options={"targets": ["xpu", "npu", "mps"]},
        ),
        # neither a rank nor a device: a name bound to another device map, a setting, a device;
        # and a "cuda" bound to a device variable is cuda-device-string's (PC101)
        Valid(
            "import torch.cuda\nfrom transformers import AutoModelForCausalLM as LM\n"
            'device_map = {"": "cpu"}\nm = LM.from_pretrained("x", device_map=device_map)\n'
            'n = LM.from_pretrained("x", device_map=args.device_map)\n'
            'o = LM.from_pretrained("x", device_map={"": accelerator.device})\n'
            'device = "cuda" if torch.cuda.is_available() else "cpu"\np = LM.from_pretrained("x", device_map=device)\n',
            options={"select": ["PC106"]},
        ),
        # torch.cuda.current_device() is cuda-device-selection's (PC202)
        Valid('import torch\nm = AutoModel.from_pretrained("x", device_map={"": torch.cuda.current_device()})\n'),
    ]
    INVALID = [
        # accelerate spreads the weights over the devices it measures: on tpu none, all on the CPU
        Invalid(
            "from diffusers import DiffusionPipeline\nfrom transformers import AutoModel\n"
            'pipe = DiffusionPipeline.from_pretrained("sd", device_map="balanced")\n'
            'kwargs = {}\nkwargs["device_map"] = "auto"\nmodel = AutoModel.from_pretrained("bert", **kwargs)\n',
            lines=[3, 5],
            message="every layer silently stays on the CPU",
            options={"targets": ["tpu", "neuron"]},
        ),
        Invalid(
            'import torch\nm = AutoModel.from_pretrained("x", device_map={"": 0})\n',
            lines=[2],
            message="device_map",
            device="cpu",
            fixed='import torch\nm = AutoModel.from_pretrained("x", device_map={"": "cpu"})\n',
        ),
        Invalid(
            'import torch as T\nm = load("x", torch_dtype=T.bfloat16, device_map={"": "cuda:1"})\n',
            lines=[2],
            fixed='import torch as T\nm = load("x", torch_dtype=T.bfloat16, device_map={"": "tpu"})\n',
        ),
        Invalid(
            'import torch as T\nm = load("x", torch_dtype=T.bfloat16, device_map={"": "cuda:1"})\n',
            lines=[2],
            device="xpu",
            fixed='import torch as T\nm = load("x", torch_dtype=T.bfloat16, device_map={"": "xpu:1"})\n',
        ),
        # a whole device_map that names CUDA: Transformers v5 documents "tpu" and "neuron"
        Invalid(
            "from transformers import AutoModelForCausalLM as LM, pipeline\n"
            'm = LM.from_pretrained("x", device_map="cuda:0")\np = pipeline("text-generation", device_map="cuda")\n',
            lines=[2, 3],
            fixed="from transformers import AutoModelForCausalLM as LM, pipeline\n"
            'm = LM.from_pretrained("x", device_map="tpu")\np = pipeline("text-generation", device_map="tpu")\n',
        ),
        Invalid(
            'import transformers\nm = transformers.AutoModel.from_pretrained("x", device_map="cuda")\n',
            lines=[2],
            device="neuron",
            fixed='import transformers\nm = transformers.AutoModel.from_pretrained("x", device_map="neuron")\n',
        ),
        Invalid(
            "from transformers import pipeline\nfrom torch import cuda\n"
            'clf = pipeline("ner", device=0 if cuda.is_available() else -1)\n',
            lines=[3],
            message="pipeline(device=0)",
            fixed="from transformers import pipeline\nfrom torch import cuda\n"
            'clf = pipeline("ner", device="tpu" if cuda.is_available() else -1)\n',
        ),
        # The int is bound to a name other code may use as a number: reported, not rewritten.
        Invalid(
            "import transformers\nimport torch.cuda\nGPU = 1\n"
            "clf = transformers.TextClassificationPipeline(model=m, device=GPU)\n",
            lines=[3],
        ),
        Invalid(
            'from torch.cuda import is_available as has_cuda\ndevice_map = {"": "cuda"} if has_cuda() else "cpu"\n'
            "model = Model.from_pretrained('x', device_map=device_map)\n",
            lines=[2],
            device="auto",
            fixed="from torch.cuda import is_available as has_cuda\nimport torch\n"
            'DEVICE = torch.accelerator.current_accelerator(check_available=True) or torch.device("cpu")\n'
            'device_map = {"": DEVICE.type} if has_cuda() else "cpu"\n'
            "model = Model.from_pretrained('x', device_map=device_map)\n",
        ),
        # torch_xla's "xla" is no device string Transformers documents: reported, not rewritten
        Invalid(
            'class Loader:\n    def __init__(self):\n        self.device_map = {"encoder": 0, "decoder": 1}\n',
            lines=[3, 3],
            device="xla",
        ),
        Invalid(
            'class Loader:\n    def __init__(self):\n        self.device_map = {"encoder": 0, "decoder": 1}\n',
            lines=[3, 3],
            device="cpu",
            fixed='class Loader:\n    def __init__(self):\n        self.device_map = {"encoder": "cpu", "decoder": "cpu"}\n',
        ),
        Invalid(
            "import torch\ndevice = 0\nm = AutoModel.from_pretrained('x', device_map=device)\n",
            lines=[2],
            device="cpu",
        ),
        Invalid(
            "def load(name, device_map=0):\n    return Model.from_pretrained(name, device_map=device_map)\n",
            lines=[1],
            device="cpu",
            fixed='def load(name, device_map="cpu"):\n    return Model.from_pretrained(name, device_map=device_map)\n',
        ),
        Invalid(
            'from transformers import pipeline as make\nclf = make("ner", device=0)\n',
            options={"targets": ["cpu"]},
            device="cpu",
            fixed='from transformers import pipeline as make\nclf = make("ner", device="cpu")\n',
        ),
        Invalid(
            'from transformers import pipeline\nclf = pipeline("ner", device=1)\n',
            lines=[2],
            device="neuron",
            fixed='from transformers import pipeline\nclf = pipeline("ner", device="neuron:1")\n',
        ),
        # auto: the index where there is an accelerator ("cpu:0" is not "cpu" to Hugging Face).
        Invalid(
            'import torch\nm = AutoModel.from_pretrained("x", device_map={"": 0})\n',
            lines=[2],
            device="auto",
            fixed="import torch\n"
            'DEVICE = torch.accelerator.current_accelerator(check_available=True) or torch.device("cpu")\n'
            'm = AutoModel.from_pretrained("x", device_map={"": f"{DEVICE.type}:0" if DEVICE.type != "cpu" else "cpu"})\n',
        ),
        # ranks (qlora, alpaca-lora, PEFT's examples): the process's own device where it owns one
        Invalid(
            "import os\nfrom transformers import AutoModelForCausalLM\n\ndef load(name):\n"
            '    local_rank = int(os.environ.get("LOCAL_RANK", "0"))\n'
            '    device_map = {"": local_rank}\n'
            "    return AutoModelForCausalLM.from_pretrained(name, device_map=device_map)\n",
            lines=[6],
            message="`local_rank`",
            fixed="import os\nfrom transformers import AutoModelForCausalLM\n\ndef load(name):\n"
            '    local_rank = int(os.environ.get("LOCAL_RANK", "0"))\n'
            '    device_map = {"": "tpu"}\n'
            "    return AutoModelForCausalLM.from_pretrained(name, device_map=device_map)\n",
        ),
        Invalid(
            "import os\nimport torch\nfrom accelerate import Accelerator\n"
            'ddp = int(os.environ.get("WORLD_SIZE", 1)) != 1\n'
            'device_map = {"": Accelerator().process_index} if ddp else "auto"\n'
            'kwargs = {"device_map": {"": int(os.environ.get("LOCAL_RANK") or 0)}}\n',
            lines=[5, 6],
            device="xpu",
            options={"targets": ["cpu"]},
            fixed="import os\nimport torch\nfrom accelerate import Accelerator\n"
            'ddp = int(os.environ.get("WORLD_SIZE", 1)) != 1\n'
            'device_map = {"": f"xpu:{Accelerator().process_index}"} if ddp else "auto"\n'
            'kwargs = {"device_map": {"": f\'xpu:{int(os.environ.get("LOCAL_RANK") or 0)}\'}}\n',
        ),
        Invalid(  # the index goes, and with it the quotes its expression forced
            'import os\nimport torch\ndevice_map = {"": int(os.environ.get("LOCAL_RANK") or 0)}\n'
            'm = AutoModel.from_pretrained("x", device_map=device_map)\n',
            lines=[3],
            device="tpu",
            fixed='import os\nimport torch\ndevice_map = {"": "tpu"}\n'
            'm = AutoModel.from_pretrained("x", device_map=device_map)\n',
        ),
        Invalid(
            "import torch\ndef load(name, local_rank):\n    return AutoModel.from_pretrained(name, device_map=local_rank)\n",
            lines=[3],
            device="cpu",
            fixed='import torch\ndef load(name, local_rank):\n    return AutoModel.from_pretrained(name, device_map="cpu")\n',
        ),
    ]

    def __init__(self, ctx: FileContext) -> None:
        super().__init__(ctx)
        self._indexes: set[int] = set()
        self._direct: set[int] = set()  # literals written in the setting itself, not behind a name
        self._pending: list[tuple[cst.BaseExpression, Scope, tuple[cst.CSTNode, ...]]] = []

    def names_setting(self, name: str) -> bool:
        return patterns.is_device_map_name(name)

    def literals(self, expression: cst.CSTNode) -> Iterator[cst.CSTNode]:
        """Placements inside a device_map: the whole map, or its dict values."""
        if isinstance(expression, cst.Dict):
            for element in expression.elements:
                if isinstance(element, cst.DictElement) and not _keyed_as_device(element):
                    yield from patterns.value_literals(element.value, _is_placement)
        elif isinstance(expression, cst.IfExp):
            yield from self.literals(expression.body)
            yield from self.literals(expression.orelse)
        elif isinstance(expression, cst.BooleanOperation):
            yield from self.literals(expression.left)
            yield from self.literals(expression.right)
        elif _is_placement(expression) or _is_auto_map(expression):
            yield expression

    def check(self, expression: cst.BaseExpression) -> None:
        """As a setting does, but a CUDA string bound to a name that is also a device
        (`device = "cuda"` ... `device_map=device`) is cuda-device-string's (PC101)."""
        found = list(self.literals(expression))
        self._direct.update(id(literal) for literal in found)
        if isinstance(expression, cst.Name) and (bound := self.ctx.assigned_value(expression)) is not None:
            shared = patterns.is_device_name(expression.value) and not self.names_setting(expression.value)
            found += [each for each in self.literals(bound) if not (shared and patterns.is_cuda_device_literal(each))]
        for literal in found:
            self.report_once(literal)

    def report_literal(self, literal: cst.CSTNode) -> None:
        direct = id(literal) in self._direct
        if isinstance(literal, cst.Integer):
            self.reports.append(self._index_report(literal, self._index_edit(literal, direct)))
        elif patterns.is_cuda_device_literal(literal):
            self._report(
                literal,
                _CUDA_STRING,
                f"{describe(literal)} in a device_map",
                "places the weights on a CUDA device",
                "map to the target's device: device_map={devices}, or one device chosen once",
                self._edit(literal, placement.device_spelling(self.ctx, literal, index_on_cpu=False)),
            )
        elif _is_auto_map(literal):
            self._report(
                literal,
                _AUTO,
                f"device_map={cst.Module([]).code_for_node(literal)}",
                "has accelerate spread the weights over the devices whose memory it measures (CUDA, NPU, "
                "MLU, MUSA, XPU), so on {targets} every layer silently stays on the CPU",
                "name the device: device_map={devices}",
            )
        elif direct and isinstance(literal, cst.BaseExpression) and not self._selects_cuda(literal):
            self._check_rank(literal)

    def _check_rank(self, value: cst.BaseExpression) -> None:
        """A rank the flow knows now is reported now; a parameter or attribute waits for the
        callers the rest of the module may show."""
        if isinstance(value, cst.Name) and self._reported_where_bound(value):
            return
        flow = self.ctx.flow
        assert flow is not None, "a Python rule"
        if flow.holds_index(value, flow.scope):
            self.reports.append(self._index_report(value, self._index_edit(value, True)))
        elif isinstance(value, (cst.Name, cst.Attribute)):
            self._pending.append((value, flow.scope, self.ctx.chain(value)))

    def _reported_where_bound(self, name: cst.Name) -> bool:
        """`device = 0` ... `device_map=device`: the literal is the finding, where it is bound."""
        bound = self.ctx.assigned_value(name)
        return bound is not None and any(not _may_hold_index(each) for each in self.literals(bound))

    def leave_Module(self, node: cst.Module) -> None:
        flow = self.ctx.flow
        assert flow is not None
        for value, scope, chain in self._pending:
            if flow.holds_index(value, scope):
                self.reports.append(self._index_report(value, None, chain))

    def _selects_cuda(self, value: cst.BaseExpression) -> bool:
        """`torch.cuda.current_device()`: cuda-device-selection's (PC202)."""
        return isinstance(value, cst.Call) and any(
            name.startswith("torch.cuda.") for name in self.ctx.qualified_names(value.func)
        )

    def _index_report(
        self, index: cst.BaseExpression, edit: Edit | None, chain: tuple[cst.CSTNode, ...] | None = None
    ) -> Report:
        code = cst.Module([]).code_for_node(index)
        subject = f"device index {code if isinstance(index, cst.Integer) else f'`{code}`'} in a device_map"
        problem, advice = self._texts(
            _MAP_INDEX, _index_problem(self.ctx.targets), "name the device instead: device_map={devices}"
        )
        return self.report_here(
            index, severity=_MAP_INDEX, edit=edit, chain=chain, subject=subject, problem=problem, advice=advice
        )

    def visit_Call(self, node: cst.Call) -> None:
        super().visit_Call(node)
        device = patterns.keyword(node, "device")
        if device is None or not is_hf_pipeline(self.ctx.qualified_names(node.func)):
            return
        expression = device.value
        direct = True
        if isinstance(expression, cst.Name):
            expression, direct = self.ctx.assigned_value(expression) or expression, False
        for index in patterns.value_literals(expression, _is_index):
            if isinstance(index, cst.Integer) and id(index) not in self._indexes:
                self._indexes.add(id(index))
                self._report(
                    index,
                    _PIPELINE_INDEX,
                    f"pipeline(device={index.value})",
                    "is a GPU index: transformers maps it to CUDA, NPU, HPU, XPU or MPS only, "
                    "so on {targets} it runs on the CPU",
                    "pass the device itself: device={devices} (or a torch.device); device=-1 is the CPU",
                    self._index_edit(index, direct),
                )

    def _report(
        self,
        node: cst.CSTNode,
        severity: dict[str, Severity],
        subject: str,
        problem: str,
        advice: str,
        edit: Edit | None = None,
    ) -> None:
        problem, advice = self._texts(severity, problem, advice)
        self.report(node, severity=severity, subject=subject, problem=problem, advice=advice, edit=edit)

    def _texts(self, severity: dict[str, Severity], problem: str, advice: str) -> tuple[str, str]:
        """The message parts, naming the selected targets the finding is about and their devices."""
        affected = [t for t in self.ctx.targets if severity[t] > OFF]
        devices = " / ".join(dict.fromkeys(f'"{target_data.get(t).device_type}"' for t in affected)) or '"cpu"'
        where = "/".join(affected) or "the selected targets"
        return problem.format(targets=where), advice.format(devices=devices)

    def _index_edit(self, index: cst.BaseExpression, direct: bool) -> Edit | None:
        """The device an index means on the target, where it is written in the setting itself
        (behind a name, the int may serve elsewhere as a number)."""
        if not direct or placement.inside_fstring(self.ctx.ancestors):
            return None
        literal = placement.indexed_cuda_literal(index)
        if literal is None:
            return None
        spelled = placement.device_spelling(self.ctx, literal, index_on_cpu=False)
        if spelled is not None:
            spelling, safety = spelled
            spelled = Spelling(with_parentheses_of(index, spelling.node), spelling.imports, spelling.prelude), safety
        return self._edit(index, spelled)

    def _edit(self, original: cst.CSTNode, spelled: tuple[Spelling, FixSafety] | None) -> Edit | None:
        """Device strings throughout (`DEVICE.type` under auto, not `DEVICE`): Hugging Face
        compares device-map values with "cpu" and "disk", which a torch.device never equals.
        Only strings Transformers documents for device maps."""
        device_type = self.ctx.fix_target.device_type
        if spelled is None or (device_type and device_type not in _HF_DEVICE_TYPES):
            return None
        spelling, safety = spelled
        where = cst.Module([]).code_for_node(spelling.node)
        return spelling.edit(original, safety, f"device placement -> {where}")


def _index_problem(selected: tuple[str, ...]) -> str:
    """Why an index fails on the selected targets: no accelerator, or one device per process."""
    lacking = [t for t in selected if not target_data.get(t).accelerator_api]
    owning = [t for t in selected if target_data.get(t).one_device_per_process and t not in lacking]
    problem = "is read by torch as an index of the current accelerator"
    if lacking:
        problem += f", which {'/'.join(lacking)} {verb(lacking, 'lacks', 'lack')}: it raises"
    if owning:
        problem += f"; on {'/'.join(owning)} a process owns one device, and any index but its own names one it lacks"
    return problem


def _keyed_as_device(element: cst.DictElement) -> bool:
    """A key named like a device (`{"device": "cuda"}`) is cuda-device-string's (PC101)."""
    key = patterns.string_value(element.key)
    return key is not None and patterns.is_device_name(key)
