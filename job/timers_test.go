package job

import (
	"math/rand/v2"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/weir-stream/weir"
	"github.com/weir-stream/weir/msgid"
	"github.com/weir-stream/weir/plan"
)

func testTimer(i int, stream string, trigger time.Time) *timerEntry {
	k := weir.Key{Hash: uint64(i % 7), Encoded: "k" + string(rune('a'+i%7))}
	return &timerEntry{key: k, t: weir.Timer{ID: msgid.Ordered(uint64(1000+i), stream, uint64(i)), Stream: stream, Key: k, TriggerTimestamp: trigger}}
}

// TestDueTimersInOrder: due timers of both time types come out merged in
// (trigger, id) order, at most max per call, each once; timers replaced by
// an equal one with an earlier event time never fire.
func TestDueTimersInOrder(t *testing.T) {
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	s := newTimerStore("C", map[string]plan.TimerPlan{"ev": {}, "sys": {SystemTime: true}}, 0, 0)
	rnd := rand.New(rand.NewPCG(4, 4))
	var want []*timerEntry
	for i := 0; i < 500; i++ {
		stream := "ev"
		if rnd.IntN(2) == 0 {
			stream = "sys"
		}
		e := testTimer(i, stream, base.Add(time.Duration(rnd.IntN(100))*time.Second))
		if err := s.add(e); err != nil {
			t.Fatal(err)
		}
	}
	for _, e := range s.active {
		want = append(want, e)
	}
	sort.Slice(want, func(i, j int) bool { return timerLess(want[i], want[j]) })
	var got []*timerEntry
	for wm := 0; wm <= 100; wm += 10 {
		at := base.Add(time.Duration(wm) * time.Second)
		for {
			batch := s.due(at, at, 13)
			if len(batch) > 13 {
				t.Fatalf("due returned %d timers, max 13", len(batch))
			}
			for _, e := range batch {
				if e.t.TriggerTimestamp.After(at) {
					t.Fatalf("timer %s due at %v fired at watermark %v", e.t.ID, e.t.TriggerTimestamp, at)
				}
			}
			got = append(got, batch...)
			if len(batch) < 13 {
				break
			}
		}
	}
	if len(got) != len(want) {
		t.Fatalf("fired %d timers, want %d", len(got), len(want))
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("timer %d fired out of order: %s (trigger %v), want %s", i, got[i].t.ID, got[i].t.TriggerTimestamp, want[i].t.ID)
		}
	}
	if s.count() != 0 || s.bytes != 0 {
		t.Fatalf("after firing everything: %d active, %d bytes", s.count(), s.bytes)
	}
}

// TestTimerLimits: a partition may not hold more timers than
// timer_store_count_limit or timer_store_byte_size_limit; the error names
// the limit, and a replacement of an equal timer does not count twice.
func TestTimerLimits(t *testing.T) {
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	s := newTimerStore("C", map[string]plan.TimerPlan{"ev": {}}, 3, 0)
	for i := 0; i < 3; i++ {
		if err := s.add(testTimer(i, "ev", base.Add(time.Duration(i)*time.Second))); err != nil {
			t.Fatal(err)
		}
	}
	// Same stream, key and trigger as timer 0, earlier event time: replaces it.
	repl := testTimer(7, "ev", base)
	repl.t.EventTimestamp = base.Add(-time.Hour)
	if err := s.add(repl); err != nil {
		t.Fatalf("replacing an equal timer at the limit: %v", err)
	}
	err := s.add(testTimer(3, "ev", base.Add(time.Hour)))
	if err == nil || !strings.Contains(err.Error(), "timer_store_count_limit") {
		t.Fatalf("fourth timer: %v, want an error naming timer_store_count_limit", err)
	}
	b := newTimerStore("C", map[string]plan.TimerPlan{"ev": {}}, 0, 150)
	if err := b.add(testTimer(0, "ev", base)); err != nil {
		t.Fatal(err)
	}
	if err := b.add(testTimer(1, "ev", base)); err == nil || !strings.Contains(err.Error(), "timer_store_byte_size_limit") {
		t.Fatalf("second timer over the byte limit: %v", err)
	}
}
