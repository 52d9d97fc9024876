"""Small pieces of English that messages share, so that every message gets them right: a verb
that agrees with how many targets it speaks of, a counted noun, two texts joined as sentences."""

from __future__ import annotations

from collections.abc import Sized


def verb(subjects: Sized, singular: str, plural: str) -> str:
    """The verb form for `subjects` (`tpu emulates`, `tpu/neuron emulate`); none at all reads as
    a plural ("the selected targets")."""
    return singular if len(subjects) == 1 else plural


def counted(count: int, noun: str, plural: str = "") -> str:
    """`1 line`, `3 lines`."""
    return f"{count} {noun if count == 1 else plural or noun + 's'}"


def sentences(first: str, second: str) -> str:
    """Two texts as two sentences, where one output field must hold both (a message and its
    help): `... on every other device. Compare the device type instead ...`."""
    if not second:
        return first
    head = first if first.endswith((".", "!", "?")) else f"{first}."
    return f"{head} {second[:1].upper()}{second[1:]}"
