package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/phuxcoord/coord/coordserver"
	"github.com/phuxcoord/coord/coordserver/adminsock"
	"github.com/phuxcoord/coord/coordserver/opshttp"
	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/keystore"
	"github.com/phuxcoord/coord/witness"
)

// serveOpts are the flags of serve.
type serveOpts struct {
	stateDir, store   string
	pg                pgFlags
	standby           bool
	standbyPoll       time.Duration
	leaseMargin       time.Duration
	readyMargin       time.Duration
	w                 witnessFlags
	listen            listFlag
	tlsCert, tlsKey   string
	metrics, admin    string
	auth, caps        string
	owner, ownerDir   string
	quotas            coordserver.Quotas
	admission         coordserver.Admission
	limits            [6]uint64 // coordwire.Limits fields, 0: reference
	storeMaxBytes     int
	commandWait       time.Duration
	handshakeTimeout  time.Duration
	writeTimeout      time.Duration
	sweepInterval     time.Duration
	registryPoll      time.Duration
	activationTimeout time.Duration
	shutdownTimeout   time.Duration
	logLevel, logFmt  string
	checkHooks        string // phuxdefects builds only (checkhooks_on.go)
}

func (o *serveOpts) register(fl *flag.FlagSet) {
	fl.StringVar(&o.stateDir, "state-dir", "", "state directory made by phux-coordd init (required)")
	fl.StringVar(&o.store, "store", "", "store: pebble, pebble:PATH, bolt, bolt:PATH (default: the store the state directory holds, STATE-DIR/store.pebble or STATE-DIR/store.bolt) or postgres://[USER@]HOST[:PORT]/DBNAME[?PARAMS], shared by a primary and its standbys (no password in it; see --store-password-file)")
	o.pg.register(fl)
	fl.BoolVar(&o.standby, "standby", false, "wait, committing nothing, while another activation of this coordinator holds the witness lease, and activate once it ends (needs a postgres:// store)")
	fl.DurationVar(&o.standbyPoll, "standby-poll", 0, "how often a --standby asks the witness whether the lease has ended (0: 250ms)")
	fl.DurationVar(&o.leaseMargin, "lease-margin", 0, "the coordinator fences itself this long before its certificate expires when it cannot renew (0: 1s + lifetime/10)")
	fl.DurationVar(&o.readyMargin, "ready-margin", 0, "/readyz fails, and renewal failures log at ERROR instead of WARN, once renewals fail with less than this left before the coordinator fences itself or for a renewal period; a renewal that lands clears it (0: a renewal period, a third of the certificate lifetime)")
	fl.IntVar(&o.storeMaxBytes, "store-max-bytes", 0, "embedded store size bound in bytes (a bbolt file's size, a pebble directory's disk use); commits beyond it are refused RESOURCE_EXHAUSTED (0: the engine's default, 16 GiB)")
	o.w.register(fl)
	fl.Var(&o.listen, "listen", "coordinator listener, repeatable: unix:PATH (owner-only socket) or tls:HOST:PORT (TLS 1.3, ALPN phux-coordinator/1; needs --tls-cert and --tls-key) (at least one)")
	fl.StringVar(&o.tlsCert, "tls-cert", "", "PEM certificate chain of the tls: listeners")
	fl.StringVar(&o.tlsKey, "tls-key", "", "PEM private key of the tls: listeners (mode 0600: no group or other permission)")
	fl.StringVar(&o.metrics, "metrics", "", "operator HTTP endpoint (/metrics, /healthz, /readyz): HOST:PORT or unix:PATH (default: none)")
	fl.StringVar(&o.admin, "admin", "", "local admin socket for backups: unix:PATH (default unix:STATE-DIR/admin.sock; \"none\" disables it)")
	fl.StringVar(&o.auth, "auth", "paired", "workload-auth mode; v0.1 serves only paired (local and proofless are refused, §2)")
	fl.StringVar(&o.caps, "capabilities", "all", "capabilities offered: all (every one this version serves), none, or a comma list of administration, event_replay, terminal_bindings, artifact_manifests, signals")
	fl.StringVar(&o.owner, "owner", "exec", "terminal owner: exec (Runs execute as child processes of the daemon, as its user, for keys granted terminal_control) or none")
	fl.StringVar(&o.ownerDir, "owner-dir", "", "working directory of a Run whose executor document names none (default: the daemon's)")
	q := &o.quotas
	for _, f := range []struct {
		name  string
		p     *int
		usage string
	}{
		{"max-connections", &q.Connections, "authenticated connections, all principals (0: 256)"},
		{"max-connections-per-principal", &q.ConnectionsPerPrincipal, "open connections of one workload key (0: 16)"},
		{"max-outstanding", &q.Outstanding, "outstanding requests, all principals (0: 8192)"},
		{"max-outstanding-per-principal", &q.OutstandingPerPrincipal, "outstanding requests of one workload key (0: 512)"},
		{"max-outstanding-per-connection", &q.OutstandingPerConnection, "outstanding requests of one connection (0: 256)"},
		{"max-pending", &q.Pending, "pending operations, all principals (0: 100000)"},
		{"max-pending-per-principal", &q.PendingPerPrincipal, "pending operations of one workload key (0: 10000)"},
		{"max-leases", &q.Leases, "snapshot and replay leases, all principals (0: 256)"},
		{"max-leases-per-principal", &q.LeasesPerPrincipal, "snapshot and replay leases of one workload key (0: 16)"},
		{"max-leases-per-connection", &q.LeasesPerConnection, "snapshot and replay leases of one connection (0: 8)"},
		{"max-subscriptions", &q.Subscriptions, "subscriptions, all principals (0: 2048)"},
		{"max-subscriptions-per-principal", &q.SubscriptionsPerPrincipal, "subscriptions of one workload key (0: 64)"},
		{"max-subscriptions-per-connection", &q.SubscriptionsPerConnection, "subscriptions of one connection (0: 32)"},
	} {
		fl.IntVar(f.p, f.name, 0, f.usage)
	}
	ad := &o.admission
	fl.IntVar(&ad.Unauthenticated, "max-unauthenticated", 0, "connections in the handshake, server-wide: a budget of their own, never counted in --max-connections (0: 128)")
	fl.IntVar(&ad.PerHost, "max-unauthenticated-per-host", 0, "connections in the handshake from one TLS peer address (IPv4 address, IPv6 /64) (0: an eighth of --max-unauthenticated)")
	fl.IntVar(&ad.PerUID, "max-unauthenticated-per-uid", 0, "connections in the handshake of one peer uid on the Unix socket (0: --max-unauthenticated)")
	fl.IntVar(&ad.PerProcess, "max-unauthenticated-per-process", 0, "connections in the handshake of one peer process on the Unix socket (0: an eighth of --max-unauthenticated, at least 16)")
	fl.DurationVar(&ad.Grace, "admission-grace", 0, "least time a connection in the handshake may wait for its peer before a newcomer may replace it when the budget is full; the grace learned from the handshakes that authenticate is at least this (0: 100ms)")
	fl.DurationVar(&ad.MaxGrace, "admission-max-grace", 0, "most the learned grace may reach (0: 1s)")
	fl.IntVar(&ad.LogBurst, "log-refusals-burst", 0, "log lines of refusals per cause per --log-refusals-interval; the rest are counted in one \"log lines suppressed\" line (0: 10)")
	fl.DurationVar(&ad.LogInterval, "log-refusals-interval", 0, "window of --log-refusals-burst (0: 1m)")
	fl.Int64Var(&q.PinnedBytes, "max-pinned-bytes", 0, "bytes pinned by snapshot cuts, all principals (0: 512 MiB)")
	fl.Int64Var(&q.PinnedBytesPerPrincipal, "max-pinned-bytes-per-principal", 0, "bytes pinned by the cuts of one workload key (0: 32 MiB)")
	for i, name := range limitNames {
		fl.Uint64Var(&o.limits[i], name, 0, "limit offer "+name+" (0: the reference limit)")
	}
	fl.DurationVar(&o.commandWait, "command-wait", 0, "how long a command reply waits for a PENDING operation to finish (0: 2s; negative: reply at once)")
	fl.DurationVar(&o.handshakeTimeout, "handshake-timeout", 0, "bound of the whole handshake, the TLS handshake included, from accept (0: 10s)")
	fl.DurationVar(&o.writeTimeout, "write-timeout", 0, "a peer that does not read for this long is disconnected (0: 10s)")
	fl.DurationVar(&o.sweepInterval, "sweep-interval", 0, "period of the retention sweep (0: 1m; negative: none)")
	fl.DurationVar(&o.registryPoll, "registry-poll", 0, "polling interval of the workload key registry (0: 1s)")
	fl.DurationVar(&o.activationTimeout, "activation-timeout", 30*time.Second, "bound of the activation (store, witness, certificate)")
	fl.DurationVar(&o.shutdownTimeout, "shutdown-timeout", 10*time.Second, "how long SIGTERM/SIGINT waits for requests in flight before cutting them short")
	fl.StringVar(&o.logLevel, "log-level", "info", "debug, info, warn or error")
	fl.StringVar(&o.logFmt, "log-format", "text", "text or json (log/slog on stderr)")
	registerCheckHooks(fl, o)
}

