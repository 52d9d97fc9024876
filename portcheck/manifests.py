"""What a dependency manifest declares: requirements, package indexes and base images, with
their lines.

Reads pip requirement files, pyproject.toml (PEP 621, Poetry, dependency groups, build
requirements, uv indexes), setup.cfg, conda environment files, Dockerfiles (`FROM` and the
packages `RUN pip/uv/conda install` installs) and Cog's cog.yaml, as text. Nothing is
installed, resolved or executed; a line that does not parse becomes a `Problem`.
"""

from __future__ import annotations

import configparser
import re
import shlex
import sys
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import PurePosixPath

import yaml
from packaging.requirements import InvalidRequirement, Requirement

from portcheck import filekinds

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

_INDEX_OPTIONS = ("--index-url", "--extra-index-url", "-i", "--find-links", "-f")
# What `conda list --export` and `conda list --explicit` write at the top of a file.
_CONDA_LIST = re.compile(r"^(# platform: |# \$ conda create |@EXPLICIT)", re.M)
_CONDA_SPEC = re.compile(r"^\s*([A-Za-z0-9][\w.-]*)\s*(?:[=<>!~].*)?$")
# A package installed from its repository: `git+https://host/org/name(.git)(@ref)`, and a
# repository's URL (`https://github.com/NVIDIA/apex`), each by the repository's name.
# A path to a project directory: `./ext`, `../lib`, `/opt/src/pkg`, `submodules/simple-knn`.
_LOCAL_PROJECT = re.compile(r"^(\.{1,2}/|/|[\w.-]+/)[\w./-]*$")
_VCS_URL = re.compile(r"^git\+\w+://[^\s@#]+/([A-Za-z0-9][\w.-]*?)(?:\.git)?/?(?:@[^\s#]*)?(?:#.*)?$")
_REPOSITORY = re.compile(r"^(?:https?|git|ssh)://[^\s]+/([A-Za-z0-9][\w.-]*?)(?:\.git)?/?$")
_INSTALLERS = frozenset({"pip", "pip3", "uv", "conda", "mamba", "micromamba"})  # before `install`
_CONDA_TOOLS = frozenset({"conda", "mamba", "micromamba"})
# pip's and uv's options that take a value (the value is no requirement)
_INSTALL_OPTIONS_WITH_VALUES = frozenset(
    {
        "-r",
        "--requirement",
        "-c",
        "--constraint",
        "-e",
        "--editable",
        "-t",
        "--target",
        "--prefix",
        "--root",
        "--src",
        "--upgrade-strategy",
        "-C",
        "--config-settings",
        "--global-option",
        "--python",
        "-p",
        "--platform",
        "--python-version",
        "--implementation",
        "--abi",
        "--trusted-host",
        "--cache-dir",
        "--progress-bar",
        "--log",
        "--timeout",
        "--retries",
        "--proxy",
        "--cert",
        "--client-cert",
        "--no-binary",
        "--only-binary",
        "--index-strategy",
        "--torch-backend",
        "-n",
        "--name",
        "--file",
        *_INDEX_OPTIONS,
    }
)


@dataclass(frozen=True)
class Declared:
    """One declared dependency."""

    name: str
    specifier: str  # e.g. ">=2.1,<2.5"; empty when unconstrained
    line: int
    text: str  # as written
    conda: bool = False
    build: str = ""  # a conda spec's build string (`py3.7_cuda10.1.243_cudnn7.6.3_0`)


@dataclass(frozen=True)
class Located:
    text: str
    line: int


@dataclass
class Manifest:
    requirements: list[Declared] = field(default_factory=list)
    indexes: list[Located] = field(default_factory=list)  # index URLs and conda channels
    images: list[Located] = field(default_factory=list)  # base images and declared CUDA toolkits
    problems: list[Located] = field(default_factory=list)  # what could not be read, and why
    # The Python the project declares it runs on, as a requirement named "python": cog's
    # `python_version`, a `python:3.8` base image, `requires-python`, `python_requires`
    # (a conda environment's `python=3.7` is among its requirements)
    python: list[Declared] = field(default_factory=list)

    def keep(self, found: Declared | Located) -> None:
        if isinstance(found, Declared):
            self.requirements.append(found)
        else:
            self.problems.append(found)


