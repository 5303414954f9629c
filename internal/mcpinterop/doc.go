// Package mcpinterop holds the interoperability tests of the gateway with
// MCP software it does not control. everything/ pins the reference server
// @modelcontextprotocol/server-everything (package.json and its lock file);
// its tests front that server as an MCP upstream over stdio and over
// Streamable HTTP. They need `npm ci` in everything/ (CI does it in .ci/run)
// and skip, saying so, when its node_modules is missing.
package mcpinterop
