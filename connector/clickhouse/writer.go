package clickhouse

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/weir-stream/weir"
	"github.com/weir-stream/weir/connector"
)

// mode is a class's delivery guarantee, as the writer needs to know it.
type mode int

const (
	modeExactlyOnce mode = iota
	modeAtLeastOnce
	modeAtMostOnce
)

// InsertError is why the writer gave up an INSERT ("giving up insert into
// ClickHouse"). An exactly-once or at-least-once sink that gets one stops
// (its epoch fails; the job restarts and tries again from its state); an
// at-most-once sink drops the message.
type InsertError struct {
	Shard    string // "" for a one-shard target
	Attempts int
	Class    string // permanent, unclassified (attempts ran out), transient
	// Started: the request reached the server before it failed (an
	// at-most-once sink does not retry it).
	Started bool
	// Target: the writer session could not start because validation
	// rejected the target (engine, schema, replication identity).
	Target bool
	Err    error
}

func (e *InsertError) Error() string {
	shard := ""
	if e.Shard != "" {
		shard = " (shard " + e.Shard + ")"
	}
	why := e.Class
	switch {
	case e.Started && e.Class != "permanent":
		why = "the INSERT had started; at-most-once does not retry it"
	case e.Class == "unclassified":
		why = "unclassified error, max_insert_attempts reached"
	}
	return fmt.Sprintf("giving up insert into ClickHouse%s after %d attempt(s) (%s): %v", shard, e.Attempts, why, e.Err)
}

func (e *InsertError) Unwrap() error { return e.Err }

// writer is the writer session of one sink instance: the transports to
// every host, created lazily, and what validation learned about the table
// on each host. It is safe for concurrent use.
type writer struct {
	sinkID string
	p      *Params
	mode   mode
	o      Options
	m      *sinkMetrics

	mu             sync.Mutex
	logf           func(string, ...any)
	timeout        time.Duration
	horizon        time.Duration
	horizonInserts int64
	shards         []*shardSession
	tokenWarned    bool
	// outage reports failures to reach the servers (nil before start).
	outage *connector.Outage
}

// shardSession is one shard's hosts, the current one (failover moves it)
// and the reference table found on the first host validated.
type shardSession struct {
	shard Shard
	hosts []*hostSession
	cur   int
	ref   *tableInfo
	enc   *rowEncoder
}

type hostSession struct {
	endpoint string
	tr       Transport // nil until first used
	info     *tableInfo
	warned   bool
}

func newWriter(sinkID string, p *Params, shards []Shard, m mode, o Options) *writer {
	w := &writer{sinkID: sinkID, p: p, mode: m, o: o, m: newSinkMetrics(sinkID), logf: func(string, ...any) {},
		timeout: p.WriteTimeout.Std(), horizon: p.ReplayHorizon.Std(), horizonInserts: p.ReplayHorizonInserts}
	for _, s := range shards {
		ss := &shardSession{shard: s}
		for _, h := range s.Hosts {
			ss.hosts = append(ss.hosts, &hostSession{endpoint: h})
		}
		w.shards = append(w.shards, ss)
	}
	return w
}

// start binds the writer to its sink instance's context: the log and the
// outage tracker through which a server that cannot be reached becomes
// visible (connector.Outage).
func (w *writer) start(sc connector.SinkContext) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if sc.Logf != nil {
		w.logf = sc.Logf
	}
	w.outage = connector.NewOutage(sc)
}

// warnUnreached makes an at-most-once sink's outage visible without
// stopping its job: a stop would give up what the stopped life holds (its
// queue, its started window), while an INSERT that reached no server never
// started and is kept and retried. It warns at the 1st, 2nd, 4th, 8th …
// failed attempt in a row, so a long outage stays visible in a few lines.
func (w *writer) warnUnreached(err error) {
	var re *connector.ReachError
	if w.mode != modeAtMostOnce || !errors.As(err, &re) || re.Attempt&(re.Attempt-1) != 0 {
		return
	}
	w.o.logger().Warn("ClickHouse at-most-once sink cannot reach its server; messages whose INSERT never started are kept and retried",
		"Sink", w.sinkID, "Error", re.Error())
}

