"""What only the whole project can tell: facts from every file, combined after the first pass.

Files are scanned independently (in parallel), but some findings depend on other files: a call
of `torch.ops.ns.op` matters only if the repository registers `ns::op` for CUDA alone, and
`import pkg._C` only if a setup.py builds `pkg._C` with CUDAExtension. Rules record facts in
the first pass; a `Project` sums them up; rules that need it run in a second pass over only the
files that mention what the project holds (see `Rule.project_triggers`).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, replace
from functools import cached_property
from pathlib import PurePosixPath

from portcheck.findings import Fact
from portcheck.targets.packages import Package, by_import

OP_IMPL = "op-impl"  # name "ns::op"; detail `device`: the dispatch key it is implemented for
CUDA_EXTENSION = "cuda-extension"  # name: the importable module a CUDA extension builds
KERNEL = "kernel"  # name: qualified name of a custom kernel; details kind, loc
SOURCE = "source"  # name: a CUDA/C++ source file; detail loc
CALL = "call"  # name: qualified name a call site calls; detail fallback (evidence) when guarded
REFERENCE = "reference"  # name: qualified name of a function that looks like a reference implementation
# name: the key of a CUDA-bound package (targets/packages.toml) used or declared; detail
# `declared`: "yes" where a manifest or setup.py declares it (an environment installs it)
DEPENDENCY = "dependency"
# name: a module; details `module`: a local module (or triton) it imports unguarded when it is
# imported, `written`: that module's name as the import statement writes it (`.ops.kernels`)
IMPORT = "import"
TRITON = "triton"
# name: the qualified name of a function or method of the repository that a step loop calls
# (`utils.clip_gradients`, `utils.MetricLogger.update`); details `where`: the loop and its file,
# `tensors`: "yes" when the call passes a tensor, `host`: the positions and keywords of the
# arguments that are host data (numbers read back, tensors in host memory, containers of those)
STEP_CALL = "step-call"
# name: the qualified name of a function or method of the repository that reads back on the
# host what its caller gives it where that is a tensor (MetricLogger.update's `if isinstance(v,
# torch.Tensor): v = v.item()`), and that no step of its own module runs; placed at the read;
# detail `read`: how it reads, as the report says it (`.item()`)
TENSOR_READER = "tensor-reader"
# A step call's name where the receiver's class is unknown: `*.detect_objects` stands for the
# repository's one method of that name that waits for a caller (STEP_PENDING)
ANY_CLASS = "*"
# A step call's name suffix for a property read (`meter.avg`): the getter runs, and only a
# method under `@property` is known by it
PROPERTY_GETTER = ".fget"
# name: the qualified name of a function of the repository (`pkg.utils.Logger.update`) whose
# step hazards wait for a caller: no step of its own module runs it (the second pass looks for it)
STEP_PENDING = "step-pending"
# name: what a module binds by importing another package's API (`utils.torch_utils.smart_amp_autocast`);
# detail `target`: the API's own qualified name (`ultralytics.utils.torch_utils.autocast`)
ALIAS = "alias"
# name: a file that puts its model on CUDA (a `.cuda()` call or a "cuda" device): the
# checkpoints the repository writes hold CUDA tensors
CUDA_PLACEMENT = "cuda-placement"
# name: a module-level function of the repository that returns a float64 NumPy array
# (score_sde's `models.utils.get_sigmas`: `np.exp(np.linspace(...))`)
FLOAT64_RETURN = "float64-return"
# name: a function of the repository that another module calls with a tensor, or with what one
# of the repository's functions returns (`K.sampling.sample_lms(model, x, sigmas)` after
# `sigmas = K.sampling.get_sigmas_karras(...)`); details `parameter`: the position ("2") or the
# keyword it is passed as, `origin`: "" for a tensor, else the function whose result it is
TENSOR_ARGUMENT = "tensor-argument"
# name: a module-level function of the repository that returns timm's Mixup made with CutMix
# possibly on (Swin's `data.build.build_loader`); detail `index`: its place in the returned
# tuple, "" where the value itself is returned
MIXUP_RETURN = "mixup-return"
# name: a module-level function of the repository whose every return is a tensor
TENSOR_RETURN = "tensor-return"
# name: a module-level function of the repository, or `Class.apply` of an autograd Function,
# that launches a kernel whenever it is called, itself or through the module's other functions
# and classes, with no PyTorch path beside; detail `kernels`: the launched names, comma-separated
# (those the project knows as Triton kernels count)
LAUNCHER = "launcher"
# name: a module-level function of the repository, `Class.apply` or `Class` of a class, or a
# module-level name bound to one, that calls a CUDA-only package with no build for the target
# whenever it is called, itself or through the module's other functions and classes (TinyLlama's
# `apply_rotary_emb_func = ApplyRotaryEmb.apply`, whose forward calls flash-attn's `rotary_emb`);
# detail `runs`: the first such call, as written
PACKAGE_RUNNER = "package-runner"
# name: a top-level class of the repository (`pkg.magnet.MagnetSolver`); detail `base`: one of
# its bases that is the repository's too (`pkg.musicgen.MusicGenSolver`)
SUBCLASS = "subclass"
# name: a module-level name of the repository bound to the current device's runtime module
# (torchtitan's `device_type, device_module = get_device_info()`, from `torch.get_device_module`)
DEVICE_MODULE = "device-module"
# name: a module-level function of the repository that returns CUDA's device where there is one
# and otherwise the CPU's (CodeFormer's `get_device()`); detail `picks`: the device types it may
# return but the CPU, comma-separated ("cuda,mps")
CPU_FALLBACK = "cpu-fallback"
# name: a module-level function of the repository that calls a parameter, or hands it to a call,
# every step (Megatron's `train(forward_step_func, ...)`, which passes it to `train_step` in its
# training loop); details `position` (among the positional parameters), `keyword` (its name),
# `where`: the step context and its file
STEP_PARAMETER = "step-parameter"
# name: a module-level function of the repository that its module hands to another module's
# function (`pretrain(..., forward_step)`); details `callee`, `position` (-1 for a keyword),
# `keyword`
HANDED_FUNCTION = "handed-function"
# name: a member of a namespace a module builds of its functions (nanochat's `flash_attn =
# SimpleNamespace(flash_attn_with_kvcache=flash_attn_with_kvcache, ...)`: `pkg.mod.flash_attn.
# flash_attn_with_kvcache`); detail `target`, the function it holds. Step calls made through the
# member are the function's.
NAMESPACE_MEMBER = "namespace-member"
# name: a module-level function of the repository that pads the tensors it is given to the
# longest of them (trl's `pad(tensors, ..., pad_to_multiple_of=None)`, whose `np.max([t.shape for t
# in tensors], 0)` sizes a `torch.full`); detail `multiple`, its parameter that rounds the length
# up ("" where it has none). A batch function of another module that calls it pads each batch to
# its longest item.
LONGEST_PADDER = "longest-padder"
LONGEST_PADDER_FACTORY = "longest-padder-factory"
# name: a module-level function of the repository that fills a length parameter from tensor
# values where the call leaves it out (CosyVoice's `make_pad_mask(lengths, max_len=0)`: `max_len =
# max_len if max_len > 0 else lengths.max().item()`); details `parameter`, `position` (its index
# among the positional parameters, -1 for keyword-only), `value` (what fills it, as written)
FILLED_LENGTH = "filled-length"
# name: a module whose step rules asked whether a parameter of a function it never calls holds a
# tensor (what only another module's calls can tell: the second pass answers it); detail `keys`:
# the parameters' names and positions (counted with and without `self`), space-separated
CALLERS_ASKED = "callers-asked"


@dataclass(frozen=True)
class Project:
    """What rules may know about the repository, small enough to send to every worker.

    In the first pass only its layout is known (`complete` is False); `with_facts` adds what
    the first pass found, and rules that need it run again in a second pass."""

    local_packages: frozenset[str] = frozenset()  # top-level packages that live in the repository
    # The repository's modules in a folder named like a third-party package, by the names an
    # import from that folder's parent gives them (DeepLearningExamples' Triton Inference Server
    # scripts: `triton.deployment_toolkit.core`, not the Triton compiler), with their packages.
    shadowing_modules: frozenset[str] = frozenset()
    import_root: str = ""  # the folder the repository's scripts run from (portcheck.anchor.import_root)
    complete: bool = False
    cuda_only_ops: frozenset[str] = frozenset()  # "ns::op"
    cuda_extensions: frozenset[str] = frozenset()  # "pkg._C"
    kernels: frozenset[str] = frozenset()  # "pkg.kernels.add_kernel"
    # Modules that fail to import without Triton or a CUDA extension, each as its chain of
    # unguarded imports: ("pkg.model", "pkg.kernels", "triton"); and the module names, as the
    # import statements that load one of them write them (what the second pass looks for).
    import_failures: frozenset[tuple[str, ...]] = frozenset()
    failing_imports_written: frozenset[str] = frozenset()
    # The pass reads files the first one skipped, only to learn what they import (portcheck.api).
    learning_imports: bool = False
    # What another file's step loop calls every step: (qualified name, the loop and its file,
    # whether the call passes a tensor, whether only every N steps: under `if step % N == 0:`).
    step_calls: frozenset[tuple[str, str, bool, bool]] = frozenset()
    # The functions whose step hazards wait for a caller in another file (STEP_PENDING), each
    # with the file it is in.
    pending_steps: frozenset[tuple[str, str]] = frozenset()
    # The functions that read back the tensors their callers give (TENSOR_READER): (qualified
    # name, where it reads, how); and the files whose step loops pass them tensors.
    tensor_readers: frozenset[tuple[str, str, str]] = frozenset()
    tensor_reader_callers: frozenset[str] = frozenset()
    # The CUDA-bound packages (targets/packages.toml keys) the project declares as dependencies.
    declared_packages: frozenset[str] = frozenset()
    # What the repository's modules bind by importing other packages' APIs: (name, target).
    aliases: frozenset[tuple[str, str]] = frozenset()
    # The files that put their model on CUDA.
    on_cuda: frozenset[str] = frozenset()
    # The repository's functions that return float64 NumPy arrays, by qualified name.
    float64_returns: frozenset[str] = frozenset()
    # The parameters of the repository's functions that another module passes a tensor:
    # (qualified function, position or keyword).
    tensor_parameters: frozenset[tuple[str, str]] = frozenset()
    # The parameters for which every step loop that calls the function passes host data:
    # (qualified function, position or keyword).
    host_parameters: frozenset[tuple[str, str]] = frozenset()
    # The repository's functions (and `Class.apply`) that launch one of its Triton kernels
    # whenever they are called: (qualified name, the kernel's qualified name).
    launchers: frozenset[tuple[str, str]] = frozenset()
    package_runners: frozenset[tuple[str, str]] = frozenset()  # (qualified name, the call it runs)
    # The repository's functions that return timm's Mixup with CutMix possibly on, each with
    # its place in the returned tuple ("" for the value itself).
    mixup_returns: frozenset[tuple[str, str]] = frozenset()
    # What a failing package of the repository re-exports from a failing module of its own
    # (stylegan2's `op` binds `upfirdn2d` from `op.upfirdn2d`): (name as re-exported, as defined).
    reexports: frozenset[tuple[str, str]] = frozenset()
    # The repository's classes that derive from another of its classes: (class, base).
    subclasses: frozenset[tuple[str, str]] = frozenset()
    # The repository's module-level names that hold the device's runtime module (DEVICE_MODULE).
    device_modules: frozenset[str] = frozenset()
    # The repository's functions that return CUDA's device or the CPU's, each with what else it
    # may pick (CPU_FALLBACK).
    cpu_fallbacks: frozenset[tuple[str, str]] = frozenset()
    # What each module asked of its uncalled functions' parameters (CALLERS_ASKED): (module, key).
    callers_asked: frozenset[tuple[str, str]] = frozenset()
    # The repository's functions that fill a length from tensor values where a call leaves it
    # out (FILLED_LENGTH): (qualified name, parameter, position, what fills it).
    filled_lengths: frozenset[tuple[str, str, int, str]] = frozenset()
    # The repository's functions that pad what they are given to its longest (LONGEST_PADDER):
    # (qualified name, the parameter that rounds the length up, or "").
    longest_padders: frozenset[tuple[str, str]] = frozenset()
    # The repository's functions that return such a function (LONGEST_PADDER_FACTORY): litgpt's
    # `get_sft_collate_fn(...)`, which returns `partial(_sft_collate_fn, ...)`.
    longest_padder_factories: frozenset[str] = frozenset()

    def with_facts(self, facts: Iterable[Fact]) -> Project:
        facts = list(facts)
        extensions = frozenset(f.name for f in facts if f.kind == CUDA_EXTENSION)
        chains = import_failures(facts, extensions, self.local_packages)
        tensors_returned = {"", *(f.name for f in facts if f.kind == TENSOR_RETURN)}
        kernels = frozenset(f.name for f in facts if f.kind == KERNEL and f.detail("kind") == "triton")
        members = {f.name: f.detail("target") for f in facts if f.kind == NAMESPACE_MEMBER}
        readers = frozenset((f.name, f.place, f.detail("read")) for f in facts if f.kind == TENSOR_READER)
        read_by = {name for name, *_ in readers}
        return replace(
            self,
            complete=True,
            cuda_only_ops=frozenset(cuda_only_ops(facts)),
            cuda_extensions=extensions,
            kernels=kernels,
            import_failures=frozenset(chains.values()),
            failing_imports_written=frozenset(failing_imports_written(facts, chains, extensions, self.local_packages)),
            step_calls=frozenset(
                (
                    members.get(f.name, f.name),
                    f.detail("where"),
                    f.detail("tensors") == "yes",
                    f.detail("periodic") == "yes",
                )
                for f in facts
                if f.kind == STEP_CALL
            )
            | handed_step_calls(facts),
            pending_steps=frozenset((f.name, f.path) for f in facts if f.kind == STEP_PENDING),
            tensor_readers=readers,
            tensor_reader_callers=frozenset(
                f.path
                for f in facts
                if f.kind == STEP_CALL and f.detail("tensors") == "yes" and members.get(f.name, f.name) in read_by
            ),
            declared_packages=frozenset(
                f.name for f in facts if f.kind == DEPENDENCY and f.detail("declared") == "yes"
            ),
            aliases=frozenset((f.name, f.detail("target")) for f in facts if f.kind == ALIAS),
            on_cuda=frozenset(f.name for f in facts if f.kind == CUDA_PLACEMENT),
            float64_returns=frozenset(f.name for f in facts if f.kind == FLOAT64_RETURN),
            tensor_parameters=frozenset(
                (f.name, f.detail("parameter"))
                for f in facts
                if f.kind == TENSOR_ARGUMENT and f.detail("origin") in tensors_returned
            ),
            host_parameters=frozenset(host_parameters(facts)),
            launchers=frozenset(
                (f.name, kernel)
                for f in facts
                if f.kind == LAUNCHER
                for kernel in f.detail("kernels").split(",")
                if kernel in kernels
            ),
            package_runners=frozenset((f.name, f.detail("runs")) for f in facts if f.kind == PACKAGE_RUNNER),
            mixup_returns=frozenset((f.name, f.detail("index")) for f in facts if f.kind == MIXUP_RETURN),
            reexports=frozenset(failing_reexports(facts, chains)),
            subclasses=frozenset((f.name, f.detail("base")) for f in facts if f.kind == SUBCLASS),
            device_modules=frozenset(f.name for f in facts if f.kind == DEVICE_MODULE),
            cpu_fallbacks=frozenset((f.name, f.detail("picks")) for f in facts if f.kind == CPU_FALLBACK),
            callers_asked=frozenset(
                (f.name, key) for f in facts if f.kind == CALLERS_ASKED for key in f.detail("keys").split()
            ),
            filled_lengths=frozenset(
                (f.name, f.detail("parameter"), int(f.detail("position")), f.detail("value"))
                for f in facts
                if f.kind == FILLED_LENGTH
            ),
            longest_padders=frozenset((f.name, f.detail("multiple")) for f in facts if f.kind == LONGEST_PADDER),
            longest_padder_factories=frozenset(f.name for f in facts if f.kind == LONGEST_PADDER_FACTORY),
        )

    @property
    def needs_second_pass(self) -> bool:
        return bool(
            self.cuda_only_ops
            or self.cuda_extensions
            or self.kernels
            or self.import_failures
            or self.step_calls
            or self.declared_packages
            or self.aliases
            or self.on_cuda
            or self.float64_returns
            or self.tensor_parameters
            or self.host_parameters
            or self.mixup_returns
            or self.device_modules
            or self.cpu_fallbacks
            or self.filled_lengths
            or self.longest_padders
            or self.longest_padder_factories
            or self.tensor_reader_callers
        )

    def step_caller(self, qualified: str, passing_tensors: bool = False, every_n_steps: bool = False) -> str | None:
        """The step loop (and its file) from which another file calls the function or method
        `qualified` every step (`passing_tensors`: with a tensor among the arguments;
        `every_n_steps`: also where the call runs only every N steps); the first in order
        where several do."""
        wheres = (
            where
            for where, tensors, periodic in self._step_calls_by_name.get(qualified, ())
            if tensors >= passing_tensors and (every_n_steps or not periodic)
        )
        return min(wheres, default=None)

    @cached_property
    def _step_calls_by_name(self) -> dict[str, list[tuple[str, bool, bool]]]:
        by_name: dict[str, list[tuple[str, bool, bool]]] = {}
        for name, where, tensors, periodic in self.step_calls:
            by_name.setdefault(name, []).append((where, tensors, periodic))
        for name, calls in list(by_name.items()):  # `self.run_step()` in a base's loop runs each override
            owner, _, method = name.rpartition(".")
            for subclass in self._descendants(owner):
                by_name.setdefault(f"{subclass}.{method}", []).extend(calls)
        waiting: dict[str, list[str]] = {}  # method name: the pending methods of that name
        for name, _ in self.pending_steps:
            owner, _, method = name.rpartition(".")
            if owner.rpartition(".")[2][:1].isupper():
                waiting.setdefault(method, []).append(name)
        for method, names in waiting.items():
            unresolved = by_name.get(f"{ANY_CLASS}.{method}", [])
            if unresolved and len({name.rpartition(".")[0].rpartition(".")[2] for name in names}) == 1:
                for name in names:  # one class's method, by its module's name and its package's
                    by_name.setdefault(name, []).extend(unresolved)
        return by_name

    def _descendants(self, owner: str) -> list[str]:
        """The repository's classes that derive from `owner`, at any depth."""
        found: list[str] = []
        waiting = [owner]
        while waiting:
            base = waiting.pop()
            for subclass in self._derived.get(base, ()):
                if subclass not in found and subclass != owner:
                    found.append(subclass)
                    waiting.append(subclass)
        return found

    @cached_property
    def _derived(self) -> dict[str, list[str]]:
        derived: dict[str, list[str]] = {}
        for subclass, base in sorted(self.subclasses):
            derived.setdefault(base, []).append(subclass)
        return derived

    @cached_property
    def step_callee_triggers(self) -> tuple[bytes, ...]:
        """`def <name>` for the functions another file's step loop calls where their hazards wait
        for a caller, and those another file passes tensors: what the step rules' second pass
        looks for (asked once per file)."""
        pending = {name for name, _ in self.pending_steps if name in self._step_calls_by_name}
        names = pending | {name for name, _ in self.tensor_parameters}
        defined = {name.removesuffix(PROPERTY_GETTER).rpartition(".")[2] for name in names}
        return tuple(sorted({b"def " + name.encode() for name in defined}))

    def tensor_reader(self, qualified: str) -> tuple[str, str] | None:
        """Where and how the function or method `qualified` reads back a tensor its caller
        gives it (TENSOR_READER): ("utils.py:97", "`.item()`"); None where it reads none."""
        return self._readers.get(qualified)

    @cached_property
    def _readers(self) -> dict[str, tuple[str, str]]:
        found: dict[str, tuple[str, str]] = {}
        for name, place, read in sorted(self.tensor_readers):
            found.setdefault(name, (place, read))
        return found

    @cached_property
    def tensor_reader_triggers(self) -> tuple[bytes, ...]:
        """The names the readers of given tensors are called by (`update`): what a file whose
        step loop calls one mentions."""
        return tuple(sorted({name.rpartition(".")[2].encode() for name, *_ in self.tensor_readers}))

    @cached_property
    def filled_length_triggers(self) -> tuple[bytes, ...]:
        """The names of the functions that fill a length from tensor values (FILLED_LENGTH):
        what a file that calls one of them mentions."""
        return tuple(sorted({name.rpartition(".")[2].encode() for name, *_ in self.filled_lengths}))

    @cached_property
    def longest_padder_triggers(self) -> tuple[bytes, ...]:
        """The names of the functions that pad to the longest (LONGEST_PADDER), and of those that
        return one: what a file that calls or passes one of them mentions."""
        names = {name for name, _ in self.longest_padders} | self.longest_padder_factories
        return tuple(sorted({name.rpartition(".")[2].encode() for name in names}))

    @cached_property
    def pending_step_files(self) -> frozenset[str]:
        """The files whose step hazards wait for a caller that another file's step loop is."""
        return frozenset(path for name, path in self.pending_steps if name in self._step_calls_by_name)

    @cached_property
    def tensor_parameter_owners(self) -> frozenset[str]:
        """What the functions another module passes tensors are named in: their module, or the
        package that re-exports them (`distributed` for `distributed.all_gather`), or a
        method's class."""
        return frozenset(name.rpartition(".")[0] for name, _ in self.tensor_parameters)

    def passes_asked_tensors(self, module: str) -> bool:
        """Whether another module passes a tensor for a parameter (by name or position) that the
        module's step rules asked about, of a function it never calls: only there can what
        other modules pass change what they find (see `rules.shapes.given_elsewhere`)."""
        asked = self._callers_asked_by_module.get(module, frozenset())
        return any(parameter in asked for _, parameter in self.tensor_parameters_in(module))

    @cached_property
    def _callers_asked_by_module(self) -> dict[str, frozenset[str]]:
        found: dict[str, set[str]] = {}
        for module, key in self.callers_asked:
            found.setdefault(module, set()).add(key)
        return {module: frozenset(keys) for module, keys in found.items()}

    def tensor_parameters_in(self, module: str) -> frozenset[tuple[str, str]]:
        """(function or `Class.method`, position or keyword) for the module's functions and
        methods that another module passes a tensor."""
        return self._tensor_parameters_by_module.get(module, frozenset())

    @cached_property
    def _tensor_parameters_by_module(self) -> dict[str, frozenset[tuple[str, str]]]:
        by_module = _by_module(self.tensor_parameters, 1)
        for module, known in _by_module(self.tensor_parameters, 2).items():  # methods: `module.Class.forward`
            by_module[module] = by_module.get(module, frozenset()) | known
        return by_module

    def host_parameters_in(self, module: str) -> frozenset[tuple[str, str]]:
        """(function or `Class.method`, position or keyword) for the module's parameters that
        every step loop of another module passes host data."""
        return self._host_parameters_by_module.get(module, frozenset())

    @cached_property
    def _host_parameters_by_module(self) -> dict[str, frozenset[tuple[str, str]]]:
        by_module = _by_module(self.host_parameters, 1)
        for module, known in _by_module(self.host_parameters, 2).items():  # methods: `module.Class.method`
            by_module[module] = by_module.get(module, frozenset()) | known
        return by_module

    def launched_by(self, qualified: str) -> str | None:
        """The Triton kernel a call of the repository's function (or `Class.apply`) always
        launches, the first by name; None where it has a PyTorch path or launches none."""
        return self._launched.get(qualified)

    @cached_property
    def _launched(self) -> dict[str, str]:
        launched: dict[str, str] = {}
        for function, kernel in sorted(self.launchers):
            launched.setdefault(function, kernel)
        return launched

    def package_run(self, qualified: str) -> str | None:
        """The call of a CUDA-only package a call of the repository's function (or `Class.apply`,
        `Class`) always makes (PACKAGE_RUNNER), also where a package re-exports it; None elsewhere."""
        runners = self._package_runs
        return runners.get(qualified) or runners.get(self.defined_as(qualified))

    @cached_property
    def _package_runs(self) -> dict[str, str]:
        return dict(sorted(self.package_runners, reverse=True))

    def defined_as(self, qualified: str) -> str:
        """The name a repository package's re-export stands for (`op.upfirdn2d` ->
        `op.upfirdn2d.upfirdn2d`), where the package and the module it is from fail to import;
        else the name itself."""
        return self._reexported.get(qualified, qualified)

    @cached_property
    def _reexported(self) -> dict[str, str]:
        return dict(self.reexports)

    def alias_target(self, qualified: str) -> str | None:
        """The API a repository module's name stands for, when it re-exports one."""
        return self._aliases.get(qualified)

    @cached_property
    def _aliases(self) -> dict[str, str]:
        return dict(self.aliases)

    @cached_property
    def _chains(self) -> dict[str, tuple[str, ...]]:
        return {chain[0]: chain for chain in self.import_failures}

    def failing_import(self, module: str, importer: str) -> tuple[str, ...] | None:
        """How `importer` importing `module` fails: the chain of unguarded imports from the
        most specific module that import runs down to Triton or a CUDA extension; None when
        it does not fail (as far as the project knows)."""
        failing = failing_prefix(module, importer, self._chains)
        return self._chains[failing] if failing else None

    def on_cuda_nearest(self, path: str) -> str | None:
        """The file nearest `path` that puts its model on CUDA, if any: first in its folder (a
        sibling script that trains and saves what `path` loads), then in the folders above it
        (nanoT5's `main.py` above the `utils/model_utils.py` that loads its checkpoints), then
        anywhere in the repository."""
        folder = PurePosixPath(path).parent.parts

        def distance(each: str) -> tuple[int, str]:
            other = PurePosixPath(each).parent.parts
            shared = next((i for i, (a, b) in enumerate(zip(folder, other)) if a != b), min(len(folder), len(other)))
            return len(folder) - shared + len(other) - shared, each

        return min(self.on_cuda, key=distance, default=None)

    def is_local(self, module: str) -> bool:
        """Whether an import names one of the repository's own packages or modules."""
        first, dot, _ = module.partition(".")
        if first in self.local_packages:
            return True
        if not dot or not self.shadowing_modules:
            return False
        parts = module.split(".")
        return any(".".join(parts[:end]) in self.shadowing_modules for end in range(2, len(parts) + 1))


