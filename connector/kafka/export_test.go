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
