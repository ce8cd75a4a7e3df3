//go:build unix

package main

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/phuxcoord/coord/internal/testkit/childproc"
	"github.com/phuxcoord/coord/internal/testkit/leakcheck"
	"github.com/phuxcoord/coord/keystore"
)

// echoRow is a wrong value of a string flag: the value and the extra
// arguments with {S} (the marker's spelling), {missing} (a directory that
// does not exist) and {marked} (a regular file, mode 0600, named and
// filled with the marker) replaced; drop names flags of the command's
// base arguments (echoBase) the case leaves out.
type echoRow struct {
	value string
	drop  []string
	extra []string // before the flag
	code  int
	want  string // a substring of the refusal line
}

// echoRows are the rows of the string flags, by flag name (a flag of
// that name means the same in every command but those of
// echoRowsByCommand). A string flag without a row fails the test: a new
// flag must say how it refuses a wrong value.
var echoRows = map[string][]echoRow{
	"profile": {{value: "{missing}/{S}", code: exitLocal, want: "--profile"}, {value: "{marked}", code: exitLocal, want: "--profile"}},
	"address": {{value: "{S}", code: exitUsage, want: "--address"}, {value: "tls:{S}", code: exitUsage, want: "--address"},
		{value: "unix:{missing}/{S}", code: exitConnection, want: "connection failed"}},
	"key":       {{value: "{missing}/{S}", code: exitLocal, want: "--key"}, {value: "{marked}", code: exitLocal, want: "--key"}},
	"authority": {{value: "{S}", code: exitUsage, want: "--authority"}, {value: "sha256:{S}0", code: exitUsage, want: "--authority"}},
	// A 64-digit hex spelling is a well-formed key or digest: "0" makes
	// it malformed in both spellings.
	"witness-key": {{value: "{S}0", code: exitUsage, want: "--witness-key"}},
	"sha256":      {{value: "{S}0", code: exitUsage, want: "--sha256"}},
	"scopes":      {{value: "{S}", code: exitUsage, want: "--scopes"}, {value: "work_read,{S}", code: exitUsage, want: "--scopes"}},
	"tls-ca": {{value: "{missing}/{S}", extra: []string{"--address", "tls:127.0.0.1:1"}, code: exitLocal, want: "--tls-ca"},
		{value: "{marked}", extra: []string{"--address", "tls:127.0.0.1:1"}, code: exitLocal, want: "--tls-ca"}},
	"tls-server-name":        {{value: "{S}", extra: []string{"--address", "tls:127.0.0.1:1"}, code: exitConnection, want: "connection failed"}},
	"operation-id":           {{value: "{S}", code: exitUsage, want: "--operation-id"}},
	"id":                     {{value: "{S}", code: exitUsage, want: "--id"}},
	"objective":              {{value: "{S}", code: exitUsage, want: "--objective"}},
	"run":                    {{value: "{S}", code: exitUsage, want: "--run"}},
	"work-session":           {{value: "{S}", code: exitUsage, want: "--work-session"}},
	"pending-binding":        {{value: "{S}", code: exitUsage, want: "--pending-binding"}},
	"owner-authority":        {{value: "{S}", code: exitUsage, want: "--owner-authority"}},
	"owner-incarnation":      {{value: "{S}", code: exitUsage, want: "--owner-incarnation"}},
	"artifact":               {{value: "{S}", code: exitUsage, want: "--artifact"}},
	"kind":                   {{value: "{S}", code: exitUsage, want: "--kind"}},
	"admin":                  {{value: "{S}", code: exitUsage, want: "--admin"}, {value: "unix:{missing}/{S}", code: exitConnection, want: "--admin"}},
	"document-file":          {{value: "{missing}/{S}", drop: []string{"document"}, code: exitLocal, want: "--document-file"}},
	"executor-document-file": {{value: "{missing}/{S}", drop: []string{"argv"}, code: exitLocal, want: "--executor-document-file"}},
	"manifest-file":          {{value: "{missing}/{S}", drop: []string{"work-session", "media-type", "size", "sha256"}, code: exitLocal, want: "--manifest-file"}},
	"content-file": {{value: "{missing}/{S}", drop: []string{"size", "sha256"}, code: exitLocal, want: "--content-file"},
		{value: "{marked}/x", drop: []string{"size", "sha256"}, code: exitLocal, want: "--content-file"}},
	"env": {{value: "{S}", code: exitUsage, want: "--env"}, {value: "{S}=1", extra: []string{"--env", "{S}=2"}, code: exitUsage, want: "--env"}},
	"dir": {{value: "{S}", code: exitUsage, want: "--dir"}},
	// Free text, sent as given: nothing here refuses it, so the command
	// goes on to connect and fails there; the marker must not show.
	"document":          {{value: "{S}", code: exitConnection, want: "connection failed"}},
	"executor-document": {{value: "{S}", drop: []string{"argv"}, code: exitConnection, want: "connection failed"}},
	"argv":              {{value: "{S}", code: exitConnection, want: "connection failed"}},
	"terminal-group":    {{value: "{S}", code: exitConnection, want: "connection failed"}},
	"note":              {{value: "{S}", code: exitConnection, want: "connection failed"}},
	"media-type":        {{value: "{S}", code: exitConnection, want: "connection failed"}},
	"locator":           {{value: "{S}", code: exitConnection, want: "connection failed"}},
}

