// Package postgres is weir's networked store backend: a store.Store on
// PostgreSQL (15 tested) through pgx v5 and its connection pool, for
// pipelines whose processes run on several machines.
//
// The full design — schema, how leases fence commits, timestamps, what
// differs on CockroachDB and YugabyteDB, and measured figures — is in the
// comments of schema.go, leases.go, timestamp.go and commit.go, and in
// docs/distributed.md.
package postgres
