// Package toolscan classifies tools for `gateway scan`: read_only,
// consequential or unknown, each with the reasons, from what can be read
// without calling them — the config's read_only, an MCP server's
// annotations (hints from a server the gateway does not control), the
// tool's name, the HTTP method it is called with, and its input schema's
// members (amounts, currencies, recipients, emails). It then says which
// of the gateway's protections the tool has and which it lacks
// (docs/tools.md, "Scan").
//
// It imports nothing of this module: the caller describes each tool as a
// [Tool].
package toolscan

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"
)

// The classes.
const (
	ReadOnly      = "read_only"
	Consequential = "consequential"
	Unknown       = "unknown"
)

// Annotations are an MCP tool's hints, as the server listed them (a nil
// field: not sent, the MCP default applies).
type Annotations struct {
	ReadOnlyHint    bool
	DestructiveHint *bool
	IdempotentHint  bool
	OpenWorldHint   *bool
}

// Tool is what the scan knows of one tool.
type Tool struct {
	Name        string
	Description string
	// InputSchema is the JSON Schema of the arguments (nil: any object).
	InputSchema json.RawMessage
	// ConfigReadOnly: the config (or the plugin's Spec) says read-only.
	ConfigReadOnly bool
	// ServedReadOnly: the gateway serves it read-only (ConfigReadOnly, or
	// an MCP server's readOnlyHint).
	ServedReadOnly bool
	// HTTPMethod is the method an HTTP upstream tool is called with ("":
	// not an HTTP tool).
	HTTPMethod string
	// MCP: the tool's server's annotations (nil: not an MCP tool, or no
	// annotations sent; see HasMCP).
	MCP    *Annotations
	HasMCP bool
}

// Result is the scan's verdict on one tool.
type Result struct {
	Class   string   `json:"class"`
	Reasons []string `json:"reasons"`
}

// Name words and what they suggest. A word is a part of the tool's name
// split at '-', '_', '.' and lower-to-upper case changes.
var (
	consequentialWords = map[string]string{
		"refund": "moves money", "pay": "moves money", "payment": "moves money", "payout": "moves money",
		"charge": "moves money", "transfer": "moves money", "withdraw": "moves money", "purchase": "moves money",
		"buy": "moves money", "wire": "moves money", "invoice": "moves money", "debit": "moves money", "credit": "moves money",
		"delete": "deletes data", "remove": "deletes data", "destroy": "deletes data", "drop": "deletes data",
		"purge": "deletes data", "erase": "deletes data", "wipe": "deletes data", "truncate": "deletes data",
		"revoke": "takes access away", "terminate": "stops something", "cancel": "cancels something", "close": "changes state",
		"send": "sends a message", "email": "sends a message", "mail": "sends a message", "sms": "sends a message",
		"notify": "sends a message", "post": "publishes", "publish": "publishes", "message": "sends a message",
		"reply": "sends a message", "invite": "sends a message", "tweet": "publishes",
		"provision": "creates resources", "deploy": "changes production", "launch": "creates resources",
		"create": "creates something", "book": "commits to something", "order": "commits to something",
		"submit": "commits to something", "approve": "grants something", "grant": "grants access",
		"execute": "runs something", "exec": "runs something", "run": "runs something", "shell": "runs something",
		"write": "writes data", "update": "changes data", "modify": "changes data", "set": "changes data",
		"insert": "writes data", "upsert": "writes data", "move": "changes data", "rename": "changes data",
		"restart": "disrupts a service", "shutdown": "disrupts a service", "scale": "changes production",
	}
	readWords = map[string]bool{
		"get": true, "list": true, "read": true, "search": true, "find": true, "lookup": true, "fetch": true,
		"describe": true, "show": true, "query": true, "view": true, "count": true, "check": true, "status": true,
		"echo": true, "ping": true, "resolve": true, "validate": true, "preview": true, "estimate": true,
	}
	// Schema members (property names, lower-cased, without '_' and '-')
	// and what they suggest.
	schemaMembers = map[string]string{
		"amount": "an amount", "amountcents": "an amount", "price": "an amount", "cost": "an amount",
		"total": "an amount", "sum": "an amount", "currency": "a currency",
		"iban": "a bank account", "accountnumber": "a bank account", "cardnumber": "a card", "card": "a card",
		"recipient": "a recipient", "recipients": "a recipient", "to": "a recipient", "cc": "a recipient",
		"bcc": "a recipient", "email": "an email address", "emailaddress": "an email address",
		"phone": "a phone number", "phonenumber": "a phone number", "destination": "a destination",
		"payee": "a recipient", "beneficiary": "a recipient",
	}
)

var wordSplit = regexp.MustCompile(`[-_.\s]+|([a-z0-9])([A-Z])`)

// words splits a tool name into lower-case words.
func words(name string) []string {
	spaced := wordSplit.ReplaceAllString(name, "$1 $2")
	return strings.Fields(strings.ToLower(spaced))
}

