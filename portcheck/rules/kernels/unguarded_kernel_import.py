from __future__ import annotations

import sys
from collections.abc import Sequence

import libcst as cst

from portcheck import kernels, patterns, project
from portcheck.project import Project
from portcheck.rule import ERROR, OFF, Invalid, Rule, SeverityMap, Valid, at_most_info
from portcheck.targets import TARGET_ORDER, packages

_GUARDS = (cst.If, cst.Match)
_DEFERRED = (cst.FunctionDef, cst.Lambda)
_TRITON_SEVERITY = kernels.severity(kernels.TRITON)
_EXTENSION_SEVERITY = kernels.severity(kernels.EXTENSION)


class UnguardedKernelImport(Rule):
    """## What it does
    Reports imports that run when a module is imported, outside any `if` and outside a
    `try` whose `except ImportError` carries on, and that fail on a host without Triton or without one of the
    repository's CUDA extensions: `import triton` (also in a module that defines no kernel),
    and an import of one of the repository's own modules that itself imports Triton or a
    CUDA extension that way, directly or through other modules, or a package with no build
    for the target (flash-attn, mamba-ssm, causal-conv1d: InternVL's `internvl.patch`, whose
    packed-training patches import `flash_attn` at the top). The finding names the chain
    (`pkg.model -> pkg.kernels -> triton`); where the imported module (a package, through
    its own modules) does not import the cause itself (nor through its own package's
    re-exports), the statement is info: it loads once the module nearer the cause guards its
    import, and so is it in a module that defines Triton kernels itself, which is ported whole.
    Each such statement is reported: the module stops at the first, but loads only once every
    one is guarded (`import triton`, then `import triton.language as tl`, then `from kernels
    import add`).

    ## Why is this bad?
    Triton is a GPU compiler for NVIDIA, AMD and Intel: TPU, Trainium, Apple and Gaudi hosts
    (and CPU-only installs of torch) do not have it, and a CUDA extension exists only where
    its CUDA build ran. One unguarded import at the top of a kernels module then stops every
    module that imports it, however indirectly, before any of its pure-PyTorch code runs:
    the whole program fails on `import`, even where the kernel itself is never called.

    ## Example
    ```python
    import triton  # kernels.py

    from kernels import fused_add  # model.py: fails too
    ```

    ## Use instead
    ```python
    try:
        import triton
    except ImportError:
        triton = None
    ```
    and keep a PyTorch path where `triton is None` (or import the kernels module inside the
    function that launches them).

    ## Targets
    For Triton, an error where it has no backend (tpu, neuron, xla, mps, hpu, cpu) and off
    where it runs (xpu, rocm, npu); for a CUDA extension, an error on every target but ROCm,
    where it is hipified at build time; for a package, an error on every target without a
    build of it (the package table's `installs_on`: ROCm has flash-attn's and Mamba's),
    whose own import is PC701's finding. The chain is followed through the files the scan
    parses: a module that mentions nothing portcheck looks for (an `__init__.py` of plain
    relative imports) joins a chain once a later pass finds it importing a failing module.

    ## Fix safety
    No automatic fix: what to do without the kernel is a person's decision.
    """

    code = "PC610"
    name = "unguarded-kernel-import"
    message = "{subject}: on a host without {missing} this module does not load"
    hint = "{advice}"
    severity = {t: max(_TRITON_SEVERITY[t], _EXTENSION_SEVERITY[t]) for t in TARGET_ORDER}
    triggers = (b"triton",)
    walks_every_file = True  # the imports of every module, for the project's chains

    VALID = [
        Valid("try:\n    import triton\n    import triton.language as tl\nexcept ImportError:\n    triton = None\n"),
        Valid("import torch\nif torch.cuda.is_available():\n    import triton\n"),
        Valid("def launch(x):\n    import triton\n    return triton.cdiv(x, 2)\n"),
        Valid("import torch as T\nimport torch.nn\nimport triton\n", options={"targets": ["xpu", "rocm", "npu"]}),
        Valid(
            "from torch import nn\nfrom torch.utils._triton import has_triton as available\n\n"
            "def build(torch):\n    import triton.language as tl\n    return tl\n"
        ),
    ]
    INVALID = [
        Invalid(
            "import torch\nimport triton\nimport triton.language as tl\n",
            lines=[2, 3],
            message="is imported when the module is",
        ),
        Invalid("from triton import language as tl\n", lines=[1], options={"targets": ["neuron"]}),
        Invalid("import triton, triton.language as tl\n", lines=[1]),
        Invalid("import torch\ntry:\n    import triton\nfinally:\n    pass\n", lines=[3]),
        Invalid("try:\n    import triton\nexcept ValueError:\n    pass\n", lines=[2]),
        Invalid(
            "try:\n    import triton\nexcept ImportError as error:\n    raise RuntimeError('pip install triton') from error\n",
            lines=[2],
        ),
        Invalid(
            "import torch.nn\nclass Kernels:\n    import triton as T\n", lines=[3], options={"targets": ["mps", "cpu"]}
        ),
    ]

    @classmethod
    def project_triggers(cls, known: Project) -> tuple[bytes, ...]:
        """The imports that load a failing module, as written. Files the first pass skipped have
        no imports on record: to learn theirs, those that mention a failing module's name."""
        if known.learning_imports:
            return tuple(sorted({chain[0].rpartition(".")[2].encode() for chain in known.import_failures}))
        return tuple(sorted(written.encode() for written in known.failing_imports_written if written))

    def visit_Import(self, node: cst.Import) -> None:
        self._check(node, [(name, False, name) for name in (patterns.dotted(alias.name) for alias in node.names)])

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        relative = bool(node.relative)
        written = "." * len(node.relative) + (patterns.dotted(node.module) if node.module else "")
        base = self.ctx.module.absolute(written)
        if isinstance(node.names, cst.ImportStar):
            self._check(node, [(base, relative, written)])
            return
        names = [patterns.dotted(alias.name) for alias in node.names]
        self._check(
            node,
            [(f"{base}.{name}" if base else name, relative, written if node.module else name) for name in names],
        )

    def _check(self, node: cst.Import | cst.ImportFrom, modules: list[tuple[str, bool, str]]) -> None:
        """Note what an import-time import loads, with the module's name as the statement
        writes it (`.ops.kernels`; the name itself after `from . import`), what the second
        pass looks for; report it where that fails."""
        if not modules or not runs_unguarded_on_import([*self.ctx.ancestors, node]):
            return
        known = self.ctx.project
        importer = self.ctx.module.name
        told = known.complete  # the first pass tells of Triton, once per statement
        for module, relative, written in modules:
            if _is_triton(module) and not known.is_local(module):
                self._record(importer, project.TRITON, node, written)
                if not told:
                    told = True
                    self._report_triton(node, module)
            elif relative or known.is_local(module) or _maybe_built_here(module):
                self._record(importer, module, node, written)
        if known.complete:
            self._report_chain(node, [module for module, _, _ in modules], importer)

    def _record(self, importer: str, module: str, node: cst.CSTNode, written: str) -> None:
        if importer:
            namespace = self.ctx.module.namespace
            self.record(project.IMPORT, importer, node, module=module, written=written, namespace=namespace)

    def _report_triton(self, node: cst.Import | cst.ImportFrom, module: str) -> None:
        if isinstance(node, cst.ImportFrom) and node.module is not None:
            module = patterns.dotted(node.module)  # `triton.testing`, not `triton.testing.do_bench`
        port = kernels.port_hint(kernels.TRITON, self.ctx.targets)
        self.report(
            node,
            severity=_TRITON_SEVERITY,
            subject=f"`{module}` is imported when the module is, outside try/except ImportError",
            missing="Triton",
            advice="guard it (`try: import triton` / `except ImportError: triton = None`) and keep a PyTorch "
            f"path where it is None; port: {port}",
        )

    def _report_chain(self, node: cst.CSTNode, modules: Sequence[str], importer: str) -> None:
        """The statement's first imported module that fails, with how (second pass)."""
        known = self.ctx.project
        for module in modules:
            if project.is_failure_cause(module, known.cuda_extensions, known.local_packages):
                continue  # the import itself is the cause: reported as such (here or by PC607)
            chain = known.failing_import(module, importer)
            if chain is not None:
                package = None if _is_triton(chain[-1]) else project.failing_package(chain[-1], known.cuda_extensions)
                severity = _chain_severity(chain, package)
                if not imports_cause_itself(chain) or self._defines_kernels(importer):
                    severity = at_most_info(severity)
                self.report(node, severity=severity, **_chain_fields(chain, package))
                return

    def _defines_kernels(self, module: str) -> bool:
        """Whether the module defines Triton kernels itself (mamba's `ssd_combined`, which imports
        its sibling kernel modules): it is ported whole, and its own `import triton` is the
        finding that says so."""
        return any(kernel.startswith(module + ".") for kernel in self.ctx.project.kernels)


