package cli

import (
	"context"
	"embed"
	"encoding/json"
	"io/fs"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/weir-stream/weir/connector/queue"
	"github.com/weir-stream/weir/engine"
	"github.com/weir-stream/weir/spec"
	"github.com/weir-stream/weir/store"
)

// The web console, served from the admin address: GET / is the page,
// GET /console/{console.js,console.css} its assets (built from
// console/web/src by 'npm run build', committed, embedded here: users need
// no Node.js), and GET /console/data the numbers it shows. The page reads
// /console/data every second; its pause, stop and start buttons POST to
// /pipeline/{action} with the admin token (see adminauth.go), which the page
// takes from its URL fragment (#token=…, never sent to the server: 'weir
// pipeline console --data DIR' prints that URL) or a field.
//
// /console/data is built on engine.Status as it is (the "status" member is
// /status verbatim) plus what the console derives, kept apart: the graph
// from the spec, rates from a sampler, watermarks and source lag.

//go:embed console/dist
var consoleFiles embed.FS

// consoleSamplePeriod is the sampler's period; consoleHistory how many
// samples the chart keeps (10 minutes).
const (
	consoleSamplePeriod = time.Second
	consoleHistory      = 600
	// epochSamplePeriod is how often partitions' last-epoch timestamps are
	// read to count their epochs (an epoch is rarely shorter than this:
	// batch_duration defaults to 1s).
	epochSamplePeriod = 100 * time.Millisecond
	// rateWindow is the window of the per-partition epoch rate.
	rateWindow = 5 * time.Second
)

// console samples a runner's status for the console page.
type console struct {
	r      *runner
	stop   context.CancelFunc
	mu     sync.Mutex
	prev   *sample
	rates  map[string]compRates
	series []point
	epochs map[string]*epochCounter
}

// sample is one reading of the counters.
type sample struct {
	at     time.Time
	counts map[string]engineCounts
}

type engineCounts struct{ inputs, outputs, epochs uint64 }

// compRates are a computation's rates over the last sample period.
type compRates struct {
	Inputs  float64 `json:"inputs_per_s"`
	Outputs float64 `json:"outputs_per_s"`
	Epochs  float64 `json:"epochs_per_s"`
}

// point is one point of the chart: per-computation input rates and the
// total lag of queue sources.
type point struct {
	T     int64              `json:"t"` // unix seconds
	Rates map[string]float64 `json:"rates"`
	Lag   *int64             `json:"lag,omitempty"`
}

// epochCounter counts the epochs of one partition from its status's
// epoch timestamp, which changes once per epoch. (The timestamp itself is
// no clock: after a restart the store issues timestamps up to its reserve
// ahead of the wall clock, so ages are measured from when a change was
// seen.)
type epochCounter struct {
	last     store.Timestamp
	lastSeen time.Time   // when the last change was seen
	times    []time.Time // when a change was seen, within rateWindow
}

func newConsole(r *runner) *console {
	ctx, cancel := context.WithCancel(context.Background())
	c := &console{r: r, stop: cancel, rates: map[string]compRates{}, epochs: map[string]*epochCounter{}}
	go c.run(ctx)
	return c
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
			c.sampleEpochs(now)
		case now := <-slow.C:
			c.sampleCounters(ctx, now)
		}
	}
}

func (c *console) sampleEpochs(now time.Time) {
	st := c.r.eng.Board().Statuses()
	c.mu.Lock()
	defer c.mu.Unlock()
	for id, s := range st {
		e := c.epochs[string(id)]
		if e == nil {
			e = &epochCounter{last: s.Epoch}
			c.epochs[string(id)] = e
		}
		if s.Epoch != e.last {
			e.last, e.lastSeen = s.Epoch, now
			e.times = append(e.times, now)
		}
		for len(e.times) > 0 && now.Sub(e.times[0]) > rateWindow {
			e.times = e.times[1:]
		}
	}
}

