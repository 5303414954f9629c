// Package builtin holds the example tools a gateway serves out of the box:
// echo (smoke tests), provision-infra (allocates a resource, honours fencing
// tokens) and the read-only lookup-resource. Importing the package registers
// them with tools.Register.
//
// Their state (resources, fencing tokens, execution counts) lives in memory
// and grows with use: they are examples and test fixtures, not a product.
package builtin

import (
	"encoding/json"
	"fmt"

	"github.com/toolgateway/toolgateway/schemas"
	"github.com/toolgateway/toolgateway/tools"
)

// The bundled tools' names.
const (
	EchoName           = "echo"
	ProvisionInfraName = "provision-infra"
	LookupResourceName = "lookup-resource"
)

// Set is one independent instance of the bundled tools: provision-infra and
// lookup-resource share its inventory, and all three count their executions
// in it. Tests that need isolation build their own Set and add its Tools to
// their own tools.Registry.
type Set struct {
	inventory *Inventory
	counter   *Counter
	tools     []tools.Tool
}

// NewSet returns fresh bundled tools with empty state.
func NewSet() *Set {
	s := &Set{inventory: NewInventory(), counter: NewCounter()}
	s.tools = []tools.Tool{
		&echoTool{counter: s.counter},
		&lookupTool{counter: s.counter, inventory: s.inventory},
		&provisionTool{counter: s.counter, inventory: s.inventory},
	}
	return s
}

// Tools returns the set's tools, sorted by name.
func (s *Set) Tools() []tools.Tool {
	return append([]tools.Tool(nil), s.tools...)
}

// Executions reports how many times the set's tool called name has run.
func (s *Set) Executions(name string) int64 {
	return s.counter.Total(name)
}

// ExecutionsForKey reports how many times the set's tool called name has
// run for the idempotency key; tests running in parallel each use their own
// keys, so this count is theirs alone.
func (s *Set) ExecutionsForKey(name, idempotencyKey string) int64 {
	return s.counter.ForKey(name, idempotencyKey)
}

// Inventory returns the resources provisioned through the set.
func (s *Set) Inventory() *Inventory {
	return s.inventory
}

// registered is the Set whose tools init registers globally.
var registered = NewSet()

func init() {
	for _, t := range registered.tools {
		tools.Register(t)
	}
}

// Registered returns the Set whose tools this package registered with
// tools.Register, the ones a gateway built from tools.Registered serves.
func Registered() *Set {
	return registered
}

// Executions reports how many times the registered bundled tool called name
// has run in this process.
func Executions(name string) int64 {
	return registered.Executions(name)
}

// ExecutionsForKey reports how many times the registered bundled tool called
// name has run for idempotencyKey in this process.
func ExecutionsForKey(name, idempotencyKey string) int64 {
	return registered.ExecutionsForKey(name, idempotencyKey)
}

// bundledSchema returns the embedded schema of a bundled tool. The files are
// compiled into the binary, so a missing one is a build mistake.
func bundledSchema(name string) json.RawMessage {
	raw, err := schemas.Load(name)
	if err != nil {
		panic(fmt.Sprintf("builtin: %v", err))
	}
	return raw
}
