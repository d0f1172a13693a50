package disttest

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/weir-stream/weir/cluster"
	"github.com/weir-stream/weir/connector/queue"
	"github.com/weir-stream/weir/internal/testconn"
	"github.com/weir-stream/weir/internal/testhosts"
	"github.com/weir-stream/weir/store"
	"github.com/weir-stream/weir/store/open"
	"github.com/weir-stream/weir/store/postgres/pgtest"

	"github.com/weir-stream/weir/internal/testproc"
)

// Ports of the processes in the test hosts.
const (
	workerPort = 7000
	adminPort  = 7100
)

// distSpec is the counter example with an unbounded source (the pipeline
// runs until the test has checked it) and short timeouts, so that faults
// are detected within a second or two.
const distSpec = `
"computations" = {
    "Reader" = {
        "computation_class_name" = "SwiftPassthrough";
        "source_streams" = {
            "events" = {
                "source_class_name" = "QueueSource";
                "parameters" = {"queue_path" = "events"; "consumer_path" = "counter"};
            };
        };
        "output_stream_ids" = ["words"];
    };
    "Counter" = {
        "computation_class_name" = "Counter";
        "group_by" = ["key"];
        "input_stream_ids" = ["words"];
        "output_stream_ids" = ["counts"];
        "sinks" = {
            "out" = {
                "sink_class_name" = "SyncQueueSink";
                "input_stream_ids" = ["counts"];
                "parameters" = {"queue_path" = "counts"};
            };
        };
    };
};
"streams" = {"words" = {}; "counts" = {}};
"dynamic_spec" = {"lease_timeout" = "2s"; "lease_ping_period" = "400ms"; "lost_job_timeout" = "1500ms"; "scheduler_period" = "50ms"};
`

// jobsTotal is the number of jobs of distSpec with 4 event partitions:
// 4 Reader partitions and Counter's default 4.
const jobsTotal = 8

// hostCluster is a pipeline of weir processes on test hosts.
type hostCluster struct {
	t     *testing.T
	n     *testhosts.Network
	pg    *testhosts.Postgres
	url   string      // the store URL the processes use
	st    store.Store // through the server's Unix socket: works whatever the network does
	tls   tlsFiles
	spec  string
	c     *Counter
	procs map[string]*testhosts.Proc // by host
	http  *http.Client
	token string
	// bin is the weir binary the next processes start with.
	bin string
}

func newHostCluster(t *testing.T, workers ...string) *hostCluster {
	t.Helper()
	return newHostClusterBin(t, weirBin, workers...)
}

// newHostClusterBin is newHostCluster whose store is created, and whose
// processes start, with the weir binary bin (hc.bin: a rolling upgrade
// changes it).
func newHostClusterBin(t *testing.T, bin string, workers ...string) *hostCluster {
	t.Helper()
	pgtest.Require(t)
	hosts := append([]string{"pg", "ctl1", "ctl2"}, workers...)
	n := testhosts.New(t, hosts...)
	pg, err := n.Host("pg").StartPostgres()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if out, err := exec.Command(bin, "store", "init", "--store", pg.SocketURL()).CombinedOutput(); err != nil {
		t.Fatalf("%s store init: %v\n%s", bin, err, out)
	}
	st, err := open.Store(ctx, pg.SocketURL(), open.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	hc := &hostCluster{t: t, n: n, pg: pg, url: pg.URL(), st: st, tls: makeTLS(t), procs: map[string]*testhosts.Proc{}, bin: bin}
	hc.spec = filepath.Join(t.TempDir(), "spec.yson")
	if err := os.WriteFile(hc.spec, []byte(distSpec), 0o644); err != nil {
		t.Fatal(err)
	}
	if hc.c, err = NewCounter(ctx, st, 4, 2); err != nil {
		t.Fatal(err)
	}
	tok, _ := os.ReadFile(hc.tls.Token)
	hc.token = strings.TrimSpace(string(tok))
	ca, _ := os.ReadFile(hc.tls.CA)
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
	hc.http = &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{
		DialContext:     n.Dial,
		TLSClientConfig: &tls.Config{RootCAs: pool},
	}}
	t.Cleanup(func() {
		if t.Failed() || os.Getenv("WEIR_DIST_LOGS") == "1" {
			for h, p := range hc.procs {
				t.Logf("--- %s:\n%s", h, p.Tail())
			}
		}
	})
	return hc
}