def _maybe_built_here(module: str) -> bool:
    """A module that neither Python nor torch ships, which may be a CUDA extension the
    repository builds (Swin's `swin_window_process`, named in a setup.py that the same pass
    reads): its import is recorded, and the project pass chains it once it knows."""
    top = module.split(".", 1)[0]
    return top not in sys.stdlib_module_names and top != "torch"


def imports_cause_itself(chain: Sequence[str]) -> bool:
    """Whether the imported module itself imports the cause, through its package's own
    re-exports at most (stylegan2's `from op import upfirdn2d`: op -> op.upfirdn2d -> the
    extension), and a package through its own modules (torch-ngp's `raymarching` ->
    `raymarching.raymarching` -> `raymarching.backend`, which builds the extension); a module
    further away (a script importing the model) loads once that one guards its import, so the
    finding there is info."""
    own = chain[0] + "."
    links = [module for module, after in zip(chain, chain[1:]) if not after.startswith((module + ".", own))]
    return len(links) <= 1


def _is_triton(module: str) -> bool:
    return module == project.TRITON or module.startswith(project.TRITON + ".")


def _chain_severity(chain: Sequence[str], package: packages.Package | None) -> SeverityMap:
    """Triton's, a CUDA extension's, or an error where the package (`failing_package`) has no build."""
    if _is_triton(chain[-1]):
        return _TRITON_SEVERITY
    if package is not None and package.installs_on is not None:
        return {target: OFF if target in package.installs_on else ERROR for target in TARGET_ORDER}
    return _EXTENSION_SEVERITY


