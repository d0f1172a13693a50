package httpsink

// The fault test of the issue: the real engine (Pebble store, controller,
// workers) runs source → Reader → Render (a Transform emitting one row with a
// string payload per input) → AsyncHttpSink, against a receiver that fails at
// random — 5xx, a connection reset after applying the request, an answer
// slower than attempt_timeout after applying it — while jobs crash at the
// epoch's crash points and every worker is killed and restarted from time to
// time. An operator restarts the workers whenever a sink's delivery stopped
// (retries exhausted), as Flow expects.
//
// It proves the at-least-once contract with stable keys: every input reached
// the receiver at least once; every request for one payload carried the same
// Idempotency-Key; and the receiver's set of distinct keys is exactly one key
// per input. (It is also the test that found reloaded outputs of an idle job
// never being sent; see AsyncHttpSink.PendingSync.)

import (
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weir-stream/weir"
	"github.com/weir-stream/weir/board"
	"github.com/weir-stream/weir/builtin"
	"github.com/weir-stream/weir/clock"
	"github.com/weir-stream/weir/connector"
	"github.com/weir-stream/weir/controller"
	"github.com/weir-stream/weir/internal/enginetest"
	"github.com/weir-stream/weir/internal/testconn"
	"github.com/weir-stream/weir/plan"
	pstore "github.com/weir-stream/weir/store/pebble"
	"github.com/weir-stream/weir/transport"
	"github.com/weir-stream/weir/worker"
)

// faultyReceiver applies requests (records their payload) and fails at
// random. It deduplicates nothing: it records what arrived.
type faultyReceiver struct {
	attemptTimeout time.Duration
	// stubborn is a payload whose first stubbornFails requests get a 503,
	// so that some job exhausts max_attempt_count on it.
	stubborn      string
	stubbornFails int

	mu            sync.Mutex
	rnd           *rand.Rand
	requests      int
	faults        map[string]int
	applied       map[string]int             // payload → times applied
	keysOfPayload map[string]map[string]bool // payload → keys seen
	payloadOfKey  map[string]string
	conflicts     []string
}

func newFaultyReceiver(seed uint64, attemptTimeout time.Duration) *faultyReceiver {
	return &faultyReceiver{
		attemptTimeout: attemptTimeout,
		rnd:            rand.New(rand.NewPCG(seed, 99)),
		faults:         map[string]int{},
		applied:        map[string]int{},
		keysOfPayload:  map[string]map[string]bool{},
		payloadOfKey:   map[string]string{},
	}
}

func (f *faultyReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, err := io.ReadAll(r.Body)
	if err != nil {
		return // the client went away mid-body: nothing arrived
	}
	payload, key := string(b), r.Header.Get("Idempotency-Key")
	f.mu.Lock()
	f.requests++
	if f.keysOfPayload[payload] == nil {
		f.keysOfPayload[payload] = map[string]bool{}
	}
	f.keysOfPayload[payload][key] = true
	if p, ok := f.payloadOfKey[key]; ok && p != payload {
		f.conflicts = append(f.conflicts, fmt.Sprintf("key %s carried %q and %q", key, p, payload))
	}
	f.payloadOfKey[key] = payload
	roll := f.rnd.Float64()
	kind := "ok"
	switch {
	case payload == f.stubborn && f.stubbornFails > 0:
		f.stubbornFails--
		roll, kind = 0, "5xx"
	case roll < 0.08:
		kind = "5xx"
	case roll < 0.16:
		kind = "reset-after-apply"
	case roll < 0.20:
		kind = "slow-after-apply"
	}
	f.faults[kind]++
	if kind != "5xx" {
		f.applied[payload]++
	}
	code := []int{500, 502, 503, 504}[f.rnd.IntN(4)]
	f.mu.Unlock()

	switch kind {
	case "5xx":
		w.WriteHeader(code)
	case "reset-after-apply":
		hijackClose(w)
	case "slow-after-apply":
		select {
		case <-r.Context().Done():
		case <-time.After(3 * f.attemptTimeout):
		}
		w.WriteHeader(http.StatusOK)
	default:
		w.WriteHeader(http.StatusOK)
	}
}

