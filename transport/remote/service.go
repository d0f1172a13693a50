package remote

import (
	"errors"
	"io"
	"sync"

	"google.golang.org/grpc"

	"github.com/weir-stream/weir/msgid"
)

// Register serves the node's Push stream on s.
func (n *Node) Register(s *grpc.Server) {
	s.RegisterService(&grpc.ServiceDesc{
		ServiceName: "weir.Transport",
		HandlerType: (*any)(nil),
		Streams: []grpc.StreamDesc{{
			StreamName: "Push", ServerStreams: true, ClientStreams: true,
			Handler: func(_ any, s grpc.ServerStream) error { return n.push(s) },
		}},
	}, n)
}

// push serves one channel's stream: it offers each message into the
// receiving life's mailbox in order — waiting for room when the mailbox is
// full, which stops reading the stream, so that HTTP/2 flow control
// backpressures the sender — and streams back the acknowledgements of the
// receiving job. It ends with a retry or fenced frame when a message
// cannot be delivered here.
func (n *Node) push(s grpc.ServerStream) error {
	ctx := s.Context()
	acks := newAckQueue()
	done := make(chan error, 1)
	go func() { done <- acks.send(s) }()
	finish := func(code byte, reason string) error {
		acks.close(&ackFrame{Code: code, Reason: reason})
		return <-done
	}
	for {
		var f pushFrame
		if err := s.RecvMsg(&f); err != nil {
			acks.close(nil)
			<-done
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		for _, m := range f.Msgs {
			for {
				code, room, reason := n.deliver(f.From, f.FromLease, f.To, f.ToLease, m.Msg, m.Size, acks.add, m.MaybeDup, m.Ordered)
				if code == replyAck {
					break
				}
				if room == nil {
					if code == replyRetry {
						n.mu.Lock()
						n.stats.Retried++
						n.mu.Unlock()
					}
					return finish(code, reason)
				}
				select {
				case <-ctx.Done():
					return finish(replyRetry, "stream ended")
				case <-room:
				}
			}
		}
	}
}

// ackQueue collects a stream's acknowledgements from the receiving job's
// goroutine (add must not block) and sends them on one goroutine.
type ackQueue struct {
	mu     sync.Mutex
	ids    []msgid.ID
	final  *ackFrame
	closed bool
	wake   chan struct{}
}

func newAckQueue() *ackQueue { return &ackQueue{wake: make(chan struct{}, 1)} }

func (q *ackQueue) add(id msgid.ID) {
	q.mu.Lock()
	if !q.closed {
		q.ids = append(q.ids, id)
	}
	q.mu.Unlock()
	q.signal()
}

func (q *ackQueue) signal() {
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// close makes send flush what it has, send final (if any) and return.
func (q *ackQueue) close(final *ackFrame) {
	q.mu.Lock()
	q.closed, q.final = true, final
	q.mu.Unlock()
	q.signal()
}

func (q *ackQueue) send(s grpc.ServerStream) error {
	for range q.wake {
		q.mu.Lock()
		ids, closed, final := q.ids, q.closed, q.final
		q.ids = nil
		q.mu.Unlock()
		if len(ids) > 0 {
			if err := s.SendMsg(&ackFrame{Code: replyAck, IDs: ids}); err != nil {
				return err
			}
		}
		if closed {
			if final != nil {
				return s.SendMsg(final)
			}
			return nil
		}
	}
	return nil
}
