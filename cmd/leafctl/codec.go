package main

import (
	"encoding/json"
	"errors"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/leaf-go/leaf/snowflake"
)

// idView is the JSON of decode and encode --json: the server's
// /api/v1/snowflake/decode/{id} answer plus localTime.
type idView struct {
	snowflake.Description
	LocalTime string `json:"localTime"` // the machine's time zone, ms precision
}

// view decodes id with layout l; local is the zone of localTime.
func view(l snowflake.Layout, id int64, local *time.Location) idView {
	d := l.Describe(id)
	return idView{Description: d, LocalTime: time.UnixMilli(d.Timestamp).In(local).Format(snowflake.ISOMillis)}
}

// writeView prints v as JSON or as the human-readable listing.
func writeView(w io.Writer, v idView, asJSON bool) error {
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	}
	fprintf(w, "id            %s\n", v.ID)
	fprintf(w, "timestamp     %d ms (Unix), %d ms after the epoch %d\n", v.Timestamp, v.Timestamp-v.Layout.EpochMillis, v.Layout.EpochMillis)
	fprintf(w, "time (UTC)    %s\n", v.Time)
	fprintf(w, "time (local)  %s\n", v.LocalTime)
	fprintf(w, "worker        %d (Twitter's view: datacenter %d, machine %d)\n", v.Worker, v.Datacenter, v.Machine)
	fprintf(w, "sequence      %d\n", v.Sequence)
	cols := [][2]string{
		{"sign", v.Bits.Sign},
		{"time (" + strconv.Itoa(v.Layout.TimeBits) + ")", v.Bits.Time},
		{"worker (" + strconv.Itoa(v.Layout.WorkerBits) + ")", v.Bits.Worker},
		{"sequence (" + strconv.Itoa(v.Layout.SequenceBits) + ")", v.Bits.Sequence},
	}
	var head, bits strings.Builder
	for _, c := range cols {
		width := max(len(c[0]), len(c[1])) + 2
		head.WriteString(c[0] + strings.Repeat(" ", width-len(c[0])))
		bits.WriteString(c[1] + strings.Repeat(" ", width-len(c[1])))
	}
	fprintf(w, "bits          %s\n", strings.TrimRight(head.String(), " "))
	fprintf(w, "              %s\n", strings.TrimRight(bits.String(), " "))
	return nil
}

// layoutFor returns the default layout with the epoch of --epoch-ms.
func layoutFor(epochMillis int64) (snowflake.Layout, error) {
	l := snowflake.DefaultLayout()
	l.Epoch = time.UnixMilli(epochMillis).UTC()
	if err := l.Validate(time.Now()); err != nil {
		return l, &usageError{err}
	}
	return l, nil
}

func newDecodeCmd(e env) *cobra.Command {
	var (
		asJSON bool
		epoch  int64
	)
	cmd := &cobra.Command{
		Use:   "decode <id> [--json]",
		Short: "Split a snowflake ID into time, worker and sequence",
		Long: `Split a snowflake ID into its fields: timestamp (UTC and local time), the
10-bit worker ID (and Twitter's 5-bit datacenter / 5-bit machine view of it),
the sequence, and the 64 bits split by field. The layout is Leaf's and
Twitter's: 41 bits of ms since --epoch-ms, 10 bits of worker, 12 of sequence.`,
		Args: exactArgs(1, "one ID"),
		RunE: func(_ *cobra.Command, args []string) error {
			l, err := layoutFor(epoch)
			if err != nil {
				return err
			}
			id, err := strconv.ParseInt(args[0], 10, 64)
			if err != nil || id < 0 {
				return notAnID(args[0])
			}
			return writeView(e.stdout, view(l, id, time.Local), asJSON)
		},
	}
	// "decode -1" reaches the flag parser as the shorthand flags "1": say
	// that it is not an ID rather than "unknown shorthand flag".
	cmd.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		var unknown interface{ GetSpecifiedShortnames() string }
		if errors.As(err, &unknown) {
			if s := unknown.GetSpecifiedShortnames(); s != "" && s[0] >= '0' && s[0] <= '9' {
				return notAnID("-" + s)
			}
		}
		return c.Root().FlagErrorFunc()(c, err)
	})
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON (the shape of the server's /api/v1/snowflake/decode/{id})")
	cmd.Flags().Int64Var(&epoch, "epoch-ms", snowflake.DefaultEpochMillis, "the layout's epoch in Unix ms (Twitter's and Leaf's by default)")
	return cmd
}

