package board

import (
	"testing"

	"github.com/weir-stream/weir/store"
)

// TestBoardKeepsOnlyTheOwnersStatus: once the controller assigned a
// partition, a post from any other job (a replaced job, a zombie) is
// dropped and counted; Assign and Release forget the previous job's status.
func TestBoardKeepsOnlyTheOwnersStatus(t *testing.T) {
	b := NewBoard()
	const p = "Counter/0"
	// Unassigned: any post is kept (a board used without a controller).
	b.Post(Status{Partition: p, Job: "j1", Epoch: 1})
	if s, ok := b.Status(p); !ok || s.Job != "j1" {
		t.Fatalf("unassigned partition: status %+v %v", s, ok)
	}
	b.Assign(p, "j2")
	if _, ok := b.Status(p); ok {
		t.Fatal("Assign kept the previous job's status")
	}
	b.Post(Status{Partition: p, Job: "j1", Drained: true, SystemWM: map[string]store.Timestamp{"x": 99}})
	if _, ok := b.Status(p); ok || b.DroppedPosts() != 1 {
		t.Fatalf("a replaced job's post was accepted (dropped %d)", b.DroppedPosts())
	}
	b.Post(Status{Partition: p, Job: "j2", Epoch: 5})
	if s, ok := b.Status(p); !ok || s.Job != "j2" || s.Epoch != 5 {
		t.Fatalf("owner's post: %+v %v", s, ok)
	}
	b.Release(p)
	if _, ok := b.Status(p); ok {
		t.Fatal("Release kept the removed job's status")
	}
	b.Post(Status{Partition: p, Job: "j2", Quiet: true})
	if _, ok := b.Status(p); ok || b.DroppedPosts() != 2 {
		t.Fatalf("a removed job's post was accepted (dropped %d)", b.DroppedPosts())
	}
	if n := len(b.Statuses()); n != 0 {
		t.Fatalf("Statuses has %d entries, want 0", n)
	}
}

// An idle job waits on ControlChanged: it must be closed by a change of
// UpstreamDone or Draining, and not by a watermark alone.
func TestControlChangedWakesOnDrainAndUpstreamDone(t *testing.T) {
	b := NewBoard()
	b.SetControl("C", Control{})
	ch := b.ControlChanged("C")
	b.SetControl("C", Control{InputSystemWM: map[string]store.Timestamp{"s": 5}})
	select {
	case <-ch:
		t.Fatal("closed by a watermark change")
	default:
	}
	b.SetControl("C", Control{InputSystemWM: map[string]store.Timestamp{"s": 5}, UpstreamDone: true})
	select {
	case <-ch:
	default:
		t.Fatal("not closed when UpstreamDone changed")
	}
	ch = b.ControlChanged("C")
	b.SetControl("C", Control{InputSystemWM: map[string]store.Timestamp{"s": 5}, UpstreamDone: true, Draining: true})
	select {
	case <-ch:
	default:
		t.Fatal("not closed when Draining changed")
	}
}

// The controller cycles on Decided: a post that turns a partition drained,
// or quiet while draining, signals it; a repeated one does not.
func TestDecidedSignalsDrainedPosts(t *testing.T) {
	b := NewBoard()
	signalled := func() bool {
		select {
		case <-b.Decided():
			return true
		default:
			return false
		}
	}
	b.Post(Status{Partition: "P/0"})
	if signalled() {
		t.Fatal("signalled by a busy status")
	}
	b.Post(Status{Partition: "P/0", Drained: true, Quiet: true})
	if !signalled() {
		t.Fatal("not signalled when the partition turned drained")
	}
	b.Post(Status{Partition: "P/0", Drained: true, Quiet: true})
	if signalled() {
		t.Fatal("signalled again by an unchanged status")
	}
	b.Post(Status{Partition: "P/1", Quiet: true, DrainingSeen: true})
	if !signalled() {
		t.Fatal("not signalled when a partition turned quiet while draining")
	}
}
