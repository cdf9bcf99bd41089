"""Adversarial inputs for permission policies: paths, commands and URLs.

Each strategy yields a case that knows the right answer: a :class:`PathCase`
says where its path really resolves, a :class:`CommandCase` which program
really runs, a :class:`UrlCase` which host is really contacted. The
``check_*_policy`` functions run a policy over them and fail when it allows
what it must not.
"""

from __future__ import annotations

import atexit
import functools
import os
import shutil
import tempfile
import unicodedata
import urllib.parse
from collections.abc import Callable, Collection, Sequence
from typing import Any, NamedTuple

from hypothesis import strategies as st

from ..permissions._requests import (
    Allow,
    Deny,
    FileSystemRead,
    FileSystemWrite,
    NetworkAccess,
    PermissionRequest,
    ShellCommand,
)

__all__ = [
    "LAUNCHERS",
    "CommandCase",
    "PathCase",
    "UrlCase",
    "adversarial_commands",
    "adversarial_paths",
    "adversarial_urls",
    "check_command_policy",
    "check_path_policy",
    "check_url_policy",
    "path_sandbox",
]

_SEGMENTS = ["a", "notes", "src", "x.txt", "etc", "passwd", ".ssh", "ﬁle", "café", "e\u0301t\u00e9"]
_LOOKALIKES = ["\u2024\u2024", "\uff0e\uff0e", "..\u200b", "\u202e..", ". .", "...", ".. "]
"""Names that look like ``..`` to a person or a naive normaliser but are plain names."""


class PathCase(NamedTuple):
    """A path a tool asks for, the root it should stay in, and where it really resolves."""

    path: str
    root: str
    base: str
    real: str

    @property
    def inside(self) -> bool:
        """Whether the path really resolves to the root or below it."""
        return _is_inside(self.real, os.path.realpath(self.root))


def _is_inside(real: str, root: str) -> bool:
    """Whether resolved path ``real`` is ``root`` or below it (by path components)."""
    return real == root or real.startswith(root.rstrip(os.sep) + os.sep)


def _resolve(path: str, base: str) -> str:
    """Where ``path`` really is: made absolute against ``base``, ``..`` and symlinks resolved."""
    return os.path.realpath(os.path.join(base, path))


@functools.cache
def path_sandbox() -> str:
    """A temporary directory (made once per process, removed at exit) with a root and traps.

    Layout: ``workspace/`` (the root) with ``notes/``, ``escape`` (a symlink
    to ``../outside``), ``loop`` (a symlink to ``.``), ``etc-link`` (to
    ``/etc``) and ``inner`` (to ``notes``, staying inside); beside it
    ``outside/`` and ``workspace-evil/``, a sibling whose name starts with
    the root's.
    """
    top = tempfile.mkdtemp(prefix="agentloop-paths-")
    atexit.register(shutil.rmtree, top, ignore_errors=True)
    workspace = os.path.join(top, "workspace")
    for folder in ("workspace/notes", "outside", "workspace-evil", "workspace2"):
        os.makedirs(os.path.join(top, folder), exist_ok=True)
    links = {"escape": "../outside", "loop": ".", "etc-link": "/etc", "inner": "notes"}
    for name, target in links.items():
        os.symlink(target, os.path.join(workspace, name))
    return workspace


