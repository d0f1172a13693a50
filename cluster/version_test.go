package cluster

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TestProtocolVersions: a worker serves controllers one protocol version
// apart and refuses one further apart (an absent version is 1: a build
// before versions, now two apart) with an error naming both versions — not
// the deposed error, which would make that controller stand by; a
// controller gives no job to a worker whose registration names a version
// further apart.
func TestProtocolVersions(t *testing.T) {
	st, _ := testStore(t)
	ctx := context.Background()
	w := testWorker(t, st, WorkerConfig{Release: "test-release"})
	defer w.Node().Close()
	for term, v := range []int{ProtocolVersion - 1, ProtocolVersion, ProtocolVersion + 1} {
		rep, err := w.sync(ctx, &SyncRequest{Term: uint64(term + 1), Version: v})
		if err != nil || rep.Version != ProtocolVersion {
			t.Fatalf("Sync of a version %d controller: %+v, %v", v, rep, err)
		}
	}
	far := ProtocolVersion + 2
	_, err := w.sync(ctx, &SyncRequest{Term: 10, Version: far})
	want := fmt.Sprintf("control protocol version %d, the controller %d", ProtocolVersion, far)
	if status.Code(err) != codes.Unimplemented || !strings.Contains(err.Error(), want) || isDeposed(err) {
		t.Fatalf("Sync of a version %d controller: %v; want Unimplemented naming %q", far, err, want)
	}
	if _, err := w.start(ctx, &StartRequest{Term: 10, Version: far}); status.Code(err) != codes.Unimplemented {
		t.Fatalf("Start of a version %d controller: %v", far, err)
	}
	if _, err := w.sync(ctx, &SyncRequest{Term: 11}); status.Code(err) != codes.Unimplemented {
		t.Fatalf("Sync of a controller that sends no version (1): %v; want Unimplemented", err)
	}

	regs, err := Registrations(ctx, st)
	if err != nil || len(regs) != 1 || regs[0].Version != ProtocolVersion || regs[0].Release != "test-release" {
		t.Fatalf("registrations %+v, %v; want version %d and the release", regs, err, ProtocolVersion)
	}
	var logged []string
	p := NewPool(PoolConfig{Store: st, Logf: func(f string, a ...any) { logged = append(logged, fmt.Sprintf(f, a...)) }})
	old := p.entry(ctx, Registration{ID: "old", Addr: "a", Incarnation: 1, Version: ProtocolVersion - 1})
	future := p.entry(ctx, Registration{ID: "future", Addr: "b", Incarnation: 1, Version: far, Release: "weir 9"})
	now := st.Now()
	for _, rw := range []*RemoteWorker{old, future} {
		rw.mu.Lock()
		rw.lastBeat = now
		rw.mu.Unlock()
	}
	if !old.AliveAt(now, time.Second) || future.AliveAt(now, time.Second) {
		t.Fatalf("alive: a previous version's worker %v, a version %d worker %v; want true, false", old.AliveAt(now, time.Second), far, future.AliveAt(now, time.Second))
	}
	if !strings.Contains(strings.Join(logged, "\n"), fmt.Sprintf("worker future speaks control protocol version %d, this controller %d", far, ProtocolVersion)) {
		t.Fatalf("no log naming both versions: %q", logged)
	}
	// A live worker of the previous version cannot quiesce: no rescale
	// while it runs.
	if err := p.CanRescale(); err == nil || !strings.Contains(err.Error(), "worker old") || !strings.Contains(err.Error(), fmt.Sprintf("version %d", ProtocolVersion-1)) {
		t.Fatalf("CanRescale with a version %d worker alive: %v; want a refusal naming it", ProtocolVersion-1, err)
	}
	for _, s := range p.Status() {
		if s.ID == "future" && (!s.Incompatible || s.Version != far || s.Release != "weir 9") {
			t.Fatalf("status of the incompatible worker: %+v", s)
		}
	}
}
