"""Where a path really leads, and opening a file beneath a root without following links.

:func:`resolve_path` walks a path one component at a time the way the kernel
does (``lstat``, ``readlink``, ``..`` taken physically after a link), and
refuses what it cannot finish: symlink loops and chains longer than the
kernel's own limit, names that are too long, components it may not look at,
a link whose target does not exist. :class:`~agentloop.PathPolicy` decides
on its answer.

Any answer about a path is true only when it is given: the file system can
change before the tool opens the path (TOCTOU). :func:`open_beneath` closes
that gap for tools that open files themselves: it walks from an open
directory with ``openat``-style calls and ``O_NOFOLLOW`` at every step, so
no link swapped in later can lead it out of the root.
"""

from __future__ import annotations

import errno
import os
import stat
from collections import deque

__all__ = ["open_beneath", "resolve_path"]

MAX_SYMLINKS = 40
"""Links followed while resolving one path (Linux's own limit, ``MAXSYMLINKS``)."""

PATH_MAX = 4096
"""Bytes in a path, its terminating NUL included (Linux's ``PATH_MAX``)."""

NAME_MAX = 255
"""Bytes in one path component (Linux's ``NAME_MAX``)."""

_O_PATH = getattr(os, "O_PATH", os.O_RDONLY)
_O_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_O_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_O_DIRECTORY = getattr(os, "O_DIRECTORY", 0)


def check_path_text(path: object) -> str:
    """``path`` as text, or ``TypeError``/``ValueError`` saying why it is no usable path."""
    if isinstance(path, os.PathLike):
        path = os.fspath(path)
    if not isinstance(path, str):
        raise TypeError(f"the path must be a string, got {type(path).__name__}")
    if not path:
        raise ValueError("the path is empty")
    if "\0" in path:
        raise ValueError("the path contains a NUL byte")
    if len(os.fsencode(path)) >= PATH_MAX:
        raise OSError(errno.ENAMETOOLONG, f"the path is longer than {PATH_MAX - 1} bytes")
    return path


def resolve_path(path: str, base: str | None = None) -> str:
    """The absolute path the OS will really open for ``path``.

    A relative ``path`` is taken against ``base`` (itself resolved; default
    the working directory). Every symlink is followed, ``/proc/self/root``
    and other links included. Components that do not exist yet are kept as
    written (a file about to be created), but a *link* whose target does not
    exist is refused. Raises ``TypeError``/``ValueError`` for a path that is
    no string, is empty or holds a NUL byte, and ``OSError`` for one that
    cannot be resolved (a loop, more than 40 links, a name too long, a
    component that may not be looked at or is not a directory).
    """
    text = check_path_text(path)
    if not text.startswith("/"):
        start = os.getcwd() if base is None else resolve_path(base)
        text = start.rstrip("/") + "/" + text
    return _walk(text)


def _walk(absolute: str) -> str:
    pending: deque[str] = deque(absolute.split("/"))
    resolved: list[str] = []
    link_ends: list[int] = []  # len(pending) when each link being walked is used up
    links = 0
    missing_from: int | None = None  # index in ``resolved`` of the first missing component
    while pending:
        while link_ends and len(pending) <= link_ends[-1]:
            link_ends.pop()
        name = pending.popleft()
        if name in ("", "."):
            continue
        if name == "..":
            if resolved:
                resolved.pop()
            if missing_from is not None and len(resolved) <= missing_from:
                missing_from = None  # back on ground that exists: look at links again
            continue
        if len(os.fsencode(name)) > NAME_MAX:
            raise OSError(errno.ENAMETOOLONG, f"the name {name[:40]!r}... is too long")
        current = "/" + "/".join([*resolved, name])
        if len(os.fsencode(current)) >= PATH_MAX:
            raise OSError(errno.ENAMETOOLONG, f"it resolves to more than {PATH_MAX - 1} bytes")
        if missing_from is not None:
            resolved.append(name)
            continue
        try:
            info = os.lstat(current)
        except FileNotFoundError:
            if link_ends:
                raise OSError(
                    errno.ENOENT, f"a symbolic link leads to {current}, which does not exist"
                ) from None
            missing_from = len(resolved)
            resolved.append(name)
            continue
        except OSError as error:
            raise OSError(error.errno, f"cannot look at {current}: {error.strerror}") from None
        if stat.S_ISLNK(info.st_mode):
            links += 1
            if links > MAX_SYMLINKS:
                raise OSError(
                    errno.ELOOP,
                    f"more than {MAX_SYMLINKS} symbolic links (a loop or a chain that is too long)",
                )
            try:
                target = os.readlink(current)
            except OSError as error:
                raise OSError(
                    error.errno, f"cannot read link {current}: {error.strerror}"
                ) from None
            link_ends.append(len(pending))
            if target.startswith("/"):
                resolved = []
            pending.extendleft(reversed(target.split("/")))
            continue
        if not stat.S_ISDIR(info.st_mode) and any(part not in ("", ".") for part in pending):
            raise OSError(errno.ENOTDIR, f"{current} is not a directory")
        resolved.append(name)
    return "/" + "/".join(resolved)


