"""The module's device logic, computed once per file during the engine's one walk.

Calls are the easy part of a port; programs are ported by their device logic. This analysis
answers, for every rule and for the fixer, the two questions a single call cannot:

- guards: which code runs only on CUDA (`if torch.cuda.is_available():`, `x.is_cuda`,
  `device == "cuda"`, `"cuda" in device`, `torch.version.hip` or `.cuda` (set only in those
  builds), `assert ...`, an early `return` when not on CUDA, a test skipped off CUDA or
  gated on GPUs: `@pytest.mark.gpu`, `@require_torch_gpu`, `RunIf(min_cuda_gpus=1)`), and
  which check protects it. A fix rewrites a check together with what it protects, or
  neither; a finding reached only under such a check cannot run on another target as written.
- device indexes: which expressions hold an integer device (`device = 0`, a `rank` handed to
  `mp.spawn`'s function, `int(os.environ["LOCAL_RANK"])`, `self.gpu_id`, `args.gpu`), followed
  through assignments, attributes, parameters and the module's own calls. An integer given
  where a device goes is an index of the current accelerator (CUDA's, on a CUDA host).
- device branches: which device types a piece of code can run on, as far as the branches
  around it tell (`if device.type == "cuda": ... elif device == "mps": ... else: ...`,
  `torch.backends.mps.is_available()`, and the CUDA guards above), so a rule can leave alone
  what only another device runs.
- host tensors: which expressions demonstrably hold a tensor in host memory (`.cpu()`,
  `torch.from_numpy`, a factory with `device="cpu"` or none, `torch.load` to the CPU), followed
  through names, `self.` attributes, operations and device-keeping methods, into what the
  module's functions return and what its calls pass for a parameter, and where a function's
  local name is used.
- step loops: which loops run a training, evaluation or decoding step (over a DataLoader, or
  calling `.backward()`, an optimizer's `.step()`, the model, `next(...)` or a batch getter,
  or sampling tokens, in their body or `while` test, directly or through a function of the
  module defined before them that has no step loop of its own), where a host sync or a new
  shape costs every iteration; and, once the walk is over, which of the module's functions
  such a loop or a `forward` calls every step, and which generators it draws from (a
  function that yields, a class's `__iter__`). A `for` loop calling a function that runs a
  whole step loop runs once per run of it (an epoch, a sample), not per step.

The flow takes part in the walk like a rule (its handlers run first), so guards are known by
the time a rule visits what they protect; device indexes need the whole module (callers come
after callees) and are answered once the walk is over.
"""

from __future__ import annotations

import builtins
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import IntEnum
from functools import cache, partial
from typing import TypeVar

import libcst as cst
from libcst.helpers import get_full_name_for_node

from portcheck import patterns
from portcheck import targets as target_data
from portcheck.findings import Severity
from portcheck.project import ModulePath
from portcheck.resolve import Resolver, Scope, function_scope
from portcheck.targets import api as api_table
from portcheck.targets import packages
from portcheck.walk import child_fields, descendants, is_reference

_AVAILABILITY = frozenset({"torch.cuda.is_available", "torch.cuda.is_initialized"})
_COUNT = "torch.cuda.device_count"
# Set only in a CUDA (or ROCm's HIP) build of torch: `if torch.version.hip:` runs on neither TPU nor Trainium.
_BUILD_VERSIONS = frozenset({"torch.version.cuda", "torch.version.hip"})
_CHECK_NAMES = frozenset(name.rpartition(".")[2] for name in (*_AVAILABILITY, _COUNT))
_SPAWNERS = frozenset(
    {"torch.multiprocessing.spawn", "torch.multiprocessing.start_processes", "torch.multiprocessing.spawn.spawn"}
)
# Calls that return an integer device index or rank.
_INDEX_CALLS = frozenset(
    {
        "torch.distributed.get_rank", "torch.distributed.get_node_local_rank", "torch.cuda.current_device",
        "torch.accelerator.current_device_index", "torch.distributed.get_local_rank",
    }
)  # fmt: skip
# `torch.mps.is_available`, `torch.backends.mps.is_available`, `torch.xpu.is_available`...
_AVAILABLE_CALL = re.compile(r"torch\.(backends\.)?\w+\.is_available")
# Factories that make a tensor on the default device unless given `device=`; those that take
# data keep the device of a tensor they are given, but for `torch.tensor`, which always copies.
_SIZE_FACTORIES = frozenset(
    f"torch.{name}"
    for name in ("zeros", "ones", "empty", "full", "arange", "range", "linspace", "logspace", "eye", "rand",
                 "randn", "randint", "randperm", "empty_strided")
)  # fmt: skip
_DATA_FACTORIES = frozenset(
    f"torch.{name}"
    for name in ("tensor", "as_tensor", "asarray", "zeros_like", "ones_like", "empty_like", "full_like",
                 "rand_like", "randn_like", "randint_like")
)  # fmt: skip
_DTYPE_NAMES = frozenset(
    {"float16", "float32", "float64", "bfloat16", "half", "float", "double", "int8", "int16", "int32", "int64",
     "uint8", "long", "int", "short", "bool", "complex64", "complex128", "cfloat", "cdouble"}
)  # fmt: skip
# Always in host memory: NumPy's data, and the legacy CPU tensor types (`torch.DoubleTensor([n])`)
_HOST_FACTORIES = frozenset(
    {"torch.from_numpy", "torch.frombuffer"}
    | {
        f"torch.{kind}Tensor"
        for kind in ("Float", "Double", "Half", "BFloat16", "Long", "Int", "Short", "Char", "Byte", "Bool")
    }
)
_DEVICE_METHODS = frozenset({"cuda", "to", "type", "xpu", "mps", "npu", "hpu", "ipu"})
_NUMBERS = (cst.Integer, cst.Float, cst.Imaginary)
_INT_BUILTINS = frozenset({"int", "len", "min", "max", "abs"})
_INT_OPERATORS = (cst.Add, cst.Subtract, cst.Multiply, cst.FloorDivide, cst.Modulo)
# Names that hold a device index or a process's rank where nothing else says what they hold
# (`process_index` and `local_process_index`: Accelerate's `Accelerator` and `PartialState`).
_INDEX_NAME = re.compile(
    r"^(local_)?(rank|gpu|gpu_?id|gpu_?idx|gpu_index|device_?id|device_?idx|device_index|process_index)$"
)
# Names that hold a list of device indexes (`DataParallel(device_ids=...)`'s) where nothing else says.
_INDEXES_NAME = re.compile(r"^(gpu_?ids|device_?ids|gpus)$")
_EXITS = (cst.Return, cst.Raise, cst.Continue, cst.Break)
# Tests that hold only while a model is exported (ONNX, TorchScript tracing or scripting): what
# they guard never runs on the device a port targets.
_EXPORTING = frozenset(
    {
        "torch.onnx.is_in_onnx_export",
        "torch.jit.is_tracing",
        "torch.jit.is_scripting",
        "torch._C._get_tracing_state",
        "torchvision._is_tracing",
    }
)
_SKIPS = frozenset({"pytest.skip"})  # calls that skip a test (they raise)
_SKIP_UNLESS = frozenset({"unittest.skipUnless", "unittest.case.skipUnless"})  # decorators that skip on False
_SKIP_IF = frozenset({"unittest.skipIf", "unittest.case.skipIf", "pytest.mark.skipif"})  # decorators that skip on True
_GPU_MARKS = frozenset({"pytest.mark.gpu", "pytest.mark.cuda"})
_GPU_GATE = re.compile(
    r"_?(requires?|needs?|only)_(torch_)?(multi_)?(cuda|gpus?)(_\w+)?|skip_(if_no|unless)_(cuda|gpus?)\w*"
)
_GPU_COUNTS = frozenset({"min_cuda_gpus", "min_gpus"})  # Lightning's RunIf(min_cuda_gpus=1)
_PARAMS = frozenset({"pytest.param"})
DATALOADERS = frozenset({"torch.utils.data.DataLoader", "torch.utils.data.dataloader.DataLoader"})
_LOADER_NAME = re.compile(r"loader", re.IGNORECASE)
_LOADER_SETTING = re.compile(r"(args|kwargs|cfg|config|fn|func|factory|cls|class|type|name|params|opts|options)$", re.I)
_OPTIMIZER_NAME = re.compile(r"optim|scaler|(^|_)opt$", re.IGNORECASE)
# `model_fn`, `denoiser`: what diffusion samplers call every step
_MODEL_NAME = re.compile(r"(^|_)(model|net|network|module|predictor|denoiser)(_fn)?$", re.IGNORECASE)
# A diffusers pipeline's denoiser, run through the pipeline: `pipe.unet(...)`, `pipeline.transformer(...)`
_PIPELINE_DENOISER = frozenset({"unet", "transformer"})
_PICKING = "picking"  # an argmax or topk of a loop: decoding where it feeds the next pass
_SAMPLING = "sampling"  # a sampler given logits: decoding, where not in a comprehension
_COMPREHENSIONS = (cst.ListComp, cst.SetComp, cst.DictComp, cst.GeneratorExp)
# Methods that fetch or set up a model rather than run it: `task.get_eval_model(ema=True)`.
_MODEL_HANDLING = re.compile(r"^(get|build|create|load|make|init|setup|prepare|wrap|unwrap|save|copy|update)_", re.I)
# What runs one step by its name: `trainer.train_step(samples)`, `self.validation_step(batch)` (not
# inference or test steps, whose loops read each result back as their product).
_STEP_CALL = re.compile(r"(train|training|valid|validation)_step$")
# A function given as a parameter to run one step with (a beam search's `step`, `step_fn`).
_GIVEN_STEP = re.compile(r"^step(_fn|_func|_function)?$")
# How many calls into the module's functions a loop's step markers are looked for (a diffusion
# sampling loop's `p_sample()` -> `p_mean_variance()` -> `model_predictions()` -> `self.model(...)`).
_HELPER_DEPTH = 3
# Methods that run a model or its halves: `model.forward_decoder(...)`, `model.decode(z)`, `model.decoder(x)`.
_MODEL_RUN = re.compile(r"^(forward|decode|encoder|decoder|predict|inference|infer)(_\w+)?$")
COLLATE_NAME = re.compile(r"collat", re.IGNORECASE)  # collate_fn, collate_batch, DataCollator...
# What fetches a step's batch by its name: `get_batch("train")`, `next(it)`.
BATCH_GETTER = re.compile(r"(^|_)(get_batch|next_batch|sample_batch|load_batch)$|^next$")
_SAMPLERS = frozenset({"torch.multinomial", "torch.argmax", "torch.topk"})
_TRANSFORMS = "torchvision.transforms"
_MODULE = "torch.nn.Module"
# `torch.nn` classes that hold other modules or none: no layer of a model among them.
_CONTAINERS = frozenset(f"torch.nn.{name}" for name in ("Module", "Sequential", "ModuleList", "ModuleDict", "Identity"))
# Libraries whose calls make models: a module that makes one is a model's, not a transforms module.
_MODEL_LIBRARIES = ("torchvision.models.", "timm.", "transformers.", "diffusers.")
# What a training module makes and a transforms module does not: optimizers, loaders.
_TRAINING_MAKERS = ("torch.optim.", "torch.utils.data.DataLoader", "torch.utils.data.dataloader.DataLoader")
NESTED_SCOPES = (cst.FunctionDef, cst.ClassDef, cst.Lambda)
_WRAPPERS = frozenset({"enumerate", "zip", "tqdm", "trange", "iter"})  # iterate what they are given
# Calls whose items are those of their one argument, in order (a progress bar, a copy).
_KEEPING_ITEMS = frozenset({"list", "tuple", "iter", "tqdm", "tqdm.tqdm", "tqdm.auto.tqdm"})
_DEPTH = 6  # how far a value is followed through names, parameters and calls
_COMMAND_LINE_DECORATORS = frozenset({"click.command", "click.option", "click.argument"})
_HOME_DEPTH = 16  # how far a tensor is followed to where it was made (into callers and callees too)
_NAME_DEPTH = 3  # how many names a periodic test is followed through
_CLOCKS = frozenset({"time.time", "time.perf_counter", "time.monotonic"})
_GET_BACKEND = frozenset({"torch.distributed.get_backend", "torch.distributed.distributed_c10d.get_backend"})
_NCCL_NAMES = frozenset({"torch.distributed.Backend.NCCL", "torch.distributed.distributed_c10d.Backend.NCCL"})
_T = TypeVar("_T")
# Methods frameworks run once per step: Lightning (and its batch hooks), the Hugging Face
# Trainer, MMEngine/MMCV runners.
_FRAMEWORK_STEP = re.compile(
    r"^(?:(?:training|validation|test|predict|prediction|train|val)_step|compute_loss|forward_(?:train|test)"
    r"|on_(?:train|validation|test|predict)_batch_(?:start|end)|on_before_(?:backward|optimizer_step)"
    r"|on_after_backward)$"
)
_TOKEN_CALLBACK = (("__call__",), "a generation callback (run for every token)")
_STREAMER_PUT = (("put",), "a generation streamer (run for every token)")
_METRIC_UPDATE = (("update",), "a torchmetrics metric (run every step)")
_OPTIMIZER_STEP = (("step",), "an optimizer (run every training step)")
_DASSL_STEP = (("forward_backward",), "a Dassl trainer (run every step)")
_BASICSR_STEP = (("feed_data", "optimize_parameters"), "a BasicSR model (run every step)")
# Base classes whose subclasses a framework calls every step or token, with the methods it calls.
_CALLBACK_BASES = {
    "transformers.StoppingCriteria": _TOKEN_CALLBACK,
    "transformers.generation.StoppingCriteria": _TOKEN_CALLBACK,
    "transformers.generation.stopping_criteria.StoppingCriteria": _TOKEN_CALLBACK,
    "transformers.LogitsProcessor": _TOKEN_CALLBACK,
    "transformers.generation.LogitsProcessor": _TOKEN_CALLBACK,
    "transformers.generation.logits_process.LogitsProcessor": _TOKEN_CALLBACK,
    "transformers.LogitsWarper": _TOKEN_CALLBACK,
    "transformers.generation.streamers.BaseStreamer": _STREAMER_PUT,
    "transformers.generation.BaseStreamer": _STREAMER_PUT,
    "transformers.TextStreamer": _STREAMER_PUT,
    "transformers.generation.streamers.TextStreamer": _STREAMER_PUT,
    "transformers.TextIteratorStreamer": _STREAMER_PUT,
    "transformers.generation.streamers.TextIteratorStreamer": _STREAMER_PUT,
    "torchmetrics.Metric": _METRIC_UPDATE,
    "torchmetrics.metric.Metric": _METRIC_UPDATE,
    "torch.optim.Optimizer": _OPTIMIZER_STEP,
    "torch.optim.optimizer.Optimizer": _OPTIMIZER_STEP,
    # Dassl (CoOp, CoCoOp, MaPLe and other prompt-learning repositories train with it)
    **{
        f"dassl.engine{module}.{base}": _DASSL_STEP for module in ("", ".trainer") for base in ("TrainerX", "TrainerXU")
    },
    # BasicSR's training loop (Real-ESRGAN, GFPGAN, CodeFormer): `model.feed_data(batch)`, then
    # `model.optimize_parameters(step)`, every iteration
    **{
        f"basicsr.models.{module}.{base}": _BASICSR_STEP
        for module, base in (
            ("base_model", "BaseModel"),
            ("sr_model", "SRModel"),
            ("srgan_model", "SRGANModel"),
            ("esrgan_model", "ESRGANModel"),
            ("video_base_model", "VideoBaseModel"),
        )
    },  # fmt: skip
}
# What a call stands for where the arguments are unknown (a method called through a table of them).
_UNKNOWN_ARGUMENTS = cst.Arg(cst.Name("arguments"), star="*")
# Flags that turn on debugging output: what they guard is off the step path.
_DTYPE_TEST = re.compile(rb"\.dtype\s*==")  # how every comparison `tested_as_bool` finds is written
_DEBUG_FLAG = re.compile(r"debug(?:ging)?(?:_[a-z]+)?|vis_debug|show_debug", re.IGNORECASE)
# Parameters that count steps where a framework or a loop calls a function every step.
_STEP_COUNTER = re.compile(r"n?i|it|iter|iteration|n_iter|step|global_step|batch_i|batch_idx|batch_index|batch_nb")
_EPOCHS = frozenset({"a training loop", "a loop over a DataLoader"})  # a function holding one runs an epoch
_CALL_DEPTH = 5  # how many calls away from a step loop a function still runs every step
_PARAMETER: list[cst.BaseExpression | None] = [None]  # what a scope binds a parameter bound nowhere else to
_FORWARD = "forward()"  # the step context of a module's forward, and of what it calls
_BACKWARD = "backward()"  # an autograd Function's, which autograd runs every step
TRACED = frozenset({_FORWARD, _BACKWARD})  # the step contexts that run traced, once per step


# What a CUDA check that guards only cuDNN's harmless switches costs the target: nothing.
SKIPS_CUDNN_ONLY = "skips only cuDNN switches, which do nothing there"
# ... and one that guards only an assertion that CUDA is there (OpenVoice's `if 'cuda' in device:
# assert torch.cuda.is_available()`)
SKIPS_CUDA_ASSERT = "skips only an assertion that CUDA is there, which it does not need"
# ... and one that guards only CUDA's own tuning or debugging switches, which the API table drops elsewhere
SKIPS_CUDA_TUNING = "skips only CUDA's own tuning or debugging switches, which it drops"
# What a CUDA check that keeps a CUDA-only library or CUDA's own facts from the target costs there.
LOSES_EXTRAS = (
    "loses the CUDA-only library or CUDA's own facts (memory, name, seed) it guards: a port gives it the "
    "target's equivalent or drops it"
)


@dataclass(frozen=True, eq=False)
class Guard:
    """A check that holds only on CUDA, and what runs only where it holds."""

    test: cst.CSTNode  # the check as written (findings inside it are the guard's own)
    protected: tuple[cst.CSTNode, ...]
    asserts: bool = False  # an `assert`: it stops the program where the check fails
    skips: bool = False  # it skips a test where the check fails
    tells_only: bool = False  # what it guards only logs or frees cached memory (as does its else, if any)
    # what every other device skips where what it guards is harmless to skip there (SKIPS_CUDNN_ONLY:
    # cuDNN's `benchmark` or `enabled` switches; SKIPS_CUDA_TUNING; SKIPS_CUDA_ASSERT); "" where it is not
    skips_only: str = ""
    # what it guards calls a CUDA-only library or reads CUDA's own facts (flash_attn, a device's
    # name or memory): right to keep from the target, where the code after it goes on portably
    guards_cuda_library: bool = False
    # it picks the program's device path (`if torch.cuda.is_available(): model.cuda()`), not part of
    # a condition (`is_available() and capability() >= (8, 0)`), a communication backend's need
    # (`if backend == "nccl":`) or one branch of a dispatch over devices (`elif device == "npu":`)
    picks_device: bool = True
    # an `and` chain led by CUDA's own API, no device compared (`torch.cuda.is_available() and
    # torch.cuda.is_bf16_supported()`): a port rewrites the whole test, so what follows the check
    # in it changes with it (llama-recipes' bf16 test over `torch.version.cuda`, `nccl.version()`)
    rewritten_whole: bool = False
    # the first check in the same top-level definition written the same way whose guarded code
    # shares a name with this one's (this one's own index where there is none): such checks
    # decide together, so a port rewrites all or none
    twin: int = -1


@dataclass(frozen=True)
class Placement:
    """Where a finding's node sits among the module's guards (indexes into `DeviceFlow.guards`)."""

    checks: frozenset[int] = frozenset()  # the guards whose check it is part of
    protected_by: frozenset[int] = frozenset()  # the guards that protect it (and not as their check)


NOWHERE = Placement()
DEVICE_TYPES = frozenset(target.device_type for target in target_data.all_targets().values()) | {"cuda"}
_CUDA_ONLY_TYPES = frozenset({"cuda"})
_BUILTIN_CALLS = frozenset(dir(builtins))
# the other accelerators by name, also as the prefix of an indexed device ("npu:")
_OTHER_ACCELERATORS = frozenset(spelled for kind in DEVICE_TYPES - {"cuda", "cpu"} for spelled in (kind, f"{kind}:"))


@dataclass(frozen=True)
class Reach:
    """A set of device types: `types` itself, or with `complement` every device type but them."""

    types: frozenset[str] = frozenset()
    complement: bool = True

    def includes(self, device_type: str) -> bool:
        return (device_type in self.types) != self.complement

    def __invert__(self) -> Reach:
        return Reach(self.types, not self.complement)

    def __and__(self, other: Reach) -> Reach:
        if self.complement and other.complement:
            return Reach(self.types | other.types)
        if self.complement or other.complement:
            finite, excluded = (other, self) if self.complement else (self, other)
            return Reach(finite.types - excluded.types, False)
        return Reach(self.types & other.types, False)

    def __or__(self, other: Reach) -> Reach:
        return ~(~self & ~other)


ANYWHERE = Reach()
ONLY_CUDA = Reach(_CUDA_ONLY_TYPES, False)


class Home(IntEnum):
    """Where a tensor expression demonstrably lives; combining two takes the weaker."""

    MOVED = -1  # sent somewhere other than the host: `.cuda()`, `.to(device)`, `device=device`
    UNKNOWN = 0
    DEFAULT = 1  # made on the default device: host memory unless the program sets another
    HOST = 2  # put in host memory explicitly: `.cpu()`, `.to("cpu")`, `device="cpu"`, `torch.from_numpy`


@dataclass
class _Site:
    """A call of one of the module's functions or classes, with the scope it was made in."""

    call: cst.Call
    scope: Scope
    ancestors: tuple[cst.CSTNode, ...]  # the nodes from the module down to the call
    skipped: int = 0  # leading parameters the call does not pass (`self`)
    receiver: cst.BaseExpression | None = None  # `self.decoder` in `self.decoder.update(...)`


@dataclass(frozen=True)
class _Class:
    """A top-level class of the module: its bases (by name), its methods, and its node."""

    bases: tuple[str, ...]
    methods: dict[str, cst.FunctionDef]
    node: cst.ClassDef


def is_self_attribute(node: cst.BaseExpression) -> bool:
    """`self.name`."""
    return type(node) is cst.Attribute and type(node.value) is cst.Name and node.value.value == "self"


def _is_self(node: cst.BaseExpression) -> bool:
    return type(node) is cst.Name and node.value == "self"


def _binds(target: cst.BaseExpression, name: str) -> bool:
    return type(target) is cst.Name and target.value == name


