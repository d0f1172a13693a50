package kafka

// Sink-level tests of KafkaSink's exactly-once machinery against kfake:
// writes land once in read_committed, a restart skips what the marker
// covers, a commit whose answer is lost is not written twice, a zombie
// instance is fenced, and a lost marker stops the sink.

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-stream/weir"
	"github.com/weir-stream/weir/connector"
)

// payloadNs returns the "n" column of each record's JSON value.
func payloadNs(t testing.TB, recs []*kgo.Record) []int64 {
	t.Helper()
	var out []int64
	for _, r := range recs {
		var v struct {
			N int64 `json:"n"`
		}
		if err := json.Unmarshal(r.Value, &v); err != nil {
			t.Fatalf("record value %q: %v", r.Value, err)
		}
		out = append(out, v.N)
	}
	return out
}

func checkOnce(t testing.TB, got []int64, want int) {
	t.Helper()
	seen := map[int64]int{}
	for _, n := range got {
		seen[n]++
	}
	for i := 0; i < want; i++ {
		if seen[int64(i)] != 1 {
			t.Errorf("message %d seen %d times", i, seen[int64(i)])
		}
	}
	if len(got) != want {
		t.Errorf("got %d records, want %d", len(got), want)
	}
}

func newTestSink(t testing.TB, sp connector.SinkParams) *Sink {
	t.Helper()
	s, err := NewSink(sp, testOptions(t.Logf))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// TestSinkExactlyOnceRestart: messages written by one instance, then a
// restart from state that did not record the last writes (crash after the
// Kafka commit, before the epoch recorded it): the new instance acks the
// covered messages without writing them; read_committed sees each once,
// with the message id header.
func TestSinkExactlyOnceRestart(t *testing.T) { testSinkExactlyOnceRestart(t, kfakeCluster) }

func testSinkExactlyOnceRestart(t *testing.T, newC clusterFunc) {
	c := newC(t, map[string]int32{"out": 3})
	h := newSinkHarness(t)
	msgs := messages(100, "k", 0, 50)

	s1 := newTestSink(t, sinkParams(c, nil))
	h.init(s1)
	if err := h.epoch(s1, msgs[:30]...); err != nil {
		t.Fatal(err)
	}
	if err := h.drain(s1, idsOf(msgs[:30])); err != nil {
		t.Fatal(err)
	}
	// The state is now at 30 persisted. Write 20 more, let Kafka commit
	// them, but "crash" before an epoch records them: the state keeps
	// persisted 30 with the bound raised to 50.
	if err := h.epoch(s1, msgs[30:]...); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return len(readCommitted(t, c, "out")) == 50 })
	s1.Close()

	s2 := newTestSink(t, sinkParams(c, nil))
	h.init(s2)
	h.writeAll(s2, msgs[30:], msgs)
	recs := readCommitted(t, c, "out")
	checkOnce(t, payloadNs(t, recs), 50)
	for _, r := range recs {
		if len(r.Headers) != 1 || r.Headers[0].Key != "weir-message-id" || len(r.Headers[0].Value) == 0 {
			t.Fatalf("record headers %v, want weir-message-id", r.Headers)
		}
		if string(r.Key) != "k" {
			t.Fatalf("record key %q, want k", r.Key)
		}
	}
	// The marker says 50, as this producer.
	adm := kadm.NewClient(newClient(t, c))
	offs, err := adm.FetchOffsets(context.Background(), s2.TransactionalID())
	if err != nil {
		t.Fatal(err)
	}
	o, ok := offs.Lookup("out", 0)
	if !ok || o.At != 50 {
		t.Fatalf("marker %+v, want offset 50", o)
	}
	if p, seq, ok := parseMarkerMetadata(o.Metadata); !ok || p != s2.Producer() || seq != 50 {
		t.Fatalf("marker metadata %q", o.Metadata)
	}
}

