// Package freeport finds free TCP ports on loopback for the servers that
// tests and 'weir bench' start (PostgreSQL, ClickHouse, Kafka brokers).
package freeport

import "net"

// Loopback returns n distinct TCP ports on 127.0.0.1 that were free when
// asked: all n listeners are open at once, so the ports differ, and a
// server started right after normally gets them.
func Loopback(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	ports := make([]int, 0, n)
	for i := 0; i < n; i++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}
