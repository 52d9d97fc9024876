from __future__ import annotations

from portcheck import filekinds, manifests
from portcheck.rule import WARNING, Invalid, Rule, Valid, per_target

MANIFEST_KINDS = (
    filekinds.REQUIREMENTS,
    filekinds.PYPROJECT,
    filekinds.SETUP_CFG,
    filekinds.CONDA,
    filekinds.DOCKERFILE,
    filekinds.COG,
)


class UnreadableManifest(Rule):
    """## What it does
    Reports a dependency manifest (requirements file, pyproject.toml, setup.cfg, conda
    environment file) that does not parse, or a line in it that is not a valid requirement.

    ## Why is this bad?
    portcheck reads manifests to find CUDA-only dependencies and the torch version a project
    pins. What it cannot read it cannot check, and pip or conda will usually refuse it too.

    ## Example
    ```text
    torch >= 2.1 !!
    ```

    ## Use instead
    ```text
    torch>=2.1
    ```

    ## Targets
    A warning on every target: the rest of the scan goes on.

    ## Fix safety
    No automatic fix.
    """

    code = "PC005"
    name = "unreadable-manifest"
    message = "{detail}"
    hint = "fix the line so that pip (and portcheck) can read it"
    severity = per_target(WARNING)
    file_kinds = MANIFEST_KINDS

    VALID = [
        Valid(
            "torch>=2.1\nnumpy\n-r base.txt\n--extra-index-url https://example.org/simple\n", path="requirements.txt"
        ),
        Valid('[project]\nname = "x"\ndependencies = ["torch"]\n', path="pyproject.toml"),
    ]
    INVALID = [
        Invalid(
            "torch>=2.1\nnot a requirement !!\n", lines=[2], path="requirements.txt", message="not a valid requirement"
        ),
        Invalid("[project\nname = 1\n", lines=[1], path="pyproject.toml", message="cannot parse"),
        Invalid("dependencies:\n  - torch\n - bad: [\n", lines=[3], path="environment.yml"),
    ]

    def check_text(self, text: str) -> None:
        manifest = manifests.read(self.ctx.kind, text)
        lines = text.splitlines()
        for problem in manifest.problems:
            line = min(max(problem.line, 1), max(len(lines), 1))
            width = len(lines[line - 1]) if lines else 0
            self.report_span((line, 1, line, width + 1), detail=problem.text)
