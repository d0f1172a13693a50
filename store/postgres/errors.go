package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/weir-stream/weir/store"
)

// SQLSTATEs raised by weir's functions (schema.go).
const (
	codeLeaseLost       = "WL001"
	codeCheckFailed     = "WC001"
	codeTimestampBehind = "WT001"
)

// codeDeadlock is PostgreSQL's deadlock_detected: the server rolled the
// transaction back to break a cycle of lock waits.
const codeDeadlock = "40P01"

// pgCode returns the SQLSTATE of a server error, "" for other errors.
func pgCode(err error) string {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code
	}
	return ""
}

// serverError reports whether err is an ERROR the server answered a
// statement with, which rolls its transaction back: nothing applied. A
// FATAL or PANIC message, or an error of class 08 (connection exception)
// or 57 (operator intervention: pg_terminate_backend, shutdown, crash) is
// not one: the server may end a session that way after its COMMIT took
// effect. Neither is 40003 (statement completion unknown).
func serverError(err error) (*pgconn.PgError, bool) {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return nil, false
	}
	sev := pgErr.SeverityUnlocalized
	if sev == "" {
		sev = pgErr.Severity
	}
	if sev == "FATAL" || sev == "PANIC" || strings.HasPrefix(pgErr.Code, "08") || strings.HasPrefix(pgErr.Code, "57") ||
		pgErr.Code == codeCompletionUnknown {
		return pgErr, false
	}
	return pgErr, true
}

// codeCompletionUnknown is SQL's statement_completion_unknown, the code
// CockroachDB answers an ambiguous commit with. PostgreSQL does not send
// it; it is classified ambiguous wherever it comes from.
const codeCompletionUnknown = "40003"

// transientCode reports SQLSTATEs that say "try again": serialization
// failure and deadlock (class 40), insufficient resources (53), lock not
// available (55P03), and the connection and shutdown classes (08, 57).
func transientCode(code string) bool {
	switch {
	case code == codeCompletionUnknown:
		return false
	case strings.HasPrefix(code, "40"), strings.HasPrefix(code, "53"), code == "55P03",
		strings.HasPrefix(code, "08"), strings.HasPrefix(code, "57"):
		return true
	}
	return false
}

// readErr classifies the failure of a call that changes nothing the
// caller could observe twice (a read, a lease call, a timestamp): lost
// connections and transient server errors are retriable, a closed store is
// ErrClosed, the context's error stays itself, other server errors are
// fatal.
func (s *Store) readErr(ctx context.Context, op string, err error) error {
	if s.closed.Load() {
		return fmt.Errorf("postgres store: %s: %w", op, store.ErrClosed)
	}
	if ctx.Err() != nil {
		return fmt.Errorf("postgres store: %s: %w", op, ctx.Err())
	}
	code := pgCode(err)
	if code == "" || transientCode(code) {
		return store.Retriable(fmt.Errorf("postgres store: %s: %w", op, err))
	}
	return fmt.Errorf("postgres store: %s: %w", op, err)
}

// commitErr classifies the failure of a commit's batch, sent in one
// implicit transaction. A server ERROR rolled the transaction back: a
// transient one is retriable, others (bad input the server refused, a
// missing schema) fatal. Anything else after the batch was sent — a lost
// connection, a cancelled context, a FATAL message — leaves the outcome
// unknown: *store.AmbiguousError. weir's own codes (lease lost, failed
// check, timestamps behind) are handled by the caller before this.
func (s *Store) commitErr(err error) error {
	if pgErr, ok := serverError(err); ok {
		if transientCode(pgErr.Code) {
			return store.Retriable(fmt.Errorf("postgres store: commit: %w", err))
		}
		return fmt.Errorf("postgres store: commit: %w", err)
	}
	if pgconn.SafeToRetry(err) {
		return store.Retriable(fmt.Errorf("postgres store: commit: %w", err))
	}
	if s.closed.Load() {
		err = fmt.Errorf("%w (%w)", err, store.ErrClosed)
	}
	return &store.AmbiguousError{Err: fmt.Errorf("postgres store: commit: %w", err)}
}