// notAnID is decode's usage error for an argument that is not an ID.
func notAnID(arg string) error {
	return usagef("decode: %q is not an ID: want a decimal integer from 0 to 9223372036854775807 (snowflake IDs are never negative)", arg)
}

func newEncodeCmd(e env) *cobra.Command {
	var (
		asJSON                        bool
		epoch, ms, worker, dc, mc, sq int64
		rfc                           string
	)
	cmd := &cobra.Command{
		Use:   "encode (--timestamp MS | --time RFC3339) (--worker N | --datacenter N --machine N) [--sequence N]",
		Short: "Build a snowflake ID from time, worker and sequence",
		Long: `Build a snowflake ID from its fields and print it (or, with --json, the
decoded view). The worker is either --worker (0..1023) or Twitter's
--datacenter (0..31) and --machine (0..31).`,
		Args: exactArgs(0, "no arguments (the fields are flags)"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			l, err := layoutFor(epoch)
			if err != nil {
				return err
			}
			f := cmd.Flags()
			switch {
			case f.Changed("timestamp") == f.Changed("time"):
				return usagef("encode: give exactly one of --timestamp (Unix ms) and --time (RFC 3339)")
			case f.Changed("time"):
				t, err := time.Parse(time.RFC3339Nano, rfc)
				if err != nil {
					return usagef("encode: --time %q is not RFC 3339 (e.g. 2023-11-14T22:13:20.000Z)", rfc)
				}
				ms = t.UnixMilli()
			}
			twitter := f.Changed("datacenter") || f.Changed("machine")
			var id int64
			switch {
			case f.Changed("worker") && twitter:
				return usagef("encode: give either --worker or --datacenter and --machine, not both")
			case twitter && (!f.Changed("datacenter") || !f.Changed("machine")):
				return usagef("encode: --datacenter and --machine go together")
			case twitter:
				id, err = l.ComposeTwitter(ms, dc, mc, sq)
			case f.Changed("worker"):
				id, err = l.Compose(ms, worker, sq)
			default:
				return usagef("encode: give --worker, or --datacenter and --machine")
			}
			if err != nil {
				return &usageError{err}
			}
			if asJSON {
				return writeView(e.stdout, view(l, id, time.Local), true)
			}
			fprintf(e.stdout, "%d\n", id)
			return nil
		},
	}
	f := cmd.Flags()
	f.Int64Var(&ms, "timestamp", 0, "time in Unix milliseconds")
	f.StringVar(&rfc, "time", "", "time in RFC 3339 (sub-millisecond digits are dropped)")
	f.Int64Var(&worker, "worker", 0, "worker ID, 0..1023")
	f.Int64Var(&dc, "datacenter", 0, "Twitter's datacenter ID, 0..31 (with --machine)")
	f.Int64Var(&mc, "machine", 0, "Twitter's machine ID, 0..31 (with --datacenter)")
	f.Int64Var(&sq, "sequence", 0, "sequence within the millisecond, 0..4095")
	f.BoolVar(&asJSON, "json", false, "print the decoded view as JSON instead of the bare ID")
	f.Int64Var(&epoch, "epoch-ms", snowflake.DefaultEpochMillis, "the layout's epoch in Unix ms (Twitter's and Leaf's by default)")
	return cmd
}