def read(kind: str, text: str) -> Manifest:
    reader = {
        filekinds.REQUIREMENTS: _requirements,
        filekinds.PYPROJECT: _pyproject,
        filekinds.SETUP_CFG: _setup_cfg,
        filekinds.CONDA: _conda,
        filekinds.DOCKERFILE: _dockerfile,
        filekinds.COG: _cog,
    }[kind]
    manifest = Manifest()
    try:
        reader(text, manifest)
    except (tomllib.TOMLDecodeError, configparser.Error, yaml.YAMLError) as error:
        manifest.problems.append(Located(f"cannot parse the file: {str(error).splitlines()[0]}", _error_line(error)))
    return manifest


def parse_requirement(text: str, line: int) -> Declared | Located:
    """A PEP 508 requirement, or a problem saying why it is not one."""
    try:
        requirement = Requirement(text)
    except InvalidRequirement as error:
        return Located(f"not a valid requirement `{text}`: {str(error).splitlines()[0]}", line)
    return Declared(requirement.name, str(requirement.specifier), line, text)


def _requirements(text: str, manifest: Manifest) -> None:
    if _CONDA_LIST.search(text):
        _conda_list(text, manifest)
        return
    for number, raw in _logical_lines(text):
        _requirement_line(re.sub(r"(^|\s)#.*$", "", raw).strip(), number, manifest)


def _requirement_line(line: str, number: int, manifest: Manifest) -> None:
    """One line of a pip requirements file (also an entry of a conda file's `pip:` list)."""
    if not line:
        return
    if line.startswith("-"):
        option, _, value = line.partition(" ")
        option, _, inline = option.partition("=")
        given = (inline or value).strip()
        if option in _INDEX_OPTIONS:
            manifest.indexes.append(Located(given, number))
        elif option in ("-e", "--editable") and _LOCAL_PROJECT.match(given):
            _local_project(given, number, line, manifest)
        return  # -r, -c and other options name files, not projects
    if _LOCAL_PROJECT.match(line):
        _local_project(line, number, line, manifest)
        return
    from_vcs = _VCS_URL.match(line.split(" --", 1)[0].strip())
    if from_vcs:  # `git+https://github.com/NVIDIA/apex.git#egg=apex`
        egg = re.search(r"#egg=([A-Za-z0-9][\w.-]*)", line)
        manifest.requirements.append(Declared(egg.group(1) if egg else from_vcs.group(1), "", number, line))
        return
    requirement, _, options = line.partition(" -")
    manifest.indexes.extend(Located(url, number) for url in _indexes_among(f"-{options}" if options else ""))
    if "://" in requirement and "@" not in requirement:
        return  # a direct URL without a name
    manifest.keep(parse_requirement(requirement.strip(), number))


def _indexes_among(options: str) -> Iterator[str]:
    """The index URLs a requirement's own options name (seed-vc's `torch --pre --index-url
    .../nightly/cu126`): the source its author meant it to come from."""
    try:
        words = shlex.split(options)
    except ValueError:
        return
    for word, following in zip(words, [*words[1:], ""]):
        option, equals, inline = word.partition("=")
        if option in _INDEX_OPTIONS and (inline or (following and not equals)):
            yield inline or following


def _local_project(path: str, number: int, line: str, manifest: Manifest) -> None:
    """A project directory pip builds (`submodules/simple-knn`, gaussian-splatting's CUDA
    extensions): declared under its folder's name, as such projects name themselves."""
    manifest.requirements.append(Declared(PurePosixPath(path.rstrip("/")).name, "", number, line))


def _logical_lines(text: str) -> Iterator[tuple[int, str]]:
    """Lines with backslash continuations joined, numbered by their first line."""
    pending, start = "", 0
    for number, line in enumerate(text.splitlines(), start=1):
        if not pending:
            start = number
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        yield start, pending + line
        pending = ""
    if pending:
        yield start, pending


class _Locator:
    """Finds the line of each declared string in a file parsed without positions."""

    def __init__(self, text: str) -> None:
        self.lines = text.splitlines()
        self.used: set[tuple[int, str]] = set()

    def line_of(self, needle: str, key: bool = False) -> int:
        """The first unused line holding `needle` (as a TOML key when `key`)."""
        pattern = re.compile(rf'^\s*["\']?{re.escape(needle)}["\']?\s*=') if key else None
        for number, line in enumerate(self.lines, start=1):
            found = pattern.search(line) if pattern else needle in line
            if found and (number, needle) not in self.used:
                self.used.add((number, needle))
                return number
        return 1


