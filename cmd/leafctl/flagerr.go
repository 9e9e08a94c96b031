package main

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/agnivade/levenshtein"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// explainFlagError adds to a flag error of cmd what to do (issue 23 item 5):
// an unknown flag gets the nearest flag cmd has ("did you mean --step?"), a
// value of the wrong form the form expected ("want a duration such as 5s").
// Other errors are returned as they are.
func explainFlagError(cmd *cobra.Command, err error) error {
	var unknown *pflag.NotExistError
	if errors.As(err, &unknown) && unknown.GetSpecifiedShortnames() == "" {
		if near := nearestFlag(cmd.Flags(), unknown.GetSpecifiedName()); near != "" {
			return fmt.Errorf("%w: did you mean --%s?", err, near)
		}
		return err
	}
	var invalid *pflag.InvalidValueError
	if errors.As(err, &invalid) {
		switch invalid.GetFlag().Value.Type() {
		case "duration":
			msg := "want a duration such as 5s, 500ms or 1m30s (units ns, us, ms, s, m, h)"
			if _, perr := strconv.ParseFloat(invalid.GetValue(), 64); perr == nil {
				msg += "; did you mean " + invalid.GetValue() + "s?"
			}
			return fmt.Errorf("%w; %s", err, msg)
		case "int", "int64", "uint64":
			return fmt.Errorf("%w; want a whole number such as 10", err)
		}
	}
	return err
}

// nearestFlag returns the name of the visible flag of fs closest to name by
// edit distance (Levenshtein), ties going to the first in lexical order; ""
// when fs has none.
func nearestFlag(fs *pflag.FlagSet, name string) string {
	best, bestD := "", -1
	fs.VisitAll(func(f *pflag.Flag) {
		if f.Hidden {
			return
		}
		if d := levenshtein.ComputeDistance(name, f.Name); bestD < 0 || d < bestD {
			best, bestD = f.Name, d
		}
	})
	return best
}
