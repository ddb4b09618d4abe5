#!/bin/sh
# Creates Temporal's databases on the stack's Postgres and brings their schemas to the version this admin-tools image
# ships (docker-compose.yml runs it once before the Temporal server starts). Safe to run again: an existing database
# or schema is kept, and update-schema only applies what is missing.
set -eu

sql() { temporal-sql-tool --plugin "$DB" --ep "$POSTGRES_SEEDS" -p "$DB_PORT" -u "$POSTGRES_USER" "$@"; }
schema_dir=/etc/temporal/schema/postgresql/v12

for database in temporal temporal_visibility; do
  case "$database" in
    temporal) versioned="$schema_dir/temporal/versioned" ;;
    *) versioned="$schema_dir/visibility/versioned" ;;
  esac
  sql --db "$database" create || echo "database $database exists"
  # setup-schema -v 0.0 writes the version table; on a database that already has one it fails, which is fine.
  sql --db "$database" setup-schema -v 0.0 || echo "schema of $database already set up"
  sql --db "$database" update-schema -d "$versioned"
done
echo "Temporal schemas are up to date"
