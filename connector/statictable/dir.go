package statictable

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// Dir is the storage of an ArrivalOrderTableSink's output directory: table
// files and the progress manifest. The sink's exactly-once protocol needs
// only these operations, so an object store can implement Dir later
// (Publish as a put of the finished object, Lock + WriteManifest as a
// conditional put of the manifest object on the version read).
//
// localDir implements it on a local (POSIX) filesystem.
type Dir interface {
	// Path names the directory in errors and logs.
	Path() string
	// Lock takes the directory's exclusive publish lock, across processes;
	// it waits until ctx ends. unlock releases it.
	Lock(ctx context.Context) (unlock func(), err error)
	// ReadManifest returns the manifest's contents; ok is false if there is
	// none. Under the lock it is the latest; without it, some published
	// version (it is replaced atomically).
	ReadManifest() (b []byte, ok bool, err error)
	// WriteManifest replaces the manifest atomically and durably: after it
	// returns, a crash leaves the new one; before, the old one. REQUIRES:
	// the lock.
	WriteManifest(b []byte) error
	// CreateTemp creates a hidden temporary file (name starting with
	// ".weir-tmp-" + tag + "-") that readers and the source ignore.
	CreateTemp(tag, ext string) (TempFile, error)
	// Publish renames a committed temporary file to name, durably (the
	// directory is synced). REQUIRES: the lock.
	Publish(tempName, name string) error
	// Remove deletes name; a missing file is not an error.
	Remove(name string) error
	// List returns the names of the directory's entries.
	List() ([]string, error)
}

// TempFile is a table being written.
type TempFile interface {
	io.Writer
	// Name is the file's name in the directory.
	Name() string
	// Commit makes the contents durable (fsync) and closes the file.
	Commit() error
	// Abort closes and removes the file.
	Abort()
}

// The output directory's reserved names. Names starting with '.' or '_'
// are never tables (hiddenName).
const (
	manifestName = "_weir_manifest.json"
	lockName     = "_weir_manifest.lock"
	tempPrefix   = ".weir-tmp-"
)

type localDir struct{ path string }

// OpenLocalDir opens (creating it if missing) a local output directory.
func OpenLocalDir(path string) (Dir, error) {
	if err := os.MkdirAll(path, 0o755); err != nil {
		return nil, fmt.Errorf("output directory %s: %w", path, err)
	}
	return &localDir{path: path}, nil
}

func (d *localDir) Path() string { return d.path }

// lockPollMax bounds the wait between attempts to take a held lock.
const lockPollMax = 20 * time.Millisecond

func (d *localDir) Lock(ctx context.Context) (func(), error) {
	f, err := os.OpenFile(filepath.Join(d.path, lockName), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("output directory %s: lock: %w", d.path, err)
	}
	// flock locks belong to the open file description, so two opens in
	// one process exclude each other as two processes do; the lock goes
	// with the process if it dies.
	wait := time.Millisecond
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() {
				_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
				f.Close()
			}, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) && !errors.Is(err, syscall.EINTR) {
			f.Close()
			return nil, fmt.Errorf("output directory %s: lock: %w", d.path, err)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			f.Close()
			return nil, fmt.Errorf("output directory %s: waiting for the publish lock: %w", d.path, ctx.Err())
		case <-t.C:
		}
		wait = min(2*wait, lockPollMax)
	}
}

func (d *localDir) ReadManifest() ([]byte, bool, error) {
	b, err := os.ReadFile(filepath.Join(d.path, manifestName))
	if errors.Is(err, os.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("output directory %s: read manifest: %w", d.path, err)
	}
	return b, true, nil
}

func (d *localDir) WriteManifest(b []byte) error {
	t, err := d.CreateTemp("manifest", ".json")
	if err != nil {
		return err
	}
	if _, err := t.Write(b); err != nil {
		t.Abort()
		return fmt.Errorf("output directory %s: write manifest: %w", d.path, err)
	}
	if err := t.Commit(); err != nil {
		t.Abort()
		return err
	}
	return d.Publish(t.Name(), manifestName)
}

func (d *localDir) CreateTemp(tag, ext string) (TempFile, error) {
	var r [8]byte
	_, _ = rand.Read(r[:])
	name := tempPrefix + tag + "-" + hex.EncodeToString(r[:]) + ext
	f, err := os.OpenFile(filepath.Join(d.path, name), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, fmt.Errorf("output directory %s: create temporary file: %w", d.path, err)
	}
	return &localTemp{f: f, dir: d, name: name}, nil
}

func (d *localDir) Publish(tempName, name string) error {
	if err := os.Rename(filepath.Join(d.path, tempName), filepath.Join(d.path, name)); err != nil {
		return fmt.Errorf("output directory %s: publish %s: %w", d.path, name, err)
	}
	return d.sync()
}

// sync makes the directory's entries (renames, creations) durable.
func (d *localDir) sync() error {
	f, err := os.Open(d.path)
	if err != nil {
		return fmt.Errorf("output directory %s: sync: %w", d.path, err)
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		return fmt.Errorf("output directory %s: sync: %w", d.path, err)
	}
	return nil
}

func (d *localDir) Remove(name string) error {
	err := os.Remove(filepath.Join(d.path, name))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("output directory %s: remove %s: %w", d.path, name, err)
	}
	return nil
}

func (d *localDir) List() ([]string, error) {
	es, err := os.ReadDir(d.path)
	if err != nil {
		return nil, fmt.Errorf("output directory %s: %w", d.path, err)
	}
	out := make([]string, 0, len(es))
	for _, e := range es {
		out = append(out, e.Name())
	}
	return out, nil
}

type localTemp struct {
	f    *os.File
	dir  *localDir
	name string
}

func (t *localTemp) Write(b []byte) (int, error) { return t.f.Write(b) }
func (t *localTemp) Name() string                { return t.name }

func (t *localTemp) Commit() error {
	if err := t.f.Sync(); err != nil {
		t.f.Close()
		return fmt.Errorf("output directory %s: sync %s: %w", t.dir.path, t.name, err)
	}
	if err := t.f.Close(); err != nil {
		return fmt.Errorf("output directory %s: close %s: %w", t.dir.path, t.name, err)
	}
	return nil
}

func (t *localTemp) Abort() {
	t.f.Close()
	_ = os.Remove(filepath.Join(t.dir.path, t.name))
}
