package disttest

import (
	"context"
	"math/rand/v2"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/weir-stream/weir/cluster"
)

// TestTakeoverJobsNotChargedWithOldExits: workers report job exits by job
// id for a minute. A new leader's job ids must not repeat its
// predecessor's: before they carried the term, both controllers numbered
// their jobs from 1, the new leader's fresh jobs were matched with the old
// jobs' exit records and removed at once ("lease … is aborted", the old
// lease) and restarted with backoff (issue 23, item 6). The first
// controller stops (SIGTERM: it resigns and its jobs stop), the second
// takes over, and none of its jobs may be removed.
func TestTakeoverJobsNotChargedWithOldExits(t *testing.T) {
	url, st, c, spec := distSetup(t)
	ctx := context.Background()
	startWorkers(t, url, 2)
	r := rand.New(rand.NewPCG(6, 6))
	counted := func() {
		t.Helper()
		want := c.Total()
		eventually(t, "every event counted", func() bool {
			_, n, err := c.Read(ctx)
			return err == nil && n >= want
		})
	}
	first := start(t, "c1", "controller", "--store", url, "--spec", spec, "--id", "c1", "--lease-timeout", "2s", "-v")
	first.await(t, "is active", time.Minute)
	if err := c.Write(ctx, r, 2000, 40, 200); err != nil {
		t.Fatal(err)
	}
	counted()
	first.cmd.Process.Signal(syscall.SIGTERM)
	<-first.done

	second := start(t, "c2", "controller", "--store", url, "--spec", spec, "--id", "c2", "--lease-timeout", "2s", "-v")
	second.await(t, "is active", time.Minute)
	eventually(t, "c2 leads", func() bool {
		rec, ok, err := cluster.ReadLeader(ctx, st)
		return err == nil && ok && rec.ID == "c2"
	})
	if err := c.Write(ctx, r, 2000, 40, 200); err != nil {
		t.Fatal(err)
	}
	counted()
	checkCounts(t, ctx, c)
	for _, line := range strings.Split(second.out.String(), "\n") {
		if strings.Contains(line, "removing job") {
			t.Errorf("the new leader removed a job of its own: %s", line)
		}
	}
}
