"""Accepted findings, by fingerprint, so that a CI gate fails only on new ones."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from portcheck import __version__
from portcheck.api import ScanReport

FORMAT = 1


class BaselineError(ValueError):
    """The baseline file is missing or malformed."""


def write(path: Path, report: ScanReport) -> int:
    """Record the report's findings; a reviewable JSON file, sorted for stable diffs, its paths
    from the repository root (portcheck.anchor) as the fingerprints are."""
    entries = sorted(
        (
            {"fingerprint": f.fingerprint, "code": f.code, "path": report.location(f), "cell": f.cell, "line": f.line}
            for f in report.findings
        ),
        key=lambda e: (e["path"], e["cell"] or 0, e["line"], e["code"], e["fingerprint"]),
    )
    document = {
        "portcheck_baseline": FORMAT,
        "created_by": f"portcheck {__version__}",
        "paths_from": report.anchor.kind,
        "findings": entries,
    }
    temporary = path.with_name(path.name + ".tmp")
    temporary.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
    temporary.replace(path)
    return len(entries)


def load(path: Path) -> frozenset[str]:
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise BaselineError(f"cannot read baseline {path}: {error}") from None
    if not isinstance(document, dict) or document.get("portcheck_baseline") != FORMAT:
        raise BaselineError(f"{path} is not a portcheck baseline (format {FORMAT})")
    try:
        return frozenset(str(entry["fingerprint"]) for entry in document["findings"])
    except (KeyError, TypeError):
        raise BaselineError(f"{path}: every entry needs a fingerprint") from None


def apply(report: ScanReport, fingerprints: frozenset[str]) -> ScanReport:
    """Hide the findings the baseline already holds."""
    kept = tuple(f for f in report.findings if f.fingerprint not in fingerprints)
    return replace(report, findings=kept, baselined=len(report.findings) - len(kept))
