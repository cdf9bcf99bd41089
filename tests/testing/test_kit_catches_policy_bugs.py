"""Buggy permission policies, caught by the kit's adversarial strategies at their default budget.

Each buggy policy is a mistake people make (the first one is the example that
docs/testing.md used to show); the shipped policies and the fixed examples pass.
"""

from __future__ import annotations

import os
import posixpath

import pytest
from hypothesis import Phase, given, settings

import agentloop as al
import agentloop.permissions
from agentloop.testing import (
    adversarial_commands,
    adversarial_paths,
    adversarial_urls,
    check_command_policy,
    check_path_policy,
    check_url_policy,
    path_sandbox,
)

# -- paths -------------------------------------------------------------------------------


class StartsWithWorkspace:
    """The old docs example: a prefix test on the raw path text."""

    def __init__(self, root: str) -> None:
        self.root = root

    def evaluate(self, request: al.permissions.PermissionRequest) -> al.permissions.Verdict:
        path = getattr(request, "path", "")
        if path.startswith(self.root + "/"):
            return al.permissions.Allow()
        return al.permissions.Deny(
            al.permissions.DenyCode.PATH_NOT_ALLOWED, f"{path} is outside {self.root}"
        )


class NormalisedPrefix(StartsWithWorkspace):
    """Better but still wrong: normalises ``..`` but compares strings, not components,
    and never looks at symlinks."""

    def evaluate(self, request: al.permissions.PermissionRequest) -> al.permissions.Verdict:
        path = posixpath.normpath(os.path.join(self.root, request.path))  # type: ignore[attr-defined]
        if path.startswith(self.root):
            return al.permissions.Allow()
        return al.permissions.Deny(
            al.permissions.DenyCode.PATH_NOT_ALLOWED, f"{path} is outside {self.root}"
        )


class ResolvedWorkspace(StartsWithWorkspace):
    """The fixed docs example: resolve (``..``, symlinks), then compare components."""

    def evaluate(self, request: al.permissions.PermissionRequest) -> al.permissions.Verdict:
        path = getattr(request, "path", "")
        real = os.path.realpath(os.path.join(self.root, path))
        root = os.path.realpath(self.root)
        if os.path.commonpath([real, root]) == root:
            return al.permissions.Allow()
        return al.permissions.Deny(
            al.permissions.DenyCode.PATH_NOT_ALLOWED, f"{path} resolves to {real}, outside {root}"
        )


def test_a_prefix_test_on_the_raw_path_is_caught() -> None:
    with pytest.raises(
        AssertionError, match="policy StartsWithWorkspace answered Allow to filesystem"
    ):
        check_path_policy(StartsWithWorkspace("/workspace"), "/workspace")


def test_a_normalised_prefix_test_is_caught_by_siblings_and_symlinks() -> None:
    with pytest.raises(AssertionError, match="outside the root"):
        check_path_policy(NormalisedPrefix("/workspace"), "/workspace")  # /workspace-evil
    with pytest.raises(AssertionError, match="outside the root"):
        check_path_policy(NormalisedPrefix)  # the sandbox: a symlink leads out


@pytest.mark.parametrize("root", [None, "/workspace"])
def test_resolving_policies_pass(root: str | None) -> None:
    check_path_policy(ResolvedWorkspace, root)
    sandbox = root or path_sandbox()
    check_path_policy(al.permissions.PathPolicy(allowed_roots=[sandbox], base=sandbox), root)


def test_the_sandbox_has_links_out_and_in() -> None:
    root = path_sandbox()
    assert os.path.realpath(os.path.join(root, "escape")) == os.path.join(
        os.path.dirname(root), "outside"
    )
    assert os.path.realpath(os.path.join(root, "inner")) == os.path.join(root, "notes")
    assert os.path.isdir(os.path.dirname(root) + "/workspace-evil")


@settings(max_examples=300, deadline=None)
@given(case=adversarial_paths())
def test_path_cases_know_where_they_resolve(case: object) -> None:
    path, root, base, real = case  # type: ignore[misc]
    assert real == os.path.realpath(os.path.join(base, path))
    assert case.inside == (os.path.commonpath([real, os.path.realpath(root)]) == root)  # type: ignore[attr-defined]


# -- commands ------------------------------------------------------------------------------


class DenyRmByExactName:
    """Bug: ``/bin/rm`` and ``sh -c 'rm ...'`` get through."""

    def evaluate(self, request: al.permissions.PermissionRequest) -> al.permissions.Verdict:
        assert isinstance(request, al.permissions.ShellCommand)
        if request.argv[0] == "rm":
            return al.permissions.Deny(al.permissions.DenyCode.COMMAND_NOT_ALLOWED, "no rm")
        return al.permissions.Allow()