@dataclass
class DeviceFlow:
    """What the walk learnt about the module's device logic (see the module docstring)."""

    resolver: Resolver
    # (function or `Class.method`, position or keyword): the module's parameters that every
    # other module's step loop passes host data (see `Project.host_parameters`)
    host_parameters: frozenset[tuple[str, str]] = frozenset()
    # the module's place in the import system, for its relative imports (`from .base_model import
    # BaseModel`, a framework's class); None where unknown
    module: ModulePath | None = None
    ancestors: Sequence[cst.CSTNode] = ()
    guards: list[Guard] = field(default_factory=list)
    _protected: dict[int, int] = field(default_factory=dict)  # node id -> index of its guard
    _tests: dict[int, int] = field(default_factory=dict)  # check id -> index of its guard
    _twins: dict[tuple[int, str], list[int]] = field(default_factory=dict)  # (definition id, check) -> guards
    _methods: dict[int, str | None] = field(default_factory=dict)  # function id -> its class, if a method
    _calls: dict[str, list[_Site]] = field(default_factory=dict)  # by callee name
    # calls given one of the module's functions as an argument (a callback), by its name
    _callbacks: dict[str, list[_Site]] = field(default_factory=dict)
    # function id -> the calls it hands one of its parameters to (`train_step(forward_step_func, ...)`)
    _handed_on: dict[int, list[tuple[str, _Site]]] = field(default_factory=dict)
    _step_parameters: dict[int, dict[str, str]] = field(default_factory=dict)  # see `step_parameters`
    _spawned: set[str] = field(default_factory=set)
    _self_attributes: dict[str, list[tuple[cst.BaseExpression, Scope]]] = field(default_factory=dict)
    _updated_attributes: set[str] = field(default_factory=set)  # `self.sum += v`: a number may become a tensor
    _buffers: set[str] = field(default_factory=set)  # the attributes `self.register_buffer(...)` binds
    # loop id -> what step it runs, and how many functions and methods were known when judged
    _steps: dict[int, tuple[str | None, int]] = field(default_factory=dict)
    _loop_classes: dict[int, str | None] = field(default_factory=dict)  # loop id -> the class it is in
    _loop_scopes: dict[int, Scope] = field(default_factory=dict)  # loop id -> the scope its names resolve in
    _marking_class: str | None = None  # the class of the loop `_step_of` is judging
    # (function id, gates, whether periodic gates exempt) -> the step context
    _every_step: dict[tuple[int, tuple[str, ...], bool], str | None] = field(default_factory=dict)
    _drives: dict[int, bool] = field(default_factory=dict)  # function id -> whether it calls a step loop's function
    # (last ancestor's id, depth, functions known, whether periodic gates exempt) -> off the step path
    _off_path: dict[tuple[int, int, int, bool], bool] = field(default_factory=dict)
    _contexts: dict[tuple[int, int, int], str | None] = field(default_factory=dict)  # the same for `step_context`
    _loops: dict[int, list[tuple[cst.For | cst.While, Scope]]] = field(default_factory=dict)  # by function id
    # every `for` loop, with the scope it is in and the nodes from the module down to it
    _for_loops: list[tuple[cst.For, Scope, tuple[cst.CSTNode, ...]]] = field(default_factory=list)
    _returns: dict[int, list[tuple[cst.BaseExpression, Scope]]] = field(default_factory=dict)  # by function id
    _module_functions: dict[str, cst.FunctionDef] | None = None  # see `module_functions`
    _returns_ahead: dict[int, list[tuple[cst.BaseExpression, Scope]]] = field(
        default_factory=dict
    )  # the same, read early
    _owned: dict[tuple[int, tuple[type[cst.CSTNode], ...]], tuple[cst.CSTNode, ...]] = field(default_factory=dict)
    # function id -> the names its body calls methods on -> those methods (`methods_called_on`)
    _methods_on: dict[int, dict[str, set[str]]] = field(default_factory=dict)
    _owned_of_type: dict[tuple[int, type[cst.CSTNode]], tuple[cst.CSTNode, ...]] = field(
        default_factory=dict
    )  # `own_nodes`
    _generators: dict[int, bool] = field(default_factory=dict)  # function id -> whether it yields
    _bool_tested: dict[int, frozenset[str]] = field(default_factory=dict)  # see `tested_as_bool`
    _backpropagated: dict[int, frozenset[str]] = field(default_factory=dict)  # see `backpropagated`
    _writes_dtype_tests: bool | None = None  # whether the module's text has `.dtype ==` anywhere
    _held: dict[str, Home] = field(default_factory=dict)  # what a name held before the assignment being read
    _listed: set[str] = field(default_factory=set)  # the names of those that held Python data
    _bound: dict[int, frozenset[str]] = field(default_factory=dict)  # statement id -> the names it binds
    _functions: dict[str, cst.FunctionDef] = field(default_factory=dict)  # the functions seen so far, by name
    # (function id, depth) -> its marker, and how many functions and methods were known then
    _helpers: dict[tuple[int, int], tuple[str | None, int]] = field(default_factory=dict)
    _classes: dict[str, _Class] = field(default_factory=dict)  # the module's top-level classes seen so far
    _self_items: dict[str, list[tuple[cst.BaseExpression, Scope]]] = field(default_factory=dict)  # appended
    _titles: set[str] = field(default_factory=set)  # the names of those classes' methods seen so far
    # functions of the module patched in as a class's forward (`LlamaAttention.forward = forward`)
    _patched_forwards: set[str] = field(default_factory=set)
    _transforms_module: bool | None = None  # see `_only_transforms`
    # the names and positions of the parameters of functions the module never calls that the
    # rules asked about: what other modules' calls may answer (project.CALLERS_ASKED)
    callers_asked: set[str] = field(default_factory=set)
    elsewhere: bool = False  # `in_scope` is resolving names in a scope the walk is not in

    watched_names: tuple[str, ...] = ()  # the walker's participant protocol

    def visit_watched_name(self, node: cst.CSTNode, qualified_name: str) -> None:
        """Unused: the flow watches no names."""

    # --- guards ---------------------------------------------------------------------------------

    def _asserts_cuda(self, body: cst.BaseSuite) -> bool:
        """A block that only asserts that CUDA is there (`assert torch.cuda.is_available()`)."""
        statements = patterns.simple_statements(body)
        return bool(statements) and all(
            type(statement) is cst.Assert and self.cuda_check(statement.test) is True for statement in statements
        )

    def visit_If(self, node: cst.If) -> None:
        holds = self.cuda_check(node.test)
        if holds is None:
            return
        test = self._source(node.test)
        picks = not self._asks_nccl(node.test) and (not _dispatches_devices(node) or self._sets_cuda_device(node.body))
        if holds:
            other = node.orelse.body if type(node.orelse) is cst.Else else None
            tells = _tells_only(node.body, self.resolver) and (other is None or _tells_only(other, self.resolver))
            library = _uses_cuda_library(node.body, self.resolver)
            harmless = _tunes_cuda_only(node.body, self.resolver) or (
                SKIPS_CUDA_ASSERT if self._asserts_cuda(node.body) else ""
            )
            self._add(
                Guard(
                    test,
                    (node.body,),
                    tells_only=tells,
                    skips_only=harmless,
                    guards_cuda_library=library,
                    picks_device=picks,
                )
            )
        elif type(node.orelse) is cst.Else:  # `if device != "cuda": ... else: <CUDA path>`
            library = _uses_cuda_library(node.orelse.body, self.resolver)
            self._add(Guard(test, (node.orelse,), guards_cuda_library=library, picks_device=picks))
        elif node.orelse is not None:
            self._add(Guard(test, (node.orelse,), picks_device=picks))
        elif _exits(node.body, self.resolver):
            skips = _skips(node.body, self.resolver)
            self._add(Guard(test, self._following(node), skips=skips, picks_device=picks))

    def _sets_cuda_device(self, body: cst.BaseSuite) -> bool:
        """Whether a branch sets the device to CUDA (`device = "cuda"`, llm.c's choice between
        cuda, mps and cpu): in a chain that has no branch for the target, the target then takes
        the CPU's, and a port opens the CUDA branch with its check."""
        return any(
            type(statement) is cst.Assign
            and (patterns.string_value(self._made_device(statement.value)) or "").startswith("cuda")
            for statement in patterns.simple_statements(body)
        )

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        if len(self.ancestors) == 1:  # in the module itself
            bases = tuple(arg.value.value for arg in node.bases if type(arg.value) is cst.Name)
            self._classes[node.name.value] = _Class(bases, {}, node)
        self._skip_decorators(node)

    def _skip_decorators(self, node: cst.FunctionDef | cst.ClassDef) -> None:
        """A test or test class that runs only on CUDA: `@unittest.skipUnless(<cuda>, ...)`,
        `@unittest.skipIf(not <cuda>, ...)`, `@pytest.mark.skipif(not <cuda>, ...)`, or a
        test suite's own GPU gate (`@pytest.mark.gpu`, `@require_torch_gpu`,
        `@RunIf(min_cuda_gpus=1)`)."""
        for decorator in node.decorators:
            call = decorator.decorator
            if self._gates_on_gpu(call):
                self._add(Guard(call, (node.body,), skips=True))
                continue
            if type(call) is not cst.Call or not call.args or call.args[0].keyword is not None:
                continue
            names = self.resolver.qualified_names(call.func)
            wanted = True if names & _SKIP_UNLESS else False if names & _SKIP_IF else None
            test = call.args[0].value
            if wanted is not None and self.cuda_check(test) is wanted:
                self._add(Guard(self._source(test), (node.body,), skips=True))

    def _gates_on_gpu(self, mark: cst.BaseExpression) -> bool:
        """A test mark that runs a test only where an NVIDIA GPU is: `pytest.mark.gpu`, a gate
        named for it (`require_torch_gpu`, `requires_cuda`, `skip_if_no_cuda`), or one given a
        number of CUDA GPUs (Lightning's `RunIf(min_cuda_gpus=1)`)."""
        func = mark.func if type(mark) is cst.Call else mark
        if type(mark) is cst.Call and any(
            arg.keyword is not None and arg.keyword.value in _GPU_COUNTS and not _is_zero(arg.value)
            for arg in mark.args
        ):
            return True
        if type(func) not in (cst.Name, cst.Attribute):
            return False
        if self.resolver.qualified_names(func) & _GPU_MARKS:
            return True
        name = func.value if type(func) is cst.Name else func.attr.value
        return _GPU_GATE.fullmatch(name) is not None

    def visit_Call(self, node: cst.Call) -> None:
        marks = patterns.keyword(node, "marks")
        if marks is not None and self.resolver.qualified_names(node.func) & _PARAMS:
            listed = (
                [e.value for e in marks.value.elements] if type(marks.value) in (cst.List, cst.Tuple) else [marks.value]
            )
            if any(self._gates_on_gpu(mark) for mark in listed):  # `pytest.param(torch.device("cuda"), marks=[...])`
                self._add(Guard(marks.value, tuple(arg for arg in node.args if arg is not marks), skips=True))
        self._note_call(node)

    def visit_IfExp(self, node: cst.IfExp) -> None:
        holds = self.cuda_check(node.test)
        if holds is not None:
            self._add(Guard(self._source(node.test), (node.body if holds else node.orelse,)))

    def visit_BooleanOperation(self, node: cst.BooleanOperation) -> None:
        if type(node.operator) is cst.And and self.cuda_check(node.left):
            whole = all(self._asks_cuda(side) for side in _conjuncts(node.left) if self.cuda_check(side))
            self._add(Guard(self._source(node.left), (node.right,), picks_device=False, rewritten_whole=whole))

    def _asks_cuda(self, check: cst.BaseExpression, depth: int = 0) -> bool:
        """Whether a check that holds only on CUDA asks CUDA itself (`torch.cuda.is_available()`,
        `torch.version.cuda`, `torch.cuda.device_count() > 1`) rather than comparing a device,
        which a port changes so that the check fails on the target as written."""
        if type(check) is cst.Name and depth == 0:
            bound = self._bound_value(check)
            return bound is not None and self._asks_cuda(bound, depth + 1)
        asked = check.left if type(check) is cst.Comparison else check
        func = asked.func if type(asked) is cst.Call else asked
        return type(func) in (cst.Name, cst.Attribute) and bool(
            self.resolver.qualified_names(func) & (_AVAILABILITY | _BUILD_VERSIONS | {_COUNT})
        )

    def visit_Assert(self, node: cst.Assert) -> None:
        if self.cuda_check(node.test):
            line = self.ancestors[-1] if self.ancestors else None
            following = self._following(line) if line is not None else ()
            self._add(Guard(self._source(node.test), following, asserts=True))

    def _source(self, test: cst.BaseExpression) -> cst.CSTNode:
        """Where a check is written: the test itself, or for `if use_cuda:` the value the name
        is bound to (a fix of the check edits it there)."""
        if type(test) is cst.UnaryOperation:
            return self._source(test.expression) if type(test.expression) is cst.Name else test
        if type(test) is cst.Name:
            bound = self._bound_value(test)
            return bound if bound is not None else test
        return test

    def _bound_value(self, name: cst.Name) -> cst.BaseExpression | None:
        """The one value a name holds where it is read: the value `=` binds it to, or that of
        a parameter rebound first thing (not where it is read in that rebinding itself, as in
        `log_timings = log_timings and torch.cuda.is_available()`: that is the parameter)."""
        bound = self.resolver.assigned_value(name)
        if bound is None:
            bound = self.resolver.rebound_parameter(name)
            if bound is not None and any(each is name for each in descendants(bound)):
                return None
        return bound

    def _add(self, guard: Guard) -> None:
        index = len(self.guards)
        guard = replace(guard, twin=self._twin(guard, index))
        self.guards.append(guard)
        self._tests.setdefault(id(guard.test), index)
        for node in guard.protected:
            self._protected.setdefault(id(node), index)

    def _twin(self, guard: Guard, index: int) -> int:
        """The first of the guards before `guard` in its top-level definition whose check is
        written the same way and whose guarded code binds a name the other's reads (a log
        format chosen under one `if torch.cuda.is_available():` and filled under another):
        the two decide together. `index` (its own) where there is none."""
        scope = next((a for a in self.ancestors if type(a) in (cst.FunctionDef, cst.ClassDef)), None)
        test = guard.test.expression if type(guard.test) is cst.UnaryOperation else guard.test
        alike = self._twins.setdefault((id(scope), _EMPTY_MODULE.code_for_node(test)), [])
        alike.append(index)
        binds = _guarded_bindings(guard)
        for other in (self.guards[each] for each in alike[:-1]):
            if _reads_any(guard, _guarded_bindings(other)) or _reads_any(other, binds):
                return other.twin
        return index

    def placement(self, chain: Sequence[cst.CSTNode], node: cst.CSTNode) -> Placement:
        """Which guards' checks `node` is part of, and which guards protect it (by index into
        `guards`), given the nodes from the module down to it: what the fixer needs to keep a
        check and what it protects together. After the walk, when every guard is known."""
        checks, protected = set(), set()
        for item in (*chain, node):
            key = id(item)
            if key in self._tests:
                checks.add(self._tests[key])
            if key in self._protected:
                protected.add(self._protected[key])
        if not checks and not protected:
            return NOWHERE
        return Placement(frozenset(checks), frozenset(protected - checks))

    def only_under_cuda(self, placement: Placement) -> bool:
        """Whether a CUDA check keeps code at `placement` on CUDA, with another path elsewhere:
        not an `assert`, which stops the program there, so that a port removes it and the
        code after it runs on the target."""
        return any(not self.guards[index].asserts for index in placement.protected_by)

    def rewritten_with_check(self, placement: Placement) -> bool:
        """Whether code at `placement` follows a CUDA check in a test that a port rewrites whole
        (`Guard.rewritten_whole`)."""
        return any(self.guards[index].rewritten_whole for index in placement.protected_by)

    def on_a_device_path(self, placement: Placement) -> bool:
        """Whether a CUDA check that keeps code at `placement` on CUDA is one a port opens to
        the target or drops, and what it keeps with it: the program's device path (`if
        torch.cuda.is_available(): model.cuda()`), and also what the target silently loses
        where it is skipped (a memory report, a seeding, a CUDA-only library's fast path).
        Not a test's gate nor an assert, which stop rather than skip, nor a check that keeps
        only what the target has no use for (`Guard.skips_only`)."""
        if placement.checks:
            return False  # part of a check (`is_available() and memory_allocated() > 0`): the check is the finding
        return any(
            guard.picks_device and not (guard.asserts or guard.skips or guard.skips_only)
            for guard in (self.guards[index] for index in placement.protected_by)
        )

    def _following(self, statement: cst.CSTNode | None) -> tuple[cst.CSTNode, ...]:
        """The statements after `statement` in its block: what an early exit protects."""
        block = self.ancestors[-1] if statement is not None and statement is not self.ancestors[-1] else None
        if type(statement) is cst.SimpleStatementLine and len(self.ancestors) > 1:
            block = self.ancestors[-2]
        if type(block) not in (cst.IndentedBlock, cst.Module):
            return ()
        body = list(block.body)
        index = next((i for i, item in enumerate(body) if item is statement), None)
        return tuple(body[index + 1 :]) if index is not None else ()

    def in_check(self, ancestors: Sequence[cst.CSTNode], node: cst.CSTNode) -> Guard | None:
        """The CUDA check `node` is part of, if any."""
        for item in (*ancestors, node):
            index = self._tests.get(id(item))
            if index is not None:
                return self.guards[index]
        return None

    # --- device branches -------------------------------------------------------------------------

    def reach(self, chain: Sequence[cst.CSTNode], node: cst.CSTNode) -> Reach:
        """The device types `node` can run on, given the nodes from the module down to it: the
        `if`/`elif`/`else` branches, conditional expressions and `and`/`or` operands it sits in,
        and the CUDA guards that protect it (early exits and asserts too). Asked during the walk,
        it knows every guard around the node being visited."""
        reach = ONLY_CUDA if self.placement(chain, node).protected_by else ANYWHERE
        path = (*chain, node)
        for parent, child in zip(path, path[1:]):
            if type(parent) in (cst.If, cst.IfExp) and (child is parent.body or child is parent.orelse):
                holds, fails = self.condition(parent.test)
                reach &= holds if child is parent.body else fails
            elif type(parent) is cst.BooleanOperation and child is parent.right:
                holds, fails = self.condition(parent.left)
                reach &= holds if type(parent.operator) is cst.And else fails
        return reach

    def condition(self, test: cst.BaseExpression, depth: int = 0) -> tuple[Reach, Reach]:
        """Where the device may be when `test` holds, and when it fails (ANYWHERE for what a
        test does not tell)."""
        if type(test) is cst.UnaryOperation and type(test.operator) is cst.Not:
            holds, fails = self.condition(test.expression, depth)
            return fails, holds
        if type(test) is cst.BooleanOperation:
            (left_holds, left_fails), (right_holds, right_fails) = (
                self.condition(test.left, depth),
                self.condition(test.right, depth),
            )
            if type(test.operator) is cst.And:
                return left_holds & right_holds, left_fails | right_fails
            return left_holds | right_holds, left_fails & right_fails
        if type(test) is cst.Name and depth == 0:
            bound = self.resolver.assigned_value(test)
            return self.condition(bound, depth + 1) if bound is not None else (ANYWHERE, ANYWHERE)
        named = self._named_types(test)
        if named is None:
            holds = self.cuda_check(test, depth)
            named = None if holds is None else (ONLY_CUDA if holds else ~ONLY_CUDA)
        return (named, ~named) if named is not None else (ANYWHERE, ANYWHERE)

    def _named_types(self, test: cst.BaseExpression) -> Reach | None:
        """The device types a comparison with device type literals (`device.type == "mps"`,
        `"xla" in str(device)`, `device.type not in ("cpu", "mps")`) or a backend's availability
        call (`torch.backends.mps.is_available()`) holds for, exactly."""
        if type(test) is cst.Call:
            names = self.resolver.qualified_names(test.func)
            found = {name.split(".")[-2] for name in names if _AVAILABLE_CALL.fullmatch(name)}
            return Reach(frozenset(found), False) if found and found <= DEVICE_TYPES else None
        if type(test) is not cst.Comparison or len(test.comparisons) != 1:
            return None
        link = test.comparisons[0]
        left, right, operator = test.left, link.comparator, link.operator
        types = None
        if type(operator) in (cst.Equal, cst.NotEqual):
            if patterns.is_device_like(left):
                types = _device_types(self.device_literal(right))
            elif patterns.is_device_like(right):
                types = _device_types(self.device_literal(left))
        elif type(operator) in (cst.In, cst.NotIn):
            if patterns.is_device_like(right):
                types = _device_types(left)  # "mps" in str(device)
            elif patterns.is_device_like(left) and type(right) in (cst.Tuple, cst.List, cst.Set):
                found = [_device_types(element.value) for element in right.elements]
                types = frozenset().union(*found) if found and None not in found else None
        if types is None:
            return None
        reach = Reach(types, False)
        return reach if type(operator) in (cst.Equal, cst.In) else ~reach

    def device_literal(self, node: cst.BaseExpression) -> cst.BaseExpression:
        """The literal a device constant names: `"cpu"` for `_CPU_DEVICE` bound once to
        `torch.device("cpu")` (dinov2's), or for `torch.device("cpu")` itself; else the node."""
        if type(node) is cst.Name:
            node = self.resolver.assigned_value(node) or node
        return self._made_device(node)

    def _made_device(self, node: cst.BaseExpression) -> cst.BaseExpression:
        """What `torch.device(...)` is given first; else the node."""
        if type(node) is cst.Call and node.args and "torch.device" in self.resolver.qualified_names(node.func):
            return node.args[0].value
        return node

    def cuda_check(self, test: cst.BaseExpression, depth: int = 0) -> bool | None:
        """True for a check that holds only on CUDA, False for one that fails only on CUDA
        (`not torch.cuda.is_available()`), None for anything else."""
        if type(test) is cst.UnaryOperation and type(test.operator) is cst.Not:
            inner = self.cuda_check(test.expression, depth)
            return None if inner is None else not inner
        if type(test) is cst.BooleanOperation:
            sides = [self.cuda_check(test.left, depth), self.cuda_check(test.right, depth)]
            # `a and <cuda>` holds only where its CUDA side does, `<cuda> or <cuda>` too; `not <cuda>
            # or not flash` fails only where its CUDA side does (denoising-diffusion's early `return`
            # ahead of `torch.cuda.get_device_properties`), `not <cuda> and not <cuda>` too
            holds_only, fails_only = (all, any) if type(test.operator) is cst.Or else (any, all)
            if holds_only(side is True for side in sides):
                return True
            return False if fails_only(side is False for side in sides) else None
        if type(test) is cst.Call:
            func = test.func
            if type(func) is cst.Attribute and func.attr.value == "startswith":
                return True if _is_cuda_prefix(test) and patterns.is_device_like(func.value) else None
            if type(func) is cst.Attribute and func.attr.value not in _CHECK_NAMES:
                return None  # resolve only what could be one (or a name: `from torch.cuda import ...`)
            names = self.resolver.qualified_names(func)
            return True if names & _AVAILABILITY or _COUNT in names else None
        if type(test) is cst.Attribute and test.attr.value == "is_cuda":
            return True
        if type(test) is cst.Attribute and test.attr.value in ("cuda", "hip"):
            return True if self.resolver.qualified_names(test) & _BUILD_VERSIONS else None
        if type(test) is cst.Comparison:
            return self._compared(test)
        if type(test) is cst.Name and depth == 0 and test.value not in ("True", "False", "None"):
            bound = self._bound_value(test)
            if bound is not None and type(bound) is not cst.Name:
                return self.cuda_check(bound, depth + 1)
        return None

    def _compared(self, test: cst.Comparison) -> bool | None:
        if len(test.comparisons) != 1:
            return None
        link = test.comparisons[0]
        left, right, operator = test.left, link.comparator, link.operator
        if type(operator) in (cst.Is, cst.IsNot) and type(right) is cst.Name and right.value == "None":
            built = self.resolver.qualified_names(left) & _BUILD_VERSIONS if type(left) is cst.Attribute else None
            return type(operator) is cst.IsNot if built else None  # `torch.version.hip is not None`
        func = left.func if type(left) is cst.Call else None
        counts = func is not None and (type(func) is not cst.Attribute or func.attr.value == "device_count")
        if func is not None and counts and _COUNT in self.resolver.qualified_names(func):
            bound = right.evaluated_value if type(right) is cst.Integer else None
            if isinstance(bound, int):
                if type(operator) is cst.GreaterThan and bound >= 0:
                    return True
                if type(operator) is cst.GreaterThanEqual and bound >= 1:
                    return True
                if type(operator) is cst.Equal and bound == 0:
                    return False
            return None
        if type(operator) in (cst.Equal, cst.In):
            holds = True
        elif type(operator) in (cst.NotEqual, cst.NotIn):
            holds = False
        else:
            return None
        if type(operator) in (cst.Equal, cst.NotEqual) and (self._nccl(left, right) or self._nccl(right, left)):
            return holds  # `dist.get_backend() == "nccl"`: NCCL runs only between CUDA devices
        if type(operator) in (cst.Equal, cst.NotEqual) and (
            _names_cuda_type(left, right) or _names_cuda_type(right, left)
        ):
            return holds  # `x.type() == "torch.cuda.HalfTensor"`
        device_like = patterns.is_device_like
        if type(operator) in (cst.In, cst.NotIn) and _only_cuda(right) and device_like(left):
            return holds
        if type(operator) in (cst.In, cst.NotIn) and _is_cuda(left) and device_like(right):
            return holds  # "cuda" in device
        if type(operator) in (cst.Equal, cst.NotEqual):
            if (_is_cuda(right) and device_like(left)) or (_is_cuda(left) and device_like(right)):
                return holds
        return None

    def _asks_nccl(self, test: cst.BaseExpression) -> bool:
        """A test that compares the communication backend with NCCL (alone or among others)."""
        return any(
            type(node) is cst.Comparison
            and len(node.comparisons) == 1
            and (
                self._nccl(node.left, node.comparisons[0].comparator)
                or self._nccl(node.comparisons[0].comparator, node.left)
            )
            for node in (test, *descendants(test))
        )

    def _nccl(self, backend: cst.BaseExpression, name: cst.BaseExpression) -> bool:
        """`dist.get_backend()` compared with `"nccl"` or `dist.Backend.NCCL`."""
        if type(backend) is not cst.Call or not self.resolver.qualified_names(backend.func) & _GET_BACKEND:
            return False
        return patterns.string_value(name) == "nccl" or bool(self.resolver.qualified_names(name) & _NCCL_NAMES)

    # --- host tensors ----------------------------------------------------------------------------

    def home(self, node: cst.BaseExpression) -> Home:
        """Where the tensor `node` evaluates to lives, asked where the walk is: through names
        (each tensor a name is bound to, `boxes = torch.as_tensor(boxes); boxes = boxes[keep]`),
        subscripts, comparisons and arithmetic with numbers, tensor methods that keep the device,
        and torch functions of such tensors."""
        home = self._home(node, 0, frozenset())
        return Home.UNKNOWN if home is None else home

    def _home(self, node: cst.BaseExpression, depth: int, seen: frozenset[str]) -> Home | None:
        """`home`, or None where `node` is only the value of a name being looked through
        (`seen`): `x = x[keep]` says no more than the name's other bindings."""
        if depth > _HOME_DEPTH:
            return Home.UNKNOWN
        if type(node) is cst.Name:
            if node.value in self._held:
                return self._held[node.value]
            return None if node.value in seen else self._name_home(node, depth, seen)
        if type(node) in _NUMBERS:
            return Home.HOST  # a number: no device of its own
        parts: Sequence[cst.BaseExpression] = ()
        if type(node) in (cst.List, cst.Tuple, cst.Dict) and node.elements:
            parts = [element.value for element in node.elements]  # a dict's values, not its keys
        elif isinstance(node, cst.BaseComp):
            return self._comprehension_home(node, depth, seen)
        elif type(node) is cst.Subscript:
            parts = [node.value]
        elif type(node) is cst.UnaryOperation:
            parts = [node.expression]
        elif type(node) is cst.BinaryOperation:
            parts = [node.left, node.right]
        elif type(node) is cst.Comparison:
            parts = [node.left, *(link.comparator for link in node.comparisons)]
        elif type(node) is cst.Call:
            return self._call_home(node, depth, seen)
        elif is_self_attribute(node) or (
            type(node) is cst.Attribute and type(node.value) is cst.Name and self._instances(node.value, ())
        ):  # `self.tokens`; `shard.tokens` where `shard = Shard(tokens)`, a class of the module
            return self._attribute_home(node, depth, seen)
        elif type(node) is cst.Attribute and self._home(node.value, depth + 1, seen) is Home.HOST:
            return Home.HOST  # `encoded.input_ids` of a tokenizer's output
        return _weakest(self._home(part, depth + 1, seen) for part in parts) if parts else Home.UNKNOWN

    def _comprehension_home(self, node: cst.BaseComp, depth: int, seen: frozenset[str]) -> Home | None:
        """The home of what a comprehension makes, that of its items (a dict's values), each
        name its `for`s bind held where the items it takes lie (torchvision's `[{k:
        v.to(cpu_device) for k, v in t.items()} for t in outputs]`: in host memory)."""
        saved = dict(self._held)
        try:
            inner: cst.CompFor | None = node.for_in
            while inner is not None:
                for name in target_names(inner.target):
                    source = item_source(inner.target, inner.iter, name)
                    home = None if source is None else self._home(source, depth + 1, seen)
                    self._held[name] = Home.UNKNOWN if home is None else home
                inner = inner.inner_for_in
            item = node.value if type(node) is cst.DictComp else node.elt  # type: ignore[attr-defined]
            return self._home(item, depth + 1, seen)
        finally:
            self._held.clear()
            self._held.update(saved)

    def _attribute_home(self, node: cst.Attribute, depth: int, seen: frozenset[str]) -> Home | None:
        """The weakest home of what the module's methods assign to `self.<attribute>`
        (airbench's `self.images = data["images"]`, loaded onto the device); a number it starts
        as says nothing where a method adds to it in place (an AverageMeter's `self.sum +=
        val`)."""
        key = f"self.{node.attr.value}"
        if key in seen:
            return None
        if node.attr.value in self._buffers:
            return Home.UNKNOWN  # a module's buffers go where the module goes
        values = self._self_attributes.get(node.attr.value, [])
        if node.attr.value in self._updated_attributes:  # `self.sum = 0`, then `self.sum += loss`: not a number
            values = [(value, scope) for value, scope in values if type(value) not in _NUMBERS]
        homes = [
            self.in_scope(scope, partial(self._home, value, depth + 1, seen | {key}))
            for value, scope in values
            if not _python_data(value) and not self._makes_parameter(value)
        ]
        if len(homes) < len([value for value in values if not _python_data(value)]):
            return Home.UNKNOWN  # a parameter goes where its module goes
        return _weakest(homes) if homes else Home.UNKNOWN

    def _name_home(self, node: cst.Name, depth: int, seen: frozenset[str]) -> Home | None:
        """The weakest home of the tensors a name is bound to; what else it is bound to (a list
        of the data, None) cannot be indexed as a tensor. A name of the statement the walk is
        in is first asked of the statements before it, in its block, then in each block around
        it up to the function's body (`_held_before`)."""
        if not seen and self.resolver.bindings(node) > 1:
            for body, position in self._blocks_around():
                held = self._held_before(node.value, body, position, depth)
                if held is not None:
                    return held[0]
        values = self.resolver.assigned_values(node)  # none where `+=` may add a device tensor
        values = [value for value in values if not _python_data(value)] or values
        if not values:
            found = self._iterated_home(node, depth, seen)
            if found is None:
                found = self._passed_home(node, depth, seen)
            if found is None:
                found = self._unpacked_home(node, depth, seen)
            return Home.UNKNOWN if found is None else found
        home = _weakest(self._home(value, depth + 1, seen | {node.value}) for value in values)
        return Home.UNKNOWN if home is None and not seen else home

    def _unpacked_home(self, node: cst.Name, depth: int, seen: frozenset[str]) -> Home | None:
        """For a name bound only by unpacking what calls return (`xmin, ymin, xmax, ymax =
        boxes.unbind(1)`): the weakest home of those results."""
        unpacking = self.resolver.values_and_unpacking(node)
        if unpacking is None or unpacking[0]:
            return None
        seen = seen | {node.value}
        return _weakest(self._home(call, depth + 1, seen) for call, _ in unpacking[1])

    def _passed_home(self, node: cst.Name, depth: int, seen: frozenset[str]) -> Home | None:
        """For a parameter of the module's function (nothing else binds it): the weakest home
        of what the module's calls pass for it (modded-nanogpt's `Shard(tokens)`, where
        `tokens` is read from a file into host memory); None where a call passes nothing."""
        function = self.resolver.parameter_of(node)
        passed = self._passed_at(function, node.value) if function is not None else None
        if passed == [] and self._given_host_data(function, node.value):  # type: ignore[arg-type]
            return Home.HOST
        if not passed:
            return None
        key = f"{id(function)}:{node.value}"
        if key in seen:
            return None
        seen = across_scopes(seen) | {key}
        return _weakest(self._at_site(site, partial(self._home, arg, depth + 1, seen)) for arg, site in passed)

    def method_class(self, function: cst.FunctionDef) -> str | None:
        """The name of the class the function is a method of, if it is one."""
        return self._methods.get(id(function))

    def _given_host_data(self, function: cst.FunctionDef, name: str) -> bool:
        """Whether the step loops of other modules pass host data for a parameter of a function
        the module never calls itself (torchvision's `CocoEvaluator.update(res)`, `res` made
        of outputs copied to the CPU)."""
        owner = self._methods.get(id(function))
        local = f"{owner}.{function.name.value}" if owner else function.name.value
        position = _parameter_position(function, name, 1 if owner else 0)
        return (local, name) in self.host_parameters or (local, str(position)) in self.host_parameters

    def _returned_home(self, call: cst.Call, depth: int, seen: frozenset[str]) -> Home | None:
        """For a call of the module's function: the weakest home of what it returns
        (`tokens = _load_data_shard(file)`, which returns a tensor it made in host memory)."""
        returned = self.returned_values(call)
        key = f"return:{patterns.dotted(call.func)}"
        if not returned or key in seen:
            return None
        seen = across_scopes(seen) | {key}
        return _weakest(self.in_scope(scope, partial(self._home, value, depth + 1, seen)) for value, scope in returned)

    def returns_of(self, function: cst.FunctionDef) -> list[tuple[cst.BaseExpression, Scope]]:
        """What a function the walk has passed returns, each with the scope of its `return`."""
        return self._returns.get(id(function), [])

    def returned_values(self, call: cst.Call) -> list[tuple[cst.BaseExpression, Scope]]:
        """What the module's function called by name returns, each with the scope of its
        `return` (none for other calls); also of a module-level function the walk has yet to
        reach (k-diffusion's `append_zero`, defined after the samplers that use it), of a
        method of the caller's class called through `self.` (`sigmas = self.sample_schedule(n)`),
        and the `forward` of a module of this file held by `self.` (Tacotron's `self.decoder(...)`,
        whose outputs include the stop tokens its decode loop tests)."""
        if type(call.func) is cst.Attribute and _is_self(call.func.value):
            method = self._sibling_method(call.func.attr.value)
            if method is not None:
                return self._returns_ahead_of(method)
            kinds = {self._defining(kind, "forward") for kind in self._instances(call.func, ())}
            if len(kinds) != 1 or None in kinds:
                return []
            return self._returns_ahead_of(self._classes[kinds.pop()].methods["forward"])  # type: ignore[index]
        if type(call.func) is not cst.Name:
            return []
        function = self._functions.get(call.func.value)
        if function is not None:
            return self.returns_of(function)
        later = self.module_functions().get(call.func.value)
        if later is None or self.resolver.scope_of(call.func.value) is not self.resolver.module:
            return []
        return self._returns_ahead_of(later)

    def returned_per_class(self, call: cst.Call) -> list[list[tuple[cst.BaseExpression, Scope]]]:
        """What a method called on an instance of the module's classes returns, for each class
        whose method it may run (whisper's `self.decoder.update(...)`, where `self.decoder` is a
        `GreedyDecoder` or a `BeamSearchDecoder`); none for calls on `self` (see
        `returned_values`)."""
        func = call.func
        if type(func) is not cst.Attribute or _is_self(func.value) or not self._may_hold_instance(func.value):
            return []
        owners = self._owners(func.value, func.attr.value, ())
        return [self._returns_ahead_of(self._classes[owner].methods[func.attr.value]) for owner in sorted(owners)]

    def _returns_ahead_of(self, function: cst.FunctionDef) -> list[tuple[cst.BaseExpression, Scope]]:
        """What a function returns, read once, before the walk gets there if need be."""
        if id(function) in self._returns:
            return self._returns[id(function)]
        if id(function) not in self._returns_ahead:
            scope = function_scope(function, self.resolver.module)
            returns = [node for node in self._own(function.body, NESTED_SCOPES) if type(node) is cst.Return]
            blocks = [function.body, *self.own_nodes(function.body, cst.IndentedBlock)]
            places = {id(part): (block, line) for block in blocks for line in block.body for part in _parts(line)}
            self._returns_ahead[id(function)] = [
                (self._returned(each.value, *places.get(id(each), (None, each))), scope)
                for each in returns
                if each.value is not None
            ]
        return self._returns_ahead[id(function)]

    def _sibling_method(self, title: str) -> cst.FunctionDef | None:
        """The method `title` of the class whose method the walk (or a scope asked in) is in."""
        scope: Scope | None = self.resolver.scope
        while scope is not None and scope.kind != "class":
            scope = scope.parent
        owner = scope.owner if scope is not None else None
        if type(owner) is not cst.ClassDef:
            return None
        body = owner.body.body if isinstance(owner.body, cst.IndentedBlock) else ()
        return next((each for each in body if type(each) is cst.FunctionDef and each.name.value == title), None)

    def methods_called_on(self, function: cst.FunctionDef, name: str) -> frozenset[str]:
        """The methods the function's own body calls on a name (`length.unsqueeze(1)`)."""
        calls = self._methods_on.get(id(function))
        if calls is None:
            calls = self._methods_on[id(function)] = {}
            for node in self._own(function.body, NESTED_SCOPES):
                if type(node) is cst.Call and type(node.func) is cst.Attribute and type(node.func.value) is cst.Name:
                    calls.setdefault(node.func.value.value, set()).add(node.func.attr.value)
        return frozenset(calls.get(name, ()))

    def module_functions(self) -> dict[str, cst.FunctionDef]:
        """The module-level functions, by name (the last definition of each)."""
        if self._module_functions is None:
            body = self.resolver.module_node.body
            self._module_functions = {each.name.value: each for each in body if type(each) is cst.FunctionDef}
        return self._module_functions

    def in_data_worker(self, ancestors: Sequence[cst.CSTNode]) -> bool:
        """Inside what DataLoader workers (or the host's data pipeline) run: a dataset's methods
        (in a class derived from a `...Dataset` or a torchvision dataset: `__getitem__`, the
        helpers it calls, `collater`, `ordered_indices`), a collate function or collator (named
        like one), or a data transform: a class derived from a torchvision transform, or any
        `nn.Module` of a module of transforms (`_only_transforms`: torchvision's detection and
        classification references, `RandomIoUCrop`, `RandomMixup`)."""
        for node in ancestors:
            if type(node) in (cst.FunctionDef, cst.ClassDef) and COLLATE_NAME.search(node.name.value):
                return True
            if type(node) is not cst.ClassDef:
                continue
            bases = [self.resolver.qualified_names(base.value) for base in node.bases]
            if any(_is_dataset(base.value, self.resolver) for base in node.bases):
                return True
            if any(name.startswith(_TRANSFORMS) for names in bases for name in names):
                return True
            if any(_MODULE in names for names in bases) and ancestors and self._only_transforms(ancestors[0]):
                return True
        return False

    def _only_transforms(self, module: cst.CSTNode) -> bool:
        """Whether the module uses torchvision's transforms and makes no layer (no `torch.nn`
        class but containers and `Identity`, no `nn.Parameter`, no model of torchvision, timm,
        Transformers or Diffusers) and no optimizer or DataLoader (a trainer's module, such as
        muse-maskgit's, which builds its transforms for the dataset): its `nn.Module`s transform
        data samples, as torchvision's own transforms do, in the data pipeline."""
        if self._transforms_module is None:
            uses = made = False
            imported = (target for targets in self.resolver.module.imports.values() for target in targets)
            if not any(target.startswith(_TRANSFORMS) or _TRANSFORMS.startswith(target + ".") for target in imported):
                self._transforms_module = False  # nothing it imports names a transform: no walk
                return False
            for node in descendants(module):
                if type(node) in (cst.Name, cst.Attribute):
                    names = self.resolver.module_level_names(node)
                    uses = uses or any(name.startswith(_TRANSFORMS) for name in names)
                elif type(node) is cst.Call:
                    names = self.resolver.module_level_names(node.func)
                    made = made or any(
                        (name.startswith("torch.nn.") and name[9:10].isupper() and name not in _CONTAINERS)
                        or name.startswith(_MODEL_LIBRARIES + _TRAINING_MAKERS)
                        for name in names
                    )
            self._transforms_module = uses and not made
        return self._transforms_module

    def _iterated_home(self, node: cst.Name, depth: int, seen: frozenset[str]) -> Home | None:
        """Where the items lie that a loop around the walk binds to the name, where nothing else
        binds it: those of a tensor where it lies (`for row in host_boxes:`, also paired by
        `zip` or `enumerate`), and the batches of a loader in host memory where the loop moves
        some of them to the device itself (`image = image.to(device)`: not `image_id`)."""
        loop = self._binding_loop(node)
        if loop is None:
            return None
        if type(loop) is cst.For and self._iterates_loader(loop.iter) and self._moves_items(loop):
            return Home.HOST
        source = item_source(loop.target, loop.iter, node.value)
        return None if source is None else self._home(source, depth + 1, seen | {node.value})

    def iterated(self, node: cst.Name) -> cst.BaseExpression | None:
        """What a loop around the walk takes the items it binds to the name from, where nothing
        else binds it: `t` for `x` in `for x in t:` and in `for i, (x, y) in enumerate(zip(t, u)):`."""
        loop = self._binding_loop(node)
        return None if loop is None else _paired(loop.target, loop.iter, node.value)

    def _binding_loop(self, node: cst.Name) -> cst.For | cst.CompFor | None:
        """The loop around the walk that binds the name (also a comprehension's, from its `if`:
        `[i for i, w in enumerate(words) if w != end]`), where nothing else does, or where no
        statement of the loop's body binds it again before the walk reads it (BLIP's `ques_id =
        int(ques_id.item())`, and another loop over `ques_id` elsewhere: what it reads is still
        this loop's item)."""
        if self.elsewhere:
            return None
        once = self.resolver.bindings(node) == 1
        path = (*self.ancestors, node)
        for index in range(len(path) - 2, -1, -1):
            ancestor = path[index]
            if type(ancestor) in NESTED_SCOPES:
                return None
            if type(ancestor) is cst.CompFor and node.value in target_names(ancestor.target):
                return ancestor if once else None
            if type(ancestor) is cst.For and node.value in target_names(ancestor.target):
                return ancestor if once or self._read_before_rebinding(ancestor, path[index:], node.value) else None
        return None

    def _read_before_rebinding(self, loop: cst.For, path: Sequence[cst.CSTNode], name: str) -> bool:
        """Whether `path` (from `loop` down) reads `name` in a statement of the loop's body
        that no earlier statement of the body rebinds it before: in a line that binds it not
        at all, or only in the value of its assignment (`ques_id = int(ques_id.item())`)."""
        if len(path) < 4 or path[1] is not loop.body or type(path[2]) is not cst.SimpleStatementLine:
            return False
        line = path[2]
        if name in self.names_bound_in(line):
            assign, read = path[3], path[-1]
            if type(assign) is not cst.Assign or len(path) < 5:
                return False
            in_value = path[4] is assign.value or any(node is read for node in descendants(assign.value))
            if not in_value:  # the walk may stop at the statement and ask of a name in it
                return False
        statements = loop.body.body if type(loop.body) is cst.IndentedBlock else ()
        earlier = statements[: next((i for i, each in enumerate(statements) if each is line), 0)]
        return not any(name in self.names_bound_in(statement) for statement in earlier)

    def _moves_items(self, loop: cst.For) -> bool:
        """Whether the loop's body moves one of the items it binds to the device (`x = x.to(device)`,
        also `x, y = x.cuda(), y.cuda()`, and under an `if` of the body: PointNet's
        `if not args.use_cpu:`)."""
        names = target_names(loop.target)
        for statement in _body_statements(loop.body):
            for name in names:
                value = _item_assignment(statement, name)
                func = value.func if type(value) is cst.Call else None
                if type(func) is cst.Attribute and func.attr.value in ("to", "cuda") and _binds(func.value, name):
                    return True
        return False

    def _blocks_around(self) -> Iterator[tuple[Sequence[cst.BaseStatement], int]]:
        """The blocks the walk is in, from the innermost out to the body of the function it is
        in (none outside a function), each with the position of the statement the walk is in."""
        ancestors = self.ancestors
        function = next(
            (index for index in range(len(ancestors) - 1, -1, -1) if type(ancestors[index]) in NESTED_SCOPES), None
        )
        if function is None or type(ancestors[function]) is not cst.FunctionDef:
            return
        for index in range(len(ancestors) - 2, function, -1):
            block, statement = ancestors[index], ancestors[index + 1]
            if type(block) is cst.IndentedBlock:
                position = next((i for i, each in enumerate(block.body) if each is statement), None)
                if position is not None:
                    yield block.body, position

    def _held_before(
        self, name: str, body: Sequence[cst.BaseStatement], position: int, depth: int
    ) -> tuple[Home, bool] | None:
        """Where `name` lives when `body[position]` runs, and whether it then holds Python data
        (a list to make a tensor of): from the last top-level `name = ...` before it, which
        overwrites whatever came before (a parameter too), its own reads of the name resolved
        by what came before. None where no such assignment comes first (the name comes from
        outside), or where a statement since (or this one) binds it in a branch or a loop."""
        if depth > _DEPTH:
            return Home.UNKNOWN, False
        for index in range(position, -1, -1):
            value = _plain_assignment(body[index], name) if index < position else None
            if value is not None:
                if _python_data(value):
                    return Home.UNKNOWN, True
                return self._home_holding(value, name, self._held_before(name, body, index, depth + 1), depth), False
            own = index == position and type(body[index]) is cst.SimpleStatementLine
            if not own and name in self.names_bound_in(body[index]):
                return None  # also bound in a branch or a loop on the way: the name's bindings at large say
        return None

    def names_bound_in(self, statement: cst.CSTNode) -> frozenset[str]:
        """The names a statement binds in any way, anywhere in it but in the scopes it defines
        (assignment and loop targets, `with ... as`, `:=`, imports), found once per statement."""
        known = self._bound.get(id(statement))
        if known is None:
            known = self._bound[id(statement)] = _bound_names(statement)
        return known

    def _home_holding(
        self, value: cst.BaseExpression, name: str, held: tuple[Home | None, bool] | None, depth: int
    ) -> Home:
        """The home of `value` where `name` holds a tensor at `held` (unknown if None), or
        Python data."""
        home, data = held if held is not None else (None, False)
        before = self._held.get(name), name in self._listed
        self._held[name] = Home.UNKNOWN if home is None else home
        if data:
            self._listed.add(name)
        try:
            found = self._home(value, depth + 1, frozenset({name}))
            return Home.UNKNOWN if found is None else found
        finally:
            if before[0] is None:
                del self._held[name]
            else:
                self._held[name] = before[0]
            if not before[1]:
                self._listed.discard(name)

    def _call_home(self, call: cst.Call, depth: int, seen: frozenset[str]) -> Home | None:
        names = self.resolver.qualified_names(call.func)
        device = patterns.keyword(call, "device")
        if "torch.load" in names:  # where `map_location` says, when it names a device
            location = patterns.keyword(call, "map_location")
            return Home.UNKNOWN if location is None else self._location_home(location.value)
        if names & _HOST_FACTORIES or (names and all(name.split(".")[0] == "numpy" for name in names)):
            return Home.HOST  # NumPy's arrays are in host memory too
        returned = patterns.keyword(call, "return_tensors")
        if returned is not None and patterns.string_value(returned.value) == "pt":
            return Home.HOST  # a tokenizer's or processor's tensors, made on the CPU
        if names and all(name.startswith("torch.") and not name.startswith("torch.cuda.") for name in names):
            if device is not None:
                return Home.HOST if self.is_cpu(device.value) else Home.MOVED
            pinned = patterns.keyword(call, "pin_memory")
            if pinned is not None and patterns.is_true(pinned.value):
                return Home.HOST  # `torch.empty_like(x, pin_memory=True)`: page-locked host memory
            if names & _SIZE_FACTORIES:
                return Home.DEFAULT
            data = patterns.positional(call, 0)
            if data is None:
                return Home.UNKNOWN
            if names & _DATA_FACTORIES and (names == {"torch.tensor"} or self._holds_python_data(data.value)):
                return Home.DEFAULT  # `torch.tensor([obj["area"] for obj in anno])`, `torch.tensor(xyxy)`
            if names & _DATA_FACTORIES:
                return _weakest((self._home(data.value, depth + 1, seen), Home.DEFAULT))
            # `torch.cumprod(x, 0)`, `torch.cat([a, b])`, `torch.minimum(torch.ones(()), x)`: the weakest of theirs
            given = [arg.value for arg in call.args if arg.keyword is None and not arg.star]
            tensors = [value for value in given if not is_number(value)]  # `dim`, `k`: no tensor of theirs
            return _weakest(self._home(value, depth + 1, seen) for value in tensors) if tensors else Home.UNKNOWN
        method = patterns.method_name(call)
        if type(call.func) is cst.Name and (
            call.func.value in self._functions or call.func.value in self.module_functions()
        ):  # also one the walk has yet to reach (`convert_to_xywh`, defined after its callers)
            returned = self._returned_home(call, depth, seen)
            return Home.UNKNOWN if returned is None else returned
        if names or method is None or type(call.func) is not cst.Attribute:
            return Home.UNKNOWN
        if method in ("cpu", "numpy") or (method == "to" and any(self.is_cpu(arg.value) for arg in call.args)):
            return Home.HOST
        if method == "to" and all(self.is_dtype(arg.value) or arg.keyword is not None for arg in call.args):
            return self._home(call.func.value, depth + 1, seen) if device is None else Home.MOVED
        if method in _DEVICE_METHODS or device is not None:
            return Home.MOVED
        return self._home(call.func.value, depth + 1, seen)  # `x.sum()`, `x.double()`: the device of x

    def _makes_parameter(self, value: cst.BaseExpression) -> bool:
        """`nn.Parameter(torch.zeros(n))`: a tensor that moves with its module."""
        return type(value) is cst.Call and "torch.nn.Parameter" in self.resolver.qualified_names(value.func)

    def _location_home(self, location: cst.BaseExpression) -> Home:
        """Where `torch.load(..., map_location=location)` puts tensors: the host for the CPU,
        a device for a device string or `torch.device(...)`; unknown for a function or a dict,
        which may send each storage anywhere."""
        if self.is_cpu(location):
            return Home.HOST
        if type(location) in (cst.Lambda, cst.Dict):
            return Home.UNKNOWN
        if type(location) is cst.Call and "torch.device" not in self.resolver.qualified_names(location.func):
            return Home.UNKNOWN
        return Home.MOVED

    def _holds_python_data(self, node: cst.BaseExpression) -> bool:
        """A list, tuple or comprehension display, or a name bound only to those: data that a
        factory copies to the default device, whatever its elements are."""
        if type(node) is cst.Name:
            if node.value in self._held:
                return node.value in self._listed
            values = self.resolver.assigned_values(node)
            if not values:
                return self._command_line_value(node)
            return all(_python_data(value) for value in values)
        return _python_data(node)

    def _command_line_value(self, node: cst.Name) -> bool:
        """A parameter of a Click command (`@click.command()`, `@click.option(...)`): what the
        command line gives, strings and numbers and their lists (EDM's `seeds`), never a tensor."""
        function = self.resolver.parameter_of(node)
        return function is not None and any(
            self.resolver.qualified_names(
                decorator.decorator.func if type(decorator.decorator) is cst.Call else decorator.decorator
            )
            & _COMMAND_LINE_DECORATORS
            for decorator in function.decorators
        )

    def default_device_set(self, ancestors: Sequence[cst.CSTNode], source: bytes) -> bool:
        """Whether factories may make tensors elsewhere than in host memory: under
        `with torch.device(...)`, or in a module (its `source`) that mentions `set_default_device`
        or `set_default_tensor_type` (`torch.cuda.HalfTensor`)."""
        for node in ancestors:
            if type(node) is cst.With and any(
                type(item.item) is cst.Call and "torch.device" in self.resolver.qualified_names(item.item.func)
                for item in node.items
            ):
                return True
        return b"set_default_device" in source or b"set_default_tensor_type" in source  # before or after

    def is_cpu(self, node: cst.BaseExpression) -> bool:
        """`"cpu"` or `torch.device("cpu")`, or a name bound once to either (`cpu_device`)."""
        return patterns.string_value(self.device_literal(node)) == "cpu"

    def is_dtype(self, node: cst.BaseExpression) -> bool:
        """`torch.float32`, `torch.long`...: a torch attribute that is a dtype."""
        return any(name.rpartition(".")[2] in _DTYPE_NAMES for name in self.resolver.qualified_names(node))

    def uses(
        self, name: cst.Name, chain: Sequence[cst.CSTNode]
    ) -> list[tuple[cst.Name, tuple[cst.CSTNode, ...]]] | None:
        """The references to a function's local name bound by `=` at `chain` (the nodes from the
        module down to the binding), each with the nodes from the function down to it: every one,
        where the name is bound more than once (`a = a / a[0]`) too, since any may read this value.
        None for names also bound otherwise, names of a module or class (other code may read
        them), and names a nested function, class or comprehension refers to."""
        function = next((node for node in reversed(chain) if type(node) in NESTED_SCOPES), None)
        if type(function) is not cst.FunctionDef or not self.resolver.assigned_values(name):
            return None
        return references(function, name.value)

    # --- step loops ------------------------------------------------------------------------------

    def step_loop(self, ancestors: Sequence[cst.CSTNode]) -> str | None:
        """What the innermost step loop around the node runs ("a loop over a DataLoader", "a
        training loop", "a decoding loop", "a step loop"), or None outside any. Asked while the
        walk is at the node (a loader bound by name is resolved in the scope of the loop)."""
        for index in range(len(ancestors) - 2, -1, -1):
            loop = ancestors[index]
            if type(loop) in NESTED_SCOPES:
                return None
            if type(loop) not in (cst.For, cst.While):
                continue
            if ancestors[index + 1] is loop.body or (type(loop) is cst.While and ancestors[index + 1] is loop.test):
                step = self.loop_step(loop)
                if step is not None and not self._samples_once_per_epoch(loop, ancestors[:index]):
                    return step
        return None

    def off_the_step_path(self, ancestors: Sequence[cst.CSTNode], *, periodic_exempts: bool = True) -> bool:
        """`off_the_step_path` from the innermost step loop around the node on: a guard outside
        that loop (`if step % N == 0:` around an evaluation loop) runs its steps all the same.
        Also the body of an `if` that ends that loop for good (`return`, or `break` out of it):
        it runs once, after the last step. Answered once per place (the rules ask about each
        node in turn) and again once more functions are known."""
        key = (*self._place_key(ancestors), periodic_exempts)
        found = self._off_path.get(key)
        if found is None:
            found = self._off_path[key] = self._off_the_step_path(ancestors, periodic_exempts)
        return found

    def _place_key(self, ancestors: Sequence[cst.CSTNode]) -> tuple[int, int, int]:
        """A place in the walk, as the memos of the step questions know it: the node above it,
        its depth, and how many functions the walk knew when asked."""
        return id(ancestors[-1]) if ancestors else 0, len(ancestors), self._known()

    def _known(self) -> int:
        """How many functions and methods the walk has seen: what a loop's step is judged by."""
        return len(self._functions) + len(self._titles)

    def _off_the_step_path(self, ancestors: Sequence[cst.CSTNode], periodic_exempts: bool) -> bool:
        off = off_the_step_path(ancestors, self.resolver, periodic_exempts=periodic_exempts)
        for index in range(len(ancestors) - 2, -1, -1):
            loop = ancestors[index]
            if type(loop) in NESTED_SCOPES:
                break
            if (
                type(loop) in (cst.For, cst.While)
                and ancestors[index + 1] is loop.body
                and self._steps_in(ancestors, index)
            ):
                inner = ancestors[index:]  # lit-llama's `if idx_next == eos_id: return idx[:input_pos]`
                below = off_the_step_path(ancestors, self.resolver, periodic_exempts=periodic_exempts, start=index)
                return (off and below) or _ends_the_loop(inner)
        return off

    def step_context(self, ancestors: Sequence[cst.CSTNode]) -> str | None:
        """Where the code below `ancestors` runs once per step: "forward()" or the step loop
        around it (whether it is off the step path, `off_the_step_path` says); answered once
        per place, as `off_the_step_path`."""
        key = self._place_key(ancestors)
        if key not in self._contexts:
            in_step = _FORWARD if in_forward(ancestors) else _BACKWARD if in_function_backward(ancestors) else None
            self._contexts[key] = in_step or self._framework_step(ancestors) or self.step_loop(ancestors)
        return self._contexts[key]

    def _framework_step(self, ancestors: Sequence[cst.CSTNode]) -> str | None:
        """A method a framework calls once per step: Lightning's `training_step()` and batch
        hooks, the Hugging Face Trainer's `compute_loss()`, MMEngine's `train_step()` and
        `forward_train()`; the `__call__` of a Hugging Face stopping criterion or logits
        processor and the `put()` of a streamer, which `generate()` calls for every token; a
        torchmetrics metric's `update()`;
        an optimizer's `step()`; a Dassl trainer's `forward_backward()`; a BasicSR model's `feed_data()` and
        `optimize_parameters()`."""
        for index in range(2, len(ancestors) - 1):
            method, holder = ancestors[index], ancestors[index - 2]
            if not (type(method) is cst.FunctionDef and type(holder) is cst.ClassDef):
                continue
            if ancestors[index + 1] is not method.body:
                return None
            title = method.name.value
            if _FRAMEWORK_STEP.match(title):
                return f"`{title}()` (run every step by the framework)"
            for base in holder.bases:
                for name in self.resolver.qualified_names(base.value):
                    methods, why = _CALLBACK_BASES.get(self.module.absolute(name) if self.module else name, ((), ""))
                    if title in methods:
                        return f"`{title}()` of {why}"
        return None

    def called_every_step(
        self, function: cst.FunctionDef, gates: tuple[str, ...] = (), depth: int = 0, *, periodic_exempts: bool = True
    ) -> str | None:
        """The step context ("forward()", "a training loop"...) from which the module calls
        `function` every step: a call of it there, or in a function itself called every step
        (`run_step()` from the loop, then `log_step()` from `run_step()`), or a call given it as
        a callback there (`gpu_timer(train_step)`, which runs it; a method as `self.name`:
        MMDetection's `multi_apply(self.loss_single, ...)`); a function the module patches
        in as a class's forward (`LlamaAttention.forward = xformers_forward`). A method counts the
        calls `self.name(...)` in its own class. A function with a training loop or a loop over
        a DataLoader of its own (`train_one_epoch()`) runs an epoch, not a step; one whose loops
        only decode or go over the batch's samples (yolov7's `build_targets()`) runs within the
        step that calls it. `gates`: parameters (see
        `parameter_gates`) a call must give for what is asked about to run; `periodic_exempts`:
        whether a call under `if step % N == 0:` is off the step path (see `off_the_step_path`).
        Asked after the walk: callers often come after the functions they call."""
        if depth > _CALL_DEPTH:
            return None
        if depth == 0:
            key = (id(function), gates, periodic_exempts)
            if key not in self._every_step:
                self._every_step[key] = self.called_every_step(function, gates, 1, periodic_exempts=periodic_exempts)
            return self._every_step[key]
        drawn = self._drawn_every_step(function)
        if drawn is not None:
            return drawn
        title, owner = function.name.value, self._methods.get(id(function))
        if owner is None and title in self._patched_forwards and self.module_functions().get(title) is function:
            return _FORWARD  # monkey-patched in: `LlamaAttention.forward = xformers_forward`
        callbacks = self._callbacks.get(title if owner is None else f"self.{title}", []) if not gates else []
        for site, given in (
            *((each, False) for each in self._sites(title, owner)),
            *((each, True) for each in callbacks),
        ):
            off_path = self.in_scope(
                site.scope, partial(self.off_the_step_path, site.ancestors, periodic_exempts=periodic_exempts)
            )
            if off_path or not all(_gives(site, function, gate) for gate in gates):
                continue
            if not self._calls_method_of(site, title, owner):
                continue
            where = self.in_scope(site.scope, partial(self.step_context, site.ancestors))
            if where is None and given and owner is None:
                where = self._run_by_callee(site, title)
            if where is None:
                caller = enclosing_function(site.ancestors)
                where = (
                    None
                    if caller is None
                    else self.called_every_step(caller, (), depth + 1, periodic_exempts=periodic_exempts)
                )
            if where is not None:  # what forward() calls runs with it, loops and all (YOLOX's label assignment)
                return (
                    None
                    if where != _FORWARD and (self.runs_steps(function, _EPOCHS) or self.drives_steps(function))
                    else where
                )
        return None

    def calls_by_name(self) -> Iterator[tuple[str, cst.Call, Scope, tuple[cst.CSTNode, ...]]]:
        """Every call the module makes by a plain name (`make_pad_mask(lengths)`), with the
        name, its scope and the nodes from the module down to it."""
        for title, sites in self._calls.items():
            for site in sites:
                if site.skipped == 0 and type(site.call.func) is cst.Name:
                    yield title, site.call, site.scope, site.ancestors

    def step_parameters(self, function: cst.FunctionDef, depth: int = 0) -> dict[str, str]:
        """The parameters of a module-level function that it calls or hands to a call made
        every step, each with the step context: Megatron's `train(forward_step_func, ...)`
        passes it to `train_step(...)` in its training loop, and `pretrain(...,
        forward_step_func)` passes it on to `train`. What another module gives there runs
        every step (a callback, as `called_every_step` takes one given in a step loop). Asked
        after the walk."""
        key = id(function)
        if key in self._step_parameters:
            return self._step_parameters[key]
        self._step_parameters[key] = {}  # a recursion in progress hands on nothing
        found: dict[str, str] = {}
        for name, site in self._handed_on.get(key, ()):
            if name in found or self.in_scope(site.scope, partial(self.off_the_step_path, site.ancestors)):
                continue
            where = self.in_scope(site.scope, partial(self.step_context, site.ancestors))
            if where is None:
                where = self._step_parameter_of(site, name, depth)
            if where is not None:
                found[name] = where
        self._step_parameters[key] = found
        return found

    def _step_parameter_of(self, site: _Site, name: str, depth: int) -> str | None:
        """The step context of the module-level function `site` calls, where the argument `name`
        it passes lands on one of that function's step parameters."""
        func = site.call.func
        callee = self.module_functions().get(func.value) if type(func) is cst.Name else None
        if callee is None or depth >= _CALL_DEPTH:
            return None
        handed = self.step_parameters(callee, depth + 1)
        for position, arg in enumerate(site.call.args):  # not the call of the parameter itself: a callee's
            if type(arg.value) is cst.Name and arg.value.value == name:
                parameter = arg.keyword.value if arg.keyword is not None else _parameter_at(callee, position)
                if any(each.star for each in site.call.args[:position]):
                    return None  # `f(*args, fn)`: where it lands is unknown
                return handed.get(parameter or "")
        return None

    def handed_functions(self) -> Iterator[tuple[cst.FunctionDef, cst.Call, Scope, int, str]]:
        """The module-level functions the module hands to a call as an argument (`pretrain(...,
        forward_step)`), each with the call, its scope, and the argument's position among the
        positional ones (-1 for a keyword) and keyword."""
        functions = self.module_functions()
        for title, sites in self._callbacks.items():
            function = functions.get(title)
            for site in sites if function is not None else ():
                for position, arg in enumerate(site.call.args):
                    if arg.star:
                        break  # what follows lands where `*args` ends
                    if type(arg.value) is cst.Name and arg.value.value == title:
                        keyword = arg.keyword.value if arg.keyword is not None else ""
                        yield function, site.call, site.scope, -1 if keyword else position, keyword

    def every_step_at(self, scope: Scope, ancestors: tuple[cst.CSTNode, ...]) -> str | None:
        """The step context in which code the walk has left runs every step: forward() or a
        step loop around it, else one from which the module calls the function it is in.
        Asked after the walk."""
        if self.in_scope(scope, partial(self.off_the_step_path, ancestors)):
            return None
        where = self.in_scope(scope, partial(self.step_context, ancestors))
        caller = enclosing_function(ancestors) if where is None else None
        return where or (self.called_every_step(caller) if caller is not None else None)

    def drives_steps(self, function: cst.FunctionDef) -> bool:
        """Whether a function calls one of the module's that holds a step loop that does not
        train (a DDIM sampler's `sample()` sets up its schedule, then calls `ddim_sampling()`,
        which loops): what it does itself runs once per such run, not every step. A loop over
        microbatches that trains (improved-diffusion's `forward_backward()`) is part of the
        step that calls it."""
        key = id(function)
        if key not in self._drives:
            judging, self._marking_class = self._marking_class, self._methods.get(key)
            try:
                calls = [node for node in self._own(function.body, NESTED_SCOPES) if type(node) is cst.Call]
                self._drives[key] = any(
                    helper is not function and self._loops_without_training(helper)
                    for call in calls
                    for helper in self._helpers_called(call, 0)
                )
            finally:
                self._marking_class = judging
        return self._drives[key]

    def _run_by_callee(self, site: _Site, title: str) -> str | None:
        """The step context in which the module's function that a callback is given to calls
        it: point-e's `sample_fn(guided_denoiser, x, sigmas)`, where `sample_fn` is
        `sample_heun`, which calls its `denoiser(x, sigma)` in its loop."""
        func = site.call.func
        if type(func) is not cst.Name:
            return None
        position, given = next(
            (index, arg)
            for index, arg in enumerate(site.call.args)
            if type(arg.value) is cst.Name and arg.value.value == title and not arg.star
        )
        if any(arg.star for arg in site.call.args[:position]):
            return None  # `f(*args, denoiser)`: its position is unknown
        for name in (func.value, *self.in_scope(site.scope, partial(self._picked, func))):
            callee = self._functions.get(name)
            if callee is None or self._methods.get(id(callee)) is not None:
                continue
            parameter = given.keyword.value if given.keyword is not None else _parameter_at(callee, position)
            for inner in self._calls.get(parameter or "", []):
                if type(inner.call.func) is cst.Name and any(node is callee for node in inner.ancestors):
                    where = self.in_scope(inner.scope, partial(self.step_context, inner.ancestors))
                    if where is not None:
                        return where
        return None

    def _drawn_every_step(self, function: cst.FunctionDef) -> str | None:
        """For a generator (a function that yields, or a class's `__iter__`): the step context
        of a loop that draws its items, which runs its body between two of them every step:
        `for x, y in batches(data):`, `for x, y in loader:` where `loader = batches(data)` or an
        instance of the class (airbench's `CifarLoader`), `x, y = next(loader)` in a step loop
        (nanochat's `train_loader`)."""
        owner = self._methods.get(id(function))
        if (owner is not None and function.name.value != "__iter__") or not self._yields(function):
            return None
        if self._yielding_step(function) is not None:
            return None  # it yields a step of its own loop: what runs every step is in that loop
        for loop, scope, ancestors in self._for_loops:
            sources = _drawn(loop.iter)
            if any(self.in_scope(scope, partial(self._draws, each, function, ancestors)) for each in sources):
                where = self.in_scope(scope, partial(self.loop_step, loop))
                if where is not None:
                    return where
        for site in self._calls.get("next", []) if owner is None else ():
            given = site.call.args[0].value if site.call.args else None
            if given is None or not self.in_scope(site.scope, partial(self._draws, given, function, site.ancestors)):
                continue
            if not self.in_scope(site.scope, partial(self.off_the_step_path, site.ancestors)):
                where = self.in_scope(site.scope, partial(self.step_context, site.ancestors))
                if where is not None:
                    return where
        return None

    def _draws(self, source: cst.BaseExpression, generator: cst.FunctionDef, ancestors: Sequence[cst.CSTNode]) -> bool:
        """Whether iterating `source` runs `generator`: a call of it, a name bound to one, an
        instance of the class whose `__iter__` it is."""
        owner = self._methods.get(id(generator))
        if owner is not None:
            return owner in self._owners(source, "__iter__", ancestors)
        if type(source) is cst.Name:
            return any(self._draws(value, generator, ancestors) for value in self.resolver.assigned_values(source))
        return type(source) is cst.Call and type(source.func) is cst.Name and source.func.value == generator.name.value

    def callers(self, function: cst.FunctionDef, *, past_steps: bool = True) -> list[cst.FunctionDef]:
        """The module's functions that call `function`, directly or through others
        (`optimize()` calls `self._optimize()`, which calls `self._norms()`), nearest first;
        a method counts the calls `self.name(...)` in its own class. Not `past_steps`: none
        that runs an epoch (a training loop or a loop over a DataLoader of its own) or calls a
        function with a step loop (a sampler's `sample()`), nor their callers: there the
        function runs once per loop; nor a call off the step path (every N steps). Asked after
        the walk."""
        found: list[cst.FunctionDef] = []
        wave = [function]
        for _ in range(_CALL_DEPTH):
            following = []
            for callee in wave:
                title, owner = callee.name.value, self._methods.get(id(callee))
                for site in self._sites(title, owner):
                    if site.receiver is not None or (owner is not None and not self._runs_own(site, title, owner)):
                        continue
                    caller = enclosing_function(site.ancestors)
                    if caller is None or caller is function or caller in found:
                        continue
                    if not past_steps and (self.runs_steps(caller, _EPOCHS) or self.drives_steps(caller)):
                        continue
                    if not past_steps and self.in_scope(site.scope, partial(self.off_the_step_path, site.ancestors)):
                        continue  # imagen's save every N steps: `if total_steps % N: return`, then `self.save()`
                    found.append(caller)
                    following.append(caller)
            wave = following
        return found

    def owner_class(self, function: cst.FunctionDef) -> str | None:
        """The class `function` is a method of, if any."""
        return self._methods.get(id(function))

    def class_bases(self, owner: str) -> frozenset[str]:
        """What the bases of the module's top-level class `owner` resolve to (`.base.Solver` for
        `base.Solver` after `from . import base`). Asked after the walk."""
        known = self._classes.get(owner)
        bases = known.node.bases if known is not None else ()
        return frozenset().union(*(self.resolver.qualified_names(base.value) for base in bases))

    def is_buffer(self, attribute: str) -> bool:
        """Whether `self.<attribute>` holds a tensor the module registers as a buffer (whatever
        the value registered looks like: `register_buffer` takes tensors only)."""
        return attribute in self._buffers

    def self_attribute_values(self, attribute: str) -> list[tuple[cst.BaseExpression, Scope]]:
        """What the module assigns to `self.<attribute>`, with the scope of each assignment."""
        return self._self_attributes.get(attribute, [])

    def bound_values(self, node: cst.BaseExpression) -> list[cst.BaseExpression]:
        """What `=` binds a name to in its scope, or the module to a `self.` attribute, whatever
        else binds it too: what an object called or read there may be."""
        if type(node) is cst.Name:
            return self.resolver.explicit_values(node)
        if is_self_attribute(node):
            return [value for value, _ in self.self_attribute_values(node.attr.value)]  # type: ignore[attr-defined]
        return []

    def _loops_without_training(self, function: cst.FunctionDef) -> bool:
        """Whether a function holds a step loop that takes no training step (sampling, decoding);
        not one over chunks of its input (facenet's `fixed_batch_process()`, `for i in range(0,
        len(x), batch_size): model(x[i : i + batch_size])`), which batches one call's work by hand."""
        return any(
            self.in_scope(
                scope,
                lambda loop=loop: (
                    self.loop_step(loop) is not None
                    and not self.trains(loop)
                    and not (type(loop) is cst.For and _takes_chunks(loop))
                ),
            )
            for loop, scope in self._loops.get(id(function), ())
        )

    def runs_steps(self, function: cst.FunctionDef, kinds: frozenset[str] | None = None) -> bool:
        """Whether a function holds a step loop of its own (of one of `kinds`, where given)."""
        loops = self._loops.get(id(function), ())
        steps = (self.in_scope(scope, partial(self.loop_step, loop)) for loop, scope in loops)
        return any(step is not None and (kinds is None or step in kinds) for step in steps)

    def in_scope(self, scope: Scope, question: Callable[[], _T]) -> _T:
        """The answer to `question`, resolving names in `scope`: for what is asked after the
        walk, which has left that scope."""
        walking, elsewhere = self.resolver.scope, self.elsewhere
        self.resolver.scope, self.elsewhere = scope, elsewhere or scope is not walking
        try:
            return question()
        finally:
            self.resolver.scope, self.elsewhere = walking, elsewhere

    def loop_step(self, loop: cst.For | cst.While) -> str | None:
        """What step this one loop runs (as `step_loop` says it), or None; found once per loop,
        and again once the walk has seen more functions (a method the loop calls, defined after
        it). Asked while the walk is inside the loop, like `step_loop`."""
        known = self._known()
        judged = self._steps.get(id(loop))
        if judged is None or judged[1] < known:
            self._steps[id(loop)] = (None, known)  # asked again on the way (a recursive helper): no step
            judged = self._steps[id(loop)] = (self._step_of(loop), known)
        return judged[0]

    def _step_of(self, loop: cst.For | cst.While) -> str | None:
        if type(loop) is cst.For and self._iterates_loader(loop.iter):
            return "a loop over a DataLoader"
        streamed = self._streamed_step(loop.iter) if type(loop) is cst.For else None
        if streamed is not None:
            return streamed
        if self._runs_epochs(loop):
            return None
        judging, self._marking_class = self._marking_class, self._loop_classes.get(id(loop))
        try:
            picks = type(loop) is not cst.For or not _over_samples(loop, self.resolver)
            found = self._markers(loop.test if type(loop) is cst.While else None, loop.body, picks=picks)
        finally:
            self._marking_class = judging  # a helper's loop judged on the way has its own class
        if (
            found is None
            and self._runs_submodules(loop)
            and (
                type(loop) is cst.While
                or self._samples_over_range(loop)
                or self._stops_early(loop)
                or (_over_range(loop.iter, self.resolver) and _carries_state(loop.body))
            )
        ):
            found = "decoding"
        if found is None and type(loop) is cst.While and _carries_state(loop.body) and self._drafts_steps(loop):
            found = "decoding"
        if found is None:
            return _CHUNKS if type(loop) is cst.For and _takes_chunks(loop) else None
        return {"training": "a training loop", "decoding": "a decoding loop", "step": "a step loop"}[found]

    def _drafts_steps(self, loop: cst.While) -> bool:
        """A `while` loop that calls a function of the module running a few steps of its own,
        each from the last (LitGPT's speculative decoding: `speculative_decoding(...)` drafts k
        tokens in its own loop), carrying what it returns into the next call: each pass is a
        decoding step too. Not retries of a whole decoding (whisper's temperature fallback)."""
        own = self._own(loop.body, NESTED_SCOPES + (cst.For, cst.While))
        return any(
            _carries_state(inner.body) and self.in_scope(scope, partial(self.loop_step, inner)) in _DRAFTING_STEPS
            for call in own
            if type(call) is cst.Call
            for helper in self._helpers_called(call, 0)
            for inner, scope in self._loops.get(id(helper), ())
        )

    def _streamed_step(self, iterated: cst.BaseExpression) -> str | None:
        """For `for out in stream_tokens(...)`: the step of the loop in which the module's
        generator yields (gpt-neox's and FastChat's token streams). Each pass of the loop
        over it is one of those steps."""
        if type(iterated) is not cst.Call:
            return None
        generators = self._callees(iterated, 0)
        return next((step for generator in generators if (step := self._yielding_step(generator))), None)

    def _yielding_step(self, generator: cst.FunctionDef) -> str | None:
        """The step of a loop of the generator that yields inside it; not pieces of one result
        handed out (F5-TTS's audio chunks)."""
        if not self._yields(generator):
            return None
        for loop, scope in self._loops.get(id(generator), ()):
            if any(type(node) is cst.Yield for node in descendants(loop.body, NESTED_SCOPES)):
                step = self.in_scope(scope, partial(self.loop_step, loop))
                if step is not None and step != _CHUNKS:
                    return step
        return None

    def innermost_step_loop(self, ancestors: Sequence[cst.CSTNode]) -> cst.For | cst.While | None:
        """The innermost loop around the node, within its function, that runs steps."""
        for index in range(len(ancestors) - 2, -1, -1):
            loop = ancestors[index]
            if type(loop) in NESTED_SCOPES:
                return None
            if (
                type(loop) in (cst.For, cst.While)
                and ancestors[index + 1] is loop.body
                and self._steps_in(ancestors, index)
            ):
                return loop
        return None

    def _steps_in(self, ancestors: Sequence[cst.CSTNode], index: int) -> bool:
        """Whether the loop at `ancestors[index]` runs steps where it is."""
        loop = ancestors[index]
        assert type(loop) in (cst.For, cst.While)
        return self.loop_step(loop) is not None and not self._samples_once_per_epoch(loop, ancestors[:index])

    def _samples_once_per_epoch(self, loop: cst.For | cst.While, outer: Sequence[cst.CSTNode]) -> bool:
        """A loop over one batch's samples that trains nothing, right in an epoch loop, outside
        its step loops (StyleTTS2's reconstructions after each epoch, `for bib in
        range(len(asr)):`): it runs once per epoch, not every step."""
        if type(loop) is not cst.For or not _over_samples(loop, self.resolver) or self.trains(loop):
            return False
        for node in reversed(outer):
            if type(node) in NESTED_SCOPES:
                return False
            if type(node) in (cst.For, cst.While):
                return self._runs_epochs(node)
        return False

    def evaluated_only(self, function: cst.FunctionDef) -> bool:
        """Whether the module calls `function`, and only in the body of evaluation loops: loops
        over a DataLoader that take no training step (BasicSR's `get_current_visuals()`, called
        in `nondist_validation()`'s loop over the validation set). Asked after the walk."""
        title, owner = function.name.value, self._methods.get(id(function))
        sites = [
            site
            for site in self._sites(title, owner)
            if site.receiver is None and (owner is None or self._runs_own(site, title, owner))
        ]
        return bool(sites) and all(
            self.in_scope(site.scope, partial(self._evaluates, site.ancestors)) for site in sites
        )

    def _evaluates(self, ancestors: Sequence[cst.CSTNode]) -> bool:
        loop = self.innermost_step_loop(ancestors)
        return loop is not None and self.loop_step(loop) == "a loop over a DataLoader" and not self.trains(loop)

    def trains(self, loop: cst.For | cst.While) -> bool:
        """Whether the loop takes training steps (`.backward()`, an optimizer's `.step()`, a
        `train_step(...)`), in its body or in the module's functions it calls: a loop over a
        DataLoader that takes none evaluates."""
        judging, self._marking_class = self._marking_class, self._loop_classes.get(id(loop))
        try:
            return self._markers(loop.test if type(loop) is cst.While else None, loop.body) == "training"
        finally:
            self._marking_class = judging

    def _samples_over_range(self, loop: cst.For) -> bool:
        """A `for _ in range(...)` loop that picks tokens: `argmax`, `topk` or `multinomial` in
        its body or in a function of the module it calls (DALLE-pytorch's `gumbel_sample`)."""
        if not (type(loop.iter) is cst.Call and patterns.dotted(loop.iter.func) == "range"):
            return False
        calls = [node for node in self._own(loop.body, NESTED_SCOPES + (cst.For, cst.While)) if type(node) is cst.Call]
        helpers = [helper.body for call in calls for helper in self._callees(call, 2)]
        inner = [node for body in helpers for node in self._own(body, NESTED_SCOPES) if type(node) is cst.Call]
        return any(
            patterns.method_name(call) in ("argmax", "topk", "multinomial")
            or bool(self.resolver.qualified_names(call.func) & _SAMPLERS)
            for call in (*calls, *inner)
        )

    def _stops_early(self, loop: cst.For) -> bool:
        """A loop with a `break` of its own (Tacotron's decoder loop stops once every stop token
        is on): it runs until the output says so, as decoding does."""
        return any(type(node) is cst.Break for node in self._own(loop.body, NESTED_SCOPES + (cst.For, cst.While)))

    def _runs_submodules(self, loop: cst.For | cst.While) -> bool:
        """A loop that calls layers its class made (`self.prenet(x)` after `self.prenet =
        Prenet(...)`): a model's own autoregressive decoding (tacotron2's `inference`; in a
        `for` loop over a range, where it picks tokens too), or runs the model it is a method of
        (DALLE-pytorch's `self.forward_with_cond_scale(text, image)`)."""
        own = self._own(loop.body, NESTED_SCOPES + (cst.For, cst.While))
        for call in own:
            if type(call) is cst.Call and runs_given_model(call):
                return True
            if type(call) is not cst.Call or not is_self_attribute(call.func):
                continue
            assert type(call.func) is cst.Attribute
            if _MODEL_RUN.match(call.func.attr.value):
                return True
            made = [value for value, _ in self._self_attributes.get(call.func.attr.value, [])]
            if any(
                type(value) is cst.Call and (patterns.dotted(value.func) or "").rpartition(".")[2][:1].isupper()
                for value in made
            ):
                return True
        return False

    def _runs_epochs(self, loop: cst.For | cst.While) -> bool:
        """A loop around a training loop that steps no optimizer itself (yolov5's `for epoch in
        range(epochs):` with `optimizer.zero_grad()` and `scheduler.step()` around the batch
        loop): once per epoch. One that does step (nanoGPT's `while True:` around its gradient
        accumulation) is the step loop. So is a `for` loop that calls the module's functions
        running a whole step loop (`for i in range(num_samples): y = generate(...)`): once per
        sample, where the output comes back. What runs only every N steps (`if is_eval_step:`
        around an evaluation over a DataLoader, LeRobot's) leaves the loop a step loop."""
        own = [node for node in self._own(loop.body, NESTED_SCOPES + (cst.For, cst.While)) if type(node) is cst.Call]
        if any(_steps_optimizer(call) for call in own):
            return False
        gated = self._every_n_steps(loop)
        inner = [
            node
            for node in self._own(loop.body, NESTED_SCOPES)
            if type(node) in (cst.For, cst.While) and id(node) not in gated
        ]
        if any(self.loop_step(each) in _EPOCHS for each in inner):
            return True
        if type(loop) is cst.While:
            return False  # `while pos < n:` around a speculative decode step decodes: the step loop
        return any(
            self._runs_steps_through(helper, 1)
            for call in own
            if id(call) not in gated
            for helper in self._helpers_called(call, 0)
        )

    def _every_n_steps(self, loop: cst.For | cst.While) -> set[int]:
        """The ids of the nodes in the loop's body that run only every N steps: under `if step %
        N == 0:` (or a name bound to such a test), not gradient accumulation's optimizer step."""
        scope = self._loop_scopes.get(id(loop))
        gates = [
            node
            for node in self._own(loop.body, NESTED_SCOPES + (cst.For, cst.While))
            if type(node) is cst.If
            and scope is not None
            and self.in_scope(scope, partial(periodic, node.test, self.resolver))
            and not _accumulates(node.body)
        ]
        return {id(node) for gate in gates for node in self._own(gate.body, NESTED_SCOPES)}

    def _markers(self, *parts: cst.CSTNode | None, depth: int = 0, picks: bool = True) -> str | None:
        """The strongest step marker ("training", "decoding", "step") among the calls in
        `parts`, not in their nested loops (an epoch loop is no step) or scopes. `picks`:
        whether an `argmax` or `topk` of its own picks tokens (see `_step_marker`): where what it
        picks feeds the next pass, not LeRobot's `torch.argmax(done, dim=1)` over the episodes a
        rollout returned."""
        found, picked = set(), []
        for part in parts:
            if part is None:
                continue
            for node in (part, *self._own(part, NESTED_SCOPES + (cst.For, cst.While))):
                if type(node) is cst.Call:
                    marker = self._step_marker(node, depth, picks)
                    if marker == _PICKING:
                        picked.append((part, node))
                    elif marker == _SAMPLING:  # a draw per pass, not a list of draws (`[sample(l) for _ in range(10)]`)
                        marker = "decoding" if self._outside_comprehensions(part, node) else None
                    found.add(marker)
        if any(self._fed_back(part, call) for part, call in picked):
            found.add("decoding")
        return next((marker for marker in ("training", "decoding", "step") if marker in found), None)

    def _outside_comprehensions(self, root: cst.CSTNode, node: cst.CSTNode) -> bool:
        """Whether `node` is under `root` but in none of its comprehensions."""
        return any(each is node for each in self._own(root, NESTED_SCOPES + (cst.For, cst.While, *_COMPREHENSIONS)))

    def _fed_back(self, body: cst.CSTNode, pick: cst.Call) -> bool:
        """Whether what a pick is bound to (`token = draft(token).argmax(-1)`), or a name bound
        from that (`k_prev = words`), is read by the loop's next pass before it is bound again."""
        if not isinstance(body, cst.BaseSuite):
            return False
        assigns = [node for node in self._own(body, NESTED_SCOPES + (cst.For, cst.While)) if type(node) is cst.Assign]
        picking = [node for node in assigns if _holds(node.value, pick)]
        picked = {name for node in picking for name in _bound_by(node)}
        following = frozenset(picked)
        picked |= {name for node in assigns if next(name_reads(node, following), None) for name in _bound_by(node)}
        if picked & _carried_names(body):
            return True
        # written into what the pass reads (`tokens[:, cur] = probs.argmax(-1)`, then `model(tokens[:, :cur])`)
        filled = frozenset(name for node in picking if (name := _written_into(node)) is not None)
        return any(
            next(name_reads(statement, filled), None) is not None
            for statement in body.body
            if not any(_holds(statement, node) for node in picking)
        )

    def _step_marker(self, call: cst.Call, depth: int = 0, picks: bool = True) -> str | None:
        method = patterns.method_name(call)
        receiver = owner_name(call.func.value) if type(call.func) is cst.Attribute else ""
        if method in ("backward", "zero_grad") or (method == "step" and _OPTIMIZER_NAME.search(receiver)):
            return "training"
        named = call.func.value if type(call.func) is cst.Name else method or ""
        if _STEP_CALL.match(named):  # `trainer.train_step(samples)`, `self.validation_step(batch)`
            return "training" if named.startswith("train") else "step"
        if depth == 0 and _GIVEN_STEP.match(named) and self.resolver.parameter_of(call.func) is not None:
            return "step"  # AllenNLP's beam search: `step(last_predictions, state, timestep + 1)`
        samplers = self.resolver.qualified_names(call.func) & _SAMPLERS
        if method == "multinomial" or "torch.multinomial" in samplers:
            return "decoding"
        if _samples_logits(call, named):
            return _SAMPLING
        if depth == 0 and picks and (samplers or method in ("argmax", "topk")):
            return _PICKING  # in a helper an argmax or topk may as well score accuracy or diffs
        if _MODEL_NAME.search(named) and not _MODEL_HANDLING.match(named):
            return "step"
        if method in _PIPELINE_DENOISER and _on_a_pipeline(call):
            return "step"  # CogVideoX's DDIM inversion: `pipeline.transformer(hidden_states=..., timestep=...)`
        if method and _MODEL_RUN.match(method) and _MODEL_NAME.search(receiver):
            return "step"  # `model.forward_decoder(...)`, `self.model.decode(z)`
        if method and _MODEL_NAME.search(receiver) and self._given_device_data(call):
            return "step"  # DINO's `model.get_intermediate_layers(frame.unsqueeze(0).cuda(), n=1)`
        if BATCH_GETTER.search(named) and (depth == 0 or named != "next"):
            return "step"  # in a helper, `next(iter(model.parameters()))` fetches no batch
        if depth == 0 and self._runs_on_device_data(call):
            return "step"  # `feature = inception(img)` after `img = img.to(device)`
        helpers = self._helpers_called(call, depth)
        if depth >= _HELPER_DEPTH or named.startswith("test_"):
            return None  # a test function run from a loop over cases is no step
        if type(call.func) is cst.Name and not helpers:  # `lower_update = lambda x, s, t: self.update(x, s, t)`
            lambdas = [value.body for value in self.resolver.assigned_values(call.func) if type(value) is cst.Lambda]
            return self._markers(*lambdas, depth=depth + 1) if lambdas else None
        found = {self._helper_marker(helper, depth) for helper in helpers}
        return next((marker for marker in ("training", "decoding", "step") if marker in found), None)

    def _runs_on_device_data(self, call: cst.Call) -> bool:
        """A call of a name bound to something unknown (a model given as a parameter: `g`,
        `inception`) with a tensor sent to a device as an argument (`img = img.to(device)`,
        `torch.randn(n, 512, device=device)`, also in a list): a loop making it runs the model
        on device data every iteration (stylegan2's feature extraction)."""
        func = call.func
        if (
            type(func) is not cst.Name
            or self.resolver.qualified_names(func)
            or func.value in self._functions
            or func.value in self.module_functions()
        ):
            return False
        if func.value[:1].isupper() or func.value in _BUILTIN_CALLS:
            return False  # a class made, or Python's own
        return self._given_device_data(call)

    def _given_device_data(self, call: cst.Call) -> bool:
        """Whether a call is given a tensor sent to a device (also in a list or tuple)."""
        given = [arg.value for arg in call.args if not arg.star]
        given = [e.value for g in given for e in (g.elements if type(g) in (cst.List, cst.Tuple) else [])] + given
        return any(
            (type(value) is cst.Name or (type(value) is cst.Call and type(value.func) is cst.Attribute))
            and self.home(value) is Home.MOVED
            for value in given
        )  # `clvp(text_tokens.repeat(n, 1), batch)` after `text_tokens = ....to(device)` (tortoise-tts)

    def _yields(self, function: cst.FunctionDef) -> bool:
        """A generator function: a `yield` of its own (asked once per function)."""
        if id(function) not in self._generators:
            own = descendants(function.body, NESTED_SCOPES)
            self._generators[id(function)] = any(type(node) is cst.Yield for node in own)
        return self._generators[id(function)]

    def note_callers_asked(self, name: str, *positions: int) -> None:
        """Note a question about a parameter of a function the module never calls."""
        self.callers_asked.update((name, *map(str, positions)))

    def own_nodes(self, root: cst.CSTNode, of_type: type[cst.CSTNode] | None = None) -> tuple[cst.CSTNode, ...]:
        """The nodes under `root` outside the functions, classes and lambdas it defines (only
        those of `of_type` where given), walked and picked out once: rules ask about the same
        function again and again."""
        found = self._own(root, NESTED_SCOPES)
        if of_type is None:
            return found
        key = (id(root), of_type)
        picked = self._owned_of_type.get(key)
        if picked is None:
            picked = self._owned_of_type[key] = tuple(node for node in found if type(node) is of_type)
        return picked

    def tested_as_bool(self, function: cst.FunctionDef, source: bytes) -> frozenset[str]:
        """The names whose dtype the function compares with `torch.bool` (segment-anything's
        `keep.dtype == torch.bool` in MaskData.filter): what its callers pass may be a mask.
        Looked for only where the module's `source` writes such a comparison at all."""
        if self._writes_dtype_tests is None:
            self._writes_dtype_tests = _DTYPE_TEST.search(source) is not None
        if not self._writes_dtype_tests:
            return frozenset()
        key = id(function)
        if key not in self._bool_tested:
            self._bool_tested[key] = frozenset(
                test.left.value.value  # type: ignore[attr-defined]
                for test in self._own(function.body, NESTED_SCOPES)
                if type(test) is cst.Comparison
                and type(test.left) is cst.Attribute
                and test.left.attr.value == "dtype"
                and type(test.left.value) is cst.Name
                and any(
                    type(link.operator) is cst.Equal and "torch.bool" in self.resolver.qualified_names(link.comparator)
                    for link in test.comparisons
                )
            )
        return self._bool_tested[key]

    def backpropagated(self, function: cst.FunctionDef) -> frozenset[str]:
        """The names the function calls `.backward()` on, with no gradient given (StyleTTS2's
        `d_loss_slm.backward(retain_graph=True)`): tensors, whatever else binds them (a
        scaler's `backward(loss)` takes the loss as an argument)."""
        key = id(function)
        if key not in self._backpropagated:
            self._backpropagated[key] = frozenset(
                call.func.value.value  # type: ignore[attr-defined]
                for call in self._own(function.body, NESTED_SCOPES)
                if type(call) is cst.Call
                and type(call.func) is cst.Attribute
                and call.func.attr.value == "backward"
                and type(call.func.value) is cst.Name
                and not any(arg.keyword is None for arg in call.args)
            )
        return self._backpropagated[key]

    def _own(self, root: cst.CSTNode, apart: tuple[type[cst.CSTNode], ...]) -> tuple[cst.CSTNode, ...]:
        """The nodes under `root`, not under nodes of the `apart` types, walked once: loops and
        functions are judged again as the walk learns more, over a tree that does not change."""
        key = (id(root), apart)
        found = self._owned.get(key)
        if found is None:
            found = self._owned[key] = tuple(descendants(root, apart))
        return found

    def _helpers_called(self, call: cst.Call, depth: int) -> list[cst.FunctionDef]:
        """The module's functions and methods `call` runs: `helper(x)`, `self._process_batch(points)`
        (in the class of the loop being judged), `self.inference.logits(...)` on an object of
        the module's classes, and a function it is given (`gpu_timer(train_step)`)."""
        given = [self._functions[arg.value.value] for arg in call.args if self._names_function(arg)]
        return [*self._callees(call, depth), *given]

    def _names_function(self, arg: cst.Arg) -> bool:
        return type(arg.value) is cst.Name and not arg.star and arg.value.value in self._functions

    def _callees(self, call: cst.Call, depth: int) -> list[cst.FunctionDef]:
        method = patterns.method_name(call)
        if type(call.func) is cst.Name:
            name = call.func.value
            return [self._functions[name]] if name in self._functions else []
        if type(call.func) is cst.Attribute and _is_self(call.func.value) and depth < _HELPER_DEPTH:
            return self._own_methods(call.func.attr.value)
        if (
            type(call.func) is cst.Attribute
            and method in self._titles
            and depth < 2
            and self._may_hold_instance(call.func.value)
        ):
            return self._resolved_methods(call.func.value, call.func.attr.value)
        return []

    def _runs_steps_through(self, function: cst.FunctionDef, depth: int) -> bool:
        """Whether a call of `function` runs a whole step loop, in its body or in a function it
        calls (gpt-fast's `generate()` calls `decode_n_tokens()`, which loops over tokens);
        not where it also steps an optimizer outside that loop (gradient accumulation: the
        loop is part of one step)."""
        own = self._own(function.body, NESTED_SCOPES + (cst.For, cst.While))
        calls = [node for node in own if type(node) is cst.Call]
        if any(_steps_optimizer(call) for call in calls):
            return False
        if self.runs_steps(function):
            return True
        return depth < 2 and any(
            self._runs_steps_through(helper, depth + 1)
            for call in calls
            for helper in self._helpers_called(call, depth + 1)
            if helper is not function
        )

    # --- objects of the module's classes ---------------------------------------------------------

    def _may_hold_instance(self, node: cst.BaseExpression) -> bool:
        """A receiver that may hold an instance of the module's classes: an attribute of `self`,
        or a name bound here to a value (not `self`, not an import). Asked for calls of a method
        name of the classes seen so far: a class defined after its caller is not followed."""
        if type(node) is cst.Name:
            return node.value != "self" and self.resolver.holds_value(node.value)
        return is_self_attribute(node)

    def _instances(self, node: cst.BaseExpression, ancestors: Sequence[cst.CSTNode], depth: int = 0) -> set[str]:
        """The module's classes whose instances `node` (below `ancestors`) may hold:
        `Greedy(...)`, a choice of those (`sampler or DeterministicSampler()`), a name or `self.`
        attribute bound to one, an item of a list of them, a loop variable over such a list
        (`for f in self.filters:`), a parameter annotated with one of them or its subclasses
        (OLMo's `sampler: Optional[Sampler]`, which any of the module's samplers may be)."""
        if depth > 3:
            return set()
        if type(node) is cst.Call and type(node.func) is cst.Name:
            return {node.func.value} if node.func.value in self._classes else set()
        if type(node) is cst.IfExp:
            return self._instances(node.body, ancestors, depth + 1) | self._instances(node.orelse, ancestors, depth + 1)
        if type(node) is cst.BooleanOperation:
            return self._instances(node.left, ancestors, depth + 1) | self._instances(node.right, ancestors, depth + 1)
        if type(node) in (cst.List, cst.Tuple):
            return {kind for element in node.elements for kind in self._instances(element.value, ancestors, depth + 1)}
        if type(node) is cst.Attribute and is_self_attribute(node):
            values = [*self._self_attributes.get(node.attr.value, []), *self._self_items.get(node.attr.value, [])]
            return {
                kind
                for value, scope in values
                for kind in self.in_scope(scope, partial(self._instances, value, (), depth + 1))
            }
        if type(node) is cst.Name:
            # also a parameter rebound to one: point-e's `model = GaussianToKarrasDenoiser(model, diffusion)`
            values = self.resolver.rebound_values(node)
            kinds = {kind for value in values for kind in self._instances(value, ancestors, depth + 1)}
            loop = next((a for a in reversed(ancestors) if type(a) is cst.For and _binds(a.target, node.value)), None)
            annotated = self.resolver.parameter_annotation(node)
            if annotated is not None:
                kinds |= self._annotated_kinds(annotated[0])
            return kinds | (self._instances(loop.iter, ancestors, depth + 1) if loop is not None else set())
        return set()

    def _annotated_kinds(self, annotation: cst.BaseExpression) -> set[str]:
        """The module's classes an annotation names (`Optional[Sampler]`), with their subclasses."""
        named = {node.value for node in (annotation, *descendants(annotation)) if type(node) is cst.Name}
        return {
            kind for kind in self._classes if any(self._inherits(kind, base) for base in named & self._classes.keys())
        }

    def _defining(self, kind: str, title: str, depth: int = 0) -> str | None:
        """The class whose method `title` an instance of `kind` runs: its own, else a base's."""
        known = self._classes.get(kind)
        if known is None or depth > 5:
            return None
        if title in known.methods:
            return kind
        return next((found for base in known.bases if (found := self._defining(base, title, depth + 1))), None)

    def _calls_method_of(self, site: _Site, title: str, owner: str | None) -> bool:
        """Whether the call at `site` may run the function `title` of class `owner` (of the
        module, where None): on an object of the class, or through `self.` in the class itself
        or in a class related to it in the module (see `_runs_own`)."""
        if site.receiver is not None:
            owners = self.in_scope(site.scope, partial(self._owners, site.receiver, title, site.ancestors))
            return owner is not None and owner in owners
        return owner is None or title in ("__init__", "__call__") or self._runs_own(site, title, owner)

    def _runs_own(self, site: _Site, title: str, owner: str) -> bool:
        """Whether `self.title(...)` at `site` runs the method of class `owner`: in the class
        itself, in a subclass that inherits the method (a quantizer's `forward()` calling its
        base's `self.remap_to_used()`), or in a base whose calling method `owner` inherits
        (a sampler base's loop calling `self.sampler_step()`, which each subclass defines)."""
        caller = _class_name(site.ancestors)
        if caller is None:
            return False
        if caller == owner or self._defining(caller, title) == owner:
            return True
        method = enclosing_function(site.ancestors)
        return method is not None and self._defining(owner, method.name.value) == caller

    def _owners(self, receiver: cst.BaseExpression, title: str, ancestors: Sequence[cst.CSTNode]) -> set[str]:
        """The classes whose method `title` a call on `receiver` (below `ancestors`) may run."""
        kinds = self._instances(receiver, ancestors)
        return {owner for kind in kinds if (owner := self._defining(kind, title)) is not None}

    def _resolved_methods(self, receiver: cst.BaseExpression, title: str) -> list[cst.FunctionDef]:
        owners = self._owners(receiver, title, self.ancestors)
        return [self._classes[owner].methods[title] for owner in sorted(owners)]

    def _own_methods(self, title: str) -> list[cst.FunctionDef]:
        """The method `title` that `self.title(...)` runs in the class of the loop being judged
        (its own, else a base's); where that one only raises (`raise NotImplementedError`), those
        of the module's subclasses that define it (a sampler base's loop over `self.sampler_step()`)."""
        owner = self._marking_class
        defining = self._defining(owner, title) if owner is not None else None
        if owner is None or defining is None:
            return []
        method = self._classes[defining].methods[title]
        if not _only_raises(method):
            return [method]
        return [
            known.methods[title]
            for kind, known in sorted(self._classes.items())
            if kind != defining and title in known.methods and self._inherits(kind, owner)
        ]

    def _inherits(self, kind: str, base: str, depth: int = 0) -> bool:
        """Whether the module's class `kind` is `base` or derives from it within the module."""
        known = self._classes.get(kind)
        if kind == base or known is None or depth > 5:
            return kind == base
        return any(self._inherits(each, base, depth + 1) for each in known.bases)

    def _helper_marker(self, function: cst.FunctionDef, depth: int) -> str | None:
        """What a function of the module defined before the call does every time it is called
        (`get_logits()` runs the model, `sample()` samples a token), with the functions it
        defines: nothing where it runs a step loop of its own (`train_one_epoch()`)."""
        key = (id(function), depth)  # deeper, fewer calls are followed: another answer
        known = self._known()
        judged = self._helpers.get(key)
        if judged is None or judged[1] < known:
            self._helpers[key] = (None, known)  # a recursive call says nothing more
            loops = [node for node in self._own(function.body, NESTED_SCOPES) if type(node) in (cst.For, cst.While)]
            looped = any(self.loop_step(loop) for loop in loops)
            # what its closures do too: they run when it calls them (PLMS's `get_model_output`)
            inner = self._own(function.body, (cst.ClassDef, cst.Lambda))
            closures = [node.body for node in inner if type(node) is cst.FunctionDef]
            marker = None if looped else self._markers(function.body, *closures, depth=depth + 1)
            self._helpers[key] = (marker, known)
        return self._helpers[key][0]

    def _iterates_loader(self, node: cst.BaseExpression, depth: int = 0) -> bool:
        """`loader`, `self.loader_train`, a name bound to `DataLoader(...)`, and those wrapped in
        `enumerate(...)`, `tqdm(...)`, `zip(...)`, also through a name (`pbar = tqdm(loader)`,
        audiocraft's `enumerate(lp)` after `lp = self.log_progress(stage, loader, ...)`), and a
        choice between two of those."""
        if type(node) in (cst.Name, cst.Attribute):
            name = patterns.target_name(node) or ""
            if _LOADER_NAME.search(name) and not _LOADER_SETTING.search(name):
                return True
            bound = self.resolver.assigned_value(node) if type(node) is cst.Name else None
            return type(bound) in (cst.Call, cst.IfExp) and depth < 3 and self._iterates_loader(bound, depth + 1)
        if type(node) is cst.IfExp:  # ZoeDepth's `pbar = tqdm(enumerate(loader)) if rank0 else enumerate(loader)`
            return self._iterates_loader(node.body, depth) and self._iterates_loader(node.orelse, depth)
        if type(node) is cst.Call:
            if self.resolver.qualified_names(node.func) & DATALOADERS:
                return True
            return depth < 3 and any(
                self._iterates_loader(arg.value, depth + 1) for arg in node.args if arg.keyword is None and not arg.star
            )
        return False

    # --- what the module defines and calls, for device indexes -----------------------------------

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        """Note the class a function is a method of (its callers spell it `self.f(...)`), and
        whether a decorator skips it off CUDA."""
        holder = self.ancestors[-2] if len(self.ancestors) > 1 else None
        self._methods[id(node)] = holder.name.value if type(holder) is cst.ClassDef else None
        if holder is None or type(holder) is not cst.ClassDef:
            self._functions[node.name.value] = node
        elif holder.name.value in self._classes and len(self.ancestors) == 3:
            self._classes[holder.name.value].methods[node.name.value] = node
            self._titles.add(node.name.value)
        self._skip_decorators(node)

    def _note_call(self, node: cst.Call) -> None:
        """Note a call of the module's own functions (by name or through `self.`), what is
        handed to it (the module's functions, the parameters of the function making the
        call), and the function that `mp.spawn` starts."""
        func = node.func
        scope = self.resolver.scope
        if scope.kind == "function" and scope.owner is not None:
            if type(func) is cst.Name and scope.values.get(func.value) == _PARAMETER:
                self._note_handed_on(func.value, node, scope)  # a parameter called
        for arg in node.args:
            value = arg.value
            if type(value) is cst.Name and scope.owner is not None and scope.values.get(value.value) == _PARAMETER:
                if not arg.star and scope.kind == "function":
                    self._note_handed_on(value.value, node, scope)  # a parameter handed on
            if self._names_function(arg):  # `gpu_timer(train_step)`
                assert type(arg.value) is cst.Name
                self._callbacks.setdefault(arg.value.value, []).append(
                    _Site(node, self.resolver.scope, tuple(self.ancestors))
                )
            elif type(arg.value) is cst.Attribute and _is_self(arg.value.value) and not arg.star:
                # MMDetection's `multi_apply(self.loss_single, ...)`, `checkpoint(self._forward, x)`
                self._callbacks.setdefault(f"self.{arg.value.attr.value}", []).append(
                    _Site(node, self.resolver.scope, tuple(self.ancestors))
                )
        if type(func) is cst.Name:
            site = _Site(node, self.resolver.scope, tuple(self.ancestors))
            for name in (func.value, *self._picked(func)):
                self._calls.setdefault(name, []).append(site)
        elif type(func) is cst.Attribute and _is_self(func.value):
            site = _Site(node, self.resolver.scope, tuple(self.ancestors), 1)
            self._calls.setdefault(func.attr.value, []).append(site)
            for value, _ in self._self_attributes.get(func.attr.value, []):
                if type(value) is cst.Name and (
                    value.value in self.module_functions() or value.value in self._functions
                ):
                    # CenterNet's `self.neg_loss = _neg_loss`: the module's function, given no `self`;
                    # also one defined in a method (seed-vc's `self.semantic_fn = semantic_fn` in `__init__`)
                    self._calls.setdefault(value.value, []).append(
                        _Site(node, self.resolver.scope, tuple(self.ancestors))
                    )
            if func.attr.value == "register_buffer":
                self._note_buffer(node)
        elif type(func) is cst.Attribute and func.attr.value in ("append", "extend") and node.args:
            if is_self_attribute(func.value):  # `self.filters.append(Blank())`
                assert type(func.value) is cst.Attribute
                item = node.args[0].value
                items = item.elements if func.attr.value == "extend" and type(item) in (cst.List, cst.Tuple) else ()
                for each in [e.value for e in items] or [item]:
                    self._self_items.setdefault(func.value.attr.value, []).append((each, self.resolver.scope))
        elif type(func) is cst.Attribute and func.attr.value in self._titles and self._may_hold_instance(func.value):
            site = _Site(node, self.resolver.scope, tuple(self.ancestors), 1, func.value)
            self._calls.setdefault(func.attr.value, []).append(site)  # `self.decoder.update(...)`
        spawns = type(func) is cst.Attribute and func.attr.value in ("spawn", "start_processes")
        if spawns and node.args and self.resolver.qualified_names(func) & _SPAWNERS:
            spawned = node.args[0].value
            if type(spawned) is cst.Name and node.args[0].keyword is None:
                self._spawned.add(spawned.value)

    def _note_handed_on(self, name: str, call: cst.Call, scope: Scope) -> None:
        """A parameter, bound nowhere else, that its function calls or hands to a call."""
        assert scope.owner is not None
        self._handed_on.setdefault(id(scope.owner), []).append((name, _Site(call, scope, tuple(self.ancestors))))

    def _picked(self, func: cst.Name) -> list[str]:
        """The functions a name bound to a pick may hold: from a table (`sample_fn = {"heun":
        sample_heun, "dpm": sample_dpm}[sampler]`), by a conditional expression, or in
        branches (vits' `spline_fn = rational_quadratic_spline` in one, the unconstrained
        spline in the other): calling it calls one of them."""
        picked = []
        for value in self.resolver.assigned_values(func):
            if type(value) is cst.Subscript and type(value.value) is cst.Dict:
                elements = value.value.elements
                picked += [e.value for e in elements if type(e) is cst.DictElement and type(e.value) is cst.Name]
            else:
                picked += [value.body, value.orelse] if type(value) is cst.IfExp else [value]
        return [each.value for each in picked if type(each) is cst.Name]

    def _note_buffer(self, call: cst.Call) -> None:
        """`self.register_buffer("queue_ptr", torch.zeros(1))`: `self.queue_ptr` holds that tensor."""
        name, value = patterns.positional(call, 0), patterns.argument(call, 1, "tensor")
        buffer = patterns.string_value(name.value) if name is not None else None
        if buffer and value is not None:
            self._self_attributes.setdefault(buffer, []).append((value.value, self.resolver.scope))
            if not (type(value.value) is cst.Name and value.value.value == "None"):
                self._buffers.add(buffer)

    def visit_For(self, node: cst.For) -> None:
        self._note_loop(node)

    def visit_Return(self, node: cst.Return) -> None:
        function = enclosing_function(self.ancestors)
        if function is not None and node.value is not None:
            line, block = self.ancestors[-1], self.ancestors[-2] if len(self.ancestors) > 1 else None
            value = self._returned(node.value, block, line)
            self._returns.setdefault(id(function), []).append((value, self.resolver.scope))

    def _returned(self, value: cst.BaseExpression, block: cst.CSTNode | None, line: cst.CSTNode) -> cst.BaseExpression:
        """What `return name` in the statement `line` of `block` gives: the value of the last
        plain `name = ...` before it there (seed-vc's `codebooks = torch.stack(codebooks)` after
        `codebooks = [...]`), where nothing since binds the name otherwise; else the name."""
        if type(value) is not cst.Name or type(block) is not cst.IndentedBlock:
            return value
        body = block.body
        position = next((index for index, each in enumerate(body) if each is line), 0)
        for index in range(position - 1, -1, -1):
            assigned = _plain_assignment(body[index], value.value)
            if assigned is not None:
                return assigned
            if value.value in self.names_bound_in(body[index]):
                break
        return value

    def visit_While(self, node: cst.While) -> None:
        self._note_loop(node)

    def _note_loop(self, loop: cst.For | cst.While) -> None:
        """Note the loops of each function, for `called_every_step`, and the class each is in,
        for the methods its body calls through `self.`."""
        self._loop_classes[id(loop)] = _class_name(self.ancestors)
        self._loop_scopes[id(loop)] = self.resolver.scope
        if type(loop) is cst.For:
            self._for_loops.append((loop, self.resolver.scope, (*self.ancestors, loop)))
        function = enclosing_function(self.ancestors)
        if function is not None:
            self._loops.setdefault(id(function), []).append((loop, self.resolver.scope))

    def visit_List(self, node: cst.List) -> None:
        """A list of the class's own methods (HRNet's OHEM loss: `functions = [self._ce_forward] *
        (n - 1) + [self._ohem_forward]`, then `func(x, target)` for each): a table the method
        that makes it calls from, as if it called each there, with arguments unknown."""
        for element in node.elements:
            value = element.value
            if type(value) is cst.Attribute and _is_self(value.value):
                site = _Site(cst.Call(value, args=[_UNKNOWN_ARGUMENTS]), self.resolver.scope, tuple(self.ancestors), 1)
                self._calls.setdefault(value.attr.value, []).append(site)

    def visit_Assign(self, node: cst.Assign) -> None:
        for target in node.targets:
            pairs = [(target.target, node.value)]
            if type(target.target) is cst.Tuple and type(node.value) is cst.Tuple:
                if len(target.target.elements) == len(node.value.elements):  # `self.x, self.y = a, b`
                    pairs = [(t.value, v.value) for t, v in zip(target.target.elements, node.value.elements)]
            for name, value in pairs:
                if type(name) is cst.Attribute and is_self_attribute(name):
                    self._self_attributes.setdefault(name.attr.value, []).append((value, self.resolver.scope))
                elif type(name) is cst.Attribute and name.attr.value == "forward" and type(value) is cst.Name:
                    self._patched_forwards.add(value.value)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        """`self.low: int = 0` (encodec's arithmetic coder) binds the attribute as `=` does."""
        if node.value is not None and type(node.target) is cst.Attribute and is_self_attribute(node.target):
            self._self_attributes.setdefault(node.target.attr.value, []).append((node.value, self.resolver.scope))

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        if type(node.target) is cst.Attribute and is_self_attribute(node.target):
            self._updated_attributes.add(node.target.attr.value)

    @property
    def scope(self) -> Scope:
        """The scope the walk is in: what `holds_index` needs to be asked later."""
        return self.resolver.scope

    def holds_index(self, node: cst.BaseExpression, scope: Scope, depth: int = 0) -> bool:
        """Whether `node`, evaluated in `scope`, is an integer: given where a device goes, an
        accelerator's index. Asked during the walk it knows the callers seen so far; after it, all."""
        if depth > _DEPTH:
            return False
        if type(node) is cst.Integer:
            return True
        if type(node) is cst.UnaryOperation and type(node.operator) is cst.Minus:
            return self.holds_index(node.expression, scope, depth + 1)
        if type(node) is cst.BinaryOperation and type(node.operator) in _INT_OPERATORS:
            if type(node.operator) is cst.Modulo and self._counts_devices(node.right, scope, depth + 1):
                return True  # Real-ESRGAN's `torch.device(i % num_gpus)`: whatever `i` is, one of the devices
            return self.holds_index(node.left, scope, depth + 1) and not _is_string(node.right)
        if type(node) is cst.Call:
            func = node.func
            if type(func) is cst.Name and func.value in _INT_BUILTINS and not self._bound_in(func.value, scope):
                return True
            names = self.resolver.qualified_names(func)
            if names & _INDEX_CALLS:
                return True
            if not names and type(func) is cst.Name:  # AnimateDiff's `local_rank = init_dist(...)`
                returned = self.returned_values(node)
                return bool(returned) and all(self.holds_index(value, where, depth + 1) for value, where in returned)
            # `distributed.get_local_rank()` (dinov2's own), `hvd.local_rank()`: named for what it returns
            return any(_INDEX_NAME.match(name.rpartition(".")[2].removeprefix("get_")) for name in names)
        if type(node) is cst.Name:
            return self._name_holds_index(node.value, scope, depth)
        if type(node) is cst.Attribute:
            owner = node.value
            if type(owner) is cst.Name and owner.value == "self":
                values = self._self_attributes.get(node.attr.value, [])
                if values:
                    return all(self.holds_index(value, where, depth + 1) for value, where in values)
            return _INDEX_NAME.match(node.attr.value) is not None and not patterns.is_device_name(owner_name(owner))
        if type(node) is cst.Subscript and len(node.slice) == 1 and type(node.slice[0].slice) is cst.Index:
            return self._holds_indexes(node.value, scope, depth + 1)  # `gpu_ids[0]`
        return False

    def _counts_devices(self, node: cst.BaseExpression, scope: Scope, depth: int) -> bool:
        """Whether `node` is a device runtime's count (`torch.cuda.device_count()`), also through
        a name bound to one alone."""
        if depth > _DEPTH:
            return False
        if type(node) is cst.Call:
            return any(name.endswith(".device_count") for name in self.resolver.qualified_names(node.func))
        if type(node) is not cst.Name:
            return False
        owner = self._binder(node.value, scope)
        values = owner.values.get(node.value, ()) if owner is not None and node.value not in owner.imports else ()
        return bool(values) and all(
            value is not None and self._counts_devices(value, owner, depth + 1) for value in values
        )

    def _holds_indexes(self, node: cst.BaseExpression, scope: Scope, depth: int) -> bool:
        """Whether `node` is a list of device indexes: `[0, 1]`, `list(range(n))`, a name or
        self attribute bound to one, a parameter that defaults to one and is given one where
        given (LPIPS's `gpu_ids=[0]`), or, where nothing says what it holds, a name for one
        (`opt.gpu_ids`, `device_ids`)."""
        if depth > _DEPTH:
            return False
        if type(node) in (cst.List, cst.Tuple):
            elements = [e.value for e in node.elements if type(e) is cst.Element]
            return bool(elements) and all(self.holds_index(e, scope, depth + 1) for e in elements)
        if type(node) is cst.Call and type(node.func) is cst.Name and node.func.value in ("list", "range"):
            if not self._bound_in(node.func.value, scope):
                return node.func.value == "range" or (
                    len(node.args) == 1 and self._holds_indexes(node.args[0].value, scope, depth + 1)
                )
        if type(node) is cst.Attribute:
            owner = node.value
            values = self._self_attributes.get(node.attr.value, []) if owner_name(owner) == "self" else []
            if values:
                return all(self._holds_indexes(value, where, depth + 1) for value, where in values)
            return _INDEXES_NAME.match(node.attr.value) is not None
        if type(node) is not cst.Name:
            return False
        owner = self._binder(node.value, scope)
        if owner is None or node.value in owner.imports:
            return False
        values = [value for value in owner.values.get(node.value, ()) if value is not None]
        if values and len(values) == len(owner.values[node.value]):
            return all(self._holds_indexes(value, owner, depth + 1) for value in values)
        function = owner.owner
        if owner.kind != "function" or values or type(function) is not cst.FunctionDef:
            return False
        default = self.in_scope(owner, partial(self.resolver.parameter_default, node))
        passed = self.passed_arguments(function, node.value)
        if default is not None and not self._holds_indexes(default, owner, depth + 1):
            return False
        if passed:
            return all(self._holds_indexes(arg, where, depth + 1) for arg, where in passed)
        return default is not None or (passed is not None and _INDEXES_NAME.match(node.value) is not None)

    def _bound_in(self, name: str, scope: Scope) -> bool:
        return self._binder(name, scope) is not None

    @staticmethod
    def _binder(name: str, scope: Scope) -> Scope | None:
        """The scope that binds `name` as `scope` sees it, if any."""
        owner: Scope | None = scope
        while owner is not None and name not in owner.bound:
            owner = owner.parent
        return owner

    def _name_holds_index(self, name: str, scope: Scope, depth: int) -> bool:
        owner = self._binder(name, scope)
        if owner is None or name in owner.imports:
            return False
        values = [value for value in owner.values.get(name, ()) if value is not None]
        if values and len(values) == len(owner.values[name]):
            return all(self.holds_index(value, owner, depth + 1) for value in values)
        if owner.kind != "function" or values:
            return False
        return self._parameter_holds_index(name, owner, depth)

    def _parameter_holds_index(self, name: str, scope: Scope, depth: int) -> bool:
        """A parameter holds an index when every call of its function within the module passes
        one, when the function is what `mp.spawn` starts (its first parameter is the process
        index), or, where the module never calls it, when it is named for one (`rank`, `gpu_id`)."""
        function = scope.owner
        if type(function) is not cst.FunctionDef:
            return False
        params = [p.name.value for p in (*function.params.posonly_params, *function.params.params)]
        if name not in params:
            return False
        position = params.index(name)
        title, owner = function.name.value, self._methods.get(id(function))
        if title in self._spawned and owner is None and position == 0:
            return True
        passed = self.passed_arguments(function, name)
        if passed is None:
            return False
        if passed:
            return all(self.holds_index(arg, where, depth + 1) for arg, where in passed)
        return _INDEX_NAME.match(name) is not None

    def passed_arguments(self, function: cst.FunctionDef, name: str) -> list[tuple[cst.BaseExpression, Scope]] | None:
        """What the module's calls of `function` pass for its parameter `name`, each with the
        scope of the call (empty where the module never calls it); None where a call passes
        nothing for it (the default, or what `*args` may hold)."""
        passed = self._passed_at(function, name)
        return None if passed is None else [(arg, site.scope) for arg, site in passed]

    def _passed_at(self, function: cst.FunctionDef, name: str) -> list[tuple[cst.BaseExpression, _Site]] | None:
        """`passed_arguments`, each with its call site."""
        title, owner = function.name.value, self._methods.get(id(function))
        passed = []
        for site in self._sites(title, owner):
            if not self._calls_method_of(site, title, owner):
                continue  # another object's method of that name (RWKV's `wkv_cuda.forward(B, T, C, ...)`)
            arg = _argument(site.call, _position(site, function, name), name)
            if arg is None:
                return None
            passed.append((arg, site))
        return passed

    def as_walked(self, ancestors: Sequence[cst.CSTNode], scope: Scope, question: Callable[[], _T]) -> _T:
        """The answer to `question` as the walk would give it at a node it has left (the nodes
        down to it, its scope): for what a rule asks at the end of the module only of the few
        nodes it still needs. The walk's own list of ancestors, which rules read, is set in place."""
        walking, elsewhere, path = self.resolver.scope, self.elsewhere, list(self.ancestors)
        self.resolver.scope, self.elsewhere = scope, False
        self.ancestors[:] = ancestors  # type: ignore[index]
        try:
            return question()
        finally:
            self.resolver.scope, self.elsewhere = walking, elsewhere
            self.ancestors[:] = path  # type: ignore[index]

    def _at_site(self, site: _Site, question: Callable[[], _T]) -> _T:
        """The answer to `question` asked as the walk would at a call site: names resolved in
        its scope, the loops around it known (what a loop target holds)."""
        saved = self.resolver.scope, self.elsewhere, self.ancestors
        self.resolver.scope, self.elsewhere, self.ancestors = site.scope, False, site.ancestors
        try:
            return question()
        finally:
            self.resolver.scope, self.elsewhere, self.ancestors = saved

    def _sites(self, title: str, owner: str | None) -> list[_Site]:
        """Calls of a function (of a method of `owner` through `self.`, of `__init__` through
        its class, of `__call__` through an attribute of `self` bound to an instance) that the
        module makes."""
        if owner is None:  # by name, or through an attribute of `self` bound to it (given no `self`)
            return [site for site in self._calls.get(title, []) if site.skipped == 0]
        if title == "__init__":  # `Trainer(...)`: its first parameter, `self`, is not passed
            return [replace(site, skipped=1) for site in self._calls.get(owner, []) if site.skipped == 0]
        if title == "__call__":  # `self.per_stage(losses)` after `self.per_stage = PerStageMetrics(...)`
            held = sorted(
                attribute
                for attribute, values in self._self_attributes.items()
                if any(type(v) is cst.Call and type(v.func) is cst.Name and v.func.value == owner for v, _ in values)
            )
            return [site for attribute in held for site in self._calls.get(attribute, []) if site.skipped == 1]
        return [site for site in self._calls.get(title, []) if site.skipped == 1]  # `self.step(...)`


