package main

import (
	"errors"
	"io"
)

// This file is the one place that chooses how a result is printed (-o,
// --json): every subcommand hands it the JSON value of what it prints
// (the projection: render.go's recordJSON, resultJSON, statusJSON …) and
// a function that draws the table. Replacing the projection changes
// what the JSON forms hold, not how they are chosen.

// outputFormat is the value of -o / --output.
type outputFormat string

const (
	formatTable outputFormat = "table" // aligned text for people (the default)
	formatJSON  outputFormat = "json"  // one JSON document: an object, or an array for a list
	formatJSONL outputFormat = "jsonl" // one JSON object per line: a list item per line
)

func (f *outputFormat) String() string {
	if f == nil || *f == "" {
		return string(formatTable)
	}
	return string(*f)
}

// Get makes -o a flag.Getter of a value that is not free text.
func (f *outputFormat) Get() any { return *f }

func (f *outputFormat) Set(v string) error {
	switch outputFormat(v) {
	case formatTable, formatJSON, formatJSONL:
		*f = outputFormat(v)
		return nil
	}
	return errors.New("want table, json or jsonl")
}

// jsonFlag is --json, kept as a synonym of -o json.
type jsonFlag struct{ f *outputFormat }

func (j jsonFlag) String() string   { return "false" }
func (j jsonFlag) IsBoolFlag() bool { return true }
func (j jsonFlag) Get() any         { return *j.f == formatJSON }
func (j jsonFlag) Set(v string) error {
	switch v {
	case "true":
		*j.f = formatJSON
	case "false":
		*j.f = formatTable
	default:
		return errors.New("want true or false")
	}
	return nil
}

// isJSON reports whether a JSON form was asked for.
func (e *env) isJSON() bool { return e.out == formatJSON || e.out == formatJSONL }

// emit prints one object: its JSON value v in either JSON form, else the
// table.
func (e *env) emit(v any, table func(w io.Writer)) error {
	if e.isJSON() {
		return outputErr(writeJSON(e.stdout, v))
	}
	table(e.stdout)
	return nil
}

// emitList prints a list: one JSON array (-o json), one item per line
// (-o jsonl), else the table.
func (e *env) emitList(items []any, table func(w io.Writer)) error {
	switch e.out {
	case formatJSON:
		if items == nil {
			items = []any{}
		}
		return outputErr(writeJSON(e.stdout, items))
	case formatJSONL:
		for _, it := range items {
			if err := writeJSON(e.stdout, it); err != nil {
				return outputErr(err)
			}
		}
		return nil
	}
	table(e.stdout)
	return nil
}

// emitEvent prints one item of an unbounded stream (watch): one JSON
// object per line in either JSON form (a stream has no end at which to
// close an array), else the human line.
func (e *env) emitEvent(v any, human string) error {
	if e.isJSON() {
		return outputErr(writeJSON(e.stdout, v))
	}
	_, err := io.WriteString(e.stdout, human+"\n")
	return outputErr(err)
}

func outputErr(err error) error {
	if err != nil {
		return &localError{what: "output", err: err}
	}
	return nil
}
