package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/weir-stream/weir/connector/queue"
	"github.com/weir-stream/weir/controller"
	"github.com/weir-stream/weir/engine"
	"github.com/weir-stream/weir/spec"
	"github.com/weir-stream/weir/store"
	"github.com/weir-stream/weir/store/open"
	pstore "github.com/weir-stream/weir/store/pebble"
)

func runRun(o *Options, args []string) error {
	fs := newFlags(o, "run", "--data DIR --spec FILE",
		"Runs the pipeline of FILE (YSON or YAML) on DIR's embedded store until it\n"+
			"completes (all sources finite and processed) or is stopped. A completed\n"+
			"run is final; running the command again starts a new run that processes\n"+
			"what arrived since, each row exactly once across runs (a changed spec is\n"+
			"accepted then too).\n\n"+
			"SIGTERM or SIGINT drains and stops cleanly; if the drain takes longer\n"+
			"than --drain-timeout (a job that keeps failing never drains), it stops\n"+
			"hard: every job stops, the pipeline is paused, nothing is lost and the\n"+
			"next run resumes exactly once. A second signal stops at once. After a\n"+
			"SIGKILL, the same command resumes with nothing lost or duplicated.\n\n"+
			"While it runs, a loopback admin API serves /status and /metrics, and\n"+
			"'weir pipeline', 'weir queue' and 'weir table' commands work through it.\n"+
			"Failures (a job failing in user code or a sink, a source that cannot be\n"+
			"reached) are written to stderr: the first at once, repeats summarized\n"+
			"every 10s.\n\n"+
			"Exit codes: 0 completed or stopped (drained); 1 error; 2 usage;\n"+
			"3 the drain timed out and the pipeline was stopped hard (paused).")
	dir := fs.String("data", "", "data directory (required unless --store; created if missing)")
	storeAddr := fs.String("store", "", "run on this store instead of DIR's embedded one: a postgres:// URL (one process on PostgreSQL; --data then only holds the admin API's files, a temporary directory if omitted)")
	specPath := fs.String("spec", "", "pipeline spec file, .yson or .yaml (required)")
	admin := fs.String("admin", "127.0.0.1:0", "admin API listen address (loopback)")
	progress := fs.Duration("progress", 2*time.Second, "progress line period on stderr (0: off)")
	verbose := fs.Bool("v", false, "log job restarts and controller events")
	memtable := fs.Int("memtable-mib", int(pstore.DefaultMemTableSize>>20), "the embedded store's memtable size in MiB (1 to 1024): resident memory as it fills; larger ones cost less CPU when many rows live briefly (an AsyncQueueSink's outbox) — docs/operations.md")
	drainTimeout := fs.Duration("drain-timeout", defaultDrainTimeout, "on SIGTERM/SIGINT, how long to drain before stopping hard (exit code 3; 0: no limit)")
	if err := parseNoArgs(fs, args); err != nil {
		return err
	}
	if (*dir == "" && *storeAddr == "") || *specPath == "" {
		return usageErr(fs, "need --data DIR (or --store URL) and --spec FILE")
	}
	if *memtable < 1 || *memtable > 1024 {
		return usageErr(fs, "--memtable-mib %d: want 1 to 1024 (MiB)", *memtable)
	}
	if *progress < 0 || *drainTimeout < 0 {
		return usageErr(fs, "--progress %s, --drain-timeout %s: durations must not be negative (0: off / no limit)", *progress, *drainTimeout)
	}
	if *dir != "" {
		if err := checkDataDir(*dir); err != nil {
			return err
		}
	}
	if *storeAddr != "" {
		if err := checkStoreURL(*storeAddr, "for an embedded store pass --data DIR"); err != nil {
			return err
		}
	}
	// Signals are caught from here on: one that comes while the store
	// opens and the pipeline starts is a drain once it runs, not an exit.
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	defer signal.Stop(sigs)
	b, err := os.ReadFile(*specPath)
	if err != nil {
		return fmt.Errorf("read spec: %w", err)
	}
	p, err := spec.Parse(b, *specPath)
	if err != nil {
		return err // names the file
	}
	logger := log.New(o.Stderr, "weir: ", log.LstdFlags|log.Lmicroseconds)
	if *storeAddr != "" && *dir == "" {
		tmp, err := os.MkdirTemp("", "weir-run-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(tmp)
		*dir = tmp
	}
	rc := runConfig{dir: *dir, specPath: *specPath, spec: p, admin: *admin, progress: *progress, verbose: *verbose, drainTimeout: *drainTimeout}
	// A full disk under DIR's store pauses the run (diskfull.go): the store
	// is closed, and opened again once there is space.
	var paused *spaceWait
	for {
		var st store.Store
		if *storeAddr != "" {
			st, err = open.Store(context.Background(), *storeAddr, open.Options{})
		} else {
			st, err = openStoreOpts(*dir, false, pstore.Options{MemTableSize: uint64(*memtable) << 20})
		}
		if err == nil {
			if paused != nil {
				paused.resumed()
				paused = nil
			}
			err = runOnce(o, rc, st, logger, sigs)
		}
		var ns *pstore.NoSpaceError
		if *storeAddr != "" || !errors.As(err, &ns) {
			return err
		}
		if paused == nil {
			paused = pauseForSpace(logger.Printf, ns)
		}
		if !paused.wait(sigs) {
			return nil
		}
	}
}

// runConfig is what one runOnce of 'weir run' needs besides the store.
type runConfig struct {
	dir, specPath, admin string
	spec                 *spec.Pipeline
	progress             time.Duration
	verbose              bool
	drainTimeout         time.Duration
}

// runOnce runs the pipeline on st until it completes, stops, or fails, and
// closes st.
func runOnce(o *Options, c runConfig, st store.Store, logger *log.Logger, sigs <-chan os.Signal) error {
	defer st.Close()
	logf := func(string, ...any) {}
	if c.verbose {
		logf = logger.Printf
	}
	r, err := startRunner(context.Background(), o, c.dir, c.spec, st, c.admin, logf, logger.Printf)
	if err != nil {
		return err
	}
	defer r.close()
	logger.Printf("running %s on %s; admin API at http://%s (web console: weir pipeline console --data %s)", c.specPath, c.dir, r.addr, c.dir)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sh := &signalHandler{r: r, logf: logger.Printf, drainTimeout: c.drainTimeout, cancel: cancel}
	go sh.run(ctx, sigs)
	if c.progress > 0 {
		go r.progressLoop(ctx, o.Stderr, c.progress)
	}
	var fatal fatalStop
	go fatal.watch(ctx, o.fatal, cancel)
	state, err := r.eng.Run(ctx)
	s := r.eng.Status()
	var ns *pstore.NoSpaceError
	if errors.As(err, &ns) && !sh.halted.Load() {
		return err // paused by the caller, which says why
	}
	logger.Printf("pipeline %s after %.1fs: %s", state, s.Uptime, summarize(s))
	if err := fatal.result(nil); err != nil {
		return err
	}
	if err != nil && !errors.Is(err, context.Canceled) {
		return explainDamage(c.dir, err)
	}
	if sh.halted.Load() && state != controller.Completed && state != controller.Stopped {
		return sh.drainTimedOut(state)
	}
	if state != controller.Completed && state != controller.Stopped {
		return fmt.Errorf("pipeline ended in state %s", state)
	}
	return nil
}

// runner is a running pipeline with its admin API.
type runner struct {
	dir  string
	st   store.Store
	spec *spec.Pipeline
	eng  *engine.Engine
	addr string
	// instance identifies this run in DIR/admin.addr (see adminauth.go).
	instance string
	console  *console // the web console's sampler (console.go)
	srv      *http.Server
	mu       sync.Mutex
	last     map[string]uint64
	lastT    time.Time
}

// startRunner builds the engine and serves its admin API; logf gets the
// verbose log, warnf what the operator must always see.
func startRunner(ctx context.Context, o *Options, dir string, p *spec.Pipeline, st store.Store, admin string, logf, warnf func(string, ...any)) (*runner, error) {
	queue.OpenStore = func(other string) (store.Store, error) {
		return pstore.Open(filepath.Join(other, storeSubdir), pstore.Options{})
	}
	eng, err := engine.New(ctx, engine.Config{Spec: p, Store: st, Classes: o.Classes, Connectors: o.Connectors, Logf: logf, Warnf: warnf})
	if err != nil {
		return nil, err
	}
	r := &runner{dir: dir, st: st, spec: p, eng: eng, instance: newInstanceID()}
	ln, err := net.Listen("tcp", admin)
	if err != nil {
		return nil, fmt.Errorf("admin API: %w", err)
	}
	if ip := ln.Addr().(*net.TCPAddr).IP; !ip.IsLoopback() {
		ln.Close()
		return nil, fmt.Errorf("admin API address %s is not loopback; the admin API has no authentication", admin)
	}
	r.addr = ln.Addr().String()
	h, err := r.guarded(r.handler())
	if err != nil {
		ln.Close()
		return nil, err
	}
	r.srv = &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go r.srv.Serve(ln)
	if err := writeAdminAddr(dir, r.addr, r.instance); err != nil {
		return nil, err
	}
	return r, nil
}

func (r *runner) close() {
	if r.console != nil {
		r.console.stop()
	}
	os.Remove(filepath.Join(r.dir, adminAddrFile))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	r.srv.Shutdown(ctx)
	queue.CloseSharedStores()
}

func (r *runner) handler() http.Handler {
	mux := http.NewServeMux()
	reg := prometheus.NewRegistry()
	reg.MustRegister(r.eng.Collector())
	mux.Handle("GET /metrics", promhttp.HandlerFor(prometheus.Gatherers{reg, prometheus.DefaultGatherer}, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /status", func(w http.ResponseWriter, req *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		enc.Encode(struct {
			engine.Status
			Rescales rescalesJSON `json:"rescales"`
		}{r.eng.Status(), rescalesOf(r.eng.Controller())})
	})
	mux.HandleFunc("POST /pipeline/skip", func(w http.ResponseWriter, req *http.Request) {
		var sk skipRequest
		if err := json.NewDecoder(http.MaxBytesReader(w, req.Body, 64<<10)).Decode(&sk); err != nil {
			http.Error(w, "skip: a JSON body {computation, message | source_partition + offset, reason}: "+err.Error(), http.StatusBadRequest)
			return
		}
		c, ok := r.eng.Plan().Computations[sk.Computation]
		switch {
		case !ok:
			http.Error(w, fmt.Sprintf("skip: the pipeline has no computation %s", echo(sk.Computation)), http.StatusNotFound)
			return
		case sk.SourcePartition != "" && !c.IsSource():
			http.Error(w, fmt.Sprintf("skip: computation %s reads no source; name its message with --message ID", sk.Computation), http.StatusBadRequest)
			return
		}
		if err := sk.record(req.Context(), r.st, w); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
		}
	})
	mux.HandleFunc("POST /pipeline/rescale", func(w http.ResponseWriter, req *http.Request) {
		serveRescale(w, req, r.eng)
	})
	mux.HandleFunc("POST /pipeline/{action}", func(w http.ResponseWriter, req *http.Request) {
		target := map[string]controller.State{"stop": controller.Stopped, "pause": controller.Paused, "start": controller.Working}[req.PathValue("action")]
		if target == "" {
			http.Error(w, "unknown action "+req.PathValue("action")+" (want stop, pause, start, skip or rescale)", http.StatusNotFound)
			return
		}
		if err := r.eng.Controller().SetTarget(target); err != nil {
			http.Error(w, err.Error(), http.StatusConflict)
			return
		}
		fmt.Fprintf(w, "target state %s (current %s)\n", target, r.eng.Controller().State())
	})
	mux.HandleFunc("GET /queues", func(w http.ResponseWriter, req *http.Request) {
		if err := listQueues(req.Context(), r.st, w); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
		}
	})
	mux.HandleFunc("POST /queues/{name}", func(w http.ResponseWriter, req *http.Request) {
		n, err := strconv.Atoi(req.URL.Query().Get("partitions"))
		if err != nil {
			http.Error(w, "partitions: "+err.Error(), http.StatusBadRequest)
			return
		}
		if _, err := queue.Create(req.Context(), r.st, req.PathValue("name"), n); err != nil {
			http.Error(w, err.Error(), http.StatusConflict)
		}
	})
	mux.HandleFunc("POST /queues/{name}/rows", func(w http.ResponseWriter, req *http.Request) {
		q, err := queue.Open(req.Context(), r.st, req.PathValue("name"))
		if err != nil {
			http.Error(w, err.Error(), http.StatusNotFound)
			return
		}
		part := -1
		if v := req.URL.Query().Get("partition"); v != "" {
			if part, err = strconv.Atoi(v); err != nil {
				http.Error(w, fmt.Sprintf("partition %q is not a number", v), http.StatusBadRequest)
				return
			}
		}
		first := 1
		if v := req.URL.Query().Get("first_line"); v != "" {
			if first, err = strconv.Atoi(v); err != nil || first < 1 {
				http.Error(w, fmt.Sprintf("first_line %q is not a line number", v), http.StatusBadRequest)
				return
			}
		}
		n, err := writeRows(req.Context(), q, req.Body, part, first)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		json.NewEncoder(w).Encode(map[string]int{"Written": n})
	})
	mux.HandleFunc("GET /queues/{name}/rows", func(w http.ResponseWriter, req *http.Request) {
		q, err := queue.Open(req.Context(), r.st, req.PathValue("name"))
		if err != nil {
			http.Error(w, err.Error(), http.StatusNotFound)
			return
		}
		v := req.URL.Query()
		part, err1 := strconv.Atoi(v.Get("partition"))
		off, err2 := strconv.ParseUint(v.Get("offset"), 10, 64)
		limit, err3 := strconv.Atoi(v.Get("limit"))
		if err := errors.Join(err1, err2, err3); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		var buf bytes.Buffer
		if _, err := readRows(req.Context(), q, &buf, part, off, limit); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		// The store makes a commit visible before its fsync returns. A
		// synced write after the read covers every row read (they are
		// earlier in the log), so nothing this reader returns can vanish in
		// a power loss.
		if err := durableBarrier(req.Context(), r.st); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Write(buf.Bytes())
	})
	mux.HandleFunc("GET /tables", func(w http.ResponseWriter, req *http.Request) {
		if err := listTables(req.Context(), r.st, w); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
		}
	})
	mux.HandleFunc("GET /tables/{name}/rows", func(w http.ResponseWriter, req *http.Request) {
		v := req.URL.Query()
		limit := 0
		if s := v.Get("limit"); s != "" {
			var err error
			if limit, err = strconv.Atoi(s); err != nil {
				http.Error(w, "limit: "+err.Error(), http.StatusBadRequest)
				return
			}
		}
		var buf bytes.Buffer
		if err := readTable(req.Context(), r.st, &buf, req.PathValue("name"), v.Get("from"), v.Get("to"), limit); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		// As for queue reads: nothing returned may vanish in a power loss.
		if err := durableBarrier(req.Context(), r.st); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Write(buf.Bytes())
	})
	return mux
}

