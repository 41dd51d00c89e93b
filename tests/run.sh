#!/usr/bin/env bash
# Installs everything the tests need on a fresh Debian/Ubuntu machine, then runs them all:
# lint, unit tests, AppTest page tests and the real-browser tests.
set -euo pipefail
cd "$(dirname "$0")/.."

# The browser tests drive Debian's chromium (Playwright's own browser download needs the internet); the live
# class's tests start Debian's redis-server (tests/redis_server.py).
SYSTEM_PACKAGES="chromium fonts-dejavu-core redis-server"

# How to run a command as root here: directly, through sudo (without a password, or asking for it at a terminal),
# or not at all: then say what to install instead of failing halfway through apt-get.
as_root() {
  if [ "$(id -u)" -eq 0 ]; then
    "$@"
  elif command -v sudo >/dev/null 2>&1 && { sudo -n true 2>/dev/null || [ -t 0 ]; }; then
    sudo "$@"
  else
    return 1
  fi
}

if ! command -v chromium >/dev/null 2>&1 || ! command -v redis-server >/dev/null 2>&1; then
  if ! command -v apt-get >/dev/null 2>&1 || ! as_root true; then
    echo "tests/run.sh: the tests need Debian's chromium and redis-server, and this script cannot install system packages" >&2
    echo "here (it needs root, or sudo, and apt-get). Install them, then run it again:" >&2
    echo "  sudo apt-get update && sudo apt-get install -y $SYSTEM_PACKAGES" >&2
    exit 1
  fi
  as_root apt-get update -qq
  # shellcheck disable=SC2086  # the package names are meant to split
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $SYSTEM_PACKAGES >/dev/null
fi

# Chromium's headless shell (Debian's chromium-headless-shell) draws the same pages as the full browser on less
# CPU, which is what the suite's time goes to on two cores; where it cannot be installed, the tests use chromium.
# Optional, so never a password prompt for it: only as root or with a sudo that asks for none.
if ! command -v chromium-headless-shell >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1 &&
  { [ "$(id -u)" -eq 0 ] || sudo -n true 2>/dev/null; }; then
  # Bounded: a registry that does not answer costs at most these minutes, never the run.
  as_root timeout 120 env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium-headless-shell >/dev/null 2>&1 ||
    { as_root timeout 120 apt-get update -qq >/dev/null 2>&1 &&
      as_root timeout 120 env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium-headless-shell \
        >/dev/null 2>&1; } ||
    echo "tests/run.sh: chromium-headless-shell could not be installed; the browser tests use chromium (slower)" >&2
fi

python3 -m pip install -q --disable-pip-version-check -r requirements-dev.txt

python3 -m ruff check .
python3 -m ruff format --check .
# Two workers, one a core. A module runs whole on one worker (its module fixtures are made once, its tests keep
# their order); the app server and the models are shared within a worker, and the longest modules start first
# (tests/conftest.py; without --no-loadscope-reorder pytest-xdist starts the modules with the most tests first and
# leaves a long module of few tests, such as the coverage matrix, to the end). Four workers were no faster on two
# cores (each test took 2.3 times as long, and pages under that load ran past the browser tests' 60 s waits). Set EXPLORER_TEST_WORKERS=0 for one process (pytest's own -n
# given after it wins too).
# Compiled modules (pytest's rewritten tests among them) are kept in __pycache__ folders, which git ignores, even
# where PYTHONDONTWRITEBYTECODE is set: else each test worker, and each app server the tests start, compiles the
# package and the tests again (a worker's collection took 11 s instead of 6).
unset PYTHONDONTWRITEBYTECODE
python3 -m pytest -n "${EXPLORER_TEST_WORKERS:-2}" --dist loadfile --no-loadscope-reorder "$@"
