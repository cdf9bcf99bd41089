#!/bin/sh
# Install the Debian packages named after WHO (the caller's name, for messages) that are
# missing, once: a no-op when all are installed; otherwise needs root (apt-get).
#   sh scripts/install_debian_packages.sh WHO PACKAGE...
set -eu
who="$1"
shift
# The store tests' Redis (tests/store/conftest.py starts it) comes with every install:
# one apt run for all the test programs.
set -- "$@" redis-server
missing=""
for package in "$@"; do
    if ! dpkg -s "$package" >/dev/null 2>&1; then
        missing="$missing $package"
    fi
done
if [ -z "$missing" ]; then
    exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
    echo "$who: missing$missing; run as root: sudo sh scripts/$who" >&2
    exit 1
fi
echo "$who: installing$missing"
apt-get update
DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends $missing