var limitNames = [6]string{"max-frame-bytes", "max-page-bytes", "max-page-records", "max-typed-payload-bytes", "max-event-credit-count", "max-event-credit-bytes"}

func (o *serveOpts) limitsOffer() (coordwire.Limits, error) {
	v := o.limits
	if v == [6]uint64{} {
		return coordwire.Limits{}, nil
	}
	l := coordwire.ReferenceLimits()
	set32 := func(i int, p *uint32) error {
		if v[i] == 0 {
			return nil
		}
		if v[i] > math.MaxUint32 {
			return refuse(exitUsage, "--%s: above 2^32-1", limitNames[i])
		}
		*p = uint32(v[i])
		return nil
	}
	for i, p := range []*uint32{&l.MaxFrameBytes, &l.MaxPageBytes, nil, &l.MaxTypedPayloadBytes, &l.MaxEventCreditCount, &l.MaxEventCreditBytes} {
		if p == nil {
			continue
		}
		if err := set32(i, p); err != nil {
			return l, err
		}
	}
	if v[2] != 0 {
		if v[2] > math.MaxUint16 {
			return l, refuse(exitUsage, "--max-page-records: above 65535")
		}
		l.MaxPageRecords = uint16(v[2])
	}
	return l, nil
}

func parseCaps(v string) (coordwire.Capabilities, error) {
	switch v {
	case "all":
		return coordserver.ServedCapabilities, nil
	case "none":
		return 0, nil
	}
	var c coordwire.Capabilities
	for _, n := range strings.Split(v, ",") {
		switch n {
		case "administration":
			c |= coordwire.CapAdministration
		case "event_replay":
			c |= coordwire.CapEventReplay
		case "terminal_bindings":
			c |= coordwire.CapTerminalBindings
		case "artifact_manifests":
			c |= coordwire.CapArtifactManifests
		case "signals":
			c |= coordwire.CapSignals
		default:
			return 0, refuse(exitUsage, "--capabilities: want all, none, or a comma list of administration, event_replay, terminal_bindings, artifact_manifests, signals")
		}
	}
	return c, nil
}

