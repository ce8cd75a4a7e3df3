// Package opshttp is the operator's HTTP endpoint of a coordserver.Server:
// /metrics (the embedder's handler, Config.Metrics: phux-coordd serves
// Server.Stats through the Prometheus client library), /healthz (the
// process serves HTTP) and /readyz (Server.Ready: activated, unfenced,
// certificate unexpired, lease not about to fence, store writable). It
// serves nothing else and never reveals a principal, an id, a payload or a
// key: the bodies are fixed words (and the metrics the embedder chooses).
// Bind it to loopback or a Unix socket (it has no authentication of its
// own), separate from the coordinator's listeners.
package opshttp

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/phuxcoord/coord/coordserver"
)

// Config configures Handler. The zero value is usable.
type Config struct {
	// ReadyTimeout bounds the empty commit of /readyz. Zero means
	// 5 s.
	ReadyTimeout time.Duration
	// Metrics serves GET /metrics; nil means no /metrics (404). It should
	// read Server.Stats and Server.StoreStats at scrape time.
	Metrics http.Handler
}

// Handler returns the handler of /metrics, /healthz and /readyz for s.
func Handler(s *coordserver.Server, cfg Config) http.Handler {
	if cfg.ReadyTimeout <= 0 {
		cfg.ReadyTimeout = 5 * time.Second
	}
	mux := http.NewServeMux()
	if cfg.Metrics != nil {
		mux.Handle("GET /metrics", cfg.Metrics)
	}
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), cfg.ReadyTimeout)
		defer cancel()
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if err := s.Ready(ctx); err != nil {
			w.WriteHeader(http.StatusServiceUnavailable)
			w.Write([]byte("not ready: " + why(err) + "\n"))
			return
		}
		w.Write([]byte("ready\n"))
	})
	return mux
}

// why names the failed readiness check in a fixed word.
func why(err error) string {
	var nr *coordserver.NotReadyError
	if errors.As(err, &nr) {
		return nr.Check
	}
	return "unknown"
}
