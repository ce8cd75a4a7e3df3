// Command genvectors rewrites the conformance vector files vectors/*.json
// from the generator in package vectors, deterministically.
//
// Usage, from anywhere inside the module:
//
//	go run ./vectors/cmd/genvectors         # rewrite the files
//	go run ./vectors/cmd/genvectors -check  # exit 1 if they are stale
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/phuxcoord/coord/vectors"
)

func main() {
	check := flag.Bool("check", false, "only report whether the committed files are current; write nothing")
	flag.Parse()
	if err := run(*check); err != nil {
		fmt.Fprintln(os.Stderr, "genvectors:", err)
		if errors.Is(err, vectors.ErrStale) {
			os.Exit(1)
		}
		os.Exit(2)
	}
}

func run(check bool) error {
	root, err := vectors.FindModuleRoot(".")
	if err != nil {
		return err
	}
	files, err := vectors.Render(root)
	if err != nil {
		return err
	}
	dir := filepath.Join(root, "vectors")
	if check {
		if err := vectors.Compare(dir, files); err != nil {
			return err
		}
		fmt.Println("vector files are current")
		return nil
	}
	for _, f := range files {
		if err := os.WriteFile(filepath.Join(dir, f.Name), f.Data, 0o644); err != nil {
			return err
		}
		fmt.Printf("wrote vectors/%s (%d bytes)\n", f.Name, len(f.Data))
	}
	return vectors.Compare(dir, files)
}