// echoRowsByCommand are the rows of a flag that means something else in
// one command.
var echoRowsByCommand = map[string]map[string][]echoRow{
	// login verifies the coordinator before it writes the profile.
	"login": {"profile": {{value: "{missing}/{S}", code: exitConnection, want: "connection failed"}},
		"name": {{value: "{S}", code: exitConnection, want: "connection failed"}, {value: "{S}/x", code: exitUsage, want: "--name"},
			{value: "{S}", extra: []string{"--profile", "p"}, code: exitUsage, want: "--name or --profile"}}},
}

// echoAsGiven is the outcome of the commands that do not connect, as
// given in echoBase (a refusal of their own; "" for none: no case).
var echoAsGiven = map[string]struct {
	code int
	want string
}{
	"profile list": {exitOK, ""},
	"profile use":  {exitUsage, "NAME: no such profile"},
	"profile show": {exitLocal, "profile: none saved"},
	"backup":       {exitConnection, "connection failed"},
	"bridge":       {exitOK, ""}, // it connects only when asked on its input (empty here)
}

// echoID is a well-formed id for the arguments a case does not test.
const echoID = "0102030405060708090a0b0c0d0e0f10"

// echoBase is each command's arguments that reach the connection (which
// fails: nothing listens), without the connection flags.
var echoBase = map[string][]string{
	"objective create":  {"--document", "d"},
	"objective update":  {echoID, "--document", "d"},
	"objective get":     {echoID},
	"run start":         {"--objective", echoID, "--terminal-group", "g", "--argv", "/bin/true"},
	"run cancel":        {echoID},
	"run pause":         {echoID},
	"run resume":        {echoID},
	"run get":           {echoID},
	"signal get":        {echoID},
	"signal ack":        {echoID},
	"artifact get":      {echoID},
	"profile use":       {echoID},
	"signal suppress":   {echoID},
	"artifact register": {"--work-session", echoID, "--media-type", "text/plain", "--size", "1", "--sha256", strings.Repeat("ab", 32)},
	"op get":            {echoID},
	"retention set":     {"--operation-result-secs", "2592000", "--event-bytes", "1", "--artifact-bytes", "1"},
	"backup":            {"--admin", "unix:{missing}/a.sock", "{fresh}"},
}

