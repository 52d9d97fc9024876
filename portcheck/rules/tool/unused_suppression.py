from portcheck.rule import WARNING, Invalid, Rule, Valid, per_target


class UnusedSuppression(Rule):
    """## What it does
    Reports a `# portcheck: ignore[...]` entry, a bare `# portcheck: ignore`, or a PC code in a
    `# noqa: ...` comment that suppresses nothing, or that names no rule or target portcheck
    knows. A comment that ends a multi-line statement whose finding starts on an earlier line
    is told where to go instead.

    ## Why is this bad?
    Stale suppressions hide the next real finding on that line and make readers believe a CUDA
    tie is still there. Typos in codes (`PC2O1`) silently suppress nothing.

    ## Example
    ```python
    model = model.to(device)  # portcheck: ignore[PC102]
    ```

    ## Use instead
    ```python
    model = model.to(device)
    ```

    ## Targets
    A warning on every target. An entry scoped to a target (`PC203@tpu`) is only checked when
    that target is selected, and an entry for a rule that is not enabled is never reported.

    ## Fix safety
    No automatic fix yet.
    """

    code = "PC004"
    name = "unused-suppression"
    message = "{detail}"
    hint = "remove the stale entry from the comment"
    severity = per_target(WARNING)
    engine_reported = True

    VALID = [
        Valid(
            "import torch\nx = torch.zeros(1).cuda()  # portcheck: ignore[PC102]\n",
            options={"select": ["PC004", "PC102"]},
        ),
        Valid("import torch\nx = torch.zeros(1)  # portcheck: ignore[PC102]\n", options={"select": ["PC004"]}),
        Valid(
            "import torch as T\n# portcheck: ignore[PC203@tpu]\nT.cuda.synchronize()\n",
            options={"select": ["PC004", "PC203"], "targets": ["tpu"]},
        ),
    ]
    INVALID = [
        Invalid(
            "import torch\nx = torch.zeros(1)  # portcheck: ignore[PC102]\n",
            lines=[2],
            options={"select": ["PC004", "PC102"]},
        ),
        Invalid("x = 1  # portcheck: ignore[PC999]\n", lines=[1], message="names no portcheck rule"),
        Invalid("x = 1  # portcheck: ignore[PC102@gpu]\n", lines=[1], message="names no portcheck target"),
        Invalid(
            "from torch.cuda import synchronize as sync\nsync()  # portcheck: ignore[PC203, PC204]\n",
            lines=[2],
            message="PC204",
            options={"select": ["PC004", "PC2"]},
        ),
    ]
