package gatewaycmd

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"net/url"
	"text/tabwriter"

	"github.com/toolgateway/toolgateway/gateway"
	"github.com/toolgateway/toolgateway/gateway/pins"
)

// Usages of `gateway admin tools`.
const (
	toolsListUsage   = "tools list"
	toolsShowUsage   = "tools show TOOL"
	toolsAcceptUsage = "tools accept TOOL [-sha256 HEX] [-by B]"
)

// tools is `gateway admin tools list|show|accept`: the MCP upstream
// tools' pins, what changed in a held one, and accepting its new
// definition.
func (c *adminClient) tools(ctx context.Context, args []string) error {
	if len(args) == 0 {
		return fmt.Errorf("admin tools: name list, show or accept (usage: gateway admin %s | %s | %s)", toolsListUsage, toolsShowUsage, toolsAcceptUsage)
	}
	switch args[0] {
	case "list":
		return c.toolsList(ctx, args[1:])
	case "show":
		return c.toolsShow(ctx, args[1:])
	case "accept":
		return c.toolsAccept(ctx, args[1:])
	}
	return fmt.Errorf("admin tools: unknown command %q (usage: gateway admin %s | %s | %s)", args[0], toolsListUsage, toolsShowUsage, toolsAcceptUsage)
}

func (c *adminClient) toolsList(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("tools list", flag.ContinueOnError)
	asJSON := fs.Bool("json", c.json, "print the API's JSON")
	if _, err := c.parseInterleaved(fs, args, 0, toolsListUsage); err != nil {
		return err
	}
	var list gateway.AdminTools
	if err := c.toolsCall(ctx, http.MethodGet, "/admin/v1/tools", nil, "list", "a tools list", &list); err != nil {
		return err
	}
	if *asJSON {
		return writeIndented(c.stdout, list)
	}
	tw := tabwriter.NewWriter(c.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "TOOL\tSERVER\tSTATE\tPINNED\tCURRENT\tPINNED BY")
	held := 0
	for _, s := range list.Tools {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", s.Tool, s.Server, pinState(s), short(s.Pinned), short(s.Current), s.PinnedBy)
		if s.Held {
			held++
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(c.stdout, "\n%d tools, %d held\n", len(list.Tools), held)
	return nil
}

// toolsCall sends one admin request of `tools cmd` and reads its answer,
// which should be answer, into into.
func (c *adminClient) toolsCall(ctx context.Context, method, path string, body []byte, cmd, answer string, into any) error {
	raw, err := c.do(ctx, method, path, body)
	if err != nil {
		return fmt.Errorf("admin tools %s: %w", cmd, err)
	}
	if err := json.Unmarshal(raw, into); err != nil {
		return fmt.Errorf("admin tools %s: the answer is not %s: %w", cmd, answer, err)
	}
	return nil
}

// pinState names a tool's state in the table.
func pinState(s pins.Status) string {
	if s.Held {
		return "HELD"
	}
	return "pinned"
}

// short is the first 12 hex digits of a hash (the JSON has them whole).
func short(hash string) string {
	if len(hash) > 12 {
		return hash[:12]
	}
	return hash
}

// toolsShow prints a tool's pin and, member by member, its pinned and
// current definitions: the changed members both ways, the others once.
func (c *adminClient) toolsShow(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("tools show", flag.ContinueOnError)
	asJSON := fs.Bool("json", c.json, "print the API's JSON")
	pos, err := c.parseInterleaved(fs, args, 1, toolsShowUsage)
	if err != nil {
		return err
	}
	var change pins.Change
	if err := c.toolsCall(ctx, http.MethodGet, "/admin/v1/tools/"+url.PathEscape(pos[0]), nil, "show", "a tool's pin", &change); err != nil {
		return err
	}
	if *asJSON {
		return writeIndented(c.stdout, change)
	}
	fmt.Fprintf(c.stdout, "%s (MCP server %s): %s\npinned:     sha256:%s by %s\n", change.Tool, change.Server, pinState(change.Status), change.Status.Pinned, change.PinnedBy)
	if !change.Held {
		return nil
	}
	fmt.Fprintf(c.stdout, "listed now: sha256:%s\n", change.Status.Current)
	for _, m := range change.Members() {
		if !m.Changed {
			fmt.Fprintf(c.stdout, "\n%s (unchanged): %s\n", m.Member, m.Current)
			continue
		}
		fmt.Fprintf(c.stdout, "\n%s CHANGED\n  pinned:     %s\n  listed now: %s\n", m.Member, orAbsent(m.Pinned), orAbsent(m.Current))
	}
	fmt.Fprintf(c.stdout, "\naccept what you reviewed: gateway admin tools accept %s -sha256 %s\n", change.Tool, change.Status.Current)
	return nil
}

// orAbsent is a member's JSON, or "(absent)" where the version has none.
func orAbsent(raw json.RawMessage) string {
	if len(raw) == 0 {
		return "(absent)"
	}
	return string(raw)
}

func (c *adminClient) toolsAccept(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("tools accept", flag.ContinueOnError)
	sha := fs.String("sha256", "", "accept only the definition of this hash (the one you reviewed; see tools list -json)")
	by := fs.String("by", c.user, "who accepts (default $USER)")
	asJSON := fs.Bool("json", c.json, "print the API's JSON")
	pos, err := c.parseInterleaved(fs, args, 1, toolsAcceptUsage)
	if err != nil {
		return err
	}
	body, err := json.Marshal(map[string]string{"sha256": *sha, "by": *by})
	if err != nil {
		return err
	}
	var s pins.Status
	if err := c.toolsCall(ctx, http.MethodPost, "/admin/v1/tools/"+url.PathEscape(pos[0])+"/accept", body, "accept", "a tool's pin", &s); err != nil {
		return err
	}
	if *asJSON {
		return writeIndented(c.stdout, s)
	}
	fmt.Fprintf(c.stdout, "%s: pinned sha256:%s by %s; held: %v\n", s.Tool, s.Pinned, s.PinnedBy, s.Held)
	return nil
}
