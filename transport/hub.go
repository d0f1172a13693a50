package transport

import (
	"slices"
	"sync"

	"github.com/weir-stream/weir"
	"github.com/weir-stream/weir/msgid"
)

// DefaultBufferBytes is the default byte bound of one partition's buffer.
const DefaultBufferBytes = 16 << 20

// BufferBatches is how many of its receiver's batches a partition's buffer
// holds at most (Hub.SetRowLimit, RowLimit): one being processed and
// acknowledged, the rest ready for the next epochs. More would only hold
// decoded messages in memory while their senders wait anyway.
const BufferBatches = 2

// RowLimit is the row bound of a buffer whose receivers fetch at most
// maxRows messages per epoch: BufferBatches batches.
func RowLimit(maxRows int) int { return BufferBatches * maxRows }

// Hub is the in-process transport: one bounded mailbox per receiving
// partition. Mailboxes outlive the jobs that attach to them, so a message
// buffered for a partition whose job fails is fetched again by the
// replacement job; senders still keep every message until acknowledged,
// because a mailbox is memory and dies with the process.
type Hub struct {
	bufferBytes int
	rowLimit    int // 0: no bound on a mailbox's count of messages

	mu     sync.Mutex
	boxes  map[PartitionID]*mailbox
	fences map[PartitionID]*senderFence
	faults Faults // nil unless SetFaults (tests only)
}

// NewHub returns a hub whose mailboxes hold at most bufferBytes each
// (DefaultBufferBytes if bufferBytes <= 0). A message larger than the bound
// is still accepted into an empty mailbox, so that it cannot block forever.
func NewHub(bufferBytes int) *Hub {
	if bufferBytes <= 0 {
		bufferBytes = DefaultBufferBytes
	}
	return &Hub{bufferBytes: bufferBytes, boxes: make(map[PartitionID]*mailbox), fences: make(map[PartitionID]*senderFence)}
}

func (h *Hub) box(p PartitionID) *mailbox {
	h.mu.Lock()
	defer h.mu.Unlock()
	b, ok := h.boxes[p]
	if !ok {
		b = &mailbox{
			partition: p,
			faults:    h.faults,
			limit:     h.bufferBytes,
			rowLimit:  h.rowLimit,
			byID:      make(map[msgid.ID]*entry),
			notify:    make(chan struct{}, 1),
			room:      make(chan struct{}, 1),
		}
		h.boxes[p] = b
	}
	return b
}

// senderFence is the fence of one sending partition: offers read-hold it
// while they check their generation and insert; RegisterSender write-holds
// it to bump the generation.
type senderFence struct {
	mu        sync.RWMutex
	gen       uint64
	partition PartitionID // set at creation, never changed
}

// RegisterSender makes the caller the sender of partition p and returns its
// token. It returns after every offer made under an earlier token of p has
// finished; from then on those tokens are fenced. A job registers once its
// lease is proven (its first commit succeeded), before it offers anything.
// ordered is the sender's promise that its channels are ordered (see
// Delivery): every offer under the token is delivered with it.
func (h *Hub) RegisterSender(p PartitionID, ordered bool) SenderToken {
	h.mu.Lock()
	f, ok := h.fences[p]
	if !ok {
		f = &senderFence{partition: p}
		h.fences[p] = f
	}
	h.mu.Unlock()
	f.mu.Lock()
	defer f.mu.Unlock()
	f.gen++
	return SenderToken{fence: f, gen: f.gen, ordered: ordered}
}

// Fence supersedes every sender token of partition p issued so far, as a
// new registration does, without issuing one: it returns after every offer
// made under them has finished, and their later offers are dropped. A
// rescale fences the lives it stopped before the next layout's jobs
// receive (controller/rescale.go): a stopped life routed by the old layout,
// and an offer of it landing in a new partition could run ahead of the
// replay of its successor.
func (h *Hub) Fence(p PartitionID) { h.RegisterSender(p, false) }

// OfferBatch implements Sender: one fence check and one mailbox lock for
// the whole batch.
func (h *Hub) OfferBatch(from SenderToken, p PartitionID, offers []Offer, ack *AckHook) int {
	src, ordered, live := from.admit()
	if !live {
		return len(offers) // a zombie's offers: dropped, never acknowledged
	}
	defer from.release()
	return h.box(p).offerBatch(offers, ack, src, ordered)
}

// admit read-holds the token's fence for an offer (RegisterSender waits
// for it) and returns the sending partition and whether it is ordered; live
// is false, and nothing is held, for a superseded token. A live admission
// ends with release.
func (t SenderToken) admit() (src PartitionID, ordered, live bool) {
	f := t.fence
	if f == nil {
		return "", false, true
	}
	f.mu.RLock()
	if f.gen != t.gen {
		f.mu.RUnlock()
		return "", false, false
	}
	return f.partition, t.ordered, true
}

// release ends a live admission.
func (t SenderToken) release() {
	if f := t.fence; f != nil {
		f.mu.RUnlock()
	}
}

