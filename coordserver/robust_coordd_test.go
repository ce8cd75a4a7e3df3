package coordserver_test

import (
	"bufio"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/phuxcoord/coord/internal/testkit/childproc"
	"github.com/phuxcoord/coord/keystore"
	"github.com/phuxcoord/coord/witness"
)

// The daemon scenarios run the coordinator as the phux-coordd binary
// itself, on PostgreSQL, every instance a --standby: it waits while
// another activation holds the witness lease and activates once it ends
// (cmd/phux-coordd's failover test sets its daemons up the same way).

// coorddExitFenced is phux-coordd's exit code when it lost its authority
// while serving (cmd/phux-coordd exitFenced).
const coorddExitFenced = 6

// rbBuilt is a binary TestRobustness builds into rbBinDir when a scenario
// first needs it: once per run of the test, as the directory ends with it.
type rbBuilt struct {
	once sync.Once
	path string
	err  error
}

// get builds package pkg (go build args..., -o rbBinDir/name) on its first
// call and returns its path; t fails when the build did.
func (b *rbBuilt) get(t testing.TB, name, pkg string, args ...string) string {
	b.once.Do(func() {
		b.path = filepath.Join(rbBinDir, name)
		cmd := append(append([]string{"build"}, args...), "-o", b.path, pkg)
		if out, err := exec.Command("go", cmd...).CombinedOutput(); err != nil {
			b.err = fmt.Errorf("%v\n%s", err, out)
		}
	})
	if b.err != nil {
		t.Fatalf("building %s: %v", pkg, b.err)
	}
	return b.path
}

// rbCoorddBin is phux-coordd.
var rbCoorddBin rbBuilt

var rbServingRE = regexp.MustCompile(`msg="coordinator serving".* epoch=(\d+)`)

// useCoordd puts the lineage on phux-coordd daemons over a fresh schema
// of the run's PostgreSQL: phux-coordd init makes the state (authority
// key, registry, store), and the workload keys are registered in it.
func (l *rbLineage) useCoordd() {
	l.usePG()
	l.coordd = rbCoorddBin.get(l.t, "phux-coordd", "github.com/phuxcoord/coord/cmd/phux-coordd")
	l.pgURL = rbPGURL(l.pgDSN)
	dir := filepath.Join(l.dir, "state")
	if out, err := exec.Command(l.coordd, "init", "--state-dir", dir, "--store", l.pgURL, "--store-schema", l.pgSchema).CombinedOutput(); err != nil {
		l.t.Fatalf("phux-coordd init: %v\n%s", err, out)
	}
	auth, err := keystore.LoadAuthority(dir)
	if err != nil {
		l.t.Fatal(err)
	}
	l.authDir, l.keysDir, l.authFP = dir, dir, auth.Fingerprint()
	for _, k := range l.keys {
		if _, err := keystore.AddKey(dir, k.Public(), runsScope, time.Now().Add(24*time.Hour)); err != nil {
			l.t.Fatal(err)
		}
	}
}

// rbPGURL turns a key=value DSN into the postgres:// URL phux-coordd's
// --store takes.
func rbPGURL(dsn string) string {
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		return dsn
	}
	q, db := url.Values{}, "postgres"
	for _, kv := range strings.Fields(dsn) {
		k, v, _ := strings.Cut(kv, "=")
		if k == "dbname" {
			db = v
		} else {
			q.Set(k, v)
		}
	}
	return (&url.URL{Scheme: "postgres", Path: "/" + db, RawQuery: q.Encode()}).String()
}

// startCoordd starts a phux-coordd --standby serving sock, with a state
// directory of its own holding the lineage's authority key and registry
// (a standby host's copy). Its READY is the "coordinator serving" line.
func (l *rbLineage) startCoordd(sock string) *rbChild {
	dir := filepath.Join(l.dir, fmt.Sprintf("d%d", l.childN))
	if err := os.Mkdir(dir, 0o700); err != nil {
		l.t.Fatal(err)
	}
	for _, f := range []string{keystore.AuthorityKeyFile, keystore.RegistryFile} {
		b, err := os.ReadFile(filepath.Join(l.authDir, f))
		if err != nil {
			l.t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o600); err != nil {
			l.t.Fatal(err)
		}
	}
	logf, err := os.OpenFile(l.childLog, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		l.t.Fatal(err)
	}
	fmt.Fprintf(logf, "--- phux-coordd %d\n", l.childN)
	cmd := exec.Command(l.coordd, "serve", "--state-dir", dir, "--store", l.pgURL, "--store-schema", l.pgSchema,
		"--standby", "--standby-poll", "50ms", "--lease-margin", "300ms", "--store-idle-tx-timeout", "1s",
		"--witness", l.w.addr, "--witness-key", witness.FormatPublicKey(l.wpub), "--listen", "unix:"+sock,
		"--admin", "none", "--shutdown-timeout", "1s", "--log-level", "info")
	out, err := cmd.StderrPipe()
	if err != nil {
		l.t.Fatal(err)
	}
	cmd.Stdout = logf
	childproc.DieWithParent(cmd)
	if err := cmd.Start(); err != nil {
		l.t.Fatal(err)
	}
	c := &rbChild{cmd: cmd, sock: sock, ready: make(chan crashReady, 1), exited: make(chan struct{})}
	go func() {
		defer logf.Close()
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			line := sc.Text()
			fmt.Fprintln(logf, line)
			if m := rbServingRE.FindStringSubmatch(line); m != nil {
				e, _ := strconv.ParseUint(m[1], 10, 64)
				c.ready <- crashReady{Epoch: e}
			}
		}
		cmd.Wait()
		c.state = cmd.ProcessState
		close(c.exited)
	}()
	l.mu.Lock()
	l.children = append(l.children, c)
	l.mu.Unlock()
	l.t.Cleanup(func() { c.cmd.Process.Signal(syscall.SIGKILL); <-c.exited })
	return c
}

// scenarioDaemon: phux-coordd SIGKILLed at random moments under load, a
// standby already waiting each time (it activates once the lease ends).
func (l *rbLineage) scenarioDaemon(n int) {
	l.useCoordd()
	l.up(nil)
	l.startWork()
	for range n {
		sb := l.startChild("", nil)
		l.pause()
		l.current().kill()
		l.tally.add(func(t *rbTally) { t.coordKills++ })
		if !l.serve(sb, 60*time.Second) {
			l.fatalf("the standby exited instead of taking over")
		}
	}
}