def handed_step_calls(facts: Iterable[Fact]) -> frozenset[tuple[str, str, bool, bool]]:
    """Step calls (as `Project.step_calls` holds them) of the functions a module hands to another
    module's parameter that runs every step: Megatron's `pretrain_gpt.forward_step`, given to
    `pretrain`, runs in the training loop of `megatron/training/training.py`. What it is given
    is unknown: tensors, maybe."""
    facts = list(facts)
    steps: dict[tuple[str, str], str] = {}
    for fact in facts:
        if fact.kind == STEP_PARAMETER:
            steps[(fact.name, fact.detail("position"))] = fact.detail("where")
            steps[(fact.name, fact.detail("keyword"))] = fact.detail("where")
    found = set()
    for fact in facts:
        if fact.kind == HANDED_FUNCTION:
            given = fact.detail("keyword") or fact.detail("position")
            where = steps.get((fact.detail("callee"), given))
            if where is not None:
                found.add((fact.name, where, True, False))
    return frozenset(found)


def cuda_only_ops(facts: Iterable[Fact]) -> set[str]:
    """Ops registered for CUDA with no implementation another device could use."""
    devices: dict[str, set[str]] = {}
    for fact in facts:
        if fact.kind == OP_IMPL:
            devices.setdefault(fact.name, set()).add(fact.detail("device").lower())
    return {op for op, keys in devices.items() if "cuda" in keys and not keys - {"cuda", "meta", "autograd"}}