func parseAuth(v string) (coordserver.AuthMode, error) {
	switch v {
	case "paired":
		return coordserver.AuthPaired, nil
	case "local":
		return coordserver.AuthLocal, nil
	case "proofless":
		return coordserver.AuthProofless, nil
	}
	return 0, refuse(exitUsage, "--auth: want paired")
}

// listenSpec is one parsed --listen.
type listenSpec struct{ network, addr string }

func parseListen(vs []string) ([]listenSpec, bool, error) {
	if len(vs) == 0 {
		return nil, false, refuse(exitUsage, "--listen: at least one is required")
	}
	var out []listenSpec
	anyTLS := false
	for _, v := range vs {
		switch {
		case strings.HasPrefix(v, "unix:") && len(v) > 5:
			out = append(out, listenSpec{"unix", v[5:]})
		case strings.HasPrefix(v, "tls:") && len(v) > 4:
			out = append(out, listenSpec{"tls", v[4:]})
			anyTLS = true
		default:
			return nil, false, refuse(exitUsage, "--listen: want unix:PATH or tls:HOST:PORT")
		}
	}
	return out, anyTLS, nil
}

// loadTLS loads the listeners' certificate; the key file must be a
// regular file without group or other permission bits.
func loadTLS(certFile, keyFile string) (*tls.Config, error) {
	if certFile == "" || keyFile == "" {
		return nil, refuse(exitUsage, "--tls-cert, --tls-key: required with a tls: listener")
	}
	f, err := os.Open(keyFile)
	if err != nil {
		return nil, refuse(exitConfig, "--tls-key: %v", pathCause(err))
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, refuse(exitConfig, "--tls-key: %v", pathCause(err))
	}
	if !st.Mode().IsRegular() {
		return nil, refuse(exitConfig, "--tls-key: not a regular file")
	}
	if st.Mode().Perm()&0o077 != 0 {
		return nil, refuse(exitConfig, "--tls-key: insecure permissions: the key file is readable by group or others (chmod 600)")
	}
	keyPEM, err := io.ReadAll(io.LimitReader(f, 1<<20))
	if err != nil {
		return nil, refuse(exitConfig, "--tls-key: %v", pathCause(err))
	}
	defer clear(keyPEM)
	certPEM, err := os.ReadFile(certFile)
	if err != nil {
		return nil, refuse(exitConfig, "--tls-cert: %v", pathCause(err))
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, refuse(exitConfig, "--tls-cert, --tls-key: not a PEM certificate and its matching private key")
	}
	return &tls.Config{Certificates: []tls.Certificate{pair}}, nil
}

