#!/usr/bin/env bash
# Idempotent install of everything kcsim needs, from a bare machine with Python 3.11:
#   1. Java 17 and Maven, from Debian's packages, if missing (needs root + apt-get);
#      Chromium too (the browser test of `kcsim report` renders its page headless);
#   2. the Python package with its dev extra (editable);
#   3. the JVM jars: .jars/spark (Delta + Spark's Kafka connector) and .kafka/libs
#      (an Apache Kafka broker for `kcsim kafka-local`), via Maven; skipped when the
#      directories already match jars/pom.xml and jars/kafka/pom.xml; the test
#      suite's KRaft oracle (.kraft-oracle: jars/kraft-oracle/pom.xml, tests/oracle/src);
#      and `kcsim shadow --metadata-log`'s reader, compiled against .kafka/libs into
#      .metadata-log-tail/classes (so that a shadow's start compiles nothing).
# Env: PYTHON (default python3), KCSIM_EXTRAS (default "dev"; empty for none),
#      KCSIM_M2_REPO (a Maven local repository other than ~/.m2/repository).
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON="${PYTHON:-python3}"
EXTRAS="${KCSIM_EXTRAS-dev}"
started=$(date +%s)

step() { printf '[install %3ss] %s\n' "$(( $(date +%s) - started ))" "$*"; }

if ! command -v java >/dev/null || ! command -v mvn >/dev/null; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
        step "installing Java 17 and Maven (apt-get)"
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
            openjdk-17-jdk-headless maven >/dev/null
    else
        echo "install.sh: need java (17+) and mvn on PATH" >&2
        exit 1
    fi
fi

if ! command -v chromium >/dev/null; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
        step "installing Chromium (apt-get), for the report's browser test"
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
    else
        echo "install.sh: no chromium and not root with apt-get: skipping it;" \
            "tests/test_report.py's browser tests will fail" >&2
    fi
fi

step "pip install -e .${EXTRAS:+[$EXTRAS]}"
"$PYTHON" -m pip install -q --disable-pip-version-check --root-user-action=ignore -e ".${EXTRAS:+[$EXTRAS]}"

# pyenv serves console scripts through shims: make `kcsim` one
if command -v pyenv >/dev/null; then pyenv rehash || true; fi

step "JVM jars (Maven) and the Java sources (javac)"
"$PYTHON" -m streaming.jars ${KCSIM_M2_REPO:+--repo-local "$KCSIM_M2_REPO"}

step "done"
