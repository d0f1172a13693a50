package pebble

import (
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
)

// wrapFS is errorfs.Wrap plus injection into recycled files. In Pebble
// v2.1.7, errorfs.FS.ReuseForWrite returns the underlying file unwrapped, so
// a recycled WAL (Pebble reuses the WAL files of flushed memtables) would
// escape the injector: its writes and syncs would be neither counted nor
// failed.
func wrapFS(fs vfs.FS, inj errorfs.Injector) vfs.FS {
	return reuseWrappingFS{FS: errorfs.Wrap(fs, inj), inj: inj}
}

type reuseWrappingFS struct {
	*errorfs.FS
	inj errorfs.Injector
}

func (fs reuseWrappingFS) ReuseForWrite(oldname, newname string, category vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.ReuseForWrite(oldname, newname, category)
	if err != nil {
		return nil, err
	}
	return &injectedFile{File: f, path: newname, inj: fs.inj}, nil
}

// injectedFile consults inj before the writes and syncs of a recycled file.
type injectedFile struct {
	vfs.File
	path string
	inj  errorfs.Injector
}

func (f *injectedFile) op(kind errorfs.OpKind) error {
	return f.inj.MaybeError(errorfs.Op{Kind: kind, Path: f.path})
}

func (f *injectedFile) Write(p []byte) (int, error) {
	if err := f.op(errorfs.OpFileWrite); err != nil {
		return 0, err
	}
	return f.File.Write(p)
}

func (f *injectedFile) WriteAt(p []byte, off int64) (int, error) {
	if err := f.op(errorfs.OpFileWriteAt); err != nil {
		return 0, err
	}
	return f.File.WriteAt(p, off)
}

func (f *injectedFile) Sync() error {
	if err := f.op(errorfs.OpFileSync); err != nil {
		return err
	}
	return f.File.Sync()
}

func (f *injectedFile) SyncData() error {
	if err := f.op(errorfs.OpFileSyncData); err != nil {
		return err
	}
	return f.File.SyncData()
}

func (f *injectedFile) SyncTo(length int64) (bool, error) {
	if err := f.op(errorfs.OpFileSyncTo); err != nil {
		return false, err
	}
	return f.File.SyncTo(length)
}