// SetRowLimit bounds every mailbox of h to rows unacknowledged messages as
// well as to its bytes (0: no row bound, the default). Small rows make a
// byte bound loose: 16 MiB of 100-byte events is 100,000 decoded messages
// in memory. Like the byte bound, it never refuses a message to an empty
// mailbox. A mailbox above a lowered bound takes nothing until it is below.
func (h *Hub) SetRowLimit(rows int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.rowLimit = max(rows, 0)
	for _, b := range h.boxes {
		b.mu.Lock()
		b.rowLimit = h.rowLimit
		b.mu.Unlock()
	}
}

// Ready implements Sender.
func (h *Hub) Ready(p PartitionID) <-chan struct{} { return h.box(p).room }

// Attach starts a new attachment of partition p: every buffered message,
// fetched by an earlier attachment or not, becomes fetchable again. The
// previous attachment, if any, stops seeing messages.
func (h *Hub) Attach(p PartitionID) Receiver {
	b := h.box(p)
	b.mu.Lock()
	defer b.mu.Unlock()
	b.generation++
	b.resetFetched()
	signal(b.notify)
	return &attachment{box: b, generation: b.generation}
}

// HighWater returns the largest number of bytes ever buffered for p: a
// bounded buffer never holds more than its bound plus one message.
func (h *Hub) HighWater(p PartitionID) int {
	b := h.box(p)
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.highWater
}

// Pending returns the number of unacknowledged messages buffered for p.
func (h *Hub) Pending(p PartitionID) int {
	b := h.box(p)
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.byID)
}

type entry struct {
	msg  *weir.Message
	size int
	// hook is the sender's acknowledgement hook (nil: nobody is told);
	// token is the offer's Token.
	hook    *AckHook
	token   any
	fetched bool
	acked   bool
	// maybeDup: the sender says it may have been delivered before, or an
	// earlier attachment fetched it.
	maybeDup bool
	// redeliver: a Faults duplicate of it follows its acknowledgement.
	redeliver bool
	// from, origin and ordered: the newest offer's sender, its origin, and
	// whether the sender's token is ordered (Delivery).
	from    PartitionID
	origin  PartitionID
	ordered bool
}

// mailbox keeps entries in arrival order; acknowledged entries are removed
// lazily from the front. Invariant: byID holds exactly the unacknowledged
// entries; bytes is the sum of their sizes.
type mailbox struct {
	partition  PartitionID
	faults     Faults // nil: no fault injection
	mu         sync.Mutex
	limit      int
	rowLimit   int // 0: none
	bytes      int
	entries    []*entry
	cursor     int // entries before cursor are fetched or acked
	byID       map[msgid.ID]*entry
	generation uint64
	highWater  int
	notify     chan struct{}
	room       chan struct{}
}

func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// resetFetched makes every entry fetchable again; an entry an earlier
// attachment fetched may have been processed by it, so it becomes a maybe
// duplicate. REQUIRES: b.mu held.
func (b *mailbox) resetFetched() {
	for _, e := range b.entries {
		if e.fetched {
			e.fetched, e.maybeDup = false, true
		}
	}
	b.cursor = 0
}

// offerBatch adds offers in order until one does not fit and returns how
// many it took.
func (b *mailbox) offerBatch(offers []Offer, hook *AckHook, from PartitionID, ordered bool) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.entries = slices.Grow(b.entries, len(offers))
	block := make([]entry, 0, len(offers)) // one allocation for the batch's entries
	taken := 0
	for _, o := range offers {
		if !b.add(o, hook, from, ordered, &block) {
			break
		}
		taken++
	}
	if taken > 0 {
		signal(b.notify)
	}
	return taken
}

// add takes one offer (hook is its acknowledgement hook; from and ordered
// its token's) and reports whether it fit: an id already buffered and
// unacknowledged gets the new offer's hook, token, sender and origin
// instead. A new entry is appended to
// block, the batch's entries, allocated once with room for every offer of
// the batch. REQUIRES: b.mu held.
func (b *mailbox) add(o Offer, hook *AckHook, from PartitionID, ordered bool, block *[]entry) bool {
	if e, ok := b.byID[o.Msg.ID]; ok {
		e.hook, e.token = hook, o.Token
		e.maybeDup = e.maybeDup || o.MaybeDup
		e.from, e.origin, e.ordered = from, o.Origin, ordered
		return true
	}
	if b.bytes > 0 && (b.bytes+o.Size > b.limit || b.rowLimit > 0 && len(b.byID) >= b.rowLimit) {
		return false
	}
	*block = append(*block, entry{msg: o.Msg, size: o.Size, hook: hook, token: o.Token, maybeDup: o.MaybeDup, from: from, origin: o.Origin, ordered: ordered})
	b.insert(&(*block)[len(*block)-1])
	return true
}

// insert appends the new entry e. REQUIRES: b.mu held, e.msg.ID not in
// byID.
func (b *mailbox) insert(e *entry) {
	if b.faults != nil {
		e.redeliver = b.faults.Redeliver(b.partition, e.msg.ID)
	}
	b.entries = append(b.entries, e)
	b.byID[e.msg.ID] = e
	b.bytes += e.size
	b.highWater = max(b.highWater, b.bytes)
}