// durableBarrier commits a small synced write: when it returns, every
// commit that was visible before it is durable.
func durableBarrier(ctx context.Context, st store.Store) error {
	txn := store.NewTxn()
	txn.Put(store.FlowState, []byte("read_barrier"), []byte{1})
	return st.Commit(ctx, txn)
}

// progressLoop prints one progress line per period: state, inputs/s per
// computation, and the lag of queue sources.
func (r *runner) progressLoop(ctx context.Context, w io.Writer, period time.Duration) {
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		fmt.Fprintln(w, r.progressLine(ctx))
	}
}

func (r *runner) progressLine(ctx context.Context) string {
	s := r.eng.Status()
	now := time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	line := fmt.Sprintf("[%6.1fs] %s", s.Uptime, s.State)
	for _, name := range sortedNames(s.Computations) {
		c := s.Computations[name]
		rate := ""
		if r.last != nil {
			d := now.Sub(r.lastT).Seconds()
			rate = fmt.Sprintf(" (%.0f/s)", float64(c.Inputs-r.last[name])/d)
		}
		line += fmt.Sprintf("  %s: %d in%s", name, c.Inputs, rate)
	}
	if r.last == nil {
		r.last = map[string]uint64{}
	}
	for name, c := range s.Computations {
		r.last[name] = c.Inputs
	}
	r.lastT = now
	if lag, ok := queueLag(ctx, r.st, r.spec); ok {
		line += fmt.Sprintf("  lag: %d", lag)
	}
	return line + failingNote(s)
}

