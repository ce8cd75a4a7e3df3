package pebblestore

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/phuxcoord/coord/coordstore"
)

// Files of the store directory besides pebble's own.
const (
	// markerName is the version gate: formatTag and the store schema,
	// written (atomically, synced) before any pebble file, so that Open
	// can refuse a foreign directory or a newer schema without opening
	// pebble.
	markerName = "PHUXSTORE"
	markerTemp = "PHUXSTORE.tmp"
	// lockName is the exclusive lock (flock(2) on Unix) held while open.
	lockName = "phux.lock"
	// ballastName is the space reserve released on the first ENOSPC.
	ballastName = "phux.ballast"
)

// formatVersion is pebble's on-disk format this build creates, pinned so
// that a newer pebble dependency does not change it silently (pebble
// ratchets a store to the configured format at open).
const formatVersion = pebble.FormatValueSeparation

// Open is OpenContext with context.Background().
func Open(dir string, cfg Config) (*Store, error) {
	return OpenContext(context.Background(), dir, cfg)
}

// OpenContext opens or creates the store directory dir (mode 0700). It
// does not wait for the lock; its only long step is the integrity scan of
// an existing store (see Config.SkipIntegrityScan), which checks ctx every
// 4,096 records. Errors: coordstore.ErrLocked when another process or
// handle holds the directory, coordstore.ErrSchemaTooNew for a newer
// schema, coordstore.ErrCorrupt for a foreign, truncated or damaged
// directory (all three leave it as it was), ctx's error; other errors wrap
// the OS error.
func OpenContext(ctx context.Context, dir string, cfg Config) (s *Store, err error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if cfg.CutLease <= 0 {
		cfg.CutLease = coordstore.DefaultCutLease
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.MaxBatch <= 0 {
		cfg.MaxBatch = DefaultMaxBatch
	}
	if cfg.MaxBatchDelay == 0 {
		cfg.MaxBatchDelay = time.Millisecond
	}
	if cfg.CacheBytes <= 0 {
		cfg.CacheBytes = DefaultCacheBytes
	}
	if cfg.MemTableBytes <= 0 {
		cfg.MemTableBytes = DefaultMemTableBytes
	}
	if cfg.MaxDiskBytes <= 0 {
		cfg.MaxDiskBytes = DefaultMaxDiskBytes
	}
	if cfg.BallastBytes == 0 {
		cfg.BallastBytes = DefaultBallastBytes
	}
	fs := cfg.fs
	if fs == nil {
		fs = vfs.Default
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if err := fs.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("coordstore/pebblestore: open: %w", err)
	}
	names, err := fs.List(dir)
	if err != nil {
		return nil, fmt.Errorf("coordstore/pebblestore: open: %w", err)
	}
	if !has(names, markerName) && !onlyOwn(names) {
		return nil, corrupt("not a coordinator store")
	}
	lock, err := lockDir(fs, fs.PathJoin(dir, lockName))
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			lock.Close()
		}
	}()
	// Under the lock: nobody else creates or changes the store now.
	if names, err = fs.List(dir); err != nil {
		return nil, fmt.Errorf("coordstore/pebblestore: open: %w", err)
	}
	if !has(names, markerName) {
		if !onlyOwn(names) {
			return nil, corrupt("not a coordinator store")
		}
		if err := writeMarker(fs, dir); err != nil {
			return nil, err
		}
	} else if err := readMarker(fs, dir); err != nil {
		return nil, err
	}
	s = &Store{
		cfg:      cfg,
		dir:      dir,
		fs:       fs,
		lock:     lock,
		log:      log,
		reqs:     make(chan *request, cfg.MaxBatch),
		syncq:    make(chan *syncJob, 1),
		syncDone: make(chan error, 1),
		cuts:     map[*cut]struct{}{},
	}
	pfs := vfs.OnDiskFull(fs, s.space.onDiskFull)
	st, fresh := state{}, true
	if !onlyOwn(names) {
		// An existing store: check it read-only first, so that a refused
		// store is left exactly as it was.
		var empty bool
		st, empty, err = withDB(dir, s.options(pfs, true), func(db *pebble.DB) (state, bool, error) {
			return check(ctx, db, !cfg.SkipIntegrityScan)
		})
		if err != nil {
			return nil, err
		}
		fresh = empty // created, then interrupted before its first batch
	}
	// The ballast is (re)made only now, after every check passed.
	s.space.init(fs, dir, cfg.BallastBytes, log)
	db, err := openDB(dir, s.options(pfs, false))
	if err != nil {
		return nil, err
	}
	if fresh {
		st, err = initialise(db)
	} else {
		st, err = readState(db)
	}
	if err != nil {
		db.Close()
		return nil, err
	}
	recs, err := buildRecFilter(db, st.ctr.nrec)
	if err != nil {
		db.Close()
		return nil, err
	}
	s.db = db
	s.view = &view{snap: db.NewSnapshot(), st: st}
	s.committer.Add(1)
	go func() {
		defer s.committer.Done()
		c := &committer{s: s, st: st, recs: recs}
		c.loop()
	}()
	s.syncerWG.Add(1)
	go s.syncer()
	log.Debug("coordstore opened", "schema", SchemaVersion, "fresh", fresh)
	return s, nil
}

