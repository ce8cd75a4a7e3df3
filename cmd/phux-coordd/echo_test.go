package main

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/phuxcoord/coord/internal/testkit/childproc"
	"github.com/phuxcoord/coord/internal/testkit/leakcheck"
)

// helpFlags returns the flags of a command as its --help lists them: name
// and type word ("" for a boolean).
func helpFlags(t *testing.T, cmd string) map[string]string {
	t.Helper()
	var out bytes.Buffer
	if code := run([]string{cmd, "--help"}, &out, io.Discard); code != exitOK {
		t.Fatalf("%s --help: exit %d", cmd, code)
	}
	flags := map[string]string{}
	for _, m := range regexp.MustCompile(`(?m)^  -([a-z0-9-]+)(?: ([a-z0-9]+))?$`).FindAllStringSubmatch(out.String(), -1) {
		flags[m[1]] = m[2]
	}
	if len(flags) == 0 {
		t.Fatalf("%s --help lists no flag:\n%s", cmd, out.String())
	}
	return flags
}

// echoCase is one refusal, with the marker where the user went wrong.
type echoCase struct {
	name  string
	args  []string
	code  int    // the documented exit status
	field string // what the refusal line names first
}

// stringFlagCase is a wrong value of a string flag: value and extra
// arguments with {S} (the marker's spelling), {missing} (a directory that
// does not exist), {file} (a regular file), {marked} (a regular file named
// and filled with the marker) and {fresh} (a new state directory path).
type stringFlagCase struct {
	value string
	extra []string
	code  int
	field string
}

// stringFlagCases lists, for every string flag of every command, the
// values that must be refused. A string flag without a row fails the
// test: a new flag must say how it refuses a wrong value.
var stringFlagCases = map[string]map[string][]stringFlagCase{
	"init": {
		"state-dir": {{"{file}/{S}", nil, exitConfig, "state directory"}},
		"store": {{"{S}", nil, exitUsage, "--store"}, {"bolt:{missing}/{S}", nil, exitStore, "store"},
			{"postgres://{S}@127.0.0.1:1/{S}", nil, exitStore, "store"}},
		"store-password-file": {{"{missing}/{S}", []string{"--store", "postgres://127.0.0.1:1/db"}, exitConfig, "--store-password-file"}},
		"store-schema":        {{"{S}", []string{"--store", "postgres://127.0.0.1:1/db"}, exitStore, "store"}},
	},
	"serve": {
		"state-dir": {{"{missing}/{S}", nil, exitConfig, "state directory"}, {"{file}/{S}", nil, exitConfig, "state directory"}},
		"store": {{"{S}", nil, exitUsage, "--store"}, {"bolt:{missing}/{S}", nil, exitStore, "store"},
			{"postgres://{S}@127.0.0.1:1/{S}", nil, exitStore, "store"}},
		"store-password-file": {{"{missing}/{S}", []string{"--store", "postgres://127.0.0.1:1/db"}, exitConfig, "--store-password-file"},
			{"{marked}", []string{"--store", "postgres://127.0.0.1:1/db"}, exitStore, "store"}}, // accepted: the password must not show
		"store-schema":        {{"{S}", []string{"--store", "postgres://127.0.0.1:1/db"}, exitStore, "store"}},
		"witness":             {{"{S}", nil, exitUsage, "--witness"}, {"unix:{missing}/{S}", nil, exitWitness, "witness"}},
		"witness-key":         {{"{S}0", nil, exitUsage, "--witness-key"}},
		"witness-ca":          {{"{missing}/{S}", []string{"--witness", "tls:127.0.0.1:1"}, exitConfig, "--witness-ca"}, {"{marked}", []string{"--witness", "tls:127.0.0.1:1"}, exitConfig, "--witness-ca"}},
		"witness-server-name": {{"{S}", []string{"--witness", "tls:127.0.0.1:1"}, exitWitness, "witness"}},
		"listen": {{"{S}", nil, exitUsage, "--listen"}, {"unix:{missing}/{S}/c.sock", nil, exitConfig, "--listen unix"},
			{"tls:{S}", []string{"--tls-cert", "{cert}", "--tls-key", "{key}"}, exitConfig, "--listen tls"}},
		"tls-cert": {{"{missing}/{S}", []string{"--listen", "tls:127.0.0.1:0", "--tls-key", "{key}"}, exitConfig, "--tls-cert"},
			{"{marked}", []string{"--listen", "tls:127.0.0.1:0", "--tls-key", "{key}"}, exitConfig, "--tls-cert, --tls-key"}},
		"tls-key": {{"{missing}/{S}", []string{"--listen", "tls:127.0.0.1:0", "--tls-cert", "{cert}"}, exitConfig, "--tls-key"},
			{"{marked}", []string{"--listen", "tls:127.0.0.1:0", "--tls-cert", "{cert}"}, exitConfig, "--tls-cert, --tls-key"}},
		"metrics":      {{"{S}", nil, exitConfig, "--metrics"}, {"unix:{missing}/{S}", nil, exitConfig, "--metrics"}},
		"admin":        {{"{S}", nil, exitUsage, "--admin"}, {"unix:{missing}/{S}/a.sock", nil, exitConfig, "--admin"}},
		"auth":         {{"{S}", nil, exitUsage, "--auth"}},
		"capabilities": {{"{S}", nil, exitUsage, "--capabilities"}, {"signals,{S}", nil, exitUsage, "--capabilities"}},
		"owner":        {{"{S}", nil, exitUsage, "--owner"}},
		"owner-dir":    {{"{missing}/{S}", nil, exitConfig, "--owner-dir"}, {"{marked}", nil, exitConfig, "--owner-dir"}},
		"log-level":    {{"{S}", nil, exitUsage, "--log-level"}},
		"log-format":   {{"{S}", nil, exitUsage, "--log-format"}},
	},
	"backup": {
		"state-dir": {{"{missing}/{S}", nil, exitConfig, "state directory"}},
		"out":       {{"{missing}/{S}/b", nil, exitConfig, "--out"}, {"{marked}", nil, exitUsage, "--out"}},
		"admin":     {{"{S}", nil, exitUsage, "--admin"}, {"unix:{file}/{S}", nil, exitRuntime, "admin socket"}},
		"store": {{"{S}", nil, exitUsage, "--store"}, {"bolt:{missing}/{S}", nil, exitStore, "store"},
			{"postgres://{S}@127.0.0.1:1/{S}", nil, exitStore, "store"}},
		"store-password-file": {{"{missing}/{S}", []string{"--store", "postgres://127.0.0.1:1/db"}, exitConfig, "--store-password-file"}},
		"store-schema":        {{"{S}", []string{"--store", "postgres://127.0.0.1:1/db"}, exitStore, "store"}},
	},
	"restore": {
		"state-dir":           {{"{file}/{S}", nil, exitConfig, "state directory"}},
		"from":                {{"{missing}/{S}", nil, exitUsage, "--from"}, {"{marked}", nil, exitStore, "--from"}},
		"keys-from":           {{"{missing}/{S}", nil, exitConfig, "--keys-from"}, {"{marked}", nil, exitConfig, "--keys-from"}},
		"witness":             {{"{S}", nil, exitUsage, "--witness"}, {"unix:{missing}/{S}", nil, exitWitness, "witness"}},
		"witness-key":         {{"{S}0", nil, exitUsage, "--witness-key"}},
		"witness-ca":          {{"{missing}/{S}", []string{"--witness", "tls:127.0.0.1:1"}, exitConfig, "--witness-ca"}},
		"witness-server-name": {{"{S}", []string{"--witness", "tls:127.0.0.1:1"}, exitWitness, "witness"}},
		"store": {{"{S}", nil, exitUsage, "--store"}, {"bolt:{missing}/{S}/s.bolt", nil, exitStore, "store"},
			{"postgres://{S}@127.0.0.1:1/{S}", nil, exitStore, "store"}},
		"store-password-file": {{"{missing}/{S}", []string{"--store", "postgres://127.0.0.1:1/db"}, exitConfig, "--store-password-file"}},
		"store-schema":        {{"{S}", []string{"--store", "postgres://127.0.0.1:1/db"}, exitStore, "store"}},
	},
	"verify": {
		"from": {{"{missing}/{S}", nil, exitUsage, "--from"}, {"{file}/{S}", nil, exitUsage, "--from"}, {"{marked}", nil, exitStore, "--from"}},
	},
}