func (hc *hostCluster) start(host, name string, args ...string) *testhosts.Proc {
	hc.t.Helper()
	p, err := hc.n.Host(host).Start(testhosts.Cmd{Name: name, Path: hc.bin, Args: append(args, hc.tls.flags()...)})
	if err != nil {
		hc.t.Fatal(err)
	}
	hc.procs[host] = p
	return p
}

func (hc *hostCluster) await(p *testhosts.Proc, s string) {
	hc.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := p.AwaitOutput(ctx, s); err != nil {
		hc.t.Fatal(err)
	}
}

// startWorker starts a worker process in host (named as the host).
func (hc *hostCluster) startWorker(host string) {
	hc.t.Helper()
	h := hc.n.Host(host)
	p := hc.start(host, "worker", "worker", "--store", hc.url, "--listen", h.Address(workerPort), "--id", host, "--lost-timeout", "1500ms", "-v")
	hc.await(p, "listening on")
}

// startController starts a controller process in host.
func (hc *hostCluster) startController(host string) {
	hc.t.Helper()
	h := hc.n.Host(host)
	p := hc.start(host, "controller", "controller", "--store", hc.url, "--spec", hc.spec, "--id", host,
		"--admin", h.Address(adminPort), "--lease-timeout", "2s", "-v")
	hc.await(p, "admin API at")
}

// leader returns the active controller's host name (from the leader row).
func (hc *hostCluster) leader() (cluster.LeaderRecord, bool) {
	rec, ok, err := cluster.ReadLeader(context.Background(), hc.st)
	if err != nil || !ok {
		return rec, false
	}
	return rec, true
}

// layout is what the active controller's admin API says.
type layout struct {
	Active   bool `json:"active"`
	Term     uint64
	Pipeline struct {
		Partitions []struct {
			Partition           string
			Job                 string
			Lease               uint64
			Worker              string
			ConsecutiveFailures int
		}
	}
	Workers []cluster.WorkerStatus
}

// status asks the active controller (nil if it cannot be reached).
func (hc *hostCluster) status() *layout {
	b, ok := hc.getLeader("/status")
	var l layout
	if !ok || json.Unmarshal(b, &l) != nil || !l.Active {
		return nil
	}
	return &l
}

