#!/bin/sh
# The dispatch script of the first-run config. It runs simulated-agent.ts, which Node 24 strips of its types itself (the
# image runs it so); older Node loads it through tsx, resolved from this repository so that it works whatever directory
# the gate starts it in (project directories usually live outside the repository).
set -eu
here=$(CDPATH= cd -- "$(dirname -- "$0")" && pwd)
tsx_loader=$(cd "$here" && node -p "process.features.typescript ? '' : require('node:url').pathToFileURL(require.resolve('tsx')).href")
if [ -z "$tsx_loader" ]; then exec node "$here/simulated-agent.ts" "$@"; fi
exec node --import "$tsx_loader" "$here/simulated-agent.ts" "$@"
