"""PathPolicy decides on the file the OS really opens: real trees, real symlinks, the kernel
as the oracle (``/proc/self/fd`` says where an open descriptor points)."""

from __future__ import annotations

import errno
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import agentloop as al
import agentloop.permissions
from agentloop.permissions import open_beneath, resolve_path

NAMES = ["root", "outside", "sub", "f", "l0", "l1", "l2", "l3", "new", "..", "."]
LINK_TARGETS = [
    "..",
    ".",
    "sub",
    "f",
    "l1",
    "l2",
    "missing",
    "../outside",
    "../outside/f",
    "../root/sub",
    "sub/../..",
    "{tmp}/outside",
    "{tmp}/root/sub",
    "{tmp}/nowhere",
    "/proc/self/root{tmp}/outside",
    "/proc/self/root{tmp}/root",
]


def _make_tree(links: dict[str, str]) -> Path:
    tmp = Path(tempfile.mkdtemp(prefix="agentloop-i13-paths-")).resolve()
    for directory in ("root/sub", "outside"):
        (tmp / directory).mkdir(parents=True)
    for file in ("root/f", "root/sub/f", "outside/f"):
        (tmp / file).write_text("x")
    for where, target in links.items():
        (tmp / where).symlink_to(target.format(tmp=tmp))
    return tmp


def _real_open(path: str, flags: int) -> str | int:
    """Where the kernel opens ``path`` (its real path), or the errno it refuses with."""
    try:
        fd = os.open(path, flags, 0o600)
    except OSError as error:
        return error.errno or -1
    try:
        return os.readlink(f"/proc/self/fd/{fd}")
    finally:
        os.close(fd)


def _inside(real: str, root: Path) -> bool:
    return real == str(root) or real.startswith(f"{root}/")


link_places = st.sampled_from(["root/l0", "root/l1", "root/sub/l2", "root/l3", "outside/l1"])
trees = st.dictionaries(link_places, st.sampled_from(LINK_TARGETS), max_size=5)
paths = st.tuples(
    st.sampled_from(["", "/proc/self/root", "relative"]),
    st.lists(st.sampled_from(NAMES), min_size=1, max_size=7),
)


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(links=trees, path=paths)
def test_a_read_is_decided_on_the_file_the_kernel_opens(
    links: dict[str, str], path: tuple[str, list[str]]
) -> None:
    tmp = _make_tree(links)
    try:
        prefix, names = path
        root = tmp / "root"
        policy = al.permissions.PathPolicy(allowed_roots=[root], base=str(root))
        text = "/".join(names) if prefix == "relative" else f"{prefix}{tmp}/{'/'.join(names)}"
        opened_at = str(root) if prefix == "relative" else None
        decision = policy.evaluate(al.permissions.FileSystemRead(text))
        real = _real_open(
            text if opened_at is None else os.path.join(opened_at, text), os.O_RDONLY | os.O_PATH
        )
        if isinstance(real, str):
            # the kernel found the file: the policy resolves to exactly that file
            assert policy.resolve(text) == real
            assert (decision == al.permissions.Allow()) == _inside(real, root), (
                text,
                real,
                decision,
            )
        elif real == errno.ELOOP:
            assert isinstance(decision, al.permissions.Deny), (text, decision)
        elif decision == al.permissions.Allow():
            # the kernel cannot open it; if allowed, it would be created under the root
            assert real in (errno.ENOENT, errno.ENOTDIR), (text, real)
            assert _inside(resolve_path(text, str(root)), root)
    finally:
        shutil.rmtree(tmp)


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(links=trees, path=paths)
def test_an_allowed_write_never_creates_a_file_outside_the_root(
    links: dict[str, str], path: tuple[str, list[str]]
) -> None:
    tmp = _make_tree(links)
    try:
        prefix, names = path
        root = tmp / "root"
        policy = al.permissions.PathPolicy(allowed_roots=[root], base=str(root))
        text = "/".join(names) if prefix == "relative" else f"{prefix}{tmp}/{'/'.join(names)}"
        full = os.path.join(str(root), text)
        if policy.evaluate(al.permissions.FileSystemWrite(text)) == al.permissions.Allow():
            # really write: the kernel follows every link, dangling ones included
            real = _real_open(full, os.O_WRONLY | os.O_CREAT)
            if isinstance(real, str):
                assert _inside(real, root), (text, real)
        before = sorted(str(p) for p in (tmp / "outside").rglob("*"))
        assert "nowhere" not in os.listdir(tmp)
        assert before == sorted(str(p) for p in (tmp / "outside").rglob("*"))
    finally:
        shutil.rmtree(tmp)


@pytest.fixture
def tree() -> Iterator[Path]:
    tmp = _make_tree({})
    yield tmp
    shutil.rmtree(tmp)