// getLeader GETs path from the active controller's admin API (HTTPS, the
// token); ok is false without a leader, an answer or a 200.
func (hc *hostCluster) getLeader(path string) (body []byte, ok bool) {
	rec, ok := hc.leader()
	if !ok {
		return nil, false
	}
	req, _ := http.NewRequest(http.MethodGet, "https://"+rec.Admin+path, nil)
	req.Header.Set("Authorization", "Bearer "+hc.token)
	resp, err := hc.http.Do(req)
	if err != nil {
		return nil, false
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return b, err == nil && resp.StatusCode == http.StatusOK
}

// eventually polls cond until it holds; the limit is a hang guard for a
// broken build, not an assertion on time.
func (hc *hostCluster) eventually(what string, cond func() bool) time.Duration {
	hc.t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > 2*time.Minute {
			hc.t.Fatalf("never happened: %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
	return time.Since(start)
}

// healthy: every partition has a job on a live worker, as the active
// controller reports.
func (l *layout) healthy() bool {
	if l == nil || len(l.Pipeline.Partitions) != jobsTotal {
		return false
	}
	alive := map[string]bool{}
	for _, w := range l.Workers {
		alive[w.ID] = w.Alive
	}
	for _, p := range l.Pipeline.Partitions {
		if p.Job == "" || !alive[p.Worker] {
			return false
		}
	}
	return true
}

// spread returns the jobs per live worker, and the largest count.
func (l *layout) spread() (map[string]int, int) {
	per := map[string]int{}
	for _, w := range l.Workers {
		if w.Alive {
			per[w.ID] = 0
		}
	}
	most := 0
	for _, p := range l.Pipeline.Partitions {
		if _, ok := per[p.Worker]; ok && p.Job != "" {
			per[p.Worker]++
			most = max(most, per[p.Worker])
		}
	}
	return per, most
}

// partitionsOn lists the partitions whose job runs on worker w.
func (l *layout) partitionsOn(w string) []string {
	var out []string
	for _, p := range l.Pipeline.Partitions {
		if p.Worker == w && p.Job != "" {
			out = append(out, p.Partition)
		}
	}
	sort.Strings(out)
	return out
}

// txRow reads a partition's partition_transactions row: it changes with
// every epoch commit of the partition, a job's first one included.
func (hc *hostCluster) txRow(p string) string {
	v, _, err := hc.st.Get(context.Background(), store.PartitionTransactions, []byte(p))
	if err != nil {
		return "?"
	}
	return string(v)
}

// killWorkerHost SIGKILLs every process of a worker host and measures the
// time from the kill to the first commit of a replacement job of the
// partitions it ran (a change of their partition_transactions row more
// than 500ms after the kill: nothing can replace a job before
// lost_job_timeout, 1.5s, so an earlier change is the killed job's last
// commit landing), and to the last. It then starts the worker again.
func (hc *hostCluster) killWorkerHost(host string) (first, all time.Duration) {
	hc.t.Helper()
	var l *layout
	hc.eventually("a healthy layout before the kill", func() bool { l = hc.status(); return l.healthy() })
	parts := l.partitionsOn(host)
	before := map[string]string{}
	for _, p := range parts {
		before[p] = hc.txRow(p)
	}
	failures := map[string]int{}
	for _, p := range l.Pipeline.Partitions {
		failures[p.Partition] = p.ConsecutiveFailures
	}
	if err := hc.n.Host(host).Kill(); err != nil {
		hc.t.Fatal(err)
	}
	t0 := time.Now()
	changed := map[string]time.Duration{}
	hc.eventually(fmt.Sprintf("replacement commits of %v", parts), func() bool {
		for _, p := range parts {
			if _, ok := changed[p]; ok {
				continue
			}
			if v := hc.txRow(p); v != before[p] {
				if d := time.Since(t0); d < 500*time.Millisecond {
					before[p] = v // the killed job's last commit landing
				} else {
					changed[p] = d
				}
			}
		}
		return len(changed) == len(parts)
	})
	// A lost worker's jobs are not failures: they restart at once, never
	// with the restart backoff of a failing partition.
	if l := hc.status(); l != nil {
		for _, p := range l.Pipeline.Partitions {
			if _, lost := before[p.Partition]; lost && p.ConsecutiveFailures > failures[p.Partition] {
				hc.t.Errorf("partition %s of the lost worker %s counted as failing (%d in a row): it restarts with backoff", p.Partition, host, p.ConsecutiveFailures)
			}
		}
	}
	first, all = time.Hour, 0
	for _, d := range changed {
		first, all = min(first, d), max(all, d)
	}
	if len(parts) == 0 {
		first = 0
	}
	hc.t.Logf("worker host %s killed with %d jobs %v: first replacement commit after %v, all after %v", host, len(parts), parts, first.Round(time.Millisecond), all.Round(time.Millisecond))
	hc.startWorker(host)
	return first, all
}

// partitionWorkerHost cuts a worker host's link: its jobs must be replaced
// on the other workers while it is alive but cut off; then the link heals.
func (hc *hostCluster) partitionWorkerHost(host string) time.Duration {
	hc.t.Helper()
	hc.eventually("a healthy layout before the partition", func() bool { return hc.status().healthy() })
	if err := hc.n.Host(host).Partition(); err != nil {
		hc.t.Fatal(err)
	}
	d := hc.eventually(host+"'s jobs replaced while it is cut off", func() bool {
		l := hc.status()
		return l.healthy() && len(l.partitionsOn(host)) == 0
	})
	hc.t.Logf("worker host %s partitioned: its jobs replaced after %v", host, d.Round(time.Millisecond))
	if err := hc.n.Host(host).Heal(); err != nil {
		hc.t.Fatal(err)
	}
	hc.eventually(host+" alive again after the heal", func() bool {
		l := hc.status()
		if l == nil {
			return false
		}
		for _, w := range l.Workers {
			if w.ID == host {
				return w.Alive
			}
		}
		return false
	})
	return d
}

// killActiveController kills the active controller's host: a standby takes
// over (a larger term); a controller is started again in the host.
func (hc *hostCluster) killActiveController() time.Duration {
	hc.t.Helper()
	rec, ok := hc.leader()
	if !ok {
		hc.t.Fatal("no active controller")
	}
	if err := hc.n.Host(rec.ID).Kill(); err != nil {
		hc.t.Fatal(err)
	}
	d := hc.eventually("a standby takes over", func() bool {
		now, ok := hc.leader()
		return ok && now.Lease > rec.Lease && hc.status().healthy()
	})
	now, _ := hc.leader()
	hc.t.Logf("active controller %s killed: %s took over (term %d → %d); healthy after %v", rec.ID, now.ID, rec.Lease, now.Lease, d.Round(time.Millisecond))
	hc.startController(rec.ID)
	return d
}

// handOver stops the active controller with SIGTERM (it resigns) and waits
// for the standby to lead with every partition running; the new leader
// must have adopted every job its predecessor left running (issue 27, item
// 2): each partition keeps its job id and lease. It returns how long the
// pipeline took to be healthy again.
func (hc *hostCluster) handOver() time.Duration {
	hc.t.Helper()
	rec, ok := hc.leader()
	before := hc.status()
	if !ok || before == nil || !before.healthy() {
		hc.t.Fatal("no healthy active controller to hand over from")
	}
	jobs := map[string]string{}
	for _, p := range before.Pipeline.Partitions {
		jobs[p.Partition] = p.Job
	}
	hc.terminate(rec.ID)
	var after *layout
	d := hc.eventually("the standby takes over", func() bool {
		now, ok := hc.leader()
		after = hc.status()
		return ok && now.Lease > rec.Lease && after.healthy()
	})
	now, _ := hc.leader()
	kept := 0
	for _, p := range after.Pipeline.Partitions {
		if jobs[p.Partition] == p.Job {
			kept++
		}
	}
	hc.t.Logf("active controller %s stopped (SIGTERM): %s took over (term %d → %d), kept %d of %d jobs; healthy after %v",
		rec.ID, now.ID, rec.Lease, now.Lease, kept, len(jobs), d.Round(time.Millisecond))
	// A job of the old term may have failed meanwhile on its own (the
	// chaos before): every other one must be kept.
	if kept == 0 {
		hc.t.Errorf("the new leader adopted none of the %d jobs running at the handover", len(jobs))
	}
	hc.startController(rec.ID)
	return d
}

// reconnect replaces the test's store after a PostgreSQL restart (its
// pooled connections are gone).
func (hc *hostCluster) reconnect() {
	hc.t.Helper()
	hc.reconnectTo(hc.pg.SocketURL())
}

// reconnectTo replaces the test's store with one at url.
func (hc *hostCluster) reconnectTo(url string) {
	hc.t.Helper()
	st, err := open.Store(context.Background(), url, open.Options{})
	if err != nil {
		hc.t.Fatal(err)
	}
	old := hc.st
	hc.st = st
	ctx := context.Background()
	if hc.c.Events, err = queue.Open(ctx, st, "events"); err != nil {
		hc.t.Fatal(err)
	}
	if hc.c.Counts, err = queue.Open(ctx, st, "counts"); err != nil {
		hc.t.Fatal(err)
	}
	old.Close()
	hc.t.Cleanup(func() { st.Close() })
}

// TestMultiHostChaos: one PostgreSQL host, three worker hosts and two
// controllers (one active, one standby), all over TLS with a shared token,
// run the counter pipeline while the test, at seeded random moments,
// SIGKILLs every process of a worker host, partitions a worker host's
// link, kills the active controller's host, stops the active controller
// with SIGTERM (a handover: the standby must adopt the running jobs),
// restarts PostgreSQL and adds a fourth worker. Properties: a killed host's partitions get replacement
// commits; a partitioned host's jobs are replaced while it is cut off (its
// commits fenced by the aborted leases); a standby takes over; after the
// join no live worker holds more than ⌈8/4⌉ jobs and the new one holds
// some; and each key's counts are 1..n exactly once, read from the sink
// queue. Times are logged as figures, never asserted.
func TestMultiHostChaos(t *testing.T) {
	testproc.SkipUnlessLong(t)
	hc := newHostCluster(t, "w1", "w2", "w3")
	seed := uint64(time.Now().UnixNano())
	if v := os.Getenv("WEIR_SEED"); v != "" {
		fmt.Sscan(v, &seed)
	}
	t.Logf("seed %d (replay: WEIR_SEED=%d)", seed, seed)
	r := rand.New(rand.NewPCG(seed, 7))
	for _, w := range []string{"w1", "w2", "w3"} {
		hc.startWorker(w)
	}
	hc.startController("ctl1")
	hc.startController("ctl2")

	// A writer adds events in waves while the faults happen.
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var werr error
	var mu sync.Mutex
	wg.Add(1)
	go func() {
		defer wg.Done()
		wr := rand.New(rand.NewPCG(seed, 8))
		for ctx.Err() == nil {
			mu.Lock()
			err := hc.c.Write(context.Background(), wr, 200, 40, 100)
			mu.Unlock()
			if err != nil {
				werr = err
				return
			}
			select {
			case <-ctx.Done():
			case <-time.After(time.Duration(50+wr.IntN(200)) * time.Millisecond):
			}
		}
	}()

	faults := []string{"kill-worker", "kill-worker", "partition", "kill-controller", "hand-over", "restart-postgres", "add-worker"}
	r.Shuffle(len(faults), func(i, j int) { faults[i], faults[j] = faults[j], faults[i] })
	workers := []string{"w1", "w2", "w3"}
	for _, f := range faults {
		time.Sleep(time.Duration(200+r.IntN(1500)) * time.Millisecond) // a random moment
		switch f {
		case "kill-worker":
			first, _ := hc.killWorkerHost(workers[r.IntN(len(workers))])
			_ = first
		case "partition":
			hc.partitionWorkerHost(workers[r.IntN(len(workers))])
		case "kill-controller":
			hc.killActiveController()
		case "hand-over":
			hc.eventually("healthy before the handover", func() bool { return hc.status().healthy() })
			hc.handOver()
		case "restart-postgres":
			// The test's own writes pause meanwhile: an event write whose
			// outcome is unknown would make the oracle's expectation unknown.
			mu.Lock()
			err := hc.pg.Restart()
			hc.reconnect()
			mu.Unlock()
			if err != nil {
				t.Fatal(err)
			}
			d := hc.eventually("healthy after the PostgreSQL restart", func() bool { return hc.status().healthy() })
			t.Logf("PostgreSQL restarted: healthy after %v", d.Round(time.Millisecond))
		case "add-worker":
			if _, err := hc.n.AddHost("w4"); err != nil {
				t.Fatal(err)
			}
			hc.startWorker("w4")
			workers = append(workers, "w4")
			var per map[string]int
			d := hc.eventually("partitions spread to the new worker", func() bool {
				l := hc.status()
				if !l.healthy() {
					return false
				}
				var most int
				per, most = l.spread()
				return len(per) == 4 && per["w4"] > 0 && most <= (jobsTotal+3)/4
			})
			t.Logf("a fourth worker joined: spread %v after %v", per, d.Round(time.Millisecond))
		}
	}
	cancel()
	wg.Wait()
	if werr != nil {
		t.Fatal(werr)
	}
	hc.countedExactlyOnce()
}

// countedExactlyOnce waits until every event written is counted and checks
// each key's counts are 1..n, once each.
func (hc *hostCluster) countedExactlyOnce() {
	hc.t.Helper()
	want := hc.c.Total()
	var got map[string][]int64
	hc.eventually(fmt.Sprintf("all %d events counted", want), func() bool {
		var total int
		var err error
		got, total, err = hc.c.Read(context.Background())
		return err == nil && total >= want
	})
	if bad := testconn.ExactlyOnce(got, hc.c.Want); len(bad) > 0 {
		hc.t.Fatalf("exactly-once violated (%d keys): %v", len(bad), bad)
	}
	hc.t.Logf("%d events over %d keys counted exactly once", want, len(hc.c.Want))
}

// terminate sends SIGTERM to host's process and waits for it to exit (a
// worker drains first; a hang guard of two minutes, not an assertion).
func (hc *hostCluster) terminate(host string) {
	hc.t.Helper()
	p := hc.procs[host]
	if err := p.Signal(syscall.SIGTERM); err != nil {
		hc.t.Fatal(err)
	}
	select {
	case <-p.Done():
	case <-time.After(2 * time.Minute):
		hc.t.Fatalf("%s did not exit after SIGTERM:\n%s", host, p.Tail())
	}
}

// writeSteadily writes events to the counter — 100 at a time, every 20 ms
// plus up to jitterMS more — until the returned function is called, which
// fails the test if a write failed.
func (hc *hostCluster) writeSteadily(seed uint64, jitterMS int) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var werr error
	wg.Go(func() {
		r := rand.New(rand.NewPCG(27, seed))
		for ctx.Err() == nil {
			if err := hc.c.Write(context.Background(), r, 100, 40, 50); err != nil {
				werr = err
				return
			}
			select {
			case <-ctx.Done():
			case <-time.After(time.Duration(20+r.IntN(jitterMS)) * time.Millisecond):
			}
		}
	})
	return func() {
		hc.t.Helper()
		cancel()
		wg.Wait()
		if werr != nil {
			hc.t.Fatal(werr)
		}
	}
}

// progress waits until the counts grow (after what).
func (hc *hostCluster) progress(what string) {
	hc.t.Helper()
	_, before, err := hc.c.Read(context.Background())
	if err != nil {
		hc.t.Fatal(err)
	}
	hc.eventually("counts grow after "+what, func() bool {
		_, n, err := hc.c.Read(context.Background())
		return err == nil && n > before
	})
}