// TestRefusalsNeverEchoArguments: no refusal of any phux-coordctl command
// repeats what it was given (docs/semantics.md, "Command-line refusals
// never repeat a command-line value"). Every command gets a marker as a
// command, as an unexpected argument, as each positional argument, as an
// unknown flag, as the value of each flag (each number, duration and
// boolean flag; each string flag as its row in echoRows says, with paths
// missing or holding the marker); the marker, spelled in hex and in
// base64, appears in no output of run() nor of the real binary in any
// encoding leakcheck knows, the refusal line names no part of a path
// given, and the exit status is the documented one.
func TestRefusalsNeverEchoArguments(t *testing.T) {
	base, err := os.MkdirTemp("", "ctlecho")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	if err := os.Chmod(base, 0o700); err != nil {
		t.Fatal(err)
	}
	key := filepath.Join(base, "k", "workload.key")
	if _, err := keystore.GenerateWorkloadKey(key); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(base, "missing")
	t.Setenv(profileEnv, filepath.Join(base, "cfg", "profile.json"))
	wpub, _, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	conn := []string{"--address", "unix:" + filepath.Join(base, "none.sock"), "--key", key,
		"--authority", "sha256:" + strings.Repeat("11", 32), "--witness-key", hex.EncodeToString(wpub), "--timeout", "5s"}
	bin := filepath.Join(base, "phux-coordctl")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	secret := leakcheck.Secret(32)
	n := 0
	for _, spell := range []string{hex.EncodeToString(secret), base64.RawURLEncoding.EncodeToString(secret)} {
		marked := filepath.Join(base, spell)
		if err := os.WriteFile(marked, []byte(spell+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		type echoCase struct {
			name string
			args []string
			code int
			want string
		}
		cases := []echoCase{
			{"marker as command", []string{spell}, exitUsage, "command: unknown"},
			{"help of the marker", []string{"help", spell}, exitUsage, "command: unknown"},
			{"marker as subcommand", []string{"objective", spell}, exitUsage, ""},
		}
		for _, c := range commands() {
			words := strings.Fields(c.name)
			full := func(own []string, extra ...string) []string {
				args := append(slices.Clone(words), own...)
				if c.connects {
					args = append(args, conn...)
				}
				return append(args, extra...)
			}
			own := echoBase[c.name]
			if g, ok := echoAsGiven[c.name]; !ok {
				cases = append(cases, echoCase{c.name + ": as given", full(own), exitConnection, "connection failed"})
			} else if g.want != "" {
				cases = append(cases, echoCase{c.name + ": as given", full(own), g.code, g.want})
			}
			cases = append(cases,
				echoCase{c.name + ": marker as an extra argument", full(own, spell), exitUsage, "arguments"},
				echoCase{c.name + ": marker after --", full(own, "--", spell), exitUsage, "arguments"},
				echoCase{c.name + ": marker as flag", full(own, "--"+spell), exitUsage, "flag"},
				echoCase{c.name + ": marker as single-dash flag", full(own, "-"+spell), exitUsage, "flag"},
				echoCase{c.name + ": marker as flag with value", full(own, "--"+spell+"="+spell), exitUsage, "flag"},
				echoCase{c.name + ": marker as triple-dash flag", full(own, "---"+spell), exitUsage, "flag"},
				echoCase{c.name + ": unknown flag with the marker", full(own, "--password="+spell), exitUsage, "flag"},
			)
			if c.nargs == 1 {
				i := slices.Index(own, echoID)
				bad := slices.Clone(own)
				if i >= 0 {
					bad[i] = spell
					cases = append(cases, echoCase{c.name + ": marker as " + c.args, full(bad), exitUsage, c.args})
				}
			}
			if c.name == "backup" {
				cases = append(cases,
					echoCase{"backup: FILE exists", full([]string{"--admin", "unix:" + filepath.Join(missing, "a.sock"), marked}), exitUsage, "FILE: exists"},
					echoCase{"backup: FILE under a missing directory", full([]string{"--admin", "unix:" + filepath.Join(missing, "a.sock"), filepath.Join(missing, spell)}), exitLocal, "FILE: create"})
			}
			fs, _ := newFlagSet(c, &env{})
			fs.VisitAll(func(f *flag.Flag) {
				_, isBool := f.Value.(interface{ IsBoolFlag() bool })
				isString := true // also a value that is no flag.Getter (a list, a func)
				if g, ok := f.Value.(flag.Getter); ok {
					_, isString = g.Get().(string)
				}
				if !isString {
					field := "--" + f.Name // as the refusal names it: -o, --name
					if len(f.Name) == 1 {
						field = "-" + f.Name
					}
					cases = append(cases, echoCase{c.name + " --" + f.Name + "=marker", full(own, "--"+f.Name+"="+spell), exitUsage, field})
					if !isBool {
						cases = append(cases, echoCase{c.name + " --" + f.Name + " marker", full(own, "--"+f.Name, spell), exitUsage, field})
					}
					return
				}
				rows, ok := echoRowsByCommand[c.name][f.Name]
				if !ok {
					rows, ok = echoRows[f.Name]
				}
				if !ok {
					t.Errorf("%s --%s: no row in echoRows", c.name, f.Name)
				}
				for _, r := range rows {
					a := full(dropFlags(own, r.drop), append(slices.Clone(r.extra), "--"+f.Name, r.value)...)
					cases = append(cases, echoCase{c.name + " --" + f.Name + "=" + r.value, a, r.code, r.want})
				}
			})
		}
		for _, c := range cases {
			n++
			args := make([]string, len(c.args))
			for i, a := range c.args {
				args[i] = strings.NewReplacer("{S}", spell, "{missing}", missing, "{marked}", marked,
					"{fresh}", filepath.Join(base, "fresh"+strconv.Itoa(n))).Replace(a)
			}
			t.Run(c.name, func(t *testing.T) {
				var out, errb bytes.Buffer
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				defer cancel()
				code := run(ctx, args, strings.NewReader(""), &out, &errb)
				check := func(how, stdout, stderr string, code int) {
					if where := leakcheck.Find(stdout+stderr, secret); where != "" || strings.Contains(stdout+stderr, spell) {
						t.Errorf("%s: the output repeats the marker (%s):\n%s%s", how, where, stdout, stderr)
					}
					lines := strings.Split(strings.TrimSuffix(stderr, "\n"), "\n")
					if c.want == "" { // the group's usage, on stderr
						lines = []string{prog + ": "}
					}
					if code != c.code || stdout != "" || len(lines) != 1 || !strings.HasPrefix(lines[0], prog+": ") || !strings.Contains(lines[0], c.want) {
						t.Errorf("%s: want exit %d and one line with %q; exit %d:\n%s%s", how, c.code, c.want, code, stdout, stderr)
					}
					if strings.Contains(stderr, base) || strings.Contains(stderr, filepath.Base(base)) {
						t.Errorf("%s: the refusal names a path it was given: %s", how, stderr)
					}
				}
				check("run", out.String(), errb.String(), code)
				if spell == hex.EncodeToString(secret) {
					// The binary as well (the one exit path run does not
					// have: main's); once is enough for each case.
					o, e, code := execCtl(t, bin, args)
					check("binary", o, e, code)
				}
			})
		}
	}
}

func execCtl(t *testing.T, bin string, args []string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr, cmd.Stdin = &o, &e, strings.NewReader("")
	childproc.DieWithParent(cmd)
	cmd.WaitDelay = time.Second
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatal(err)
	}
	return o.String(), e.String(), cmd.ProcessState.ExitCode()
}

// dropFlags returns args without the flags named (each with its value).
func dropFlags(args, names []string) []string {
	var out []string
	for i := 0; i < len(args); i++ {
		if slices.Contains(names, strings.TrimPrefix(args[i], "--")) {
			i++
			continue
		}
		out = append(out, args[i])
	}
	return out
}