// outageErr returns the current failure to reach the servers, nil if none.
func (w *writer) outageErr() error {
	w.mu.Lock()
	o := w.outage
	w.mu.Unlock()
	return o.Err()
}

func (w *writer) log(format string, args ...any) {
	w.mu.Lock()
	f := w.logf
	w.mu.Unlock()
	f(format, args...)
}

// transport returns h's transport, creating it on first use.
func (w *writer) transport(h *hostSession) (Transport, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if h.tr == nil {
		tr, err := w.o.transport()(h.endpoint, TransportConfig{User: w.p.User, Password: w.p.password, Timeout: w.timeout, TLSConfig: w.o.TLSConfig})
		if err != nil {
			return nil, err
		}
		h.tr = tr
	}
	return h.tr, nil
}

// session makes sure h's writer session has started: the table was
// inspected and accepted on h (once per host and instance) and the
// shard's encoder exists. It returns the encoder.
func (w *writer) session(ctx context.Context, ss *shardSession, h *hostSession) (*rowEncoder, *tableInfo, error) {
	w.mu.Lock()
	if h.info != nil && ss.enc != nil {
		enc, info := ss.enc, h.info
		w.mu.Unlock()
		return enc, info, nil
	}
	w.mu.Unlock()
	tr, err := w.transport(h)
	if err != nil {
		return nil, nil, err
	}
	info, err := inspectTable(ctx, tr, w.p.Database, w.p.Table)
	if err != nil {
		return nil, nil, err
	}
	rules := targetRules{exactlyOnce: w.mode == modeExactlyOnce}
	warnings, err := rules.check(info, w.p.Database, w.p.Table, len(ss.hosts))
	if err != nil {
		return nil, nil, err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if ss.ref != nil {
		if err := sameTable(ss.ref, info, w.p.Database, w.p.Table); err != nil {
			return nil, nil, err
		}
	} else {
		cols, err := insertColumns(info, w.p.Database, w.p.Table, w.p.Columns, w.p.MessageIDColumn)
		if err != nil {
			return nil, nil, err
		}
		ss.ref, ss.enc = info, newRowEncoder(w.p.Format, cols)
	}
	h.info = info
	if !h.warned {
		h.warned = true
		for _, msg := range warnings {
			w.warnLocked(msg)
		}
		if w.mode == modeExactlyOnce && info.dedup == dedupBlocks && !info.token && !w.tokenWarned {
			w.tokenWarned = true
			w.warnLocked(fmt.Sprintf("ClickHouse %s on %s does not support insert_deduplication_token: exactly-once relies on the block deduplication of %s, which drops a replayed batch because its rows are identical; two different batches with identical rows would also be dropped, so give each row something unique (message_id_column)",
				info.version, info.host, info.engine))
		}
		if w.mode == modeExactlyOnce {
			w.checkWindowsLocked(info)
		}
	}
	return ss.enc, info, nil
}

func (w *writer) warnLocked(msg string) {
	w.o.logger().Warn(msg, "Sink", w.sinkID)
	w.logf("WARNING: %s", msg)
}

// DedupWindowWarning is the structured warning logged when a known
// deduplication window of the target is shorter than the replay horizon.
const DedupWindowWarning = "ClickHouse deduplication window is shorter than replay_horizon: a replay after it is inserted again"

// checkWindowsLocked compares the table's known deduplication windows with
// replay_horizon (time windows) and replay_horizon_inserts (block-count
// windows, when set) and logs DedupWindowWarning for each shorter one.
func (w *writer) checkWindowsLocked(info *tableInfo) {
	for _, win := range info.windows {
		var short bool
		var horizon, window string
		if win.seconds {
			short = time.Duration(win.value)*time.Second < w.horizon
			horizon, window = w.horizon.String(), (time.Duration(win.value) * time.Second).String()
		} else {
			short = w.horizonInserts > 0 && win.value < w.horizonInserts
			horizon, window = fmt.Sprintf("%d inserts", w.horizonInserts), fmt.Sprintf("%d blocks", win.value)
		}
		if !short {
			continue
		}
		w.o.logger().Warn(DedupWindowWarning, slog.String("Database", w.p.Database), slog.String("Table", w.p.Table),
			slog.String("DedupWindowSetting", win.setting), slog.String("ReplayHorizon", horizon), slog.String("DedupWindow", window),
			slog.String("Host", info.host), slog.String("Sink", w.sinkID))
		w.logf("WARNING: %s: Database=%s Table=%s DedupWindowSetting=%s ReplayHorizon=%s DedupWindow=%s",
			DedupWindowWarning, w.p.Database, w.p.Table, win.setting, horizon, window)
	}
}

// encode builds a batch's body for a shard whose session started.
func encodeRows(enc *rowEncoder, msgs []*weir.Message) ([]byte, error) {
	body := make([]byte, 0, 64*len(msgs)) // grows if rows are longer
	for _, m := range msgs {
		var err error
		if body, err = enc.append(body, m); err != nil {
			return nil, err
		}
	}
	return body, nil
}

// insertRequest is the INSERT the sink sends for a body: the same for
// every transport. token "" sends none.
func (w *writer) insertRequest(enc *rowEncoder, info *tableInfo, body []byte, token string) Request {
	var cols strings.Builder
	for i, c := range enc.cols {
		if i > 0 {
			cols.WriteString(", ")
		}
		cols.WriteString(quoteIdent(c.name))
	}
	q := fmt.Sprintf("INSERT INTO %s.%s (%s) FORMAT %s", quoteIdent(w.p.Database), quoteIdent(w.p.Table), cols.String(), enc.formatName())
	var settings []Setting
	if w.mode == modeExactlyOnce {
		settings = append(settings, Setting{"insert_deduplicate", "1"})
		if token != "" && info.token {
			settings = append(settings, Setting{"insert_deduplication_token", token})
		}
	} else {
		// Without a token, block deduplication would drop a batch whose rows
		// equal an earlier one's: legitimate repeats, which at-least-once
		// must not lose.
		settings = append(settings, Setting{"insert_deduplicate", "0"})
	}
	return Request{Query: q, Settings: settings, Body: body}
}

// insert writes msgs to shard si, retrying as the error classification
// says and failing over between the shard's hosts. The body is encoded
// once, when the session has started, so every attempt sends the same
// bytes. It returns nil, ctx's error, or an *InsertError — or, for an
// at-least-once writer, the *connector.ReachError of a shard none of whose
// hosts could be reached for syncReachPatience: its INSERT runs in Sync,
// which blocks the job, so the job could not report the failure while the
// writer retries; failing the epoch reports it, and the job's restart is
// the retry.
//
// When every host of the shard failed in a row to be reached (refused,
// reset, timed out: a transient failure without an answer), the failure
// is recorded in the writer's outage, which the sink reports as its
// Failure until a write succeeds (connector.Outage): the partition's job
// stops at once, visibly, and restarts with backoff. Until then, a
// host's failure only fails over to the next one.
func (w *writer) insert(ctx context.Context, si int, msgs []*weir.Message, token string) error {
	ss := w.shards[si]
	var body []byte
	unreached := 0            // hosts that could not be reached in a row
	var unreachedAt time.Time // when the first of them failed
	for attempt := 1; ; attempt++ {
		w.mu.Lock()
		h := ss.hosts[ss.cur]
		w.mu.Unlock()
		var started atomic.Bool
		enc, info, err := w.session(ctx, ss, h)
		target := err != nil
		if err == nil && body == nil {
			body, err = encodeRows(enc, msgs)
		}
		var tr Transport
		if err == nil {
			tr, err = w.transport(h)
		}
		if err == nil {
			req := w.insertRequest(enc, info, body, token)
			if w.mode == modeAtMostOnce {
				req.OnStart = func() { started.Store(true) }
			}
			_, err = tr.Do(ctx, req)
		}
		if err == nil {
			w.m.inserted(len(msgs))
			w.outage.Recovered()
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		cls := classify(err)
		w.m.failed(cls, failureLabel(err))
		var se *ServerError
		if cls != classTransient || errors.As(err, &se) {
			unreached = 0
			w.outage.Recovered() // the server answered
		} else {
			if unreached == 0 {
				unreachedAt = time.Now()
			}
			if unreached++; unreached >= len(ss.hosts) {
				re := w.outage.Failed(h.endpoint, err)
				if w.mode == modeAtLeastOnce && time.Since(unreachedAt) >= syncReachPatience {
					return re
				}
				w.warnUnreached(re)
			}
		}
		ie := &InsertError{Shard: ss.shard.Name, Attempts: attempt, Class: cls.String(), Started: started.Load(), Err: err}
		ie.Target = target && cls == classPermanent
		if ie.Started || cls == classPermanent || (cls == classUnclassified && attempt >= w.p.MaxInsertAttempts) {
			return ie
		}
		d := w.backoff(attempt)
		w.log("insert of %d rows (token %q) on %s failed, attempt %d (%s): %v; retrying in %v",
			len(msgs), token, h.endpoint, attempt, cls, err, d.Round(time.Millisecond))
		w.m.retried(cls)
		if err := w.o.sleep()(ctx, d); err != nil {
			return err
		}
		w.mu.Lock()
		ss.cur = (ss.cur + 1) % len(ss.hosts)
		w.mu.Unlock()
	}
}

// syncReachPatience is how long an at-least-once writer (whose INSERT
// blocks the job in Sync) retries a shard it cannot reach before it fails
// the epoch with the reason: a connection cut once is retried in place,
// a server that is down shows within about a second, well before the
// controller would declare the silent job lost.
const syncReachPatience = time.Second

// backoff is the pause after failed attempt n: retry_initial_delay ×
// 2^(n-1), at most retry_maximum_delay, ±20% jitter.
func (w *writer) backoff(n int) time.Duration {
	d := float64(w.p.RetryInitialDelay) * math.Pow(2, float64(n-1))
	if maxD := float64(w.p.RetryMaximumDelay); d > maxD || math.IsInf(d, 0) {
		d = maxD
	}
	return time.Duration(d * (0.8 + 0.4*rand.Float64()))
}

// Dynamic are the parameters that may change while an instance runs.
type Dynamic struct {
	// WriteTimeout: a change recreates the transports; the table is not
	// validated again (pause and start the pipeline for that).
	WriteTimeout time.Duration
	// ReplayHorizon and ReplayHorizonInserts: a change re-runs the
	// deduplication-window checks on the windows found at session start.
	ReplayHorizon        time.Duration
	ReplayHorizonInserts int64
	// TotalQueueBytesLimit: AtMostOnceClickHouseSink with the strategy
	// enabled only.
	TotalQueueBytesLimit int64
}

// reconfigure applies d to the writer.
func (w *writer) reconfigure(d Dynamic) error {
	if d.WriteTimeout <= 0 {
		return errors.New("clickhouse sink: write_timeout must be positive")
	}
	if d.ReplayHorizon < 0 || d.ReplayHorizonInserts < 0 {
		return errors.New("clickhouse sink: replay_horizon and replay_horizon_inserts must not be negative")
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if d.WriteTimeout != w.timeout {
		w.timeout = d.WriteTimeout
		for _, ss := range w.shards {
			for _, h := range ss.hosts {
				if h.tr != nil {
					h.tr.Close()
					h.tr = nil // recreated on next use; h.info stays
				}
			}
		}
	}
	if d.ReplayHorizon != w.horizon || d.ReplayHorizonInserts != w.horizonInserts {
		w.horizon, w.horizonInserts = d.ReplayHorizon, d.ReplayHorizonInserts
		if w.mode == modeExactlyOnce {
			for _, ss := range w.shards {
				if ss.ref != nil {
					w.checkWindowsLocked(ss.ref)
				}
			}
		}
	}
	return nil
}

func (w *writer) close() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, ss := range w.shards {
		for _, h := range ss.hosts {
			if h.tr != nil {
				h.tr.Close()
				h.tr = nil
			}
		}
	}
}
