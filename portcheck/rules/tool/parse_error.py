from portcheck.rule import ERROR, Invalid, Rule, Valid, per_target


class ParseError(Rule):
    """## What it does
    Reports a file that is not valid Python 3 source, so none of the other rules could check it.

    ## Why is this bad?
    A file that does not parse cannot be checked for CUDA ties, and whatever it holds will not
    run on any target either. The scan goes on with the other files.

    ## Example
    ```python
    print "loss", loss  # Python 2
    ```

    ## Use instead
    ```python
    print("loss", loss)
    ```

    ## Targets
    An error on every target: portcheck cannot say anything about the file.

    ## Fix safety
    No automatic fix: a person has to repair the syntax.
    """

    code = "PC001"
    name = "parse-error"
    message = "{detail}"
    hint = "fix the syntax so that portcheck (and Python) can read the file"
    severity = per_target(ERROR)
    engine_reported = True

    VALID = [
        Valid("import torch\nx = torch.zeros(3)\n"),
        Valid(""),
        Valid("def f(:\n    pass\n"),  # no enabled rule's trigger word: never parsed
    ]
    INVALID = [
        Invalid("import torch\nx = torch.zeros(3).cuda(\n", lines=[2]),
        Invalid('import torch\nprint "on", torch.cuda.device_count()\n', lines=[2], message="syntax error"),
        Invalid("import torch\ndef f(:\n    torch.cuda.synchronize()\n", lines=[2]),
    ]