class DenyRmByBaseName(DenyRmByExactName):
    """Bug: catches ``/bin/rm`` but lets a shell run it."""

    def evaluate(self, request: al.permissions.PermissionRequest) -> al.permissions.Verdict:
        assert isinstance(request, al.permissions.ShellCommand)
        if os.path.basename(request.argv[0]) == "rm":
            return al.permissions.Deny(al.permissions.DenyCode.COMMAND_NOT_ALLOWED, "no rm")
        return al.permissions.Allow()


def test_a_deny_list_on_the_exact_program_text_is_caught() -> None:
    with pytest.raises(AssertionError, match="policy DenyRmByExactName allowed"):
        check_command_policy(DenyRmByExactName(), ["rm"])
    with pytest.raises(AssertionError, match="a launcher that can run anything"):
        check_command_policy(DenyRmByBaseName(), ["rm"])


def test_an_allow_list_passes() -> None:
    policy = al.permissions.CommandPolicy(allow={"ls", "cat", "echo"}, unknown="deny")
    check_command_policy(policy, ["rm", "curl"])
    check_command_policy(
        al.permissions.CommandPolicy(allow={"ls"}, deny={"rm"}, unknown="approve"), ["rm"]
    )


@settings(max_examples=200, deadline=None)
@given(case=adversarial_commands(["rm"]))
def test_command_cases_name_what_they_run(case: object) -> None:
    argv, _, runs = case  # type: ignore[misc]
    name = os.path.basename(argv[0])
    assert runs == (frozenset({"*"}) if name in al.testing.LAUNCHERS else frozenset({name}))


# -- URLs ----------------------------------------------------------------------------------


class HostInUrl:
    """Bug: looks for the allowed host anywhere in the URL text."""

    def evaluate(self, request: al.permissions.PermissionRequest) -> al.permissions.Verdict:
        assert isinstance(request, al.permissions.NetworkAccess)
        if "example.com" in request.url:
            return al.permissions.Allow()
        return al.permissions.Deny(al.permissions.DenyCode.NETWORK_NOT_ALLOWED, "not example.com")


class HostSuffix(HostInUrl):
    """Bug: ``endswith`` on the parsed host lets ``evil-example.com`` in."""

    def evaluate(self, request: al.permissions.PermissionRequest) -> al.permissions.Verdict:
        assert isinstance(request, al.permissions.NetworkAccess)
        if request.host.endswith("example.com"):
            return al.permissions.Allow()
        return al.permissions.Deny(al.permissions.DenyCode.NETWORK_NOT_ALLOWED, "not example.com")


def test_a_substring_or_suffix_host_test_is_caught() -> None:
    with pytest.raises(AssertionError, match="policy HostInUrl allowed"):
        check_url_policy(HostInUrl(), ["example.com"])
    with pytest.raises(AssertionError, match="policy HostSuffix allowed"):
        check_url_policy(HostSuffix(), ["example.com"])


def test_the_network_policy_passes() -> None:
    check_url_policy(
        al.permissions.NetworkPolicy(allow={"example.com"}, unknown="deny"), ["example.com"]
    )


@settings(max_examples=200, deadline=None)
@given(case=adversarial_urls(["example.com", "api.github.com"]))
def test_url_cases_name_the_host_reached(case: object) -> None:
    url, host, scheme = case  # type: ignore[misc]
    assert scheme == url.split("//", 1)[0].rstrip(":").lower()
    assert host is None or host == host.lower().rstrip(".")


class Recording:
    """Denies everything and records what it saw."""

    def __init__(self) -> None:
        self.urls: list[str] = []

    def evaluate(self, request: al.permissions.PermissionRequest) -> al.permissions.Verdict:
        assert isinstance(request, al.permissions.NetworkAccess)
        self.urls.append(request.url)
        return al.permissions.Deny(al.permissions.DenyCode.NETWORK_NOT_ALLOWED, "no")


def test_kit_entry_points_take_hypothesis_settings_and_a_seed() -> None:
    generate_only = settings(max_examples=3, database=None, phases=[Phase.generate])
    first, again, more = Recording(), Recording(), Recording()
    check_url_policy(first, ["example.com"], settings=generate_only, seed=5)
    check_url_policy(again, ["example.com"], settings=generate_only, seed=5)
    check_url_policy(more, ["example.com"], settings=generate_only, max_examples=9, seed=5)
    assert len(first.urls) == 3
    assert first.urls == again.urls  # the same seed, the same examples
    assert len(more.urls) == 9  # an explicit max_examples wins over the settings
    with pytest.raises(TypeError, match=r"settings must be a hypothesis\.settings"):
        check_url_policy(Recording(), ["example.com"], settings={"max_examples": 5})
