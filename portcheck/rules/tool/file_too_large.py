from portcheck.rule import WARNING, Invalid, Rule, Valid, per_target


class FileTooLarge(Rule):
    """## What it does
    Reports a file that mentions CUDA but was not scanned because parsing it would cost too
    much: it is larger than `max-file-size` (2 MB by default), or its operator chains are longer
    than `max-expression-chain` (3,000 by default), such as a generated sum of thousands of
    terms, which the parser takes quadratic time over.

    ## Why is this bad?
    Such files are almost always generated (vendored bundles, exported graphs, protobuf
    modules, expanded formulas). Parsing one can cost minutes and gigabytes, more than the rest
    of a repository together, so portcheck skips it and says so instead of silently leaving a
    hole in the report.

    ## Example
    A 10 MB generated `ops_table.py` that contains the word `cuda`, or a 66 kB
    `x = t0.cuda() + t1.cuda() + ... + t2999.cuda()`.

    ## Use instead
    Exclude generated files (`extend-exclude = ["ops_table.py"]`), or raise the limits:
    ```toml
    [tool.portcheck]
    max-file-size = 20_000_000
    max-expression-chain = 10_000
    ```

    ## Targets
    A warning on every target: nothing was checked in that file.

    ## Fix safety
    No automatic fix.
    """

    code = "PC003"
    name = "file-too-large"
    message = "not scanned: {detail}"
    hint = "exclude the file if it is generated, or raise the limit in [tool.portcheck]"
    severity = per_target(WARNING)
    engine_reported = True

    VALID = [
        Valid("import torch\nx = torch.zeros(1).cuda()\n"),
        Valid("import torch\nx = " + " + ".join(f"t{i}.cuda()" for i in range(40)) + "\n"),  # long, not too long
        Valid("x = 1\n" * 50, options={"max-file-size": 100}),  # large, but nothing to check
    ]
    INVALID = [
        Invalid("import torch\n" + "x = torch.zeros(1).cuda()\n" * 10, lines=[1], options={"max-file-size": 100}),
        Invalid(
            "import torch as T\n" + "y = 0\n" * 40 + "T.cuda.synchronize()\n", lines=[1], options={"max-file-size": 64}
        ),
        Invalid(
            "import torch\n\nx = (\n    " + " + ".join(f"t{i}.cuda()" for i in range(40)) + "\n)\n",
            lines=[3],
            message="too long to parse",
            options={"max-expression-chain": 20},
        ),
    ]
