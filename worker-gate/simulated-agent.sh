#!/bin/sh
# The dispatch script of the first-run config. It runs simulated-agent.ts with tsx resolved from this repository,
# so it works whatever directory the gate starts it in (project directories usually live outside the repository).
set -eu
here=$(CDPATH= cd -- "$(dirname -- "$0")" && pwd)
tsx_loader=$(cd "$here" && node -p "require('node:url').pathToFileURL(require.resolve('tsx')).href")
exec node --import "$tsx_loader" "$here/simulated-agent.ts" "$@"