// TestSinkZombieFenced: two instances with the same persisted state (a
// zombie job and its replacement). The replacement's start-up fences the
// zombie: the zombie's next transaction fails with PRODUCER_FENCED, its
// Sync reports ErrFenced (the broker answers the zombie's produce with
// INVALID_PRODUCER_EPOCH or PRODUCER_FENCED), and nothing it wrote after the fence is visible
// to read_committed; the replacement's messages are, once each.
func TestSinkZombieFenced(t *testing.T) { testSinkZombieFenced(t, kfakeCluster) }

func testSinkZombieFenced(t *testing.T, newC clusterFunc) {
	c := newC(t, map[string]int32{"out": 2})
	h := newSinkHarness(t)
	zombie := newTestSink(t, sinkParams(c, nil))
	h.init(zombie)
	first := messages(100, "k", 0, 10)
	if err := h.epoch(zombie, first...); err != nil {
		t.Fatal(err)
	}
	if err := h.drain(zombie, idsOf(first)); err != nil {
		t.Fatal(err)
	}

	// The replacement starts from the same state and takes over.
	hr := newSinkHarness(t)
	hr.state = append([]byte(nil), h.state...)
	live := newTestSink(t, sinkParams(c, nil))
	hr.init(live)
	liveMsgs := messages(200, "live", 10, 10)
	if err := hr.epoch(live, liveMsgs...); err != nil {
		t.Fatal(err)
	}
	if err := hr.drain(live, idsOf(liveMsgs)); err != nil {
		t.Fatal(err)
	}

	// The zombie keeps writing its own next messages (same seqNos).
	zombieMsgs := messages(200, "zombie", 10, 10)
	if err := h.epoch(zombie, zombieMsgs...); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return zombie.Failure() != nil })
	err := zombie.Failure()
	if !errors.Is(err, ErrFenced) || !(errors.Is(err, kerr.ProducerFenced) || errors.Is(err, kerr.InvalidProducerEpoch)) {
		t.Fatalf("zombie failure %v, want ErrFenced wrapping PRODUCER_FENCED or INVALID_PRODUCER_EPOCH", err)
	}
	if err := h.epoch(zombie); !errors.Is(err, ErrFenced) {
		t.Fatalf("zombie Sync: %v, want ErrFenced", err)
	}
	recs := readCommitted(t, c, "out")
	for _, r := range recs {
		if string(r.Key) == "zombie" {
			t.Fatalf("a zombie record is visible to read_committed: %s", r.Value)
		}
	}
	checkOnce(t, payloadNs(t, recs), 20)
}

// TestSinkMarkerLost: the state says messages up to seqNo 20 may be in
// Kafka (the bound was raised and the writes ran), but the marker group is
// gone: a new instance refuses to write, with an error naming the group
// and the seqNo range; allow_missing_progress_marker lets it resume.
func TestSinkMarkerLost(t *testing.T) { testSinkMarkerLost(t, kfakeCluster) }

