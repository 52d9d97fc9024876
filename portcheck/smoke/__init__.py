"""`portcheck smoke`: a short parity and trace test of a model on an accelerator backend.

The only part of portcheck that imports torch (installed with `pip install portcheck[smoke]`);
`scan` and `fix` never load this package.
"""

from portcheck.smoke.case import SmokeCase

__all__ = ["SmokeCase"]
