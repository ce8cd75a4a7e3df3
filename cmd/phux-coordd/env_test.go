package main

import (
	"crypto/ed25519"
	"encoding/base64"
	"encoding/hex"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/phuxcoord/coord/internal/cmdline"
	"github.com/phuxcoord/coord/internal/testkit/leakcheck"
)

// commandEnvFlags are the flags of each command that have an environment
// variable: what it dials (serve's --admin is where it listens).
var commandEnvFlags = map[string][]string{
	"serve":   witnessEnvFlags,
	"restore": witnessEnvFlags,
	"backup":  backupEnvFlags,
}

// Every flag with a variable names it in its usage ("$PHUX_COORDD_…"),
// and no other flag does.
func TestEnvironmentVariablesInHelp(t *testing.T) {
	for _, c := range tree().Sub {
		c.Flags().VisitAll(func(f *flag.Flag) {
			has := slices.Contains(commandEnvFlags[c.Name], f.Name)
			v := "$" + cmdline.EnvVar(envPrefix, f.Name)
			if strings.Contains(f.Usage, v) != has || !has && strings.Contains(f.Usage, "$"+envPrefix) {
				t.Errorf("%s --%s: usage %q (want the variable named: %v)", c.Name, f.Name, f.Usage, has)
			}
		})
	}
}

