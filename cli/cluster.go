package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log"
	"mime"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime/pprof"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"google.golang.org/grpc"

	"github.com/weir-stream/weir/cluster"
	"github.com/weir-stream/weir/controller"
	"github.com/weir-stream/weir/engine"
	"github.com/weir-stream/weir/spec"
	"github.com/weir-stream/weir/store"
	"github.com/weir-stream/weir/store/open"
	"github.com/weir-stream/weir/wire"
)

// securityFlags are the flags every distributed-mode process shares.
type securityFlags struct {
	tokenFile, cert, key, ca, serverName *string
	clientCerts, insecureToken           *bool
}

func addSecurityFlags(fs *flag.FlagSet) *securityFlags {
	return &securityFlags{
		tokenFile:     fs.String("token-file", "", "file holding the shared cluster token (mode 0600; else $"+wire.TokenEnv+"); required beyond loopback"),
		cert:          fs.String("tls-cert", "", "TLS certificate (PEM) this process presents"),
		key:           fs.String("tls-key", "", "TLS private key (PEM) of --tls-cert"),
		ca:            fs.String("tls-ca", "", "CA certificate (PEM) that signed the peers' certificates; enables TLS for outgoing calls"),
		serverName:    fs.String("tls-server-name", "", "name to verify in the peers' certificates (default: the host dialed)"),
		clientCerts:   fs.Bool("tls-client-certs", false, "require client certificates signed by --tls-ca"),
		insecureToken: fs.Bool("allow-token-without-tls", false, "allow the token to travel without TLS beyond loopback (a private network you trust)"),
	}
}

// security loads the token and checks the combination for a process
// listening on addrs.
func (f *securityFlags) security(addrs ...string) (wire.Security, error) {
	tok, err := wire.LoadToken(*f.tokenFile)
	if err != nil {
		return wire.Security{}, err
	}
	s := wire.Security{Token: tok, CertFile: *f.cert, KeyFile: *f.key, CAFile: *f.ca, ServerName: *f.serverName, ClientCerts: *f.clientCerts}
	if (s.CertFile == "") != (s.KeyFile == "") {
		return s, errors.New("--tls-cert and --tls-key go together")
	}
	for _, a := range addrs {
		if err := s.CheckListen(a); err != nil {
			return s, err
		}
		if !wire.IsLoopback(a) && !s.TLS() && !*f.insecureToken {
			return s, fmt.Errorf("%s listens beyond loopback without TLS: pass --tls-cert/--tls-key/--tls-ca (or --allow-token-without-tls on a network you trust)", a)
		}
	}
	return s, nil
}

func (s *securityFlags) dial(sec wire.Security) func(string) (grpc.ClientConnInterface, error) {
	return func(addr string) (grpc.ClientConnInterface, error) {
		c, err := sec.Dial(addr)
		if err != nil {
			return nil, err
		}
		return c, nil
	}
}

// clusterProcess sets up what both distributed-mode processes need: their
// logger (logf logs only with -v) and the PostgreSQL store.
func clusterProcess(o *Options, name string, verbose bool, addr string) (*log.Logger, func(string, ...any), store.Store, error) {
	logger := log.New(o.Stderr, "weir "+name+": ", log.LstdFlags|log.Lmicroseconds)
	logf := func(string, ...any) {}
	if verbose {
		logf = logger.Printf
	}
	if open.BackendOf(addr) != open.Postgres {
		return nil, nil, nil, fmt.Errorf("--store: the distributed mode needs a postgres:// URL (an embedded store is one process's)")
	}
	st, err := open.Store(context.Background(), addr, open.Options{})
	return logger, logf, st, err
}