def _add(manifest: Manifest, locator: _Locator, requirements: Iterable[object]) -> None:
    for item in requirements:
        if not isinstance(item, str):
            continue
        found = parse_requirement(item, locator.line_of(item))
        manifest.keep(found)


def _pyproject(text: str, manifest: Manifest) -> None:
    document = tomllib.loads(text)
    locator = _Locator(text)
    project = document.get("project", {})
    requires = project.get("requires-python")
    if isinstance(requires, str) and requires.strip():
        line = locator.line_of("requires-python", key=True)
        manifest.python.append(Declared("python", requires.strip(), line, f"requires-python = {requires!r}"))
    _add(manifest, locator, project.get("dependencies", []))
    for extra in project.get("optional-dependencies", {}).values():
        _add(manifest, locator, extra)
    for group in document.get("dependency-groups", {}).values():
        _add(manifest, locator, group)
    _add(manifest, locator, document.get("build-system", {}).get("requires", []))
    poetry = document.get("tool", {}).get("poetry", {})
    for table in (
        poetry.get("dependencies", {}),
        *(g.get("dependencies", {}) for g in poetry.get("group", {}).values()),
    ):
        for name, constraint in table.items():
            if name.lower() == "python":
                continue
            version = constraint.get("version", "") if isinstance(constraint, dict) else str(constraint)
            specifier = _poetry_specifier(version)
            manifest.requirements.append(
                Declared(name, specifier, locator.line_of(name, key=True), f"{name} = {version!r}")
            )
    for index in document.get("tool", {}).get("uv", {}).get("index", []):
        if isinstance(index, dict) and "url" in index:
            manifest.indexes.append(Located(index["url"], locator.line_of(index["url"])))
    for source in poetry.get("source", []):
        if isinstance(source, dict) and "url" in source:
            manifest.indexes.append(Located(source["url"], locator.line_of(source["url"])))


def _poetry_specifier(version: str) -> str:
    """Poetry's `^2.1` and `~2.1` as PEP 440 ranges; `*` as no constraint."""
    version = version.strip()
    if version in ("", "*"):
        return ""
    if version[0] in "^~" and re.fullmatch(r"\d+(\.\d+)*", version[1:]):
        parts = [int(part) for part in version[1:].split(".")]
        if version[0] == "^":  # up to the next change of the first non-zero component
            bump = next((i for i, part in enumerate(parts) if part != 0), len(parts) - 1)
        else:  # ~: up to the next minor (or major, when only a major is given)
            bump = min(1, len(parts) - 1)
        upper = [*parts[:bump], parts[bump] + 1]
        return f">={version[1:]},<{'.'.join(map(str, upper))}"
    return version if version[0] in "<>=!~" else f"=={version}"


def _setup_cfg(text: str, manifest: Manifest) -> None:
    parser = configparser.ConfigParser(interpolation=None)
    parser.read_string(text)
    locator = _Locator(text)
    values = []
    if parser.has_option("options", "install_requires"):
        values.append(parser.get("options", "install_requires"))
    if parser.has_option("options", "setup_requires"):
        values.append(parser.get("options", "setup_requires"))
    if parser.has_option("options", "python_requires"):
        requires = parser.get("options", "python_requires").strip()
        line = locator.line_of("python_requires")
        manifest.python.append(Declared("python", requires, line, f"python_requires = {requires}"))
    if parser.has_section("options.extras_require"):
        values.extend(value for _, value in parser.items("options.extras_require"))
    _add(manifest, locator, (line.strip() for value in values for line in value.splitlines() if line.strip()))


def _conda(text: str, manifest: Manifest) -> None:
    root = yaml.compose(text)
    if not isinstance(root, yaml.MappingNode):
        return
    for key, value in root.value:
        if key.value == "channels" and isinstance(value, yaml.SequenceNode):
            manifest.indexes.extend(Located(str(item.value), item.start_mark.line + 1) for item in value.value)
        if key.value != "dependencies" or not isinstance(value, yaml.SequenceNode):
            continue
        for item in value.value:
            if isinstance(item, yaml.ScalarNode):
                declared = _conda_spec(str(item.value), item.start_mark.line + 1)
                if declared is not None:
                    manifest.requirements.append(declared)
            elif isinstance(item, yaml.MappingNode):
                for sub_key, sub_value in item.value:
                    if sub_key.value == "pip" and isinstance(sub_value, yaml.SequenceNode):
                        for pip in sub_value.value:
                            _requirement_line(str(pip.value).strip(), pip.start_mark.line + 1, manifest)