// failingNote names the sources that cannot be listed and the partitions
// whose jobs keep failing, with the first one's last error ("" if none).
func failingNote(s engine.Status) string {
	if len(s.SourceErrors) > 0 {
		f := s.SourceErrors[0]
		note := fmt.Sprintf("  FAILING: the source of %s cannot be listed (%d× in a row: %s)", f.Computation, f.ConsecutiveFailures, cut(f.LastError, 120))
		if n := len(s.SourceErrors) - 1 + len(s.Failing); n > 0 {
			note += fmt.Sprintf(" and %d more; see 'weir pipeline status'", n)
		}
		return note
	}
	if len(s.Failing) == 0 {
		return ""
	}
	f := s.Failing[0]
	note := fmt.Sprintf("  FAILING: %s (%d× in a row: %s)", f.Partition, f.ConsecutiveFailures, cut(f.LastError, 120))
	if n := len(s.Failing) - 1; n > 0 {
		note += fmt.Sprintf(" and %d more partition(s); see 'weir pipeline status'", n)
	}
	return note
}

// cut returns s's first line, at most n bytes ("..." marks a cut).
func cut(s string, n int) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i] + " ..."
	}
	if len(s) > n {
		s = strings.ToValidUTF8(s[:n-3], "") + "..."
	}
	return s
}