func runWorker(o *Options, args []string) error {
	fs := newFlags(o, "worker", "--store postgres://… --listen ADDR",
		"Runs a worker of the distributed mode: it registers in the store and runs\n"+
			"the jobs the active controller assigns to it, talking to the other workers\n"+
			"on --listen. SIGTERM drains it: the controller moves its jobs to other\n"+
			"workers (each after its epoch in flight), then it exits; a second signal\n"+
			"stops it at once (its jobs are replaced, nothing is lost).")
	storeAddr := fs.String("store", "", "PostgreSQL store URL (required)")
	listen := fs.String("listen", "", "transport and control listen address host:port (required)")
	advertise := fs.String("advertise", "", "address other processes reach this worker at (default: --listen)")
	id := fs.String("id", "", "worker name (default: the advertised address)")
	drainTimeout := fs.Duration("drain-timeout", time.Minute, "on SIGTERM, how long to wait for the jobs to move away")
	lost := fs.Duration("lost-timeout", 3*time.Second, "without a controller heartbeat for this long and the pipeline's lease_timeout, stop the jobs (they are replaced, or a new leader adopts them before that)")
	verbose := fs.Bool("v", false, "log job and transport events")
	cpuprofile := fs.String("cpuprofile", "", "write a CPU profile of the worker's whole life to this file")
	sf := addSecurityFlags(fs)
	if err := parseNoArgs(fs, args); err != nil {
		return err
	}
	if *storeAddr == "" || *listen == "" {
		return usageErr(fs, "need --store URL and --listen ADDR")
	}
	if *drainTimeout < 0 || *lost <= 0 {
		return usageErr(fs, "--drain-timeout %s must not be negative and --lost-timeout %s must be positive", *drainTimeout, *lost)
	}
	sec, err := sf.security(*listen)
	if err != nil {
		return err
	}
	logger, logf, st, err := clusterProcess(o, "worker", *verbose, *storeAddr)
	if err != nil {
		return err
	}
	defer st.Close()
	stopCPU, err := startCPUProfile(*cpuprofile)
	if err != nil {
		return err
	}
	defer stopCPU()
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	addr := *advertise
	if addr == "" {
		addr = ln.Addr().String()
	}
	opts, err := sec.ServerOptions()
	if err != nil {
		ln.Close()
		return err
	}
	srv := grpc.NewServer(opts...)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w, err := cluster.NewWorker(ctx, cluster.WorkerConfig{ID: *id, Addr: addr, Store: st, Classes: o.Classes, Connectors: o.Connectors,
		Dial: sf.dial(sec), LostTimeout: *lost, Release: release(), Logf: logf})
	if err != nil {
		ln.Close()
		return err
	}
	w.Register(srv)
	go srv.Serve(ln)
	defer srv.Stop()
	// The readiness line goes to stdout (scripts and tests wait for it).
	fmt.Fprintf(o.Stdout, "worker %s (incarnation %d) listening on %s\n", orDefault(*id, addr), w.Incarnation(), ln.Addr())
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	defer signal.Stop(sigs)
	go func() {
		<-sigs
		logger.Printf("draining: waiting for the controller to move %d jobs away", w.Jobs())
		w.Drain()
		deadline := time.After(*drainTimeout)
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for !w.Drained() {
			select {
			case <-sigs:
				logger.Printf("second signal: stopping now")
				cancel()
				return
			case <-deadline:
				logger.Printf("drain timed out with %d jobs; stopping them (they are replaced)", w.Jobs())
				cancel()
				return
			case <-t.C:
			}
		}
		logger.Printf("drained")
		cancel()
	}()
	return w.Run(ctx)
}