func has(names []string, name string) bool {
	for _, n := range names {
		if n == name {
			return true
		}
	}
	return false
}

// onlyOwn reports whether names holds no pebble file: only what this
// package creates before pebble (a marker being written included).
func onlyOwn(names []string) bool {
	for _, n := range names {
		switch n {
		case markerName, markerTemp, lockName, ballastName:
		default:
			return false
		}
	}
	return true
}

func markerBytes() []byte {
	return []byte(formatTag + "\nschema " + strconv.FormatUint(uint64(SchemaVersion), 10) + "\n")
}

// writeMarker writes the marker atomically: a synced temporary file
// renamed into place, then the directory synced.
func writeMarker(fs vfs.FS, dir string) error {
	tmp := fs.PathJoin(dir, markerTemp)
	f, err := fs.Create(tmp, vfs.WriteCategoryUnspecified)
	if err != nil {
		return fmt.Errorf("coordstore/pebblestore: create marker: %w", err)
	}
	_, err = f.Write(markerBytes())
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = fs.Rename(tmp, fs.PathJoin(dir, markerName))
	}
	if err == nil {
		err = syncDir(fs, dir)
	}
	if err != nil {
		return fmt.Errorf("coordstore/pebblestore: write marker: %w", err)
	}
	return nil
}