// queueLag sums, over the spec's QueueSources, the rows not yet committed
// by their consumers (sourceLags, console.go).
func queueLag(ctx context.Context, st store.Store, p *spec.Pipeline) (int64, bool) {
	var lag int64
	lags := sourceLags(ctx, st, p)
	for _, l := range lags {
		lag += l
	}
	return lag, len(lags) > 0
}

func summarize(s engine.Status) string {
	out := ""
	for _, name := range sortedNames(s.Computations) {
		c := s.Computations[name]
		out += fmt.Sprintf("%s %d in, %d out", name, c.Inputs, c.Outputs)
		if c.Duplicates > 0 {
			// Redeliveries after a restart are expected and harmless: the
			// dedup table recognised them. Say so rather than alarm.
			out += fmt.Sprintf(" (%d redelivered after a restart, recognised and skipped)", c.Duplicates)
		}
		if c.SinkDropped > 0 {
			// At-most-once sinks may give outputs up (queue full, a failed
			// write, stopped with a queue): a loss the run must not hide.
			out += fmt.Sprintf(", %d DROPPED by at-most-once sinks (see the WARNING lines)", c.SinkDropped)
		}
		if c.DeadLettered > 0 {
			out += fmt.Sprintf(", %d failed and DEAD-LETTERED (read its dead_letter_stream)", c.DeadLettered)
		}
		out += "; "
	}
	if out == "" {
		out = "no new input; "
	}
	return out + fmt.Sprintf("%d jobs started, %d failed, %d lost", s.Controller.JobsStarted, s.Controller.JobsFailed, s.Controller.JobsLost) + failingNote(s)
}