// startCPUProfile starts a CPU profile written to path ("" : none) and
// returns what stops it.
func startCPUProfile(path string) (stop func(), err error) {
	if path == "" {
		return func() {}, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}

func orDefault(s, d string) string {
	if s != "" {
		return s
	}
	return d
}

func runController(o *Options, args []string) error {
	fs := newFlags(o, "controller", "--store postgres://… --spec FILE",
		"Runs a controller of the distributed mode. Several may run: one is active\n"+
			"(elected by a lease in the store), the others stand by and take over within\n"+
			"--lease-timeout of its loss. The active one runs FILE's pipeline on the\n"+
			"registered workers ('weir worker'), replaces the jobs of lost workers and\n"+
			"balances partitions when workers join or leave. Its admin API serves\n"+
			"GET /status (lag included), GET /metrics (Prometheus), POST /drain?worker=ID,\n"+
			"POST /pipeline/rescale ({\"computation\": NAME, \"partitions\": N}: change a\n"+
			"keyed computation's partition count live, exactly once) and the web console\n"+
			"(GET /). Exits 0 once the pipeline completed or stopped.")
	storeAddr := fs.String("store", "", "PostgreSQL store URL (required)")
	specPath := fs.String("spec", "", "pipeline spec file (required)")
	id := fs.String("id", "", "controller name (default: host name and PID)")
	admin := fs.String("admin", "127.0.0.1:0", "admin API listen address")
	leaseTimeout := fs.Duration("lease-timeout", 5*time.Second, "leadership lease timeout (a standby takes over within it)")
	forget := fs.Duration("forget-workers-after", cluster.DefaultForgetWorkersAfter, "remove the registration of a worker that answered no heartbeat for this long (a worker cut off that long registers again when it can)")
	verbose := fs.Bool("v", false, "log controller events")
	sf := addSecurityFlags(fs)
	if err := parseNoArgs(fs, args); err != nil {
		return err
	}
	if *storeAddr == "" || *specPath == "" {
		return usageErr(fs, "need --store URL and --spec FILE")
	}
	if *leaseTimeout <= 0 {
		return usageErr(fs, "--lease-timeout %s must be positive", *leaseTimeout)
	}
	if *forget <= 0 {
		return usageErr(fs, "--forget-workers-after %s must be positive", *forget)
	}
	sec, err := sf.security(*admin)
	if err != nil {
		return err
	}
	text, err := os.ReadFile(*specPath)
	if err != nil {
		return fmt.Errorf("read spec: %w", err)
	}
	if *id == "" {
		h, _ := os.Hostname()
		*id = fmt.Sprintf("%s-%d", h, os.Getpid())
	}
	logger, logf, st, err := clusterProcess(o, "controller", *verbose, *storeAddr)
	if err != nil {
		return err
	}
	defer st.Close()
	sp, err := spec.Parse(text, *specPath)
	if err != nil {
		return err
	}
	a := newClusterAdmin(sec, st, sp)
	a.console = a.newConsole(sp)
	defer a.console.stop()
	ln, err := net.Listen("tcp", *admin)
	if err != nil {
		return fmt.Errorf("admin API: %w", err)
	}
	_, a.port, _ = net.SplitHostPort(ln.Addr().String())
	srv := &http.Server{Handler: a, ReadHeaderTimeout: 10 * time.Second}
	if sec.CertFile != "" {
		go srv.ServeTLS(ln, sec.CertFile, sec.KeyFile)
	} else {
		go srv.Serve(ln)
	}
	defer srv.Close()
	fmt.Fprintf(o.Stdout, "controller %s standing by; admin API at %s\n", *id, ln.Addr())
	scheme, hint := "http", ""
	if sec.CertFile != "" {
		scheme = "https"
	}
	if sec.Token != "" {
		hint = " (open it with #token=<the cluster token> appended)"
	}
	fmt.Fprintf(o.Stdout, "web console: %s://%s/%s\n", scheme, ln.Addr(), hint)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	defer signal.Stop(sigs)
	go func() {
		<-sigs
		cancel()
	}()
	for {
		state, err := cluster.RunController(ctx, cluster.ControllerConfig{ID: *id, Admin: ln.Addr().String(), Store: st,
			SpecName: *specPath, SpecText: text, Classes: o.Classes, Connectors: o.Connectors, Dial: sf.dial(sec),
			LeaseTimeout: *leaseTimeout, ForgetWorkersAfter: *forget, Logf: logf, Warnf: logger.Printf, Elected: a.set})
		a.set(nil)
		switch {
		case errors.Is(err, cluster.ErrDeposed):
			logger.Printf("deposed (%v); standing by again", err)
			continue
		case ctx.Err() != nil:
			return nil
		case err != nil:
			return err
		}
		logger.Printf("pipeline %s", state)
		if state == controller.Completed || state == controller.Stopped {
			return nil
		}
		return fmt.Errorf("pipeline ended in state %s", state)
	}
}

// clusterAdmin is the controller's admin API: GET /status, GET /metrics,
// POST /drain, POST /pipeline/rescale (rescale.go, JSON only), and the web
// console (console.go: GET / and /console/data). With a token
// (required beyond loopback) every request needs it (Authorization:
// Bearer), checked in constant time, except the console's page and assets,
// which hold no data (the page sends the token, from its URL fragment,
// with its requests); the token is never logged. POST /drain is refused
// without a token configured.
type clusterAdmin struct {
	sec     wire.Security
	st      store.Store
	console *console
	port    string // the admin API's listening port (loopbackOnly)
	metrics http.Handler
	spec    *spec.Pipeline
	lag     lagWatch

	mu     sync.Mutex
	active *cluster.Active
}

func newClusterAdmin(sec wire.Security, st store.Store, sp *spec.Pipeline) *clusterAdmin {
	a := &clusterAdmin{sec: sec, st: st, spec: sp}
	reg := prometheus.NewRegistry()
	reg.MustRegister(controllerCollector{a})
	a.metrics = promhttp.HandlerFor(prometheus.Gatherers{reg, prometheus.DefaultGatherer}, promhttp.HandlerOpts{})
	return a
}

func (a *clusterAdmin) set(act *cluster.Active) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.active = act
}

