package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"text/tabwriter"
)

// Named profiles (like `nats context`): `login --name NAME` saves a
// profile as <config dir>/phux-coordctl/profiles/NAME.json and makes it
// the current one (recorded in <config dir>/phux-coordctl/current);
// `profile use NAME` switches; `profile list` and `profile show` read
// them. --profile and $PHUX_COORDCTL_PROFILE take a name or a file path
// (a value with a path separator, or ending in .json, is a path).

// profileNameMax bounds a profile's name.
const profileNameMax = 64

// validProfileName reports whether s can name a profile: 1..64 letters,
// digits, '.', '-' or '_', not starting with '.'.
func validProfileName(s string) bool {
	if s == "" || len(s) > profileNameMax || s[0] == '.' {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '-' || r == '_') {
			return false
		}
	}
	return true
}

// isProfilePath reports whether a --profile value names a file rather
// than a profile.
func isProfilePath(v string) bool {
	return strings.ContainsRune(v, '/') || strings.ContainsRune(v, filepath.Separator) || strings.HasSuffix(v, ".json")
}

// configDir is <user config dir>/phux-coordctl, or "" without one.
func configDir() string {
	dir, err := os.UserConfigDir()
	if err != nil {
		return ""
	}
	return filepath.Join(dir, "phux-coordctl")
}

// profilesDir is where named profiles live.
func profilesDir() string {
	if d := configDir(); d != "" {
		return filepath.Join(d, "profiles")
	}
	return ""
}

// profileFile is the file of a --profile value (a name or a path).
func profileFile(v string) (string, error) {
	if isProfilePath(v) {
		return v, nil
	}
	if !validProfileName(v) {
		return "", usagef("--profile: want a profile name (letters, digits, '.', '-', '_'; at most %d) or a file path", profileNameMax)
	}
	d := profilesDir()
	if d == "" {
		return "", usagef("--profile: no user config directory to hold named profiles (give a file path)")
	}
	return filepath.Join(d, v+".json"), nil
}

// currentName is the name recorded by login or `profile use`, or "".
func currentName() string {
	d := configDir()
	if d == "" {
		return ""
	}
	b, err := readProfileFile(filepath.Join(d, "current"))
	if err != nil {
		return ""
	}
	name := strings.TrimSpace(string(b))
	if !validProfileName(name) {
		return ""
	}
	return name
}

// setCurrent records name as the current profile.
func setCurrent(name string) error {
	d := configDir()
	if d == "" {
		return usagef("profile: no user config directory")
	}
	if err := writeProfileFile(filepath.Join(d, "current"), []byte(name+"\n")); err != nil {
		return &localError{what: "profile", err: profileHint(err)}
	}
	return nil
}

// defaultProfilePath is the profile used when --profile is not given:
// $PHUX_COORDCTL_PROFILE (a name or a path), else the current named
// profile, else <config dir>/phux-coordctl/profile.json (where login
// wrote before profiles had names).
func defaultProfilePath() string {
	if p := os.Getenv(profileEnv); p != "" {
		f, err := profileFile(p)
		if err != nil {
			return ""
		}
		return f
	}
	if n := currentName(); n != "" {
		if f, err := profileFile(n); err == nil {
			return f
		}
	}
	d := configDir()
	if d == "" {
		return ""
	}
	return filepath.Join(d, "profile.json")
}

// loadProfile reads and decodes one profile file.
func loadProfile(path, what string) (profile, error) {
	var p profile
	b, err := readProfileFile(path)
	if err != nil {
		return p, &localError{what: what, err: profileHint(err)}
	}
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		// The decoder's text may quote the file: only its kind.
		return p, &localError{what: what, err: errors.New("not a profile (a JSON object with the fields login writes)")}
	}
	return p, nil
}

// profileEntry is one named profile as `profile list` and `profile show`
// print it.
type profileEntry struct {
	Name    string  `json:"name"`
	Current bool    `json:"current"`
	File    string  `json:"file"`
	Profile profile `json:"profile"`
}

