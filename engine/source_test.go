package engine

import (
	"context"
	"strings"
	"testing"

	"github.com/weir-stream/weir/job"
	"github.com/weir-stream/weir/transport"
)

// TestConsumerOffsetCommitsWithPosition: a queue source's consumer offset
// (for lag tools) commits in the epoch transaction with the pipeline's
// position (connector.TxnReporter), so it is exact even when every Reader
// job dies right after its commit, before any post-commit step.
func TestConsumerOffsetCommitsWithPosition(t *testing.T) {
	f := newFixture(t, 2)
	f.writeKeys(t, 120, 7, 3)
	p := example(t, "counter")
	p.Computations["Reader"].MaxRowsPerBatch = 20
	f.run(t, p, readerCrashes{})
	f.checkExactlyOnce(t)
	offs, err := f.events.ConsumerOffsets(context.Background(), "counter")
	if err != nil {
		t.Fatal(err)
	}
	for part, off := range offs {
		n, err := f.events.Len(context.Background(), part)
		if err != nil {
			t.Fatal(err)
		}
		if off != n {
			t.Errorf("partition %d: consumer offset %d, want the committed position %d (the queue's length)", part, off, n)
		}
	}
}

// readerCrashes kills every Reader job right after each commit.
type readerCrashes struct{}

func (readerCrashes) Crash(p transport.PartitionID, point job.CrashPoint) error {
	if point == job.CrashAfterCommitBeforeAck && strings.HasPrefix(string(p), "Reader/") {
		return job.ErrCrashed
	}
	return nil
}
