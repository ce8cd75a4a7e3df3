// Package pgtest gives tests a real PostgreSQL server (test support).
//
// DSN returns the connection string of the server named by the environment
// variable PHUX_PG_DSN when it is set. Otherwise it starts, once per test
// binary, a throwaway cluster in a temporary directory: initdb and postgres
// from the distribution's binaries (/usr/lib/postgresql/*/bin, or the
// directory of an initdb on PATH), listening only on a Unix socket inside
// that directory (listen_addresses is empty, so no TCP port is opened).
// PostgreSQL refuses to run as root, so when the tests run as root the
// cluster runs as the `postgres` user (the distribution package creates
// it), with the data directory chowned to it. Main stops the cluster after
// the tests; on Linux the postmaster also gets SIGQUIT (immediate shutdown)
// if the test process dies first (other platforms have no parent-death
// signal: a killed test binary leaves the cluster running there).
//
// Without PHUX_PG_DSN and without binaries the tests are skipped, except
// under CI=true, where a missing PostgreSQL fails the run.
package pgtest

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"
)

// EnvDSN is the environment variable naming an existing server for the
// tests (a libpq connection string or postgres:// URL). The tests create
// and drop their own schemas in it.
const EnvDSN = "PHUX_PG_DSN"

var (
	once    sync.Once
	dsn     string
	initErr error
	cluster *Cluster
)

// DSN returns the DSN of the test server, starting the throwaway cluster on
// first use. It skips t when no PostgreSQL is available, or fails it under
// CI=true.
func DSN(t testing.TB) string {
	t.Helper()
	once.Do(func() {
		if d := os.Getenv(EnvDSN); d != "" {
			dsn = d
			return
		}
		bin, err := FindBin()
		if err != nil {
			initErr = err
			return
		}
		cluster, initErr = Start(bin, "")
		if initErr == nil {
			dsn = cluster.DSN
		}
	})
	if initErr != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("pgtest: no PostgreSQL (CI=true requires one; set %s or install postgresql): %v", EnvDSN, initErr)
		}
		t.Skipf("pgtest: no PostgreSQL (set %s or install postgresql): %v", EnvDSN, initErr)
	}
	return dsn
}

// Main runs the tests and stops the throwaway cluster if DSN started one.
// Use it from TestMain: func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }.
func Main(m *testing.M) int {
	code := m.Run()
	if cluster != nil {
		if err := cluster.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "pgtest: stopping the cluster:", err)
		}
	}
	return code
}

// FindBin returns the directory holding initdb, postgres and pg_isready:
// the directory of the initdb on PATH (symlinks resolved), else the
// newest /usr/lib/postgresql/*/bin.
func FindBin() (string, error) {
	var cands []string
	if p, err := exec.LookPath("initdb"); err == nil {
		if r, err := filepath.EvalSymlinks(p); err == nil {
			p = r
		}
		cands = append(cands, filepath.Dir(p))
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return version(dirs[i]) > version(dirs[j]) })
	for _, d := range append(cands, dirs...) {
		ok := true
		for _, name := range []string{"initdb", "postgres", "pg_isready"} {
			if _, err := os.Stat(filepath.Join(d, name)); err != nil {
				ok = false
			}
		}
		if ok {
			return d, nil
		}
	}
	return "", fmt.Errorf("no initdb, postgres and pg_isready on PATH or in /usr/lib/postgresql/*/bin")
}

func version(dir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(dir)))
	return n
}

// Cluster is a running throwaway cluster.
type Cluster struct {
	Dir  string // data directory and socket directory live under it
	DSN  string
	cmd  *exec.Cmd
	done chan error
}

