package cmdline

import (
	"flag"
	"maps"
	"os"
	"strings"
)

// EnvVar is the environment variable of a flag: prefix and the flag's
// name in upper case, '-' as '_' (PHUX_COORDD_ and witness-key:
// PHUX_COORDD_WITNESS_KEY).
func EnvVar(prefix, flagName string) string {
	return prefix + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// ApplyEnv sets each flag of names that fs has and set does not hold
// from its environment variable (EnvVar), when that is not empty, and
// records it in set: the environment is read as the command line is,
// under it (a flag given wins) and over whatever fills the flags left
// unset (a profile, a default). A value fs refuses is a *UsageError
// about the variable ("$PHUX_COORDD_ADMIN: invalid value (USAGE)"),
// never quoting the value: a variable may hold something private, and a
// refusal goes to a terminal, a log or a CI transcript.
func ApplyEnv(fs *flag.FlagSet, set map[string]bool, prefix string, names []string) error {
	for _, name := range names {
		f := fs.Lookup(name)
		v := os.Getenv(EnvVar(prefix, name))
		if v == "" || set[name] || f == nil {
			continue
		}
		if err := fs.Set(name, v); err != nil {
			return Usagef("$"+EnvVar(prefix, name), "invalid value (%s)", f.Usage)
		}
		set[name] = true
	}
	return nil
}

// Env is the environment variables of a command's flags, for a command
// that also names the variable when it refuses a value it took from one
// (Field) after parsing.
type Env struct {
	Prefix string   // PHUX_COORDD_
	Names  []string // the flags a variable stands for
	from   map[string]bool
}

// Apply is ApplyEnv of e's flags under the flags the command line set
// (fs.Visit, so after the parse); it records which flags it set, for
// Field.
func (e *Env) Apply(fs *flag.FlagSet) error {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	given := maps.Clone(set)
	err := ApplyEnv(fs, set, e.Prefix, e.Names)
	e.from = map[string]bool{}
	for k := range set {
		if !given[k] {
			e.from[k] = true
		}
	}
	return err
}

// Var is the environment variable of flag name.
func (e *Env) Var(name string) string { return EnvVar(e.Prefix, name) }

// Field is how a refusal of flag name's value names it: "$VAR" when
// Apply took the value from the environment, else "--name".
func (e *Env) Field(name string) string {
	if e.from[name] {
		return "$" + e.Var(name)
	}
	return dashed(name)
}

// EnvValues are the values of the variables of names under prefix that
// are set (not empty): a refusal scrubs them as it does the arguments
// (Scrub), its last line of defence.
func EnvValues(prefix string, names []string) []string {
	var out []string
	for _, name := range names {
		if v := os.Getenv(EnvVar(prefix, name)); v != "" {
			out = append(out, v)
		}
	}
	return out
}
