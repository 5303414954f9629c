package tools

import (
	"fmt"
	"sort"
	"sync"
)

// The plugin registry is the one piece of global state in the gateway: it is
// what lets a plugin add itself from init with a blank import, the way
// database/sql drivers do.
var (
	globalMu    sync.Mutex
	globalTools = make(map[string]Tool)
)

// Register makes t available to gateways built from Registered. Call it from
// a plugin package's init. It panics, naming the tool, when t is nil, its name
// is invalid, or another tool already registered the name: those are
// programming errors that must stop the binary at start-up. The schema is
// compiled later, when the gateway adds the tool to its Registry (config may
// replace it).
func Register(t Tool) {
	if t == nil {
		panic("tools: Register called with a nil Tool")
	}
	name := t.Spec().Name
	if err := checkName(name); err != nil {
		panic("tools: Register: " + err.Error())
	}
	globalMu.Lock()
	defer globalMu.Unlock()
	if _, taken := globalTools[name]; taken {
		panic(fmt.Sprintf("tools: Register: tool %q registered twice", name))
	}
	globalTools[name] = t
}

// Registered returns every tool passed to Register, sorted by name.
func Registered() []Tool {
	globalMu.Lock()
	defer globalMu.Unlock()
	names := make([]string, 0, len(globalTools))
	for name := range globalTools {
		names = append(names, name)
	}
	sort.Strings(names)
	out := make([]Tool, len(names))
	for i, name := range names {
		out[i] = globalTools[name]
	}
	return out
}