def _chain_fields(chain: Sequence[str], package: packages.Package | None) -> dict[str, str]:
    cause, owner = chain[-1], chain[-2]
    if _is_triton(cause):
        what, missing = "Triton", "Triton"
    elif package is not None:
        what, missing = f"`{package.key}`", f"a build of `{package.key}`"
    else:
        what, missing = f"the CUDA extension `{cause}`", f"a CUDA build of `{cause}`"
    return {
        "subject": f"`{chain[0]}` imports {what} when it is imported ({' -> '.join(chain)})",
        "missing": missing,
        "advice": f"import `{chain[0]}` inside the code that needs it, or guard the import of `{cause}` in "
        f"`{owner}` (try/except ImportError) and keep a PyTorch path there",
    }


def runs_unguarded_on_import(chain: Sequence[cst.CSTNode]) -> bool:
    """Whether the last node of `chain` (from the module down) runs whenever the module is
    imported and stops it when it fails: not in a function, under no `if`, not in the body of
    a `try` whose handler catches ImportError and carries on."""
    for parent, child in zip(chain, chain[1:]):
        if isinstance(parent, _DEFERRED + _GUARDS):
            return False
        if isinstance(parent, (cst.Try, cst.TryStar)) and child is parent.body:
            if any(patterns.carries_on_without_import(handler) for handler in parent.handlers):
                return False
    return True