func testSinkMarkerLost(t *testing.T, newC clusterFunc) {
	c := newC(t, map[string]int32{"out": 1})
	h := newSinkHarness(t)
	s1 := newTestSink(t, sinkParams(c, nil))
	h.init(s1)
	msgs := messages(100, "k", 0, 20)
	// One epoch: the bound (20) is recorded; the writes run after Commit,
	// and no later epoch records them as persisted.
	if err := h.epoch(s1, msgs...); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return len(readCommitted(t, c, "out")) == 20 })
	s1.Close()
	txnID := s1.TransactionalID()
	adm := kadm.NewClient(newClient(t, c))
	if _, err := adm.DeleteGroups(context.Background(), txnID); err != nil {
		t.Fatal(err)
	}

	s2 := newTestSink(t, sinkParams(c, nil))
	h.init(s2)
	err := h.epoch(s2, msgs...)
	if !errors.Is(err, ErrMarkerLost) {
		t.Fatalf("Sync with the marker gone: %v, want ErrMarkerLost", err)
	}
	for _, want := range []string{"progress marker missing", txnID, "(0, 20]", "allow_missing_progress_marker"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
	s2.Close()
	if n := len(readCommitted(t, c, "out")); n != 20 {
		t.Fatalf("%d records after the refused start, want 20", n)
	}

	// The operator accepts duplicates for the uncertain range.
	s3 := newTestSink(t, sinkParams(c, map[string]any{"allow_missing_progress_marker": true}))
	h.init(s3)
	if err := h.epoch(s3, msgs...); err != nil {
		t.Fatal(err)
	}
	if err := h.drain(s3, idsOf(msgs)); err != nil {
		t.Fatal(err)
	}
	if n := len(readCommitted(t, c, "out")); n != 40 {
		t.Fatalf("%d records, want 40 (the uncertain 20 written again)", n)
	}
	if !strings.Contains(h.logText(), "allow_missing_progress_marker is set") {
		t.Errorf("no log line about the override:\n%s", h.logText())
	}
}

// TestSinkFreshStartCommitsMarker: a sink's first start commits an initial
// marker before any bound is raised, so a crash right after the first
// epoch (bound raised, nothing written) does not look like a lost marker.
func TestSinkFreshStartCommitsMarker(t *testing.T) {
	c := newCluster(t, map[string]int32{"out": 1})
	h := newSinkHarness(t)
	s1 := newTestSink(t, sinkParams(c, nil))
	h.init(s1)
	// Block writes so that nothing reaches Kafka.
	fault := c.Fault(faultProduceAll("out"))
	defer fault.Remove()
	msgs := messages(100, "k", 0, 5)
	if err := h.epoch(s1, msgs...); err != nil {
		t.Fatal(err)
	}
	s1.Close()
	fault.Remove()
	s2 := newTestSink(t, sinkParams(c, nil))
	h.init(s2)
	if err := h.epoch(s2, msgs...); err != nil {
		t.Fatalf("restart after a first epoch with no write: %v", err)
	}
	if err := h.drain(s2, idsOf(msgs)); err != nil {
		t.Fatal(err)
	}
	checkOnce(t, payloadNs(t, readCommitted(t, c, "out")), 5)
}

// TestBaseStateMirror guards decodeBaseState against the base's encoding:
// after writes are recorded, the decoded state names the base's producer
// and the last recorded id and seqNo.
func TestBaseStateMirror(t *testing.T) {
	h := newSinkHarness(t)
	w := &countingWriter{}
	base := connector.NewOrderedAsyncSink(w)
	h.init(base)
	defer base.Close()
	msgs := messages(7, "k", 0, 4)
	if err := h.epoch(base, msgs...); err != nil {
		t.Fatal(err)
	}
	if err := h.drain(base, idsOf(msgs)); err != nil {
		t.Fatal(err)
	}
	ls, err := decodeBaseState(h.state)
	if err != nil {
		t.Fatal(err)
	}
	if ls.producer != base.Producer() || ls.persistID != msgs[3].ID || ls.persistSeq != 4 {
		t.Fatalf("decoded %+v; want producer %s, id %s, seqNo 4", ls, base.Producer(), msgs[3].ID)
	}
}

type countingWriter struct{}

func (countingWriter) Write(_ context.Context, _ connector.ProducerID, _ connector.SeqNo, msgs []*weir.Message) (int, error) {
	return len(msgs), nil
}

// dropConn forwards to a broker connection; when armed, it lets one
// EndTxn commit request through and closes the connection before the
// answer can be read: the broker commits, the client does not know.
type dropConn struct {
	net.Conn
	armed *atomic.Bool
	hits  *atomic.Int32
}

