package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/weir-stream/weir/store"
)

// Timestamps
//
// Every store.Timestamp comes from one PostgreSQL sequence, whose values
// are the timestamps themselves (unix second << 30 | counter). A sequence
// is the one counter every process of a pipeline can draw from without a
// hot row: nextval takes no row lock and is not rolled back, so commits
// and Timestamp calls never wait for each other's transactions, and
// concurrent draws are strictly increasing in the order they happen.
//
// The clock. A value below the clock's second (second << 30) is never
// returned: the caller moves the sequence up first (bump_timestamp, an
// exclusive advisory lock that every draw shares, so no draw runs between
// the read of the sequence and setval and the sequence never moves back).
// Within a second the counter runs on; when the sequence is ahead of the
// clock (the clock went back, or 2^30 values in a second) it simply
// continues, borrowing from later seconds as Pebble's oracle does.
//
// Durability across crashes. PostgreSQL logs a sequence's advance ahead
// of use and flushes that log record when a transaction with an id
// commits. issue_timestamp takes a transaction id, so its commit flushes
// the record covering the value before the value is returned; a commit
// that appends rows has one anyway. A value returned is therefore never
// issued again, whatever crashes.

// Timestamp issues a new Timestamp, strictly greater than every Timestamp
// issued before by this store (any process, across restarts included) and
// not below the store clock's current second.
func (s *Store) Timestamp(ctx context.Context) (store.Timestamp, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	c, err := s.acquire(ctx, "timestamp")
	if err != nil {
		return 0, err
	}
	defer c.Release()
	var ts *int64
	if err := c.QueryRow(ctx, s.sql.issueTimestamp, s.nowParam()).Scan(&ts); err != nil {
		return 0, s.readErr(ctx, "timestamp", err)
	}
	if ts != nil {
		return store.Timestamp(*ts), nil
	}
	return s.bump(ctx, c)
}

// bump moves the timestamp sequence up to the clock's second and returns
// the timestamp it drew.
func (s *Store) bump(ctx context.Context, c *pgxpool.Conn) (store.Timestamp, error) {
	var ts int64
	if err := c.QueryRow(ctx, s.sql.bumpTimestamp, s.nowParam()).Scan(&ts); err != nil {
		return 0, s.readErr(ctx, "timestamp: move up to the clock", err)
	}
	if ts <= 0 {
		return 0, fmt.Errorf("postgres store: timestamp: the sequence returned %d", ts)
	}
	return store.Timestamp(ts), nil
}
