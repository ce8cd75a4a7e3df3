//go:build unix

package main

import (
	"encoding/base64"
	"encoding/hex"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/phuxcoord/coord/internal/testkit/leakcheck"
	"github.com/phuxcoord/coord/keystore"
)

// TestEveryCommandRefusesWithoutEcho: every command of the command table,
// with a marker as an unexpected argument, as an unknown flag, as the
// value of each of its flags, and inside a path that is missing, lies
// under a file or holds the marker, refuses without repeating it
// (docs/semantics.md, "Command-line refusals never repeat a command-line
// value"): not in any encoding leakcheck knows, in run() and in the real
// binary; the refusal is one line naming the field and no part of a path
// given (not even a short last element), exit status 2.
func TestEveryCommandRefusesWithoutEcho(t *testing.T) {
	base := t.TempDir()
	state := filepath.Join(base, "state")
	if _, err := keystore.InitAuthority(state); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(base, "missing")
	file := filepath.Join(base, "plain")
	if err := os.WriteFile(file, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	k, err := keystore.GenerateWorkloadKey(filepath.Join(base, "client", "k.key"))
	if err != nil {
		t.Fatal(err)
	}
	pub := filepath.Join(base, "pub")
	if err := os.WriteFile(pub, []byte(hex.EncodeToString(k.Public())+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	bases := map[string][]string{
		"authority init":  {"--state-dir", "{fresh}"},
		"authority show":  {"--state-dir", state},
		"workload keygen": {"--out", "{fresh}"},
		"workload pubkey": {"--key", filepath.Join(base, "client", "k.key")},
		"registry add":    {"--state-dir", state, "--public-key-file", pub, "--scopes", "admin", "--expires", "1h"},
		"registry list":   {"--state-dir", state},
		"registry revoke": {"--state-dir", state, "sha256:" + strings.Repeat("0", 64)},
	}
	// The wrong values of each flag; creating is false for the rows a
	// creating command (authority init, workload keygen) would accept.
	type bad struct {
		value    string
		creating bool
	}
	values := map[string][]bad{
		"state-dir":       {{"{missing}/{S}", false}, {"{missing}/zq9x", false}, {"{file}/{S}", true}, {"{file}/zq9x", true}},
		"out":             {{"{file}/{S}", true}, {"{file}/zq9x", true}, {"{marked}", true}},
		"public-key-file": {{"{missing}/{S}", true}, {"{missing}/zq9x", true}, {"{marked}", true}},
		"scopes":          {{"{S}", true}, {"admin,{S}", true}},
		"expires":         {{"{S}", true}},
		"key":             {{"{missing}/{S}", true}, {"{missing}/zq9x", true}, {"{marked}", true}},
	}
	bin := buildBinary(t)
	secret := leakcheck.Secret(32)
	n := 0
	for _, spell := range []string{hex.EncodeToString(secret), base64.RawURLEncoding.EncodeToString(secret)} {
		marked := filepath.Join(base, spell)
		// "0" makes a 64-digit hex spelling no public key line.
		if err := os.WriteFile(marked, []byte(spell+"0\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		for group, subs := range commands {
			for sub, c := range subs {
				name := group + " " + sub
				b := bases[name]
				if b == nil {
					t.Fatalf("%s: no base arguments", name)
				}
				with := func(extra ...string) []string {
					return append(append([]string{group, sub}, b...), extra...)
				}
				type echoCase struct {
					name, field string
					args        []string
				}
				cases := []echoCase{
					{name + ": marker as argument", "arguments", with(spell)},
					{name + ": marker after --", "arguments", with("--", spell)},
					{name + ": marker as flag", "flag", with("--" + spell)},
					{name + ": marker as single-dash flag", "flag", with("-" + spell)},
					{name + ": marker as flag with value", "flag", with("--" + spell + "=" + spell)},
					{name + ": unknown flag with the marker", "flag", with("--password=" + spell)},
				}
				if len(c.positional) == 1 {
					cases = append(cases, echoCase{name + ": marker as " + c.positional[0], c.positional[0],
						[]string{group, sub, "--state-dir", state, spell}})
				}
				for _, f := range c.flags {
					rows, ok := values[f]
					if !ok {
						t.Fatalf("%s --%s: no wrong values", name, f)
					}
					creating := name == "authority init" || name == "workload keygen"
					for _, r := range rows {
						if creating && !r.creating {
							continue
						}
						// The flag replaces the base's (a flag given twice
						// is a refusal of its own).
						own := append([]string{group, sub}, leakcheck.WithoutFlag(b, f)...)
						cases = append(cases, echoCase{name + " --" + f + " " + r.value, "--" + f, append(own, "--"+f, r.value)},
							echoCase{name + " --" + f + "=" + r.value, "--" + f, append(own[:len(own):len(own)], "--"+f+"="+r.value)})
					}
				}
				for _, tc := range cases {
					n++
					args := make([]string, len(tc.args))
					for i, a := range tc.args {
						args[i] = strings.NewReplacer("{S}", spell, "{missing}", missing, "{file}", file, "{marked}", marked,
							"{fresh}", filepath.Join(base, "fresh", strconv.Itoa(n))).Replace(a)
					}
					t.Run(tc.name, func(t *testing.T) {
						for _, r := range []result{invoke("", args...), execBinary(t, bin, "", args...)} {
							out := r.stdout + r.stderr
							if where := leakcheck.Find(out, secret); where != "" || strings.Contains(out, spell) {
								t.Errorf("the output repeats the marker (%s): %q", where, r.stderr)
							}
							m := errLine.FindStringSubmatch(r.stderr)
							if r.code != 2 || r.stdout != "" || m == nil || m[1] != tc.field {
								t.Errorf("want one error line naming %s, exit 2: %+v", tc.field, r)
							}
							if strings.Contains(r.stderr, "zq9x") || strings.Contains(r.stderr, filepath.Base(base)) {
								t.Errorf("the refusal names a part of a path it was given: %q", r.stderr)
							}
						}
					})
				}
			}
		}
	}
}
