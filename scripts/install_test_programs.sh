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
exec sh "$(dirname "$0")/install_debian_packages.sh" install_test_programs.sh coreutils findutils util-linux time procps git bash dash
