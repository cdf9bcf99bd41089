#!/bin/sh
# Install the Debian packages whose programs the command-policy tests run for real
# (tests/permissions/test_wrappers_against_real_programs.py), once.
# A no-op when the packages are installed; otherwise needs root (apt-get).
#   coreutils: env nice timeout nohup stdbuf chroot    findutils: xargs find
#   util-linux: flock setsid ionice                    time: /usr/bin/time
#   procps: watch (its option table is checked against watch --help; it is not run:
#   it needs a terminal)                               git, bash, dash
# sudo and doas are read by CommandPolicy but not run by the tests (they reset PATH,
# so the tests' stand-ins cannot see what they run), so they are not installed.
set -eu
PACKAGES="coreutils findutils util-linux time procps git bash dash"
missing=""
for package in $PACKAGES; do
    if ! dpkg -s "$package" >/dev/null 2>&1; then
        missing="$missing $package"
    fi
done
if [ -z "$missing" ]; then
    exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
    echo "install_test_programs.sh: missing$missing; run as root: sudo $0" >&2
    exit 1
fi
echo "install_test_programs.sh: installing$missing"
apt-get update
DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends $missing