def adversarial_paths(
    root: str | None = None, *, base: str | None = None
) -> st.SearchStrategy[PathCase]:
    """Paths meant to slip out of ``root``, each with where it really resolves.

    Plain paths inside; traversal (``root/../etc/x``, ``a/../../x``, ``//``,
    ``./``); siblings sharing the root's name (``/workspace-evil/x``,
    ``/workspace2``, ``/workspaceX``); unicode (``..`` lookalikes, ligatures,
    combining accents, NFC/NFD spellings, a right-to-left override);
    absolute and relative forms (relative ones are taken against ``base``,
    default the root itself, as a tool working in the root would); trailing
    slashes, the root itself. Without ``root``, the root of
    :func:`path_sandbox` is used, and paths also go through symlinks inside
    it that lead out (``escape``, ``etc-link``) or stay in (``inner``,
    ``loop``).
    """
    sandboxed = root is None
    root = path_sandbox() if root is None else root.rstrip("/") or "/"
    base = root if base is None else base
    name = os.path.basename(root)
    segment = st.sampled_from(_SEGMENTS)
    tails = st.lists(segment | st.sampled_from(["..", ".", ""]), min_size=0, max_size=4)
    unicode_forms = st.sampled_from(["NFC", "NFD", "NFKC", "NFKD"])

    @st.composite
    def cases(draw: st.DrawFn) -> PathCase:
        tail = "/".join(draw(tails))
        form = draw(st.integers(0, 9 if sandboxed else 7))
        if form == 0:
            path = f"{root}/{tail}"
        elif form == 1:
            path = f"{root}/{'../' * draw(st.integers(1, 3))}{draw(segment)}/{tail}"
        elif form == 2:
            path = f"{root}{draw(st.sampled_from(['-evil', '2', 'X', '.bak', '_old']))}/{tail}"
        elif form == 3:
            path = f"{root}/{draw(st.sampled_from(_LOOKALIKES))}/{tail}"
        elif form == 4:
            normal_form: Any = draw(unicode_forms)
            spelled = unicodedata.normalize(normal_form, f"{draw(segment)}/{tail}")
            path = f"{root}/{spelled}"
        elif form == 5:
            relative = draw(st.sampled_from([name, f"./{name}", f"../{name}", ".", ".."]))
            path = f"{relative}/{tail}"
        elif form == 6:
            path = draw(st.sampled_from([root, f"{root}/", f"{root}//", f"{root}/.", "/", ""]))
        elif form == 7:
            path = f"{root}/{draw(segment)}/{'../' * draw(st.integers(1, 4))}{tail}"
        else:
            link = draw(st.sampled_from(["escape", "etc-link", "inner", "loop", "loop/escape"]))
            path = f"{root}/{link}/{tail}"
        path = path.replace("//", "/") if draw(st.booleans()) else path
        return PathCase(path, root, base, _resolve(path, base))

    return cases()


def check_path_policy(
    policy: Any,
    root: str | None = None,
    *,
    base: str | None = None,
    requests: Callable[[str], Sequence[PermissionRequest]] | None = None,
    deny_outside: bool = False,
    max_examples: int | None = None,
    settings: Any = None,
    seed: int | None = None,
) -> None:
    """Fail if ``policy`` allows a file-system request whose path resolves outside ``root``.

    ``policy`` has ``evaluate(request)`` (a policy or a checker); the paths
    come from :func:`adversarial_paths` (``root`` ``None``: a temporary
    sandbox with symlinks). ``policy`` may also be a class or function
    that builds the policy from the root. ``requests(path)`` turns a path into the
    requests to evaluate (default: a read and a write). Deny and approval
    are fine; only ``Allow`` for a path outside is a failure (with
    ``deny_outside``, anything but ``Deny``: approval too), reported as
    ``AssertionError`` with the path and where it resolves.
    """
    case_root = path_sandbox() if root is None else root
    builds = isinstance(policy, type) or not hasattr(policy, "evaluate")
    evaluated = policy(case_root) if builds else policy
    make = requests or (lambda path: [FileSystemRead(path), FileSystemWrite(path)])

    def check(case: PathCase) -> None:
        for request in make(case.path):
            decision = evaluated.evaluate(request)
            wrong = not isinstance(decision, Deny) if deny_outside else isinstance(decision, Allow)
            if wrong and not case.inside:
                raise AssertionError(
                    f"policy {type(evaluated).__name__} answered {type(decision).__name__} to "
                    f"{request.kind} of {case.path!r}, "
                    f"which resolves to {case.real!r}, outside the root {case.root!r} "
                    f"(relative paths taken against {case.base!r})"
                )

    _run(check, adversarial_paths(root, base=base), max_examples, settings, seed)


# -- commands ----------------------------------------------------------------------------