// adminPath is the path of the admin socket --admin v names ("" for
// none); a refusal names field (the flag, or the variable it came from).
func adminPath(v, stateDir, field string) (string, error) {
	switch {
	case v == "":
		return filepath.Join(stateDir, "admin.sock"), nil
	case v == "none":
		return "", nil
	case strings.HasPrefix(v, "unix:") && len(v) > 5:
		return v[5:], nil
	}
	return "", refuse(exitUsage, "%s: want unix:PATH or none", field)
}

func cmdServe(args []string, stdout, stderr io.Writer) error {
	fl := newFlags("serve", stdout)
	var o serveOpts
	o.register(fl)
	if err := parseEnv(fl, args, &o.w.env); err != nil {
		return err
	}
	log, err := newLogger(stderr, o.logLevel, o.logFmt)
	if err != nil {
		return err
	}
	// Every socket and file the daemon creates is owner-only from the
	// moment it exists.
	syscall.Umask(0o077)

	// Everything that can be checked without the store and the witness
	// is checked first, so that a mistake costs no activation.
	mode, err := parseAuth(o.auth)
	if err != nil {
		return err
	}
	caps, err := parseCaps(o.caps)
	if err != nil {
		return err
	}
	limits, err := o.limitsOffer()
	if err != nil {
		return err
	}
	listens, anyTLS, err := parseListen(o.listen)
	if err != nil {
		return err
	}
	var tlsCfg *tls.Config
	if anyTLS {
		if tlsCfg, err = loadTLS(o.tlsCert, o.tlsKey); err != nil {
			return err
		}
	}
	adminSock, err := adminPath(o.admin, o.stateDir, "--admin")
	if err != nil {
		return err
	}
	auth, err := loadAuthority(o.stateDir, "state directory")
	if err != nil {
		return err
	}
	if err := checkRegistry(o.stateDir, "state directory"); err != nil {
		return err
	}
	spec, err := parseStoreWith(o.store, o.stateDir, o.pg)
	if err != nil {
		return err
	}
	if o.standby && spec.kind != "postgres" {
		return refuse(exitUsage, "--standby: needs a store shared with the primary (--store postgres://…); an embedded store is locked by its one coordinator")
	}
	wcfg, err := o.w.config()
	if err != nil {
		return err
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	registry, err := keystore.NewWatcher(context.WithoutCancel(ctx), o.stateDir, keystore.WatcherConfig{Interval: o.registryPoll, Logger: log})
	if err != nil {
		return refuse(exitConfig, "state directory: registry: %v", pathCause(err))
	}
	defer registry.Close()

	// The store is opened (and locked) first, by the daemon: the owner's
	// journal, also in the state directory, is opened only once no other
	// daemon can be using it, so that a second daemon is refused for the
	// store's lock, not for the journal's.
	st, err := spec.openMax(ctx, o.storeMaxBytes, log)
	if err != nil {
		return activationRefusal(&coordserver.ActivationError{Step: coordserver.StepOpenStore, Err: err})
	}
	defer st.Close() // after the server's Shutdown and the owner's close
	cfg := coordserver.Config{
		Store:            st,
		Witness:          wcfg,
		Lease:            witness.LeaseConfig{Margin: o.leaseMargin, AlertMargin: o.readyMargin},
		AuthorityKey:     auth,
		Registry:         registry,
		Auth:             mode,
		Limits:           limits,
		Capabilities:     caps,
		Quotas:           o.quotas,
		Admission:        o.admission,
		Logger:           log,
		CommandWait:      o.commandWait,
		HandshakeTimeout: o.handshakeTimeout,
		WriteTimeout:     o.writeTimeout,
		SweepInterval:    o.sweepInterval,
	}
	if err := applyCheckHooks(&cfg, &o, log); err != nil {
		return err
	}
	// The terminal owner: registered inside New (Config.Owner), before
	// recovery, so that recovery can ask it about effects a crash left
	// DISPATCHED.
	owner, err := embedOwner(&cfg, &o, auth.Fingerprint(), log)
	if err != nil {
		return err
	}
	if owner != nil {
		defer owner.close()
	}
	var srv *coordserver.Server
	if o.standby {
		// The wait has no bound but the signals; it commits nothing.
		srv, err = coordserver.NewStandby(ctx, cfg, coordserver.StandbyConfig{Poll: o.standbyPoll})
		if err != nil && ctx.Err() != nil {
			log.Info("signal received while waiting as a standby: stopping")
			return nil
		}
	} else {
		actx, cancel := context.WithTimeout(ctx, o.activationTimeout)
		srv, err = coordserver.New(actx, cfg)
		cancel()
	}
	if err != nil {
		return activationRefusal(err)
	}
	if owner != nil {
		owner.registered(srv.Owner())
	}
	return serveActivated(ctx, srv, &o, listens, tlsCfg, adminSock, auth.Fingerprint(), log)
}

// serveActivated binds the listeners of an activated server, serves until
// a signal (graceful shutdown, exit 0), a fence (exit 6) or a listener
// failure, and shuts down.
func serveActivated(ctx context.Context, srv *coordserver.Server, o *serveOpts, listens []listenSpec, tlsCfg *tls.Config,
	adminSock string, authFP [32]byte, log *slog.Logger) error {
	var ls []net.Listener
	closeAll := func() {
		for _, l := range ls {
			l.Close()
		}
	}
	fail := func(code int, format string, args ...any) error {
		closeAll()
		sctx, cancel := context.WithTimeout(context.Background(), o.shutdownTimeout)
		srv.Shutdown(sctx) // relinquishes: a corrected restart activates at once
		cancel()
		return refuse(code, format, args...)
	}
	for _, sp := range listens {
		var l net.Listener
		var err error
		if sp.network == "unix" {
			l, err = coordserver.ListenUnix(sp.addr)
		} else {
			l, err = coordserver.ListenTLS(sp.addr, tlsCfg)
		}
		if err != nil {
			return fail(exitConfig, "--listen %s: %v", sp.network, netCause(err))
		}
		ls = append(ls, l)
	}
	var admin net.Listener
	if adminSock != "" {
		var err error
		if admin, err = coordserver.ListenUnix(adminSock); err != nil {
			return fail(exitConfig, "--admin: %v", netCause(err))
		}
	}
	var metrics net.Listener
	if o.metrics != "" {
		var err error
		if strings.HasPrefix(o.metrics, "unix:") {
			metrics, err = coordserver.ListenUnix(o.metrics[5:])
		} else {
			metrics, err = net.Listen("tcp", o.metrics)
		}
		if err != nil {
			if admin != nil {
				admin.Close()
			}
			return fail(exitConfig, "--metrics: %v", netCause(err))
		}
	}

	errc := make(chan error, len(ls)+2)
	for _, l := range ls {
		go func() { errc <- srv.Serve(l) }()
	}
	var hs *http.Server
	if metrics != nil {
		hs = &http.Server{Handler: opshttp.Handler(srv, opshttp.Config{Metrics: metricsHandler(srv, log)}), ReadHeaderTimeout: 10 * time.Second,
			ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
		go func() {
			if err := hs.Serve(metrics); err != nil && !errors.Is(err, http.ErrServerClosed) {
				errc <- err
			}
		}()
	}
	var ad *adminsock.Server
	if admin != nil {
		ad = adminsock.Serve(admin, adminsock.Config{Store: srv.Store(), AuthorityFingerprint: authFP, Logger: log})
	}
	names := make([]string, len(listens))
	for i, sp := range listens {
		names[i] = sp.network + ":" + sp.addr
	}
	log.Info("coordinator serving", "coordinator", srv.CoordinatorID().String(), "epoch", uint64(srv.Epoch()),
		"incarnation", srv.Incarnation().String(), "listen", strings.Join(names, ","), "metrics", o.metrics, "admin", adminSock)

	var result error
	select {
	case <-ctx.Done():
		log.Info("signal received: shutting down (requests in flight finish, the lease is relinquished)")
	case <-srv.Fenced():
		why := "lease fenced"
		if err := srv.Ready(context.Background()); err != nil {
			why = err.Error()
		}
		log.Error("authority lost: stopping", "reason", why)
		result = refuse(exitFenced, "authority fenced while serving (%s); a supervisor may restart the daemon", why)
	case err := <-errc:
		log.Error("a listener failed: stopping", "err", netCause(err))
		result = refuse(exitRuntime, "listener failed: %v", netCause(err))
	}
	if ad != nil {
		ad.Close() // a backup in progress is cut short: its file is never installed
	}
	sctx, cancel := context.WithTimeout(context.Background(), o.shutdownTimeout)
	serr := srv.Shutdown(sctx)
	cancel()
	if hs != nil {
		hctx, hcancel := context.WithTimeout(context.Background(), time.Second)
		hs.Shutdown(hctx)
		hcancel()
	}
	closeAll()
	if result != nil {
		return result
	}
	if serr != nil {
		log.Error("shutdown incomplete", "err", serr)
		return refuse(exitRuntime, "shutdown: %v (if the lease was not relinquished, a successor activates once it expires)", serr)
	}
	log.Info("coordinator stopped; lease relinquished")
	return nil
}

// netCause is a listen error without the address it names.
func netCause(err error) string { return pathCause(err) }