def import_failures(
    facts: Iterable[Fact], extensions: frozenset[str], local: frozenset[str]
) -> dict[str, tuple[str, ...]]:
    """The modules whose import fails where Triton, one of the CUDA extensions or a package
    with no build is missing (see `is_failure_cause`), each with the shortest chain of
    unguarded imports that leads there."""
    edges: dict[str, set[str]] = {}
    for fact in facts:
        if fact.kind == IMPORT:
            for importer in _importer_names(fact):
                edges.setdefault(importer, set()).add(fact.detail("module"))
    chains = {
        importer: (importer, cause)
        for importer, imported in sorted(edges.items())
        for cause in sorted(imported)
        if is_failure_cause(cause, extensions, local)
    }
    while True:  # one more link per round, so that each chain is a shortest one
        found = {}
        for importer, imported in sorted(edges.items()):
            failing = [failing_prefix(module, importer, chains) for module in sorted(imported)]
            first = next((module for module in failing if module), "")
            if importer not in chains and first:
                found[importer] = (importer, *chains[first])
        if not found:
            return chains
        chains.update(found)


def failing_imports_written(
    facts: Iterable[Fact],
    chains: Mapping[str, tuple[str, ...]],
    extensions: frozenset[str],
    local: frozenset[str],
) -> set[str]:
    """The module names, as written, of the imports that load a failing module of the
    repository; one that imports Triton or an extension itself is the cause, reported in the
    first pass."""
    return {
        fact.detail("written")
        for fact in facts
        if fact.kind == IMPORT
        and not is_failure_cause(fact.detail("module"), extensions, local)
        and failing_prefix(fact.detail("module"), fact.name, chains)
    }


