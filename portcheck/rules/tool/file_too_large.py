from portcheck.rule import WARNING, Invalid, Rule, Valid, per_target


class FileTooLarge(Rule):
    """## What it does
    Reports a file that mentions CUDA but is larger than `max-file-size` (2 MB by default), and
    was therefore not scanned.

    ## Why is this bad?
    Files that large are almost always generated (vendored bundles, exported graphs, protobuf
    modules). Parsing them costs more than the rest of a repository together, so portcheck
    skips them and says so instead of silently leaving a hole in the report.

    ## Example
    A 10 MB generated `ops_table.py` that contains the word `cuda`.

    ## Use instead
    Exclude generated files (`extend-exclude = ["ops_table.py"]`), or raise the limit:
    ```toml
    [tool.portcheck]
    max-file-size = 20_000_000
    ```

    ## Targets
    A warning on every target: nothing was checked in that file.

    ## Fix safety
    No automatic fix.
    """

    code = "PC003"
    name = "file-too-large"
    message = "not scanned: the file is {size}, over max-file-size ({limit})"
    hint = "exclude the file if it is generated, or raise max-file-size in [tool.portcheck]"
    severity = per_target(WARNING)
    engine_reported = True

    VALID = [
        Valid("import torch\nx = torch.zeros(1).cuda()\n"),
        Valid("x = 1\n" * 50, options={"max-file-size": 100}),  # large, but nothing to check
    ]
    INVALID = [
        Invalid("import torch\n" + "x = torch.zeros(1).cuda()\n" * 10, lines=[1], options={"max-file-size": 100}),
        Invalid(
            "import torch as T\n" + "y = 0\n" * 40 + "T.cuda.synchronize()\n", lines=[1], options={"max-file-size": 64}
        ),
    ]
