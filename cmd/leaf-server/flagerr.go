package main

import (
	"errors"
	"flag"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Errors of the command line that say what to do (issue 23 item 5): a value
// of the wrong form names the form ("a duration such as 5s"), an unknown flag
// names the nearest known one.

// explained is a flag.Value whose Set error says what form the value takes,
// so that the standard library's "invalid value "5" for flag -wait-timeout"
// goes on with "want a duration such as 5s, 500ms or 1m30s; did you mean
// 5s?" instead of "parse error". The same error names LEAF_WAIT_TIMEOUT or
// the leaf.properties key when the value came from there (parseConfig).
type explained struct {
	flag.Getter
	// form is what a good value looks like, after "want".
	form string
	// hint, when set, guesses the value meant from the one given ("" when
	// it has no guess).
	hint func(string) string
}

// Set implements flag.Value.
func (e explained) Set(s string) error {
	if err := e.Getter.Set(s); err != nil {
		msg := "want " + e.form
		if e.hint != nil {
			if h := e.hint(s); h != "" {
				msg += "; did you mean " + h + "?"
			}
		}
		return errors.New(msg)
	}
	return nil
}

// explainedBool is explained for a boolean flag, which the flag package
// recognises by IsBoolFlag (a bare --segment means --segment=true).
type explainedBool struct{ explained }

// IsBoolFlag implements the flag package's boolFlag.
func (explainedBool) IsBoolFlag() bool { return true }

// explainValues makes every duration, integer and boolean flag of fs an
// explained one. The flag package's own values all implement flag.Getter;
// strings never fail. Called on the flag sets that parse (not on the one
// that prints -h, whose type names come from the flag package's own types).
func explainValues(fs *flag.FlagSet) {
	fs.VisitAll(func(f *flag.Flag) {
		g, ok := f.Value.(flag.Getter)
		if !ok {
			return
		}
		switch g.Get().(type) {
		case time.Duration:
			f.Value = explained{Getter: g, form: "a duration such as 5s, 500ms or 1m30s (units ns, us, ms, s, m, h)", hint: durationHint}
		case int, int64:
			f.Value = explained{Getter: g, form: "a whole number such as 10"}
		case bool:
			f.Value = explainedBool{explained{Getter: g, form: "true or false"}}
		}
	})
}

// durationHint guesses the duration meant by a bare number: seconds ("5" →
// "5s"); "" for anything else.
func durationHint(s string) string {
	if _, err := strconv.ParseFloat(s, 64); err != nil {
		return ""
	}
	return s + "s"
}

// checkFlagNames returns an error for the first flag in args that fs does not
// define, naming the nearest flag it does; nil when every flag is known. It
// reads args as (*flag.FlagSet).Parse does: flags end at the first non-flag
// argument or at "--", a flag's value is the next argument unless it is
// given as --name=value or the flag is boolean, and -h and -help (help,
// unless defined) and malformed names are left to Parse to report.
func checkFlagNames(fs *flag.FlagSet, args []string) error {
	for i := 0; i < len(args); i++ {
		a := args[i]
		if len(a) < 2 || a[0] != '-' || a == "--" {
			return nil
		}
		name := strings.TrimPrefix(a[1:], "-")
		name, _, hasValue := strings.Cut(name, "=")
		if name == "" || name[0] == '-' || name[0] == '=' {
			return nil
		}
		f := fs.Lookup(name)
		if f == nil {
			if name == "h" || name == "help" {
				return nil
			}
			return fmt.Errorf("unknown flag --%s: did you mean --%s? (leaf-server -h lists every flag)", name, nearestFlag(fs, name))
		}
		if b, ok := f.Value.(interface{ IsBoolFlag() bool }); !hasValue && (!ok || !b.IsBoolFlag()) {
			i++ // the flag's value
		}
	}
	return nil
}

// nearestFlag returns the name of fs's flag closest to name by edit distance
// (Levenshtein), ties going to the first in lexical order.
func nearestFlag(fs *flag.FlagSet, name string) string {
	var names []string
	fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
	return nearest(name, names)
}
