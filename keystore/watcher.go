//go:build unix

package keystore

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/phuxcoord/coord/internal/atomicfile"
)

// ErrWatcherClosed is returned by Wait once the watcher has stopped and no
// newer generation can come.
var ErrWatcherClosed = errors.New("keystore: registry watcher closed")

// WatcherConfig configures a Watcher.
type WatcherConfig struct {
	// Interval between polls of the registry file. Zero means 1s; negative
	// is an error.
	Interval time.Duration
	// Logger receives one line per published generation. Nil discards.
	Logger *slog.Logger
}

// Watcher polls the registry file of a state directory and publishes a new
// Registry generation whenever the file's identity (device, inode), size,
// modification time or SHA-256 content hash changes — or whenever a load
// starts or stops failing, or fails differently. A failed load publishes
// an empty registry (fail closed), never the last good one.
type Watcher struct {
	dir      string
	interval time.Duration
	log      *slog.Logger

	mu      sync.Mutex
	cur     *Registry
	changed chan struct{} // closed and replaced on every publication
	stopped bool

	last observation // owned by the polling goroutine after NewWatcher

	cancel    context.CancelFunc
	done      chan struct{}
	closeOnce sync.Once
}

// observation is what the watcher compares between polls.
type observation struct {
	info atomicfile.Info
	hash [32]byte
	err  string
}

func (o observation) equal(p observation) bool {
	return o.err == p.err && o.hash == p.hash && o.info.Dev == p.info.Dev && o.info.Ino == p.info.Ino &&
		o.info.Size == p.info.Size && o.info.ModTime.Equal(p.info.ModTime)
}

// NewWatcher loads stateDir's registry now (generation 1, empty with Err
// set if the load fails) and polls it every cfg.Interval until ctx is done
// or Close is called.
func NewWatcher(ctx context.Context, stateDir string, cfg WatcherConfig) (*Watcher, error) {
	if cfg.Interval < 0 {
		return nil, fmt.Errorf("keystore: negative watcher interval %v", cfg.Interval)
	}
	if cfg.Interval == 0 {
		cfg.Interval = time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(ctx)
	w := &Watcher{
		dir:      stateDir,
		interval: cfg.Interval,
		log:      cfg.Logger,
		changed:  make(chan struct{}),
		cancel:   cancel,
		done:     make(chan struct{}),
	}
	obs, reg := w.load()
	w.last = obs
	w.publish(reg)
	go w.run(ctx)
	return w, nil
}

func (w *Watcher) load() (observation, *Registry) {
	data, info, err := atomicfile.ReadFileInfo(w.dir, RegistryFile, MaxRegistrySize)
	if err != nil {
		err = fmt.Errorf("keystore: registry: %w", err)
		return observation{err: err.Error()}, emptyRegistry(err)
	}
	obs := observation{info: info, hash: sha256.Sum256(data)}
	reg, err := ParseRegistry(data)
	if err != nil {
		obs.err = err.Error()
	}
	return obs, reg
}

// publish is called only by NewWatcher and then by the polling goroutine,
// so generations are assigned by a single writer. The log line is written
// before waiters wake, so a waiter that sees generation g finds its line.
func (w *Watcher) publish(reg *Registry) {
	w.mu.Lock()
	var gen uint64 = 1
	if w.cur != nil {
		gen = w.cur.gen + 1
	}
	w.mu.Unlock()
	reg.gen = gen
	if err := reg.Err(); err != nil {
		w.log.Warn("workload key registry unusable; serving an empty registry",
			"generation", gen, "error", err)
	} else {
		w.log.Info("workload key registry loaded", "generation", gen, "entries", reg.Len())
	}
	w.mu.Lock()
	w.cur = reg
	close(w.changed)
	w.changed = make(chan struct{})
	w.mu.Unlock()
}

func (w *Watcher) run(ctx context.Context) {
	defer close(w.done)
	defer func() {
		w.mu.Lock()
		w.stopped = true
		close(w.changed)
		w.changed = make(chan struct{})
		w.mu.Unlock()
	}()
	t := time.NewTicker(w.interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		obs, reg := w.load()
		if obs.equal(w.last) {
			continue
		}
		w.last = obs
		w.publish(reg)
	}
}

// Current returns the latest published registry; never nil.
func (w *Watcher) Current() *Registry {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.cur
}

// Wait blocks until a registry with generation greater than
// afterGeneration is published and returns it. It returns ctx's error when
// ctx is done first, and ErrWatcherClosed once the watcher has stopped.
func (w *Watcher) Wait(ctx context.Context, afterGeneration uint64) (*Registry, error) {
	for {
		w.mu.Lock()
		cur, ch, stopped := w.cur, w.changed, w.stopped
		w.mu.Unlock()
		if cur.gen > afterGeneration {
			return cur, nil
		}
		if stopped {
			return nil, ErrWatcherClosed
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-ch:
		}
	}
}

// Close stops polling and waits for the polling goroutine to return. It is
// safe to call more than once. Current keeps returning the last registry.
func (w *Watcher) Close() error {
	w.closeOnce.Do(w.cancel)
	<-w.done
	return nil
}
