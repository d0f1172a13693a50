package cli

import (
	"context"
	"embed"
	"encoding/json"
	"fmt"
	"io/fs"
	"net/http"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/weir-stream/weir/board"
	"github.com/weir-stream/weir/cluster"
	"github.com/weir-stream/weir/connector/queue"
	"github.com/weir-stream/weir/engine"
	"github.com/weir-stream/weir/spec"
	"github.com/weir-stream/weir/store"
)

// The web console, served from the admin address of 'weir run' and of
// 'weir controller': GET / is the page, GET /console/{console.js,
// console.css} its assets (built from console/web/src by 'npm run build',
// committed, embedded here: users need no Node.js), and GET /console/data
// the numbers it shows. The page reads /console/data twice a second; under
// 'weir run' its pause, stop and start buttons POST to /pipeline/{action}
// with the admin token (see adminauth.go), under 'weir controller' its
// drain buttons POST /drain?worker=ID with the cluster token. The page
// takes the token from its URL fragment (#token=…, never sent to the
// server: 'weir pipeline console --data DIR' prints that URL) or a field.
//
// /console/data is built on engine.Status as it is (the "status" member is
// /status verbatim, or the pipeline member of the controller's /status)
// plus what the console derives, kept apart: the graph from the spec, and
// from a sampler over the engine's status and board: rates smoothed over a
// window the page names (?window=10s), the recent epochs of every
// partition (their sizes, durations and commit latency, which jobs report
// in board.Status.LastEpoch), watermarks over time, each partition's
// restart history, source lag, and each failing partition's error taken
// apart (the poison message's id and, from a queue source, the row itself).

//go:embed console/dist
var consoleFiles embed.FS

const (
	// consoleSamplePeriod is the sampler's period; consoleHistory how many
	// samples it keeps (10 minutes): the longest rate window and the chart.
	consoleSamplePeriod = time.Second
	consoleHistory      = 600
	// epochSamplePeriod is how often partitions' last epochs and failures
	// are read (sampleFast; an epoch is rarely shorter: batch_duration
	// defaults to 1s; a shorter one is missed from the history, not from
	// the rates).
	epochSamplePeriod = 100 * time.Millisecond
	// consoleEpochs is how many recent epochs are kept per partition,
	// consoleRestarts how many restarts.
	consoleEpochs   = 20
	consoleRestarts = 20
	// defaultRateWindow is the rate window when the page names none.
	defaultRateWindow = 10 * time.Second
)

// consoleTarget is what the console shows: the engine of 'weir run', or
// the active controller's (nil while it stands by), with its spec and
// store, and in the distributed mode its workers.
type consoleTarget struct {
	mode    string // "run" or "controller"
	engine  func() *engine.Engine
	spec    *spec.Pipeline
	store   store.Store
	workers func() []cluster.WorkerStatus // nil under 'weir run'
	standby func(ctx context.Context) any // the leader record, while standing by
	// cli is how the page's suggested commands name the pipeline
	// ("--data DIR"; empty in the distributed mode).
	cli string
}

// console samples a target's status for the console page.
type console struct {
	t    consoleTarget
	stop context.CancelFunc

	mu       sync.Mutex
	eng      *engine.Engine // the engine sampled (its change resets the rest)
	samples  []consoleSample
	epochs   map[string][]board.EpochStats // recent epochs, by partition
	restarts map[string][]restartEvent     // by partition
	lastErr  map[string]time.Time          // the last LastErrorAt seen
	failing  map[string]bool               // partitions failing at the last sample

	// readers maps a stream to the computations reading it (streamReaders).
	readers map[string][]string

	// poison caches the source rows failures name (a queue row at an
	// offset never changes), so that a page polling twice a second does
	// not read the store for every failing partition each time.
	poisonMu sync.Mutex
	poison   map[string]string
}

// consoleSample is one reading: cumulative counters per computation and
// per partition (with the job they belong to: a new job starts from 0),
// source lag, and watermarks.
type consoleSample struct {
	at    time.Time
	comps map[string]board.Counters
	parts map[string]partSample
	lag   *int64
	lags  map[string]int64
	sysWM map[string]store.Timestamp // by stream
	// newest is the newest epoch timestamp of any partition: the store's
	// timestamps run up to its reserve ahead of the wall clock after a
	// restart, so a system watermark's delay is measured from it.
	newest  store.Timestamp
	eventWM map[string]time.Time // by reading computation
}

// systemDelay is how far a system watermark is behind the sample's newest
// epoch (nil before any epoch).
func (s *consoleSample) systemDelay(wm store.Timestamp) *float64 {
	if s.newest == 0 {
		return nil
	}
	d := max(0, s.newest.Time().Sub(wm.Time()).Seconds())
	return &d
}

type partSample struct {
	job    string
	totals board.Counters
}

// restartEvent is one failure of a partition's job, as the sampler saw it.
type restartEvent struct {
	At       time.Time `json:"at"`
	Restarts int       `json:"restarts"` // the partition's restarts then
	Failures int       `json:"consecutive_failures"`
	Error    string    `json:"error"`     // first line
	Recover  bool      `json:"recovered"` // a healthy run after failures
}

// runConsole is the console of 'weir run'.
func runConsole(r *runner) *console {
	return newConsole(consoleTarget{mode: "run", engine: func() *engine.Engine { return r.eng }, spec: r.spec, store: r.st,
		cli: "--data " + r.dir})
}

func newConsole(t consoleTarget) *console {
	ctx, cancel := context.WithCancel(context.Background())
	c := &console{t: t, stop: cancel, readers: streamReaders(t.spec)}
	c.reset(nil)
	go c.run(ctx)
	return c
}