def runs_model(call: cst.Call) -> bool:
    """A call of a model by its name (`model(x)`, `self.net(x, t)`, `denoiser(x, sigma)`)."""
    func = call.func
    named = func.value if type(func) is cst.Name else func.attr.value if is_self_attribute(func) else ""  # type: ignore[union-attr]
    return bool(named) and bool(_MODEL_NAME.search(named))


def runs_given_model(call: cst.Call) -> bool:
    """A function named as one that runs a model, given the model (fish-speech's
    `decode_one_token(model=model, x=cur_token, ...)`)."""
    func = call.func
    return (
        type(func) is cst.Name
        and _MODEL_RUN.match(func.value) is not None
        and any(type(arg.value) is cst.Name and _MODEL_NAME.search(arg.value.value) for arg in call.args)
    )


def handles_model(method: str) -> bool:
    """A method that fetches or sets up a model rather than runs it (`get_eval_model`, `load_weights`)."""
    return _MODEL_HANDLING.match(method) is not None


def in_forward(ancestors: Sequence[cst.CSTNode]) -> bool:
    """Inside the body of a method named `forward` (nn.Module.forward, autograd.Function.forward):
    what runs, and is traced, once per step. Not a forward that only raises: GPTQ's `Catcher`
    records the first layer's inputs (`.cpu()` copies too) and stops the model, once per
    calibration sample; it computes no step."""
    return _in_method(ancestors, "forward")


