package pgtest

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/weir-stream/weir/internal/testproc"
)

// StartStandby makes a streaming standby of primary (pg_basebackup through
// the primary's Unix socket, which reaches it from every network
// namespace; -R writes standby.signal and primary_conninfo) and starts it
// as o says; it returns once the standby accepts connections (read-only
// until promoted). Make the primary wait for it with SetSynchronous. The
// caller must Stop it.
func StartStandby(primary *Server, o Options) (*Server, error) {
	s, err := newServer(o, primary.bin, "weir-postgres-standby-")
	if err != nil {
		return nil, err
	}
	s.runAs = primary.runAs
	if s.runAs != "" {
		uid, gid, err := testproc.IDs(s.runAs)
		if err == nil {
			err = os.Chown(s.dir, uid, gid)
		}
		if err != nil {
			s.Stop()
			return nil, err
		}
	}
	backup := testproc.Command(s.runAs, filepath.Join(s.bin, "pg_basebackup"), "-h", primary.dir, "-p", fmt.Sprint(primary.Port),
		"-U", "postgres", "-D", s.dataDir(), "-X", "stream", "-R", "--no-sync", "--checkpoint=fast", "-d", "application_name=standby")
	if out, err := backup.CombinedOutput(); err != nil {
		s.Stop()
		return nil, fmt.Errorf("pg_basebackup: %w\n%s", err, out)
	}
	if err := s.launch(); err != nil {
		s.Stop()
		return nil, err
	}
	return s, nil
}

// SetSynchronous makes every commit on the server wait until a standby
// named standby (StartStandby's) has flushed it (synchronous_commit = on,
// synchronous_standby_names), so a commit survives the server's loss.
func (s *Server) SetSynchronous() error {
	if err := exec1(s.socketURL("postgres"), "ALTER SYSTEM SET synchronous_standby_names = 'standby'"); err != nil {
		return err
	}
	return exec1(s.socketURL("postgres"), "SELECT pg_reload_conf()")
}

// Promote makes a standby the primary (pg_promote, waiting until it is).
func (s *Server) Promote() error {
	return exec1(s.socketURL("postgres"), "SELECT pg_promote(true, 60)")
}