def failing_reexports(facts: Iterable[Fact], chains: Mapping[str, tuple[str, ...]]) -> Iterator[tuple[str, str]]:
    """(`op.upfirdn2d`, `op.upfirdn2d.upfirdn2d`) for `from .upfirdn2d import upfirdn2d` in a
    package that fails to import, from one of its modules that fails too."""
    for fact in facts:
        module = fact.detail("module") if fact.kind == IMPORT else ""
        source, _, name = module.rpartition(".")
        if fact.name in chains and source in chains and source.startswith(fact.name + "."):
            yield f"{fact.name}.{name}", module


def _importer_names(fact: Fact) -> list[str]:
    """The module an IMPORT fact was recorded in; for one outside any package (Swin's
    `window_process`, in kernels/window_process/ without `__init__.py`) also the dotted path of
    its file, the name a namespace-package import gives it (`kernels.window_process.window_process`,
    PEP 420, once the program puts the folder above on sys.path); for a package below folders
    without one, its name from the folder the scripts run from (`ModulePath.namespace`)."""
    names = [fact.name, *namespace_names(fact.detail("namespace"))]
    parts = PurePosixPath(fact.path).with_suffix("").parts
    if "." not in fact.name and fact.path.endswith(".py") and len(parts) > 1 and all(p.isidentifier() for p in parts):
        names.append(".".join(parts))
    return names