def in_function_backward(ancestors: Sequence[cst.CSTNode]) -> bool:
    """Inside the static `backward` of an autograd Function (torchtitan's vocab-parallel cross
    entropy): autograd runs it once per step, after the forward."""
    return _in_method(ancestors, "backward", static=True)


def _in_method(ancestors: Sequence[cst.CSTNode], name: str, static: bool = False) -> bool:
    for index, node in enumerate(ancestors):
        if (
            type(node) is cst.FunctionDef
            and node.name.value == name
            and (not static or is_static(node))
            and index >= 2
            and type(ancestors[index - 2]) is cst.ClassDef
            and index + 1 < len(ancestors)
            and ancestors[index + 1] is node.body
        ):
            return not _only_raises(node)
    return False


def _only_raises(function: cst.FunctionDef) -> bool:
    """A function that ends raising and returns nowhere: it never gives a result."""
    last = function.body.body[-1] if isinstance(function.body, cst.IndentedBlock) else function.body
    if not (isinstance(last, cst.SimpleStatementLine) and type(last.body[-1]) is cst.Raise):
        return False
    return not any(type(node) is cst.Return for node in descendants(function.body, NESTED_SCOPES))


def _is_dataset(base: cst.BaseExpression, resolver: Resolver) -> bool:
    names = resolver.qualified_names(base) or {get_full_name_for_node(base) or ""}
    return any(name.endswith("Dataset") or name.startswith("torchvision.datasets.") for name in names)


