package transport

// Drop forgets partition p's mailbox: its buffered messages are discarded
// without being acknowledged (their senders keep them and offer them
// again), and a later OfferBatch or Attach for p starts an empty one. The
// network transport (transport/remote) keys a mailbox by one job's life
// and drops it when that job has exited, so that nothing a life did not
// fetch is handed, unmarked, to a later life after the partition was
// processed elsewhere in between. An attachment to a dropped mailbox
// fetches nothing new.
func (h *Hub) Drop(p PartitionID) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if b, ok := h.boxes[p]; ok {
		delete(h.boxes, p)
		b.mu.Lock()
		b.generation++ // its attachments fetch nothing any more
		b.mu.Unlock()
	}
}
