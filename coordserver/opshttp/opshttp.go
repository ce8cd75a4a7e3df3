// Package opshttp is the operator's HTTP endpoint of a coordserver.Server:
// /metrics (Prometheus text, coordserver/promtext), /healthz (the process
// serves HTTP) and /readyz (Server.Ready: activated, unfenced, certificate
// unexpired, store writable). It serves nothing else and never reveals a
// principal, an id, a payload or a key: the bodies are fixed words and the
// metrics' closed label vocabularies. Bind it to loopback or a Unix socket
// (it has no authentication of its own), separate from the coordinator's
// listeners.
package opshttp

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"time"

	"github.com/phuxcoord/coord/coordserver"
	"github.com/phuxcoord/coord/coordserver/promtext"
)

// Config configures Handler. The zero value is usable.
type Config struct {
	// StoreStatsTimeout bounds the store read of a /metrics scrape and the
	// empty commit of /readyz. Zero means 5 s.
	StoreStatsTimeout time.Duration
	// Logger receives a line when a scrape's store read fails; nil
	// discards.
	Logger *slog.Logger
}

// Handler returns the handler of /metrics, /healthz and /readyz for s.
func Handler(s *coordserver.Server, cfg Config) http.Handler {
	if cfg.StoreStatsTimeout <= 0 {
		cfg.StoreStatsTimeout = 5 * time.Second
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /metrics", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), cfg.StoreStatsTimeout)
		defer cancel()
		st := s.Stats()
		var ss *coordserver.StoreStats
		if v, err := s.StoreStats(ctx); err == nil {
			ss = &v
		} else {
			log.Warn("metrics: store gauges unavailable", "err", err)
		}
		w.Header().Set("Content-Type", promtext.ContentType)
		promtext.Write(w, st, ss)
	})
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), cfg.StoreStatsTimeout)
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