// Classify is the scan's verdict on t. Rules, in order:
//
//  1. read-only by the config (or the plugin): read_only.
//  2. a consequential signal — a name word such as refund, pay, delete,
//     send, transfer, provision; a schema member such as amount,
//     currency, recipient, email; an explicit destructiveHint: true —
//     makes it consequential, even when the MCP server says readOnlyHint
//     (a hint from a server the gateway does not control);
//  3. readOnlyHint from the server, with no such signal: read_only;
//  4. anything else is unknown: served mutating, with nothing that says
//     what it does (a POST, the MCP default hints and a read-like name
//     are reasons, not evidence).
func Classify(t Tool) Result {
	if t.ConfigReadOnly {
		return Result{Class: ReadOnly, Reasons: []string{"read_only in the config (or the plugin's Spec): the gateway runs it on every call, unrecorded"}}
	}
	var strong, weak []string
	for _, w := range words(t.Name) {
		if why, ok := consequentialWords[w]; ok {
			strong = append(strong, fmt.Sprintf("name word %q (%s)", w, why))
		} else if readWords[w] {
			weak = append(weak, fmt.Sprintf("name word %q reads like a read", w))
		}
	}
	strong = append(strong, schemaSignals(t.InputSchema)...)
	if t.HasMCP && t.MCP != nil {
		a := t.MCP
		switch {
		case a.DestructiveHint != nil && *a.DestructiveHint && !a.ReadOnlyHint:
			strong = append(strong, "MCP destructiveHint: true (the server's hint)")
		case a.DestructiveHint != nil && !*a.DestructiveHint && !a.ReadOnlyHint:
			weak = append(weak, "MCP destructiveHint: false (the server's hint): additive, not destructive")
		}
		if a.IdempotentHint && !a.ReadOnlyHint {
			weak = append(weak, "MCP idempotentHint: true (the server's hint)")
		}
		if a.OpenWorldHint == nil || *a.OpenWorldHint {
			weak = append(weak, "MCP openWorldHint true or absent (the MCP default): it may reach the world outside the server")
		}
	}
	if t.HasMCP && (t.MCP == nil || (!t.MCP.ReadOnlyHint && t.MCP.DestructiveHint == nil)) {
		weak = append(weak, "no readOnlyHint or destructiveHint: the MCP default is destructive")
	}
	if t.HTTPMethod != "" {
		weak = append(weak, fmt.Sprintf("HTTP upstream called with %s: a method that may change state", t.HTTPMethod))
	}
	readHint := t.HasMCP && t.MCP != nil && t.MCP.ReadOnlyHint
	switch {
	case len(strong) > 0:
		if readHint {
			strong = append(strong, "the server marks it readOnlyHint: true, which the gateway obeys (no key, no record), but a hint from a server you do not control is no proof: list it under mcp_servers[].tools only if you trust it")
		}
		return Result{Class: Consequential, Reasons: append(strong, weak...)}
	case readHint:
		return Result{Class: ReadOnly, Reasons: append([]string{"MCP readOnlyHint: true (the server's hint, served read-only)"}, weak...)}
	}
	reasons := append([]string{"served mutating, and nothing in its name, schema or hints says what it changes"}, weak...)
	return Result{Class: Unknown, Reasons: reasons}
}

// schemaSignals names the consequential members of a schema (any depth of
// properties), sorted.
func schemaSignals(schema json.RawMessage) []string {
	if len(schema) == 0 {
		return nil
	}
	var root any
	if err := json.Unmarshal(schema, &root); err != nil {
		return nil
	}
	found := map[string]string{}
	var walk func(v any, path string, depth int)
	walk = func(v any, path string, depth int) {
		obj, ok := v.(map[string]any)
		if !ok || depth > 8 {
			return
		}
		if props, ok := obj["properties"].(map[string]any); ok {
			for name, sub := range props {
				key := strings.NewReplacer("_", "", "-", "").Replace(strings.ToLower(name))
				if why := schemaMembers[key]; why != "" {
					found[path+"/"+name] = why
				} else if strings.HasPrefix(key, "amount") || strings.HasSuffix(key, "amount") {
					found[path+"/"+name] = "an amount"
				}
				if sm, ok := sub.(map[string]any); ok && sm["format"] == "email" {
					found[path+"/"+name] = "an email address"
				}
				walk(sub, path+"/"+name, depth+1)
			}
		}
		if items, ok := obj["items"]; ok {
			walk(items, path+"/*", depth+1)
		}
	}
	walk(root, "", 0)
	out := make([]string, 0, len(found))
	for p, why := range found {
		out = append(out, fmt.Sprintf("schema member %s (%s)", p, why))
	}
	sort.Strings(out)
	return out
}

// AmountMember returns the top-level schema member that looks like an
// amount ("" when none), for the suggested decide rule.
func AmountMember(schema json.RawMessage) string {
	var root struct {
		Properties map[string]json.RawMessage `json:"properties"`
	}
	if json.Unmarshal(schema, &root) != nil {
		return ""
	}
	var names []string
	for name := range root.Properties {
		key := strings.NewReplacer("_", "", "-", "").Replace(strings.ToLower(name))
		if strings.Contains(key, "amount") || key == "price" || key == "total" || key == "cost" {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	if len(names) == 0 {
		return ""
	}
	return names[0]
}
