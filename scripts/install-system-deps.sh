#!/usr/bin/env bash
# Installs the Debian packages the test suite needs: ZooKeeper's jars (libzookeeper-java, no
# daemon; tests start QuorumPeerMain themselves) and etcd, plus a headless JRE if no java.
# Idempotent: installs nothing when everything is present. Needs root; as a normal user it
# only says what is missing (the tests that need a server then skip, unless
# REPLOG_REQUIRE_BACKENDS=1, which CI sets).
set -euo pipefail
missing=()
[ -f /usr/share/java/zookeeper.jar ] || missing+=(libzookeeper-java)
command -v etcd >/dev/null 2>&1 || missing+=(etcd-server etcd-client)
command -v java >/dev/null 2>&1 || missing+=(default-jre-headless)
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "install-system-deps: not root; missing Debian packages: ${missing[*]}" >&2
  exit 0
fi
start=$(date +%s)
export DEBIAN_FRONTEND=noninteractive
apt-get update -q >/dev/null
apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null
echo "install-system-deps: installed ${missing[*]} in $(( $(date +%s) - start )) s"