def off_the_step_path(
    ancestors: Sequence[cst.CSTNode],
    resolver: Resolver | None = None,
    *,
    periodic_exempts: bool = True,
    start: int = 0,
) -> bool:
    """Inside a `raise`, an `except` clause or an `if` body that ends raising (runs only on the
    error path), the
    body of an `if step % N == 0:` (reading back every N steps is the remedy, not the problem;
    not where `periodic_exempts` is False: a new shape every N steps compiles a graph each
    time, and what it resizes, every step after) or of an `if i < 3:` on the index of an
    enclosing `enumerate` or `range` loop or a count a loop keeps (the first few steps only);
    with a `resolver` at the node, also `if log_step:` where `log_step = step % N == 0`, and
    `if torch.onnx.is_in_onnx_export():` (or another test that holds only while the model is
    exported: not on the device), and an interval counted from the last pass
    (`if step - last_save >= N:` that sets `last_save = step`), and the body of a test of a
    debugging flag (`if opt.debug > 0:`); what follows `if step % N: return` in its block. A
    periodic block that steps the optimizer is gradient accumulation's training step, on the
    path. `start`: where in `ancestors` to begin (a step loop's place; the first steps are
    counted from there), what lies above it still known to the tests (the class whose
    predicate a test calls)."""
    for index in range(start, len(ancestors)):
        node = ancestors[index]
        if type(node) is cst.Raise or type(node) is cst.ExceptHandler:
            return True  # an `except` clause runs only where its `try` failed: YOLOX's out-of-memory retry
        if periodic_exempts and type(node) is cst.IndentedBlock and index + 1 < len(ancestors):
            if any(
                _leaves_unless_periodic(statement, resolver, ancestors[:index])
                for statement in _before(node, ancestors[index + 1])
            ):
                return True  # imagen's `if total_steps % self.checkpoint_every: return`, then the save
        if type(node) is cst.Assert and index + 1 < len(ancestors) and ancestors[index + 1] is node.msg:
            return True  # an assertion's message is made only when it fails
        if type(node) is cst.If and index + 1 < len(ancestors) and ancestors[index + 1] is node.body:
            every_n = periodic_exempts and periodic(node.test, resolver, ancestors=ancestors[:index])
            if (every_n and not _accumulates(node.body)) or _first_steps(node.test, ancestors[start:index], resolver):
                return True
            if periodic_exempts and _since_last(node):
                return True
            if resolver is not None and _exporting(node.test, resolver):
                return True
            if raises(node.body, resolver):
                return True  # `if not math.isfinite(loss): logging.error(...); raise ...`: the error path
            if _asks_non_finite(node.test):
                return True  # GroundingDINO's `if output.isnan().any() | output.isinf().any():` reports
            if _debugging(node.test):
                return True  # CenterNet's `if opt.debug > 0: self.debug(batch, output, iter_id)`
    return False