func (c *dropConn) Write(b []byte) (int, error) {
	// A request starts with int32 size, int16 api key, int16 version.
	isEndTxn := len(b) >= 8 && int16(binary.BigEndian.Uint16(b[4:6])) == int16(kmsg.EndTxn)
	n, err := c.Conn.Write(b)
	if isEndTxn && err == nil && c.armed.CompareAndSwap(true, false) {
		c.hits.Add(1)
		time.Sleep(20 * time.Millisecond) // let the broker read it
		c.Conn.Close()
	}
	return n, err
}

// TestSinkCommitOutcomeLost: a Kafka transaction commits but its answer is
// lost (the connection drops after the EndTxn request). The write fails
// with an unknown outcome; the retry rebuilds the client, re-reads the
// marker, finds the messages committed and acknowledges them without
// writing them again.
func TestSinkCommitOutcomeLost(t *testing.T) {
	c := newCluster(t, map[string]int32{"out": 2})
	var armed atomic.Bool
	var hits atomic.Int32
	o := testOptions(t.Logf)
	// No request retries: kgo would otherwise resend the EndTxn on a new
	// connection and learn the outcome (the broker detects the retry).
	o.ClientOpts = append(o.ClientOpts, kgo.RequestRetries(0), kgo.Dialer(func(ctx context.Context, network, host string) (net.Conn, error) {
		conn, err := (&net.Dialer{}).DialContext(ctx, network, host)
		if err != nil {
			return nil, err
		}
		return &dropConn{Conn: conn, armed: &armed, hits: &hits}, nil
	}))
	s, err := NewSink(sinkParams(c, nil), o)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	h := newSinkHarness(t)
	h.init(s)
	first := messages(100, "k", 0, 10)
	if err := h.epoch(s, first...); err != nil {
		t.Fatal(err)
	}
	if err := h.drain(s, idsOf(first)); err != nil {
		t.Fatal(err)
	}
	armed.Store(true)
	second := messages(200, "k", 10, 10)
	if err := h.epoch(s, second...); err != nil {
		t.Fatal(err)
	}
	if err := h.drain(s, idsOf(second)); err != nil {
		t.Fatal(err)
	}
	if hits.Load() != 1 {
		t.Fatalf("the commit answer was dropped %d times, want 1", hits.Load())
	}
	if !strings.Contains(h.logText(), "commit:") {
		t.Fatalf("no failed commit in the log:\n%s", h.logText())
	}
	checkOnce(t, payloadNs(t, readCommitted(t, c, "out")), 20)
}

// TestSinkStartsWhileCoordinatorLoads: a transaction coordinator that
// answers COORDINATOR_LOAD_IN_PROGRESS to InitProducerID (a broker just
// restarted, loading __transaction_state) delays the sink's start; it
// does not fail it. franz-go gives the initialization up after such
// answers, so the sink retries it (an Apache Kafka 4.4.0 broker did this
// in TestRealBroker/SinkExactlyOnceRestart).
func TestSinkStartsWhileCoordinatorLoads(t *testing.T) {
	c := newCluster(t, map[string]int32{"out": 3})
	var refused atomic.Int32
	c.ControlKey(int16(kmsg.InitProducerID), func(r kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		req := r.(*kmsg.InitProducerIDRequest)
		if req.TransactionalID == nil || refused.Load() >= 30 {
			return nil, nil, false
		}
		refused.Add(1)
		resp := req.ResponseKind().(*kmsg.InitProducerIDResponse)
		resp.ErrorCode = kerr.CoordinatorLoadInProgress.Code
		return resp, nil, true
	})
	h := newSinkHarness(t)
	s := newTestSink(t, sinkParams(c, nil))
	h.init(s)
	msgs := messages(10, "k", 0, 10)
	if err := h.epoch(s, msgs...); err != nil {
		t.Fatal(err)
	}
	if err := h.drain(s, idsOf(msgs)); err != nil {
		t.Fatal(err)
	}
	if refused.Load() < 30 {
		t.Fatalf("the coordinator refused %d times; the test wants 30 refusals before the start", refused.Load())
	}
}