def namespace_names(namespace: str) -> tuple[str, ...]:
    """A module's name from the folder the scripts run from (`ModulePath.namespace`), and below
    `src/` where that is its first folder: a src layout installs what is under it."""
    if not namespace:
        return ()
    return (namespace, namespace.removeprefix(_SOURCE_ROOT)) if namespace.startswith(_SOURCE_ROOT) else (namespace,)


def is_failure_cause(module: str, extensions: frozenset[str], local: frozenset[str]) -> bool:
    """Triton, a CUDA extension the repository builds (or a name inside one), or a package
    with no build for some targets (flash-attn: `Package.installs_on`), unless the repository
    is that package (`local`: its top-level packages)."""
    if module == TRITON or module.startswith(TRITON + ".") or any(_within(module, e) for e in extensions):
        return True
    return failing_package(module, extensions) is not None and module.split(".", 1)[0] not in local


def failing_package(module: str, extensions: frozenset[str]) -> Package | None:
    """The package with no build for some targets that an import names (flash-attn's
    `flash_attn.bert_padding`), where no CUDA extension of the repository goes by that name."""
    package = by_import(module)
    if package is None or not package.fails_to_import() or any(_within(module, e) for e in extensions):
        return None
    return package


def failing_prefix(module: str, importer: str, chains: Mapping[str, tuple[str, ...]]) -> str:
    """The most specific module that importing `module` runs (it and each package above it)
    and that fails; the importer's own packages are left out (they ran before it did)."""
    parts = module.split(".")
    for end in range(len(parts), 0, -1):
        candidate = ".".join(parts[:end])
        if candidate in chains and candidate != importer and not importer.startswith(candidate + "."):
            return candidate
    return ""


