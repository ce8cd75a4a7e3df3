package cmdline

import (
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/debug"
	"sort"
	"strings"
	"sync"
	"time"
)

// Command is one node of a program's command tree: a group of
// subcommands or a leaf with flags. The four programs describe
// themselves with one tree each, and the conventions they share are read
// from it: the hoisting of flags written before the subcommand (Hoist),
// shell completion (Completion) and the version (Meta).
type Command struct {
	Name    string // the word that selects it; the root's is the program's name
	Summary string // one line
	// Flags returns a leaf's flag set (nil for a group, or a leaf with
	// no flags). Only names, usages and whether a flag is boolean are
	// read.
	Flags func() *flag.FlagSet
	Sub   []*Command
}

// Lookup returns the subcommand named word, or nil.
func (c *Command) Lookup(word string) *Command {
	for _, s := range c.Sub {
		if s.Name == word {
			return s
		}
	}
	return nil
}

// Find follows the command words at the start of args and returns the
// deepest command they name and the arguments after them.
func (c *Command) Find(args []string) (*Command, []string) {
	n := c
	for len(args) > 0 {
		s := n.Lookup(args[0])
		if s == nil {
			break
		}
		n, args = s, args[1:]
	}
	return n, args
}

// flagKinds maps every flag name of the tree to whether it is boolean
// (a name boolean somewhere and valued elsewhere counts as valued).
func (c *Command) flagKinds() map[string]bool {
	kinds := map[string]bool{"h": true, "help": true, "version": true}
	var walk func(*Command)
	walk = func(n *Command) {
		for _, f := range n.flagList() {
			if prev, ok := kinds[f.Name]; !ok || prev {
				kinds[f.Name] = isBool(f)
			}
		}
		for _, s := range n.Sub {
			walk(s)
		}
	}
	walk(c)
	return kinds
}

func (c *Command) flagList() []*flag.Flag {
	if c.Flags == nil {
		return nil
	}
	fs := c.Flags()
	if fs == nil {
		return nil
	}
	var out []*flag.Flag
	fs.VisitAll(func(f *flag.Flag) { out = append(out, f) })
	return out
}

func isBool(f *flag.Flag) bool {
	b, ok := f.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}

// IsHelp reports whether a is one of the spellings of help: "help",
// "-h", "--help" or "-help".
func IsHelp(a string) bool {
	return a == "help" || a == "-h" || a == "--help" || a == "-help"
}

// Hoist moves the flags written before the command words to just after
// them, so that "prog --json objective list" is read as "prog objective
// list --json": global flags are accepted before or after the
// subcommand. Whether a leading flag takes the next argument as its
// value is read from the tree; the leaf's parser then judges the flags
// as usual (an unknown one is refused there, by position).
func Hoist(args []string, root *Command) []string {
	kinds := root.flagKinds()
	i := 0
	for i < len(args) {
		a := args[i]
		if a == "--" || a == "-" || !strings.HasPrefix(a, "-") {
			break
		}
		i++
		name, _, hasValue := strings.Cut(strings.TrimPrefix(a[1:], "-"), "=")
		if b, known := kinds[name]; known && !b && !hasValue && i < len(args) {
			i++
		}
	}
	if i == 0 {
		return args
	}
	start := i
	if i < len(args) && args[i] == "help" {
		start++ // "prog --json help objective": the help of the words after it
	}
	j := start
	for n := root; j < len(args); j++ {
		if n = n.Lookup(args[j]); n == nil {
			break
		}
	}
	if j == start {
		return args
	}
	out := make([]string, 0, len(args))
	out = append(out, args[i:j]...)
	out = append(out, args[:i]...)
	return append(out, args[j:]...)
}

// Version is the program's version line, from the build information the
// Go toolchain embeds: the module version ("(devel)" for a build from a
// checkout), the VCS revision and time when known, and the toolchain and
// platform.
func Version(prog string) string {
	v, rev, at, dirty := "(unknown)", "", "", false
	if bi, ok := debug.ReadBuildInfo(); ok {
		v = bi.Main.Version
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.time":
				at = s.Value
			case "vcs.modified":
				dirty = s.Value == "true"
			}
		}
	}
	if v == "" {
		v = "(devel)"
	}
	s := prog + " " + v
	if rev != "" {
		if len(rev) > 12 {
			rev = rev[:12]
		}
		s += " commit " + rev
		if dirty {
			s += "+modified"
		}
		if at != "" {
			s += " " + at
		}
	}
	return s + " " + runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH
}