// newConsole returns the console of the pipeline sp: the active
// controller's engine and workers while this controller leads (not once
// its leadership is known lost, while its engine winds down).
func (a *clusterAdmin) newConsole(sp *spec.Pipeline) *console {
	active := func() *cluster.Active {
		a.mu.Lock()
		defer a.mu.Unlock()
		if a.active != nil && a.active.Leadership.Err() != nil {
			return nil
		}
		return a.active
	}
	return newConsole(consoleTarget{mode: "controller", spec: sp, store: a.st,
		engine: func() *engine.Engine {
			if act := active(); act != nil {
				return act.Engine
			}
			return nil
		},
		workers: func() []cluster.WorkerStatus {
			if act := active(); act != nil {
				return act.Pool.Status()
			}
			return nil
		},
		standby: func(ctx context.Context) any {
			rec, _, _ := cluster.ReadLeader(ctx, a.st)
			return rec
		}})
}

// status is GET /status. A standby answers {"active": false, "leader",
// "highest_term"}. A controller that led asks its store first
// (Leadership.Check): if its lease is over or another controller's row
// replaced its own, it answers {"active": false, "deposed": true, "term":
// its old term, "highest_term", "leader"} — and stops acting — even while
// its engine is still winding down; otherwise {"active": true, "term",
// "highest_term", "pipeline", "workers", "lag" (pipelineLag)}. If the
// store cannot be read the leadership's own view (bounded by the lease
// timeout on its own clock) answers, with "store_error".
func (a *clusterAdmin) status(ctx context.Context, act *cluster.Active) map[string]any {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if act == nil {
		out := map[string]any{"active": false}
		rec, ok, err := cluster.ReadLeader(ctx, a.st)
		if err != nil {
			out["store_error"] = err.Error()
		}
		if ok {
			out["leader"], out["highest_term"] = rec, uint64(rec.Lease)
		}
		return out
	}
	held, highest, err := act.Leadership.Check(ctx)
	out := map[string]any{"active": held, "term": act.Leadership.Term(), "highest_term": highest}
	if err != nil {
		out["store_error"] = err.Error()
	}
	if !held {
		out["deposed"] = true
		if rec, ok, err := cluster.ReadLeader(ctx, a.st); err == nil && ok {
			out["leader"] = rec
		}
		return out
	}
	out["pipeline"], out["workers"] = act.Engine.Status(), act.Pool.Status()
	out["rescales"] = rescalesOf(act.Engine.Controller())
	out["lag"] = a.lag.lagOf(ctx, a.st, a.spec, act.Engine.Controller().Partitions(), act.Engine.Board())
	return out
}

