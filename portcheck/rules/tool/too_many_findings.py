from portcheck.rule import WARNING, Invalid, Rule, Valid, per_target


class TooManyFindings(Rule):
    """## What it does
    Reports where the analysis of a file stopped because it reached `max-findings-per-file`
    (2,000 by default): the findings before it are reported, the rest of the file is not
    checked, and `portcheck fix` leaves the file as it is.

    ## Why is this bad?
    A file with thousands of findings is almost always generated (an exported graph, a table
    of calls), and every finding costs time and memory: 130,000 of them took 2.4 minutes and
    3.5 GB. Stopping keeps each file's cost bounded, and says so instead of silently leaving a
    hole in the report. Fixing only part of such a file could rewrite a CUDA check without the
    code it protects, so `fix` does not.

    ## Example
    A generated `graph.py` with 5,000 lines of `t123 = t122.cuda()`.

    ## Use instead
    Exclude generated files (`extend-exclude = ["graph.py"]`), port them at their generator,
    or raise the limit:
    ```toml
    [tool.portcheck]
    max-findings-per-file = 10_000
    ```

    ## Targets
    A warning on every target: part of the file was not checked.

    ## Fix safety
    No automatic fix.
    """

    code = "PC006"
    name = "too-many-findings"
    message = "the analysis stopped here, after {limit} findings (max-findings-per-file): the rest of the file was not checked"
    hint = "exclude the file if it is generated, or raise max-findings-per-file in [tool.portcheck]"
    severity = per_target(WARNING)
    engine_reported = True

    VALID = [
        Valid(
            "import torch\nx = torch.zeros(1).cuda()\ny = x.cuda()\n",
            options={"max-findings-per-file": 2, "select": ["PC006", "PC102"]},
        ),
        Valid("import torch\n" + "".join(f"x{i} = torch.zeros(1).cuda()\n" for i in range(5))),
    ]
    INVALID = [
        Invalid(
            "import torch\n" + "".join(f"x{i} = torch.zeros(1).cuda()\n" for i in range(5)),
            lines=[4],
            message="after 2 findings",
            options={"max-findings-per-file": 2, "select": ["PC006", "PC102"]},
        ),
        Invalid(
            "cupy-cuda12x\nnvidia-cudnn-cu12\nflash-attn\n",
            path="requirements.txt",
            lines=[2],
            options={"max-findings-per-file": 1, "select": ["PC006", "PC702"]},
        ),
    ]
