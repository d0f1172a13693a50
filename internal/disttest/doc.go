// Package disttest holds the distributed mode's end-to-end tests: real
// 'weir controller' and 'weir worker' processes over a real PostgreSQL —
// on loopback in one namespace (two_process_test.go), and on several hosts
// made of network namespaces with internal/testhosts (hosts_test.go:
// worker host kills, link partitions, controller failover, PostgreSQL
// restarts, a worker joining). Its helpers write the counter example's
// input queue and read its output queue in the store, for the exactly-once
// oracle (internal/testconn.ExactlyOnce).
package disttest
