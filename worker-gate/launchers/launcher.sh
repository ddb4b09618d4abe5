#!/bin/sh
# The dispatch script the gate runs for a real agent (agent_runtime other than 'script'). It runs launcher.ts, which
# Node 24 strips of its types itself; older Node loads it through tsx, resolved from this repository so that it works
# whatever directory the gate starts it in.
set -eu
here=$(CDPATH= cd -- "$(dirname -- "$0")" && pwd)
tsx_loader=$(cd "$here" && node -p "process.features.typescript ? '' : require('node:url').pathToFileURL(require.resolve('tsx')).href")
if [ -z "$tsx_loader" ]; then exec node "$here/launcher.ts" "$@"; fi
exec node --import "$tsx_loader" "$here/launcher.ts" "$@"