// Meta answers what every program shares and its tree describes:
// "version" and "--version" print Version; "completion bash|zsh|fish"
// prints the shell's completion script; "version --help" and
// "completion --help" print their usage. handled is false when args are
// none of these. A wrong shell is a *UsageError about "completion" (exit
// status 2 in every program).
func Meta(args []string, root *Command, stdout io.Writer) (handled bool, err error) {
	if len(args) == 0 {
		return false, nil
	}
	switch args[0] {
	case "version", "--version", "-version":
		if len(args) > 1 && IsHelp(args[1]) {
			fmt.Fprintf(stdout, "usage: %s version\n\nPrint the version, the commit and the Go toolchain it was built with.\n", root.Name)
			return true, nil
		}
		if len(args) > 1 {
			return true, Usagef("arguments", "version takes none")
		}
		fmt.Fprintln(stdout, Version(root.Name))
		return true, nil
	case "completion":
		if len(args) != 2 || IsHelp(args[1]) {
			if len(args) == 2 {
				fmt.Fprint(stdout, CompletionUsage(root.Name))
				return true, nil
			}
			return true, Usagef("completion", "want one of bash, zsh or fish")
		}
		return true, Completion(stdout, args[1], root)
	}
	return false, nil
}

// CompletionUsage is the help of "completion".
func CompletionUsage(prog string) string {
	return fmt.Sprintf(`usage: %[1]s completion bash|zsh|fish

Print the shell completion script (commands, subcommands and flags).
  bash:  source <(%[1]s completion bash)     (or save it in ~/.local/share/bash-completion/completions/%[1]s)
  zsh:   source <(%[1]s completion zsh)      (or save it as _%[1]s in a directory of $fpath)
  fish:  %[1]s completion fish > ~/.config/fish/completions/%[1]s.fish
`, prog)
}

// node is one command path of the tree with what completes after it.
type node struct {
	path   string   // "/objective/create"; "" for the root
	words  []string // subcommands
	flags  []*flag.Flag
	values []string // flags that take a value ("--name")
	subs   []*Command
}

func nodes(root *Command) []node {
	var out []node
	var walk func(path string, c *Command)
	walk = func(path string, c *Command) {
		n := node{path: path, subs: c.Sub}
		for _, s := range c.Sub {
			n.words = append(n.words, s.Name)
		}
		n.flags = c.flagList()
		for _, f := range n.flags {
			if !isBool(f) {
				n.values = append(n.values, dashed(f.Name))
			}
		}
		out = append(out, n)
		for _, s := range c.Sub {
			walk(path+"/"+s.Name, s)
		}
	}
	walk("", root)
	return out
}

// meta is the root's own words: the conventions every program shares.
var meta = []string{"help", "version", "completion"}