// Start creates and starts a cluster under a new temporary directory in
// parent ("" for the default). It runs as the `postgres` user when the
// process is root.
func Start(bin, parent string) (*Cluster, error) {
	dir, err := os.MkdirTemp(parent, "phux-pg-")
	if err != nil {
		return nil, err
	}
	c := &Cluster{Dir: dir}
	ok := false
	defer func() {
		if !ok {
			os.RemoveAll(dir)
		}
	}()
	cred, owner, err := credential()
	if err != nil {
		return nil, err
	}
	if cred != nil {
		if err := os.Chown(dir, int(cred.Uid), int(cred.Gid)); err != nil {
			return nil, err
		}
	}
	data := filepath.Join(dir, "data")
	run := func(name string, args ...string) *exec.Cmd {
		cmd := exec.Command(filepath.Join(bin, name), args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "LC_ALL=C", "LANG=C")
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
		quitWithParent(cmd.SysProcAttr)
		return cmd
	}
	var out bytes.Buffer
	initdb := run("initdb", "-D", data, "-U", owner, "--auth=trust", "-E", "UTF8", "--no-instructions", "--no-sync")
	initdb.Stdout, initdb.Stderr = &out, &out
	if err := initdb.Run(); err != nil {
		return nil, fmt.Errorf("initdb: %v: %s", err, out.Bytes())
	}
	// fsync stays on: the store's durability is measured, not assumed.
	c.cmd = run("postgres", "-D", data, "-k", dir, "-c", "listen_addresses=", "-c", "max_connections=300",
		"-c", "shared_buffers=64MB", "-c", "log_min_messages=warning", "-c", "logging_collector=off")
	logf, err := os.Create(filepath.Join(dir, "postgres.log"))
	if err != nil {
		return nil, err
	}
	c.cmd.Stdout, c.cmd.Stderr = logf, logf
	if err := c.cmd.Start(); err != nil {
		logf.Close()
		return nil, err
	}
	c.done = make(chan error, 1)
	go func() { c.done <- c.cmd.Wait(); logf.Close() }()
	c.DSN = fmt.Sprintf("host=%s port=5432 user=%s dbname=postgres sslmode=disable", dir, owner)
	sock := filepath.Join(dir, ".s.PGSQL.5432")
	deadline := time.Now().Add(60 * time.Second)
	for {
		if _, err := os.Stat(sock); err == nil {
			if ready(bin, dir, owner) {
				break
			}
		}
		select {
		case err := <-c.done:
			log, _ := os.ReadFile(filepath.Join(dir, "postgres.log"))
			return nil, fmt.Errorf("postgres exited: %v: %s", err, log)
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			c.cmd.Process.Kill()
			<-c.done
			log, _ := os.ReadFile(filepath.Join(dir, "postgres.log"))
			return nil, fmt.Errorf("postgres did not become ready in 60 s: %s", log)
		}
	}
	ok = true
	return c, nil
}

func ready(bin, dir, owner string) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return exec.CommandContext(ctx, filepath.Join(bin, "pg_isready"), "-q", "-h", dir, "-U", owner, "-d", "postgres").Run() == nil
}

// credential returns the credential to run the server with (nil: the
// current user) and the database superuser name.
func credential() (*syscall.Credential, string, error) {
	if os.Geteuid() != 0 {
		u, err := user.Current()
		if err != nil {
			return nil, "", err
		}
		return nil, u.Username, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, "", fmt.Errorf("running as root and no postgres user to run the cluster as: %v", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, "postgres", nil
}

// Stop shuts the cluster down (fast shutdown, then SIGKILL after 30 s) and
// removes its directory.
func (c *Cluster) Stop() error {
	c.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-c.done:
	case <-time.After(30 * time.Second):
		c.cmd.Process.Kill()
		<-c.done
	}
	return os.RemoveAll(c.Dir)
}

// Private returns the DSN of PHUX_PG_DSN when set, else starts a cluster
// of its own for t and stops it when t ends (for test binaries without
// Main, such as another package's benchmarks). It skips or fails t like
// DSN.
func Private(t testing.TB) string {
	t.Helper()
	if d := os.Getenv(EnvDSN); d != "" {
		return d
	}
	bin, err := FindBin()
	var c *Cluster
	if err == nil {
		c, err = Start(bin, "")
	}
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("pgtest: no PostgreSQL (CI=true requires one; set %s or install postgresql): %v", EnvDSN, err)
		}
		t.Skipf("pgtest: no PostgreSQL (set %s or install postgresql): %v", EnvDSN, err)
	}
	t.Cleanup(func() { c.Stop() })
	return c.DSN
}