func (pe profileEntry) table(w io.Writer) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	row := func(k, v string) {
		if v != "" {
			fmt.Fprintf(tw, "%s\t%s\n", k, v)
		}
	}
	row("name", pe.Name)
	cur := "no"
	if pe.Current {
		cur = "yes"
	}
	if pe.Name != "" {
		row("current", cur)
	}
	row("file", pe.File)
	row("address", pe.Profile.Address)
	row("key", pe.Profile.KeyFile)
	row("authority", pe.Profile.AuthorityFingerprint)
	row("witness key", pe.Profile.WitnessPublicKey)
	row("scopes", pe.Profile.Scopes)
	row("tls ca", pe.Profile.TLSCAFile)
	row("tls server name", pe.Profile.TLSServerName)
	tw.Flush()
}

func setupProfileList(_ *flag.FlagSet, e *env) func(context.Context, []string) error {
	return func(ctx context.Context, _ []string) error {
		d := profilesDir()
		var names []string
		if d != "" {
			ents, err := os.ReadDir(d)
			if err != nil && !errors.Is(err, fs.ErrNotExist) {
				return &localError{what: "profiles", err: err}
			}
			for _, de := range ents {
				if n, ok := strings.CutSuffix(de.Name(), ".json"); ok && validProfileName(n) && de.Type().IsRegular() {
					names = append(names, n)
				}
			}
		}
		sort.Strings(names)
		cur := currentName()
		var items []any
		var rows []profileEntry
		for _, n := range names {
			f, _ := profileFile(n)
			pe := profileEntry{Name: n, Current: n == cur, File: f}
			if p, err := loadProfile(f, "profile "+n); err == nil {
				pe.Profile = p
			}
			rows = append(rows, pe)
			items = append(items, pe)
		}
		return e.emitList(items, func(w io.Writer) {
			tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "CURRENT\tNAME\tADDRESS\tKEY")
			for _, r := range rows {
				mark := ""
				if r.Current {
					mark = "*"
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", mark, r.Name, r.Profile.Address, r.Profile.KeyFile)
			}
			tw.Flush()
		})
	}
}

func setupProfileUse(_ *flag.FlagSet, e *env) func(context.Context, []string) error {
	return func(ctx context.Context, args []string) error {
		name := args[0]
		if !validProfileName(name) {
			return usagef("NAME: want a profile name (letters, digits, '.', '-', '_'; at most %d)", profileNameMax)
		}
		f, err := profileFile(name)
		if err != nil {
			return err
		}
		if _, err := loadProfile(f, "NAME"); err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return usagef("NAME: no such profile (see profile list; login --name NAME saves one)")
			}
			return err
		}
		if err := setCurrent(name); err != nil {
			return err
		}
		return e.emit(map[string]any{"current": name}, func(w io.Writer) { fmt.Fprintf(w, "current profile: %s\n", name) })
	}
}

func setupProfileShow(fl *flag.FlagSet, e *env) func(context.Context, []string) error {
	which := fl.String("profile", "", "the profile to show: a name or a file path (default: the one in use)")
	return func(ctx context.Context, _ []string) error {
		pe := profileEntry{}
		switch {
		case *which != "":
			f, err := profileFile(*which)
			if err != nil {
				return err
			}
			pe.File = f
			if !isProfilePath(*which) {
				pe.Name = *which
			}
		case os.Getenv(profileEnv) != "":
			pe.File = defaultProfilePath()
			if v := os.Getenv(profileEnv); !isProfilePath(v) {
				pe.Name = v
			}
		default:
			pe.Name = currentName()
			pe.File = defaultProfilePath()
			if pe.File == "" {
				return usagef("profile: no user config directory")
			}
		}
		pe.Current = pe.Name != "" && pe.Name == currentName()
		what := "profile"
		if *which != "" {
			what = "--profile"
		}
		p, err := loadProfile(pe.File, what)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) && *which == "" {
				return &localError{what: what, err: errors.New("none saved (login saves one)")}
			}
			return err
		}
		pe.Profile = p
		return e.emit(pe, pe.table)
	}
}
