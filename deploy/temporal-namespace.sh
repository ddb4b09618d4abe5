#!/bin/sh
# Registers the namespace given as its argument, the one the control plane runs in. docker-compose.yml runs it once the
# Temporal server's port is open and starts the control plane only after it exited 0; the port opens a moment before
# the frontend serves, so the first tries may fail. An existing namespace is kept as it is.
set -eu
namespace="$1"
tries=0
until temporal operator namespace describe -n "$namespace" >/dev/null 2>&1 ||
  temporal operator namespace create -n "$namespace" --retention 30d; do
  tries=$((tries + 1))
  if [ "$tries" -ge 30 ]; then
    echo "could not register namespace $namespace at $TEMPORAL_ADDRESS" >&2
    exit 1
  fi
  sleep 2
done
echo "namespace $namespace is registered"
