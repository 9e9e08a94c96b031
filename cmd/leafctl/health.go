package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/spf13/cobra"
)

// newHealthCmd is `leafctl health`: GET <server>/readyz, exit 0 when the
// server answers 200 (every enabled mode ready), 1 otherwise. It exists for
// container health checks, where the distroless image has no curl.
func newHealthCmd(e env, g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "health",
		Short: "Check that the server at --server is ready (GET /readyz); exit 0 when it is",
		Args:  exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := context.WithTimeout(cmd.Context(), g.timeout)
			defer cancel()
			url := strings.TrimRight(g.server, "/") + "/readyz"
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
			if err != nil {
				return usagef("--server %q: %v", g.server, err)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				return fmt.Errorf("GET %s: %w", url, err)
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
			fprintf(e.stdout, "%s\n", strings.TrimSpace(string(body)))
			if resp.StatusCode != http.StatusOK {
				return fmt.Errorf("GET %s: %s", url, resp.Status)
			}
			return nil
		},
	}
}