LAUNCHERS: frozenset[str] = frozenset(
    {
        "sh", "bash", "zsh", "dash", "fish", "env", "xargs", "sudo", "doas", "su", "nice",
        "nohup", "timeout", "time", "busybox", "python", "python3", "perl", "ruby", "node",
        "find", "awk", "make", "git", "ssh", "eval", "exec", "command", "watch", "strace",
    }
)  # fmt: skip
"""Programs that can run any other program: allowing one allows everything."""


class CommandCase(NamedTuple):
    """A command line and the programs it can end up running."""

    argv: tuple[str, ...]
    cwd: str | None
    runs: frozenset[str]

    @property
    def program(self) -> str:
        """The program's base name as the OS would find it."""
        return os.path.basename(self.argv[0]) if self.argv else ""


def adversarial_commands(
    forbidden: Collection[str], *, harmless: Collection[str] = ("ls", "cat", "echo")
) -> st.SearchStrategy[CommandCase]:
    """Command lines meant to run a ``forbidden`` program past a policy.

    The program by name, by absolute or relative path (``/bin/rm``,
    ``./rm``, ``/usr/bin/../bin/rm``), with odd case or whitespace
    (``RM``, ``"rm "``: these name other programs and count as such), behind
    a launcher (``sh -c "rm -rf /"``, ``env rm``, ``xargs rm``, ``sudo rm``);
    and ``harmless`` programs with arguments that look dangerous. ``runs``
    names every program a case can execute (a launcher counts as running
    anything: ``"*"``).
    """
    bad = sorted(forbidden)
    good = sorted(harmless)
    paths = st.sampled_from(["/bin/", "/usr/bin/", "./", "/usr/bin/../bin/", "bin/", ""])
    args = st.lists(
        st.sampled_from(["-rf", "/", "x", "--", ";", "&&", "$(id)", "`id`"]), max_size=3
    )
    cwds = st.none() | st.sampled_from(["/", "/tmp", "."])

    @st.composite
    def cases(draw: st.DrawFn) -> CommandCase:
        form = draw(st.integers(0, 3))
        tail = draw(args)
        if form == 0:  # the program itself, spelled many ways
            program = draw(st.sampled_from(bad))
            argv = (draw(paths) + program, *tail)
        elif form == 1:  # a harmless program with scary arguments
            argv = (draw(paths) + draw(st.sampled_from(good)), *tail, draw(st.sampled_from(bad)))
        elif form == 2:  # behind a launcher
            launcher = draw(st.sampled_from(sorted(LAUNCHERS)))
            program = draw(st.sampled_from(bad))
            line = draw(st.sampled_from([[program, *tail], ["-c", " ".join([program, *tail])]]))
            argv = (draw(paths) + launcher, *line)
        else:  # case and whitespace variants name different programs
            program = draw(st.sampled_from(bad + good))
            variant = draw(
                st.sampled_from([program.upper(), f" {program}", f"{program} ", program])
            )
            argv = (variant, *tail)
        name = os.path.basename(argv[0])
        runs = frozenset({"*"}) if name in LAUNCHERS else frozenset({name})
        return CommandCase(tuple(argv), draw(cwds), runs)

    return cases()


def check_command_policy(
    policy: Any,
    forbidden: Collection[str],
    *,
    harmless: Collection[str] = ("ls", "cat", "echo"),
    max_examples: int | None = None,
    settings: Any = None,
    seed: int | None = None,
) -> None:
    """Fail if ``policy`` allows a command that can run a ``forbidden`` program.

    A command can run a program if it names it (by any path) or goes through
    a launcher from :data:`LAUNCHERS`. Raises ``AssertionError`` naming the
    command.
    """
    blocked = frozenset(forbidden)

    def check(case: CommandCase) -> None:
        decision = policy.evaluate(ShellCommand(case.argv, cwd=case.cwd))
        if isinstance(decision, Allow) and ("*" in case.runs or case.runs & blocked):
            reason = (
                "a launcher that can run anything" if "*" in case.runs else "a forbidden program"
            )
            raise AssertionError(
                f"policy {type(policy).__name__} allowed {list(case.argv)!r}, which runs "
                f"{reason} ({case.program!r}; forbidden: {sorted(blocked)})"
            )

    _run(check, adversarial_commands(forbidden, harmless=harmless), max_examples, settings, seed)


