package store

import (
	"context"
	"errors"
	"fmt"
)

// The error vocabulary of the store contract. Every error a backend returns
// falls in one of the classes of Class; Classify tells which. Wrap with %w so
// the class survives.

var (
	// ErrLeaseLost matches (errors.Is) every *LeaseLostError.
	ErrLeaseLost = errors.New("store: lease lost")
	// ErrAmbiguous matches every *AmbiguousError.
	ErrAmbiguous = errors.New("store: commit outcome unknown")
	// ErrConflict: a Check of the Txn did not hold; nothing was written.
	// Retriable after re-reading.
	ErrConflict = errors.New("store: check failed, nothing written")
	// ErrClosed: the store is closed. Terminal for this handle.
	ErrClosed = errors.New("store: closed")
	// ErrUnusable: the handle is in an unknown state after an I/O failure
	// (for the embedded store: a failed WAL write) and refuses every call.
	// Close it and open the store again; recovery gives a consistent state.
	// Terminal for this handle: the engine stops and reports it.
	ErrUnusable = errors.New("store: handle unusable after an I/O failure; reopen the store")
	// ErrCorrupt: the backend found its data damaged on disk (a checksum
	// mismatch, a missing or truncated file, acknowledged commits missing
	// from the log). Terminal for the data, not just the handle: reopening
	// does not help. The engine stops; the operator checks the store (weir
	// store check) and restores it. Backends return it together with
	// ErrUnusable, as the handle refuses every later call.
	ErrCorrupt = errors.New("store: data damaged on disk")
)

// LeaseLostError says a commit or ping named a lease that is not active.
// Nothing was written. It is terminal: the job holding the lease must stop,
// because the controller has already given its partition to someone else (or
// will). Never retry it.
type LeaseLostError struct {
	Lease LeaseID
	State LeaseState
}

func (e *LeaseLostError) Error() string {
	return fmt.Sprintf("store: %s is %s", e.Lease, e.State)
}

// Is makes errors.Is(err, ErrLeaseLost) true.
func (e *LeaseLostError) Is(target error) bool { return target == ErrLeaseLost }

// AmbiguousError says the backend does not know whether a commit applied (an
// I/O error after the write may have reached the log, a lost connection
// during COMMIT). The caller must resolve the outcome by reading what the
// commit would have written — weir does it through the partition's
// partition_transactions row — and must not apply the epoch twice.
type AmbiguousError struct {
	Err error
}

func (e *AmbiguousError) Error() string {
	return "store: commit outcome unknown: " + e.Err.Error()
}

// Unwrap returns the cause.
func (e *AmbiguousError) Unwrap() error { return e.Err }

// Is makes errors.Is(err, ErrAmbiguous) true.
func (e *AmbiguousError) Is(target error) bool { return target == ErrAmbiguous }

// Class is how a caller must react to an error.
type Class int

const (
	// ClassNone: no error.
	ClassNone Class = iota
	// ClassLeaseLost: terminal for the lease holder; never retried.
	ClassLeaseLost
	// ClassAmbiguous: the outcome is unknown; resolve it by reading, don't guess.
	ClassAmbiguous
	// ClassRetriable: nothing was applied; the same work may be tried again.
	ClassRetriable
	// ClassFatal: a programming error, bad input or a closed/broken store;
	// retrying the same call cannot help.
	ClassFatal
)

func (c Class) String() string {
	switch c {
	case ClassNone:
		return "none"
	case ClassLeaseLost:
		return "lease-lost"
	case ClassAmbiguous:
		return "ambiguous"
	case ClassRetriable:
		return "retriable"
	default:
		return "fatal"
	}
}

// retriableError marks an error that left nothing applied.
type retriableError struct{ err error }

func (e *retriableError) Error() string { return e.err.Error() }
func (e *retriableError) Unwrap() error { return e.err }

// Retriable wraps err so that Classify reports ClassRetriable. Backends use it
// for transient failures known to have applied nothing (a connection refused
// before BEGIN, a serialization failure).
func Retriable(err error) error {
	if err == nil {
		return nil
	}
	return &retriableError{err: err}
}

// Classify tells how to react to err. The order of the cases matters: a lease
// loss wins over everything (a job whose lease is gone must stop even if the
// error also looks transient), and an ambiguous outcome wins over retriable
// (retrying an epoch that may have applied would apply it twice).
func Classify(err error) Class {
	var r *retriableError
	switch {
	case err == nil:
		return ClassNone
	case errors.Is(err, ErrLeaseLost):
		return ClassLeaseLost
	case errors.Is(err, ErrAmbiguous):
		return ClassAmbiguous
	case errors.Is(err, ErrConflict), errors.As(err, &r):
		return ClassRetriable
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		// A commit cancelled by its context either never started or is
		// reported as ambiguous by the backend; any other call applied nothing.
		return ClassRetriable
	default:
		return ClassFatal
	}
}
