// Package testhosts runs several "hosts" on this one machine for tests of
// weir's distributed mode: each host is a Linux network namespace with its
// own address on a private virtual switch, so processes in different hosts
// talk over a real network that a test can cut, and a host can be killed
// whole. Nothing touches the root namespace's interfaces or routing.
//
// # The network
//
// New makes a Network: a "switch" namespace holding a Linux bridge, and
// one namespace per host joined to the bridge by a veth pair (eth0 inside
// the host, p-<name> on the switch), with addresses on Subnet
// (10.251.0.0/24: the switch is 10.251.0.1, hosts get .2, .3, … in the
// order they are added; AddHost joins one later, a worker joining a
// running cluster). Hosts have no default route: they reach each other
// and nothing else. Each Network is its own isolated segment, so two
// networks (parallel tests, parallel test binaries) may reuse addresses.
//
// A host is a namespace, not a machine: hosts share the clock, the
// filesystem and the process table (a host kill is a crash of its
// processes, not a power loss: writes in the page cache survive). See
// ../shared/reference/netns.md for what was measured here (no netem, no
// iptables on a fresh machine).
//
// # Faults
//
//   - Host.Kill: SIGKILL every process of the host's namespace until none
//     is left (catches forked children and PostgreSQL's backends, which
//     run in sessions of their own).
//   - Host.Partition / Host.Heal: the host's bridge port is disabled
//     (state 0) / forwarding again (state 3): frames are dropped silently
//     both ways while the link stays up, as behind a broken switch —
//     connections hang, they are not refused.
//   - Host.Unplug / Host.Plug: the switch-side veth goes down / up: the
//     cable is pulled (the host sees its carrier lost).
//
// A host is either partitioned or unplugged, not both at once (bringing a
// port up resets its bridge state, so the combination would heal itself).
//
// # Processes
//
// Host.Start runs a program inside a host, as root or as another OS user
// (setpriv, as internal/testproc does), with extra environment, stdout and
// stderr to log files of the network's directory (Proc.Tail for failure
// messages); the child's PID is the program's own (ip netns exec and
// setpriv exec in place). Proc.Wait waits for it; Proc.AwaitOutput waits
// until it has printed something (readiness).
//
// Host.StartPostgres makes the host a PostgreSQL server (the server of
// store/postgres/pgtest on the host's address, port 5432, run as an unprivileged
// OS user since PostgreSQL refuses root). Postgres.URL is a postgres://
// URL reachable from every host; Postgres.SocketURL reaches it through its
// Unix socket from the test process whatever the network does (for an
// oracle reading the sink). Restart is a clean restart, Crash a Host.Kill
// plus removal of the shared memory the killed server left, Relaunch the
// start after a crash (crash recovery from the WAL).
//
// The test process itself lives in the root namespace; Network.Dial and
// Network.Listen put its sockets on the switch (address 10.251.0.1, the
// observer), Host.Dial and Host.Listen inside a host — e.g. to call a
// worker's admin API, or to serve an HTTP sink the workers write to.
//
// # Cleanup
//
// New registers the teardown with t.Cleanup: PostgreSQL servers are
// stopped, every host is killed (by PID, as above), the namespaces are
// deleted and the network's directory removed. Names carry the test
// process's identity (PID and start time) and a sequence number, so
// parallel test binaries never collide; a test binary that crashed leaves
// namespaces, processes, shared memory and directories behind, and the
// first New of any later test binary removes those whose owner is no
// longer running. Only `ip netns add`'s empty /run/netns mount point
// stays, as it does for any use of ip netns.
//
// # Requirements
//
// Root and iproute2 (ip, bridge). Without them New skips the test with a
// message saying so — except under CI=true, where it fails the test: CI
// runs as root with iproute2 installed (.ci/run), so a missing kit there is
// a broken build, never a silent skip.
//
// # Example
//
// A distributed test with a PostgreSQL host, two workers and a partition:
//
//	func TestWorkerPartitioned(t *testing.T) {
//		pgtest.Require(t)
//		n := testhosts.New(t, "pg", "w1", "w2")
//		pg, err := n.Host("pg").StartPostgres()
//		if err != nil {
//			t.Fatal(err)
//		}
//		for _, w := range []string{"w1", "w2"} {
//			h := n.Host(w)
//			p, err := h.Start(testhosts.Cmd{Name: "worker", Path: weirBin,
//				Args: []string{"worker", "--store", pg.URL(), "--listen", h.Address(7000)}})
//			if err != nil {
//				t.Fatal(err)
//			}
//			t.Cleanup(func() {
//				if t.Failed() {
//					t.Log(p.Tail())
//				}
//			})
//		}
//		// ... run a pipeline, then cut w1 off and bring it back:
//		if err := n.Host("w1").Partition(); err != nil {
//			t.Fatal(err)
//		}
//		// ... w1's jobs must be fenced and replaced ...
//		if err := n.Host("w1").Heal(); err != nil {
//			t.Fatal(err)
//		}
//		// ... read the sink through pg.SocketURL() and check the oracle.
//	}
package testhosts
