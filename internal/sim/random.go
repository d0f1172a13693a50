package sim

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/weir-stream/weir/job"
	"github.com/weir-stream/weir/transport"
)

// RandomRun drives the pipeline with a schedule drawn from seed: steps
// chosen among controller cycles, epochs of random partitions, clock moves,
// crashes at named points, lost acknowledgements, commits whose outcome is
// unknown and that land later, aborted leases and worker restarts (with
// Options.Balance also workers joining and draining, so that balancing
// moves jobs in the middle of everything else) — then
// runs without faults until the pipeline completes. It returns the whole
// trace. The same seed gives the same trace, bit for bit: nothing runs on
// another goroutine and every choice comes from seed.
func (s *Sim) RandomRun(seed uint64, steps int) (string, error) {
	r := rand.New(rand.NewPCG(seed, 0x5173))
	points := []job.CrashPoint{job.CrashBeforeCommit, job.CrashAfterCommitBeforeAck, job.CrashAfterAckBeforeErase}
	pick := func() transport.PartitionID {
		ps := s.Partitions()
		if len(ps) == 0 {
			return ""
		}
		return ps[r.IntN(len(ps))]
	}
	for i := 0; i < steps; i++ {
		s.printf("-- step %d: ", i)
		switch n := r.IntN(100); {
		case n < 15:
			s.printf("cycle\n")
			_ = s.Cycle()
		case n < 70:
			p := pick()
			s.printf("epoch %s\n", p)
			if p != "" {
				s.Epoch(p)
			}
		case n < 80:
			d := time.Duration(1+r.IntN(300)) * time.Millisecond
			s.printf("clock +%v\n", d)
			s.Clock.Advance(d)
		case n < 87:
			p, pt := pick(), points[r.IntN(len(points))]
			s.printf("crash %s at %s\n", p, pt)
			s.Crash(p, pt)
		case n < 92:
			p := pick()
			s.printf("lose the next ack of %s\n", p)
			s.LoseAck(p)
		case n < 96:
			p := pick()
			s.printf("hold the next commit of %s\n", p)
			s.Store.HoldNext(p)
		case n < 98:
			s.printf("land held commits\n")
			for _, err := range s.Store.Land(s.ctx) {
				s.printf("  landed: %v\n", errString(err))
			}
		default:
			w := s.Workers[r.IntN(len(s.Workers))]
			switch m := r.IntN(4); {
			case !s.o.Balance || m == 0:
				s.printf("restart worker %s\n", w.ID())
				w.Restart()
			case m == 1 && len(s.Workers) < 5:
				s.printf("worker %s joins\n", s.AddWorker().ID())
			default:
				w.draining = !w.draining
				s.printf("worker %s draining: %v\n", w.ID(), w.draining)
			}
		}
	}
	s.printf("-- without faults to completion\n")
	for _, w := range s.Workers {
		w.draining = false
	}
	clear(s.crashes)
	clear(s.Store.hold)
	for _, err := range s.Store.Land(s.ctx) {
		s.printf("  landed: %v\n", errString(err))
	}
	if !s.Run(2000, s.Completed) {
		return s.Trace(), fmt.Errorf("seed %d: not completed; state %s", seed, s.Ctl.State())
	}
	return s.Trace(), nil
}

func errString(err error) string {
	if err == nil {
		return "applied"
	}
	return err.Error()
}