// reset forgets everything sampled from an earlier engine. REQUIRES: c.mu
// held, or c not shared yet.
func (c *console) reset(eng *engine.Engine) {
	c.eng, c.samples = eng, nil
	c.epochs, c.restarts = map[string][]board.EpochStats{}, map[string][]restartEvent{}
	c.lastErr, c.failing = map[string]time.Time{}, map[string]bool{}
}

func (c *console) run(ctx context.Context) {
	slow := time.NewTicker(consoleSamplePeriod)
	fast := time.NewTicker(epochSamplePeriod)
	defer slow.Stop()
	defer fast.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-fast.C:
			c.sampleFast(now)
		case now := <-slow.C:
			c.sample(ctx, now)
		}
	}
}

// current returns the engine to sample, resetting the history when it
// changed (a new leadership term). REQUIRES: c.mu held.
func (c *console) current() *engine.Engine {
	eng := c.t.engine()
	if eng != c.eng {
		c.reset(eng)
	}
	return eng
}

// sampleFast records new epochs and the partitions' failures and
// recoveries (a restart history: a failing job restarts with a backoff
// from 1 s by default, so at this period a failure is missed only when
// the backoff is set shorter).
func (c *console) sampleFast(now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	eng := c.current()
	if eng == nil {
		return
	}
	for _, p := range eng.Controller().Partitions() {
		id := string(p.Partition)
		if p.LastErrorAt != nil && !p.LastErrorAt.Equal(c.lastErr[id]) {
			c.lastErr[id] = *p.LastErrorAt
			c.addRestart(id, restartEvent{At: *p.LastErrorAt, Restarts: p.Restarts, Failures: p.ConsecutiveFailures, Error: firstLine(p.LastError)})
		}
		if c.failing[id] && p.ConsecutiveFailures == 0 {
			c.addRestart(id, restartEvent{At: now, Restarts: p.Restarts, Recover: true})
		}
		c.failing[id] = p.ConsecutiveFailures > 0
	}
	for id, s := range eng.Board().Statuses() {
		e := s.LastEpoch
		if e == nil {
			continue
		}
		h := c.epochs[string(id)]
		if n := len(h); n > 0 && h[n-1].TS == e.TS {
			continue
		}
		h = append(h, *e)
		if len(h) > consoleEpochs {
			h = h[len(h)-consoleEpochs:]
		}
		c.epochs[string(id)] = h
	}
}

