package kafka

// Exports for the external test package (kafka_test), whose end-to-end
// tests import engine, which imports this package.

var (
	NewClusterForTest    = newCluster
	NewClientForTest     = newClient
	ReadCommittedForTest = readCommitted
	ReadTopicForTest     = readTopic
	TestOptionsForTest   = testOptions
)

// Brokers is a Kafka cluster the tests reach (kfake or a real one).
type Brokers = brokers
