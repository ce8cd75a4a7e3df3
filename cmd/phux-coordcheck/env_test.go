package main

import (
	"encoding/base64"
	"encoding/hex"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/phuxcoord/coord/internal/cmdline"
	"github.com/phuxcoord/coord/internal/testkit/leakcheck"
)

// flagValue is the value of the flag name in args.
func flagValue(t *testing.T, args []string, name string) string {
	t.Helper()
	i := slices.Index(args, "--"+name)
	if i < 0 || i+1 == len(args) {
		t.Fatalf("no --%s in %q", name, args)
	}
	return args[i+1]
}

// setEnv sets each variable of server mode to the value of vals (""
// for the others), for the test.
func setEnv(t *testing.T, vals map[string]string) {
	for _, name := range serverEnvFlags {
		t.Setenv(cmdline.EnvVar(envPrefix, name), vals[name])
	}
}

// Server mode's connection flags have environment variables: a variable
// sets its flag, a flag given wins, an empty variable is none, and a
// value refused names the variable, never the value (docs/semantics.md,
// "Command-line refusals never repeat a command-line value").
func TestEnvironmentVariables(t *testing.T) {
	srv := serverFixture(t)
	fixture := map[string]string{}
	for _, name := range []string{"address", "key", "authority-pin", "witness-pin"} {
		fixture[name] = flagValue(t, srv, name)
	}
	none := []string{"server", "--run", "none/"}

	// Every flag with a variable names it in its usage.
	fl := flag.NewFlagSet(prog+" server", flag.ContinueOnError)
	defineServerFlags(fl)
	for _, name := range serverEnvFlags {
		if f := fl.Lookup(name); f == nil || !strings.Contains(f.Usage, "$"+cmdline.EnvVar(envPrefix, name)) {
			t.Errorf("--%s: its usage does not name its variable", name)
		}
	}

	t.Run("variables set the flags", func(t *testing.T) {
		setEnv(t, fixture)
		if code, stdout, stderr := runCheck(none); code != exitOK {
			t.Fatalf("server from the environment: exit %d\n%s%s", code, stdout, stderr)
		}
	})

	t.Run("flags win", func(t *testing.T) {
		bad := map[string]string{}
		for _, name := range serverEnvFlags {
			bad[name] = "bogus"
		}
		setEnv(t, bad)
		if code, stdout, stderr := runCheck(append(slices.Clone(none), append(srv, "--key2", "", "--key3", "", "--hooks", "unix:h.sock")...)); code != exitOK {
			t.Fatalf("flags over bad variables: exit %d\n%s%s", code, stdout, stderr)
		}
	})

	t.Run("empty variables are none", func(t *testing.T) {
		setEnv(t, nil)
		if code, _, stderr := runCheck(none); code != exitUsage || stderr != "phux-coordcheck: --address: required (or $PHUX_COORDCHECK_ADDRESS)\n" {
			t.Fatalf("no address: exit %d %q", code, stderr)
		}
		if code, _, stderr := runCheck(append(slices.Clone(none), "--address", fixture["address"])); code != exitUsage || stderr != "phux-coordcheck: --key: required (or $PHUX_COORDCHECK_KEY)\n" {
			t.Fatalf("no key: exit %d %q", code, stderr)
		}
	})

	t.Run("refused values name the variable", func(t *testing.T) {
		base := t.TempDir()
		empty := filepath.Join(base, "empty")
		file := filepath.Join(base, "plain")
		if err := os.WriteFile(file, []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
		secret := leakcheck.Secret(32)
		for _, spell := range []string{hex.EncodeToString(secret), base64.RawURLEncoding.EncodeToString(secret)} {
			garbage := filepath.Join(base, "garbage")
			if err := os.WriteFile(garbage, []byte(spell+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			tlsAddr := []string{"--address", "tls:localhost:1"}
			for _, c := range []struct {
				name, value string
				extra       []string
				code        int // exitOK: accepted (and never repeated)
			}{
				{"address", spell, nil, exitUsage},
				{"key", filepath.Join(empty, spell), nil, exitUsage},
				{"key2", filepath.Join(file, spell), nil, exitUsage},
				{"key3", garbage, nil, exitUsage},
				{"authority-pin", spell, nil, exitUsage},
				{"authority-pin", "sha256:" + spell + "0", nil, exitUsage},
				{"witness-pin", spell + "0", nil, exitUsage},
				{"hooks", spell, nil, exitUsage},
				{"tls-ca", filepath.Join(empty, spell), tlsAddr, exitUsage},
				{"tls-ca", garbage, tlsAddr, exitUsage},
				{"tls-server-name", spell, tlsAddr, exitOK},
			} {
				v := cmdline.EnvVar(envPrefix, c.name)
				t.Run(v, func(t *testing.T) {
					setEnv(t, map[string]string{c.name: c.value})
					args := append(append(slices.Clone(none), leakcheck.WithoutFlag(srv, c.name)...), c.extra...)
					code, stdout, stderr := runCheck(args)
					if where := leakcheck.Find(stdout+stderr, secret); where != "" || strings.Contains(stdout+stderr, spell) {
						t.Errorf("the output repeats the value (%s): %q", where, stderr)
					}
					if code != c.code {
						t.Errorf("exit %d, want %d: %q", code, c.code, stderr)
					}
					if m := errLine.FindStringSubmatch(stderr); c.code != exitOK && (m == nil || m[1] != "$"+v) {
						t.Errorf("want one error line naming $%s: %q", v, stderr)
					}
				})
			}
		}
	})
}