type attachment struct {
	box        *mailbox
	generation uint64
}

func (a *attachment) Fetch(maxRows, maxBytes int) []Delivery {
	b := a.box
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.generation != a.generation {
		return nil
	}
	if b.cursor >= len(b.entries) {
		return nil
	}
	out := make([]Delivery, 0, min(maxRows, len(b.entries)-b.cursor))
	bytes := 0
	for b.cursor < len(b.entries) && len(out) < maxRows {
		e := b.entries[b.cursor]
		if !e.acked && !e.fetched {
			if len(out) > 0 && bytes+e.size > maxBytes {
				break
			}
			e.fetched = true
			out = append(out, Delivery{Msg: e.msg, MaybeDuplicate: e.maybeDup, Size: e.size, From: e.from, Origin: e.origin, Ordered: e.ordered})
			bytes += e.size
		}
		b.cursor++
	}
	return out
}

func (a *attachment) Ack(ids ...msgid.ID) {
	b := a.box
	calls := ackCallsPool.Get().(*ackCalls)
	defer calls.release()
	freed := false
	b.mu.Lock()
	for _, id := range ids {
		e, ok := b.byID[id]
		if !ok {
			continue
		}
		if b.faults != nil && b.loseAck(e, id) {
			continue
		}
		e.acked, freed = true, true
		delete(b.byID, id)
		b.bytes -= e.size
		calls.add(e, id, len(ids))
		if e.redeliver {
			b.redeliver(e)
		}
		// An acknowledged entry stays in entries until the prefix is
		// dropped (dropAckedPrefix); it must not keep its message alive
		// there: a message shares its block with its batch's other
		// messages (job's slabs), so one would keep a whole batch and its
		// rows in memory.
		e.msg, e.hook, e.token = nil, nil, nil
	}
	b.dropAckedPrefix()
	if freed {
		signal(b.room)
	}
	b.mu.Unlock()
	calls.run()
}

// ackCalls collects one Ack's calls of the senders' hooks, to run after
// the mailbox is unlocked: each hook once per run of consecutive ids
// offered with it.
type ackCalls struct {
	acks []Acked
	runs []hookRun
}

// hookRun is acks[from:to] for hook.
type hookRun struct {
	hook     *AckHook
	from, to int
}

// add records e's hook for id (if it has one); n is the number of ids of
// the Ack (the buffers' size).
func (c *ackCalls) add(e *entry, id msgid.ID, n int) {
	if e.hook == nil {
		return
	}
	if c.acks == nil {
		c.acks = make([]Acked, 0, max(n, 64))
	}
	if k := len(c.runs) - 1; k >= 0 && c.runs[k].hook == e.hook && c.runs[k].to == len(c.acks) {
		c.runs[k].to++
	} else {
		c.runs = append(c.runs, hookRun{e.hook, len(c.acks), len(c.acks) + 1})
	}
	c.acks = append(c.acks, Acked{ID: id, Token: e.token})
}

// ackCallsPool recycles ackCalls: an epoch's Ack would otherwise allocate
// its buffers every time.
var ackCallsPool = sync.Pool{New: func() any { return new(ackCalls) }}

// release clears c (no token or hook stays reachable) and returns it to
// the pool.
func (c *ackCalls) release() {
	clear(c.acks)
	clear(c.runs)
	c.acks, c.runs = c.acks[:0], c.runs[:0]
	ackCallsPool.Put(c)
}

// run calls the hooks.
func (c *ackCalls) run() {
	for _, r := range c.runs {
		r.hook.Acked(c.acks[r.from:r.to:r.to]...)
	}
}

// dropAckedPrefix removes the acknowledged entries at the front so the
// slice does not grow forever. It compacts in place, and only once the
// prefix is at least half of the entries (or 1024 of them): copying the
// unacknowledged rest on every acknowledgement made each epoch's Ack cost
// the whole buffer, and a new array each time. REQUIRES: b.mu held.
func (b *mailbox) dropAckedPrefix() {
	n := 0
	for n < len(b.entries) && b.entries[n].acked {
		n++
	}
	if n == 0 || (n < 1024 && 2*n < len(b.entries)) {
		return
	}
	rest := copy(b.entries, b.entries[n:])
	clear(b.entries[rest:])
	b.entries = b.entries[:rest]
	b.cursor = max(b.cursor-n, 0)
}

func (a *attachment) Pending() int {
	b := a.box
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.byID)
}

func (a *attachment) Available() int {
	b := a.box
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.generation != a.generation {
		return 0
	}
	n := 0
	for _, e := range b.entries[b.cursor:] {
		if !e.acked && !e.fetched {
			n++
		}
	}
	return n
}

func (a *attachment) Notify() <-chan struct{} { return a.box.notify }

func (a *attachment) Detach() {
	b := a.box
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.generation == a.generation {
		b.generation++
		b.resetFetched()
	}
}
