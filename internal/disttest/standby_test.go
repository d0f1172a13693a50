package disttest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/weir-stream/weir/internal/testconn"
)

// TestPrimaryLossWithSyncStandby: PostgreSQL with a synchronous streaming
// standby in another host; every weir process has both in its store URL
// (target_session_attrs=read-write). The counter runs; the primary's host
// crashes (every process SIGKILLed); the standby is promoted (as Patroni
// would); the pipeline goes on on it, and every key's counts are 1..n
// exactly once: no committed epoch was lost with the primary.
func TestPrimaryLossWithSyncStandby(t *testing.T) {
	began := time.Now()
	phase := func(what string) { t.Logf("%v: %s", time.Since(began).Round(time.Millisecond), what) }
	t.Cleanup(func() { phase("cleanup") })
	hc := newHostCluster(t, "w1", "w2")
	phase("cluster")
	h2, err := hc.n.AddHost("pg2")
	if err != nil {
		t.Fatal(err)
	}
	standby, err := h2.StartPostgresStandby(hc.pg)
	if err != nil {
		t.Fatal(err)
	}
	if err := hc.pg.SetSynchronous(); err != nil {
		t.Fatal(err)
	}
	phase("standby")
	// Both servers, the writable one wins.
	hostOf := func(url string) string { return strings.SplitN(strings.SplitN(url, "@", 2)[1], "/", 2)[0] }
	primaryHost, standbyHost := hostOf(hc.pg.URL()), hostOf(standby.URL())
	hc.url = fmt.Sprintf("postgres://postgres@%s,%s/weirtest?sslmode=disable&target_session_attrs=read-write&connect_timeout=2", primaryHost, standbyHost)
	for _, w := range []string{"w1", "w2"} {
		hc.startWorker(w)
	}
	hc.startController("ctl1")
	hc.startController("ctl2")
	phase("processes")
	ctx := context.Background()
	r := rand.New(rand.NewPCG(5, 5))
	for i := 0; i < 5; i++ {
		if err := hc.c.Write(ctx, r, 500, 40, 100); err != nil {
			t.Fatal(err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	phase("written")
	// Some outputs are committed; the last count read from the primary
	// before its crash must be on the promoted standby.
	var before int
	hc.eventually("progress", func() bool {
		_, n, err := hc.c.Read(ctx)
		before = n
		return err == nil && n >= 1000
	})
	_, before, _ = hc.c.Read(ctx)
	phase(fmt.Sprintf("%d outputs committed", before))
	// The primary's machine dies; the standby is promoted.
	if err := hc.pg.Crash(); err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	if err := standby.Promote(); err != nil {
		t.Fatal(err)
	}
	hc.pg = standby
	hc.reconnectTo(standby.SocketURL())
	promoted := time.Since(t0)
	if _, after, err := hc.c.Read(ctx); err != nil || after < before {
		t.Fatalf("the promoted standby has %d outputs (%v), the primary had %d committed: a commit was lost with the primary", after, err, before)
	}
	for i := 0; i < 5; i++ {
		if err := hc.c.Write(ctx, r, 500, 40, 100); err != nil {
			t.Fatal(err)
		}
	}
	want := hc.c.Total()
	var got map[string][]int64
	d := hc.eventually(fmt.Sprintf("all %d events counted", want), func() bool {
		var total int
		got, total, err = hc.c.Read(ctx)
		return err == nil && total >= want
	})
	t.Logf("standby promoted %v after the primary's crash; every event counted %v after the promotion", promoted.Round(time.Millisecond), d.Round(time.Millisecond))
	if bad := testconn.ExactlyOnce(got, hc.c.Want); len(bad) > 0 {
		t.Fatalf("exactly-once violated after the failover: %v", bad)
	}
	t.Logf("%d events counted exactly once across the primary's loss", want)
}