def _dockerfile(text: str, manifest: Manifest) -> None:
    """`FROM` images (a `pytorch/pytorch:2.1.0-...` tag also declares its torch) and what `RUN`
    installs with pip, uv or conda (also from a repository, `git+https://.../megablocks.git`,
    and apex's CUDA build, `--global-option="--cuda_ext"`), or clones to build (`git clone
    https://github.com/NVIDIA/apex`). Arguments that are no requirement (`.`, `-r file`,
    `$VAR`) are skipped: a Dockerfile is not a requirements file."""
    lines = text.splitlines()
    defaults: dict[str, tuple[str, int]] = {}  # `ARG IMG_TAG=1.8.1-cuda10.2-cudnn7-devel`, with its line
    for number, logical in _logical_lines(text):
        instruction, _, rest = logical.strip().partition(" ")
        if instruction.upper() == "ARG":
            name, equals, default = rest.strip().partition("=")
            if equals and default.strip():
                defaults[name.strip()] = (default.strip().strip("\"'"), number)
        if instruction.upper() == "FROM":
            written = next((word for word in rest.split() if not word.startswith("--")), "")
            image, line = _expanded_image(written, number, defaults)
            manifest.images.append(Located(image, line))
            version = re.match(r"pytorch/pytorch:(\d+\.\d+(?:\.\d+)?)\b", image)
            if version:
                manifest.requirements.append(Declared("torch", f"=={version.group(1)}", line, image))
            python = re.match(r"(?:docker\.io/)?(?:library/)?python:(\d+\.\d+)\b", image)
            if python:
                manifest.python.append(Declared("python", f"=={python.group(1)}.*", line, image))
        elif instruction.upper() == "RUN":
            for command in re.split(r"&&|\|\||;|\|", rest):
                _install_command(command, number, lines, manifest)
                _cloned_source(command, number, lines, manifest)


def _expanded_image(written: str, line: int, defaults: Mapping[str, tuple[str, int]]) -> tuple[str, int]:
    """`pytorch/$IMG_REPO:$IMG_TAG` with each `ARG`'s default put in, and the line that gives
    the tag (DALLE-pytorch's `ARG IMG_TAG=1.8.1-cuda10.2-cudnn7-devel`), or the whole image:
    where the image's build is chosen."""
    tag_line = line

    def default(match: re.Match[str]) -> str:
        nonlocal tag_line
        value, given_at = defaults.get(match.group(1) or match.group(2), (match.group(0), line))
        if ":" not in written or match.start() > written.rfind(":", 0, match.start()) >= 0:
            tag_line = given_at  # the tag, or the whole image (sam2's `FROM ${BASE_IMAGE}`)
        return value

    return re.sub(r"\$\{(\w+)\}|\$(\w+)", default, written), tag_line


def _install_command(command: str, start: int, lines: list[str], manifest: Manifest) -> None:
    """The requirements and indexes of one `pip install ...` / `conda install ...` command."""
    try:
        words = shlex.split(command)
    except ValueError:
        return  # unbalanced quotes: a shell construct, not an install
    conda = bool(words) and words[0] in _CONDA_TOOLS
    at = next((i for i, word in enumerate(words) if word == "install"), None)
    if at is None or not any(word in _INSTALLERS for word in words[:at]):
        return
    arguments = iter(words[at + 1 :])
    for word in arguments:
        if word.startswith("-"):
            option, _, inline = word.partition("=")
            channel = conda and option in ("-c", "--channel")
            takes_value = channel or option in _INSTALL_OPTIONS_WITH_VALUES
            value = inline or (next(arguments, "") if takes_value else "")
            if option == "--global-option" and value.strip("\"'") == "--cuda_ext":
                manifest.requirements.append(Declared("apex", "", _line_of(value, start, lines), command.strip()))
            if channel or option in _INDEX_OPTIONS:
                manifest.indexes.append(Located(value, _line_of(value, start, lines)))
            continue
        from_vcs = _VCS_URL.match(word)
        if from_vcs:  # `git+https://github.com/stanford-futuredata/megablocks.git`: the repository's name
            manifest.requirements.append(Declared(from_vcs.group(1), "", _line_of(word, start, lines), word))
            continue
        if "$" in word or "/" in word or word.startswith("."):
            continue  # a variable, a path or a URL
        found = (_conda_spec(word, 0) if conda else None) or parse_requirement(word, 0)
        if isinstance(found, Declared):
            manifest.requirements.append(replace(found, line=_line_of(word, start, lines)))