func (c *console) sampleCounters(ctx context.Context, now time.Time) {
	st := c.r.eng.Status()
	cur := &sample{at: now, counts: map[string]engineCounts{}}
	for name, k := range st.Computations {
		cur.counts[name] = engineCounts{k.Inputs, k.Outputs, k.Epochs}
	}
	var lag *int64
	if l, ok := queueLag(ctx, c.r.st, c.r.spec); ok {
		lag = &l
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.prev != nil {
		d := now.Sub(c.prev.at).Seconds()
		p := point{T: now.Unix(), Rates: map[string]float64{}, Lag: lag}
		for name, k := range cur.counts {
			old := c.prev.counts[name]
			r := compRates{
				Inputs:  float64(k.inputs-old.inputs) / d,
				Outputs: float64(k.outputs-old.outputs) / d,
				Epochs:  float64(k.epochs-old.epochs) / d,
			}
			c.rates[name] = r
			p.Rates[name] = r.Inputs
		}
		c.series = append(c.series, p)
		if len(c.series) > consoleHistory {
			c.series = c.series[len(c.series)-consoleHistory:]
		}
	}
	c.prev = cur
}

// consoleData is the JSON of GET /console/data.
type consoleData struct {
	// Status is GET /status, verbatim.
	Status       engine.Status        `json:"status"`
	Graph        consoleGraph         `json:"graph"`
	Rates        map[string]compRates `json:"rates"`
	Partitions   []consolePartition   `json:"partitions"`
	Watermarks   []consoleWatermark   `json:"watermarks"`
	Series       []point              `json:"series"`
	OutboxLimits map[string]int64     `json:"outbox_limits"`
}

type consoleGraph struct {
	Nodes []graphNode `json:"nodes"`
	Edges []graphEdge `json:"edges"`
}

type graphNode struct {
	ID    string `json:"id"`
	Kind  string `json:"kind"` // source, computation, sink
	Label string `json:"label"`
	Class string `json:"class"`
}

// graphEdge is a flow between two nodes. Rate is the writer's output rate
// (or, from a source, the reader's input rate). Backlog, on an internal
// stream, is what the writer emitted that the reader has not processed yet
// (from the cumulative counters, so restarts blur it); Backpressure is set
// when it reaches 80% of the writer's outbox limit, where the writer stops
// taking input.
type graphEdge struct {
	From         string  `json:"from"`
	To           string  `json:"to"`
	Stream       string  `json:"stream"`
	Rate         float64 `json:"rate"`
	Backlog      *int64  `json:"backlog,omitempty"`
	Backpressure bool    `json:"backpressure"`
}

type consolePartition struct {
	ID          string  `json:"id"`
	Computation string  `json:"computation"`
	State       string  `json:"state"`
	Job         string  `json:"job"`
	Worker      string  `json:"worker"`
	Restarts    int     `json:"restarts"`
	LastError   string  `json:"last_error"`
	EpochsPerS  float64 `json:"epochs_per_s"`
	EpochAgeS   *int64  `json:"epoch_age_s,omitempty"`
	Lag         *int64  `json:"lag,omitempty"`
}

type consoleWatermark struct {
	Stream string `json:"stream"`
	// System is the stream's SystemWatermark (the smallest in-flight
	// SystemTimestamp over its writers), as RFC 3339; empty when unknown.
	System string `json:"system"`
	// Event is the reading computation's event watermark, if any.
	Event string `json:"event,omitempty"`
}

// data builds the console's view of the pipeline now.
func (c *console) data(ctx context.Context) consoleData {
	st := c.r.eng.Status()
	boards := c.r.eng.Board().Statuses()
	p := c.r.spec
	d := consoleData{Status: st, Rates: map[string]compRates{}, OutboxLimits: map[string]int64{}}
	c.mu.Lock()
	for k, v := range c.rates {
		d.Rates[k] = v
	}
	d.Series = append([]point(nil), c.series...)
	epochRates := map[string]float64{}
	epochSeen := map[string]time.Time{}
	for id, e := range c.epochs {
		epochRates[id] = float64(len(e.times)) / rateWindow.Seconds()
		epochSeen[id] = e.lastSeen
	}
	c.mu.Unlock()

	// The graph, from the spec.
	writer := map[string]string{}
	names := sortedNames(p.Computations)
	for _, name := range names {
		comp := p.Computations[name]
		d.OutboxLimits[name] = comp.OutputStoreCountLimit
		d.Graph.Nodes = append(d.Graph.Nodes, graphNode{ID: name, Kind: "computation", Label: name, Class: comp.ComputationClassName})
		for _, s := range comp.OutputStreamIDs {
			writer[s] = name
		}
		for _, sid := range sortedNames(comp.SourceStreams) {
			src := comp.SourceStreams[sid]
			id := "source:" + name + ":" + sid
			d.Graph.Nodes = append(d.Graph.Nodes, graphNode{ID: id, Kind: "source", Label: sourceLabel(src), Class: src.SourceClassName})
			d.Graph.Edges = append(d.Graph.Edges, graphEdge{From: id, To: name, Stream: sid, Rate: d.Rates[name].Inputs})
		}
		for _, kid := range sortedNames(comp.Sinks) {
			sk := comp.Sinks[kid]
			id := "sink:" + name + ":" + kid
			d.Graph.Nodes = append(d.Graph.Nodes, graphNode{ID: id, Kind: "sink", Label: kid, Class: sk.SinkClassName})
			d.Graph.Edges = append(d.Graph.Edges, graphEdge{From: name, To: id, Stream: strings.Join(sk.InputStreamIDs, ","), Rate: d.Rates[name].Outputs})
		}
	}
	for _, name := range names {
		for _, s := range p.Computations[name].InputStreamIDs {
			w, ok := writer[s]
			if !ok {
				continue
			}
			e := graphEdge{From: w, To: name, Stream: s, Rate: d.Rates[w].Outputs}
			if wc, rc := st.Computations[w], st.Computations[name]; len(p.Computations[name].InputStreamIDs) == 1 {
				b := int64(wc.Outputs) - int64(rc.Inputs+rc.Duplicates)
				b = max(b, 0)
				e.Backlog = &b
				e.Backpressure = float64(b) >= 0.8*float64(d.OutboxLimits[w])
			}
			d.Graph.Edges = append(d.Graph.Edges, e)
		}
	}

	// Partitions: the controller's layout, the jobs' statuses, queue lag.
	lags := sourceLags(ctx, c.r.st, p)
	now := time.Now()
	for _, ps := range st.Partitions {
		id := string(ps.Partition)
		comp, _, _ := strings.Cut(strings.SplitN(id, "@", 2)[0], "/")
		cp := consolePartition{ID: id, Computation: comp, Job: string(ps.Job), Worker: ps.Worker, Restarts: ps.Restarts,
			LastError: ps.LastError, EpochsPerS: epochRates[id]}
		b, posted := boards[ps.Partition]
		switch {
		case ps.Job == "" && ps.LastError != "":
			cp.State = "failed"
		case ps.Job == "":
			cp.State = "stopped"
		case posted && b.Drained:
			cp.State = "drained"
		case posted && b.Quiet:
			cp.State = "idle"
		default:
			cp.State = "running"
		}
		if seen := epochSeen[id]; !seen.IsZero() {
			age := int64(now.Sub(seen).Seconds())
			cp.EpochAgeS = &age
		}
		if l, ok := lags[id]; ok {
			cp.Lag = &l
		}
		d.Partitions = append(d.Partitions, cp)
	}

	// Watermarks: each internal stream's SystemWatermark is the minimum of
	// its writer partitions' reports; the event watermark is the reader's.
	sys := map[string]store.Timestamp{}
	for _, b := range boards {
		for s, ts := range b.SystemWM {
			if cur, ok := sys[s]; !ok || ts < cur {
				sys[s] = ts
			}
		}
	}
	for _, s := range sortedNames(p.Streams) {
		w := consoleWatermark{Stream: s}
		if ts, ok := sys[s]; ok && ts != 0 {
			w.System = ts.Time().UTC().Format(time.RFC3339Nano)
		}
		for _, name := range names {
			for _, in := range p.Computations[name].InputStreamIDs {
				if in == s {
					if ev := c.r.eng.Board().Control(name).EventWM; !ev.IsZero() {
						w.Event = ev.UTC().Format(time.RFC3339Nano)
					}
				}
			}
		}
		d.Watermarks = append(d.Watermarks, w)
	}
	return d
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
				}
			}
		}
	}
	return out
}

// routes adds the console's routes to mux.
func (c *console) routes(mux *http.ServeMux) {
	dist, _ := fs.Sub(consoleFiles, "console/dist")
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, req *http.Request) {
		serveEmbedded(w, dist, "index.html", "text/html; charset=utf-8")
	})
	mux.HandleFunc("GET /console/{file}", func(w http.ResponseWriter, req *http.Request) {
		switch f := req.PathValue("file"); f {
		case "console.js":
			serveEmbedded(w, dist, f, "text/javascript; charset=utf-8")
		case "console.css":
			serveEmbedded(w, dist, f, "text/css; charset=utf-8")
		case "data":
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Cache-Control", "no-store")
			json.NewEncoder(w).Encode(c.data(req.Context()))
		default:
			http.NotFound(w, req)
		}
	})
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