def _before(block: cst.IndentedBlock, child: cst.CSTNode) -> Iterator[cst.BaseStatement]:
    """The statements of a block ahead of `child`."""
    for statement in block.body:
        if statement is child:
            return
        yield statement


def _leaves_unless_periodic(
    statement: cst.CSTNode, resolver: Resolver | None, ancestors: Sequence[cst.CSTNode]
) -> bool:
    """`if step % N: return` (or `continue`, or `% N != 0`, also as one side of an `or`:
    stable-audio-tools' `if (step - 1) % self.demo_every != 0 or self.last_demo_step == step:
    return`): what follows it runs every N steps."""
    if type(statement) is not cst.If or statement.orelse is not None:
        return False
    leaves = type(_last_statement(statement.body)) in (cst.Return, cst.Continue)
    return leaves and _off_period(statement.test, resolver, ancestors)


def _off_period(test: cst.BaseExpression, resolver: Resolver | None, ancestors: Sequence[cst.CSTNode]) -> bool:
    """`step % N`, `step % N != 0`, or an `or` with one of those: true on all but every Nth step."""
    if type(test) is cst.BooleanOperation and type(test.operator) is cst.Or:
        return _off_period(test.left, resolver, ancestors) or _off_period(test.right, resolver, ancestors)
    if type(test) is cst.Comparison and len(test.comparisons) == 1:
        link = test.comparisons[0]
        if type(link.operator) not in (cst.NotEqual, cst.GreaterThan) or not _is_zero(link.comparator):
            return False
        test = test.left
    return _is_modulo(test, resolver, ancestors)