def deny(path: object, why: str, verb: str = "read") -> al.permissions.Deny:
    return al.permissions.Deny(
        "path_not_allowed", f"cannot {verb} {path!r}: it cannot be resolved: {why}"
    )


def test_unresolvable_paths_are_denied(tree: Path) -> None:
    root = tree / "root"
    policy = al.permissions.PathPolicy(allowed_roots=[root], base=str(root))
    (root / "self").symlink_to("self")
    (root / "dangling").symlink_to(tree / "outside" / "not-yet")
    (root / "dangling-inside").symlink_to(root / "not-yet")
    (root / "via-dangling").symlink_to("dangling/x")
    cases = {
        "self": "more than 40 symbolic links (a loop or a chain that is too long)",
        "dangling": f"a symbolic link leads to {tree}/outside/not-yet, which does not exist",
        "dangling-inside": f"a symbolic link leads to {root}/not-yet, which does not exist",
        "via-dangling": f"a symbolic link leads to {tree}/outside/not-yet, which does not exist",
        "f/x": f"{root}/f is not a directory",
        "f/..": f"{root}/f is not a directory",
        "x" * 256: f"the name {'x' * 40!r}... is too long",
        "a/" * 2100: "the path is longer than 4095 bytes",
        "bad\0name": "the path contains a NUL byte",
        "": "the path is empty",
    }
    for path, why in cases.items():
        assert policy.evaluate(al.permissions.FileSystemRead(path)) == deny(path, why), path
        assert policy.evaluate(al.permissions.FileSystemWrite(path)) == deny(path, why, "write"), (
            path
        )


def test_a_chain_of_links_is_followed_to_the_kernel_limit(tree: Path) -> None:
    root = tree / "root"
    policy = al.permissions.PathPolicy(allowed_roots=[root], base=str(root))
    (root / "c0").symlink_to("f")
    for index in range(1, 45):
        (root / f"c{index}").symlink_to(f"c{index - 1}")
    assert (
        policy.evaluate(al.permissions.FileSystemRead("c39")) == al.permissions.Allow()
    )  # 40 links: the limit
    assert _real_open(str(root / "c39"), os.O_RDONLY) == f"{root}/f"
    assert policy.evaluate(al.permissions.FileSystemRead("c40")) == deny(
        "c40", "more than 40 symbolic links (a loop or a chain that is too long)"
    )
    assert _real_open(str(root / "c40"), os.O_RDONLY) == errno.ELOOP
    # a chain that leaves the root at its far end is outside
    (tree / "outside" / "o0").symlink_to(tree / "outside" / "f")
    (root / "far").symlink_to(tree / "outside" / "o0")
    (root / "farther").symlink_to("far")
    assert policy.evaluate(al.permissions.FileSystemRead("farther")) == al.permissions.Deny(
        "path_not_allowed",
        f"cannot read 'farther': it resolves to {tree}/outside/f, outside the allowed roots "
        f"({root}); use a path under one of them",
    )


def test_proc_self_root_and_links_inside_roots_that_point_outside(tree: Path) -> None:
    root = tree / "root"
    policy = al.permissions.PathPolicy(allowed_roots=[root], base=str(root))
    (root / "out").symlink_to(tree / "outside")
    (root / "proc-out").symlink_to(f"/proc/self/root{tree}/outside")
    assert (
        policy.evaluate(al.permissions.FileSystemRead(f"/proc/self/root{root}/f"))
        == al.permissions.Allow()
    )
    for path in ("out/f", "proc-out/f", f"/proc/self/root{tree}/outside/f", "sub/../../outside/f"):
        assert policy.evaluate(al.permissions.FileSystemRead(path)) == al.permissions.Deny(
            "path_not_allowed",
            f"cannot read {path!r}: it resolves to {tree}/outside/f, outside the allowed roots "
            f"({root}); use a path under one of them",
        ), path
    # a path that cannot be there yet, then "..": the link after it is still looked at
    assert policy.resolve("missing/../out/f") == f"{tree}/outside/f"
    assert policy.resolve("missing/deeper/../../sub") == f"{root}/sub"
    assert policy.resolve("new/dir/file") == f"{root}/new/dir/file"


