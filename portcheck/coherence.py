"""A CUDA check and the code it protects are fixed together, or neither is.

Each rule's edit is right on its own; a program is ported only when its device logic still
holds afterwards. Rewriting `if torch.cuda.is_available():` while its body still calls
`torch.cuda.get_device_properties` crashes on a TPU where the program used to run; rewriting
the body of a check that stays CUDA-only writes dead code. So, per guard (portcheck.flow):

- the check's own edits are held back while anything CUDA-only it protects has no edit;
- the protected edits are held back while the check has findings and none of its edits is
  applied (it stays CUDA-only, so they would never run);
- checks written the same way in one top-level definition, where what one guards binds a
  name that what another guards reads, decide together (a message format chosen under `if
  torch.cuda.is_available():` and filled under another): while one stays, the others do too;
- for a target that never has an accelerator (cpu), neither is touched: a host without CUDA
  already takes the program's own other path, and the CUDA path stays for GPUs. An `assert`
  is no such path: it stops the program, and stays reported.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from portcheck import registry
from portcheck.findings import Finding
from portcheck.flow import NOWHERE, Placement
from portcheck.rewrites.edits import Edit
from portcheck.targets import Target

Pair = tuple[Finding, Edit]
FindingKey = tuple[str, int, int, int, int, int]


@dataclass(frozen=True)
class Check:
    """What keeping a CUDA check whole needs to know of it (portcheck.flow.Guard)."""

    asserts: bool  # an `assert`: it stops the program where the check fails
    twin: int  # the first check it decides together with (by index; see portcheck.flow.Guard.twin)


def key(finding: Finding) -> FindingKey:
    """A finding's identity across the engine's passes: rule and span (and cell, in a notebook)."""
    return (finding.code, finding.cell or 0, finding.line, finding.column, finding.end_line, finding.end_column)


def coherent(
    guards: Sequence[Check],
    placements: Mapping[FindingKey, Placement],
    findings: Sequence[Finding],
    chosen: Sequence[Pair],
    target: Target,
) -> tuple[list[Pair], list[tuple[Finding, str]]]:
    """The chosen fixes that keep every guard (by index) consistent with what it protects and
    with its twins, and each fix held back with why."""
    if not guards or not chosen:
        return list(chosen), []
    applied = {id(finding) for finding, _ in chosen}
    held: dict[int, str] = {}
    keeps_cuda_paths = target.runs_without_accelerator and not target.accelerator_api
    where = [(finding, placements.get(key(finding), NOWHERE)) for finding in findings]
    checks = []
    for index, guard in enumerate(guards):
        own = [finding for finding, placement in where if index in placement.checks]
        inside = [finding for finding, placement in where if index in placement.protected_by]
        if own or inside:
            checks.append((guard, own, inside))
    if keeps_cuda_paths:
        why = f"left as it is: the CUDA path stays for GPUs, and on {target.name} the program's other path runs"
        for guard, own, inside in checks:
            if not guard.asserts:
                held.update((id(f), why) for f in (*own, *inside) if id(f) in applied)
    changed = True
    while changed:  # holding one fix back can leave another guard inconsistent: to a fixed point
        before = len(held)
        stays = [(guard, own, inside) for guard, own, inside in checks if own and not _rewritten(own, applied, held)]
        dead = {id(f) for guard, _, inside in stays if not guard.asserts for f in inside}  # never runs there
        staying_twins = {guard.twin: own[0] for guard, own, _ in reversed(stays)}
        for guard, own, inside in checks:
            rewritten = _rewritten(own, applied, held)
            twin = staying_twins.get(guard.twin)
            if rewritten and twin is not None:
                why = f"kept: the same check on line {twin.line} stays, and the two decide together"
                held.update((id(f), why) for f in rewritten)
            elif rewritten:
                unfixed = [
                    f
                    for f in inside
                    if registry.get(f.code).cuda_only and (id(f) not in applied or id(f) in held) and id(f) not in dead
                ]
                if unfixed:
                    first = unfixed[0]
                    why = f"kept: the code it guards still needs a person ({first.code} on line {first.line})"
                    held.update((id(f), why) for f in rewritten)
            elif own:
                check = own[0]
                why = f"left: its CUDA check ({check.code} on line {check.line}) stays, so this would never run"
                held.update((id(f), why) for f in inside if id(f) in applied and id(f) not in held)
        changed = len(held) > before
    kept = [(finding, edit) for finding, edit in chosen if id(finding) not in held]
    return kept, [(finding, held[id(finding)]) for finding, _ in chosen if id(finding) in held]


def _rewritten(own: Sequence[Finding], applied: set[int], held: dict[int, str]) -> list[Finding]:
    return [finding for finding in own if id(finding) in applied and id(finding) not in held]