// TestRefusalsNeverEchoArguments: no refusal of any phux-coordd command
// repeats what it was given (docs/semantics.md, "Command-line refusals
// never repeat a command-line value"). Every command gets a marker as an
// unexpected argument, as an unknown flag, as the value of each flag
// (each number, duration and boolean flag; each string flag as its row
// in stringFlagCases says, with the paths missing, under a file or
// holding the marker); the marker, spelled in hex and in base64, appears
// in no output (the refusal, the daemon's log, stdout) in any encoding
// leakcheck knows, the refusal line names no part of a path given, and
// the exit status is the documented one.
func TestRefusalsNeverEchoArguments(t *testing.T) {
	w := newWorld(t, 10*time.Second)
	dir := w.initDir("c")
	sock := filepath.Join(w.base, "c.sock")
	missing := filepath.Join(w.base, "missing")
	file := filepath.Join(w.base, "plain")
	if err := os.WriteFile(file, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	cert, key, _ := writeCert(t, w.base, 0o600)
	bak := filepath.Join(w.base, "c.bak")
	if _, errOut, code := runCmd(t, "backup", "--state-dir", dir, "--out", bak); code != 0 {
		t.Fatalf("backup: %s", errOut)
	}
	base := map[string][]string{
		"init":    {"init", "--state-dir", "{fresh}"},
		"serve":   w.serveArgs(dir, sock, "--admin", "none"),
		"backup":  {"backup", "--state-dir", dir, "--out", "{fresh}"},
		"restore": {"restore", "--state-dir", "{fresh}", "--from", bak, "--witness", "unix:" + w.wsock, "--witness-key", w.wkey, "--keys-from", dir},
		"verify":  {"verify", "--from", bak},
	}
	secret := leakcheck.Secret(32)
	n := 0
	for _, spell := range []string{hex.EncodeToString(secret), base64.RawURLEncoding.EncodeToString(secret)} {
		marked := filepath.Join(w.base, spell)
		if err := os.WriteFile(marked, []byte(spell+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		expand := func(a string) string {
			return strings.NewReplacer("{S}", spell, "{missing}", missing, "{file}", file, "{marked}", marked,
				"{fresh}", filepath.Join(w.base, "fresh", strconv.Itoa(n)), "{cert}", cert, "{key}", key).Replace(a)
		}
		cases := []echoCase{
			{"marker as command", []string{spell}, exitUsage, "command"},
			{"help of the marker", []string{"help", spell}, exitUsage, "command"},
		}
		for _, cmd := range []string{"init", "serve", "backup", "restore", "verify"} {
			with := func(extra ...string) []string { return append(slices.Clone(base[cmd]), extra...) }
			cases = append(cases,
				echoCase{cmd + ": marker as argument", []string{cmd, spell}, exitUsage, "arguments"},
				echoCase{cmd + ": marker after the flags", with(spell), exitUsage, "arguments"},
				echoCase{cmd + ": marker after --", with("--", spell), exitUsage, "arguments"},
				echoCase{cmd + ": marker as flag", with("--" + spell), exitUsage, "flag"},
				echoCase{cmd + ": marker as single-dash flag", with("-" + spell), exitUsage, "flag"},
				echoCase{cmd + ": marker as flag with value", with("--" + spell + "=" + spell), exitUsage, "flag"},
				echoCase{cmd + ": marker as triple-dash flag", with("---" + spell), exitUsage, "flag"},
				echoCase{cmd + ": unknown flag with the marker", with("--password=" + spell), exitUsage, "flag"},
			)
			for name, typ := range helpFlags(t, cmd) {
				if typ == "string" || typ == "value" {
					rows, ok := stringFlagCases[cmd][name]
					if !ok {
						t.Errorf("%s --%s: no row in stringFlagCases", cmd, name)
					}
					for _, r := range rows {
						args := with(r.extra...)
						cases = append(cases, echoCase{cmd + " --" + name + "=" + r.value, append(args, "--"+name, r.value), r.code, r.field})
					}
					continue
				}
				cases = append(cases, echoCase{cmd + " --" + name + "=marker", with("--" + name + "=" + spell), exitUsage, "--" + name})
				if typ != "" {
					cases = append(cases, echoCase{cmd + " --" + name + " marker", with("--"+name, spell), exitUsage, "--" + name})
				}
			}
		}
		for _, c := range cases {
			n++
			args := make([]string, len(c.args))
			for i, a := range c.args {
				args[i] = expand(a)
			}
			t.Run(c.name, func(t *testing.T) {
				stdout, stderr, code := runEcho(t, args...)
				if where := leakcheck.Find(stdout+stderr, secret); where != "" || strings.Contains(stdout+stderr, spell) {
					t.Errorf("the output repeats the marker (%s):\n%s%s", where, stdout, stderr)
				}
				line := refusalLine(stderr)
				if code != c.code || stdout != "" || !strings.HasPrefix(line, "phux-coordd: "+c.field) {
					t.Errorf("want exit %d and one refusal naming %q; exit %d:\n%s%s", c.code, c.field, code, stdout, stderr)
				}
				if strings.Contains(line, w.base) || strings.Contains(line, filepath.Base(w.base)) {
					t.Errorf("the refusal names a path it was given: %s", line)
				}
			})
		}
	}
}

// runEcho runs the daemon binary with args, as runCmd, without PGPASSWORD
// in its environment (a postgres:// store refuses it).
func runEcho(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	return runEchoEnv(t, nil, args...)
}

// runEchoEnv is runEcho with the variables of env ("NAME=VALUE") in the
// daemon's environment instead of any PHUX_COORDD_ variable inherited.
func runEchoEnv(t *testing.T, env []string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var o, e bytes.Buffer
	cmd := exec.Command(coorddBin, args...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PGPASSWORD=") && !strings.HasPrefix(kv, envPrefix) {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, env...)
	cmd.Stdout, cmd.Stderr = &o, &e
	childproc.DieWithParent(cmd)
	// A refusal comes at once; a daemon that serves has not refused.
	cmd.WaitDelay = time.Second
	timer := time.AfterFunc(20*time.Second, func() { cmd.Process.Kill() })
	defer timer.Stop()
	if err := cmd.Run(); err != nil {
		if _, ok := err.(*exec.ExitError); !ok {
			t.Fatal(err)
		}
	}
	return o.String(), e.String(), cmd.ProcessState.ExitCode()
}

// refusalLine is the one "phux-coordd: " line of stderr, or "" if there
// is not exactly one.
func refusalLine(stderr string) string {
	var lines []string
	for _, l := range strings.Split(stderr, "\n") {
		if strings.HasPrefix(l, "phux-coordd: ") {
			lines = append(lines, l)
		}
	}
	if len(lines) != 1 {
		return ""
	}
	return lines[0]
}