// The witness flags of serve and restore and backup's --admin have
// environment variables: a variable sets its flag, a flag given wins,
// an empty variable is none, and a value refused names the variable,
// never the value. Each row of stringFlagCases of such a flag is run
// again with the value in the variable instead of on the command line:
// the same exit status, the refusal naming the variable where it named
// the flag, and the marker in no output.
func TestEnvironmentVariables(t *testing.T) {
	w := newWorld(t, 10*time.Second)
	dir := w.initDir("c")
	sock := filepath.Join(w.base, "c.sock")
	missing := filepath.Join(w.base, "missing")
	file := filepath.Join(w.base, "plain")
	if err := os.WriteFile(file, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	bak := filepath.Join(w.base, "c.bak")
	if _, errOut, code := runCmd(t, "backup", "--state-dir", dir, "--out", bak); code != 0 {
		t.Fatalf("backup: %s", errOut)
	}
	base := map[string][]string{
		"serve":   w.serveArgs(dir, sock, "--admin", "none"),
		"backup":  {"backup", "--state-dir", dir, "--out", "{fresh}"},
		"restore": {"restore", "--state-dir", "{fresh}", "--from", bak, "--witness", "unix:" + w.wsock, "--witness-key", w.wkey, "--keys-from", dir},
	}
	n := 0
	fresh := func() string { n++; return filepath.Join(w.base, "fresh", strconv.Itoa(n)) }
	out := func() string { n++; return filepath.Join(w.base, "b"+strconv.Itoa(n)+".bak") }

	t.Run("refused values name the variable", func(t *testing.T) {
		secret := leakcheck.Secret(32)
		for i, spell := range []string{hex.EncodeToString(secret), base64.RawURLEncoding.EncodeToString(secret)} {
			spelling := []string{"hex", "base64"}[i]
			marked := filepath.Join(w.base, spell)
			if err := os.WriteFile(marked, []byte(spell+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			for cmd, names := range commandEnvFlags {
				for _, name := range names {
					rows := stringFlagCases[cmd][name]
					if len(rows) == 0 {
						t.Fatalf("%s --%s: no row in stringFlagCases", cmd, name)
					}
					for _, r := range rows {
						expand := strings.NewReplacer("{S}", spell, "{missing}", missing, "{file}", file, "{marked}", marked, "{fresh}", fresh()).Replace
						args := append(leakcheck.WithoutFlag(slices.Clone(base[cmd]), name), r.extra...)
						for i := range args {
							args[i] = expand(args[i])
						}
						env := cmdline.EnvVar(envPrefix, name) + "=" + expand(r.value)
						field := r.field
						if field == "--"+name {
							field = "$" + cmdline.EnvVar(envPrefix, name)
						}
						t.Run(spelling+" "+cmd+" $"+cmdline.EnvVar(envPrefix, name)+"="+r.value, func(t *testing.T) {
							stdout, stderr, code := runEchoEnv(t, []string{env}, args...)
							if where := leakcheck.Find(stdout+stderr, secret); where != "" || strings.Contains(stdout+stderr, spell) {
								t.Errorf("the output repeats the marker (%s):\n%s%s", where, stdout, stderr)
							}
							line := refusalLine(stderr)
							if code != r.code || stdout != "" || !strings.HasPrefix(line, "phux-coordd: "+field) {
								t.Errorf("want exit %d and one refusal naming %q; exit %d:\n%s%s", r.code, field, code, stdout, stderr)
							}
							if strings.Contains(line, filepath.Base(w.base)) {
								t.Errorf("the refusal names a path it was given: %s", line)
							}
						})
					}
				}
			}
		}
	})

	t.Run("empty variables are none", func(t *testing.T) {
		empty := []string{"PHUX_COORDD_WITNESS=", "PHUX_COORDD_WITNESS_KEY=", "PHUX_COORDD_WITNESS_CA=", "PHUX_COORDD_WITNESS_SERVER_NAME=", "PHUX_COORDD_ADMIN="}
		args := leakcheck.WithoutFlag(leakcheck.WithoutFlag(base["serve"], "witness"), "witness-key")
		_, stderr, code := runEchoEnv(t, empty, args...)
		if line := refusalLine(stderr); code != exitUsage || line != "phux-coordd: --witness: required (or $PHUX_COORDD_WITNESS)" {
			t.Fatalf("serve without --witness, its variable empty: exit %d %q", code, stderr)
		}
		_, stderr, code = runEchoEnv(t, empty, append(args, "--witness", "unix:"+w.wsock)...)
		if line := refusalLine(stderr); code != exitUsage || line != "phux-coordd: --witness-key: required (or $PHUX_COORDD_WITNESS_KEY)" {
			t.Fatalf("serve without --witness-key, its variable empty: exit %d %q", code, stderr)
		}
		// backup with $PHUX_COORDD_ADMIN empty takes the default admin
		// socket, which nothing serves: it reads the store.
		if stdout, stderr, code := runEchoEnv(t, empty, "backup", "--state-dir", dir, "--out", out()); code != exitOK || !strings.Contains(stdout, "no coordinator running") {
			t.Fatalf("backup with $PHUX_COORDD_ADMIN empty: exit %d\n%s%s", code, stdout, stderr)
		}
	})

	t.Run("flags win", func(t *testing.T) {
		other := hex.EncodeToString(ed25519.NewKeyFromSeed(make([]byte, 32)).Public().(ed25519.PublicKey))
		bad := []string{"PHUX_COORDD_WITNESS=bogus", "PHUX_COORDD_WITNESS_KEY=bogus", "PHUX_COORDD_ADMIN=bogus"}
		// The witness flags given are used: the witness is reached and
		// its key is not the (flag's, other) pin.
		args := append(leakcheck.WithoutFlag(base["serve"], "witness-key"), "--witness-key", other)
		if _, stderr, code := runEchoEnv(t, bad, args...); code != exitWitness || !strings.Contains(refusalLine(stderr), "not the pinned --witness-key") {
			t.Fatalf("serve with flags over bad variables: exit %d %q", code, stderr)
		}
		// --admin given is dialled, not the variable's.
		adm := "unix:" + filepath.Join(file, "a.sock")
		if _, stderr, code := runEchoEnv(t, bad, "backup", "--state-dir", dir, "--out", out(), "--admin", adm); code != exitRuntime || !strings.HasPrefix(refusalLine(stderr), "phux-coordd: admin socket") {
			t.Fatalf("backup with --admin over a bad variable: exit %d %q", code, stderr)
		}
	})

	t.Run("variables set the flags", func(t *testing.T) {
		// backup dials the variable's socket (here one under a file).
		env := []string{"PHUX_COORDD_ADMIN=unix:" + filepath.Join(file, "a.sock")}
		if _, stderr, code := runEchoEnv(t, env, "backup", "--state-dir", dir, "--out", out()); code != exitRuntime || !strings.HasPrefix(refusalLine(stderr), "phux-coordd: admin socket") {
			t.Fatalf("backup with $PHUX_COORDD_ADMIN: exit %d %q", code, stderr)
		}
		// serve activates through the witness the variables name and pin.
		env = []string{"PHUX_COORDD_WITNESS=unix:" + w.wsock, "PHUX_COORDD_WITNESS_KEY=" + w.wkey}
		args := leakcheck.WithoutFlag(leakcheck.WithoutFlag(base["serve"], "witness"), "witness-key")
		p := startEnv(t, filepath.Join(w.base, "env.log"), env, coorddBin, args...)
		p.waitFor("coordinator serving", 15*time.Second)
		w.dial(dir, sock).Close()
		p.cmd.Process.Signal(syscall.SIGTERM)
		if code := p.exit(15 * time.Second); code != 0 {
			t.Fatalf("exit %d after SIGTERM:\n%s", code, p.output())
		}
	})
}
