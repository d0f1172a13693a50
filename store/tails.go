package store

// SequenceTails is implemented by a Store that knows, without a read, where
// each ordered sequence (Txn.Append) ends: an embedded store through which
// every append passes. Readers that poll a sequence (a queue source, a tool
// following a queue) ask it first and skip the read when nothing new is
// there, and wait on WatchSequence's channel instead of polling.
//
// Contract of both methods: every row appended by a Commit that returned
// before the call has an index below end, one past the largest index of
// the sequence (table, prefix) visible to reads (end may be ahead of the
// rows a Scan finds: rows may have been deleted). ok is false when the
// store cannot tell now; the caller then reads as if it had no
// SequenceTails.
type SequenceTails interface {
	// SequenceEnd returns the sequence's end.
	SequenceEnd(table Table, prefix []byte) (end uint64, ok bool)
	// WatchSequence returns the sequence's end and grew, a channel closed
	// once a commit makes a larger end visible. (Only a caller that waits
	// asks for one: each costs a channel, closed by the next append.)
	WatchSequence(table Table, prefix []byte) (end uint64, grew <-chan struct{}, ok bool)
}
