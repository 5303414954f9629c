// Command ticketgateway is a gateway binary with the open-ticket plugin
// compiled in: the whole of a custom build is this file.
package main

import (
	"github.com/toolgateway/toolgateway/gateway/gatewaycmd"

	// Each blank import registers its tools from init.
	_ "example.com/acme/ticketgateway/ticket"
	// The bundled example tools (echo, provision-infra, lookup-resource);
	// drop this import to serve only your own.
	_ "github.com/toolgateway/toolgateway/tools/builtin"
)

func main() {
	gatewaycmd.Main()
}