func (c *console) sample(ctx context.Context, now time.Time) {
	c.mu.Lock()
	eng := c.current()
	c.mu.Unlock()
	if eng == nil {
		return
	}
	st := eng.Status()
	s := consoleSample{at: now, comps: st.Computations, parts: map[string]partSample{},
		sysWM: map[string]store.Timestamp{}, eventWM: map[string]time.Time{}}
	boards := eng.Board().Statuses()
	for id, b := range boards {
		s.parts[string(id)] = partSample{job: string(b.Job), totals: b.Totals}
		s.newest = max(s.newest, b.Epoch)
		for stream, ts := range b.SystemWM {
			if cur, ok := s.sysWM[stream]; !ok || ts < cur {
				s.sysWM[stream] = ts
			}
		}
	}
	for name := range c.t.spec.Computations {
		if ev := eng.Board().Control(name).EventWM; !ev.IsZero() {
			s.eventWM[name] = ev
		}
	}
	s.lags = sourceLags(ctx, c.t.store, c.t.spec)
	if len(s.lags) > 0 {
		var l int64
		for _, v := range s.lags {
			l += v
		}
		s.lag = &l
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if eng != c.eng {
		return // replaced meanwhile
	}
	c.samples = append(c.samples, s)
	if len(c.samples) > consoleHistory {
		c.samples = c.samples[len(c.samples)-consoleHistory:]
	}
}

// REQUIRES: c.mu held.
func (c *console) addRestart(id string, e restartEvent) {
	h := append(c.restarts[id], e)
	if len(h) > consoleRestarts {
		h = h[len(h)-consoleRestarts:]
	}
	c.restarts[id] = h
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// rates are counts per second over a window.
type rates struct {
	Inputs  float64 `json:"inputs_per_s"`
	Outputs float64 `json:"outputs_per_s"`
	Epochs  float64 `json:"epochs_per_s"`
	Commits float64 `json:"commits_per_s"`
}

func rateOf(a, b board.Counters, dt float64) rates {
	if dt <= 0 {
		return rates{}
	}
	d := func(x, y uint64) float64 { return float64(y-x) / dt }
	if b.Inputs < a.Inputs || b.Outputs < a.Outputs || b.Epochs < a.Epochs {
		return rates{}
	}
	return rates{Inputs: d(a.Inputs, b.Inputs), Outputs: d(a.Outputs, b.Outputs), Epochs: d(a.Epochs, b.Epochs), Commits: d(a.Commits, b.Commits)}
}

// windowStart returns the index of the oldest sample within w before
// sample i (at least one sample earlier when there is one).
func windowStart(ss []consoleSample, i int, w time.Duration) int {
	j := i
	for j > 0 && ss[i].at.Sub(ss[j-1].at) <= w+consoleSamplePeriod/2 {
		j--
	}
	if j == i && i > 0 {
		j = i - 1
	}
	return j
}

// consoleData is the JSON of GET /console/data.
type consoleData struct {
	Mode string `json:"mode"` // run, controller
	// Active: the controller leads (false: a standby; Leader says who leads).
	Active  bool    `json:"active"`
	Leader  any     `json:"leader,omitempty"`
	WindowS float64 `json:"window_s"`
	Now     string  `json:"now"`
	// Status is GET /status (under 'weir controller', its pipeline member),
	// verbatim.
	Status       *engine.Status        `json:"status,omitempty"`
	Workers      []consoleWorker       `json:"workers,omitempty"`
	Graph        consoleGraph          `json:"graph"`
	Computations []consoleComputation  `json:"computations"`
	Partitions   []consolePartition    `json:"partitions"`
	Failures     []consoleFailure      `json:"failures"`
	Watermarks   []consoleWatermark    `json:"watermarks"`
	Series       consoleSeries         `json:"series"`
	OutboxLimits map[string]int64      `json:"outbox_limits"`
	Rates        map[string]rates      `json:"rates"`
	Commands     map[string]string     `json:"commands"`
	SourceErrors []engine.SourceError  `json:"source_errors,omitempty"`
	SinkFailures []engine.SinkFailure  `json:"sink_failures,omitempty"`
	Epochs       map[string]epochStats `json:"epoch_summary"`
}

type consoleWorker struct {
	cluster.WorkerStatus
	Partitions []string `json:"partitions"`
}

type consoleGraph struct {
	Nodes []graphNode `json:"nodes"`
	Edges []graphEdge `json:"edges"`
}

// graphNode is a source, a computation or a sink. A computation carries
// its figures: smoothed rates, the backlog of its inputs, whether its
// outbox is under backpressure, its partitions and how many fail.
type graphNode struct {
	ID           string  `json:"id"`
	Kind         string  `json:"kind"` // source, computation, sink
	Label        string  `json:"label"`
	Class        string  `json:"class"`
	Computation  string  `json:"computation"`
	InPerS       float64 `json:"in_per_s"`
	OutPerS      float64 `json:"out_per_s"`
	Backlog      *int64  `json:"backlog,omitempty"`
	Lag          *int64  `json:"lag,omitempty"`
	Backpressure bool    `json:"backpressure"`
	Partitions   int     `json:"partitions"`
	Failing      int     `json:"failing"`
	// Failed says a sink's delivery stopped, or a source cannot be listed.
	Failed bool `json:"failed"`
}

// graphEdge is a flow between two nodes. Rate is the writer's smoothed
// output rate (or, from a source, the reader's input rate). Backlog, on an
// internal stream, is what the writer emitted that the reader has not
// processed yet (from the cumulative counters, so restarts blur it);
// Backpressure is set when it reaches 80% of the writer's outbox limit,
// where the writer stops taking input.
type graphEdge struct {
	From         string  `json:"from"`
	To           string  `json:"to"`
	Stream       string  `json:"stream"`
	Rate         float64 `json:"rate"`
	Backlog      *int64  `json:"backlog,omitempty"`
	Backpressure bool    `json:"backpressure"`
}

type consoleComputation struct {
	Name    string `json:"name"`
	Class   string `json:"class"`
	Outbox  int64  `json:"outbox_limit"`
	Parts   int    `json:"partitions"`
	Failing int    `json:"failing"`
	Lag     *int64 `json:"lag,omitempty"`
	board.Counters
	Rates rates `json:"rates"`
}

// epochStats summarizes a computation's recent epochs (those the sampler
// kept of its partitions).
type epochStats struct {
	Count         int     `json:"count"`
	AvgInputs     float64 `json:"avg_inputs"`
	AvgBytes      float64 `json:"avg_bytes"`
	AvgDurationMS float64 `json:"avg_duration_ms"`
	MaxDurationMS float64 `json:"max_duration_ms"`
	AvgCommitMS   float64 `json:"avg_commit_ms"`
	MaxCommitMS   float64 `json:"max_commit_ms"`
}

type consolePartition struct {
	ID          string         `json:"id"`
	Computation string         `json:"computation"`
	State       string         `json:"state"`
	Job         string         `json:"job"`
	Worker      string         `json:"worker"`
	Restarts    int            `json:"restarts"`
	Failures    int            `json:"consecutive_failures"`
	RestartAt   *time.Time     `json:"restart_at,omitempty"`
	LastError   string         `json:"last_error"`
	Rates       *rates         `json:"rates,omitempty"`
	Totals      board.Counters `json:"totals"`
	EpochAgeS   *float64       `json:"epoch_age_s,omitempty"`
	Lag         *int64         `json:"lag,omitempty"`
	Epochs      []consoleEpoch `json:"epochs"`
}

// consoleEpoch is one recent epoch of a partition.
type consoleEpoch struct {
	TS         string  `json:"ts"`
	At         string  `json:"at"`
	Inputs     int     `json:"inputs"`
	Duplicates int     `json:"duplicates"`
	Outputs    int     `json:"outputs"`
	Writes     int     `json:"writes"`
	Bytes      int     `json:"bytes"`
	DurationMS float64 `json:"duration_ms"`
	CommitMS   float64 `json:"commit_ms"`
	Committed  bool    `json:"committed"`
}

// consoleFailure is a failing partition, a sink whose delivery stopped, or
// a source that cannot be listed: the whole error, what it was processing
// (Origin, and Poison, the row itself, when a queue source holds it), the
// restart history and what the CLI offers.
type consoleFailure struct {
	Kind        string         `json:"kind"` // partition, sink, source
	Partition   string         `json:"partition,omitempty"`
	Computation string         `json:"computation"`
	Sink        string         `json:"sink,omitempty"`
	Worker      string         `json:"worker,omitempty"`
	Failures    int            `json:"consecutive_failures"`
	Restarts    int            `json:"restarts"`
	RestartAt   *time.Time     `json:"restart_at,omitempty"`
	Error       string         `json:"error"`
	Origin      *failureOrigin `json:"origin,omitempty"`
	Poison      string         `json:"poison,omitempty"`
	History     []restartEvent `json:"history"`
	Actions     []cliAction    `json:"actions"`
	// Skip is the body of POST /pipeline/skip that skips the failed
	// message (under 'weir run', for a call on one message): the page's
	// Skip button.
	Skip *skipRequest `json:"skip,omitempty"`
}

// failureOrigin is what a user-code error (job.UserCodeError) names.
type failureOrigin struct {
	Call            string `json:"call"` // message, key batch, timer
	Message         string `json:"message,omitempty"`
	Source          string `json:"source,omitempty"`
	SourcePartition string `json:"source_partition,omitempty"`
	Offset          string `json:"offset,omitempty"`
	Cause           string `json:"cause"`
}

type cliAction struct {
	What    string `json:"what"`
	Command string `json:"command"`
}

type consoleWatermark struct {
	Stream string `json:"stream"`
	// System is the stream's SystemWatermark (the smallest in-flight
	// SystemTimestamp over its writers), as RFC 3339; empty when unknown.
	System string `json:"system"`
	// Event is the reading computation's event watermark, if any.
	Event string `json:"event,omitempty"`
	// SystemDelayS is how far the system watermark is behind the newest
	// epoch (store timestamps are no wall clock), EventDelayS how far the
	// event watermark is behind now (negative when ahead: a queue source's
	// event time is the store's timestamp of the row).
	SystemDelayS *float64 `json:"system_delay_s,omitempty"`
	EventDelayS  *float64 `json:"event_delay_s,omitempty"`
}

// consoleSeries are the charts: per sample time (unix seconds), each
// computation's input rate over the window, the total source lag, and
// each stream's system watermark delay (seconds behind the newest epoch).
type consoleSeries struct {
	T     []int64               `json:"t"`
	Rates map[string][]*float64 `json:"rates"`
	Lag   []*int64              `json:"lag"`
	WM    map[string][]*float64 `json:"wm_delay_s"`
	// EventWM is each stream's reader's event watermark delay (seconds
	// behind the sample), for streams read by a computation that has one.
	EventWM map[string][]*float64 `json:"event_wm_delay_s"`
}

// parseWindow reads ?window= (a Go duration, at least 2s, at most the
// history); default defaultRateWindow.
func parseWindow(v string) time.Duration {
	w, err := time.ParseDuration(v)
	if err != nil || w < 2*time.Second {
		return defaultRateWindow
	}
	return min(w, consoleHistory*consoleSamplePeriod)
}

// data builds the console's view of the pipeline now.
func (c *console) data(ctx context.Context, window time.Duration) consoleData {
	d := consoleData{Mode: c.t.mode, WindowS: window.Seconds(), Now: time.Now().UTC().Format(time.RFC3339Nano),
		OutboxLimits: map[string]int64{}, Rates: map[string]rates{}, Commands: c.commands(),
		Computations: []consoleComputation{}, Partitions: []consolePartition{}, Failures: []consoleFailure{},
		Watermarks: []consoleWatermark{}, Epochs: map[string]epochStats{},
		Series: consoleSeries{T: []int64{}, Lag: []*int64{}, Rates: map[string][]*float64{}, WM: map[string][]*float64{}, EventWM: map[string][]*float64{}}}
	c.mu.Lock()
	eng := c.current()
	samples := append([]consoleSample(nil), c.samples...)
	epochs := make(map[string][]board.EpochStats, len(c.epochs))
	for k, v := range c.epochs {
		epochs[k] = append([]board.EpochStats(nil), v...)
	}
	restarts := make(map[string][]restartEvent, len(c.restarts))
	for k, v := range c.restarts {
		restarts[k] = append([]restartEvent(nil), v...)
	}
	c.mu.Unlock()
	p := c.t.spec
	names := sortedNames(p.Computations)
	if eng == nil {
		if c.t.standby != nil {
			d.Leader = c.t.standby(ctx)
		}
		c.graph(&d, names, nil, nil, nil)
		return d
	}
	d.Active = true
	st := eng.Status()
	d.Status = &st
	d.SourceErrors, d.SinkFailures = st.SourceErrors, st.SinkFailures
	boards := eng.Board().Statuses()
	if c.t.workers != nil {
		byWorker := map[string][]string{}
		for _, ps := range st.Partitions {
			if ps.Worker != "" {
				byWorker[ps.Worker] = append(byWorker[ps.Worker], string(ps.Partition))
			}
		}
		for _, w := range c.t.workers() {
			d.Workers = append(d.Workers, consoleWorker{WorkerStatus: w, Partitions: append([]string{}, byWorker[w.ID]...)})
		}
	}

	// Rates over the window, from the last sample back.
	partRates := map[string]rates{}
	if n := len(samples); n >= 2 {
		last := samples[n-1]
		first := samples[windowStart(samples, n-1, window)]
		dt := last.at.Sub(first.at).Seconds()
		for name, k := range last.comps {
			d.Rates[name] = rateOf(first.comps[name], k, dt)
		}
		for id, ps := range last.parts {
			// The oldest sample in the window of the same job.
			for j := windowStart(samples, n-1, window); j < n-1; j++ {
				if old, ok := samples[j].parts[id]; ok && old.job == ps.job {
					partRates[id] = rateOf(old.totals, ps.totals, last.at.Sub(samples[j].at).Seconds())
					break
				}
			}
		}
		c.series(&d, samples, window)
	}
	var lags map[string]int64
	if n := len(samples); n > 0 {
		lags = samples[n-1].lags
	}

	// Partitions.
	now := time.Now()
	failing := map[string]int{}
	parts := map[string]int{}
	for _, ps := range st.Partitions {
		id := string(ps.Partition)
		comp := partitionComputation(id)
		parts[comp]++
		cp := consolePartition{ID: id, Computation: comp, Job: string(ps.Job), Worker: ps.Worker, Restarts: ps.Restarts,
			Failures: ps.ConsecutiveFailures, RestartAt: ps.RestartAt, LastError: ps.LastError, Epochs: []consoleEpoch{}}
		if ps.ConsecutiveFailures > 0 {
			failing[comp]++
		}
		b, posted := boards[ps.Partition]
		switch {
		case ps.ConsecutiveFailures > 0:
			cp.State = "failing"
		case ps.Job == "" && ps.LastError != "":
			cp.State = "failed"
		case ps.Job == "":
			cp.State = "stopped"
		case posted && b.Drained:
			cp.State = "drained"
		case posted && b.Quiet && partRates[id].Inputs == 0:
			cp.State = "idle" // quiet now, and no input over the window
		default:
			cp.State = "running"
		}
		if posted {
			cp.Totals = b.Totals
			if b.LastEpoch != nil {
				age := now.Sub(b.LastEpoch.At).Seconds()
				cp.EpochAgeS = &age
			}
		}
		if r, ok := partRates[id]; ok {
			cp.Rates = &r
		}
		for i := len(epochs[id]) - 1; i >= 0; i-- {
			e := epochs[id][i]
			cp.Epochs = append(cp.Epochs, consoleEpoch{TS: fmt.Sprintf("%016x", uint64(e.TS)), At: e.At.UTC().Format(time.RFC3339Nano),
				Inputs: e.Inputs, Duplicates: e.Duplicates, Outputs: e.Outputs, Writes: e.Writes, Bytes: e.Bytes,
				DurationMS: ms(e.Duration), CommitMS: ms(e.Commit), Committed: e.Committed})
		}
		if l, ok := lags[id]; ok {
			cp.Lag = &l
		}
		d.Partitions = append(d.Partitions, cp)
		if ps.ConsecutiveFailures > 0 {
			d.Failures = append(d.Failures, c.failure(ctx, cp, restarts[id]))
		}
	}
	for _, f := range st.SinkFailures {
		d.Failures = append(d.Failures, consoleFailure{Kind: "sink", Partition: f.Partition, Computation: partitionComputation(f.Partition),
			Sink: f.Sink, Error: f.Error, History: restarts[f.Partition], Actions: c.actions(f.Partition, "", nil)})
	}
	for _, f := range st.SourceErrors {
		d.Failures = append(d.Failures, consoleFailure{Kind: "source", Computation: f.Computation, Failures: f.ConsecutiveFailures,
			RestartAt: f.RetryAt, Error: f.LastError, History: []restartEvent{}, Actions: c.actions("", "", nil)})
	}

	// Computations, with their recent epochs summarized.
	for _, name := range names {
		comp := p.Computations[name]
		cc := consoleComputation{Name: name, Class: comp.ComputationClassName, Outbox: comp.OutputStoreCountLimit,
			Parts: parts[name], Failing: failing[name], Counters: st.Computations[name], Rates: d.Rates[name]}
		var lag int64
		var has bool
		for id, l := range lags {
			if partitionComputation(id) == name {
				lag, has = lag+l, true
			}
		}
		if has {
			cc.Lag = &lag
		}
		d.Computations = append(d.Computations, cc)
		var es epochStats
		var in, by, dur, com float64
		for id, h := range epochs {
			if partitionComputation(id) != name {
				continue
			}
			for _, e := range h {
				es.Count++
				in += float64(e.Inputs)
				by += float64(e.Bytes)
				dur += ms(e.Duration)
				com += ms(e.Commit)
				es.MaxDurationMS = max(es.MaxDurationMS, ms(e.Duration))
				es.MaxCommitMS = max(es.MaxCommitMS, ms(e.Commit))
			}
		}
		if es.Count > 0 {
			n := float64(es.Count)
			es.AvgInputs, es.AvgBytes, es.AvgDurationMS, es.AvgCommitMS = in/n, by/n, dur/n, com/n
		}
		d.Epochs[name] = es
	}
	sortFailures(d.Failures)
	c.graph(&d, names, &st, failing, parts)

	// Watermarks now.
	var last *consoleSample
	if n := len(samples); n > 0 {
		last = &samples[n-1]
	}
	for _, s := range sortedNames(p.Streams) {
		w := consoleWatermark{Stream: s}
		if last != nil {
			if ts, ok := last.sysWM[s]; ok && ts != 0 {
				w.System = ts.Time().UTC().Format(time.RFC3339Nano)
				w.SystemDelayS = last.systemDelay(ts)
			}
			if ev, ok := c.eventWMOf(last.eventWM, s); ok {
				w.Event = ev.UTC().Format(time.RFC3339Nano)
				delay := last.at.Sub(ev).Seconds() // negative: ahead of this clock
				w.EventDelayS = &delay
			}
		}
		d.Watermarks = append(d.Watermarks, w)
	}
	return d
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// partitionComputation returns the computation of a partition id
// ("Comp/3" of a keyed computation, "Comp@key" of a source's).
func partitionComputation(id string) string {
	comp, _, _ := strings.Cut(strings.SplitN(id, "@", 2)[0], "/")
	return comp
}

// eventWMOf returns the event watermark of the (first, by name)
// computation reading stream that has one.
func (c *console) eventWMOf(wms map[string]time.Time, stream string) (time.Time, bool) {
	for _, name := range c.readers[stream] {
		if ev, ok := wms[name]; ok {
			return ev, true
		}
	}
	return time.Time{}, false
}

// streamReaders maps each stream of p to the computations that read it, in
// name order (computed once: eventWMOf runs for every sample of a series).
func streamReaders(p *spec.Pipeline) map[string][]string {
	out := map[string][]string{}
	for _, name := range sortedNames(p.Computations) {
		for _, in := range p.Computations[name].InputStreamIDs {
			out[in] = append(out[in], name)
		}
	}
	return out
}

// series fills the charts from the samples. REQUIRES: len(ss) >= 2.
func (c *console) series(d *consoleData, ss []consoleSample, window time.Duration) {
	for i := 1; i < len(ss); i++ {
		j := windowStart(ss, i, window)
		dt := ss[i].at.Sub(ss[j].at).Seconds()
		d.Series.T = append(d.Series.T, ss[i].at.Unix())
		d.Series.Lag = append(d.Series.Lag, ss[i].lag)
		for name := range c.t.spec.Computations {
			var v *float64
			if k, ok := ss[i].comps[name]; ok {
				r := rateOf(ss[j].comps[name], k, dt).Inputs
				v = &r
			}
			d.Series.Rates[name] = append(d.Series.Rates[name], v)
		}
		for stream := range c.t.spec.Streams {
			var v *float64
			if ts, ok := ss[i].sysWM[stream]; ok && ts != 0 {
				v = ss[i].systemDelay(ts)
			}
			d.Series.WM[stream] = append(d.Series.WM[stream], v)
			if ev, ok := c.eventWMOf(ss[i].eventWM, stream); ok {
				delay := ss[i].at.Sub(ev).Seconds()
				for len(d.Series.EventWM[stream]) < len(d.Series.T)-1 {
					d.Series.EventWM[stream] = append(d.Series.EventWM[stream], nil)
				}
				d.Series.EventWM[stream] = append(d.Series.EventWM[stream], &delay)
			}
		}
	}
}

// graph builds the graph from the spec, with the figures of d (st nil: no
// figures, a standby controller).
func (c *console) graph(d *consoleData, names []string, st *engine.Status, failing, parts map[string]int) {
	p := c.t.spec
	writer := map[string]string{}
	sinkFailed := map[string]bool{}
	sourceFailed := map[string]bool{}
	if st != nil {
		for _, f := range st.SinkFailures {
			sinkFailed[partitionComputation(f.Partition)+":"+f.Sink] = true
		}
		for _, f := range st.SourceErrors {
			sourceFailed[f.Computation] = true
		}
	}
	nodes := map[string]*graphNode{}
	for _, name := range names {
		comp := p.Computations[name]
		d.OutboxLimits[name] = comp.OutputStoreCountLimit
		n := graphNode{ID: name, Kind: "computation", Label: name, Class: comp.ComputationClassName, Computation: name,
			InPerS: d.Rates[name].Inputs, OutPerS: d.Rates[name].Outputs, Partitions: parts[name], Failing: failing[name]}
		for _, cc := range d.Computations {
			if cc.Name == name {
				n.Lag = cc.Lag
			}
		}
		d.Graph.Nodes = append(d.Graph.Nodes, n)
		for _, s := range comp.OutputStreamIDs {
			writer[s] = name
		}
		for _, sid := range sortedNames(comp.SourceStreams) {
			src := comp.SourceStreams[sid]
			id := "source:" + name + ":" + sid
			d.Graph.Nodes = append(d.Graph.Nodes, graphNode{ID: id, Kind: "source", Label: sourceLabel(src), Class: src.SourceClassName,
				Computation: name, OutPerS: d.Rates[name].Inputs, Lag: n.Lag, Failed: sourceFailed[name]})
			d.Graph.Edges = append(d.Graph.Edges, graphEdge{From: id, To: name, Stream: sid, Rate: d.Rates[name].Inputs})
		}
		for _, kid := range sortedNames(comp.Sinks) {
			sk := comp.Sinks[kid]
			id := "sink:" + name + ":" + kid
			d.Graph.Nodes = append(d.Graph.Nodes, graphNode{ID: id, Kind: "sink", Label: kid, Class: sk.SinkClassName,
				Computation: name, InPerS: d.Rates[name].Outputs, Failed: sinkFailed[name+":"+kid]})
			d.Graph.Edges = append(d.Graph.Edges, graphEdge{From: name, To: id, Stream: strings.Join(sk.InputStreamIDs, ","), Rate: d.Rates[name].Outputs})
		}
	}
	for i := range d.Graph.Nodes {
		nodes[d.Graph.Nodes[i].ID] = &d.Graph.Nodes[i]
	}
	for _, name := range names {
		for _, s := range p.Computations[name].InputStreamIDs {
			w, ok := writer[s]
			if !ok {
				continue
			}
			e := graphEdge{From: w, To: name, Stream: s, Rate: d.Rates[w].Outputs}
			if st != nil && len(p.Computations[name].InputStreamIDs) == 1 {
				wc, rc := st.Computations[w], st.Computations[name]
				b := max(int64(wc.Outputs)-int64(rc.Inputs+rc.Duplicates), 0)
				e.Backlog = &b
				e.Backpressure = d.OutboxLimits[w] > 0 && float64(b) >= 0.8*float64(d.OutboxLimits[w])
				n := nodes[name]
				n.Backlog = ptr(b + deref(n.Backlog))
				if e.Backpressure {
					nodes[w].Backpressure = true
				}
			}
			d.Graph.Edges = append(d.Graph.Edges, e)
		}
	}
}

func ptr[T any](v T) *T { return &v }

func deref(p *int64) int64 {
	if p == nil {
		return 0
	}
	return *p
}

// userErr takes a job.UserCodeError's text apart: "computation C,
// partition P, message M (source S, partition SP, offset O): cause".
var userErr = regexp.MustCompile(`^computation \S+, partition \S+, (message (\S+)|key batch of \d+ messages (\S+) … \S+|timer (\S+))` +
	`(?: \(source (\S+), partition (\S+), offsets? (\d+)(?: … \d+)?\))?: ((?s).*)$`)

// failure describes a failing partition for the failures view.
func (c *console) failure(ctx context.Context, p consolePartition, history []restartEvent) consoleFailure {
	f := consoleFailure{Kind: "partition", Partition: p.ID, Computation: p.Computation, Worker: p.Worker, Failures: p.Failures,
		Restarts: p.Restarts, RestartAt: p.RestartAt, Error: p.LastError, History: history}
	if f.History == nil {
		f.History = []restartEvent{}
	}
	if f.Origin = errorOrigin(p.Computation, p.LastError); f.Origin != nil {
		f.Poison = c.poisonRow(ctx, p.Computation, f.Origin)
	}
	f.Actions = c.actions(p.ID, p.Worker, f.Origin)
	if o := f.Origin; o != nil && o.Call == "message" && c.t.mode == "run" {
		f.Skip = &skipRequest{Computation: p.Computation, Reason: "skipped in the web console: " + o.Cause}
		if off, err := strconv.ParseInt(o.Offset, 10, 64); err == nil {
			f.Skip.SourcePartition, f.Skip.Offset = o.SourcePartition, &off
		} else {
			f.Skip.Message = o.Message
		}
	}
	return f
}

// errorOrigin takes apart the text of computation comp's
// job.UserCodeError, possibly wrapped ("job X: …"); nil if msg is none.
func errorOrigin(comp, msg string) *failureOrigin {
	if i := strings.Index(msg, "computation "+comp+", partition "); i >= 0 {
		msg = msg[i:]
	}
	m := userErr.FindStringSubmatch(msg)
	if m == nil {
		return nil
	}
	cause := firstLine(m[8])
	if i := strings.LastIndex(cause, " (to skip it: "); i >= 0 && strings.HasSuffix(cause, ")") {
		cause = cause[:i] // the skip command, which the actions list
	}
	o := &failureOrigin{Cause: cause, Source: m[5], SourcePartition: m[6], Offset: m[7]}
	switch {
	case m[2] != "":
		o.Call, o.Message = "message", m[2]
	case m[3] != "":
		o.Call, o.Message = "key batch", m[3]
	default:
		o.Call, o.Message = "timer", m[4]
	}
	return o
}

// poisonRow returns the source row a failure names, as JSON, when a
// QueueSource holds it ("" otherwise).
func (c *console) poisonRow(ctx context.Context, comp string, o *failureOrigin) string {
	cp := c.t.spec.Computations[comp]
	if o.Source == "" || o.Offset == "" || cp == nil || cp.SourceStreams[o.Source] == nil {
		return ""
	}
	src := cp.SourceStreams[o.Source]
	qp, _ := src.Parameters["queue_path"].(string)
	part, err1 := strconv.Atoi(o.SourcePartition)
	off, err2 := strconv.ParseUint(o.Offset, 10, 64)
	if src.SourceClassName != "QueueSource" || qp == "" || err1 != nil || err2 != nil {
		return ""
	}
	key := qp + "\x00" + o.SourcePartition + "\x00" + o.Offset
	c.poisonMu.Lock()
	row, ok := c.poison[key]
	c.poisonMu.Unlock()
	if ok {
		return row
	}
	q, err := queue.Open(ctx, c.t.store, qp)
	if err != nil {
		return ""
	}
	rows, err := q.Read(ctx, part, off, 1)
	if err != nil || len(rows) == 0 || rows[0].Index != off {
		return ""
	}
	b, err := json.Marshal(rows[0].Row)
	if err != nil {
		return ""
	}
	c.poisonMu.Lock()
	if c.poison == nil || len(c.poison) >= 1024 {
		c.poison = map[string]string{} // bounded: failures come and go
	}
	c.poison[key] = string(b)
	c.poisonMu.Unlock()
	return string(b)
}

// commands are the CLI commands of the page's controls.
func (c *console) commands() map[string]string {
	if c.t.mode == "controller" {
		return map[string]string{"status": "curl http://ADMIN/status", "drain": "curl -X POST -H 'Authorization: Bearer TOKEN' 'http://ADMIN/drain?worker=ID'"}
	}
	return map[string]string{"status": "weir pipeline status " + c.t.cli, "pause": "weir pipeline pause " + c.t.cli,
		"start": "weir pipeline start " + c.t.cli, "stop": "weir pipeline stop " + c.t.cli}
}

// actions are what the CLI offers for a failing partition.
func (c *console) actions(partition, worker string, o *failureOrigin) []cliAction {
	var out []cliAction
	if c.t.mode == "controller" {
		out = append(out, cliAction{"read the whole status (every failing partition, its error)", "curl http://ADMIN/status"})
		if worker != "" {
			out = append(out, cliAction{"move the worker's jobs elsewhere (if the failure is the worker's)",
				"curl -X POST -H 'Authorization: Bearer TOKEN' 'http://ADMIN/drain?worker=" + worker + "'"})
		}
		out = append(out, cliAction{"after fixing the code: restart the workers with the new binary, one at a time", "kill -TERM <worker pid>; weir worker …"})
		return out
	}
	out = append(out, cliAction{"read the whole status (every failing partition, its error)", "weir pipeline status " + c.t.cli})
	if o != nil && o.Offset != "" {
		if cp := c.t.spec.Computations[partitionComputation(partition)]; cp != nil && cp.SourceStreams[o.Source] != nil {
			if qp, _ := cp.SourceStreams[o.Source].Parameters["queue_path"].(string); qp != "" {
				out = append(out, cliAction{"read the poison row", fmt.Sprintf("weir queue read %s --partition %s --offset %s --limit 1 %s", c.t.cli, o.SourcePartition, o.Offset, qp)})
			}
		}
	}
	if o != nil && o.Call == "message" {
		comp := partitionComputation(partition)
		if o.Offset != "" {
			out = append(out, cliAction{"skip the poison message (recorded in the store; the partition goes on)",
				fmt.Sprintf("weir pipeline skip %s --computation %s --source-partition %s --offset %s", c.t.cli, comp, o.SourcePartition, o.Offset)})
		} else {
			out = append(out, cliAction{"skip the poison message (recorded in the store; the partition goes on)",
				fmt.Sprintf("weir pipeline skip %s --computation %s --message %s", c.t.cli, comp, o.Message)})
		}
	}
	out = append(out,
		cliAction{"stop retrying: pause the pipeline (in-flight data stays)", "weir pipeline pause " + c.t.cli},
		cliAction{"after fixing the code (or making it skip the message): drain, then run the fixed build", "weir pipeline stop " + c.t.cli + "; weir run " + c.t.cli + " --spec FILE"},
	)
	return out
}

func sourceLabel(src *spec.Source) string {
	for _, k := range []string{"queue_path", "topic", "url"} {
		if v, ok := src.Parameters[k].(string); ok {
			return src.SourceClassName + " " + v
		}
	}
	return src.SourceClassName
}

// sourceLags returns the lag (rows not yet committed) of every QueueSource
// partition, by partition id.
func sourceLags(ctx context.Context, st store.Store, p *spec.Pipeline) map[string]int64 {
	lags, _ := queueSourceLags(ctx, st, p)
	return lags
}

// queueSourceLags is sourceLags plus the rows those partitions hold.
func queueSourceLags(ctx context.Context, st store.Store, p *spec.Pipeline) (lags map[string]int64, rows uint64) {
	out := map[string]int64{}
	for _, name := range sortedNames(p.Computations) {
		for _, src := range p.Computations[name].SourceStreams {
			if src.SourceClassName != "QueueSource" {
				continue
			}
			qp, _ := src.Parameters["queue_path"].(string)
			cp, _ := src.Parameters["consumer_path"].(string)
			q, err := queue.Open(ctx, st, qp)
			if err != nil {
				continue
			}
			offs, err := q.ConsumerOffsets(ctx, cp)
			if err != nil {
				continue
			}
			for part, off := range offs {
				if n, err := q.Len(ctx, part); err == nil {
					out[name+"@"+strconv.Itoa(part)] = int64(n) - int64(off)
					rows += n
				}
			}
		}
	}
	return out, rows
}

// routes adds the console's routes to mux. The page and its assets hold
// no data; /console/data is behind whatever guards mux.
func (c *console) routes(mux *http.ServeMux) {
	mux.HandleFunc("GET /{$}", consolePage)
	mux.HandleFunc("GET /favicon.ico", consolePage)
	mux.HandleFunc("GET /console/{file}", func(w http.ResponseWriter, req *http.Request) {
		if req.PathValue("file") != "data" {
			consolePage(w, req)
			return
		}
		c.serveData(w, req)
	})
}

// serveData answers GET /console/data (?window=…): the page's snapshot.
func (c *console) serveData(w http.ResponseWriter, req *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	json.NewEncoder(w).Encode(c.data(req.Context(), parseWindow(req.URL.Query().Get("window"))))
}

// consolePage serves the page (GET /) and its assets (GET /console/…).
func consolePage(w http.ResponseWriter, req *http.Request) {
	dist, _ := fs.Sub(consoleFiles, "console/dist")
	switch f := strings.TrimPrefix(req.URL.Path, "/console/"); f {
	case "/favicon.ico":
		w.WriteHeader(http.StatusNoContent) // none: a browser asks for it
	case "/":
		serveEmbedded(w, dist, "index.html", "text/html; charset=utf-8")
	case "console.js":
		serveEmbedded(w, dist, f, "text/javascript; charset=utf-8")
	case "console.css":
		serveEmbedded(w, dist, f, "text/css; charset=utf-8")
	default:
		http.NotFound(w, req)
	}
}

// isConsoleAsset reports whether a request is for the page or its assets,
// which hold no data (served without the cluster token: a browser cannot
// send it on navigation; the page sends it with every data request).
func isConsoleAsset(r *http.Request) bool {
	switch r.URL.Path {
	case "/", "/favicon.ico", "/console/console.js", "/console/console.css":
		return r.Method == http.MethodGet
	}
	return false
}

func serveEmbedded(w http.ResponseWriter, dist fs.FS, name, ctype string) {
	b, err := fs.ReadFile(dist, name)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", ctype)
	// The page may not be framed by another site, nor load anything but
	// its own assets.
	w.Header().Set("X-Frame-Options", "DENY")
	w.Header().Set("Content-Security-Policy", "default-src 'self'; style-src 'self' 'unsafe-inline'; frame-ancestors 'none'")
	w.Write(b)
}

// sortFailures orders failures by computation, then partition.
func sortFailures(fs []consoleFailure) {
	sort.SliceStable(fs, func(i, j int) bool {
		return fs[i].Computation < fs[j].Computation || fs[i].Computation == fs[j].Computation && fs[i].Partition < fs[j].Partition
	})
}