def _ends_the_loop(inner: Sequence[cst.CSTNode]) -> bool:
    """Whether, below a step loop (`inner` starts with it), the node is in the body of an `if`
    that ends the loop for good: with a `return`, or a `break` out of the step loop itself.
    The body runs once, after the last step; the test itself runs every step."""
    for index, node in enumerate(inner[1:], 1):
        if type(node) is not cst.If or index + 1 >= len(inner) or inner[index + 1] is not node.body:
            continue
        last = _last_statement(node.body)
        nested = any(type(each) in (cst.For, cst.While) for each in inner[1:index])
        if type(last) is cst.Return or (type(last) is cst.Break and not nested):
            return True
    return False


def _debugging(test: cst.BaseExpression) -> bool:
    """A test of a debugging flag (`if opt.debug > 0:`, `if args.debug:`, stylegan3's `if
    debug_percentile is not None:`; not `verbose`, often on): what it guards runs only while
    someone debugs or looks, not in the run being ported."""
    if type(test) is cst.Comparison and len(test.comparisons) == 1:
        against = test.comparisons[0].comparator
        if is_number(against) or (type(against) is cst.Name and against.value == "None"):
            test = test.left
    name = test.value if type(test) is cst.Name else test.attr.value if type(test) is cst.Attribute else ""
    return _DEBUG_FLAG.fullmatch(name) is not None  # type: ignore[arg-type]


def _accumulates(body: cst.BaseSuite) -> bool:
    """A periodic block that steps the optimizer (`if step % accum_iter == 0:
    optimizer.step()`, also in a branch of its own: MiniGPT-4's `if use_amp:
    scaler.step(optimizer)` / `else: optimizer.step()`): gradient accumulation, whose block is
    the training step itself."""
    return any(
        type(node) is cst.Expr and type(node.value) is cst.Call and _steps_optimizer(node.value)
        for node in descendants(body, NESTED_SCOPES)
    )


def _since_last(test: cst.If) -> bool:
    """`if global_step - last_save >= args.save_steps:` whose body sets `last_save =
    global_step` (LoRA's checkpoints): once per interval of steps, counted from the last pass."""
    for part in _conjuncts(test.test):
        elapsed = _elapsed(part) if type(part) is cst.Comparison else None
        if elapsed is None:
            continue
        now, last = patterns.dotted(elapsed.left), patterns.dotted(elapsed.right)
        if (
            now
            and last
            and any(
                type(node) is cst.Assign
                and patterns.dotted(node.value) == now
                and any(patterns.dotted(target.target) == last for target in node.targets)
                for node in descendants(test.body, NESTED_SCOPES)
            )
        ):
            return True
    return False


def _conjuncts(test: cst.BaseExpression) -> list[cst.BaseExpression]:
    if type(test) is cst.BooleanOperation and type(test.operator) is cst.And:
        return [*_conjuncts(test.left), *_conjuncts(test.right)]
    return [test]


def _asks_non_finite(test: cst.BaseExpression) -> bool:
    """A test that holds only where values have gone NaN or infinite (`x.isnan().any()`,
    `torch.isinf(loss)`, `not torch.isfinite(x).all()`): its body is the anomaly's path, not the
    step's."""
    called, negated = set(), False  # one pass over the test: asked for every `if` around every node
    for node in (test, *descendants(test)):
        if type(node) is cst.Call and type(node.func) in (cst.Name, cst.Attribute):
            called.add(node.func.attr.value if type(node.func) is cst.Attribute else node.func.value)
        elif type(node) is cst.UnaryOperation and type(node.operator) in (cst.Not, cst.BitInvert):
            negated = True
    return bool(called & {"isnan", "isinf"}) or (negated and "isfinite" in called)


def raises(body: cst.BaseSuite, resolver: Resolver | None) -> bool:
    """A block that ends by raising or ending the program (`sys.exit(1)`), or by a choice
    between raising and returning (`if raise_on_error: raise ... else: return`)."""
    last = _last_statement(body)
    if type(last) is cst.Raise or _ends_program(last, resolver):
        return True
    if type(last) is cst.If and type(last.orelse) is cst.Else:
        branches = (last.body, last.orelse.body)
        return any(raises(branch, resolver) for branch in branches) and all(_exits_only(branch) for branch in branches)
    return False


def _last_statement(body: cst.BaseSuite) -> cst.CSTNode | None:
    """A block's last statement: the last small one where it ends with a line of them, or is
    one line (`if x: raise E`)."""
    if not body.body:
        return None
    last = body.body[-1]
    return last.body[-1] if type(last) is cst.SimpleStatementLine else last


def _ends_program(statement: cst.CSTNode | None, resolver: Resolver | None) -> bool:
    """`sys.exit(1)`, `os._exit(1)`, or the builtins `exit()` and `quit()`."""
    if resolver is None or not (type(statement) is cst.Expr and type(statement.value) is cst.Call):
        return False
    func = statement.value.func
    if type(func) is cst.Name and func.value in ("exit", "quit"):
        return resolver.is_free(func.value)
    return bool(resolver.qualified_names(func) & {"sys.exit", "os._exit"})


def _exits_only(body: cst.BaseSuite) -> bool:
    return type(_last_statement(body)) in (cst.Raise, cst.Return)


def _first_steps(test: cst.BaseExpression, ancestors: Sequence[cst.CSTNode], resolver: Resolver | None) -> bool:
    """`i < N` or `i == N` (alone or in an `and`) where `i` counts the steps of an enclosing loop
    (`for i, batch in enumerate(loader)`, `for i in range(n)`, `count += 1` in its body), is
    bound once to that count plus more (`ni = i + nb * epoch`, with a `resolver`), or is a
    parameter named for the step count (`batch_idx`)."""
    if type(test) is cst.BooleanOperation:
        return type(test.operator) is cst.And and (
            _first_steps(test.left, ancestors, resolver) or _first_steps(test.right, ancestors, resolver)
        )
    if type(test) is not cst.Comparison or len(test.comparisons) != 1 or type(test.left) is not cst.Name:
        return False
    link = test.comparisons[0]
    if not (
        type(link.operator) in (cst.LessThan, cst.LessThanEqual, cst.Equal) and type(link.comparator) is cst.Integer
    ):
        return False
    counters = {_counter(loop, resolver) for loop in ancestors if type(loop) is cst.For} - {None}
    counters.update(name for loop in ancestors if type(loop) in (cst.For, cst.While) for name in _counted(loop))
    if test.left.value in counters or _step_parameter(test.left.value, ancestors):
        return True
    bound = resolver.assigned_value(test.left) if resolver is not None else None
    return (
        type(bound) is cst.BinaryOperation
        and type(bound.operator) is cst.Add
        and any(type(side) is cst.Name and side.value in counters for side in (bound.left, bound.right))
    )


def _step_parameter(name: str, ancestors: Sequence[cst.CSTNode]) -> bool:
    """A parameter of the enclosing function that counts steps (`batch_idx` of Lightning's
    `training_step`, `ni` of a batch-end callback), by its conventional name."""
    function = next((node for node in reversed(ancestors) if type(node) is cst.FunctionDef), None)
    if function is None or not _STEP_COUNTER.fullmatch(name):
        return False
    return name in parameter_names(function)


def parameter_names(function: cst.FunctionDef) -> frozenset[str]:
    """The names of a function's parameters, not `*args` or `**kwargs`."""
    params = function.params
    return frozenset(param.name.value for param in (*params.posonly_params, *params.params, *params.kwonly_params))


def _counter(loop: cst.For, resolver: Resolver | None) -> str | None:
    """The name that counts a loop's iterations: `i` in `for i, x in enumerate(...)` and in
    `for i in range(...)`, also through a name bound to the enumeration (`pbar =
    enumerate(loader)`, then `pbar = tqdm(pbar)`, with a `resolver`)."""
    call = loop.iter
    if type(call) is cst.Name and resolver is not None:
        values = resolver.values_before_updates(call)
        call = next((value for value in values if _calls(value, "enumerate")), call)
    target = loop.target
    if _calls(call, "enumerate") and type(target) is cst.Tuple and target.elements:
        target = target.elements[0].value
    elif not _calls(call, "range"):
        return None
    return target.value if type(target) is cst.Name else None


def _counted(loop: cst.For | cst.While) -> Iterator[str]:
    """Names the loop's body counts up by one each pass (`num_total += 1`)."""
    for statement in loop.body.body:
        if type(statement) is cst.SimpleStatementLine:
            for small in statement.body:
                if (
                    type(small) is cst.AugAssign
                    and type(small.operator) is cst.AddAssign
                    and type(small.target) is cst.Name
                    and type(small.value) is cst.Integer
                    and small.value.value == "1"
                ):
                    yield small.target.value


def _over_samples(loop: cst.For, resolver: Resolver) -> bool:
    """A loop over the samples of a batch or the boxes of an image, `for b in range(x.shape[0]):`
    (also `x.size(0)`, `len(x)`, or a name bound to one: `num_gt = t.shape[0]`): a `topk` or
    `argmax` in it matches each item's targets (yolov7's label assignment) rather than picking
    the next token, which a loop over a length of its own does."""
    counted = loop.iter
    if not _calls(counted, "range") or len(counted.args) != 1:  # type: ignore[attr-defined]
        return False
    count = counted.args[0].value  # type: ignore[attr-defined]
    counts = resolver.assigned_values(count) if type(count) is cst.Name else [count]
    return bool(counts) and all(_first_size(each) for each in counts)


def _first_size(count: cst.BaseExpression) -> bool:
    """`x.shape[0]`, `x.size(0)`, `len(x)`: the length of a tensor's or a list's first axis."""
    if type(count) is cst.Subscript and type(count.value) is cst.Attribute and count.value.attr.value == "shape":
        index = count.slice[0].slice if len(count.slice) == 1 else None
        return type(index) is cst.Index and type(index.value) is cst.Integer and index.value.value == "0"
    if type(count) is not cst.Call or len(count.args) != 1:
        return False
    first = count.args[0].value
    return _calls(count, "len") or (
        patterns.method_name(count) == "size" and type(first) is cst.Integer and first.value == "0"
    )


_DRAFTING_STEPS = frozenset({"a decoding loop", "a step loop"})
_CHUNKS = "a loop over chunks"


def _over_range(iterated: cst.BaseExpression, resolver: Resolver, seen: frozenset[str] = frozenset()) -> bool:
    """`range(n)`, also as a name bound to one, listed, reversed or wrapped in a progress bar
    (MAR's `indices = list(range(num_iter))`, then `indices = tqdm(indices)`: `seen`, the names
    being looked through, is where such a cycle ends)."""
    if type(iterated) is cst.Name:
        if iterated.value in seen:
            return True
        values = resolver.assigned_values(iterated)
        inner = seen | {iterated.value}
        return bool(values) and len(seen) < 3 and all(_over_range(value, resolver, inner) for value in values)
    if type(iterated) is not cst.Call or not iterated.args:
        return False
    names = resolver.qualified_names(iterated.func)
    builtin = iterated.func.value if type(iterated.func) is cst.Name and not names else ""
    if builtin == "range" or any(name.startswith("tqdm.") and name.endswith(".trange") for name in names):
        return True
    wraps = builtin in ("list", "reversed") or any(
        name.startswith("tqdm.") and name.endswith(".tqdm") for name in names
    )
    return wraps and _over_range(iterated.args[0].value, resolver, seen)


def _carries_state(body: cst.BaseSuite) -> bool:
    """Whether a loop's body reads a name before it binds it again with `=` (MAR's `cur_tokens =
    tokens.clone()` first, `tokens = cur_tokens.clone()` last): each pass goes on from what the
    last one left, as iterative decoding does. A sum (`total += loss`) carries nothing the
    next pass computes from."""
    return bool(_carried_names(body))


def _carried_names(body: cst.BaseSuite) -> set[str]:
    """The names a loop's body reads before it binds them again with `=` (see `_carries_state`),
    statement by statement, in the order they run: a name bound in a branch and read after it
    there (LeRobot's `this_episode_data = ...`, then `episode_data = this_episode_data`) is no
    carried state."""
    bound: set[str] = set()
    read_first: set[str] = set()
    _note_in_order(body, bound, read_first)
    return read_first & bound


def _note_in_order(node: cst.CSTNode, bound: set[str], read_first: set[str]) -> None:
    """Add to `read_first` the names the statements under `node` read before `bound` holds
    them, and to `bound` the names their `=` binds, in the order the statements come."""
    if type(node) is cst.SimpleStatementLine:
        targets = [
            name
            for each in descendants(node, NESTED_SCOPES)
            if type(each) is cst.AssignTarget
            for name in (
                [e.value for e in each.target.elements] if type(each.target) in (cst.Tuple, cst.List) else [each.target]
            )
            if type(name) is cst.Name
        ]
        written = {id(target) for target in targets}
        reads = {
            each.value
            for each in descendants(node, NESTED_SCOPES)
            if type(each) is cst.Name and id(each) not in written
        }
        read_first |= reads - bound
        bound |= {target.value for target in targets}
        return
    for name in child_fields(type(node)):
        value = getattr(node, name)
        for child in value if isinstance(value, (tuple, list)) else (value,):
            if type(child) in NESTED_SCOPES:
                continue
            if isinstance(child, (cst.BaseSuite, cst.BaseStatement, cst.Else, cst.ExceptHandler, cst.Finally)):
                _note_in_order(child, bound, read_first)  # a block, in order
            elif isinstance(child, cst.CSTNode):  # a compound statement's test, items or target
                names = (child, *descendants(child, NESTED_SCOPES))
                read_first |= {each.value for each in names if type(each) is cst.Name} - bound


def _takes_chunks(loop: cst.For) -> bool:
    """A loop that batches by hand, `for i in range(0, n, chunk):` slicing `x[i : i + chunk]`
    (also `x[i : min(i + chunk, n)]`): each pass works on the next batch, as a step does (DINO's
    k-NN evaluation)."""
    counted, counter = loop.iter, loop.target
    if type(counted) is not cst.Call or not _calls(counted, "range") or len(counted.args) != 3:
        return False
    stride = counted.args[2].value
    if type(counter) is not cst.Name or is_number(stride):
        return False
    for node in descendants(loop.body, NESTED_SCOPES):
        if type(node) is cst.Slice and type(node.lower) is cst.Name and node.lower.value == counter.value:
            upper = node.upper
            if upper is not None and any(stride.deep_equals(each) for each in (upper, *descendants(upper))):
                return True
    return False


def _calls(node: cst.BaseExpression, builtin: str) -> bool:
    """`enumerate(...)`, `range(...)`: a call of the builtin by its name."""
    return type(node) is cst.Call and type(node.func) is cst.Name and node.func.value == builtin


def _exporting(test: cst.BaseExpression, resolver: Resolver) -> bool:
    """`torch.onnx.is_in_onnx_export()`, `torch.jit.is_tracing()`..., alone, `and` anything else,
    or `or` another such test."""
    if type(test) is cst.BooleanOperation:
        sides = (_exporting(test.left, resolver), _exporting(test.right, resolver))
        return all(sides) if type(test.operator) is cst.Or else any(sides)
    return type(test) is cst.Call and bool(resolver.qualified_names(test.func) & _EXPORTING)


def periodic(
    test: cst.BaseExpression,
    resolver: Resolver | None = None,
    depth: int = 0,
    ancestors: Sequence[cst.CSTNode] = (),
) -> bool:
    """A test that holds every N steps: `step % N == 0`, `not i % N`, `... or i % N == 0`, a
    name bound once to one (looked up with `resolver`, where given), or a call of the module's
    predicate that says so (`self.check_frequency(idx)` of the class around, in `ancestors`);
    also once per interval of time (`time.time() - last_logging > interval`)."""
    if type(test) is cst.Name and resolver is not None and depth < _NAME_DEPTH:
        bound = resolver.assigned_value(test)  # OLMo's `should_log = self.should_log_optim_metrics_this_step()`
        return bound is not None and periodic(bound, resolver, depth + 1, ancestors)
    if type(test) is cst.BooleanOperation:
        return periodic(test.left, resolver, depth, ancestors) or periodic(test.right, resolver, depth, ancestors)
    if type(test) is cst.Call and depth < _NAME_DEPTH:
        predicate = _predicate(test, ancestors, resolver)
        return predicate is not None and _says_periodically(predicate, resolver, depth + 1)
    if type(test) is cst.UnaryOperation and type(test.operator) is cst.Not:
        return _is_modulo(test.expression, resolver, ancestors)
    if type(test) is cst.Comparison:
        sides = (test.left, *(link.comparator for link in test.comparisons))
        return any(_is_modulo(side, resolver, ancestors) for side in sides) or _every_interval(test, resolver)
    return False


def _every_interval(test: cst.Comparison, resolver: Resolver | None) -> bool:
    """`now - last_logging > args.log_freq_time`: time since the last pass past an interval
    (logging throttled by the clock, vicreg's), which holds once per interval, not per step."""
    elapsed = _elapsed(test)
    return elapsed is not None and _reads_clock(elapsed.left, resolver)


def _elapsed(test: cst.Comparison) -> cst.BinaryOperation | None:
    """The difference a single comparison requires to be large: `now - last` in `now - last >
    n` or `n < now - last`; None otherwise."""
    if len(test.comparisons) != 1:
        return None
    link = test.comparisons[0]
    if type(link.operator) in (cst.GreaterThan, cst.GreaterThanEqual):
        side = test.left
    elif type(link.operator) in (cst.LessThan, cst.LessThanEqual):
        side = link.comparator
    else:
        return None
    return side if type(side) is cst.BinaryOperation and type(side.operator) is cst.Subtract else None


def _reads_clock(node: cst.BaseExpression, resolver: Resolver | None) -> bool:
    """`time.time()`, `time.perf_counter()`, `time.monotonic()`, or a name bound once to one."""
    if type(node) is cst.Name and resolver is not None:
        bound = resolver.assigned_value(node)
        node = bound if bound is not None else node
    return type(node) is cst.Call and resolver is not None and bool(resolver.qualified_names(node.func) & _CLOCKS)


def _predicate(call: cst.Call, ancestors: Sequence[cst.CSTNode], resolver: Resolver | None) -> cst.FunctionDef | None:
    """The function a test calls: a method of the class around (`self.check_frequency(i)`), or
    a function of the module called by name."""
    func = call.func
    if is_self_attribute(func):
        assert type(func) is cst.Attribute
        owner = next((node for node in reversed(ancestors) if type(node) is cst.ClassDef), None)
        body = owner.body.body if owner is not None else ()
        name = func.attr.value
    elif type(func) is cst.Name and resolver is not None and resolver.scope_of(func.value) is resolver.module:
        body, name = resolver.module_node.body, func.value
    else:
        return None
    return next((each for each in body if type(each) is cst.FunctionDef and each.name.value == name), None)


def _says_periodically(function: cst.FunctionDef, resolver: Resolver | None, depth: int) -> bool:
    """Whether a predicate returns True only every N steps: each return is `False`, a periodic
    test, or inside an `if` whose test is periodic (Lightning image loggers' `check_frequency`:
    `if check_idx % self.batch_freq == 0 ...: return True`, then `return False`)."""
    returns = list(_returns_under(function.body, ()))
    says = False
    for value, tests in returns:
        if type(value) is cst.Name and value.value == "False":
            continue
        if not (any(periodic(test, resolver, depth) for test in tests) or periodic(value, resolver, depth)):
            return False
        says = True
    return says


def _returns_under(
    body: cst.BaseSuite, tests: tuple[cst.BaseExpression, ...]
) -> Iterator[tuple[cst.BaseExpression | None, tuple[cst.BaseExpression, ...]]]:
    """Each `return` of a block (not of nested functions), with the tests of the `if`s whose
    bodies hold it."""
    for statement in body.body:
        if type(statement) in (cst.SimpleStatementLine, cst.SimpleStatementSuite):
            yield from ((small.value, tests) for small in statement.body if type(small) is cst.Return)
        elif type(statement) is cst.If:
            yield from _returns_in_if(statement, tests)
        elif not isinstance(statement, NESTED_SCOPES) and isinstance(statement, cst.BaseCompoundStatement):
            for part in (statement.body, *_other_suites(statement)):
                yield from _returns_under(part, tests)


def _returns_in_if(
    node: cst.If, tests: tuple[cst.BaseExpression, ...]
) -> Iterator[tuple[cst.BaseExpression | None, tuple[cst.BaseExpression, ...]]]:
    yield from _returns_under(node.body, (*tests, node.test))
    if type(node.orelse) is cst.If:
        yield from _returns_in_if(node.orelse, tests)
    elif node.orelse is not None:
        yield from _returns_under(node.orelse.body, tests)


def _other_suites(statement: cst.BaseCompoundStatement) -> list[cst.BaseSuite]:
    """The blocks of a compound statement besides its body: handlers, `else`, `finally`."""
    suites = [handler.body for handler in getattr(statement, "handlers", ())]
    for field_name in ("orelse", "finalbody"):
        part = getattr(statement, field_name, None)
        if part is not None:
            suites.append(part.body)
    return suites


def _is_modulo(node: cst.BaseExpression, resolver: Resolver | None, ancestors: Sequence[cst.CSTNode] = ()) -> bool:
    """`step % N`, but not `% 1`, which holds every step (lit-llama's `log_interval = 1`), nor a
    size's (BasicVSR++'s `lqs.size(1) % 2 == 0`, an even number of frames: every step alike),
    nor a period an item of an enclosing loop sets (stylegan3's `batch_idx % phase.interval`
    in `for phase in phases:`, where the main phases' interval is 1)."""
    if type(node) is not cst.BinaryOperation or type(node.operator) is not cst.Modulo or _a_size(node.left):
        return False
    if _set_per_item(node.right, ancestors):
        return False
    every = node.right
    if type(every) is cst.Name and resolver is not None:
        every = resolver.assigned_value(every) or every
    return not (type(every) is cst.Integer and every.evaluated_value == 1)


def _set_per_item(divisor: cst.BaseExpression, ancestors: Sequence[cst.CSTNode]) -> bool:
    """Whether the divisor reads what an enclosing `for` loop binds: a name, or an attribute
    (nanotron's `for self.iteration_step in range(...)` binds `self.iteration_step`, not the
    `self` of `self.config.checkpoint_interval`)."""
    items = {bound for loop in ancestors if type(loop) is cst.For for bound in _loop_binds(loop.target)}
    return bool(items) and not items.isdisjoint(_read_paths(divisor))


def _loop_binds(target: cst.BaseExpression) -> Iterator[str]:
    """What a loop target binds: its names, or the dotted attribute it assigns."""
    if type(target) in (cst.Tuple, cst.List):
        for element in target.elements:  # type: ignore[attr-defined]
            yield from _loop_binds(element.value)
    elif type(target) is cst.StarredElement:
        yield from _loop_binds(target.value)
    elif dotted := patterns.dotted(target):
        yield dotted


def _read_paths(node: cst.CSTNode) -> set[str]:
    """The names and dotted attribute chains an expression reads (`phase.interval` and `phase`)."""
    if type(node) in (cst.Name, cst.Attribute) and (path := patterns.dotted(node)):
        return {path} | (_read_paths(node.value) if type(node) is cst.Attribute else set())
    return set().union(*(_read_paths(child) for child in node.children))


def _a_size(node: cst.BaseExpression) -> bool:
    """`x.size(1)`, `x.shape[1]`, `len(x)`, `x.numel()`: a size, not a count of steps."""
    if type(node) is cst.Subscript:
        return type(node.value) is cst.Attribute and node.value.attr.value == "shape"
    if type(node) is cst.Call:
        return patterns.method_name(node) in ("size", "numel", "dim") or patterns.dotted(node.func) == "len"
    return False


def enclosing_function(ancestors: Sequence[cst.CSTNode]) -> cst.FunctionDef | None:
    """The function whose body the node is in, directly (not in a lambda or class within it)."""
    for node in reversed(ancestors):
        if type(node) in NESTED_SCOPES:
            return node if type(node) is cst.FunctionDef else None
    return None


def _class_name(ancestors: Sequence[cst.CSTNode]) -> str | None:
    """The class whose method the node is in."""
    classes = [node for node in ancestors if type(node) is cst.ClassDef]
    return classes[-1].name.value if classes else None


def across_scopes(seen: frozenset[str]) -> frozenset[str]:
    """What a following of values (`_home`, portcheck.numpy_float64) has looked through that
    stays the same in another scope, keys with a `:` or a `.` (parameters and returns of
    functions, `self.` attributes); not plain names, which are the scope's own."""
    return frozenset(key for key in seen if ":" in key or "." in key)


