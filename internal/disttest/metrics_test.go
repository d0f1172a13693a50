package disttest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/weir-stream/weir/board"
	"github.com/weir-stream/weir/cluster"
	"github.com/weir-stream/weir/store"
)

// TestMetricsAcrossFailover: the pipeline's counters of weir controller's
// GET /metrics go on across a change of leader, also the counts of a
// worker life that ended before it. A worker running Reader partitions is
// SIGKILLed (its jobs move to the other), then the active controller; the
// standby's weir_inputs_total{computation="Reader"} is at least what the
// first leader reported. Before, a new leader counted only the live
// workers' current lives: the killed worker's counts were gone. Also:
// /status's lag reaches caught_up after each write, and the counts are
// exactly once.
func TestMetricsAcrossFailover(t *testing.T) {
	url, st, c, spec := distSetup(t)
	ctx := context.Background()
	ws := startWorkers(t, url, 2)
	admin := map[string]string{}
	ctls := map[string]*proc{}
	for _, id := range []string{"c1", "c2"} {
		ctls[id] = start(t, id, "controller", "--store", url, "--spec", spec, "--id", id, "--lease-timeout", "2s")
		admin[id] = adminAddr(t, ctls[id])
	}
	var first cluster.LeaderRecord
	eventually(t, "a leader", func() bool {
		rec, ok, err := cluster.ReadLeader(ctx, st)
		first = rec
		return err == nil && ok
	})
	r := rand.New(rand.NewPCG(27, 4))
	if err := c.Write(ctx, r, 2000, 40, 200); err != nil {
		t.Fatal(err)
	}
	caughtUp(t, admin[first.ID])
	// The victim: a worker running a Reader partition.
	var st1 struct {
		Pipeline struct {
			Partitions []struct {
				Partition, Worker string
			}
		}
	}
	getJSON(t, admin[first.ID], "/status", &st1)
	victim := -1
	for _, p := range st1.Pipeline.Partitions {
		if strings.HasPrefix(p.Partition, "Reader") && p.Worker != "" {
			fmt.Sscanf(p.Worker, "w%d", &victim)
			break
		}
	}
	if victim < 0 {
		t.Fatalf("no worker runs a Reader partition: %+v", st1)
	}
	ws[victim].kill()
	if err := c.Write(ctx, r, 1000, 40, 200); err != nil {
		t.Fatal(err)
	}
	caughtUp(t, admin[first.ID])
	before := readerInputs(t, admin[first.ID])
	// Wait until the leader stored at least those counts (every second).
	eventually(t, "the counters stored", func() bool { return storedReaderInputs(t, st) >= before })
	ctls[first.ID].kill()
	var second cluster.LeaderRecord
	eventually(t, "the standby takes over", func() bool {
		rec, ok, err := cluster.ReadLeader(ctx, st)
		second = rec
		return err == nil && ok && rec.Lease > first.Lease
	})
	caughtUp(t, admin[second.ID])
	after := readerInputs(t, admin[second.ID])
	if after < before {
		t.Fatalf("the new leader counts %v Reader inputs, the old one counted %v: the counters went back", after, before)
	}
	checkCounts(t, ctx, c)
	t.Logf("Reader inputs: %v before the failover (worker w%d killed before it), %v after", before, victim, after)
}

var adminAt = regexp.MustCompile(`admin API at (\S+)`)

// adminAddr waits for controller p's admin API and returns its address.
func adminAddr(t *testing.T, p *proc) string {
	t.Helper()
	p.await(t, "admin API at", time.Minute)
	return adminAt.FindStringSubmatch(p.out.String())[1]
}

// adminGet GETs path from a controller's admin API on loopback (no token).
func adminGet(t *testing.T, addr, path string) []byte {
	t.Helper()
	resp, err := http.Get("http://" + addr + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %s %v", path, resp.StatusCode, b, err)
	}
	return b
}

func getJSON(t *testing.T, addr, path string, v any) {
	t.Helper()
	if err := json.Unmarshal(adminGet(t, addr, path), v); err != nil {
		t.Fatal(err)
	}
}

// caughtUp polls the controller's GET /status until it leads and says the
// pipeline caught up.
func caughtUp(t *testing.T, addr string) {
	t.Helper()
	eventually(t, "caught up at "+addr, func() bool {
		var s struct {
			Active bool
			Lag    struct {
				CaughtUp bool `json:"caught_up"`
			}
		}
		getJSON(t, addr, "/status", &s)
		return s.Active && s.Lag.CaughtUp
	})
}

// readerInputs reads weir_inputs_total{computation="Reader"} of a
// controller's GET /metrics.
func readerInputs(t *testing.T, addr string) float64 {
	t.Helper()
	return metricValue(t, addr, `weir_inputs_total{computation="Reader"}`)
}

// metricValue reads the sample name (with its labels) of a controller's
// GET /metrics.
func metricValue(t *testing.T, addr, name string) float64 {
	t.Helper()
	v, ok := sample(t, adminGet(t, addr, "/metrics"), name)
	if !ok {
		t.Fatalf("no %s in %s's /metrics", name, addr)
	}
	return v
}

// sample finds the sample name (with its labels) in a Prometheus text
// exposition.
func sample(t *testing.T, metrics []byte, name string) (float64, bool) {
	t.Helper()
	for _, line := range strings.Split(string(metrics), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatal(err)
			}
			return f, true
		}
	}
	return 0, false
}

// storedReaderInputs sums Reader's inputs in the counters row the active
// controller stores (cluster/counters.go).
func storedReaderInputs(t *testing.T, st store.Store) float64 {
	t.Helper()
	v, ok, err := st.Get(context.Background(), store.FlowState, []byte("cluster/counters"))
	if err != nil || !ok {
		return 0
	}
	var row struct {
		Base    map[string]board.Counters
		Workers map[string]struct{ Counters map[string]board.Counters }
	}
	if err := json.Unmarshal(v, &row); err != nil {
		t.Fatal(err)
	}
	n := row.Base["Reader"].Inputs
	for _, w := range row.Workers {
		n += w.Counters["Reader"].Inputs
	}
	return float64(n)
}
