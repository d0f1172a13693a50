// Package store is the contract between weir's engine and the storage it
// commits to: a transactional, ordered key-value store with named tables and
// leases.
//
// Everything weir guarantees rests on three properties of a Store:
//
//  1. Commit is atomic and durable on return: either every mutation of a Txn
//     is visible and survives a crash or power loss, or none is.
//  2. A commit that names a lease as a prerequisite succeeds only if the lease
//     is active at the moment the commit applies; the check and the write are
//     one atomic step.
//  3. Aborting a lease is a barrier: AbortLease returns only after every
//     commit that saw the lease active has finished (applied or failed). After
//     it returns no commit naming the lease can ever succeed. Expiry is the
//     same barrier: a lease is never reported Expired while a commit that saw
//     it active is still in flight.
//
// Properties 2 and 3 are what make a zombie job harmless: once the controller
// has aborted a job's lease (or observed it expired) and created a
// replacement, nothing the old job does can reach the store.
//
// The package holds only the contract, its error vocabulary and the Txn
// builder; backends live in sub-packages (store/pebble, embedded;
// store/postgres, networked; store/open picks one from an address) and must
// all pass the conformance suite in store/storetest.
package store

import (
	"context"
	"fmt"
	"time"
)

// Table names a logical table. Names are short ASCII identifiers
// ([a-z0-9_]+); the engine's tables mirror Flow's names (see the constants).
type Table string

// The engine's tables. Backends treat all tables alike; the names are listed
// here so that every package spells them the same way.
const (
	InputMessages         Table = "input_messages"
	CompactInputMessages  Table = "compact_input_messages"
	OutputMessages        Table = "partition_output_messages"
	States                Table = "states"
	PartitionStates       Table = "partition_states"
	Timers                Table = "timers"
	PartitionTransactions Table = "partition_transactions"
	FlowState             Table = "flow_state"
	Queues                Table = "queues"
	QueueRows             Table = "queue_rows"
	Consumers             Table = "consumers"
	Producers             Table = "producers"
	// ExternalStates holds the rows of every external state table (package
	// externalstate), one key range per table.
	ExternalStates Table = "external_states"
)

// Valid reports whether t is a well-formed table name.
func (t Table) Valid() bool {
	if len(t) == 0 || len(t) > 64 {
		return false
	}
	for i := 0; i < len(t); i++ {
		c := t[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}

// LeaseID identifies a lease. Ids are never reused within one store, across
// restarts included, so an id held by a zombie can never name a newer lease.
// The zero LeaseID is "no lease".
type LeaseID uint64

// String formats the id for logs.
func (id LeaseID) String() string { return fmt.Sprintf("lease-%016x", uint64(id)) }

// LeaseState is what the store knows about a lease.
type LeaseState int

const (
	// LeaseUnknown: the store has no record of the lease (never created, or
	// created by an earlier incarnation of an embedded store whose leases died
	// with its process). A commit naming it fails as if it were aborted.
	LeaseUnknown LeaseState = iota
	// LeaseActive: created, not aborted, and pinged within its timeout.
	LeaseActive
	// LeaseAborted: ended by AbortLease.
	LeaseAborted
	// LeaseExpired: not pinged within its timeout. Counts as aborted.
	LeaseExpired
)

func (s LeaseState) String() string {
	switch s {
	case LeaseActive:
		return "active"
	case LeaseAborted:
		return "aborted"
	case LeaseExpired:
		return "expired"
	default:
		return "unknown"
	}
}

// Timestamp is a store-issued timestamp: unix seconds in the high 34 bits and
// a counter in the low 30 bits, the layout of YTsaurus timestamps. Timestamps
// issued by one store strictly increase, across restarts included, so they
// serve as globally unique epoch sequence numbers.
type Timestamp uint64

// TimestampCounterBits is the width of the counter part of a Timestamp.
const TimestampCounterBits = 30

// MakeTimestamp builds the smallest Timestamp of the second that contains t.
func MakeTimestamp(t time.Time) Timestamp {
	return Timestamp(uint64(t.Unix()) << TimestampCounterBits)
}

// Time returns the second the timestamp was issued in.
func (ts Timestamp) Time() time.Time {
	return time.Unix(int64(uint64(ts)>>TimestampCounterBits), 0)
}

// Range selects keys in [Lo, Hi) of one table. A nil Hi means "to the end of
// the table"; a nil Lo means "from the start".
type Range struct {
	Table Table
	Lo    []byte
	Hi    []byte
	// Reverse scans from the highest key down.
	Reverse bool
	// Limit stops the scan after this many rows; 0 means no limit.
	Limit int
}

// Store is a transactional ordered key-value store with leases.
//
// All methods are safe for concurrent use. Reads see only committed data
// (read-committed); a Txn does not read its own writes. Errors are classified
// by Classify; see errors.go.
type Store interface {
	// Get returns the committed value of key in table, and whether it exists.
	// The returned slice is owned by the caller.
	Get(ctx context.Context, table Table, key []byte) (value []byte, ok bool, err error)

	// Scan calls fn for each committed row in r, in key order (or reverse
	// order). The slices passed to fn are valid only during the call. Scan
	// stops when fn returns false.
	Scan(ctx context.Context, r Range, fn func(key, value []byte) bool) error

	// Commit applies txn atomically and durably. Commit does not modify txn,
	// so the same Txn may be committed again after an error (with an added
	// Check guarding against a late first attempt, see runtime's
	// transaction manager), and it neither keeps nor reads txn's lists after
	// it returns, so that the caller may recycle it (Txn.Recycle); keys and
	// values, never modified, it may keep.
	//
	// Commit fails with a *LeaseLostError (terminal, never retry) if any of
	// txn's prerequisite leases is not active when the commit applies, with
	// ErrConflict if a check of txn does not hold, and with an *AmbiguousError
	// if the backend cannot tell whether the commit applied; the caller must
	// then resolve the outcome by reading (see PartitionTransactions) and must
	// not blindly retry. Concurrent commits are group-committed: many
	// transactions share one fsync.
	Commit(ctx context.Context, txn *Txn) error

	// CreateLease creates an active lease that expires unless pinged at least
	// once every timeout.
	CreateLease(ctx context.Context, timeout time.Duration) (LeaseID, error)

	// PingLease extends an active lease by its timeout. It fails with a
	// *LeaseLostError if the lease is no longer active.
	PingLease(ctx context.Context, id LeaseID) error

	// AbortLease ends the lease. It is idempotent (aborting an ended or unknown
	// lease succeeds) and a barrier: it returns only after every commit that
	// saw the lease active has finished.
	AbortLease(ctx context.Context, id LeaseID) error

	// LeaseState reports the lease's state. A result of LeaseExpired or
	// LeaseAborted is final and carries the same barrier as AbortLease.
	LeaseState(ctx context.Context, id LeaseID) (LeaseState, error)

	// Now is the store's clock: the one clock that decides lease expiry.
	Now() time.Time

	// Timestamp issues a new unique Timestamp, strictly greater than every
	// Timestamp issued before by this store, across restarts included.
	Timestamp(ctx context.Context) (Timestamp, error)

	// Close releases the store. In-flight calls may fail.
	Close() error
}
