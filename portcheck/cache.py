"""Per-file scan results kept between runs, so that re-scanning an unchanged tree costs a read
and a hash per file instead of a parse.

An entry's key hashes everything a file's result depends on: its bytes, its path and module,
the configuration, what the project knows in the second pass, and portcheck's own code and
data. An entry is therefore never stale, only unused. One configuration's entries live in one
JSON file (data, never code: a cache folder checked out from elsewhere cannot run anything),
replaced atomically at the end of a run: concurrent runs never see a half-written file, and
when two write, the last one wins and the other's entries are simply computed again.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import tempfile
from collections.abc import Iterable
from functools import cache
from pathlib import Path

from portcheck import __version__
from portcheck.config import Config
from portcheck.findings import Fact, Finding, FixSafety, Severity
from portcheck.project import Project
from portcheck.results import FileResult, Source

FOLDER = ".portcheck_cache"
_FORMAT = 3  # bump when the JSON layout below changes
_README = "Signature: 8a477f597d28d172789f06886806bc55\n# portcheck's cache (see https://bford.info/cachedir/)\n"


class ResultCache:
    """The results of one configuration: looked up by key, written back with `save`."""

    def __init__(self, folder: Path, config: Config) -> None:
        self.folder = folder
        self.salt = hashlib.sha256(
            f"{_FORMAT}\0{__version__}\0{_code_digest()}\0{_config_text(config)}".encode()
        ).hexdigest()
        self.file = folder / __version__ / f"{self.salt[:32]}.json"
        self._stored = _load(self.file)
        self._kept: dict[str, list] = {}  # what this run used or produced, by key
        self._added = False  # whether this run computed anything worth writing

    @property
    def empty(self) -> bool:
        """Nothing stored: a cold run need not read and hash files just to look them up."""
        return not self._stored

    def get(self, key: str | None) -> FileResult | None:
        entry = self._stored.get(key) if key else None
        if entry is None:
            return None
        try:
            result = _decode(entry)
        except (TypeError, ValueError, KeyError, IndexError):
            return None  # written by something else: recompute
        self._kept[key] = entry
        return result

    def put(self, key: str | None, result: FileResult) -> None:
        if key and result.internal_error is None:
            self._kept[key] = _encode(result)
            self._added = True

    def save(self, scanned: Iterable[str]) -> None:
        """Write this run's entries, keeping those of files this run did not look at (another
        part of the tree). A run that computed nothing new writes nothing: what it would drop
        (the entries of its files' older contents) goes with the next write. Failing to write
        only costs the next run its speed."""
        if not self._added:
            return
        seen = set(scanned)
        entries = {key: entry for key, entry in _load(self.file).items() if _of_another_file(entry, seen)}
        entries.update(self._kept)
        try:
            self.file.parent.mkdir(parents=True, exist_ok=True)
            _mark(self.folder)
            handle, temporary = tempfile.mkstemp(prefix=".", suffix=".tmp", dir=self.file.parent)
            try:
                with os.fdopen(handle, "w", encoding="utf-8") as stream:
                    json.dump({"format": _FORMAT, "entries": entries}, stream, separators=(",", ":"))
                os.replace(temporary, self.file)
            except BaseException:
                os.unlink(temporary)
                raise
        except OSError:
            pass


def entry_key(salt: str, source: Source, project: Project) -> str | None:
    """The key of one read file's result; None when it is not worth keeping (too large to read)."""
    if source.data is None:
        return None
    digest = hashlib.sha256(salt.encode())
    module = source.module
    beside = " ".join(sorted(module.beside))  # what the file's absolute imports reach beside it
    for part in (source.path, module.name, module.package, module.namespace, beside, _project_text(project)):
        digest.update(part.encode("utf-8", "surrogatepass") + b"\0")
    digest.update(source.data)
    return digest.hexdigest()


def _mark(folder: Path) -> None:
    """Keep the folder out of version control and backups."""
    for name, text in ((".gitignore", "*\n"), ("CACHEDIR.TAG", _README)):
        if not (folder / name).exists():
            (folder / name).write_text(text, encoding="utf-8")


def _load(file: Path) -> dict[str, list]:
    try:
        document = json.loads(file.read_bytes())
    except (OSError, ValueError):
        return {}
    if not isinstance(document, dict) or document.get("format") != _FORMAT:
        return {}
    entries = document.get("entries")
    return entries if isinstance(entries, dict) else {}


@cache
def _code_digest() -> str:
    """portcheck's own code and rule data: an upgrade or an edited checkout starts afresh."""
    package = Path(__file__).parent
    digest = hashlib.sha256()
    for path in sorted(package.rglob("*")):
        if path.suffix in (".py", ".toml", ".json"):
            digest.update(path.relative_to(package).as_posix().encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def _config_text(config: Config) -> str:
    return json.dumps(dataclasses.asdict(config), default=str, sort_keys=True)


@cache
def _project_text(project: Project) -> str:
    fields = dataclasses.asdict(project)
    return json.dumps(
        {name: sorted(value) if isinstance(value, (set, frozenset)) else value for name, value in fields.items()},
        sort_keys=True,
    )


def _of_another_file(entry: object, scanned: set[str]) -> bool:
    """A well-formed entry of a file this run did not look at."""
    return isinstance(entry, list) and len(entry) == 5 and isinstance(entry[0], str) and entry[0] not in scanned


def _encode(result: FileResult) -> list:
    facts = [
        [f.kind, f.name, f.path, f.line, f.end_line, [list(pair) for pair in f.details], f.cell] for f in result.facts
    ]
    findings, retracted = ([_encode_finding(f) for f in group] for group in (result.findings, result.retracted))
    return [result.path, result.skipped, findings, facts, retracted]


def _encode_finding(f: Finding) -> list:
    return [
        f.path, f.code, f.name, f.message, f.hint, f.line, f.column, f.end_line, f.end_column,
        int(f.severity), [[name, int(level)] for name, level in f.targets], f.fix_safety.value, f.source_line,
        f.cell,
    ]  # fmt: skip


def _decode(entry: list) -> FileResult:
    path, skipped, findings, facts, retracted = entry
    return FileResult(
        path=path,
        skipped=bool(skipped),
        findings=tuple(_decode_finding(fields) for fields in findings),
        facts=tuple(Fact(*fields[:5], details=tuple((k, v) for k, v in fields[5]), cell=fields[6]) for fields in facts),
        retracted=tuple(_decode_finding(fields) for fields in retracted),
    )


def _decode_finding(fields: list) -> Finding:
    return Finding(
        *fields[:9],
        severity=Severity(fields[9]),
        targets=tuple((name, Severity(level)) for name, level in fields[10]),
        fix_safety=FixSafety(fields[11]),
        source_line=fields[12],
        cell=fields[13],
    )