// Completion writes the completion script of root for shell (bash, zsh
// or fish). The script knows the tree's command paths: it follows the
// command words typed so far, offers the subcommands and flags of where
// they lead, and leaves the value of a flag that takes one to the
// shell's file completion.
func Completion(w io.Writer, shell string, root *Command) error {
	ns := nodes(root)
	fn := "_" + strings.NewReplacer("-", "_", ".", "_").Replace(root.Name)
	var paths, valued []string
	seen := map[string]bool{}
	for _, n := range ns {
		if n.path != "" {
			paths = append(paths, n.path)
		}
		for _, v := range n.values {
			if !seen[v] {
				seen[v] = true
				valued = append(valued, v)
			}
		}
	}
	sort.Strings(valued)
	cands := func(n node) []string {
		out := append([]string(nil), n.words...)
		if n.path == "" {
			out = append(out, meta...)
			out = append(out, "--help", "--version")
		} else if len(n.subs) == 0 {
			for _, f := range n.flags {
				out = append(out, dashed(f.Name))
			}
			out = append(out, "--help")
		} else {
			out = append(out, "--help")
		}
		return out
	}
	var b strings.Builder
	switch shell {
	case "bash":
		fmt.Fprintf(&b, "# bash completion of %s; generated by `%[1]s completion bash`.\n", root.Name)
		fmt.Fprintf(&b, "%s() {\n\tlocal cur=\"${COMP_WORDS[COMP_CWORD]}\" prev=\"${COMP_WORDS[COMP_CWORD-1]}\" path=\"\" w i words=\"\"\n", fn)
		fmt.Fprintf(&b, "\tfor ((i = 1; i < COMP_CWORD; i++)); do\n\t\tw=\"${COMP_WORDS[i]}\"\n\t\tcase \"$path/$w\" in\n")
		fmt.Fprintf(&b, "\t\t%s) path=\"$path/$w\" ;;\n\t\tesac\n\tdone\n", strings.Join(paths, "|"))
		if len(valued) > 0 {
			fmt.Fprintf(&b, "\tcase \"$prev\" in\n\t%s) return 0 ;;\n\tesac\n", strings.Join(valued, "|"))
		}
		fmt.Fprintf(&b, "\tcase \"$path\" in\n")
		for _, n := range ns {
			fmt.Fprintf(&b, "\t%q) words=%q ;;\n", n.path, strings.Join(cands(n), " "))
		}
		fmt.Fprintf(&b, "\tesac\n\tif [[ \"$path\" == \"\" && \"$prev\" == completion ]]; then words=\"bash zsh fish\"; fi\n")
		fmt.Fprintf(&b, "\tCOMPREPLY=($(compgen -W \"$words\" -- \"$cur\"))\n}\ncomplete -o default -F %s %s\n", fn, root.Name)
	case "zsh":
		fmt.Fprintf(&b, "#compdef %s\n# zsh completion of %[1]s; generated by `%[1]s completion zsh`.\n", root.Name)
		fmt.Fprintf(&b, "%s() {\n\tlocal cmdpath=\"\" w i\n\tlocal -a cands\n", fn)
		fmt.Fprintf(&b, "\tfor ((i = 2; i < CURRENT; i++)); do\n\t\tw=\"${words[i]}\"\n\t\tcase \"$cmdpath/$w\" in\n")
		fmt.Fprintf(&b, "\t\t(%s) cmdpath=\"$cmdpath/$w\" ;;\n\t\tesac\n\tdone\n", strings.Join(paths, "|"))
		if len(valued) > 0 {
			fmt.Fprintf(&b, "\tcase \"${words[CURRENT-1]}\" in\n\t(%s) _files; return ;;\n\tesac\n", strings.Join(valued, "|"))
		}
		fmt.Fprintf(&b, "\tcase \"$cmdpath\" in\n")
		for _, n := range ns {
			fmt.Fprintf(&b, "\t(%q) cands=(%s) ;;\n", n.path, strings.Join(cands(n), " "))
		}
		fmt.Fprintf(&b, "\tesac\n\tif [[ -z \"$cmdpath\" && \"${words[CURRENT-1]}\" == completion ]]; then cands=(bash zsh fish); fi\n")
		fmt.Fprintf(&b, "\tcompadd -a cands\n\t[[ \"${words[CURRENT]}\" == -* ]] || _files\n}\n")
		fmt.Fprintf(&b, "if [[ \"${funcstack[1]}\" == %s ]]; then\n\t%[1]s \"$@\"\nelse\n\tcompdef %[1]s %s\nfi\n", fn, root.Name)
	case "fish":
		fmt.Fprintf(&b, "# fish completion of %s; generated by `%[1]s completion fish`.\n", root.Name)
		fmt.Fprintf(&b, "function %s_path\n\tset -l p ''\n\tfor w in (commandline -opc)[2..-1]\n\t\tswitch \"$p/$w\"\n", fn)
		fmt.Fprintf(&b, "\t\t\tcase %s\n\t\t\t\tset p \"$p/$w\"\n\t\tend\n\tend\n\techo \"@$p\"\nend\n", strings.Join(paths, " "))
		fmt.Fprintf(&b, "complete -c %s -f\n", root.Name)
		for _, n := range ns {
			cond := fmt.Sprintf("test (%s_path) = '@%s'", fn, n.path)
			for _, s := range n.subs {
				fmt.Fprintf(&b, "complete -c %s -n %s -a %s -d %s\n", root.Name, fishQuote(cond), s.Name, fishQuote(firstLine(s.Summary)))
			}
			if n.path == "" {
				for _, m := range meta {
					fmt.Fprintf(&b, "complete -c %s -n %s -a %s\n", root.Name, fishQuote(cond), m)
				}
				fmt.Fprintf(&b, "complete -c %s -n %s -l version\n", root.Name, fishQuote(cond))
			}
			for _, f := range n.flags {
				opt := "-l " + f.Name
				if len(f.Name) == 1 {
					opt = "-s " + f.Name
				}
				if !isBool(f) {
					opt += " -r -F"
				}
				fmt.Fprintf(&b, "complete -c %s -n %s %s -d %s\n", root.Name, fishQuote(cond), opt, fishQuote(firstLine(f.Usage)))
			}
			fmt.Fprintf(&b, "complete -c %s -n %s -l help\n", root.Name, fishQuote(cond))
		}
		fmt.Fprintf(&b, "complete -c %s -n \"test (%s_path) = '@'; and __fish_seen_subcommand_from completion\" -a 'bash zsh fish'\n", root.Name, fn)
	default:
		return Usagef("completion", "unknown shell (want bash, zsh or fish)")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// dashed is a flag as it is written: -o, --name.
func dashed(name string) string {
	if len(name) == 1 {
		return "-" + name
	}
	return "--" + name
}

func fishQuote(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(s) + "'"
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return s
}

// Progress is a one-line progress report on a terminal: each Printf
// rewrites the line (at most ten times a second), Done clears it. It
// writes nothing unless w is a terminal, so that logs, pipes and captured
// output never hold it.
type Progress struct {
	mu   sync.Mutex
	w    io.Writer
	on   bool
	last time.Time
	used bool
}

// NewProgress returns a Progress on w, live only if w is a terminal.
func NewProgress(w io.Writer) *Progress { return &Progress{w: w, on: IsTerminal(w)} }

// Printf rewrites the progress line.
func (p *Progress) Printf(format string, args ...any) {
	if p == nil || !p.on {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if now := time.Now(); now.Sub(p.last) >= 100*time.Millisecond {
		p.last, p.used = now, true
		fmt.Fprintf(p.w, "\r\x1b[K"+format, args...)
	}
}

// Done clears the progress line.
func (p *Progress) Done() {
	if p == nil || !p.on {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.used {
		fmt.Fprint(p.w, "\r\x1b[K")
		p.used = false
	}
}

// IsTerminal reports whether w is a character device other than the null
// device: a terminal.
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok || f == nil {
		return false
	}
	fi, err := f.Stat()
	if err != nil || fi.Mode()&os.ModeCharDevice == 0 {
		return false
	}
	if null, err := os.Stat(os.DevNull); err == nil && os.SameFile(fi, null) {
		return false
	}
	return true
}

// Writer returns w counting what passes through it on the progress line
// ("what: 1.5 MiB"), or w itself when the progress is not live.
func (p *Progress) Writer(w io.Writer, what string) io.Writer {
	if p == nil || !p.on {
		return w
	}
	return &progressIO{w: w, p: p, what: what}
}

// Reader returns r counting what is read from it on the progress line,
// or r itself when the progress is not live.
func (p *Progress) Reader(r io.Reader, what string) io.Reader {
	if p == nil || !p.on {
		return r
	}
	return &progressIO{r: r, p: p, what: what}
}

type progressIO struct {
	w    io.Writer
	r    io.Reader
	p    *Progress
	what string
	n    int64
}

func (x *progressIO) Write(b []byte) (int, error) {
	n, err := x.w.Write(b)
	x.count(n)
	return n, err
}

func (x *progressIO) Read(b []byte) (int, error) {
	n, err := x.r.Read(b)
	x.count(n)
	return n, err
}

func (x *progressIO) count(n int) {
	x.n += int64(n)
	x.p.Printf("%s: %.1f MiB", x.what, float64(x.n)/(1<<20))
}