def _drawn(iterated: cst.BaseExpression) -> list[cst.BaseExpression]:
    """What a `for` loop draws items from: `batches` in `enumerate(batches)`, `zip(a, b)`,
    `tqdm(batches)`, `iter(batches)`."""
    if type(iterated) is cst.Call and type(iterated.func) is cst.Name and iterated.func.value in _WRAPPERS:
        return [part for arg in iterated.args if not arg.keyword for part in _drawn(arg.value)]
    return [iterated]


def _steps_optimizer(call: cst.Call) -> bool:
    """`optimizer.step()`, `scaler.step(optimizer)`, `loss.backward()`: a training step's own call."""
    method = patterns.method_name(call)
    receiver = owner_name(call.func.value) if type(call.func) is cst.Attribute else ""
    return method == "backward" or (method == "step" and _OPTIMIZER_NAME.search(receiver) is not None)


def owner_name(node: cst.BaseExpression) -> str:
    return node.value if type(node) is cst.Name else node.attr.value if type(node) is cst.Attribute else ""


def parameter_gates(ancestors: Sequence[cst.CSTNode], function: cst.FunctionDef) -> tuple[str, ...]:
    """The parameters of `function` that decide whether the code below `ancestors` runs: it is
    in the body of an `if flag:` or `if flag is not None:`, and `flag` defaults to False or None
    (`def merge(self, safe_merge=False)`: what `if safe_merge:` guards runs only where a call
    gives it), or of an `if mode == "cpu":` where `mode` defaults to another string (YOLOX's
    `get_assignments(..., mode="gpu")`, called with "cpu" only after running out of memory)."""
    defaults = {
        param.name.value: param.default
        for param in (*function.params.params, *function.params.kwonly_params)
        if param.default is not None
    }
    gates = []
    start = next((index for index, node in enumerate(ancestors) if node is function), len(ancestors))
    for index in range(start, len(ancestors) - 1):
        node = ancestors[index]
        if type(node) is cst.If and ancestors[index + 1] is node.body:
            flag = _flag(node.test, defaults)
            if flag is not None:
                gates.append(flag)
    return tuple(sorted(set(gates)))


def _flag(test: cst.BaseExpression, defaults: Mapping[str, cst.BaseExpression]) -> str | None:
    """`flag` of `if flag:` or `if flag is not None:` where it defaults to False or None, or of
    `if flag == "x":` where it defaults to another string."""
    if type(test) is cst.Comparison and len(test.comparisons) == 1:
        link = test.comparisons[0]
        if type(link.operator) is cst.Equal and type(test.left) is cst.Name and test.left.value in defaults:
            wanted, default = patterns.string_value(link.comparator), patterns.string_value(defaults[test.left.value])
            return test.left.value if None not in (wanted, default) and wanted != default else None
        if type(link.operator) is cst.IsNot and type(link.comparator) is cst.Name:
            test = test.left if link.comparator.value == "None" else test
    if type(test) is not cst.Name or test.value not in defaults:
        return None
    default = defaults[test.value]
    return test.value if type(default) is cst.Name and default.value in ("False", "None") else None


def _gives(site: _Site, function: cst.FunctionDef, name: str) -> bool:
    """Whether a call gives the parameter `name` something other than False or None."""
    value = _argument(site.call, _position(site, function, name), name)
    return value is not None and not (type(value) is cst.Name and value.value in ("False", "None"))


def _position(site: _Site, function: cst.FunctionDef, name: str) -> int:
    """Where a call passes the parameter `name` among its positional arguments (-1: by keyword
    only): after `self`, which a call through `self.` does not pass."""
    return _parameter_position(function, name, site.skipped)


def _parameter_position(function: cst.FunctionDef, name: str, skipped: int) -> int:
    """The position of the parameter `name` among a call's positional arguments that leave out
    `skipped` leading parameters (`self`), unless the method is a staticmethod (DiT's
    `self.timestep_embedding(t, dim)`), which has no `self`; -1 for one passed by keyword only."""
    params = [param.name.value for param in (*function.params.posonly_params, *function.params.params)]
    if name not in params:
        return -1
    return params.index(name) - (0 if is_static(function) else skipped)


def is_static(function: cst.FunctionDef) -> bool:
    """A method decorated `@staticmethod`: it has no `self`."""
    return any(patterns.dotted(decorator.decorator) == "staticmethod" for decorator in function.decorators)


def _parameter_at(function: cst.FunctionDef, position: int) -> str | None:
    """The name of the parameter a positional argument at `position` binds."""
    params = (*function.params.posonly_params, *function.params.params)
    return params[position].name.value if position < len(params) else None


def _argument(call: cst.Call, position: int, name: str) -> cst.BaseExpression | None:
    arg = patterns.positional(call, position) if position >= 0 else None
    if arg is None:
        arg = patterns.keyword(call, name)
    return arg.value if arg is not None else None


def references(
    function: cst.FunctionDef | cst.Lambda, name: str
) -> list[tuple[cst.Name, tuple[cst.CSTNode, ...]]] | None:
    """The references to a name in a function's body, each with the nodes from the function down
    to it; None where a nested function, class or comprehension refers to it."""
    found: list[tuple[cst.Name, tuple[cst.CSTNode, ...]]] = []
    return found if _references(function.body, name, (function,), found) else None


def name_reads(
    root: cst.CSTNode, names: frozenset[str], apart: tuple[type[cst.CSTNode], ...] = ()
) -> Iterator[tuple[cst.Name, cst.CSTNode]]:
    """Every read of one of `names` under `root`, nested scopes included, with its parent; not
    under nodes of the `apart` types."""
    stack = [root]
    while stack:
        node = stack.pop()
        for field_name in child_fields(type(node)):
            value = getattr(node, field_name)
            for child in value if isinstance(value, (tuple, list)) else (value,):
                if type(child) is cst.Name and child.value in names and reads(child, node):
                    yield child, node
                elif isinstance(child, cst.CSTNode) and not isinstance(child, apart):
                    stack.append(child)


def _references(
    node: cst.CSTNode, name: str, path: tuple[cst.CSTNode, ...], found: list[tuple[cst.Name, tuple[cst.CSTNode, ...]]]
) -> bool:
    """Collect the references to `name` under `node` into `found`; False where a nested scope
    refers to it."""
    for field_name in child_fields(type(node)):
        value = getattr(node, field_name)
        for child in value if isinstance(value, (tuple, list)) else (value,):
            if not isinstance(child, cst.CSTNode):
                continue
            if type(child) is cst.Name and child.value == name and reads(child, node):
                found.append((child, (*path, node)))
            elif type(child) in NESTED_SCOPES or isinstance(child, cst.BaseComp):
                if any(type(n) is cst.Name and n.value == name for n in descendants(child, ())):
                    return False
            elif not _references(child, name, (*path, node), found):
                return False
    return True


_BINDERS = (cst.AssignTarget, cst.AnnAssign, cst.AugAssign, cst.For, cst.CompFor)


def reads(node: cst.Name | cst.Attribute, parent: cst.CSTNode) -> bool:
    """Whether a name or attribute chain is read here: the start of a longer chain too (`x` in
    `x.to(...)`), not an attribute's or keyword's name or what is being bound (`self.x = ...`)."""
    if type(parent) is cst.Attribute:
        return parent.value is node
    if type(parent) in _BINDERS and parent.target is node:
        return False
    return is_reference(node, parent)


def is_number(node: cst.BaseExpression) -> bool:
    """`3`, `-1`, `0.5`: a literal number."""
    if type(node) is cst.UnaryOperation and type(node.operator) is cst.Minus:
        node = node.expression
    return type(node) in _NUMBERS


def _is_zero(node: cst.BaseExpression) -> bool:
    return type(node) is cst.Integer and node.evaluated_value == 0


def _exits(body: cst.BaseSuite, resolver: Resolver) -> bool:
    """A block that only leaves: `return`, `raise`, `continue`, `break` (an early exit), or
    skips the test it is in (`pytest.skip(...)`, `self.skipTest(...)`, which raise)."""
    if type(_last_statement(body)) in _EXITS:
        return True
    return _skips(body, resolver)


# Calls that only free memory the allocator caches: skipping them off CUDA changes no result.
_FREES_CACHE = frozenset({"torch.cuda.empty_cache", "torch.cuda.ipc_collect", "gc.collect"})


def _dispatches_devices(node: cst.If) -> bool:
    """An `if` whose `elif` tests name another accelerator (`elif device.startswith("npu:"):`,
    `elif device == "mps":`): a dispatch over devices, of which the CUDA branch is one."""
    orelse = node.orelse
    while type(orelse) is cst.If:
        if any(patterns.string_value(each) in _OTHER_ACCELERATORS for each in (orelse.test, *descendants(orelse.test))):
            return True
        orelse = orelse.orelse
    return False


def _tells_only(body: cst.BaseSuite, resolver: Resolver) -> bool:
    """A block of calls that only tell the user something (`logger.warning(...)`, `print`,
    adding a string to a message: `parts.append("max mem: {mem}")`, `log_str += f"..."`) or
    free cached memory (`torch.cuda.empty_cache()`, with the `synchronize()` before it): where
    it is skipped, the program computes the same."""
    calls, statements = [], patterns.simple_statements(body)
    for statement in statements:
        if type(statement) is cst.AugAssign and _is_text(statement.value):
            continue  # `log_str += f"memory: {mem}, "`
        if not (type(statement) is cst.Expr and type(statement.value) is cst.Call):
            return False
        if not _adds_text(statement.value):
            calls.append(statement.value)
    names = [resolver.qualified_names(call.func) for call in calls]
    frees = any(each & _FREES_CACHE for each in names)
    return bool(statements) and all(
        patterns.is_logging_call(call) or each & _FREES_CACHE or (frees and "torch.cuda.synchronize" in each)
        for call, each in zip(calls, names)
    )


def _tunes_cuda_only(body: cst.BaseSuite, resolver: Resolver) -> str:
    """What a block skips where it only sets CUDA's own switches, which another device drops
    (`SKIPS_CUDNN_ONLY` for cuDNN's harmless ones: Wav2Lip's `if 'cuda' in device:
    torch.backends.cudnn.benchmark = True`; `SKIPS_CUDA_TUNING` with others the CUDA API table
    says to drop there: audiocraft's `torch.cuda.set_sync_debug_mode("warn")`); "" for any
    other block, where skipping may lose something."""
    statements = patterns.simple_statements(body)
    cudnn, droppable = _harmless_cudnn_switches(), _droppable_cuda_apis()
    only_cudnn = True
    for statement in statements:
        if type(statement) is cst.Assign:
            names = frozenset().union(*(resolver.qualified_names(target.target) for target in statement.targets))
        elif type(statement) is cst.Expr and type(statement.value) is cst.Call:
            names = resolver.qualified_names(statement.value.func)
        else:
            return ""
        if not names & cudnn and not any(name.startswith(dropped) for name in names for dropped in droppable):
            return ""
        only_cudnn = only_cudnn and bool(names & cudnn)
    return "" if not statements else SKIPS_CUDNN_ONLY if only_cudnn else SKIPS_CUDA_TUNING


@cache
def _harmless_cudnn_switches() -> frozenset[str]:
    """The cuDNN switches the CUDA API table calls harmless off CUDA: info for every target
    (`benchmark`, `enabled`; not `deterministic`, a warning where nothing else makes runs repeat)."""
    return frozenset(
        name
        for name, entry in api_table.table().items()
        if name.startswith("torch.backends.cudnn.") and max(entry.severities().values()) <= Severity.INFO
    )


@cache
def _droppable_cuda_apis() -> tuple[str, ...]:
    """The CUDA APIs the table says to drop on other devices (CUDA's BLAS and FFT choices,
    reduced-precision reductions, host-sync debugging, TunableOp): names and module prefixes."""
    return tuple(sorted(name for name, entry in api_table.table().items() if entry.replacement.startswith("drop it")))


def _adds_text(call: cst.Call) -> bool:
    """`parts.append("max mem: {memory:.0f}")`: a string added to a list, for a message."""
    return patterns.method_name(call) == "append" and len(call.args) == 1 and _is_text(call.args[0].value)


def _is_text(node: cst.BaseExpression) -> bool:
    return type(node) in (cst.SimpleString, cst.FormattedString, cst.ConcatenatedString)


_DATA_PARALLEL = frozenset(
    {"torch.nn.DataParallel", "torch.nn.parallel.DataParallel", "torch.nn.parallel.data_parallel"}
)
# What CUDA alone can answer or keep: the device's name, capability and memory, whether it is
# there, the seed of its own random generator (`torch.manual_seed` seeds every device already).
_CUDA_FACTS = re.compile(
    r"^torch\.cuda\.(get_device_(name|properties|capability)|(max_)?memory_\w+|mem_get_info|is_available"
    r"|reset_(peak_memory_stats|max_memory_\w+|accumulated_memory_stats)"
    r"|manual_seed(_all)?)$"
)


def _uses_cuda_library(body: cst.BaseSuite, resolver: Resolver) -> bool:
    """A block that imports or calls a CUDA-only package (`from flash_attn import ...`,
    `xformers.ops...`), wraps a model for several GPUs (`nn.DataParallel`) or asks CUDA for
    its own facts (`torch.cuda.get_device_name()`, `assert torch.cuda.is_available()`,
    `torch.cuda.manual_seed(0)`), and places nothing on CUDA (`.cuda()`, `"cuda"`) nor steers
    by other CUDA calls (`torch.cuda.device_count()`) or picks a half-precision dtype
    (`return torch.bfloat16` where the capability allows): where the target skips it, only a
    CUDA extra is lost."""
    nodes = list(descendants(body, ()))
    places = any(
        (type(node) is cst.Call and patterns.method_name(node) == "cuda")
        or patterns.is_cuda_device_literal(node)
        or _other_cuda_api(node, resolver)  # `torch.cuda.device_count()` decides how many processes
        or bool(resolver.qualified_names(node) & _HALF_DTYPES)  # `return torch.bfloat16`: picks the precision
        for node in nodes
    )
    return not places and any(_cuda_library_use(node, resolver) for node in nodes)


_EMPTY_MODULE = cst.Module([])
_HALF_DTYPES = frozenset({"torch.bfloat16", "torch.float16", "torch.half"})


def _other_cuda_api(node: cst.CSTNode, resolver: Resolver) -> bool:
    """A use of `torch.cuda` that is not one of CUDA's own facts: it steers the program."""
    if type(node) not in (cst.Name, cst.Attribute):
        return False
    names = resolver.qualified_names(node)
    return any(name.startswith("torch.cuda.") and not _CUDA_FACTS.match(name) for name in names)


def _cuda_library_use(node: cst.CSTNode, resolver: Resolver) -> bool:
    """An import of a CUDA-only package, or a call of one, of `nn.DataParallel` or of a
    `torch.cuda` query of the device's own facts."""
    if type(node) is cst.Import:
        return any(packages.by_import(patterns.dotted(alias.name)) is not None for alias in node.names)
    if type(node) is cst.ImportFrom:
        return (
            node.module is not None
            and not node.relative
            and packages.by_import(patterns.dotted(node.module)) is not None
        )
    if type(node) is cst.Call and type(node.func) in (cst.Name, cst.Attribute):
        names = resolver.qualified_names(node.func)
        return bool(names & _DATA_PARALLEL) or any(_CUDA_FACTS.match(n) or packages.by_import(n) for n in names)
    return False


def _skips(body: cst.BaseSuite, resolver: Resolver) -> bool:
    """A block that ends by skipping the test it is in: `pytest.skip(...)`, `self.skipTest(...)`."""
    last = body.body[-1] if body.body else None
    if type(last) not in (cst.SimpleStatementLine, cst.SimpleStatementSuite):
        return False
    final = last.body[-1]
    call = final.value if type(final) is cst.Expr else None
    if type(call) is not cst.Call:
        return False
    if type(call.func) is cst.Attribute and call.func.attr.value == "skipTest":
        return type(call.func.value) is cst.Name and call.func.value.value == "self"
    return bool(resolver.qualified_names(call.func) & _SKIPS)


def _device_types(node: cst.BaseExpression) -> frozenset[str] | None:
    """The device type a literal names (`"mps"`, `"cuda:0"`, `f"cuda:{rank}"`), if it names one."""
    if patterns.is_cuda_device_literal(node):
        return _CUDA_ONLY_TYPES
    value = patterns.string_value(node)
    if value is None:
        return None
    kind, _, index = value.partition(":")
    return frozenset({kind}) if kind in DEVICE_TYPES and (not index or index.isdigit()) else None


def _weakest(homes: Iterable[Home | None]) -> Home | None:
    """The weakest of `homes`, those that are only a name's own value (None) aside."""
    known = [home for home in homes if home is not None]
    return min(known) if known else None


def _paired(target: cst.BaseExpression, iterated: cst.BaseExpression, name: str) -> cst.BaseExpression | None:
    """What a loop target's name takes its items from: the whole iterated (`for x in t`), or
    the argument `zip(a, b)` or `enumerate(t)` pairs with it (`for i, (a, b) in
    enumerate(zip(x, y))` too)."""
    call = iterated if type(iterated) is cst.Call else None
    called = patterns.dotted(call.func) if call is not None else None
    args = [arg.value for arg in call.args if arg.keyword is None and not arg.star] if call is not None else []
    if called in _KEEPING_ITEMS and len(args) == 1:  # `tqdm.tqdm(list(enumerate(zip(a, b))))`
        return _paired(target, args[0], name)
    if type(target) is cst.Name:
        return iterated if target.value == name else None
    if not (type(target) in (cst.Tuple, cst.List) and called):
        return None
    targets = [element.value for element in target.elements]
    if called == "enumerate" and len(targets) == 2 and args:
        return _paired(targets[1], args[0], name)  # the index comes first, then the items
    if called != "zip" or len(args) != len(targets):
        return None
    return next((found for each, arg in zip(targets, args) if (found := _paired(each, arg, name)) is not None), None)


def item_source(target: cst.BaseExpression, iterated: cst.BaseExpression, name: str) -> cst.BaseExpression | None:
    """What a loop target's name takes its items from (see `_paired`), and for the values of
    `for k, v in d.items()`, the dict itself: where a container lies is where its values lie."""
    found = _paired(target, iterated, name)
    if found is not None or type(iterated) is not cst.Call or iterated.args:
        return found
    func = iterated.func
    if type(func) is not cst.Attribute or func.attr.value != "items" or type(target) not in (cst.Tuple, cst.List):
        return None
    elements = target.elements  # type: ignore[attr-defined]
    value = elements[1].value if len(elements) == 2 else None
    return func.value if type(value) is cst.Name and value.value == name else None


def _parts(statement: cst.CSTNode) -> Sequence[cst.CSTNode]:
    """The small statements of a line (`x = f(x); return x`), none of a compound statement."""
    return statement.body if type(statement) is cst.SimpleStatementLine else ()  # type: ignore[return-value]


def _plain_assignment(statement: cst.BaseStatement, name: str) -> cst.BaseExpression | None:
    """The value of a statement that is only `name = value`."""
    if type(statement) is not cst.SimpleStatementLine or len(statement.body) != 1:
        return None
    assign = statement.body[0]
    if type(assign) is cst.Assign and len(assign.targets) == 1:
        target = assign.targets[0].target
        return assign.value if type(target) is cst.Name and target.value == name else None
    return None


def _item_assignment(statement: cst.BaseStatement, name: str) -> cst.BaseExpression | None:
    """What a statement that only assigns gives `name`: `name = value`, or its part of
    `a, name = x, value`."""
    plain = _plain_assignment(statement, name)
    if plain is not None or type(statement) is not cst.SimpleStatementLine or len(statement.body) != 1:
        return plain
    assign = statement.body[0]
    if type(assign) is not cst.Assign or len(assign.targets) != 1:
        return None
    target, value = assign.targets[0].target, assign.value
    if type(target) is not cst.Tuple or type(value) is not cst.Tuple or len(target.elements) != len(value.elements):
        return None
    return next(
        (given.value for bound, given in zip(target.elements, value.elements) if _binds(bound.value, name)), None
    )


def _body_statements(body: cst.BaseSuite) -> Iterator[cst.BaseStatement]:
    """The statements of a loop's body, and of the `if` and `with` blocks in it."""
    for statement in body.body if type(body) is cst.IndentedBlock else ():
        yield statement
        if type(statement) in (cst.If, cst.With):
            yield from _body_statements(statement.body)


def _guarded_bindings(guard: Guard) -> frozenset[str]:
    return frozenset().union(*(_bound_names(node) for node in guard.protected))


def _reads_any(guard: Guard, names: frozenset[str]) -> bool:
    return bool(names) and any(next(name_reads(node, names), None) is not None for node in guard.protected)


def _bound_names(statement: cst.CSTNode) -> frozenset[str]:
    """The names a statement binds in any way (not in the functions, classes and
    comprehensions it defines, which have names of their own)."""
    found: set[str] = set()
    for node in (statement, *descendants(statement, (*NESTED_SCOPES, cst.BaseComp))):
        if type(node) is cst.Assign:
            for target in node.targets:
                _collect_names(target.target, found)
        elif type(node) in (cst.AugAssign, cst.AnnAssign, cst.For, cst.NamedExpr):
            _collect_names(node.target, found)
        elif type(node) is cst.AsName:
            _collect_names(node.name, found)
        elif type(node) in (cst.Global, cst.Nonlocal):
            found.update(item.name.value for item in node.names)
    return frozenset(found)


def _bound_by(assign: cst.Assign) -> set[str]:
    """The names an assignment binds (`top, words = ...`)."""
    return {name for target in assign.targets for name in target_names(target.target)}


def _samples_logits(call: cst.Call, named: str) -> bool:
    """A sampler given logits: `session.sampler.sample(logits=logits, ...)`, `sample(logits, ...)`
    (GPT-SoVITS' batched decoding): a token drawn each pass."""
    if "sample" not in named.lower():
        return False
    return any(
        (arg.keyword is not None and arg.keyword.value == "logits")
        or (type(arg.value) is cst.Name and arg.value.value == "logits")
        for arg in call.args
    )


def _on_a_pipeline(call: cst.Call) -> bool:
    """A method called on a plain name, not `self` (`pipe.unet(...)`): a pipeline's component."""
    func = call.func
    return isinstance(func, cst.Attribute) and type(func.value) is cst.Name and func.value.value != "self"


def _written_into(assign: cst.Assign) -> str | None:
    """The name an assignment writes into, through a subscript (`tokens[:, cur] = ...`)."""
    target = assign.targets[0].target
    return target.value.value if type(target) is cst.Subscript and type(target.value) is cst.Name else None


def _holds(root: cst.CSTNode, node: cst.CSTNode) -> bool:
    """Whether `node` is `root` or under it."""
    return root is node or any(each is node for each in descendants(root))


def target_names(target: cst.CSTNode) -> set[str]:
    found: set[str] = set()
    _collect_names(target, found)
    return found


def _collect_names(target: cst.CSTNode, found: set[str]) -> None:
    """The names an assignment target (a name, or a tuple or list of them) binds."""
    if type(target) is cst.Name:
        found.add(target.value)
    elif type(target) in (cst.Tuple, cst.List):
        for element in target.elements:
            _collect_names(element.value, found)
    elif type(target) is cst.StarredElement:
        _collect_names(target.value, found)


def _python_data(node: cst.BaseExpression) -> bool:
    """A list, tuple or comprehension display, None, or what `.tolist()` gives: Python data,
    not a tensor."""
    if type(node) is cst.Name:
        return node.value == "None"
    if type(node) is cst.Call:
        return patterns.method_name(node) == "tolist"
    return type(node) in (cst.List, cst.Tuple, cst.ListComp, cst.SetComp, cst.DictComp, cst.GeneratorExp, cst.Dict)


def _is_string(node: cst.BaseExpression) -> bool:
    """The other operand of `rank % n` is not one: `"cuda:%d" % i` is no index."""
    return type(node) in (cst.SimpleString, cst.FormattedString, cst.ConcatenatedString)


def _is_cuda(node: cst.CSTNode) -> bool:
    if type(node) is cst.SimpleString and "cuda" not in node.value:
        return False  # most compared strings: no need to evaluate the literal
    return patterns.string_value(node) is not None and patterns.is_cuda_device_literal(node)


def _is_cuda_prefix(call: cst.Call) -> bool:
    """The argument of `.startswith("cuda")` or `.startswith("cuda:")` (an indexed CUDA device)."""
    prefix = patterns.positional(call, 0)
    return prefix is not None and (_is_cuda(prefix.value) or patterns.string_value(prefix.value) == "cuda:")


def _names_cuda_type(asked: cst.BaseExpression, named: cst.BaseExpression) -> bool:
    """`x.type()` compared with a legacy CUDA type's name (`"torch.cuda.HalfTensor"`)."""
    value = patterns.string_value(named)
    return (
        value is not None
        and value.startswith("torch.cuda.")
        and value.endswith("Tensor")
        and type(asked) is cst.Call
        and not asked.args
        and patterns.method_name(asked) == "type"
    )


def _only_cuda(node: cst.BaseExpression) -> bool:
    """A collection of device strings that are all CUDA ones (`{"cuda"}`, `("cuda", "cuda:0")`)."""
    if type(node) in (cst.Tuple, cst.List, cst.Set) and node.elements:
        return all(_is_cuda(element.value) for element in node.elements)
    return False