func (a *clusterAdmin) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if a.sec.Token == "" && !loopbackOnly(w, r, a.port) {
		// Without a token nothing but the address guards the API: it must
		// be addressed by a loopback name (a DNS-rebinding page cannot be)
		// and not be called cross-site.
		return
	}
	if isConsoleAsset(r) {
		consolePage(w, r)
		return
	}
	if a.sec.Token != "" {
		got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok || !a.sec.CheckToken(got) {
			http.Error(w, "missing or wrong cluster token", http.StatusUnauthorized)
			return
		}
	}
	a.mu.Lock()
	act := a.active
	a.mu.Unlock()
	switch {
	case r.URL.Path == "/status" && r.Method == http.MethodGet:
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(a.status(r.Context(), act))
	case r.URL.Path == "/metrics" && r.Method == http.MethodGet:
		a.metrics.ServeHTTP(w, r)
	case r.URL.Path == "/console/data" && r.Method == http.MethodGet:
		a.console.serveData(w, r)
	case r.URL.Path == "/drain" && r.Method == http.MethodPost:
		if a.sec.Token == "" {
			// Without a token anything on this machine, a web page in a
			// browser included (a simple cross-site POST), could drain.
			http.Error(w, "draining through the admin API needs a cluster token (--token-file); or send SIGTERM to the worker", http.StatusForbidden)
			return
		}
		if act == nil {
			http.Error(w, "this controller is a standby; ask the active one", http.StatusMisdirectedRequest)
			return
		}
		rw := act.Pool.Worker(r.URL.Query().Get("worker"))
		if rw == nil {
			http.Error(w, "no such worker", http.StatusNotFound)
			return
		}
		if err := rw.Drain(r.Context()); err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		fmt.Fprintln(w, "draining")
	case r.URL.Path == "/pipeline/rescale" && r.Method == http.MethodPost:
		if ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); ct != "application/json" {
			// A cross-site page can send text/plain without a preflight;
			// application/json it cannot.
			http.Error(w, fmt.Sprintf("rescale: Content-Type %q: send the JSON body as application/json", r.Header.Get("Content-Type")), http.StatusUnsupportedMediaType)
			return
		}
		if act == nil {
			http.Error(w, "this controller is a standby; ask the active one", http.StatusMisdirectedRequest)
			return
		}
		if err := act.Leadership.Err(); err != nil {
			http.Error(w, fmt.Sprintf("this controller no longer leads (%v); ask the active one", err), http.StatusMisdirectedRequest)
			return
		}
		serveRescale(w, r, act.Engine)
	default:
		http.Error(w, "not found", http.StatusNotFound)
	}
}

var (
	descControllerActive = prometheus.NewDesc("weir_controller_active", "1 while this controller leads (its store says its leadership holds), 0 while it stands by or was deposed.", nil, nil)
	descControllerTerm   = prometheus.NewDesc("weir_controller_term", "The highest controller term this controller knows of: its own while it leads.", nil, nil)
)

// controllerCollector is GET /metrics of weir controller: whether it leads
// and the highest term, and, from the active controller only, its engine's
// metrics (engine.Collector) — the pipeline's counters summed over the
// workers' heartbeats and carried across terms (cluster/counters.go), so a
// failover does not reset them. A standby exports no pipeline series: a
// scrape of every controller sums to the active one's.
type controllerCollector struct{ a *clusterAdmin }

// Describe sends nothing: the collector is unchecked (the engine's series
// exist only while this controller leads).
func (controllerCollector) Describe(chan<- *prometheus.Desc) {}

func (c controllerCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	c.a.mu.Lock()
	act := c.a.active
	c.a.mu.Unlock()
	active, term := false, uint64(0)
	if act != nil {
		active, term, _ = act.Leadership.Check(ctx)
	} else if rec, ok, err := cluster.ReadLeader(ctx, c.a.st); err == nil && ok {
		term = uint64(rec.Lease)
	}
	ch <- prometheus.MustNewConstMetric(descControllerActive, prometheus.GaugeValue, map[bool]float64{true: 1}[active])
	ch <- prometheus.MustNewConstMetric(descControllerTerm, prometheus.GaugeValue, float64(term))
	if active {
		act.Engine.Collector().Collect(ch)
	}
}