def is_within(path: str, root: str) -> bool:
    """Whether the resolved ``path`` is ``root`` or below it (both absolute, resolved)."""
    return path == root or path.startswith(root.rstrip("/") + "/")


def open_beneath(
    root: str | os.PathLike[str],
    path: str | os.PathLike[str],
    flags: int = os.O_RDONLY,
    mode: int = 0o666,
) -> int:
    """Open ``path`` (relative to ``root``) without ever leaving ``root``; a file descriptor.

    Each component is opened relative to the directory opened before it with
    ``O_NOFOLLOW``, so a symbolic link anywhere in ``path`` (the last
    component included, also one created by another process meanwhile) is
    refused with ``OSError(ELOOP)`` instead of followed, and ``..`` cannot
    climb above ``root``. ``flags`` and ``mode`` are as for :func:`os.open`
    (``O_CREAT`` creates the last component, never through a link). An
    absolute ``path`` must lie under ``root`` as written. ``root`` itself is
    trusted: it is opened as given. Wrap the descriptor with
    ``os.fdopen(fd, ...)``; the caller owns it.
    """
    root_text = check_path_text(root)
    text = check_path_text(path)
    if text.startswith("/"):
        prefix = root_text.rstrip("/") + "/"
        if not (text + "/").startswith(prefix):
            raise PermissionError(
                errno.EACCES, f"cannot open {text!r}: it is not under the root {root_text!r}"
            )
        text = text[len(prefix) :] or "."
    names = [name for name in text.split("/") if name not in ("", ".")] or ["."]
    stack = [os.open(root_text, _O_PATH | _O_DIRECTORY | _O_CLOEXEC)]
    try:
        for index, name in enumerate(names):
            last = index == len(names) - 1
            if name == "..":
                if len(stack) == 1:
                    raise PermissionError(
                        errno.EACCES, f"cannot open {text!r}: '..' would leave the root"
                    )
                os.close(stack.pop())
                if last:
                    return os.open(".", flags | _O_CLOEXEC, mode, dir_fd=stack[-1])
                continue
            if last:
                return _open_component(name, flags | _O_NOFOLLOW | _O_CLOEXEC, mode, stack, text)
            stack.append(
                _open_component(
                    name, _O_PATH | _O_DIRECTORY | _O_NOFOLLOW | _O_CLOEXEC, 0, stack, text
                )
            )
        raise AssertionError("unreachable: the last component returns")  # pragma: no cover
    finally:
        for fd in stack:
            os.close(fd)


def _open_component(name: str, flags: int, mode: int, stack: list[int], text: str) -> int:
    try:
        return os.open(name, flags, mode, dir_fd=stack[-1])
    except OSError as error:
        if error.errno in (errno.ELOOP, errno.ENOTDIR, errno.EMLINK) and _is_link(name, stack[-1]):
            raise OSError(
                errno.ELOOP,
                f"cannot open {text!r}: {name!r} is a symbolic link, and open_beneath follows none",
            ) from None
        raise


def _is_link(name: str, dir_fd: int) -> bool:
    try:
        return stat.S_ISLNK(os.lstat(name, dir_fd=dir_fd).st_mode)
    except OSError:
        return False
