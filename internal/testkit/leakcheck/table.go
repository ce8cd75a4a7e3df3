package leakcheck

import "testing"

// Row is one exported type of a package that holds, or looks as if it
// held, key material, in that package's leak table. Exactly one of Public
// and Leaks is set: Public says why every value the type holds may be
// shown (public keys, key ids, times), or Leaks renders values of the
// type holding known secrets and returns every rendering that shows one.
type Row struct {
	Name   string
	Public string
	Leaks  func(t *testing.T) []string
}

// CheckTable runs each row's Leaks as a subtest named after the row and
// fails it for every rendering that shows a secret.
func CheckTable(t *testing.T, rows []Row) {
	t.Helper()
	for _, c := range rows {
		if c.Leaks == nil {
			continue
		}
		t.Run(c.Name, func(t *testing.T) {
			for _, l := range c.Leaks(t) {
				t.Errorf("%s leaks through %s", c.Name, l)
			}
		})
	}
}

// CheckTableComplete fails when a row sets both or neither of Public and
// Leaks, and when an exported type of the package in dir with a
// secret-looking field (SecretLookingTypes) has no row in rows.
func CheckTableComplete(t *testing.T, dir string, rows []Row) {
	t.Helper()
	found, err := SecretLookingTypes(dir)
	if err != nil {
		t.Fatal(err)
	}
	named := map[string]bool{}
	for _, c := range rows {
		if (c.Public == "") == (c.Leaks == nil) {
			t.Errorf("row %s: give exactly one of public and leaks", c.Name)
		}
		named[c.Name] = true
	}
	for _, name := range SortedNames(found) {
		if !named[name] {
			t.Errorf("exported type %s holds a secret-looking field (%s) but has no row in leakTable", name, found[name])
		}
	}
}
