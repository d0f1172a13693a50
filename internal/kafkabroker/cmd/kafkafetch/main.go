// Command kafkafetch fetches the Apache Kafka broker's jars (Version of
// package kafkabroker) with Maven into kafkabroker.Jars.Dir, unless they are
// there already, and prints that directory. The real-broker tests and
// 'weir bench --kafka-broker real' start brokers from it. Run it from the
// repository's root:
//
//	go run ./internal/kafkabroker/cmd/kafkafetch
package main

import "github.com/weir-stream/weir/internal/kafkabroker"

func main() { kafkabroker.Jars.FetchMain("kafkafetch") }
