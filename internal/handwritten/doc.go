// Package handwritten holds the comparators of `weir bench`: exactly-once
// keyed counters written by hand, without weir's engine, the way a careful
// user would write them instead (issue 16). weir's exactly-once rows are
// judged against them: the engine should cost nothing such a loop does not
// pay anyway.
//
//   - QueueCounter reads a weir queue (connector/queue) in the pipeline's
//     store and, per source partition, commits each batch's counts, output
//     rows and source offset in one synced store commit.
//   - KafkaCounter is a franz-go consume-transform-produce loop (one Kafka
//     transaction per poll, the consumed offsets committed in it) whose
//     counts live in the store, kept consistent with Kafka's committed
//     offsets by an undo record.
//
// Both count the rows' "key" column and emit {"key", "count"} per input, so
// the keyed-counter oracle applies: each key's counts 1..n appear exactly
// once in the output. Neither has leases, a dedup table, an outbox or a
// controller; they rely on a single writer per partition (the queue loop)
// or on Kafka's transactional fencing (the Kafka loop).
package handwritten