def test_relative_paths_are_taken_against_base(tree: Path) -> None:
    root = tree / "root"
    (tree / "base-link").symlink_to(root / "sub")
    policy = al.permissions.PathPolicy(allowed_roots=[root / "sub"], base=str(tree / "base-link"))
    assert policy.resolve("f") == f"{root}/sub/f"
    assert policy.evaluate(al.permissions.FileSystemRead("f")) == al.permissions.Allow()
    assert policy.evaluate(al.permissions.FileSystemRead("../f")) == al.permissions.Deny(
        "path_not_allowed",
        f"cannot read '../f': it resolves to {root}/f, outside the allowed roots ({root / 'sub'}); "
        "use a path under one of them",
    )
    # a base that cannot be resolved denies every relative path, absolute ones still decide
    lost = al.permissions.PathPolicy(allowed_roots=[root], base=str(root / "no" / ".." / "f" / "x"))
    assert lost.evaluate(al.permissions.FileSystemRead("f")) == deny(
        "f", f"{root}/f is not a directory"
    )
    assert lost.evaluate(al.permissions.FileSystemRead(str(root / "f"))) == al.permissions.Allow()


@pytest.mark.parametrize(
    ("path", "why"),
    [
        (None, "the path must be a string, got NoneType"),
        (3, "the path must be a string, got int"),
        (b"/etc/passwd", "the path must be a string, got bytes"),
        (["a"], "the path must be a string, got list"),
    ],
)
def test_a_path_that_is_no_string_is_denied_even_if_it_slipped_past_the_request(
    tree: Path, path: object, why: str
) -> None:
    request = al.permissions.FileSystemRead("placeholder")
    object.__setattr__(request, "path", path)  # as a buggy host could build it
    policy = al.permissions.PathPolicy(allowed_roots=[tree / "root"])
    assert policy.evaluate(request) == deny(path, why)


def test_a_root_that_cannot_be_resolved_contains_nothing(tree: Path) -> None:
    (tree / "loop").symlink_to("loop")
    policy = al.permissions.PathPolicy(allowed_roots=[tree / "loop", tree / "root"])
    assert (
        policy.evaluate(al.permissions.FileSystemRead(str(tree / "root" / "f")))
        == al.permissions.Allow()
    )
    assert isinstance(
        policy.evaluate(al.permissions.FileSystemRead(str(tree / "loop" / "f"))),
        al.permissions.Deny,
    )


def test_open_beneath_never_follows_a_link(tree: Path) -> None:
    root = tree / "root"
    (root / "out").symlink_to(tree / "outside")
    (root / "to-f").symlink_to("f")
    (root / "sub" / "up").symlink_to("..")
    fd = open_beneath(root, "sub/f")
    with os.fdopen(fd) as file:
        assert file.read() == "x"
    fd = open_beneath(root, "sub/../f")
    os.close(fd)
    for path, name in [("out/f", "out"), ("to-f", "to-f"), ("sub/up/f", "up")]:
        with pytest.raises(OSError, match="is a symbolic link") as caught:
            open_beneath(root, path)
        assert caught.value.errno == errno.ELOOP
        assert caught.value.strerror == (
            f"cannot open {path!r}: {name!r} is a symbolic link, and open_beneath follows none"
        )
    with pytest.raises(PermissionError) as refused:
        open_beneath(root, "sub/../../outside/f")
    assert refused.value.strerror == "cannot open 'sub/../../outside/f': '..' would leave the root"
    with pytest.raises(PermissionError) as absolute:
        open_beneath(root, str(tree / "outside" / "f"))
    assert absolute.value.strerror == (
        f"cannot open '{tree}/outside/f': it is not under the root '{root}'"
    )
    with pytest.raises(ValueError, match="the path contains a NUL byte"):
        open_beneath(root, "f\0")


def test_open_beneath_creates_files_but_never_through_a_dangling_link(tree: Path) -> None:
    root = tree / "root"
    (root / "trap").symlink_to(tree / "outside" / "planted")
    with pytest.raises(OSError, match="is a symbolic link") as caught:
        open_beneath(root, "trap", os.O_WRONLY | os.O_CREAT)
    assert caught.value.errno == errno.ELOOP
    assert not (tree / "outside" / "planted").exists()
    fd = open_beneath(root, str(root / "sub" / "made"), os.O_WRONLY | os.O_CREAT, 0o600)
    os.write(fd, b"ok")
    os.close(fd)
    assert (root / "sub" / "made").read_text() == "ok"


def test_open_beneath_is_not_fooled_by_a_link_swapped_in_after_the_check(tree: Path) -> None:
    root = tree / "root"
    policy = al.permissions.PathPolicy(allowed_roots=[root])
    target = str(root / "sub" / "f")
    assert policy.evaluate(al.permissions.FileSystemRead(target)) == al.permissions.Allow()
    # the race the policy cannot see: sub becomes a link to outside after the check
    shutil.rmtree(root / "sub")
    (root / "sub").symlink_to(tree / "outside")
    assert _real_open(target, os.O_RDONLY) == f"{tree}/outside/f"  # a plain open escapes
    with pytest.raises(OSError, match="is a symbolic link") as caught:
        open_beneath(root, "sub/f")
    assert caught.value.errno == errno.ELOOP