def _cloned_source(command: str, start: int, lines: list[str], manifest: Manifest) -> None:
    """`git clone https://github.com/NVIDIA/apex` (a package built from its source, as the
    repository's name says) and apex's own build, `python setup.py install --cuda_ext`."""
    words = command.split()
    if words[:2] == ["git", "clone"]:
        url = next((word for word in words[2:] if not word.startswith("-")), "")
        cloned = _REPOSITORY.search(url)
        if cloned:
            manifest.requirements.append(Declared(cloned.group(1), "", _line_of(url, start, lines), url))
    elif "setup.py" in words and "--cuda_ext" in words:
        manifest.requirements.append(Declared("apex", "", _line_of("--cuda_ext", start, lines), command.strip()))


def _line_of(word: str, start: int, lines: list[str]) -> int:
    """The line of a continued instruction (from `start`) that holds `word`."""
    for number in range(start, len(lines) + 1):
        if word in lines[number - 1]:
            return number
        if not lines[number - 1].endswith("\\"):
            break
    return start


def _cog(text: str, manifest: Manifest) -> None:
    """Cog's `build:` section: `cuda:` (a CUDA toolkit in the image) and `python_packages`."""
    root = yaml.compose(text)
    if not isinstance(root, yaml.MappingNode):
        return
    build = next((value for key, value in root.value if key.value == "build"), None)
    if not isinstance(build, yaml.MappingNode):
        return
    for key, value in build.value:
        if key.value == "cuda" and isinstance(value, yaml.ScalarNode):
            manifest.images.append(Located(f"CUDA {value.value}", key.start_mark.line + 1))
        elif key.value == "python_version" and isinstance(value, yaml.ScalarNode):
            version = str(value.value).strip()
            if re.fullmatch(r"\d+(\.\d+)*", version):
                line = value.start_mark.line + 1
                manifest.python.append(Declared("python", f"=={version}.*", line, f"python_version: {version}"))
        elif key.value == "python_packages" and isinstance(value, yaml.SequenceNode):
            for item in value.value:
                _requirement_line(str(item.value).strip(), item.start_mark.line + 1, manifest)


def _conda_list(text: str, manifest: Manifest) -> None:
    """A requirements-named file that `conda list --export` or `--explicit` wrote (SimCLR's
    `name=version=build` lines, or package URLs after `@EXPLICIT`): conda specs, not pip's."""
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.split("#", 1)[0].strip()
        if not line or line.startswith("@"):
            continue
        if "://" in line:  # `.../pytorch-1.4.0-py3.7_cuda10.1.243_cudnn7.6.3_0.tar.bz2`
            parts = re.sub(r"\.(tar\.bz2|conda)$", "", line.rsplit("/", 1)[-1]).rsplit("-", 2)
            line = "=".join(parts) if len(parts) == 3 else ""
        declared = _conda_spec(line, number) if line else None
        if declared is not None:
            manifest.requirements.append(declared)


def _conda_spec(written: str, line: int) -> Declared | None:
    """A conda package spec (`pytorch::pytorch=1.4.0=py3.7_cuda10.1_0`, `cudatoolkit=10.1`)."""
    spec = written.split("::")[-1].strip()
    match = _CONDA_SPEC.match(spec)
    if match is None:
        return None
    rest = spec[match.end(1) :].strip()
    pinned = rest.split("=") if rest.startswith("=") and not rest.startswith("==") else []
    build = pinned[2] if len(pinned) > 2 else ""
    return Declared(match.group(1), _conda_specifier(rest), line, spec, conda=True, build=build)


def _conda_specifier(rest: str) -> str:
    """Conda's `=2.1` (2.1.*) and `==2.1.0` as PEP 440."""
    if rest.startswith("=") and not rest.startswith("=="):
        version = rest[1:].split("=")[0].rstrip(".*")
        return f"=={version}.*" if version else ""
    return rest.replace(" ", "")


def _error_line(error: Exception) -> int:
    mark = getattr(error, "problem_mark", None)
    if mark is not None:
        return mark.line + 1
    return getattr(error, "lineno", 1) or 1