def _within(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


_SOURCE_ROOT = "src."  # a src layout's folder, which packaging leaves out of the import names


@dataclass(frozen=True)
class ModulePath:
    """Where a Python file sits in the import system: its dotted name and the package its
    relative imports start from."""

    name: str
    package: str
    # where the package sits below folders without __init__.py under the folder the scripts run
    # from: the name a namespace-package import from there gives it (CenterNet's
    # `src.lib.models.networks.DCNv2.dcn_v2` for `DCNv2.dcn_v2`); else empty
    namespace: str = ""
    # for a script in a folder without __init__.py below the one the scripts run from: the
    # modules and packages beside it, which its absolute imports reach first, as Python puts
    # the script's folder first on sys.path (Depth-Anything's metric_depth/train.py: `from
    # util.metric import eval_depth` is `metric_depth.util.metric`)
    beside: frozenset[str] = frozenset()

    @property
    def import_names(self) -> tuple[str, ...]:
        """The names imports may give the module: its own; its name from the folder the scripts
        run from; and in a `src/` layout, its name below `src/` (F5-TTS's
        `src/f5_tts/model/utils.py`, imported as `f5_tts.model.utils` with no `f5_tts/__init__.py`)."""
        return (self.name, *namespace_names(self.namespace))

    @classmethod
    def guess(cls, path: str) -> ModulePath:
        """From the path alone (no file system): `src/`-style prefixes dropped."""
        parts = list(PurePosixPath(path).with_suffix("").parts)
        if parts and parts[0] in ("src", "lib", "python"):
            parts.pop(0)
        return cls.from_parts(parts)

    @classmethod
    def from_parts(cls, parts: list[str]) -> ModulePath:
        if parts and parts[-1] == "__init__":
            name = ".".join(parts[:-1])
            return cls(name, name)
        return cls(".".join(parts), ".".join(parts[:-1]))

    def absolute(self, qualified: str) -> str:
        """A qualified name with relative-import dots resolved against the package, and an
        absolute import of a module beside a script named from the scripts' folder."""
        if not qualified.startswith("."):
            if qualified.split(".", 1)[0] in self.beside:
                return f"{self.package}.{qualified}"
            return qualified
        dots = len(qualified) - len(qualified.lstrip("."))
        package = self.package.split(".") if self.package else []
        base = package[: len(package) - (dots - 1)] if dots > 1 else package
        rest = qualified[dots:]
        return ".".join([*base, rest]) if rest else ".".join(base)


def host_parameters(facts: Iterable[Fact]) -> set[tuple[str, str]]:
    """(function, position or keyword) for the parameters that every step call of the function
    passes host data (a function no step loop calls has none)."""
    passed: dict[str, set[str]] = {}
    for fact in facts:
        if fact.kind == STEP_CALL and fact.detail("periodic") != "yes":  # every step's calls only
            keys = set(fact.detail("host").split())
            passed[fact.name] = passed[fact.name] & keys if fact.name in passed else keys
    return {(function, key) for function, keys in passed.items() for key in keys}


def _by_module(named: Iterable[tuple[str, str]], parts: int) -> dict[str, frozenset[tuple[str, str]]]:
    """Qualified names with a detail, by module, taking the last `parts` parts as the name in it."""
    by_module: dict[str, set[tuple[str, str]]] = {}
    for qualified, detail in named:
        pieces = qualified.rsplit(".", parts)
        if len(pieces) == parts + 1:
            by_module.setdefault(pieces[0], set()).add((".".join(pieces[1:]), detail))
    return {module: frozenset(known) for module, known in by_module.items()}
