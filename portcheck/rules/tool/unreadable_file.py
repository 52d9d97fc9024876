from portcheck.rule import ERROR, Invalid, Rule, Valid, per_target


class UnreadableFile(Rule):
    """## What it does
    Reports a file that cannot be read as text: a permission or I/O error, bytes that are not
    valid in the file's encoding, binary content in a file named like Python source, or
    something that is not a regular file at all (a named pipe, socket or device named like a
    source file), which portcheck never opens: reading one could block or never end.

    ## Why is this bad?
    portcheck cannot check what it cannot read, and neither can Python import it. The scan goes
    on with the other files.

    ## Example
    A `model.py` saved as Latin-1 without a coding comment, so `"é"` is the byte `0xE9`.

    ## Use instead
    Save the file as UTF-8, or declare its encoding on the first or second line:
    ```python
    # -*- coding: latin-1 -*-
    ```

    ## Targets
    An error on every target.

    ## Fix safety
    No automatic fix: portcheck never rewrites bytes it cannot decode.
    """

    code = "PC002"
    name = "unreadable-file"
    message = "{detail}"
    hint = "make the file readable UTF-8 (or declare its encoding), or exclude it"
    severity = per_target(ERROR)
    engine_reported = True

    VALID = [
        Valid(
            "# -*- coding: latin-1 -*-\nimport torch\nname = 'caf\xe9'\nx = torch.zeros(1).cuda()\n".encode("latin-1")
        ),
        Valid(b"\xef\xbb\xbfimport torch\nx = torch.zeros(1).cuda()\n"),
    ]
    INVALID = [
        Invalid(b"import torch\nname = 'caf\xe9'\nx = torch.zeros(1).cuda()\n", lines=[1], message="not valid utf-8"),
        Invalid(b"\x7fELF\x02\x01\x01\x00\x00\x00cuda", lines=[1], message="binary file"),
        Invalid(b"# -*- coding: no-such-codec -*-\nimport torch\n", lines=[1], message="cannot decode"),
    ]