func TestFaultyReceiverWithRestarts(t *testing.T) {
	const (
		inputs         = 300
		seed           = 20260101
		attemptTimeout = 100 * time.Millisecond
		secret         = "fault-test-secret-value"
	)
	ctx := context.Background()
	timeoutsBefore := counterValue(t, metricAttemptFailures, "http_fault", "reason", reasonTimeout)
	rcv := newFaultyReceiver(seed, attemptTimeout)
	rcv.stubborn, rcv.stubbornFails = payloadOf(inputs/2), 8
	srv := httptest.NewServer(rcv)
	defer srv.Close()

	// Input: rows {key, n} over two source partitions.
	rnd := rand.New(rand.NewPCG(seed, 1))
	parts := map[string][]weir.Row{}
	want := map[string]bool{}
	for i := 0; i < inputs; i++ {
		p := fmt.Sprintf("p%d", i%2)
		parts[p] = append(parts[p], weir.Row{"key": fmt.Sprintf("k%02d", rnd.IntN(16)), "n": int64(i)})
		want[payloadOf(int64(i))] = true
	}
	src := testconn.NewSource(parts)

	params := map[string]any{
		"url":                 srv.URL + "/ingest",
		"payload_column":      "body",
		"headers":             map[string]any{"X-Api-Key": secret},
		"attempt_timeout":     attemptTimeout.String(),
		"request_timeout":     "5s",
		"retry_initial_delay": "5ms",
		"retry_minimum_delay": "1ms",
		"retry_maximum_delay": "40ms",
		"max_attempt_count":   3,
	}
	var sinksMu sync.Mutex
	var sinks []*AsyncHttpSink
	newSink := func() (connector.Sink, error) {
		s, err := New(connector.SinkParams{SinkID: "http_fault", Path: "computations.Render.sinks.http", Parameters: params}, Options{})
		if err != nil {
			return nil, err
		}
		sinksMu.Lock()
		sinks = append(sinks, s)
		sinksMu.Unlock()
		return s, nil
	}

	render := weir.Transform(func(_ weir.Context, m *weir.Message, out weir.Output) error {
		n, ok := m.Payload["n"].(int64)
		if !ok {
			return fmt.Errorf("Render: message %s has no int64 column n", m.ID)
		}
		return out.Add("bodies", weir.Row{"key": m.Payload["key"], "body": payloadOf(n)})
	})
	batch := plan.BatchPlan{MaxRows: 20, EmptyBackoff: 2 * time.Millisecond}
	pl := &plan.Plan{Computations: map[string]*plan.CompPlan{
		"Reader": {
			Code: builtin.Passthrough(weir.KindTransform), Source: src, SourceStream: "events",
			Outputs: []string{"rows"}, Batch: batch,
		},
		"Render": {
			Code: render, GroupBy: []string{"key"}, Partitions: 2,
			Inputs: []string{"rows"}, Outputs: []string{"bodies"}, Batch: batch,
			Sinks: []plan.SinkPlan{{ID: "http", InputStream: "bodies", New: newSink}},
		},
	}}

	clk := clock.NewManual(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	st, err := pstore.Open(t.TempDir(), pstore.Options{Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	crashes := enginetest.NewCrashes(seed, 0.04, 15)
	engineLogs := &logs{}
	hub, brd := transport.NewHub(64<<10), board.NewBoard()
	env := worker.Env{Plan: pl, Store: st, Hub: hub, Board: brd, Hooks: crashes, Logf: engineLogs.logf}
	workers := []*worker.Worker{worker.New("w0", st, env), worker.New("w1", st, env)}
	defer func() {
		for _, w := range workers {
			w.Restart() // stops every job
		}
	}()
	ctl, err := controller.New(controller.Config{
		Plan: pl, Store: st, Hub: hub, Board: brd, Workers: worker.ForController(workers),
		LeaseTimeout: 5 * time.Second, LeasePingPeriod: time.Second, LostWorkerTimeout: 2500 * time.Millisecond,
		// The clock stands still: crashed jobs restart in the next cycle.
		RestartBackoff: -1, Rand: rand.New(rand.NewPCG(seed, 11)), Logf: engineLogs.logf,
	})
	if err != nil {
		t.Fatal(err)
	}

	killAll := func() {
		for _, w := range workers {
			w.Restart()
		}
	}
	kills, operatorRestarts := 0, 0
	handled := map[*AsyncHttpSink]bool{}
	killRnd := rand.New(rand.NewPCG(seed, 5))
	deadline := time.Now().Add(50 * time.Second)
	for ctl.State() != controller.Completed {
		if time.Now().After(deadline) {
			sinksMu.Lock()
			var sts []string
			for _, s := range sinks[max(0, len(sinks)-4):] {
				sts = append(sts, fmt.Sprintf("%+v", s.Status()))
			}
			sinksMu.Unlock()
			rcv.mu.Lock()
			got := fmt.Sprintf("%d requests, %d keys, faults %v", rcv.requests, len(rcv.payloadOfKey), rcv.faults)
			rcv.mu.Unlock()
			t.Fatalf("not completed: state %s, partitions %+v\nlast sinks: %s\nreceiver: %s\nlogs:\n%s",
				ctl.State(), ctl.Partitions(), strings.Join(sts, "\n"), got, tail(engineLogs.all(), 40))
		}
		for _, w := range workers {
			w.Heartbeat()
		}
		if err := ctl.Cycle(ctx); err != nil {
			t.Fatal(err)
		}
		// Kill the whole pipeline's jobs now and then.
		if kills < 5 && killRnd.Float64() < 0.01 {
			kills++
			killAll()
		}
		// An operator restarts the jobs when a sink's delivery stopped.
		sinksMu.Lock()
		for _, s := range sinks {
			if !handled[s] && s.Failure() != nil {
				handled[s] = true
				operatorRestarts++
				t.Logf("delivery stopped (%v); restarting the jobs", s.Failure())
				killAll()
			}
		}
		sinksMu.Unlock()
		time.Sleep(2 * time.Millisecond)
	}

	// Oracle.
	rcv.mu.Lock()
	defer rcv.mu.Unlock()
	for _, c := range rcv.conflicts {
		t.Error(c)
	}
	missing := 0
	for p := range want {
		if rcv.applied[p] == 0 {
			missing++
			if missing <= 5 {
				t.Errorf("payload %s never applied", p)
			}
		}
		if keys := rcv.keysOfPayload[p]; len(keys) != 1 {
			t.Errorf("payload %s arrived with %d different keys %v, want 1", p, len(keys), sortedKeys(keys))
		}
	}
	if missing > 0 {
		t.Errorf("%d of %d inputs never reached the receiver", missing, inputs)
	}
	distinct := len(rcv.payloadOfKey)
	if distinct != inputs {
		t.Errorf("%d distinct keys, want %d (one per input)", distinct, inputs)
	}
	for k, p := range rcv.payloadOfKey {
		if !want[p] {
			t.Errorf("key %s carried an unknown payload %q", k, p)
		}
		if b, err := hex.DecodeString(k); err != nil || len(b) == 0 {
			t.Errorf("key %q is not the hex of a message id", k)
		}
	}
	if strings.Contains(engineLogs.all(), secret) {
		t.Error("the header value appeared in the logs")
	}

	// The run must have exercised what it claims to.
	var sinkAttempts, sinkRetries, sinkFailures int64
	sinksMu.Lock()
	for _, s := range sinks {
		st := s.Status()
		sinkAttempts += st.Attempts
		sinkRetries += st.Retries
		sinkFailures += st.AttemptFailures
	}
	instances := len(sinks)
	sinksMu.Unlock()
	if crashes.Total() == 0 || kills == 0 {
		t.Errorf("crashes %d, kills %d: the run did not restart jobs", crashes.Total(), kills)
	}
	for _, kind := range []string{"5xx", "reset-after-apply", "slow-after-apply"} {
		if rcv.faults[kind] == 0 {
			t.Errorf("no %s fault was injected", kind)
		}
	}
	if operatorRestarts == 0 {
		t.Error("no sink exhausted its retries: the stopped-progress path was not exercised")
	}
	// Slow answers usually fail attempts by attempt_timeout, unless a crash
	// closed the sink first (TestRetriesExhausted covers timeouts alone).
	timeouts := counterValue(t, metricAttemptFailures, "http_fault", "reason", reasonTimeout) - timeoutsBefore
	if rcv.requests <= distinct {
		t.Errorf("%d requests for %d keys: no request was repeated", rcv.requests, distinct)
	}
	appliedTwice := 0
	for _, n := range rcv.applied {
		if n > 1 {
			appliedTwice++
		}
	}
	t.Logf("inputs %d; receiver: %d requests, %d distinct keys, %d repeated requests (retries + replays), "+
		"%d payloads applied more than once (deduplicable by key), faults %v",
		inputs, rcv.requests, distinct, rcv.requests-distinct, appliedTwice, rcv.faults)
	t.Logf("sinks: %d instances, %d attempts, %d retries, %d failed attempts (%v by timeout); "+
		"crashes %v, pipeline kills %d, operator restarts %d; controller %+v",
		instances, sinkAttempts, sinkRetries, sinkFailures, timeouts, crashes.Injected, kills, operatorRestarts, ctl.Stats())
}

func payloadOf(n int64) string { return fmt.Sprintf(`{"event":%d}`, n) }

func tail(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