func syncDir(fs vfs.FS, dir string) error {
	d, err := fs.OpenDir(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// readMarker checks the marker: this format, and a schema this build
// reads.
func readMarker(fs vfs.FS, dir string) error {
	f, err := fs.Open(fs.PathJoin(dir, markerName))
	if err != nil {
		return fmt.Errorf("coordstore/pebblestore: open marker: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, 256))
	if err != nil {
		return fmt.Errorf("coordstore/pebblestore: read marker: %w", err)
	}
	rest, ok := bytes.CutPrefix(b, []byte(formatTag+"\nschema "))
	num, ok2 := bytes.CutSuffix(rest, []byte("\n"))
	if !ok || !ok2 {
		return corrupt("store marker")
	}
	schema, err := strconv.ParseUint(string(num), 10, 32)
	if err != nil || string(num) != strconv.FormatUint(schema, 10) {
		return corrupt("store marker")
	}
	switch {
	case schema > uint64(SchemaVersion):
		return fmt.Errorf("%w: store schema %d, supported %d", coordstore.ErrSchemaTooNew, schema, SchemaVersion)
	case schema != uint64(SchemaVersion):
		return corrupt("store schema version")
	}
	return nil
}

// options are the pebble options of the store (see Config).
func (s *Store) options(fs vfs.FS, readOnly bool) *pebble.Options {
	log := s.log
	o := &pebble.Options{
		FS:                          fs,
		CacheSize:                   s.cfg.CacheBytes,
		MemTableSize:                uint64(s.cfg.MemTableBytes),
		MemTableStopWritesThreshold: 4,
		MaxOpenFiles:                256,
		FormatMajorVersion:          formatVersion,
		Logger:                      pebbleLogger{log},
		ReadOnly:                    readOnly,
		ErrorIfNotExists:            readOnly,
		EventListener: &pebble.EventListener{
			BackgroundError: func(err error) { log.Error("pebble background error", "err", err) },
			DataCorruption: func(info pebble.DataCorruptionInfo) {
				log.Error("pebble data corruption", "path", info.Path, "err", info.Details)
			},
		},
	}
	for i := range o.Levels {
		o.Levels[i].FilterPolicy = bloom.FilterPolicy(10)
	}
	return o
}

// openDB opens pebble, reporting a store it cannot open as corrupt: the
// directory is a coordinator store (its marker says so) whose files are
// missing or damaged. A panic of pebble on a damaged file is reported the
// same way.
func openDB(dir string, opts *pebble.Options) (db *pebble.DB, err error) {
	defer func() {
		if r := recover(); r != nil {
			db, err = nil, corrupt("pebble refused the store files")
		}
	}()
	db, err = pebble.Open(dir, opts)
	if err == nil {
		return db, nil
	}
	var errno syscall.Errno
	switch {
	case vfs.IsNoSpaceError(err):
		return nil, fmt.Errorf("%w: %w", coordstore.ErrFull, err)
	case errors.Is(err, os.ErrPermission), errors.As(err, &errno) && (errno == syscall.EMFILE || errno == syscall.ENFILE || errno == syscall.EIO):
		return nil, fmt.Errorf("coordstore/pebblestore: open: %w", err)
	}
	return nil, fmt.Errorf("%w: pebble refused the store files: %w", coordstore.ErrCorrupt, err)
}

// withDB opens pebble (read-only), runs fn and closes it.
func withDB(dir string, opts *pebble.Options, fn func(db *pebble.DB) (state, bool, error)) (st state, empty bool, err error) {
	db, err := openDB(dir, opts)
	if err != nil {
		return state{}, false, err
	}
	defer func() {
		if r := recover(); r != nil {
			st, empty, err = state{}, false, corrupt("pebble failed reading the store")
		}
		if cerr := db.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("coordstore/pebblestore: close: %w", cerr)
		}
	}()
	return fn(db)
}

// initialise writes the records of a new store.
func initialise(db *pebble.DB) (state, error) {
	b := db.NewBatch()
	defer b.Close()
	st := state{meta: coordstore.Meta{StoreSchema: SchemaVersion}}
	for _, kv := range [][2][]byte{
		{kFormat, []byte(formatTag)},
		{kSchema, binary.BigEndian.AppendUint32(nil, SchemaVersion)},
		{kMeta, encMeta(st.meta)},
		{kCounters, encCounters(st.ctr)},
	} {
		if err := b.Set(kv[0], kv[1], nil); err != nil {
			return state{}, err
		}
	}
	if err := db.Apply(b, pebble.Sync); err != nil {
		return state{}, commitErr(err)
	}
	return st, nil
}

// space implements ErrFull on ENOSPC with a ballast file.
type space struct {
	fs   vfs.FS
	dir  string
	path string
	size int64
	log  *slog.Logger

	full    atomic.Bool
	mu      sync.Mutex
	lastTry time.Time
}

func (sp *space) init(fs vfs.FS, dir string, size int64, log *slog.Logger) {
	sp.fs, sp.dir, sp.path, sp.size, sp.log = fs, dir, fs.PathJoin(dir, ballastName), size, log
	if size < 0 {
		return
	}
	if err := sp.create(); err != nil {
		log.Error("coordstore ballast not created; commits are refused until there is room", "err", err)
		sp.full.Store(true)
	}
}

// create writes the ballast file afresh.
func (sp *space) create() error {
	sp.fs.Remove(sp.path)
	f, err := sp.fs.Create(sp.path, vfs.WriteCategoryUnspecified)
	if err != nil {
		return err
	}
	if runtime.GOOS == "linux" {
		// fallocate: the blocks are reserved without being written.
		err = f.Preallocate(0, sp.size)
	} else {
		zero := make([]byte, 1<<20)
		for n := int64(0); n < sp.size && err == nil; n += int64(len(zero)) {
			_, err = f.Write(zero[:min(int64(len(zero)), sp.size-n)])
		}
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		sp.fs.Remove(sp.path)
	}
	return err
}

// onDiskFull is pebble's ENOSPC callback (vfs.OnDiskFull): it releases
// the ballast, so that the write that met ENOSPC succeeds on its retry,
// and refuses commits from now on.
func (sp *space) onDiskFull() {
	sp.full.Store(true)
	if sp.size >= 0 {
		sp.fs.Remove(sp.path) // the base file system: the wrapper blocks writes now
	}
	sp.log.Error("coordstore: no space left on device; commits are refused until there is room")
}

// check refuses a commit while the store is full; at most once a second
// it looks whether the file system has room for the ballast again and
// then resumes.
func (sp *space) check() error {
	if !sp.full.Load() {
		return nil
	}
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if time.Since(sp.lastTry) >= time.Second {
		sp.lastTry = time.Now()
		if u, err := sp.fs.GetDiskUsage(sp.dir); err == nil && u.AvailBytes > 2*uint64(max(sp.size, 16<<20)) {
			if sp.size < 0 || sp.create() == nil {
				sp.full.Store(false)
				sp.log.Info("coordstore: space available again; commits resume")
				return nil
			}
		}
	}
	return fmt.Errorf("%w: no space left on device", coordstore.ErrFull)
}