# -- URLs --------------------------------------------------------------------------------


class UrlCase(NamedTuple):
    """A URL and the host a client really connects to (``None``: no network host)."""

    url: str
    host: str | None
    scheme: str


def adversarial_urls(allowed_hosts: Collection[str]) -> st.SearchStrategy[UrlCase]:
    """URLs meant to reach another host while looking like an allowed one.

    Allowed hosts as suffixes and prefixes of others (``example.com.evil.net``,
    ``evil-example.com``), in user info (``https://example.com@evil.net``),
    query and fragment; case and a trailing dot; IP literals and loopback
    spellings; lookalike letters; other schemes (``file:``, ``ftp:``,
    ``javascript:``); scheme-relative URLs. ``host`` is what
    ``urllib.parse`` (which follows the URL standard closely enough for
    this) says the client connects to.
    """
    hosts = sorted(allowed_hosts)
    evil = st.sampled_from(["evil.net", "127.0.0.1", "[::1]", "0x7f000001", "169.254.169.254"])
    paths = st.sampled_from(["", "/", "/a?b=c", "/%2e%2e/x"])

    @st.composite
    def cases(draw: st.DrawFn) -> UrlCase:
        allowed = draw(st.sampled_from(hosts))
        other = draw(evil)
        scheme = draw(
            st.sampled_from(["https", "http", "HTTPS", "file", "ftp", "javascript", "ws"])
        )
        shape = draw(st.integers(0, 9))
        netloc = {
            0: allowed,
            1: f"{allowed}.{other}",
            2: f"{other}",
            3: f"{allowed}@{other}",
            4: f"{allowed}:443@{other}",
            5: f"evil-{allowed}",
            6: allowed.upper() + ".",
            7: allowed.replace("a", "\u0430", 1).replace("o", "\u043e", 1),
            8: f"{other}#{allowed}",
            9: f"{other}/?{allowed}",
        }[shape]
        url = f"{scheme}://{netloc}{draw(paths)}"
        if draw(st.integers(0, 9)) == 0:
            url = f"//{netloc}"
        parsed = urllib.parse.urlsplit(url)
        host = (parsed.hostname or "").rstrip(".") or None
        return UrlCase(url, host, parsed.scheme.lower())

    return cases()


def check_url_policy(
    policy: Any,
    allowed_hosts: Collection[str],
    *,
    schemes: Collection[str] = ("http", "https"),
    max_examples: int | None = None,
    settings: Any = None,
    seed: int | None = None,
) -> None:
    """Fail if ``policy`` allows a URL that reaches a host not in ``allowed_hosts``.

    Also fails when it allows a scheme outside ``schemes`` (a scheme-relative
    URL, ``//host/path``, is judged by its host alone).
    """
    hosts = {host.lower() for host in allowed_hosts}

    def check(case: UrlCase) -> None:
        decision = policy.evaluate(NetworkAccess(case.url))
        if not isinstance(decision, Allow):
            return
        if case.host is None or case.host.lower() not in hosts or case.scheme not in {*schemes, ""}:
            raise AssertionError(
                f"policy {type(policy).__name__} allowed {case.url!r}, which reaches host "
                f"{case.host!r} over {case.scheme or 'no scheme'!r}; allowed hosts: "
                f"{sorted(hosts)}, schemes: {sorted(schemes)}"
            )

    _run(check, adversarial_urls(allowed_hosts), max_examples, settings, seed)


def _run(
    check: Callable[[Any], None],
    strategy: st.SearchStrategy[Any],
    max_examples: int | None,
    settings: Any,
    seed: int | None,
) -> None:
    import hypothesis
    from hypothesis import given

    from ._mutator_checks import bounded_shrinking, kit_settings

    test_settings = kit_settings(settings, max_examples=max_examples, default_examples=200)
    test = test_settings(given(strategy)(check))
    if seed is not None:
        test = hypothesis.seed(seed)(test)
    with bounded_shrinking(10.0):
        test()
