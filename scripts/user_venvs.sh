#!/bin/sh
# The virtual environments a user gets, for tests/test_user_install.py (run by `make test`
# before pytest; tests never run pip themselves):
#
#   .venv-user/               pip install of the clone alone, no extra
#   .venv-user-extras/EXTRA/  the clone with that one extra, for each extra but dev
#
# Each is a real install from a wheel built from this clone (what `pip install .` builds),
# with its dependencies resolved by pip. Reruns are no-ops: a venv is rebuilt only when
# pyproject.toml changed since it was built, and its agentloop is reinstalled (--no-deps,
# from the one wheel) only when a file under agentloop/ or pyproject.toml changed.
#
# Usage: sh scripts/user_venvs.sh [NAME...]   (NAME: core or an extra; default: all)
set -eu
PYTHON=${PYTHON:-python3.11}
BASE=.venv-user
EXTRAS_DIR=.venv-user-extras
DIST=$EXTRAS_DIR/dist

all_extras=$("$PYTHON" -c '
import tomllib
extras = tomllib.load(open("pyproject.toml", "rb"))["project"]["optional-dependencies"]
print(" ".join(sorted(name for name in extras if name != "dev")))
')
names=${*:-core $all_extras}

deps_key=$(sha256sum pyproject.toml | cut -c1-16)
code_key=$( (find agentloop -type f ! -path '*__pycache__*' | LC_ALL=C sort | xargs sha256sum;
    cat pyproject.toml README.md) | sha256sum | cut -c1-16)

mkdir -p "$EXTRAS_DIR"
# pip, its output without the local-index noise, and its exit status.
pip_quiet() {
    python=$1
    shift
    status=0
    "$python" -m pip --quiet "$@" >"$EXTRAS_DIR/pip.log" 2>&1 || status=$?
    grep -v 'is ignored: it is neither' "$EXTRAS_DIR/pip.log" >&2 || true
    return "$status"
}

wheel() {
    if [ "$(cat "$DIST/.key" 2>/dev/null)" != "$code_key" ]; then
        rm -rf "$DIST"
        pip_quiet "$PYTHON" wheel --no-deps --wheel-dir "$DIST" .
        echo "$code_key" >"$DIST/.key"
    fi
    ls "$DIST"/*.whl
}

for name in $names; do
    if [ "$name" = core ]; then
        venv=$BASE
        spec=""
    else
        venv=$EXTRAS_DIR/$name
        spec="[$name]"
    fi
    if [ "$(cat "$venv/.deps-key" 2>/dev/null)" = "$deps_key" ] &&
        [ "$(cat "$venv/.code-key" 2>/dev/null)" = "$code_key" ]; then
        continue
    fi
    file=$(wheel)
    started=$(date +%s)
    if [ "$(cat "$venv/.deps-key" 2>/dev/null)" != "$deps_key" ]; then
        rm -rf "$venv"
        "$PYTHON" -m venv "$venv"
        pip_quiet "$venv/bin/python" install "$file$spec"
        echo "$deps_key" >"$venv/.deps-key"
    else
        pip_quiet "$venv/bin/python" install --no-deps --force-reinstall --no-compile "$file"
    fi
    "$venv/bin/python" -I -c 'import agentloop' # -I: the installed one, not ./agentloop
    echo "$code_key" >"$venv/.code-key"
    echo "user venv $venv (agentloop-runtime$spec): $(($(date +%s) - started)) s"
done
